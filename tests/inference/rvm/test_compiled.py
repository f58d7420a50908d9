"""The compiled inner loops (inference/compiled.py) against independent numpy/SciPy
references: the Bernoulli Laplace mode against SciPy's optimiser of the penalised
log-likelihood (T01 eq. 24) and the log evidence by ``slogdet`` (PRML 7.114); the exact
recomputation against an explicit inverse (TF03 eqs. 24-25); the per-step proposals
against TF03 eqs. (18), (20)-(21) written out in numpy, with the Laplace policy (floor,
damping, tabu); the App. A.3 update against a recomputation."""

import numpy as np
from scipy import optimize
from scipy.special import log_expit

from sparsebayes.inference.rvm import compiled
from sparsebayes.inference.rvm.sequential import Policy, SequentialSparseBayes
from sparsebayes.inference.testing import laplace_mode
from sparsebayes.models import GaussianKernel, RVMClassification, datasets
from sparsebayes.models.likelihoods import Bernoulli


def _design(n=80, seed=4):
    X, y = datasets.ripley_mixture(n, seed=seed)
    Phi = RVMClassification(X, y, kernel=GaussianKernel(0.5)).design_matrix()
    return Phi / np.linalg.norm(Phi, axis=0), y


def test_bernoulli_mode_matches_scipy_and_slogdet():
    Phi, y = _design()
    cols = np.array([0, 5, 17, 40, 63])
    P = Phi[:, cols]
    alpha = np.array([0.3, 2.0, 0.05, 1.0, 10.0])
    lap = laplace_mode(P, np.zeros(cols.size, int), Bernoulli(y), alpha)
    sign = 2 * y - 1

    def neg_psi(w):
        f = P @ w
        grad = P.T @ (y - 1 / (1 + np.exp(-f))) - alpha * w
        return -(log_expit(sign * f).sum() - 0.5 * w @ (alpha * w)), -grad

    ref = optimize.minimize(neg_psi, np.zeros(cols.size), jac=True, method="BFGS",
                            options={"gtol": 1e-11})
    np.testing.assert_allclose(lap.theta, ref.x, rtol=1e-6, atol=1e-8)
    assert lap.converged
    yhat = 1 / (1 + np.exp(-P @ lap.theta))
    H = P.T @ ((yhat * (1 - yhat))[:, None] * P) + np.diag(alpha)
    ev = (log_expit(sign * (P @ lap.theta)).sum() + 0.5 * np.log(alpha).sum()
          - 0.5 * lap.theta @ (alpha * lap.theta) - 0.5 * np.linalg.slogdet(H)[1])
    np.testing.assert_allclose(lap.log_evidence, ev, rtol=1e-12)
    np.testing.assert_allclose(lap.Sigma, np.linalg.inv(H), rtol=1e-9, atol=1e-12)


def _random_state(policy=None):
    Phi, y = _design()
    b = np.random.default_rng(0).uniform(0.05, 0.25, Phi.shape[0])
    t = np.random.default_rng(1).normal(size=Phi.shape[0]) * 3
    state = SequentialSparseBayes(Phi, t, b, policy=policy or Policy(), refresh_after_step=False)
    for _ in range(8):
        state.step(1e-6)
    return state, Phi, t, b


def test_recompute_matches_explicit_inverse():
    state, Phi, t, b = _random_state()
    act = np.asarray(state.active)
    state.recompute()
    Pa = Phi[:, act]
    Sigma = np.linalg.inv(Pa.T @ (b[:, None] * Pa) + np.diag(state.alpha))
    np.testing.assert_allclose(state.Sigma, Sigma, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(state.mu, Sigma @ Pa.T @ (b * t), rtol=1e-9, atol=1e-12)
    C = Phi.T @ (b[:, None] * Pa)  # TF03 eqs. 24-25
    np.testing.assert_allclose(state.S, np.einsum("nm,nm,n->m", Phi, Phi, b)
                               - np.einsum("mi,ij,mj->m", C, Sigma, C), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.Q, Phi.T @ (b * t) - C @ Sigma @ (Pa.T @ (b * t)),
                               rtol=1e-9, atol=1e-12)


def test_reestimate_update_matches_recompute():
    state, *_ = _random_state()
    j, i = 0, state.active[0]
    state.reestimate(i, state.alpha[j] * 3.0)
    got = (state.Sigma.copy(), state.mu.copy(), state.S.copy(), state.Q.copy())
    state.recompute()
    for a, b in zip(got, (state.Sigma, state.mu, state.S, state.Q), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_flat_proposals_match_tf03_in_numpy():
    """Eqs. (20)-(21) then the floor and the damped log step, and the gain of eq. (18),
    for excluded candidates (``Q^2 > S``) and in-model bases (``s = 1/Sigma_jj - alpha``,
    ``q = mu_j / Sigma_jj``); a tabu candidate may not switch, an aligned one gains nothing."""
    policy = Policy(alpha_min=0.5, damped=True)
    state, *_ = _random_state(policy)
    act = np.asarray(state.active)
    policy.damp[int(act[0])] = (0.25, 1.0)
    policy._lam = None
    excluded = np.flatnonzero(state.excluded)
    policy.tabu = {int(excluded[0]), int(act[-1])}
    state.aligned = {int(excluded[1]): int(act[0])}
    new, gain, cur = state.proposals()

    def ell(a, s, q):
        return np.where(np.isfinite(a), 0.5 * (np.log(a / (a + s)) + q**2 / (a + s)), 0.0)

    M = state.S.size
    s, q = state.S.copy(), state.Q.copy()
    d = np.diag(state.Sigma)
    s[act], q[act] = 1 / d - state.alpha, state.mu / d
    c = np.full(M, np.inf)
    c[act] = state.alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(q**2 > s, s**2 / (q**2 - s), np.inf)
        p = np.where(np.isfinite(p) & (p < 0.5), 0.5, p)
        lam = np.ones(M)
        lam[act[0]] = 0.25
        damped = np.isfinite(p) & np.isfinite(c) & (lam < 1)
        p[damped] = c[damped] * (p[damped] / c[damped]) ** 0.25
        addable = state.excluded & (state.S > 1e-12 * state.diag) & (q**2 > s)
        p[state.excluded & ~addable] = np.inf
        g = ell(p, s, q) - ell(c, s, q)
    g[np.isinf(p) & np.isinf(c)] = -np.inf
    g[excluded[1]] = -np.inf
    for k in policy.tabu:
        if np.isfinite(p[k]) != np.isfinite(c[k]):
            g[k] = -np.inf
    np.testing.assert_array_equal(cur, c)
    np.testing.assert_allclose(new, p, rtol=1e-12)
    np.testing.assert_allclose(gain, g, rtol=1e-10, atol=1e-14)
    choice = state.decide(new, gain, cur, 1e-6)
    assert choice is None or choice[0] == int(np.argmax(g))


def test_scalar_formulas():
    """TF03 eq. (18) at its eq. (20) maximiser beats nearby alphas; eq. (21) excludes."""
    s, q = 0.7, 1.3
    a = compiled.flat_alpha(s, q)
    assert np.isclose(a, s**2 / (q**2 - s))
    for other in (a * 0.9, a * 1.1):
        assert compiled.objective(a, s, q, 0.0, 0.0) > compiled.objective(other, s, q, 0.0, 0.0)
    assert np.isinf(compiled.flat_alpha(1.0, 0.5))
    assert compiled.objective(np.inf, s, q, 0.0, 0.0) == 0.0
