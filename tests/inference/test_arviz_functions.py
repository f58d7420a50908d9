"""The ArviZ functions the README uses (``az.summary``, ``az.ess``, ``az.rhat``, ``az.mcse``,
``az.loo``) run on a result of every problem kind and method and give finite numbers
wherever the quantity is defined. A point (type-II ML) result keeps its hyperparameters as
coordinates of ``posterior`` (issue 46.5), so these functions diagnose its draws alone (the
weights, a GP's latent ``f``, in 2 chains): no warning and no ``nan``, except the exact
zeros of a softmax weight pruned in some classes, a constant whose R-hat is ArviZ's 0/0.
Pruned (basis, class) pairs of the 3-class classifiers hold ``ALPHA_PRUNED`` in
``posterior`` (the largest float did not survive ``az.summary``'s rounding) and ``inf`` in
``gaussian_posterior`` and in ``compare_posteriors``."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest

from sparsebayes.inference import compare_posteriors, fit
from sparsebayes.inference.results import ALPHA_PRUNED
from sparsebayes.models import (
    GaussianKernel,
    GPClassification,
    GPRegression,
    RVMClassification,
    RVMPoissonRegression,
    RVMRegression,
    datasets,
)


def _three_classes(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.argmax(X @ rng.normal(size=(2, 3)) + 0.5 * rng.normal(size=(n, 3)), axis=1)
    return X, y


def _problem(kind: str):
    if kind == "regression":
        return RVMRegression(*datasets.sinc(n=40, noise="uniform", seed=0), GaussianKernel(3.0))
    if kind == "binary":
        return RVMClassification(*datasets.ripley_mixture(40, seed=1), GaussianKernel(0.5))
    if kind == "3-class":
        return RVMClassification(*_three_classes(), GaussianKernel(1.0))
    if kind == "gp":
        return GPRegression(*datasets.sinc(n=30, noise="gaussian", seed=0))
    if kind == "counts":
        X = np.linspace(-2, 2, 50)[:, None]
        counts = np.random.default_rng(0).poisson(np.exp(1 + np.sin(2 * X[:, 0])))
        return RVMPoissonRegression(X, counts, GaussianKernel(0.7))
    X, y = datasets.ripley_mixture(40, seed=1)
    return GPClassification(X, y)


def _constant(values: np.ndarray) -> np.ndarray:
    """Per variable element: equal in every draw of every chain."""
    flat = values.reshape(-1, *values.shape[2:])
    return np.all(flat == flat[:1], axis=0)


def check_arviz_functions(post) -> None:
    """az.summary / ess / rhat / mcse (and az.loo with a log_likelihood group) give finite
    values where defined (R-hat: two chains or more and not a constant). A point result
    (type-II ML) gives no warning and no nan at all: its hyperparameters are coordinates
    of ``posterior``, not draws ArviZ diagnoses (issue 46.5)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        summary = az.summary(post)
        ess = {m: az.ess(post, method=m) for m in ("bulk", "tail", "mean")}
        rhat = az.rhat(post)
        mcse = az.mcse(post)
    loo = az.loo(post) if "log_likelihood" in post.children else None
    posterior = post["posterior"]
    if post.attrs["hyperparameters"] == "point":
        # the one exception: a softmax weight pruned in some classes only is an exact 0 in
        # them (alpha = inf), a constant whose R-hat ArviZ leaves undefined
        pruned = any(_constant(da.values).any() for da in posterior.data_vars.values())
        assert pruned or not [w for w in caught if w.category is RuntimeWarning]
        assert pruned or np.isfinite(summary.to_numpy(dtype=float)).all()
        assert set(posterior.data_vars) <= {"w", "z", "f"}
    assert np.isfinite(summary[["mean", "sd", "ess_bulk", "ess_tail", "mcse_mean"]]
                       .to_numpy(dtype=float)).all()
    for name, da in posterior.data_vars.items():
        const = _constant(da.values)
        for m, res in ess.items():
            assert np.all(np.isfinite(res[name].values)), (name, m)
        assert np.all(np.isfinite(mcse[name].values)), name
        if posterior.sizes["chain"] > 1:  # ArviZ's R-hat needs two chains
            assert np.all(np.isfinite(rhat[name].values[~const])), name
    if loo is not None:
        assert np.isfinite(loo.elpd)


CHEAP = [("regression", m) for m in ("evidence", "evidence-mackay", "vrvm")] + [
    (k, m) for k in ("binary", "3-class") for m in ("evidence", "evidence-mackay", "vrvm")
] + [("gp", "evidence"), ("gp_classification", "evidence"), ("counts", "evidence")]


@pytest.mark.parametrize(("kind", "method"), CHEAP)
def test_arviz_functions_on_every_cheap_result(kind, method):
    post = fit(_problem(kind), method, seed=0)
    check_arviz_functions(post)


@pytest.mark.parametrize("method", ["evidence", "evidence-mackay", "vrvm"])
def test_pruned_pairs_of_a_softmax_result(method):
    """In a 3-class result, ``alpha`` in ``posterior`` is ``ALPHA_PRUNED`` exactly where
    ``gaussian_posterior`` holds ``inf`` (and ``w`` is 0 there); ``az.summary`` prints it
    where it is variational (point values are coordinates it leaves out);
    ``compare_posteriors`` turns it into ``inf`` like a column pruned for every class; and
    ``az.loo``'s own relative efficiency equals the true one (independent draws: 1)."""
    post = fit(_problem("3-class"), method, seed=0)
    a = post["posterior"]["alpha"].values
    pruned = np.isinf(post["gaussian_posterior"]["alpha"].values)
    assert pruned.any() and post.attrs["alpha_pruned"] == ALPHA_PRUNED
    np.testing.assert_array_equal(a == ALPHA_PRUNED, np.broadcast_to(pruned, a.shape))
    assert np.all(post["posterior"]["w"].values[:, :, pruned] == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        summary = az.summary(post)
        own = az.loo(post)
        ref = az.loo(post, reff=1.0)
    if post.attrs["hyperparameters"] == "point":  # stated as point values (coordinates)
        assert "alpha" in post["posterior"].coords and not summary.index.str.startswith(
            "alpha").any()
    else:
        alpha_rows = summary.loc[summary.index.str.startswith("alpha")]
        assert (alpha_rows["mean"] == ALPHA_PRUNED).sum() == pruned.sum()
    assert abs(own.elpd - ref.elpd) < 0.05
    aligned = compare_posteriors({method: post}, draws=50)[method]["posterior"]["alpha"]
    labels = post["posterior"]["basis"].values
    np.testing.assert_array_equal(np.isinf(aligned.sel(basis=labels).values[0, 0]), pruned)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["regression", "binary", "3-class"])
@pytest.mark.parametrize("method", ["advi", "nuts"])
def test_arviz_functions_on_sampled_results(kind, method):
    opts = ({"draws": 60, "tune": 60, "chains": 2, "warn": False} if method == "nuts"
            else {"draws": 100, "max_iter": 3000})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short runs: convergence warnings
        post = fit(_problem(kind), method, seed=0, **opts)
    check_arviz_functions(post)
