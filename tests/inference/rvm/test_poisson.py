"""The Poisson RVM (count data): ``t_n ~ Poisson(exp(f_n))``, ``f = Phi w``, ``w_i ~ N(0,
1/alpha_i)`` (T01 §3's Laplace scheme with a Poisson likelihood; PRML §7.2.3). Every number
against an independent reference: SciPy's optimiser and quadrature, scikit-learn's Poisson
GLM, SciPy's Poisson distribution, PyMC's own Poisson with the RVMLatent prior."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.linear_model import PoissonRegressor

from sparsebayes.inference import fit, predict
from sparsebayes.inference.loo import loo
from sparsebayes.inference.predictive.regression import design
from sparsebayes.inference.rvm import counts as poisson
from sparsebayes.inference.rvm.laplace import laplace_posterior
from sparsebayes.models import GaussianKernel, NumericalWarning, RVMPoissonRegression
from sparsebayes.models.likelihoods import Poisson


def sine_counts(n: int, seed: int = 0):
    """1-D counts with the rate ``exp(1 + sin x)`` on [-5, 5]."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-5, 5, n))[:, None]
    rate = np.exp(1 + np.sin(X[:, 0]))
    return X, rng.poisson(rate), rate


@pytest.fixture(scope="module")
def sine200():
    X, t, rate = sine_counts(200)
    problem = RVMPoissonRegression(X, t, kernel=GaussianKernel(1.5))
    return problem, poisson.fit_evidence(problem, seed=0), rate


def penalised_objective(Phi, t, alpha):
    """Minus ``sum_n (t_n f_n - e^f_n) - 1/2 w^T A w`` and its gradient (T01 eq. 24's
    objective with the Poisson likelihood)."""
    def fun(w):
        f = Phi @ w
        lam = np.exp(f)
        return (-(t @ f - lam.sum()) + 0.5 * w @ (alpha * w),
                -(Phi.T @ (t - lam)) + alpha * w)
    return fun


# ---- the Laplace approximation at fixed alpha ------------------------------------------------


def test_laplace_mode_matches_scipy_minimize():
    rng = np.random.default_rng(1)
    Phi = rng.normal(size=(40, 5)) * 0.5
    t = rng.poisson(np.exp(Phi @ rng.normal(size=5) + 1.0))
    alpha = np.array([0.1, 1.0, 3.0, 0.5, 10.0])
    lap = laplace_posterior(Phi, None, alpha, lik=Poisson(t))
    ref = optimize.minimize(penalised_objective(Phi, t, alpha), np.zeros(5), jac=True,
                            method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(lap.theta, ref.x, atol=1e-7)
    # the covariance: the inverse of the objective's Hessian by finite differences of the
    # gradient (T01 eq. 26 with B = e^f)
    grad = lambda w: penalised_objective(Phi, t, alpha)(w)[1]
    H = np.array([optimize.approx_fprime(lap.theta, lambda w, i=i: grad(w)[i], 1e-6)
                  for i in range(5)])
    np.testing.assert_allclose(lap.Sigma, np.linalg.inv(H), rtol=1e-4, atol=1e-8)


def test_mode_equals_scikit_learn_poisson_glm():
    """sklearn's ``PoissonRegressor`` minimises ``1/(2n) deviance + a/2 |w|^2``, i.e. our
    objective with ``A = n a I`` divided by n."""
    rng = np.random.default_rng(2)
    n = 60
    Phi = np.column_stack([np.ones(n), rng.normal(size=(n, 3))])
    t = rng.poisson(np.exp(Phi @ np.array([1.0, 0.5, -0.3, 0.2])))
    a = 0.01
    lap = laplace_posterior(Phi, None, np.full(4, n * a), lik=Poisson(t))
    glm = PoissonRegressor(alpha=a, fit_intercept=False, tol=1e-12, max_iter=1000,
                           solver="newton-cholesky").fit(Phi, t)
    np.testing.assert_allclose(lap.theta, glm.coef_, atol=1e-6)


def test_laplace_evidence_against_quadrature():
    """The Laplace log evidence (PRML 7.114) against ``ln int p(t|w) N(w|0, A^-1) dw`` by
    adaptive 2-D quadrature: the approximation error is O(1/N), below 0.01 nats here."""
    rng = np.random.default_rng(3)
    n = 400
    Phi = np.column_stack([np.ones(n), rng.uniform(-1, 1, n)])
    t = rng.poisson(np.exp(Phi @ np.array([1.5, 0.7])))
    alpha = np.array([0.2, 2.0])
    lap = laplace_posterior(Phi, None, alpha, lik=Poisson(t))
    lik = Poisson(t)

    def log_joint(w):
        prior = stats.norm.logpdf(w, 0, 1 / np.sqrt(alpha)).sum()
        return lik.loglik((Phi @ w)[:, None]).sum() + prior

    top = log_joint(lap.theta)
    sd = np.sqrt(np.diag(lap.Sigma))
    lo, hi = lap.theta - 10 * sd, lap.theta + 10 * sd
    val, _ = integrate.dblquad(lambda b, a: np.exp(log_joint(np.array([a, b])) - top),
                               lo[0], hi[0], lo[1], hi[1], epsabs=0, epsrel=1e-8)
    assert abs(lap.log_evidence - (top + np.log(val))) < 0.01


# ---- type-II ML -----------------------------------------------------------------------------


def test_recovers_known_rate(sine200):
    problem, post, rate = sine200
    assert post.attrs["converged"] == 1
    assert post.attrs["problem_kind"] == "poisson" and post.attrs["likelihood"] == "poisson"
    pred = poisson.RVM_POISSON.predict_kinds["laplace"](post, problem.X)
    rel = np.sqrt(np.mean((pred.mean - rate) ** 2) / np.mean(rate**2))
    assert rel < 0.15
    assert post.attrs["n_relevant"] < 20  # sparse


def test_fit_is_the_mode_at_its_alpha_by_scikit_learn(sine200):
    """The result's ``mu`` is the penalised Poisson GLM on its relevant columns at its alpha:
    scikit-learn's ``PoissonRegressor`` (uniform penalty) on the columns rescaled by
    ``sqrt(n / alpha_i)``, so that its penalty is ``sum_i alpha_i w_i^2 / 2``."""
    problem, post, _ = sine200
    g = post["gaussian_posterior"]
    alpha, mu = g["alpha"].values, g["mu"].values
    Phi = design(post, problem.X)
    n = Phi.shape[0]
    scale = np.sqrt(n / alpha)
    glm = PoissonRegressor(alpha=1.0, fit_intercept=False, tol=1e-12, max_iter=1000,
                           solver="newton-cholesky").fit(Phi * scale, problem.t)
    np.testing.assert_allclose(glm.coef_ * scale, mu, rtol=1e-5, atol=1e-6)


def test_fast_and_mackay_reach_the_same_fit(sine200):
    """Two algorithms for the same Laplace type-II ML (TF03 on the surrogate; T01 eq. 16):
    the fast one reaches at least MacKay's evidence (they may stop at different local
    maxima: here MacKay's run keeps no bias), and both recover the rate."""
    problem, post, rate = sine200
    with pytest.warns(UserWarning, match="did not converge"):  # slow drift to pruning
        mk = poisson.fit_mackay(problem, seed=0, max_iter=300)
    assert post.attrs["log_evidence"] > mk.attrs["log_evidence"] - 0.1
    for res in (post, mk):
        m = poisson.RVM_POISSON.predict_kinds["laplace"](res, problem.X).mean
        assert np.sqrt(np.mean((m - rate) ** 2) / np.mean(rate**2)) < 0.15


def test_mackay_fixed_point_at_convergence(sine200):
    """At the type-II ML optimum of the surrogate, T01 eq. 16: ``alpha_i mu_i^2 = gamma_i =
    1 - alpha_i Sigma_ii`` for every relevant weight."""
    _, post, _ = sine200
    g = post["gaussian_posterior"]
    alpha, mu, Sigma = g["alpha"].values, g["mu"].values, g["Sigma"].values
    gamma = 1 - alpha * np.diag(Sigma)
    np.testing.assert_allclose(alpha * mu**2, gamma, rtol=0.05)


# ---- the predictive -------------------------------------------------------------------------


def test_predictive_pmf_against_quadrature_and_moments():
    m, v = np.array([0.3, 2.0, -1.0]), np.array([0.2, 0.05, 1.0])
    pred = poisson.CountPredictive(m, v)
    k = np.arange(0, 1000)
    pmf = np.exp([pred.logpdf(np.full(3, j)) for j in k])  # (K, 3)
    np.testing.assert_allclose(pmf.sum(axis=0), 1.0, atol=1e-10)
    for i in range(3):
        for j in (0, 1, 4, 12):
            ref, _ = integrate.quad(lambda f, i=i, j=j: stats.poisson.pmf(j, np.exp(f))
                                    * stats.norm.pdf(f, m[i], np.sqrt(v[i])), -30, 30,
                                    epsabs=1e-14, limit=200)
            np.testing.assert_allclose(pmf[j, i], ref, rtol=1e-6, atol=1e-14)
    # closed-form lognormal moments against the pmf's moments
    np.testing.assert_allclose(pred.mean, np.exp(m + v / 2), rtol=1e-12)
    np.testing.assert_allclose(pred.mean, k @ pmf, rtol=1e-8)
    np.testing.assert_allclose(pred.var, (k**2) @ pmf - (k @ pmf) ** 2, rtol=1e-6)


def test_interval_is_the_count_quantiles():
    pred = poisson.CountPredictive(np.array([0.3, 2.0, 4.0]), np.array([0.2, 0.05, 0.5]))
    lo, hi = pred.interval(0.9)
    cdf = np.cumsum(np.exp([pred.logpdf(np.full(3, j)) for j in range(400)]), axis=0)
    for i in range(3):
        assert cdf[int(lo[i]), i] >= 0.05 and (lo[i] == 0 or cdf[int(lo[i]) - 1, i] < 0.05)
        assert cdf[int(hi[i]), i] >= 0.95 and cdf[int(hi[i]) - 1, i] < 0.95


def test_samples_predictive_is_the_poisson_mixture(sine200):
    problem, post, _ = sine200
    X = problem.X[:7]
    pred = poisson.RVM_POISSON.predict_kinds["samples"](post, X, max_draws=50)
    w = post["posterior"]["w"].values.reshape(-1, post["posterior"]["w"].shape[-1])
    w = w[np.linspace(0, w.shape[0] - 1, 50).round().astype(int)]
    lam = np.exp(w @ design(post, X).T)
    t = problem.t[:7]
    ref = np.log(np.mean(stats.poisson.pmf(t, lam), axis=0))
    np.testing.assert_allclose(pred.logpdf(t), ref, rtol=1e-10)
    np.testing.assert_allclose(pred.mean, lam.mean(axis=0), rtol=1e-12)


def test_predict_through_fit_and_predict(sine200):
    problem, _, rate = sine200
    post = fit(problem, "evidence", seed=0)
    pred = predict(post, problem.X)
    assert pred.kind == "laplace"
    rel = np.sqrt(np.mean((pred.mean - rate) ** 2) / np.mean(rate**2))
    assert rel < 0.15


# ---- leave-one-out --------------------------------------------------------------------------


def test_cavity_loo_against_refits_at_fixed_alpha(sine200):
    """LA-LOO (Vehtari et al. 2016) against the Laplace posterior refitted without the point
    at the same alpha, with its predictive at the point."""
    problem, post, _ = sine200
    cav = poisson.RVM_POISSON.optimistic_loo(post)
    Phi = design(post, problem.X)
    alpha = post["gaussian_posterior"]["alpha"].values
    for n in (0, 50, 120, 199):
        keep = np.arange(problem.t.size) != n
        lap = laplace_posterior(Phi[keep], None, alpha, lik=Poisson(problem.t[keep]))
        m, v = Phi[n] @ lap.theta, Phi[n] @ lap.Sigma @ Phi[n]
        ref = poisson.CountPredictive(np.array([m]), np.array([v])).logpdf(problem.t[[n]])
        assert abs(cav[n] - ref[0]) < 2e-3


def test_loo_front_refit_and_cavity():
    X, t, _ = sine_counts(40, seed=5)
    post = fit(RVMPoissonRegression(X, t, kernel=GaussianKernel(1.5)), "evidence", seed=0)
    exact = loo(post, "refit", progressbar=False)
    cav = loo(post, "cavity", progressbar=False)
    assert np.isfinite(exact.elpd) and np.isfinite(cav.elpd)
    assert abs(exact.elpd - cav.elpd) < 0.1 * abs(exact.elpd)


# ---- replicates and the PyMC model ----------------------------------------------------------


def test_posterior_predictive_counts(sine200):
    problem, _, _ = sine200
    post = fit(problem, "evidence", seed=0, draws=200, posterior_predictive=True)
    reps = post["posterior_predictive"]["t"].values
    assert reps.dtype.kind == "i" and reps.min() >= 0
    pred = predict(post, problem.X)
    # the replicates' mean per point against the predictive mean (400 draws: MC error)
    se = np.sqrt(pred.var / reps[..., 0].size)
    assert np.mean(np.abs(reps.mean(axis=(0, 1)) - pred.mean) < 4 * se) > 0.95


@pytest.mark.usefixtures("pytensor_in_python")
def test_pymc_model_log_likelihood_is_poisson():
    pytest.importorskip("pymc")
    X, t, _ = sine_counts(20, seed=6)
    problem = RVMPoissonRegression(X, t, kernel=GaussianKernel(1.5))
    model = problem.pymc_model()
    rng = np.random.default_rng(0)
    point = model.initial_point()
    point["z"] = rng.normal(size=point["z"].shape)
    logp = model.compile_fn(model.logp(vars=[model["t"]], sum=True), inputs=model.value_vars)
    w = point["z"] / np.sqrt(np.exp(point["alpha_log__"]))
    ref = stats.poisson.logpmf(t, np.exp(problem.design_matrix() @ w)).sum()
    np.testing.assert_allclose(logp(point), ref, rtol=1e-10)


@pytest.mark.slow
def test_nuts_matches_rvm_latent_with_pymc_poisson():
    """``fit(problem, "nuts")`` (alpha integrated out, T01 eq. 32) against the joint model
    built by hand from :class:`RVMLatent` and PyMC's own ``pm.Poisson``, the same prior
    (``unit_scale_prior``): the posterior mean rates agree within Monte Carlo error."""
    import arviz as az
    import pymc as pm

    from sparsebayes.models import RVMLatent

    X, t, _ = sine_counts(30, seed=7)
    kernel = GaussianKernel(1.5)
    problem = RVMPoissonRegression(X, t, kernel=kernel, centres=10)
    post = fit(problem, "nuts", seed=1, draws=1000, chains=2, progressbar=False)
    Phi = design(post, X)
    rate_a = np.exp(post["posterior"]["w"].values @ Phi.T)  # (chain, draw, n)

    rvm = RVMLatent(kernel, centres=problem.centres)
    with pm.Model():
        f = rvm.prior("f", X)
        pm.Poisson("y", mu=pm.math.exp(f), observed=t)
        idata = pm.sample(1000, tune=1000, chains=2, random_seed=2, progressbar=False,
                          target_accept=0.95)
    rate_b = np.exp(idata.posterior["f"].values)
    for r in (rate_a, rate_b):
        assert r.shape[-1] == 30
    ess = lambda r: np.array([az.ess(r[..., i]) for i in range(r.shape[-1])])
    se = np.sqrt(rate_a.var(axis=(0, 1)) / ess(rate_a) + rate_b.var(axis=(0, 1)) / ess(rate_b))
    diff = np.abs(rate_a.mean(axis=(0, 1)) - rate_b.mean(axis=(0, 1)))
    assert np.all(diff < 5 * se)


# ---- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("counts, message", [
    ([1, 2, -1, 3], "non-negative"),
    ([1, 2, 0.5, 3], "integers"),
    ([1, 2, np.nan, 3], "NaN"),
    ([1, 2, 3], "mismatched"),
])
def test_counts_are_checked(counts, message):
    X = np.arange(4.0)[:, None]
    with pytest.raises(ValueError, match=message) as err:
        RVMPoissonRegression(X, counts)
    assert "counts" in str(err.value)


def test_other_arguments_are_checked():
    X = np.arange(5.0)[:, None]
    with pytest.raises(TypeError, match="prior"):
        RVMPoissonRegression(X, [0, 1, 2, 3, 4], prior=3)
    with pytest.raises(ValueError, match="centres"):
        RVMPoissonRegression(X, [0, 1, 2, 3, 4], centres=9)
    problem = RVMPoissonRegression(X, np.array([0.0, 1, 2, 3, 4]))
    assert problem.t.dtype == np.int64 and problem.kind == "poisson"
    with pytest.raises(ValueError, match="max_iter"):
        poisson.fit_evidence(problem, max_iter=0)
    with pytest.raises(ValueError, match="likelihood"):
        problem.pymc_model(likelihood="bernoulli")
    with pytest.raises(ValueError, match="counts"):
        poisson.CountPredictive(np.zeros(2), np.ones(2)).logpdf([1, -2])


def test_width_gradient_of_the_laplace_evidence_by_finite_differences():
    """``d ln p(t|alpha) / d ln r`` for Gaussian columns ``exp(-(x - c)^2 / r^2)`` (T01 eqs.
    56-57 with the Laplace evidence; the Poisson's third derivative ``dB/df = e^f``) against
    SciPy's central finite differences of the Laplace evidence, written out by hand."""
    from sparsebayes.inference.rvm.laplace import laplace_width_gradient

    X, t, _ = sine_counts(60, seed=8)
    C = X[::6]
    alpha = np.full(C.shape[0], 0.5)
    lik = Poisson(t)
    cls = np.zeros(C.shape[0], int)

    def log_ev(log_r):
        Phi = np.exp(-np.exp(-2 * log_r[0]) * (X - C.T) ** 2)
        return laplace_posterior(Phi, None, alpha, lik=lik, gtol=1e-13).log_evidence

    log_r = np.array([np.log(1.6)])
    Phi = np.exp(-np.exp(-2 * log_r[0]) * (X - C.T) ** 2)
    lap = laplace_posterior(Phi, None, alpha, lik=lik, gtol=1e-13)
    grad = laplace_width_gradient(GaussianKernel(1.6), Phi, C, X, np.ones(C.shape[0], bool),
                                  cls, lik, lap)
    ref = optimize.approx_fprime(log_r, log_ev, 1e-6)
    np.testing.assert_allclose(grad, ref, rtol=1e-4)


@pytest.mark.parametrize("level", [-3.0, 8.0])
def test_small_and_large_rates(level):
    """Rates ``exp(level + sin x)`` from ~0.02 to ~8000: converged, and the predictive mean
    count at the training inputs within 3 standard errors of the observed mean count (at
    the mode of a Poisson GLM with an unpenalised bias the fitted rates sum to the counts)."""
    X, _, _ = sine_counts(80, seed=9)
    t = np.random.default_rng(9).poisson(np.exp(level + np.sin(X[:, 0])))
    post = poisson.fit_evidence(RVMPoissonRegression(X, t, kernel=GaussianKernel(1.5)))
    assert post.attrs["converged"] == 1
    pred = poisson.RVM_POISSON.predict_kinds["laplace"](post, X)
    assert abs(pred.mean.mean() - t.mean()) < 3 * np.sqrt(t.mean() / t.size)


def test_all_zero_counts_are_refused():
    """No finite maximum-likelihood log rate: refused when the problem is built (issue 46);
    the predictive still scores all-zero counts."""
    X = np.linspace(-3, 3, 30)[:, None]
    with pytest.raises(ValueError, match="counts are all zero: the log rate has no finite"):
        RVMPoissonRegression(X, np.zeros(30, int))
    assert np.isfinite(poisson.CountPredictive(np.zeros(3), np.ones(3)).logpdf([0, 0, 0])).all()


def test_counts_above_1e9_are_refused():
    """Beyond 1e9 the MacKay fit overflows exp (from ~1e10) and the fast one puts weights at
    the alpha floor: refused with the bound and the alternative in the message; 1e9 passes."""
    X = np.arange(4.0)[:, None]
    RVMPoissonRegression(X, [1, 2, 10**9, 3])
    with pytest.raises(ValueError, match=r"counts must be at most 1e\+09 for the Poisson RVM, "
                       r"got a maximum of 5e\+12.*RVMRegression to log\(counts\)"):
        RVMPoissonRegression(X, np.array([1, 2, 5, 3]) * 10**12)


def test_alpha_floor_warning_speaks_of_counts_not_classes():
    """Over-dispersed counts (Poisson draws x 1000) put weights at the alpha floor: the
    warning names the counts, not the classifier's "separable" classes."""
    X, t, _ = sine_counts(50, seed=0)
    with warnings.catch_warnings(record=True) as record:  # with jitter and max_iter notes
        warnings.simplefilter("always")
        poisson.fit_evidence(RVMPoissonRegression(X, t * 1000, kernel=GaussianKernel(1.5)),
                             max_iter=300)
    floor = [str(w.message) for w in record if w.category is NumericalWarning
             and "hit the floor" in str(w.message)]
    assert floor and all("counts are very large or vary more than the likelihood" in m
                         and "separable" not in m for m in floor)


def test_warm_refits_against_cold_refits():
    """The warm-started leave-one-out refits (the fit's loop from the full-data model on the
    other rows) against ``fit`` from scratch on the problem without the row: the same
    optimum, so the same log predictive of the count left out."""
    from sparsebayes.inference.loo import cold_refit_logpdf

    X, t, _ = sine_counts(60, seed=10)
    post = fit(RVMPoissonRegression(X, t, kernel=GaussianKernel(1.5)), "evidence", seed=0)
    folds = [np.array([i]) for i in (0, 17, 33, 59)]
    warm = poisson.RVM_POISSON.warm_refits["evidence"](post)
    cold, failed = cold_refit_logpdf(post, folds, progressbar=False)
    assert failed == 0
    for rows in folds:
        lp, converged = warm.fold(rows)
        assert converged
        np.testing.assert_allclose(lp, cold[rows], atol=0.02)
