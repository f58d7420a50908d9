"""The negative-binomial RVM (over-dispersed counts): its dispersion learned by type-II ML
and by NUTS, its Poisson limit, its predictive, replicates, prior draws and leave-one-out,
each against an independent reference (the truth of simulated data, the Poisson RVM,
quadrature, refits)."""

import numpy as np
import pytest
from scipy import integrate, stats

from sparsebayes.inference import add_posterior_predictive, fit, loo, predict
from sparsebayes.inference.families import family_of
from sparsebayes.inference.predictive.regression import design
from sparsebayes.inference.rvm.counts import CountPredictive
from sparsebayes.inference.rvm.laplace import laplace_posterior
from sparsebayes.models import GaussianKernel, RVMNegativeBinomialRegression, RVMPoissonRegression
from sparsebayes.models.negative_binomial import NegativeBinomial

R_TRUE = 2.0


def nb_counts(n, seed=0, r=R_TRUE):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-5, 5, n))[:, None]
    rate = np.exp(1.5 + np.sin(X[:, 0]))
    return X, rng.negative_binomial(r, r / (r + rate)), rate


@pytest.fixture(scope="module")
def nb300():
    X, t, rate = nb_counts(300)
    problem = RVMNegativeBinomialRegression(X, t, kernel=GaussianKernel(1.5))
    return problem, fit(problem, "evidence", seed=0), rate


def _recovered(post, X, rate):
    """(dispersion, relative RMS error of the predictive mean rate, variance / mean of the
    replicates): what the issue asks of each method."""
    d = float(np.mean(post["posterior"]["dispersion"].values))
    rel = np.sqrt(np.mean((predict(post, X).mean / rate - 1) ** 2))
    rep = add_posterior_predictive(post, seed=1)["posterior_predictive"]["t"].values
    return d, rel, rep.var() / rep.mean()


def test_evidence_recovers_dispersion_rate_and_overdispersion(nb300):
    problem, post, rate = nb300
    d, rel, ratio = _recovered(post, problem.X, rate)
    assert 1 < d < 4 and rel < 0.2 and ratio > 1.4
    assert post["posterior"]["dispersion"].dims == ("chain", "draw")
    assert post.attrs["likelihood"] == "negative_binomial"
    # the evidence prefers it to the Poisson RVM on these over-dispersed counts
    poisson = fit(RVMPoissonRegression(problem.X, problem.t, kernel=GaussianKernel(1.5)))
    assert post.attrs["log_evidence"] > poisson.attrs["log_evidence"] + 50


def _held_at(monkeypatch, r, problem):
    """The evidence fit with the dispersion held in a tiny interval around ``r``."""
    monkeypatch.setattr(NegativeBinomial, "log_bounds",
                        {"dispersion": (np.log(r) - 1e-9, np.log(r) + 1e-9)})
    return fit(problem, "evidence", seed=0)


def test_learned_dispersion_maximises_the_laplace_evidence(nb300, monkeypatch):
    problem, post, _ = nb300
    r = float(post["posterior"]["dispersion"].values.flat[0])
    best = post.attrs["log_evidence"]
    for factor in (0.8, 1.25):
        held = _held_at(monkeypatch, factor * r, problem)
        assert abs(held["posterior"]["dispersion"].values.flat[0] / (factor * r) - 1) < 1e-6
        assert held.attrs["log_evidence"] < best - 0.05


def test_a_very_large_dispersion_is_the_poisson_rvm(monkeypatch):
    """At r = 1e7 the negative binomial is the Poisson to ~mu^2 / r: the same fit (log
    evidence, relevance vectors, weights)."""
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(-5, 5, 150))[:, None]
    t = rng.poisson(np.exp(1 + np.sin(X[:, 0])))
    kw = {"kernel": GaussianKernel(1.5)}
    ref = fit(RVMPoissonRegression(X, t, **kw), "evidence", seed=0)
    nb = _held_at(monkeypatch, 1e7, RVMNegativeBinomialRegression(X, t, **kw))
    assert abs(nb.attrs["log_evidence"] - ref.attrs["log_evidence"]) < 1e-3
    np.testing.assert_array_equal(nb["posterior"]["basis"].values,
                                  ref["posterior"]["basis"].values)
    np.testing.assert_allclose(nb["gaussian_posterior"]["mu"].values,
                               ref["gaussian_posterior"]["mu"].values, rtol=1e-3, atol=1e-4)


def test_predictive_is_the_negative_binomial_mixed_over_a_gaussian_f():
    """logpdf, cdf, mean and variance of ``int NB(t | e^f, r) N(f | m, v) df`` against
    adaptive quadrature."""
    m, v, r = np.array([0.3, 2.0]), np.array([0.2, 0.5]), 1.7
    lik = NegativeBinomial(np.zeros(0), dispersion=r)
    pred = CountPredictive(m, v, likelihood=lik)
    counts = np.array([2, 11])

    def expect(g, i):
        return integrate.quad(lambda f: g(f) * stats.norm.pdf(f, m[i], np.sqrt(v[i])),
                              m[i] - 12 * np.sqrt(v[i]), m[i] + 12 * np.sqrt(v[i]))[0]

    def nb(f):
        return stats.nbinom(r, r / (r + np.exp(f)))

    for i in range(2):
        k = counts[i]
        assert abs(pred.logpdf(counts)[i] - np.log(expect(lambda f, k=k: nb(f).pmf(k), i))) \
            < 1e-8
        assert abs(pred.cdf(counts)[i] - expect(lambda f, k=k: nb(f).cdf(k), i)) < 1e-8
        mean = expect(np.exp, i)
        var = expect(lambda f: np.exp(f) + np.exp(2 * f) / r + np.exp(2 * f), i) - mean**2
        assert abs(pred.mean[i] / mean - 1) < 1e-10 and abs(pred.var[i] / var - 1) < 1e-10


def test_prior_predictive_draws_the_dispersion_from_its_prior():
    """At ``f = 0`` the prior predictive has mean 1 and variance ``1 + E[1/r] = 1 + E[u^2]
    = 2`` for ``u = 1 / sqrt(r) ~ HalfNormal(1)`` (law of total variance)."""
    family = family_of("negative_binomial")
    w = np.zeros((1, 200_000, 3))
    t = family.draw_targets(np.ones((1, 3)), w, None, np.random.default_rng(0))
    assert abs(t.mean() - 1) < 0.01 and abs(t.var() - 2) < 0.1


def test_cavity_loo_against_refits_at_fixed_alpha_and_dispersion(nb300):
    """LA-LOO (Vehtari et al. 2016) against the Laplace posterior refitted without the point
    at the same alpha and dispersion, with its predictive at the point."""
    problem, post, _ = nb300
    cav = family_of(post).optimistic_loo(post)
    Phi = design(post, problem.X)
    alpha = post["gaussian_posterior"]["alpha"].values
    r = float(post["posterior"]["dispersion"].values.flat[0])
    for n in (0, 75, 150, 299):
        keep = np.arange(problem.t.size) != n
        lap = laplace_posterior(Phi[keep], None, alpha,
                                lik=NegativeBinomial(problem.t[keep], dispersion=r))
        m, v = Phi[n] @ lap.theta, Phi[n] @ lap.Sigma @ Phi[n]
        lik = NegativeBinomial(problem.t[[n]], dispersion=r)
        ref = CountPredictive(np.array([m]), np.array([v]), likelihood=lik)
        assert abs(cav[n] - ref.logpdf(problem.t[[n]])[0]) < 2e-3


def test_exact_loo_refits_learn_the_dispersion_again():
    """Exact LOO refits cold (each refit learns its own dispersion: no warm refits hold the
    full-data one) and lands near the cavity approximation."""
    X, t, _ = nb_counts(40, seed=5)
    post = fit(RVMNegativeBinomialRegression(X, t, kernel=GaussianKernel(1.5)), "evidence",
               seed=0)
    assert family_of(post).warm_refits["evidence"] is None
    exact = loo(post, "refit", progressbar=False)
    cav = loo(post, "cavity", progressbar=False)
    assert np.isfinite(exact.elpd) and abs(exact.elpd - cav.elpd) < 0.1 * abs(exact.elpd)


@pytest.mark.slow
def test_nuts_recovers_dispersion_rate_and_overdispersion():
    X, t, rate = nb_counts(300)
    problem = RVMNegativeBinomialRegression(X, t, kernel=GaussianKernel(1.5), centres=30)
    post = fit(problem, "nuts", seed=0)  # NUTS's defaults converge
    d, rel, ratio = _recovered(post, X, rate)
    assert 1 < d < 4 and rel < 0.2 and ratio > 1.4
    assert post.attrs["max_rhat"] <= 1.01 and post.attrs["n_divergent"] == 0
    # the latent models' default low-rank mass matrix: mean tree depth 3.9 here, against
    # 8.3 with a diagonal one (benchmarks/results/nuts_adaptation.md)
    assert post.attrs["adaptation"] == "low_rank"
    assert float(post["sample_stats"]["tree_depth"].mean()) < 6
