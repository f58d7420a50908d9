"""Learned per-input widths from a GP's type-II ML (``widths_from_gp``, the default for one
width per input): the widths are the GP's length scales (Gaussian convolution identity, by
quadrature), the GP is the exact one up to ``GP_EXACT_MAX`` points (scikit-learn's
``GaussianProcessRegressor`` log marginal likelihood at its hyperparameters) and Titsias's
sparse GP above (the public sparse ``GPRegression`` fit), the RVM's reported evidence is
T01 eq. (15) at the widths returned, Friedman #1 as in Tipping (2001) §4.4.1."""

import numpy as np
import pytest
from conftest import dense_rbf_log_evidence, friedman1
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from sparsebayes.inference import fit, predict
from sparsebayes.inference.rvm import widths
from sparsebayes.models import GaussianKernel, GPRegression, RVMRegression
from sparsebayes.models.problems import kmeans_centres


def gp_route_fit(X, t, **kw):
    return fit(RVMRegression(X, t, kernel=GaussianKernel(np.full(X.shape[1], 2.0)),
                             learn_width=True), "evidence", seed=0, draws=10, chains=1, **kw)


def test_gaussian_width_gives_the_gp_covariance_of_that_length_scale():
    """``sum_c phi_c(x) phi_c(x')`` over a dense grid of centres, ``phi_c(x) = exp(-(x -
    c)^2 / r^2)``, is ``exp(-(x - x')^2 / (2 l^2))`` times a constant at ``l`` =
    ``width_from_length_scale``'s inverse: the trapezoidal sum against the SE covariance."""
    length_scale = 0.7
    r = float(GaussianKernel(1.0).width_from_length_scale(np.array([length_scale]))[0])
    c = np.linspace(-15, 15, 6001)
    x = np.linspace(-2, 2, 9)
    Phi = np.exp(-((x[:, None] - c[None, :]) ** 2) / r**2)
    implied = Phi @ Phi.T
    se = np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * length_scale**2))
    np.testing.assert_allclose(implied / implied[0, 0], se, rtol=1e-9, atol=1e-12)


def test_small_n_takes_the_exact_gps_length_scales():
    """N <= GP_EXACT_MAX: the widths are the exact GP's length scales (inside the default
    bounds), its log marginal likelihood is scikit-learn's at the same hyperparameters, and
    no other GP has a higher one from scikit-learn's own optimiser (to 0.05 nats)."""
    X, t, _, _ = friedman1(0, n=150)
    X = X[:, :4]
    post = gp_route_fit(X, t, width_bounds=[(1e-2, 1e4)] * 4)
    a = post.attrs
    assert a["width_route"] == "gp" and a["width_route_inducing"] == 0
    assert a["width_rounds"] == 0 and a["learn_width"] == 1
    ref = fit(GPRegression(X, t - t.mean()), "evidence", seed=0, restarts=1)
    ls = ref["posterior"]["length_scale"].values.reshape(-1, 4)[0]
    np.testing.assert_allclose(a["width"], ls, rtol=1e-10)
    sf = float(ref["posterior"]["signal_sd"].values.ravel()[0])
    sn = float(ref["posterior"]["noise_sd"].values.ravel()[0])
    kernel = ConstantKernel(sf**2) * RBF(ls) + WhiteKernel(sn**2)
    sk = GaussianProcessRegressor(kernel, optimizer=None, normalize_y=False).fit(X, t - t.mean())
    assert a["width_route_log_evidence"] == pytest.approx(sk.log_marginal_likelihood_value_,
                                                          abs=1e-8)
    free = GaussianProcessRegressor(ConstantKernel() * RBF(np.ones(4)) + WhiteKernel(),
                                    random_state=0).fit(X, t - t.mean())
    assert a["width_route_log_evidence"] >= free.log_marginal_likelihood_value_ - 0.05


def test_large_n_takes_the_sparse_gps_length_scales(monkeypatch):
    """Above GP_EXACT_MAX: Titsias's bound on GP_INDUCING k-means inducing inputs (here 120
    points over a limit of 100, 30 inducing inputs), the widths its length scales clipped to
    the bounds, its bound reported."""
    monkeypatch.setattr(widths, "GP_EXACT_MAX", 100)
    monkeypatch.setattr(widths, "GP_INDUCING", 30)
    X, t, _, _ = friedman1(1, n=120)
    X = X[:, :3]
    bounds = [(0.5, 50.0)] * 3
    post = gp_route_fit(X, t, width_bounds=bounds)
    a = post.attrs
    assert a["width_route"] == "sparse-gp" and a["width_route_inducing"] == 30
    ref = fit(GPRegression(X, t - t.mean(), inducing=kmeans_centres(X, 30)), "evidence",
              seed=0, restarts=1)
    ls = ref["posterior"]["length_scale"].values.reshape(-1, 3)[0]
    np.testing.assert_allclose(a["width"], np.clip(ls, 0.5, 50.0), rtol=1e-10)
    assert a["width_route_log_evidence"] == pytest.approx(ref.attrs["log_evidence"], rel=1e-12)


def test_reported_evidence_is_eq15_at_the_widths_returned():
    """The RVM's log evidence is T01 eq. (15) at the widths, relevance vectors, alpha and
    noise it returns: ``N(t | 0, beta^-1 I + Phi A^-1 Phi^T)`` by SciPy, the design rebuilt
    with scikit-learn's ``rbf_kernel`` on inputs scaled by 1 / width."""
    X, t, _, _ = friedman1(2, n=100)
    post = gp_route_fit(X[:, :3], t)
    direct = dense_rbf_log_evidence(post)
    assert post.attrs["log_evidence"] == pytest.approx(direct, abs=1e-6)


def test_friedman1_reproduces_tipping_441():
    """Tipping (2001) §4.4.1 (eta-RVM, Friedman #1, 240 points): test MSE 0.27 with 11.5
    vectors against 2.80 for one width chosen by cross-validation. The GP's widths on the
    first three data sets: mean test MSE below 0.4 (three times the paper's fixed-width
    error below it) with 8-20 vectors, the five irrelevant inputs' widths (geometric mean)
    at least 10 times the relevant ones'."""
    mses, ratios = [], []
    for seed in range(3):
        X, t, U, f = friedman1(seed)
        post = gp_route_fit(X, t)
        mses.append(float(np.mean((predict(post, U).mean - f) ** 2)))
        assert 8 <= post["posterior"].sizes["basis"] <= 20
        w = np.log(post.attrs["width"])
        ratios.append(np.exp(w[5:].mean() - w[:5].mean()))
    assert np.mean(mses) < 0.4, mses
    assert min(ratios) >= 10, ratios


def test_widths_from_gp_needs_one_width_per_input():
    X, t, _, _ = friedman1(0, n=60)
    problem = RVMRegression(X[:, :2], t, kernel=GaussianKernel(2.0), learn_width=True)
    with pytest.raises(ValueError, match="widths_from_gp=True .* one width per input"):
        fit(problem, "evidence", widths_from_gp=True)
    with pytest.raises((TypeError, ValueError), match="widths_from_gp"):
        fit(problem, "evidence", widths_from_gp="yes")
    post = fit(problem, "evidence", seed=0, draws=10, chains=1)  # one width: the rounds
    assert post.attrs["width_route"] == "evidence"
