"""Predictive groups and the PyMC posterior-predictive route: each against the library's
closed-form predictive (T01 eqs. 21-22, the moderated / sampled class probabilities) within
Monte Carlo error, and never silently wrong."""

import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr
from scipy import stats

from sparsebayes.inference import (
    add_posterior_predictive,
    add_predictions,
    add_prior_predictive,
    fit,
    predict,
)
from sparsebayes.models import (
    GaussianKernel,
    GPClassification,
    GPRegression,
    RVMClassification,
    RVMRegression,
    datasets,
)


def _sinc(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-10, 10, n))[:, None]
    return X, np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(n)


def _moments_agree(draws, mean, var):
    """Per-point mean within 5 Monte Carlo standard errors, variance within 20%."""
    S = draws.shape[0] * draws.shape[1]
    flat = draws.reshape(S, -1)
    z = (flat.mean(0) - mean) / np.sqrt(var / S)
    assert np.max(np.abs(z)) < 5
    np.testing.assert_allclose(flat.var(0), var, rtol=0.2)


@pytest.mark.parametrize("method", ["evidence", "evidence-mackay", "vrvm"])
def test_posterior_predictive_group_matches_predict(method):
    X, t = _sinc()
    post = fit(RVMRegression(X, t, GaussianKernel(3.0)), method, seed=0, draws=1000,
               posterior_predictive=True)
    rep = post["posterior_predictive"]["t"].values
    assert rep.shape == (2, 1000, t.size)
    if method == "vrvm":  # w, beta from q(w) q(beta): the mixture's moments
        pred = predict(post, X, kind="samples")
    else:
        pred = predict(post, X)
    _moments_agree(rep, pred.mean, pred.var)
    Xn = np.linspace(-12, 12, 15)[:, None]
    new = add_predictions(post, Xn, seed=1)
    np.testing.assert_array_equal(new["predictions_constant_data"]["X"].values, Xn)
    p2 = predict(post, Xn, kind="samples" if method == "vrvm" else None)
    _moments_agree(new["predictions"]["t"].values, p2.mean, p2.var)


def test_classification_replicates_follow_the_class_probabilities():
    X, y = datasets.ripley_mixture(80, seed=1)
    post = fit(RVMClassification(X, y, GaussianKernel(0.5)), "evidence", seed=0, draws=2000,
               posterior_predictive=True)
    rep = post["posterior_predictive"]["t"].values.reshape(-1, y.size)
    p1 = predict(post, X, kind="samples", max_draws=4000).proba[:, 1]
    se = np.sqrt(p1 * (1 - p1) / rep.shape[0]) + 1e-3
    assert np.max(np.abs(rep.mean(0) - p1) / se) < 5
    Xt, yt = datasets.ripley_mixture(60, seed=2)
    K3 = np.repeat([0, 1, 2], 20)
    X3 = np.vstack([np.random.default_rng(k).normal(c, 1.0, (20, 2))
                    for k, c in enumerate([(-2, 0), (2, 0), (0, 2.5)])])
    p3 = fit(RVMClassification(X3, K3, GaussianKernel(1.0)), "evidence", seed=0, draws=2000)
    new = add_predictions(p3, X3[:10], seed=3)["predictions"]["t"].values.reshape(-1, 10)
    P = predict(p3, X3[:10], kind="samples", max_draws=4000).proba
    freq = np.stack([(new == k).mean(0) for k in range(3)], axis=1)
    assert np.max(np.abs(freq - P)) < 5 * np.sqrt(0.25 / new.shape[0]) + 1e-3


def test_loo_pit_of_a_well_specified_model_is_uniform_and_arviz_plots_run():
    """Data drawn from an RVM-like model (Gaussian noise): the LOO-PIT values are
    close to uniform (KS test); ArviZ's predictive checks run on the groups."""
    X, t = _sinc(200, seed=4)
    post = fit(RVMRegression(X, t, GaussianKernel(3.0)), "evidence", seed=0, draws=500,
               posterior_predictive=True)
    pit = az.loo_pit(post)["t"].values
    assert stats.kstest(pit, "uniform").pvalue > 0.01
    import matplotlib

    matplotlib.use("Agg")
    az.plot_ppc_dist(post)
    az.plot_ppc_pit(post)
    Xc, yc = datasets.ripley_mixture(60, seed=5)
    cpost = fit(RVMClassification(Xc, yc, GaussianKernel(0.5)), "evidence", seed=0,
                posterior_predictive=True)
    assert np.all(np.isfinite(az.loo_pit(cpost)["t"].values))
    az.plot_ppc_dist(cpost)


def _as_draws(post, values: dict, method: str):
    """``post`` with its posterior replaced by ``values`` (chain, draw, ...) and ``method``:
    a stand-in for a sampled result (the predictive code reads only these)."""
    out = post.copy()
    out["posterior"] = xr.DataTree(xr.Dataset(
        {k: (("chain", "draw", *post["posterior"][k].dims[2:]), v) for k, v in values.items()}))
    out.attrs["method"] = method
    return out


def test_gp_predictive_groups_match_predict():
    """GP regression: replicates at the training and new inputs have predict()'s moments (R&W
    Alg. 2.1) for point hyperparameters, and the mixture's for hyperparameter draws; GP
    classification (Laplace, and per-draw f* | f, theta as for NUTS): class frequencies at
    new inputs equal predict().proba (GPML eq. 3.25) within Monte Carlo error."""
    import matplotlib

    matplotlib.use("Agg")
    X, t = _sinc(40, seed=6)
    Xn = np.linspace(-12, 12, 9)[:, None]
    point = fit(GPRegression(X, t), "evidence", seed=0)
    rng = np.random.default_rng(0)
    ds = point["posterior"]
    jitter = np.exp(0.2 * rng.standard_normal((2, 300, 1)))
    one = {k: ds[k].values[:1, :1] for k in ("length_scale", "signal_sd", "noise_sd")}
    draws = _as_draws(point, {"length_scale": one["length_scale"] * jitter,
                              "signal_sd": one["signal_sd"] * jitter[..., 0],
                              "noise_sd": one["noise_sd"] * jitter[..., 0] ** 0.5},
                      "nuts")
    for post in (point, draws):
        post = add_posterior_predictive(post, seed=1)
        p = predict(post, X, max_draws=None)
        _moments_agree(post["posterior_predictive"]["t"].values, p.mean, p.var)
        new = add_predictions(post, Xn, seed=2)["predictions"]["t"].values
        p = predict(post, Xn, max_draws=None)
        _moments_agree(new, p.mean, p.var)
    az.plot_ppc_dist(post)
    Xc, yc = datasets.ripley_mixture(60, seed=5)
    Xcn, _ = datasets.ripley_mixture(12, seed=6)
    laplace = fit(GPClassification(Xc, yc), "evidence", seed=0, posterior_predictive=True)
    assert laplace["posterior_predictive"]["t"].shape == laplace["posterior"]["f"].shape
    sampled = _as_draws(laplace, {k: v.values for k, v in laplace["posterior"].to_dataset()
                                  .reset_coords().data_vars.items()}, "nuts")
    for post in (laplace, sampled):
        rep = add_predictions(post, Xcn, seed=2)["predictions"]["t"].values
        rep = rep.reshape(-1, Xcn.shape[0])
        p1 = predict(post, Xcn, kind="nuts" if post is sampled else None).proba[:, 1]
        se = np.sqrt(p1 * (1 - p1) / rep.shape[0]) + 1e-3
        assert np.max(np.abs(rep.mean(0) - p1) / se) < 5
    # K = 3 (GPML Alg. 3.4): class frequencies of the replicates = the averaged softmax
    rng = np.random.default_rng(3)
    y3 = np.repeat([0, 1, 2], 20)
    X3 = rng.normal(size=(60, 2)) + 1.5 * np.stack([y3 == 1, y3 == 2], axis=1)
    post = fit(GPClassification(X3, y3), "evidence", seed=0, posterior_predictive=True)
    assert post["posterior_predictive"]["t"].shape == post["posterior"]["f"].shape[:3]
    rep = add_predictions(post, X3[:10], seed=4)["predictions"]["t"].values.reshape(-1, 10)
    P = predict(post, X3[:10]).proba
    freq = np.stack([(rep == k).mean(0) for k in range(3)], axis=1)
    assert np.max(np.abs(freq - P)) < 5 * np.sqrt(0.25 / rep.shape[0]) + 2e-3


def test_bad_input_to_the_predictive_groups():
    X, t = _sinc(20)
    post = fit(RVMRegression(X, t, GaussianKernel(3.0)), "evidence", seed=0)
    with pytest.raises(ValueError, match="X_new has 2 features, the model was fitted on 1"):
        add_predictions(post, np.ones((3, 2)))
    with pytest.raises(TypeError, match="DataTree returned by sparsebayes"):
        add_posterior_predictive({"posterior": 1})
    gp = fit(GPRegression(X, t), "evidence", seed=0)
    with pytest.raises(ValueError, match="needs a posterior of regression or classification"):
        add_prior_predictive(gp)


@pytest.mark.slow
def test_pymc_route_on_the_joint_model_equals_predict_and_the_collapsed_one_refuses():
    """`pm.sample_posterior_predictive(post, model=problem.pymc_model())` after ADVI: the
    stored z = w sqrt(alpha) is used (not redrawn from its prior: the landed code gave a
    predictive sd of 18.8 where predict() gives 0.1), so its moments equal predict()'s
    mixture over the same draws; the collapsed model refuses instead of drawing w from its
    prior."""
    pm = pytest.importorskip("pymc")
    X, t = _sinc(30, seed=6)
    problem = RVMRegression(X, t, GaussianKernel(3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit(problem, "advi", seed=1, draws=500)
        pp = pm.sample_posterior_predictive(post, model=problem.pymc_model(), var_names=["t"],
                                            random_seed=2, progressbar=False)
    pred = predict(post, X, kind="samples")
    _moments_agree(pp["posterior_predictive"]["t"].values, pred.mean, pred.var)
    assert np.sqrt(pred.var).max() < 1.0
    with pytest.raises(NotImplementedError, match="collapsed RVM model integrates w out"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pm.sample_posterior_predictive(post, model=problem.pymc_model(collapsed=True),
                                           var_names=["t"], progressbar=False)


@pytest.mark.parametrize("name", ["gauss", "ard", "spline", "poly", "linear", "log"])
def test_pytensor_kernels_equal_the_numpy_ones(name):
    """Basis.tensor_design (the design inside a PyMC graph) equals Basis.design to 1e-12."""
    pytensor = pytest.importorskip("pytensor")
    import pytensor.tensor as pt

    from sparsebayes.models import (
        Basis,
        LinearKernel,
        LinearSplineKernel,
        LogBasis,
        PolynomialKernel,
    )

    kernel, extra, d = {"gauss": (GaussianKernel(1.5), (), 2),
                        "ard": (GaussianKernel([0.7, 2.0]), ("linear", "quadratic"), 2),
                        "spline": (LinearSplineKernel(), (), 1),
                        "poly": (PolynomialKernel(3, 0.5, 1.0), (), 2),
                        "linear": (LinearKernel(), ("linear",), 2),
                        "log": (LogBasis(), (), 2)}[name]
    rng = np.random.default_rng(0)
    X, C = rng.uniform(-2, 2, (9, d)), rng.uniform(-2, 2, (5, d))
    basis = Basis(kernel, C, True, extra, dictionary=True)
    Xs = pt.dmatrix("X")
    f = pytensor.function([Xs], basis.tensor_design(Xs))
    np.testing.assert_allclose(f(X), basis.design(X), rtol=1e-12, atol=1e-12)


def test_documented_set_data_route_out_of_sample_without_coords():
    """The README's route, `with problem.pymc_model(): pm.set_data({"X": X_new});
    pm.sample_posterior_predictive(post, var_names=["t"])`, with 7 new points after 40
    training ones and no coords argument (failed with a CoordinateValidationError on 'obs',
    40 vs 7). Its replicates' mean and variance are predict()'s at X_new (ADVI draws),
    within Monte Carlo error; the observed_data PyMC writes keeps the 40 training targets."""
    pm = pytest.importorskip("pymc")
    X, t = _sinc(40, seed=5)
    problem = RVMRegression(X, t, GaussianKernel(3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        post = fit(problem, "advi", seed=1, draws=400)
    Xn = np.linspace(-12, 12, 7)[:, None]
    with problem.pymc_model(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyMC: alpha, beta implicitly frozen
        pm.set_data({"X": Xn})
        pp = pm.sample_posterior_predictive(post, var_names=["t"], random_seed=2,
                                            progressbar=False)
    rep = pp["posterior_predictive"]["t"]
    assert rep.sizes["obs"] == 7
    np.testing.assert_array_equal(pp["observed_data"]["t"].values, t)
    pred = predict(post, Xn, kind="samples")
    _moments_agree(rep.values, pred.mean, pred.var)


@pytest.mark.slow
def test_set_data_predicts_out_of_sample_through_the_joint_model():
    """pm.set_data({"X": X_new}) on the joint model moves its design (built in the graph):
    PyMC's predictive at X_new equals predict()'s mixture over the same ADVI draws; the
    collapsed model has no X to set (it fails loudly instead of predicting in sample)."""
    pm = pytest.importorskip("pymc")
    X, t = _sinc(30, seed=7)
    problem = RVMRegression(X, t, GaussianKernel(3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit(problem, "advi", seed=1, draws=500)
    Xn = np.linspace(-12, 12, 9)[:, None]
    model = problem.pymc_model()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm.set_data({"X": Xn}, coords={"obs": np.arange(9)})
        pp = pm.sample_posterior_predictive(post, var_names=["t"], random_seed=3,
                                            progressbar=False, predictions=True)
    pred = predict(post, Xn, kind="samples")
    _moments_agree(pp["predictions"]["t"].values, pred.mean, pred.var)
    with pytest.raises(Exception, match="X"):
        with problem.pymc_model(collapsed=True):
            pm.set_data({"X": Xn})


@pytest.mark.slow
@pytest.mark.parametrize("method", ["evidence", "vrvm"])
def test_pruned_results_on_the_pymc_route_through_pymc_trace(method):
    """An evidence result holds only its relevance vectors: pymc_trace puts it on the joint
    model's whole basis (pruned w = z = 0), and PyMC's replicates then match predict()'s
    mixture over the same draws; a posterior of another basis is refused."""
    pm = pytest.importorskip("pymc")
    from sparsebayes.inference import pymc_trace

    X, t = _sinc(30, seed=8)
    problem = RVMRegression(X, t, GaussianKernel(3.0))
    post = fit(problem, method, seed=3)
    trace = pymc_trace(post, problem)
    assert trace.sizes["basis"] == problem.basis.n_columns
    if post["posterior"].sizes["basis"] < problem.basis.n_columns:  # the plain call fails
        # (an evidence result's point alpha is a coordinate, which PyMC does not read: it
        # redraws alpha and beta and stops on their shapes before the model's own check)
        with pytest.raises((AssertionError, ValueError)):
            pm.sample_posterior_predictive(post, model=problem.pymc_model(), var_names=["t"],
                                           progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp = pm.sample_posterior_predictive(trace, model=problem.pymc_model(), var_names=["t"],
                                            random_seed=4, progressbar=False)
    ref = predict(post, X, kind="samples")
    _moments_agree(pp["posterior_predictive"]["t"].values, ref.mean, ref.var)
    with pytest.raises(ValueError, match="another basis"):
        pymc_trace(post, RVMRegression(X, t, GaussianKernel(1.0)))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_every_arviz_check_runs_on_every_method(task):
    """az.loo, az.loo_pit, az.plot_ppc_dist, az.plot_ppc_pit, az.plot_lm,
    az.plot_prior_posterior and az.compare on a result of every method (with a proper,
    weakly informative prior, so every method has prior draws). Correctness of the groups
    is tested above; here every pairing runs and gives finite values."""
    import matplotlib

    matplotlib.use("Agg")
    if task == "regression":
        X, t = _sinc(30, seed=2)
        problem = RVMRegression(X, t, GaussianKernel(3.0), prior="weakly_informative")
    else:
        X, t = datasets.ripley_mixture(40, seed=1)
        problem = RVMClassification(X, t, GaussianKernel(0.5), prior="weakly_informative")
    posts = {}
    for method in ("evidence", "evidence-mackay", "vrvm", "advi", "fullrank_advi", "nuts"):
        opts = {"draws": 100, "tune": 100, "chains": 2, "warn": False} if method == "nuts" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            post = fit(problem, method, seed=0, posterior_predictive=True,
                       prior_predictive=True, **opts)
            assert np.isfinite(float(az.loo(post).elpd))
            assert np.all(np.isfinite(az.loo_pit(post)["t"].values))
            az.plot_ppc_dist(post)
            az.plot_ppc_dist(post, group="prior_predictive")
            az.plot_ppc_pit(post)
            az.plot_lm(post, x="X", plot_dim="obs")
            az.plot_prior_posterior(post, var_names=["w"],
                                    coords={"basis": post["posterior"]["basis"].values[:2]})
        matplotlib.pyplot.close("all")
        posts[method] = post
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert set(az.compare(posts).index) == set(posts)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["evidence-mackay", "fullrank_advi", "nuts"])
def test_groups_and_pymc_route_agree_with_predict_for_the_other_methods(method):
    """The methods the tests above leave out: the posterior_predictive group, PyMC's
    pm.sample_posterior_predictive on the joint model (through pymc_trace) and, after
    pm.set_data({"X": X_new}), its predictions all have predict()'s mixture moments."""
    pm = pytest.importorskip("pymc")
    from sparsebayes.inference import pymc_trace

    X, t = _sinc(30, seed=9)
    problem = RVMRegression(X, t, GaussianKernel(3.0))
    opts = {"draws": 500, "chains": 2, "warn": False} if method == "nuts" else {}
    Xn = np.linspace(-12, 12, 9)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit(problem, method, seed=1, posterior_predictive=True, **opts)
        model = problem.pymc_model()
        trace = pymc_trace(post, problem)
        pp = pm.sample_posterior_predictive(trace, model=model, var_names=["t"],
                                            random_seed=2, progressbar=False)
        with model:
            pm.set_data({"X": Xn, "t_obs": np.zeros(9)}, coords={"obs": np.arange(9)})
            new = pm.sample_posterior_predictive(trace, var_names=["t"], random_seed=3,
                                                 progressbar=False, predictions=True)
    ref = predict(post, X, kind="samples")
    _moments_agree(post["posterior_predictive"]["t"].values, ref.mean, ref.var)
    _moments_agree(pp["posterior_predictive"]["t"].values, ref.mean, ref.var)
    ref = predict(post, Xn, kind="samples")
    _moments_agree(new["predictions"]["t"].values, ref.mean, ref.var)
