"""The model families are the one place that knows a kind of problem: every registry of the
front of the library is a view of them, and a family registered at run time is served by
fit, predict, the predictive groups and leave-one-out without touching them."""

import numpy as np
import pytest

from sparsebayes.inference import api, fit, groups, predict
from sparsebayes.inference.families import FAMILIES, REGISTERED, family_of
from sparsebayes.inference.family import Family
from sparsebayes.inference.loo import WARM_REFITS, cold_refit_logpdf, loo
from sparsebayes.inference.rvm import evidence
from sparsebayes.inference.rvm.families import RVM_REGRESSION
from sparsebayes.inference.sklearn import RVC, RVR
from sparsebayes.inference.study.specs import FAMILIES as STUDY_FAMILIES
from sparsebayes.models import GaussianKernel, RVMRegression


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.uniform(-5, 5, (40, 1))
    return X, np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(40)


def test_registries_are_views_of_the_families():
    for f in REGISTERED:
        assert api.FIT_METHODS[f.kind] is f.fit_methods
        assert api.PREDICT_KINDS[f.kind] is f.predict_kinds
        assert {m for (k, m) in WARM_REFITS if k == f.kind} == set(f.warm_refits)
        assert STUDY_FAMILIES[f.study_name][f.task] == (f.kind, None)
    assert set(RVR._family.sklearn_posteriors) <= set(RVR._family.fit_methods)
    assert set(RVC._family.sklearn_posteriors) <= set(RVC._family.fit_methods)


@pytest.mark.parametrize("family", REGISTERED, ids=lambda f: f.kind)
def test_each_family_is_complete(family):
    assert FAMILIES[family.kind] is family and family.problem_type.kind == family.kind
    assert set(family.default_predict) == set(family.fit_methods)
    assert set(family.default_predict.values()) <= set(family.predict_kinds)
    assert set(family.warm_refits) <= set(family.fit_methods)
    assert (family.optimistic is None) == (family.optimistic_loo is None) == \
        (not family.warm_refits)
    assert family.task in ("regression", "classification", "counts")
    assert (family.draw_targets is not None) == family.weights


def test_family_of_reads_problems_results_and_kinds(data):
    X, t = data
    problem = RVMRegression(X, t, kernel=GaussianKernel(2.0))
    post = fit(problem)
    assert family_of(problem) is family_of(post) is family_of("regression") is RVM_REGRESSION
    assert post.attrs["default_predict_kind"] == RVM_REGRESSION.predict_kind("evidence")
    for junk in (object(), "nonsense", 3):
        with pytest.raises(TypeError, match="expected a problem"):
            family_of(junk)
    with pytest.raises(TypeError, match="expected a problem"):
        fit(object())


class ToyRegression(RVMRegression):
    """An RVM regression under a kind of its own: a stand-in for a new family."""

    kind = "toy"


def test_a_family_registered_at_run_time_is_served_everywhere(data, monkeypatch):
    """Registering one Family (no edit of api, groups or loo) makes fit, predict, the
    predictive groups and leave-one-out work for it: the results equal RVM regression's."""
    X, t = data
    toy = Family(kind="toy", study_name="toy", problem_type=ToyRegression, task="regression",
                 fit_methods={"evidence": evidence.fit_fast},
                 predict_kinds=dict(RVM_REGRESSION.predict_kinds),
                 default_predict={"evidence": "rvm"},
                 replicates=RVM_REGRESSION.replicates, draw_targets=RVM_REGRESSION.draw_targets,
                 training_problem=lambda post, rows=slice(None): ToyRegression(
                     X[rows], t[rows], kernel=GaussianKernel(2.0), centres=X),
                 warm_refits={"evidence": None}, optimistic="gaussian",
                 optimistic_loo=RVM_REGRESSION.optimistic_loo, noise=True)
    monkeypatch.setitem(FAMILIES, "toy", toy)
    mine = fit(ToyRegression(X, t, kernel=GaussianKernel(2.0)), seed=0)
    ref = fit(RVMRegression(X, t, kernel=GaussianKernel(2.0)), seed=0)
    assert mine.attrs["problem_kind"] == "toy"
    np.testing.assert_allclose(predict(mine, X).mean, predict(ref, X).mean)
    rep = groups.add_posterior_predictive(mine, seed=0)["posterior_predictive"]["t"].values
    np.testing.assert_allclose(
        rep, groups.add_posterior_predictive(ref, seed=0)["posterior_predictive"]["t"].values)
    got = loo(mine, "refit").elpd_i.values  # no warm refits: cold ones by fit
    want, _ = cold_refit_logpdf(ref, [np.array([i]) for i in range(t.size)])
    np.testing.assert_allclose(got, want, atol=1e-8)


def test_register_family_refuses_a_taken_kind_and_a_non_family(monkeypatch):
    from sparsebayes.inference import families

    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    with pytest.raises(ValueError, match="registered already"):
        families.register_family(RVM_REGRESSION)
    with pytest.raises(TypeError, match="must be a Family"):
        families.register_family("toy")
    toy = Family(kind="toy2", study_name="toy2", problem_type=ToyRegression,
                 task="regression", fit_methods={}, predict_kinds={}, default_predict={},
                 replicates=RVM_REGRESSION.replicates, training_problem=lambda post: None)
    assert families.register_family(toy) is toy and families.family_of("toy2") is toy
