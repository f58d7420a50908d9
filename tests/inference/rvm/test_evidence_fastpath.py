"""The speed paths of the fast evidence optimiser against the plain ones they replace."""

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from sparsebayes.inference import fit
from sparsebayes.inference.rvm.evidence import SequentialSparseBayes
from sparsebayes.inference.rvm.widths import default_width_bounds
from sparsebayes.models import GaussianKernel, NumericalWarning, RVMRegression


def random_problem(seed, n=60, m=30):
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n, m))
    w = np.where(rng.random(m) < 0.3, rng.standard_normal(m), 0.0)
    return Phi, Phi @ w + 0.3 * rng.standard_normal(n)


@pytest.mark.parametrize("seed", range(4))
def test_flat_prior_is_the_limit_of_the_gamma_prior(seed):
    """With a rate b > 0 exclusion is never optimal (T01 App. A: the alphas stay large but
    finite), so a near-flat Gamma prior (a = b = 1e-16) keeps every basis; its fit is the
    flat-prior fit in the limit: the same posterior mean function, and the bases the flat
    prior prunes have gamma_i ~ 0: their optimum is alpha ~ sqrt((S - Q^2) / 2b) ~ 1e8, so
    the two agree to ~1e-7."""
    Phi, t = random_problem(seed)
    flat = SequentialSparseBayes(Phi, t, np.full(t.size, 4.0))
    near = SequentialSparseBayes(Phi, t, np.full(t.size, 4.0), 1e-16, 1e-16)
    assert flat.flat and not near.flat
    for state in (flat, near):
        for _ in range(5000):
            if state.step(1e-10)[2]:
                break
        state.recompute()
    assert len(near.active) == Phi.shape[1]
    f_flat = Phi[:, flat.active] @ flat.mu
    f_near = Phi[:, near.active] @ near.mu
    np.testing.assert_allclose(f_near, f_flat, rtol=0, atol=1e-6 * np.abs(f_flat).max())
    gamma = dict(zip(near.active, near.gamma(), strict=True))
    pruned = set(range(Phi.shape[1])) - set(flat.active)
    assert pruned and max(gamma[i] for i in pruned) < 1e-5  # gamma ~ S / alpha


def test_symmetric_kernel_block_products_and_fit_equal_the_plain_ones():
    """BLAS symv on the symmetric kernel block gives Phi^T v and the same fit as gemv."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-5, 5, (150, 2))
    t = np.sinc(np.linalg.norm(X, axis=1) / np.pi) + 0.1 * rng.standard_normal(150)
    problem = RVMRegression(X, t, kernel=GaussianKernel(2.0))
    Phi = problem.design_matrix()
    b = np.full(t.size, 50.0)
    sym = SequentialSparseBayes(Phi, t, b, symmetric_block=(1, 151))
    plain = SequentialSparseBayes(Phi, t, b)
    v = rng.standard_normal(t.size)
    np.testing.assert_allclose(sym.products.T_dot(v), Phi.T @ v, rtol=1e-12, atol=1e-12)
    for _ in range(300):
        a1, g1, d1 = sym.step()
        a2, g2, d2 = plain.step()
        assert a1 == a2 and g1 == pytest.approx(g2, rel=1e-6, abs=1e-10)
        if d1 or d2:
            break
    assert d1 and d2 and sorted(sym.active) == sorted(plain.active)
    assert sym.log_evidence() == pytest.approx(plain.log_evidence(), rel=1e-10)
    with pytest.raises(ValueError, match="symmetric_block"):
        SequentialSparseBayes(Phi, t, b, symmetric_block=(0, 150))


def test_default_width_bounds_against_brute_force_distances():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 3, (40, 2))
    X = np.vstack([X, X[:3]])  # duplicates do not count as neighbours
    D = cdist(X, X)
    D[D == 0] = np.inf
    lo, hi = default_width_bounds(X)[0]
    assert lo == pytest.approx(np.median(D.min(axis=1)[:40]), rel=1e-12)
    assert hi == pytest.approx(100 * np.linalg.norm(np.ptp(X, axis=0)), rel=1e-12)
    # ARD: the joint-space floor of tests/test_widths_ard.py, not each input's own spacing
    assert default_width_bounds(np.ones((5, 1))) is None


def test_learned_width_stays_within_width_bounds():
    x = np.linspace(-10, 10, 80)[:, None]
    t = np.sinc(x[:, 0] / np.pi) + 0.05 * np.random.default_rng(0).standard_normal(80)
    free = fit(RVMRegression(x, t, kernel=GaussianKernel(3.0), learn_width=True), seed=0)
    w_free = float(free.attrs["width"][0])
    # a box that excludes the free optimum: without the bounds the width would leave it
    box = (1.2 * w_free, 1.5 * w_free) if w_free < 3.0 else (w_free / 1.5, w_free / 1.2)
    start = 0.5 * (box[0] + box[1])
    post = fit(RVMRegression(x, t, kernel=GaussianKernel(start), learn_width=True), seed=0,
               width_bounds=box)
    w = float(post.attrs["width"][0])
    assert box[0] * (1 - 1e-9) <= w <= box[1] * (1 + 1e-9)
    for bad in [(0.0, 1.0), (2.0, 1.0), (1.0, np.inf), "wide", (1.0,), ((1.0, 2.0, 3.0),)]:
        with pytest.raises(ValueError, match="width_bounds"):
            fit(RVMRegression(x, t, kernel=GaussianKernel(3.0), learn_width=True),
                width_bounds=bad)


def test_data_width_bounds_stop_the_degenerate_small_width_fit():
    """Pure noise (true beta = 1): the free width search runs below the input spacing to the
    degenerate optimum (noise at its floor, every point kept; see test_sklearn); with
    ``width_bounds="data"`` the width stops at the median nearest-neighbour distance."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 4)), rng.standard_normal(60)
    r0 = float(np.sqrt(np.sum(np.var(X, axis=0))))
    lo = default_width_bounds(X)[0, 0]
    problem = RVMRegression(X, y, kernel=GaussianKernel(r0), learn_width=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "the noise estimate hit its floor", NumericalWarning)
        free = fit(problem, "evidence")
    assert free.attrs["width"][0] < lo and float(free["gaussian_posterior"]["beta"]) > 1e4
    bounded = fit(problem, "evidence", width_bounds="data")
    assert bounded.attrs["width"][0] >= lo * (1 - 1e-9)
    assert 0.3 < float(bounded["gaussian_posterior"]["beta"]) < 5
    assert bounded.attrs["n_relevant"] < 40
