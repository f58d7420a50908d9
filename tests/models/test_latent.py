"""RVMLatent: the RVM's latent function inside a user's own PyMC model,
each against an independent reference: the library's own PyMC model of the same RVM
(T01 eqs. 1-6), the truth of simulated data, the Gaussian RVM's evidence fit, and NumPy's
design matrix."""

import warnings

import numpy as np
import pytest

from sparsebayes.inference import fit, predict
from sparsebayes.models import (
    CallableKernel,
    GammaPrior,
    GaussianKernel,
    RVMLatent,
    RVMRegression,
)

pm = pytest.importorskip("pymc")

PRIOR = GammaPrior(a=1.5, b=0.3, c=2.0, d=0.05)


def _sample(model, **opts):
    """NUTS, 2 chains of 150 (after 150 tuning): the ARD funnels take trees of depth 9-10,
    and the two tests' margins do not need more (measured at 300 and 150 draws: Poisson rate
    RMS 0.085 and 0.085 against 0.10; Student-t RMSE 0.028 and 0.027 against the Gaussian
    RVM's 0.154).

    The model is sampled with its data frozen to constants (PyMC's ``freeze_dims_and_data``,
    the same log density): the design ``Phi({name}_X)`` is then computed once at compile time
    instead of at each of the ~300,000 gradient evaluations (most of the sampling time; the
    same RMS and RMSE to 3 digits; the posterior draws keep their names, so the original
    model's ``conditional`` uses them).
    """
    from pymc.model.transform.optimization import freeze_dims_and_data

    with freeze_dims_and_data(model), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.sample(**{"draws": 150, "tune": 150, "chains": 2, "random_seed": 1,
                            "progressbar": False, **opts})


@pytest.mark.usefixtures("pytensor_in_python")
@pytest.mark.parametrize("centres", [None, 6, "array"])
def test_latent_prior_is_the_rvm_model_with_a_gaussian_likelihood(centres):
    """Same logp at the same point as problem.pymc_model() (the joint non-centred RVM
    regression model) when the user adds beta ~ Gamma(c, d) and t ~ N(f, 1/beta)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (15, 1))
    t = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(15)
    if centres == "array":
        centres = np.linspace(-3, 3, 5)[:, None]
    problem = RVMRegression(X, t, GaussianKernel(1.5), prior=PRIOR, centres=centres)
    ref = problem.pymc_model()
    rvm = RVMLatent(GaussianKernel(1.5), centres=centres, prior=PRIOR)
    with pm.Model() as user:
        f = rvm.prior("f", X)
        beta = pm.Gamma("beta", alpha=PRIOR.c, beta=PRIOR.d)
        pm.Normal("t", mu=f, sigma=1 / pm.math.sqrt(beta), observed=t)
    assert list(rvm.basis.labels) == list(problem.basis.labels)
    M = problem.basis.n_columns
    point = {"alpha_log__": rng.normal(0, 1, M), "z": rng.normal(0, 1, M),
             "beta_log__": np.array(1.3)}
    renamed = {"f_alpha_log__": point["alpha_log__"], "f_z": point["z"],
               "beta_log__": point["beta_log__"]}
    assert user.compile_logp()(renamed) == pytest.approx(ref.compile_logp()(point), rel=1e-8)


@pytest.mark.slow
def test_poisson_counts_recover_the_rate():
    """Counts from a sparse log-rate (three Gaussian bumps on a base rate of 6): the
    posterior-mean rate is within 10% RMS (relative) of the truth at the 300 inputs."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 300))
    log_rate = (np.log(6) + 1.2 * np.exp(-(x - 2.5) ** 2 / 0.8)
                + 1.5 * np.exp(-(x - 7) ** 2 / 1.5) - 0.8 * np.exp(-(x - 5) ** 2 / 0.5))
    y = rng.poisson(np.exp(log_rate))
    rvm = RVMLatent(GaussianKernel(1.0), centres=25)
    with pm.Model() as model:
        f = rvm.prior("f", x[:, None])
        pm.Poisson("y", mu=pm.math.exp(f), observed=y)
    idata = _sample(model)
    rate = np.exp(idata.posterior["f"].values).reshape(-1, x.size).mean(0)
    assert np.sqrt(np.mean((rate / np.exp(log_rate) - 1) ** 2)) < 0.10


@pytest.mark.slow
def test_student_t_likelihood_resists_outliers_and_conditional_predicts():
    """Sinc with 5% gross outliers (+-1 to 3): a Student-t likelihood on RVMLatent gives a
    lower test RMSE against the true function than the Gaussian RVM's evidence fit; its
    conditional at new inputs equals Phi(X_new) w over the posterior draws (NumPy design)."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(-10, 10, 100))
    t = np.sinc(x / np.pi) + 0.1 * rng.standard_normal(100)
    out = rng.choice(100, 5, replace=False)
    t[out] += rng.choice([-1, 1], 5) * rng.uniform(1, 3, 5)
    X_new = np.linspace(-10, 10, 200)[:, None]
    truth = np.sinc(X_new[:, 0] / np.pi)
    gauss = predict(fit(RVMRegression(x[:, None], t, GaussianKernel(3.0)), "evidence"), X_new)
    rvm = RVMLatent(GaussianKernel(3.0), centres=30)
    with pm.Model() as model:
        f = rvm.prior("f", x[:, None])
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.StudentT("t", nu=3, mu=f, sigma=sigma, observed=t)
    idata = _sample(model)
    with model:
        rvm.conditional("f_new", X_new)
        pp = pm.sample_posterior_predictive(idata, var_names=["f_new"], random_seed=2,
                                            progressbar=False)
    f_new = pp.posterior_predictive["f_new"].values
    w = idata.posterior["f_w"].values
    np.testing.assert_allclose(f_new, w @ rvm.basis.design(X_new).T, rtol=1e-10, atol=1e-12)
    rmse_t = np.sqrt(np.mean((f_new.reshape(-1, 200).mean(0) - truth) ** 2))
    rmse_g = np.sqrt(np.mean((gauss.mean - truth) ** 2))
    assert rmse_t < rmse_g, (rmse_t, rmse_g)


def _f_at(model, point: dict) -> np.ndarray:
    """The deterministic ``f`` of ``model`` at the value variables in ``point``."""
    (f_of_values,) = model.replace_rvs_by_values([model["f"]])
    return pm.pytensorf.compile(model.value_vars, f_of_values)(*point.values())


@pytest.mark.usefixtures("pytensor_in_python")
def test_set_data_moves_the_latent_function_and_callables_use_data():
    """pm.set_data on {name}_X gives f at the new inputs (= NumPy's Phi(X_new) w); a Python
    callable kernel enters as precomputed {name}_Phi."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (12, 2))
    rvm = RVMLatent(GaussianKernel(1.0), prior=PRIOR)
    with pm.Model() as model:
        rvm.prior("f", X)
    X_new = rng.uniform(-2, 2, (5, 2))
    point = {"f_alpha_log__": rng.normal(0, 1, 13), "f_z": rng.normal(0, 1, 13)}
    w = point["f_z"] / np.sqrt(np.exp(point["f_alpha_log__"]))
    with model:
        pm.set_data({"f_X": X_new})
    f = _f_at(model, point)
    np.testing.assert_allclose(f, rvm.basis.design(X_new) @ w, rtol=1e-10)
    with pm.Model() as mine:  # the user's own pm.Data, as with pm.gp.HSGP
        X_data = pm.Data("inputs", X)
        RVMLatent(GaussianKernel(1.0), prior=PRIOR).prior("f", X_data)
        pm.set_data({"inputs": X_new})
    f = _f_at(mine, point)
    np.testing.assert_allclose(f, rvm.basis.design(X_new) @ w, rtol=1e-10)
    own = RVMLatent(CallableKernel(lambda A, C: np.exp(-((A[:, None, :] - C[None]) ** 2)
                                                       .sum(-1))), prior=PRIOR)
    with pm.Model() as model2:
        own.prior("g", X)
    assert "g_Phi" in {v.name for v in model2.data_vars}


def test_bad_input():
    rvm = RVMLatent(GaussianKernel(1.0))
    X = np.random.default_rng(3).normal(size=(10, 2))
    with pytest.raises(RuntimeError, match="call rvm.prior"):
        with pm.Model():
            rvm.conditional("f_new", X)
    with pm.Model():
        rvm.prior("f", X)
        with pytest.raises(ValueError, match="X_new has 3 features"):
            rvm.conditional("f_new", np.ones((4, 3)))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        with pm.Model():
            RVMLatent(GaussianKernel(1.0)).prior("f", bad)
    with pytest.raises(ValueError, match="no PyTensor form"):
        with pm.Model():
            RVMLatent(CallableKernel(lambda A, C: A @ C.T)).prior("f", pm.Data("inputs", X))
    with pytest.raises(TypeError, match="symbolic expression"):
        with pm.Model():
            RVMLatent(GaussianKernel(1.0)).prior("f", pm.Data("inputs", X) * 2)
    with pytest.raises(TypeError, match="prior must be a GammaPrior"):
        RVMLatent(GaussianKernel(1.0), prior="flat")
    with pytest.raises(ValueError, match="proper"):
        RVMLatent(GaussianKernel(1.0), prior=GammaPrior())
    with pytest.raises(ValueError, match="centres"):
        with pm.Model():
            RVMLatent(GaussianKernel(1.0), centres=50).prior("f", X)
