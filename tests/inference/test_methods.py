"""The fit methods are objects (sparsebayes.inference.methods): what a method is, declared
once, is what fit, loo, the study and the progress lines read; a method registered at run
time is served by all of them without touching them."""

import logging
import warnings

import numpy as np
import pytest

from sparsebayes.inference import fit, loo
from sparsebayes.inference.families import FAMILIES, REGISTERED
from sparsebayes.inference.family import Family
from sparsebayes.inference.loo import default_estimator, refit_options
from sparsebayes.inference.methods import METHODS, Method, method_of, register_method
from sparsebayes.inference.rvm import evidence
from sparsebayes.inference.rvm.families import RVM_REGRESSION
from sparsebayes.models import (
    ConvergenceWarning,
    GaussianKernel,
    NumericalWarning,
    RVMRegression,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(2)
    X = rng.uniform(-5, 5, (30, 1))
    return X, np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(30)


@pytest.mark.parametrize("family", REGISTERED, ids=lambda f: f.kind)
def test_every_family_implements_registered_methods(family):
    assert set(family.fit_methods) <= set(METHODS)
    for name in family.fit_methods:
        assert family.rank(name) in range(4)
        assert family.predict_kind(name) in family.predict_kinds


def test_the_built_in_declarations():
    assert {m.name for m in METHODS.values() if m.draws} == {"nuts", "advi", "fullrank_advi"}
    assert {m.name: m.hyperparameters for m in METHODS.values()} == {
        "evidence": "point", "evidence-mackay": "point", "vrvm": "variational",
        "advi": "variational", "fullrank_advi": "variational", "nuts": "sampled"}
    assert [m.name for m in METHODS.values() if m.loo_estimator == "reloo"] == ["nuts"]
    assert method_of("nuts").warm_up is None and method_of("advi").warm_up["max_iter"] == 200


def test_declarations_are_checked_and_names_refused():
    with pytest.raises(ValueError, match="hyperparameters must be one of"):
        Method("x", "maximum")
    with pytest.raises(ValueError, match="loo_estimator"):
        Method("x", "point", loo_estimator="psis")
    with pytest.raises(TypeError, match="non-empty string"):
        Method("", "point")
    with pytest.raises(TypeError, match="takes a Method"):
        register_method("evidence")
    with pytest.raises(ValueError, match="a different method is registered as 'nuts'"):
        register_method(Method("nuts", "point"))
    assert register_method(METHODS["nuts"]) is METHODS["nuts"]  # the same one again: fine
    with pytest.raises(ValueError, match="unknown method 'map'.*registered methods"):
        method_of("map")


def test_a_family_with_an_unregistered_method_is_refused(monkeypatch):
    from sparsebayes.inference import families

    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    toy = Family(kind="toy3", study_name="toy3", problem_type=ShortRegression,
                 task="regression", fit_methods={"map": evidence.fit_mackay},
                 predict_kinds={}, default_predict={}, replicates=RVM_REGRESSION.replicates,
                 training_problem=lambda post: None)
    with pytest.raises(ValueError, match=r"not registered: \['map'\].*register_method"):
        families.register_family(toy)


class ShortRegression(RVMRegression):
    """An RVM regression under a kind of its own, for a family with a new method."""

    kind = "short"


def _steps(name, value, _options):
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of re-estimation steps, got {value!r}")


def fit_short(problem, *, seed=None, steps=20, damping=None):
    """A new method: Tipping's re-estimation stopped after ``steps`` steps."""
    return evidence.fit_mackay(problem, seed=seed, max_iter=steps)


def test_a_method_registered_at_run_time_is_served_everywhere(data, monkeypatch, caplog):
    """One Method and a family implementing it: fit checks its own option by its declared
    check (and names Method.options for an option with none), the result states the
    declared hyperparameters, loo uses the declared estimator and refits with the declared
    draws, the progress line follows ``draws``, the study schedule follows its rank."""
    X, t = data
    monkeypatch.setitem(METHODS, "short", Method("short", "point", schedule_rank=2,
                                                 options={"steps": _steps}))
    family = Family(kind="short", study_name="short", problem_type=ShortRegression,
                    task="regression", fit_methods={"short": fit_short},
                    predict_kinds=dict(RVM_REGRESSION.predict_kinds),
                    default_predict={"short": "rvm"}, replicates=RVM_REGRESSION.replicates,
                    draw_targets=RVM_REGRESSION.draw_targets,
                    training_problem=lambda post, rows=slice(None): ShortRegression(
                        X[rows], t[rows], kernel=GaussianKernel(2.0), centres=X),
                    warm_refits={"short": None}, optimistic="gaussian",
                    optimistic_loo=RVM_REGRESSION.optimistic_loo, noise=True)
    monkeypatch.setitem(FAMILIES, "short", family)
    problem = ShortRegression(X, t, kernel=GaussianKernel(2.0))
    with pytest.raises(ValueError, match="steps must be a whole number"):
        fit(problem, "short", steps=0)
    with pytest.raises(TypeError, match="'damping' of 'short' has no check.*Method.options"):
        fit(problem, "short", damping=0.5)
    with pytest.warns(ConvergenceWarning, match="max_iter=5"):  # the option reached it
        fit(problem, "short", seed=0, steps=5)
    with caplog.at_level(logging.DEBUG, logger="sparsebayes"):
        post = fit(problem, "short", seed=0, steps=2000)
    start = next(r for r in caplog.records if r.getMessage().endswith("started"))
    assert start.levelno == logging.DEBUG  # not a method with draws, 30 points
    assert post.attrs["hyperparameters"] == "point" and post.attrs["option_steps"] == 2000
    assert default_estimator(post) == "subsample" and "draws" not in refit_options(post)
    assert family.rank("short") == 2
    with warnings.catch_warnings():  # a refit that 2000 steps leave unconverged is told
        warnings.simplefilter("ignore", NumericalWarning)
        res = loo(post)  # N = 30: every point refitted cold, by the method with its options
    assert res.subsample_size == t.size and np.isfinite(res.elpd)


def test_a_result_stating_other_hyperparameters_breaks_the_contract(data):
    from sparsebayes.inference.contract import ContractError, check_result

    X, t = data
    post = fit(RVMRegression(X, t, kernel=GaussianKernel(2.0)), seed=0)
    post.attrs["hyperparameters"] = "sampled"
    with pytest.raises(ContractError, match="the method 'evidence' declares 'point'"):
        check_result(post)
