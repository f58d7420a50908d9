"""GP regression (SE-ARD): the closed forms against scikit-learn's GaussianProcessRegressor
and PyMC's pm.gp.Marginal, type-II ML against scikit-learn's optimiser, NUTS against
quadrature of the hyperparameter posterior."""

import numpy as np
import pytest
import xarray as xr
from scipy import optimize, stats
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from sparsebayes.inference import fit, predict
from sparsebayes.inference.gp.regression import (
    gp_moments,
    log_marginal_likelihood,
    pytensor_objective,
)
from sparsebayes.inference.testing import gp_regression_lml_and_grad
from sparsebayes.models import GPRegression


def ard_data(n=50, seed=0):
    """Three inputs: a smooth one, a rough one, an irrelevant one."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    t = np.sin(1.5 * X[:, 0]) + 0.5 * np.cos(3 * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, t - t.mean()


def sk_gpr(ls, sf, sn, **kw):
    """The same model in scikit-learn's conventions: ConstantKernel holds the signal
    *variance*, WhiteKernel the noise *variance*; alpha=0 so nothing else is added."""
    kernel = C(sf**2, "fixed") * RBF(ls, "fixed") + WhiteKernel(sn**2, "fixed")
    return GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None, **kw)


HYPERS = [(np.array([0.7, 1.5, 3.0]), 1.3, 0.2), (np.array([0.2, 0.3, 10.0]), 0.5, 0.05),
          (np.array([2.0, 2.0, 2.0]), 2.0, 1.0)]


@pytest.mark.parametrize("ls, sf, sn", HYPERS)
def test_lml_and_predictive_equal_sklearn(ls, sf, sn):
    X, t = ard_data()
    g = sk_gpr(ls, sf, sn).fit(X, t)
    assert log_marginal_likelihood(X, t, ls, sf, sn) == pytest.approx(
        g.log_marginal_likelihood_value_, abs=1e-8)
    post = fit(GPRegression(X, t, length_scale=ls, signal_sd=sf, noise_sd=sn), "evidence")
    assert post.attrs["log_marginal_likelihood"] == pytest.approx(
        g.log_marginal_likelihood_value_, abs=1e-8)
    assert post.attrs["log_evidence"] == post.attrs["log_marginal_likelihood"]
    Xn = np.random.default_rng(1).uniform(-3, 3, (30, 3))
    pred = predict(post, Xn)
    m, s = g.predict(Xn, return_std=True)  # sklearn's std includes the WhiteKernel noise
    np.testing.assert_allclose(pred.mean, m, rtol=0, atol=1e-8)
    np.testing.assert_allclose(pred.var, s**2, rtol=0, atol=1e-8)
    assert pred.kind == "gp"


def test_gradient_against_finite_differences():
    X, t = ard_data()
    Xc = X - X.mean(0)
    for ls, sf, sn in HYPERS:
        theta = np.log(np.concatenate([ls, [sf, sn]]))
        _, g = gp_regression_lml_and_grad(theta, Xc, t)
        fd = optimize.approx_fprime(
            theta, lambda th: gp_regression_lml_and_grad(th, Xc, t, grad=False), 1e-7)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("pytensor_in_python")
def test_closed_form_equals_pymc_marginal_model():
    """The same log marginal likelihood, gradient and predictive from the pm.gp.Marginal
    model (PyTensor) as from the closed form."""
    X, t = ard_data(n=30)
    problem = GPRegression(X, t)
    f = pytensor_objective(problem)
    Xc = X - X.mean(0)
    Xn = np.random.default_rng(3).uniform(-3, 3, (7, 3))
    model, gp = problem.pymc_model()
    for ls, sf, sn in HYPERS:
        theta = np.log(np.concatenate([ls, [sf, sn]]))
        value, grad = f(theta)
        lml, g = gp_regression_lml_and_grad(theta, Xc, t)
        assert value == pytest.approx(lml, abs=1e-9)
        np.testing.assert_allclose(grad, g, rtol=1e-9, atol=1e-9)
        point = {"length_scale": ls, "signal_sd": sf, "noise_sd": sn}
        mu, var = gp.predict(Xn, point=point, diag=True, pred_noise=True, jitter=0.0,
                             model=model)
        m, v = gp_moments(X, t, Xn, ls, sf, sn)
        np.testing.assert_allclose(m, mu, atol=1e-9)
        np.testing.assert_allclose(v, var, atol=1e-9)


def test_type2_ml_at_least_sklearn_optimiser():
    """Learned hyperparameters reach a log marginal likelihood at least as high as
    scikit-learn's optimiser (from its default start plus 3 random restarts)."""
    for seed in (0, 1):
        X, t = ard_data(n=60, seed=seed)
        kernel = C(1.0) * RBF(np.ones(3)) + WhiteKernel(1.0)
        g = GaussianProcessRegressor(kernel, alpha=0.0, n_restarts_optimizer=3,
                                     random_state=seed).fit(X, t)
        k = g.kernel_
        sk = log_marginal_likelihood(X, t, k.k1.k2.length_scale, np.sqrt(k.k1.k1.constant_value),
                                     np.sqrt(k.k2.noise_level))
        post = fit(GPRegression(X, t), "evidence", seed=seed)
        ours = post.attrs["log_marginal_likelihood"]
        assert ours >= sk - 1e-6
        ds = post["posterior"]
        again = log_marginal_likelihood(X, t, ds["length_scale"].values[0, 0],
                                        float(ds["signal_sd"][0, 0]), float(ds["noise_sd"][0, 0]))
        assert again == pytest.approx(ours, abs=1e-9)
        # ARD: the irrelevant third input gets the longest length-scale
        assert np.argmax(ds["length_scale"].values[0, 0]) == 2
        assert post.attrs["converged"] == 1 and post.attrs["restarts"] == 3


def test_fixed_hyperparameters_seed_and_layout():
    X, t = ard_data()
    a = fit(GPRegression(X, t, noise_sd=0.3), "evidence", seed=5)
    b = fit(GPRegression(X, t, noise_sd=0.3), "evidence", seed=5)
    assert float(a["posterior"]["noise_sd"][0, 0]) == 0.3
    xr.testing.assert_equal(a["posterior"].to_dataset(), b["posterior"].to_dataset())
    assert a["posterior"]["length_scale"].dims == ("chain", "draw", "feature")
    assert a.attrs["problem_kind"] == "gp" and a.attrs["fixed"] == "noise_sd"
    np.testing.assert_array_equal(a["constant_data"]["X"].values, X)
    np.testing.assert_array_equal(a["observed_data"]["t"].values, t)
    # the fixed-noise optimum is the best along the noise direction too: lml(0.3) is higher
    # than at the free optimum's hyperparameters with the noise forced to 0.3
    free = fit(GPRegression(X, t), "evidence", seed=5)
    assert free.attrs["log_marginal_likelihood"] >= a.attrs["log_marginal_likelihood"] - 1e-9


def test_gp_posterior_netcdf_round_trip(tmp_path):
    X, t = ard_data()
    post = fit(GPRegression(X, t), "evidence", seed=0, restarts=1)
    path = tmp_path / "gp.nc"
    post.to_netcdf(path)
    back = xr.open_datatree(path)
    Xn = np.random.default_rng(0).uniform(-2, 2, (5, 3))
    np.testing.assert_allclose(predict(back, Xn).var, predict(post, Xn).var, rtol=1e-14)


def test_gp_bad_input():
    X, t = ard_data()
    with pytest.raises(ValueError, match="length_scale"):
        GPRegression(X, t, length_scale=[1.0, 2.0])
    with pytest.raises(ValueError, match="noise_sd"):
        GPRegression(X, t, noise_sd=-1.0)
    with pytest.raises(ValueError, match="signal_sd"):
        GPRegression(X, t, signal_sd=0.0)
    with pytest.raises(ValueError, match="NaN"):
        GPRegression(np.where(X > 1.5, np.nan, X), t)
    with pytest.raises(ValueError, match="mismatched"):
        GPRegression(X, t[:-1])
    with pytest.raises(ValueError, match="restarts"):
        fit(GPRegression(X, t), "evidence", restarts=0)
    with pytest.raises(ValueError, match="backend"):
        fit(GPRegression(X, t), "evidence", backend="jax")
    post = fit(GPRegression(X, t), "evidence", seed=0, restarts=1)
    with pytest.raises(ValueError, match="features"):
        predict(post, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        predict(post, np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="'rvm\\*' is not available for a gp"):
        predict(post, X, kind="rvm*")
    with pytest.raises(ValueError, match="unknown method"):
        fit(GPRegression(X, t), "vrvm")


@pytest.mark.slow
def test_nuts_against_quadrature():
    """NUTS on the pm.gp.Marginal model (noise fixed): posterior means of ln length_scale
    and ln signal_sd against a 2-D grid quadrature of the same posterior (closed-form
    marginal likelihood times the LogNormal / HalfNormal priors); the predictive mixture
    against the quadrature-averaged predictive mean."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (25, 1))
    t = np.sin(X[:, 0]) + 0.2 * rng.standard_normal(25)
    problem = GPRegression(X, t, noise_sd=0.2)
    post = fit(problem, "nuts", seed=1, draws=1000, tune=1000, chains=2)
    assert post.attrs["converged"] == 1
    log_ls = np.log(post["posterior"]["length_scale"].values[..., 0]).ravel()
    log_sf = np.log(post["posterior"]["signal_sd"].values).ravel()

    sx, st = X.std(), t.std()
    a = np.linspace(np.log(sx) - 5, np.log(sx) + 4, 181)  # ln length_scale
    b = np.linspace(np.log(st) - 5, np.log(st) + 3, 161)  # ln signal_sd
    A, B = np.meshgrid(a, b, indexing="ij")
    logp = np.empty(A.shape)
    for i in range(a.size):
        for j in range(b.size):
            logp[i, j] = log_marginal_likelihood(X, t, np.exp(a[i]), np.exp(b[j]), 0.2)
    # priors on the log scale (densities of ln ls and ln sf, Jacobians included)
    logp += stats.norm.logpdf(A, np.log(sx), 1.0)
    logp += stats.halfnorm.logpdf(np.exp(B), scale=2 * st) + B
    w = np.exp(logp - logp.max())
    w /= w.sum()
    for draws, grid in ((log_ls, A), (log_sf, B)):
        ref = np.sum(w * grid)
        sd = np.sqrt(np.sum(w * (grid - ref) ** 2))
        # MCSE with a conservative effective sample size of 300
        assert abs(draws.mean() - ref) < 4 * sd / np.sqrt(300), (draws.mean(), ref)
    pred = predict(post, np.array([[0.5], [5.0]]), max_draws=200)
    assert pred.n_components == 200
    keep = np.unravel_index(np.argsort(w, axis=None)[-400:], w.shape)
    ww = w[keep] / w[keep].sum()
    ref_mean = sum(wk * gp_moments(X, t, np.array([[0.5], [5.0]]), np.exp(A[k]), np.exp(B[k]),
                                   0.2)[0]
                   for wk, k in zip(ww, zip(*keep, strict=True), strict=True))
    np.testing.assert_allclose(pred.mean, ref_mean, atol=0.05)


def test_psis_loo_of_the_log_likelihood_group_equals_the_exact_gp_loo(tmp_path):
    """The GP result's log_likelihood (log N(t_n | f_n, noise^2) over posterior draws of the
    latent f) makes az.loo estimate the exact leave-one-out predictive of R&W eqs.
    5.10-5.12, mu_i = t_i - [C^-1 t]_i / [C^-1]_ii, var_i = 1 / [C^-1]_ii (C = K + s^2 I).
    Measured: 160.91 vs 160.92 on 200 points, Pareto k <= 0.35. The group survives a netCDF
    round trip and az.loo_pit runs on it."""
    import arviz as az

    from sparsebayes.inference import add_posterior_predictive
    from sparsebayes.models.gp import se_ard_covariance

    rng = np.random.default_rng(0)
    X = rng.uniform(-8, 8, (200, 1))
    t = np.sinc(X[:, 0] / np.pi) + 0.1 * rng.normal(size=200)
    post = fit(GPRegression(X, t), "evidence", seed=0)
    ds = post["posterior"]
    ls, sf, sn = (ds[k].values[0, 0] for k in ("length_scale", "signal_sd", "noise_sd"))
    Ci = np.linalg.inv(se_ard_covariance(X, None, ls, sf) + sn ** 2 * np.eye(200))
    var = 1 / np.diag(Ci)
    exact = np.sum(stats.norm.logpdf(t, t - (Ci @ t) * var, np.sqrt(var)))
    loo = az.loo(post)
    assert loo.elpd == pytest.approx(exact, abs=0.5)
    assert float(np.max(loo.pareto_k)) < 0.7
    post.to_netcdf(tmp_path / "gp.nc")
    back = xr.open_datatree(tmp_path / "gp.nc")
    np.testing.assert_array_equal(back["log_likelihood"]["t"].values,
                                  post["log_likelihood"]["t"].values)
    assert np.all(np.isfinite(az.loo_pit(add_posterior_predictive(post, seed=1))["t"].values))
