"""The Laplace fast loop's bookkeeping (inference/laplace.py ``_run_fast``): the state is
moved to each new surrogate in place; the reference is a state built from scratch on that
surrogate (the core's own construction and exact recomputation, eqs. 24-25 of Tipping &
Faul 2003)."""

import numpy as np
import pytest

from sparsebayes.inference.laplace import (
    _Bernoulli,
    _Bounded,
    _Likelihood,
    _likelihood,
    _mode,
    _surrogate,
)
from sparsebayes.models import GaussianKernel, RVMClassification, datasets


def _problem(K):
    if K == 2:
        X, y = datasets.ripley_mixture(60, seed=3)
        width = 0.5
    else:
        rng = np.random.default_rng(1)
        X = np.vstack([rng.normal(c, 1.0, (15, 2)) for c in [(-2, 0), (2, 0), (0, 2.5)]])
        y = np.repeat(np.arange(3), 15)
        width = 1.0
    Phi = RVMClassification(X, y, kernel=GaussianKernel(width)).design_matrix()
    Phi /= np.linalg.norm(Phi, axis=0)
    return Phi, _likelihood(y, K, K > 2)


@pytest.mark.parametrize("K", [2, 3])
def test_relinearise_equals_a_state_built_on_the_new_surrogate(K):
    Phi, lik = _problem(K)
    N, M = Phi.shape
    n_out = lik.n_out
    cand_col = np.tile(np.arange(M), n_out)
    cand_cls = np.repeat(np.arange(n_out), M)
    state = _Bounded(*_surrogate(Phi, lik, np.zeros((N, n_out))), 0.0, 0.0, alpha_min=1e-6)
    for _ in range(6):  # a few adds / re-estimates on the first surrogate
        state.step(1e-6)
    act = np.asarray(state.active)
    lap = _mode(Phi[:, cand_col[act]], cand_cls[act], lik, state.alpha, state.mu)
    Phi_s, z, b = _surrogate(Phi, lik, lap.F)
    fresh = _Bounded(Phi_s, z, b, 0.0, 0.0, active=list(state.active),
                     alpha=state.alpha.copy(), alpha_min=1e-6)
    state.relinearise(Phi_s, z, b)
    assert state.active == fresh.active
    for name in ("diag", "PhiBt", "cross", "Sigma", "mu", "S", "Q"):
        np.testing.assert_allclose(getattr(state, name), getattr(fresh, name), rtol=1e-10,
                                   atol=1e-10, err_msg=name)
    # the surrogate posterior mean is the Laplace mode (T&F eq. 14 at the mode)
    np.testing.assert_allclose(state.mu, lap.theta, atol=1e-6)
    # and both take the same next action
    assert state.step(1e-6)[:2] == pytest.approx(fresh.step(1e-6)[:2])


@pytest.mark.parametrize("K", [2, 3])
def test_flat_proposals_equal_the_general_proposals(K):
    """The flat-prior proposals (adds from the excluded candidates, the bases in the model)
    are the numbers of the general path (``optimal_alpha`` and ``basis_objective`` for every
    candidate, then the floor, damping and tabu of ``_Bounded``), and give the same action."""
    Phi, lik = _problem(K)
    N = Phi.shape[0]
    state = _Bounded(*_surrogate(Phi, lik, np.zeros((N, lik.n_out))), 0.0, 0.0,
                     alpha_min=1e-6)
    assert state.flat
    for it in range(40):
        if it == 3:  # switch the safeguards on: floor, damping, tabu
            _, gain, cur = state.proposals()
            adds = np.flatnonzero(np.isfinite(gain) & np.isinf(cur))
            state.tabu = {state.active[-1], *adds[:3].tolist()}
            state.alpha_min = float(np.median(state.alpha))
            state.damp = {i: (0.25, 1.0) for i in state.active[::2]}
        general, flat = state.proposals(), state._flat_proposals()
        finite = np.isfinite(general[1])
        np.testing.assert_array_equal(finite, np.isfinite(flat[1]))
        for g, f in zip(general, flat, strict=True):
            np.testing.assert_array_equal(g[finite], f[finite])
        np.testing.assert_array_equal(general[2], flat[2])
        if it == 3:
            assert np.any(general[0][finite] == state.alpha_min)  # a floored proposal
            assert adds.size and np.all(np.isinf(general[1][adds[:3]]))  # tabu took effect
        assert state._decide(*general, 1e-6) == state._decide(*flat, 1e-6)
        if state.step(1e-6)[2]:
            break


class _GeneralBernoulli(_Bernoulli):
    """The Bernoulli likelihood through the general (K-output) Newton terms."""

    logits = _Likelihood.logits
    newton_terms = _Likelihood.newton_terms


@pytest.mark.parametrize("case", ["ripley", "warm", "separable", "max_iter"])
def test_bernoulli_mode_equals_the_general_newton_iteration(case):
    """The written-out Bernoulli Newton / IRLS iteration (eqs. 24-26) takes the same steps as
    the general one: the same iterations, mode, Cholesky factor and Laplace evidence."""
    rng = np.random.default_rng(2)
    if case == "separable":  # only the prior bounds w: step halving at work
        X = np.vstack([rng.normal((-3, -3), 0.5, (20, 2)), rng.normal((3, 3), 0.5, (20, 2))])
        y = np.repeat([0, 1], 20)
        alpha_scale = 1e-4
    else:
        X, y = datasets.ripley_mixture(80, seed=4)
        alpha_scale = 1.0
    Phi = RVMClassification(X, y, kernel=GaussianKernel(0.5)).design_matrix()
    cols = rng.choice(Phi.shape[1], 6, replace=False)
    alpha = alpha_scale * rng.uniform(0.05, 2.0, cols.size)
    cls = np.zeros(cols.size, int)
    theta0 = None if case != "warm" else rng.normal(size=cols.size)
    max_iter = 2 if case == "max_iter" else 100
    fast = _mode(Phi[:, cols], cls, _Bernoulli(y), alpha, theta0, max_iter=max_iter)
    ref = _mode(Phi[:, cols], cls, _GeneralBernoulli(y), alpha, theta0, max_iter=max_iter)
    assert (fast.n_iter, fast.converged) == (ref.n_iter, ref.converged)
    assert case != "max_iter" or not fast.converged
    for name in ("theta", "F", "L", "gradient"):
        np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), rtol=1e-12,
                                   atol=1e-12, err_msg=name)
    assert fast.log_evidence == pytest.approx(ref.log_evidence, rel=1e-13)
    assert fast.loglik == pytest.approx(ref.loglik, rel=1e-13)
