"""Variational RVM (Bishop & Tipping 2000)."""

import numpy as np
import pytest
import xarray as xr
from scipy import integrate, stats

from sparsebayes.inference import fit, predict
from sparsebayes.inference.rvm.vrvm import vrvm, vrvm_bound
from sparsebayes.models import GammaPrior, GaussianKernel, RVMRegression


def sinc(n=100, sd=0.1, seed=0):
    """Tipping App. E: n evenly spaced points in [-10, 10], Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = np.linspace(-10, 10, n)[:, None]
    return X, np.sinc(X[:, 0] / np.pi) + sd * rng.standard_normal(n)


@pytest.fixture(scope="module")
def sinc_problem():
    X, t = sinc()
    return RVMRegression(X, t, kernel=GaussianKernel(3.0))


def _moments(Phi, t, mu, Sigma):
    G = Phi.T @ Phi
    r = t - Phi @ mu
    return r @ r + np.sum(G * Sigma), mu**2 + np.diag(Sigma)


@pytest.mark.parametrize("prior", [GammaPrior(1e-3, 1e-3, 1e-3, 1e-3), GammaPrior(1, 0.1, 2, 0.01),
                                   GammaPrior()])
def test_bound_never_decreases(sinc_problem, prior):
    """Between sweeps on the same bases (the flat prior's bound, with its normalisers
    dropped, changes with the number of bases when one is pruned)."""
    p = sinc_problem
    st = vrvm(p.design_matrix(), p.t, prior, max_iter=800)
    same = np.diff(st.n_active) == 0
    steps = np.diff(st.bound)[same]
    assert steps.min() >= -1e-9 * np.abs(st.bound).max(), steps.min()
    first = st.bound[st.n_active == st.n_active[0]]  # the sweeps before the first pruning
    assert first[-1] > first[0] + 1.0


def test_flat_prior_pruning_ends_at_a_fixed_point_of_the_sweeps(sinc_problem, monkeypatch):
    """With the flat prior, bases whose alpha update diverges are pruned (Tipping & Faul
    2003's q^2 <= s). The end is a fixed point of the plain sweeps: every kept alpha equals
    its update 1 / (mu_i^2 + Sigma_ii), and every pruned basis has q_j^2 <= s_j against the
    final q(w) (T&F eqs. 21-22, computed here from the dense design matrix). Plain coordinate
    ascent, which only creeps towards that limit, agrees on the relevant bases
    (gamma_i = 1 - <alpha_i> Sigma_ii > 0.01) and the predictive mean, in a sixth of the
    sweeps or fewer."""
    from sparsebayes.inference.rvm import vrvm as vrvm_module

    p = sinc_problem
    Phi, t = p.design_matrix(), p.t
    fast = vrvm(Phi, t, GammaPrior(), max_iter=20000)
    assert fast.converged
    np.testing.assert_allclose(fast.alpha_mean, 1 / (fast.mu**2 + np.diag(fast.Sigma)),
                               rtol=1e-2)
    out = np.setdiff1d(np.arange(Phi.shape[1]), fast.active)
    beta, Pa, Po = fast.beta_mean, Phi[:, fast.active], Phi[:, out]
    C = np.eye(t.size) / beta + Pa @ np.diag(1 / fast.alpha_mean) @ Pa.T
    s = np.einsum("ij,ji->i", Po.T, np.linalg.solve(C, Po))
    q = Po.T @ np.linalg.solve(C, t)
    assert out.size > 0 and np.all(q**2 <= s * (1 + 1e-2))

    monkeypatch.setattr(vrvm_module, "SETTLED", 0.0)
    plain = vrvm(Phi, t, GammaPrior(), max_iter=20000)
    assert plain.active.size == Phi.shape[1] and fast.n_iter < plain.n_iter / 6
    gamma = 1 - plain.alpha_mean * np.diag(plain.Sigma)
    assert set(plain.active[gamma > 0.01]) == set(fast.active)
    mean_fast, mean_plain = Pa @ fast.mu, Phi @ plain.mu
    assert np.max(np.abs(mean_fast - mean_plain)) < 0.05 * np.std(t)


def test_bound_fixed_noise_never_decreases(sinc_problem):
    p = RVMRegression(sinc_problem.X, sinc_problem.t, kernel=GaussianKernel(3.0), noise_sd=0.1)
    st = vrvm(p.design_matrix(), p.t, GammaPrior(1e-2, 1e-2), noise_sd=0.1, max_iter=500)
    assert np.diff(st.bound).min() >= -1e-9 * np.abs(st.bound).max()
    assert st.beta_mean == pytest.approx(100.0)


def test_bound_closed_form_equals_monte_carlo():
    """Closed-form bound (§3) vs a Monte Carlo estimate of E_q[ln p(t,w,alpha,beta) - ln q]
    with scipy densities, at a q that is NOT the optimum (an arbitrary point)."""
    rng = np.random.default_rng(3)
    N, M = 15, 3
    Phi = rng.standard_normal((N, M))
    t = Phi @ np.array([1.0, 0.0, -0.5]) + 0.3 * rng.standard_normal(N)
    prior = GammaPrior(0.7, 0.4, 1.3, 0.2)
    mu = np.array([0.8, 0.1, -0.3])
    Lr = np.tril(rng.standard_normal((M, M))) * 0.1 + np.eye(M) * 0.2
    Sigma = Lr @ Lr.T
    a_t, b_t = 1.2, np.array([0.5, 2.0, 0.9])
    c_t, d_t = 8.0, 0.9
    E_D, w2 = _moments(Phi, t, mu, Sigma)
    closed = vrvm_bound(N, prior, E_D=E_D, w2=w2, logdet_Sigma=np.linalg.slogdet(Sigma)[1],
                        a_t=a_t, b_t=b_t, c_t=c_t, d_t=d_t)
    S = 200_000
    w = rng.multivariate_normal(mu, Sigma, S)
    alpha = rng.gamma(a_t, 1 / b_t, (S, M))
    beta = rng.gamma(c_t, 1 / d_t, S)
    logp = (stats.norm.logpdf(t, w @ Phi.T, 1 / np.sqrt(beta)[:, None]).sum(1)
            + stats.norm.logpdf(w, 0, 1 / np.sqrt(alpha)).sum(1)
            + stats.gamma.logpdf(alpha, prior.a, scale=1 / prior.b).sum(1)
            + stats.gamma.logpdf(beta, prior.c, scale=1 / prior.d))
    logq = (stats.multivariate_normal.logpdf(w, mu, Sigma)
            + stats.gamma.logpdf(alpha, a_t, scale=1 / b_t).sum(1)
            + stats.gamma.logpdf(beta, c_t, scale=1 / d_t))
    terms = logp - logq
    se = terms.std() / np.sqrt(S)
    assert abs(terms.mean() - closed) < 4 * se, (terms.mean(), closed, se)


def test_bound_below_log_marginal_likelihood():
    """At convergence the bound lies below ln p(t) = ln of the integral of
    N(t | 0, C(alpha, beta)) p(alpha) p(beta) (eq. 15 with the Gamma hyperpriors, eq. 6),
    computed by 3-D quadrature on a two-basis problem, and within a small gap of it."""
    rng = np.random.default_rng(7)
    N = 12
    Phi = np.column_stack([np.ones(N), np.linspace(-1, 1, N)])
    t = Phi @ np.array([0.5, 1.0]) + 0.3 * rng.standard_normal(N)
    prior = GammaPrior(2.0, 1.0, 3.0, 0.3)
    st = vrvm(Phi, t, prior, max_iter=5000, tol=1e-12)
    assert st.converged

    # tensor-product trapezoid rule in (log alpha_1, log alpha_2, log beta); the
    # Jacobian of the log transform is the "+ u" term
    u = np.linspace(-8.0, 7.0, 121)
    v = np.linspace(-2.0, 5.0, 81)
    U1, U2, V = np.meshgrid(u, u, v, indexing="ij")
    a1, a2, beta = np.exp(U1).ravel(), np.exp(U2).ravel(), np.exp(V).ravel()
    C = (np.eye(N)[None] / beta[:, None, None]
         + np.einsum("nm,sm,km->snk", Phi, 1 / np.column_stack([a1, a2]), Phi))
    L = np.linalg.cholesky(C)
    z = np.linalg.solve(L, np.broadcast_to(t, (a1.size, N))[..., None])[..., 0]
    loglik = (-0.5 * np.sum(z**2, 1) - np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), 1)
              - 0.5 * N * np.log(2 * np.pi))
    logf = (loglik + stats.gamma.logpdf(a1, prior.a, scale=1 / prior.b) + U1.ravel()
            + stats.gamma.logpdf(a2, prior.a, scale=1 / prior.b) + U2.ravel()
            + stats.gamma.logpdf(beta, prior.c, scale=1 / prior.d) + V.ravel())
    peak = logf.max()
    F = np.exp(logf - peak).reshape(U1.shape)
    val = integrate.trapezoid(integrate.trapezoid(integrate.trapezoid(F, v), u), u)
    # the integrand is negligible at the edges of the box
    assert F[[0, -1]].max() < 1e-8 and F[:, [0, -1]].max() < 1e-8 and F[..., [0, -1]].max() < 1e-8
    log_pt = np.log(val) + peak
    # the stored bound is for the last sweep; recompute it for the returned factors
    E_D, w2 = _moments(Phi, t, st.mu, st.Sigma)
    bound = vrvm_bound(N, prior, E_D=E_D, w2=w2, logdet_Sigma=np.linalg.slogdet(st.Sigma)[1],
                       a_t=st.a_tilde, b_t=st.b_tilde, c_t=st.c_tilde, d_t=st.d_tilde)
    assert bound <= log_pt + 1e-6
    assert log_pt - bound < 1.0, (log_pt, bound)


def test_flat_prior_limit_approaches_evidence(sinc_problem):
    """As a..d -> 0 the VRVM fixed point is Tipping's EM fixed point (eqs. 48, 50), i.e. the
    type-II ML solution: its predictive mean Phi mu approaches the evidence method's."""
    p = sinc_problem
    ev = fit(p, "evidence", seed=0)
    f_ev = predict(ev, p.X, kind="rvm").mean
    beta_ev = float(ev["gaussian_posterior"]["beta"])
    gaps = []
    for eps in (1e-1, 1e-3, 0.0):
        st = vrvm(p.design_matrix(), p.t, GammaPrior(eps, eps, eps, eps), max_iter=5000)
        f = p.design_matrix()[:, st.active] @ st.mu
        gaps.append(np.max(np.abs(f - f_ev)))
        if eps == 0.0:
            assert st.beta_mean == pytest.approx(beta_ev, rel=0.02)
    assert gaps[-1] < gaps[0]
    assert gaps[-1] < 0.02  # stated tolerance: 20% of the noise sd (function range 1.2)


def test_fit_vrvm_layout_and_roundtrip(sinc_problem, tmp_path):
    post = fit(sinc_problem, "vrvm", seed=2, draws=100, chains=2)
    assert post.attrs["method"] == "vrvm" and post.attrs["converged"] == 1
    for v in ("w", "alpha", "beta", "noise_sd"):
        assert v in post["posterior"]
    assert post["posterior"]["w"].dims == ("chain", "draw", "basis")
    assert post["log_likelihood"]["t"].dims == ("chain", "draw", "obs")
    assert "elbo" in post["sample_stats"]
    assert 3 <= post.attrs["n_relevant"] <= 20
    pred = predict(post, sinc_problem.X, kind="rvm")
    f = np.sinc(sinc_problem.X[:, 0] / np.pi)
    assert np.sqrt(np.mean((pred.mean - f) ** 2)) < 0.06
    path = tmp_path / "vrvm.nc"
    post.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf").load()
    xr.testing.assert_identical(back["posterior"].to_dataset(), post["posterior"].to_dataset())
    xr.testing.assert_identical(back["gaussian_posterior"].to_dataset(),
                                post["gaussian_posterior"].to_dataset())
    assert back.attrs["elbo"] == post.attrs["elbo"]


def test_fit_vrvm_bad_input(sinc_problem):
    with pytest.raises(ValueError, match="draws"):
        fit(sinc_problem, "vrvm", draws=0)
    with pytest.raises(TypeError, match="prior"):
        fit(sinc_problem, "vrvm", prior=(1, 1, 1, 1))


def test_one_sweep_warns_that_it_did_not_converge():
    """max_iter=1 leaves one bound value: the warning says so (it used to be an IndexError)
    and the result is the first sweep's, finite."""
    from sparsebayes.inference import fit
    from sparsebayes.models import ConvergenceWarning, GaussianKernel, RVMRegression

    x = np.linspace(-10, 10, 50)
    problem = RVMRegression(x[:, None], np.sinc(x / np.pi), GaussianKernel(3.0))
    with pytest.warns(ConvergenceWarning, match="a single sweep"):
        post = fit(problem, "vrvm", max_iter=1)
    assert post.attrs["converged"] == 0
    assert np.isfinite(post["posterior"]["w"].values).all()
