"""Named hyperpriors and the ``prior`` / ``prior_predictive`` groups, each
against an independent reference: PyMC's own forward sampler on ``problem.pymc_model()``,
SciPy's log-gamma distribution, and the Gaussian prior predictive given (alpha, beta)
(T01 eqs. 5, 15)."""

import warnings

import arviz as az
import matplotlib
import numpy as np
import pytest
from scipy import stats

from sparsebayes.inference import add_prior_predictive, fit
from sparsebayes.models import (
    GammaPrior,
    GaussianKernel,
    NumericalWarning,
    RVMClassification,
    RVMRegression,
    datasets,
)
from sparsebayes.models.priors import default_sampling_prior, weakly_informative_prior

matplotlib.use("Agg")
pm = pytest.importorskip("pymc")


def _sinc(n=100, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-10, 10, n))[:, None]
    return X, np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(n)


def _pymc_prior_predictive(model, draws=1000, seed=2) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in the old prior's draws
        pp = pm.sample_prior_predictive(draws=draws, model=model, random_seed=seed)
    t = pp.prior_predictive["t"].values
    return t.reshape(-1, t.shape[-1])


@pytest.mark.usefixtures("pytensor_in_python")
def test_default_prior_predictive_is_finite_where_the_old_shape_underflowed():
    """PyMC's forward sampler on the default model: every draw finite. With the previous
    shape a = c = 0.01, NumPy's Gamma sampler underflows some alpha_i to 0 (w_i infinite):
    a defect found earlier (2.3% of draws; 6% here with M = 101)."""
    X, t = _sinc()
    prob = RVMRegression(X, t, GaussianKernel(3.0))
    p = default_sampling_prior(prob)
    assert np.isfinite(_pymc_prior_predictive(prob.pymc_model())).all()
    old = GammaPrior(a=0.01, b=p.b, c=0.01, d=p.d)
    assert not np.isfinite(_pymc_prior_predictive(prob.pymc_model(prior=old))).all()


@pytest.mark.usefixtures("pytensor_in_python")
def test_weakly_informative_prior_is_at_the_scale_of_the_data():
    """Median prior-predictive sd within a factor 10 of sd(t) (the target; measured
    0.8), on the sinc data and on the same data in other units; the default's is ~1e18."""
    X, t = _sinc()
    for scale in (1.0, 1e3):
        prob = RVMRegression(X, scale * t, GaussianKernel(3.0), prior="weakly_informative")
        assert prob.prior == weakly_informative_prior(
            RVMRegression(X, scale * t, GaussianKernel(3.0)))
        rep = _pymc_prior_predictive(prob.pymc_model())
        ratio = np.median(rep.std(axis=1)) / np.std(scale * t)
        assert 0.1 < ratio < 10, ratio
    default = _pymc_prior_predictive(RVMRegression(X, t, GaussianKernel(3.0)).pymc_model())
    assert np.median(default.std(axis=1)) / np.std(t) > 1e6


@pytest.mark.usefixtures("pytensor_in_python")
@pytest.mark.parametrize("name", ["default", "weakly_informative"])
def test_regression_prior_groups_match_pymc_and_the_closed_form(name):
    """``fit(..., prior_predictive=True)`` on a VRVM result (every column kept): log alpha
    ~ log-Gamma(a) - ln b (SciPy); given each draw's (alpha, beta) the replicate is Gaussian
    with variance sum_m phi_nm^2 / alpha_m + 1 / beta (T01 eq. 15), so the standardised
    replicates are N(0, 1); the per-draw sd follows the same law as PyMC's forward draws."""
    X, t = _sinc()
    prob = RVMRegression(X, t, GaussianKernel(3.0), prior=name)
    post = fit(prob, "vrvm", seed=0, prior_predictive=True)
    prior = prob.prior
    g = post["prior"]
    log_alpha = np.log(g["alpha"].values[0])
    assert log_alpha.shape == (500, prob.basis.n_columns)
    assert stats.kstest(log_alpha.ravel()[::7] + np.log(prior.b),
                        stats.loggamma(prior.a).cdf).pvalue > 1e-3
    assert stats.kstest(np.log(g["beta"].values.ravel()) + np.log(prior.d),
                        stats.loggamma(prior.c).cdf).pvalue > 1e-3
    rep = post["prior_predictive"]["t"].values[0]
    Phi = prob.design_matrix()
    var = (1.0 / g["alpha"].values[0]) @ (Phi**2).T + 1.0 / g["beta"].values[0][:, None]
    u = (rep / np.sqrt(var)).ravel()[::13]
    assert stats.kstest(u, "norm").pvalue > 1e-3
    theirs = _pymc_prior_predictive(prob.pymc_model())
    assert stats.ks_2samp(np.log(rep.std(axis=1)), np.log(theirs.std(axis=1))).pvalue > 1e-3
    assert set(g.data_vars) == {"alpha", "z", "w", "beta", "noise_sd"}
    for name_ in g.data_vars:
        assert g[name_].dims == post["posterior"][name_].dims


@pytest.mark.usefixtures("pytensor_in_python")
@pytest.mark.parametrize("K", [2, 3])
def test_classification_prior_predictive_matches_pymc(K):
    """Class frequencies per prior draw: ours and PyMC's forward sampler agree (KS)."""
    if K == 2:
        X, y = datasets.ripley_mixture(100, seed=1)
    else:
        rng = np.random.default_rng(0)
        y = np.repeat([0, 1, 2], 20)
        X = rng.normal(size=(60, 2)) + y[:, None]
    prob = RVMClassification(X, y, GaussianKernel(0.5), prior="weakly_informative")
    post = fit(prob, "evidence", seed=0, prior_predictive=True)
    ours = post["prior_predictive"]["t"].values[0]
    theirs = _pymc_prior_predictive(prob.pymc_model(), draws=500)
    for k in range(K):
        assert stats.ks_2samp((ours == k).mean(1), (theirs == k).mean(1)).pvalue > 1e-3
    assert post["prior"]["w"].dims == post["posterior"]["w"].dims


def test_arviz_prior_checks_run():
    X, t = _sinc(40)
    post = fit(RVMRegression(X, t, GaussianKernel(3.0), prior="weakly_informative"), "vrvm",
               seed=0, prior_predictive=True, posterior_predictive=True)
    az.plot_prior_posterior(post, var_names=["noise_sd"])
    az.plot_ppc_dist(post, group="prior_predictive")
    az.plot_ppc_dist(post)
    matplotlib.pyplot.close("all")


def test_bad_input_and_numerical_trouble():
    X, t = _sinc(40)
    flat = fit(RVMRegression(X, t, GaussianKernel(3.0)), "evidence")
    with pytest.raises(ValueError, match="improper"):
        add_prior_predictive(flat)
    with pytest.raises(ValueError, match="prior must be"):
        RVMRegression(X, t, GaussianKernel(3.0), prior="weak")
    with pytest.raises(TypeError, match="prior must be"):
        RVMRegression(X, t, GaussianKernel(3.0), prior=3)
    with pytest.raises(ValueError, match="draws"):
        add_prior_predictive(fit(RVMRegression(X, t, GaussianKernel(3.0), prior="default"),
                                 "evidence"), draws=0)
    # a shape so small that alpha underflows: a warning with the cause, not silent inf
    tiny = fit(RVMRegression(X, t, GaussianKernel(3.0), prior=GammaPrior(1e-3, 1e-3, 1, 1)),
               "evidence")
    with pytest.raises(NumericalWarning, match="overflows"):
        add_prior_predictive(tiny, draws=2000, seed=0)
