"""Learned per-input (ARD) widths on the model API: the default floor in the joint input space
(the one ``RVR`` uses), bounded rounds, the warning on the bound, the irrelevant input
switched off. References: scikit-learn's nearest neighbours (the floor), dense T01 eq. (15)
with SciPy and central differences (the width objective), the data's construction (which
input is relevant)."""

import numpy as np
import pytest
from scipy import stats
from sklearn.neighbors import NearestNeighbors

from sparsebayes.inference import fit
from sparsebayes.inference.rvm import evidence
from sparsebayes.inference.rvm.widths import default_width_bounds, estimator_ard_bounds
from sparsebayes.inference.testing import joint_objective
from sparsebayes.models import GaussianKernel, NumericalWarning, RVMRegression


def relevant_and_irrelevant(n=200, seed=0):
    """``t = sin(2 x1) + 0.1 eps``: input 1 relevant, input 2 pure noise (standardised)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def ard_problem(X, t, **kw):
    return RVMRegression(X, t, kernel=GaussianKernel(np.full(X.shape[1], 2.0)),
                         learn_width=True, **kw)


def test_default_ard_floor_is_the_joint_space_floor():
    """The default ARD lower bound is ``2 x`` the median distance to the nearest neighbour of
    ``X / sd`` in all inputs at once, times ``sd_k`` (scikit-learn's NearestNeighbors), the
    bound ``RVR`` uses: not the spacing of each input alone, which is far smaller."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 6)) * np.array([1, 2, 3, 0.5, 1, 10])
    sd = X.std(axis=0)
    dist = NearestNeighbors(n_neighbors=2).fit(X / sd).kneighbors(X / sd)[0][:, 1]
    floor = 2 * np.median(dist) * sd
    wb = default_width_bounds(X, ard=True)
    np.testing.assert_allclose(wb, estimator_ard_bounds(X), rtol=0)
    np.testing.assert_allclose(wb[:, 0], floor, rtol=1e-12)
    one_d = [np.median(NearestNeighbors(n_neighbors=2).fit(X[:, [k]])
                       .kneighbors(X[:, [k]])[0][:, 1]) for k in range(6)]
    assert np.all(wb[:, 0] > 50 * np.array(one_d))
    assert np.all(wb[:, 1] > 100 * wb[:, 0])
    assert default_width_bounds(np.ones((5, 3)), ard=True) is None


@pytest.mark.parametrize("noise_fixed", [False, True])
def test_joint_objective_is_eq15_and_its_gradient_matches_finite_differences(noise_fixed):
    """:func:`joint_objective` (a width round's step) with one width per input: its value
    is minus T01 eq. (15) of the columns (SciPy's dense Gaussian density), its gradient in
    ``ln r_k`` (App. C eqs. 53-57 through the chain rule), ``ln alpha`` and ``ln beta``
    (App. A eqs. 42, 45) equals central differences."""
    X, t = relevant_and_irrelevant(60, seed=1)
    basis = ard_problem(X, t).basis
    cols = np.array([0, 3, 10, 25, 40, 59])  # the bias and five kernel columns
    alpha = np.array([0.5, 2.0, 1.0, 3.0, 0.7, 1.5])
    beta = 30.0
    x0 = np.log(np.concatenate([[1.3, 4.0], alpha] + ([] if noise_fixed else [[beta]])))
    fixed = beta if noise_fixed else None
    value, grad = joint_objective(x0, basis, X, t, cols, 2, fixed)
    Phi = basis.with_kernel(GaussianKernel(np.exp(x0[:2]))).design(X, columns=cols)
    C = np.eye(t.size) / beta + (Phi / alpha) @ Phi.T
    assert -value == pytest.approx(stats.multivariate_normal(np.zeros(t.size), C).logpdf(t),
                                   rel=1e-10)
    h = 1e-5
    num = [(joint_objective(x0 + h * e, basis, X, t, cols, 2, fixed)[0]
            - joint_objective(x0 - h * e, basis, X, t, cols, 2, fixed)[0]) / (2 * h)
           for e in np.eye(x0.size)]
    np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-8)


def test_irrelevant_input_is_switched_off_in_bounded_rounds():
    """One relevant and one irrelevant input: the fit converges within the round limit
    (no warning: pyproject turns them into errors), the irrelevant width ends at least 10x
    the relevant one, both inside the default bounds, with few vectors."""
    X, t = relevant_and_irrelevant(200)
    post = fit(ard_problem(X, t), "evidence", seed=0, draws=10, chains=1,
               widths_from_gp=False)
    w = np.asarray(post.attrs["width"])
    lo, hi = default_width_bounds(X, ard=True).T
    assert 1 <= post.attrs["width_rounds"] < evidence.WIDTH_MAX_ROUNDS
    assert post.attrs["converged"] == 1
    assert w[1] >= 10 * w[0], w
    assert np.all(w >= lo * (1 - 1e-9)) and np.all(w <= hi * (1 + 1e-9))
    assert post.attrs["width_at_bound"] == 0
    assert post["posterior"].sizes["basis"] < t.size / 4


def test_width_on_the_floor_warns_and_is_counted():
    """Pure noise in 3 inputs: the evidence rises towards ever narrower bases (every point
    its own basis; test_sklearn shows the free fit there), so widths end on the default
    floor: a NumericalWarning naming it, ``width_at_bound`` the count, no width below it and
    the noise estimate near the truth (beta = 1) instead of at its floor."""
    rng = np.random.default_rng(0)
    X, t = rng.standard_normal((80, 3)), rng.standard_normal(80)
    lo = default_width_bounds(X, ard=True)[:, 0]
    with pytest.warns(NumericalWarning, match="ended on their lower bound") as rec:
        post = fit(ard_problem(X, t), "evidence", seed=0, draws=10, chains=1,
                   widths_from_gp=False)
    w = np.asarray(post.attrs["width"])
    on = int(np.sum(w <= lo * (1 + 1e-6)))
    assert on >= 1 and post.attrs["width_at_bound"] == on
    assert f"{on} learned kernel width" in str(rec[0].message)
    assert np.all(w >= lo * (1 - 1e-9))
    assert 0.3 < float(post["gaussian_posterior"]["beta"]) < 3


def test_round_limit_warns(monkeypatch):
    """A round limit reached before the evidence settles is reported, not silent."""
    X, t = relevant_and_irrelevant(120)
    monkeypatch.setattr(evidence, "WIDTH_MAX_ROUNDS", 1)
    with pytest.warns(NumericalWarning, match="still moving after max_rounds=1"):
        post = fit(ard_problem(X, t), "evidence", seed=0, draws=10, chains=1,
                   widths_from_gp=False)
    assert post.attrs["width_rounds"] == 1
