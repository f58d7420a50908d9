"""scikit-learn estimators as study baselines (inference/study/baselines.py), scored against
a direct scikit-learn computation (cross_val_score on the same splits) and SciPy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import BayesianRidge, LogisticRegression, Ridge
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main
from sparsebayes.inference.study import executors

REG = "diabetes:n_train=80"
CLF = "breast_cancer_wisconsin:n_train=80"


def _cv(data: str, k: int):
    """The study's splits as scikit-learn cv (train, test) index pairs."""
    splits = [st.load_split(data, s) for s in range(k)]
    return [(s.train_index, s.test_index) for s in splits]


def test_regression_rmse_equals_cross_val_score_on_the_same_splits():
    t = st.run_study(REG, ["sklearn=sklearn.linear_model.Ridge:alpha=2.0"], 3, progress=False)
    assert (t["status"] == "ok").all() and "nlpd" not in t  # no predictive distribution
    assert (t["probabilistic"] == 0).all()
    X, y = load_diabetes(return_X_y=True)
    cv = _cv(REG, 3)
    # the study standardises inputs and targets on each training split: in raw units the
    # same model is this pipeline, and the table's RMSE is the raw RMSE / training sd
    model = TransformedTargetRegressor(make_pipeline(StandardScaler(), Ridge(alpha=2.0)),
                                       transformer=StandardScaler())
    raw = -cross_val_score(model, X, y, cv=cv, scoring="neg_root_mean_squared_error")
    sd = np.array([y[tr].std() for tr, _ in cv])
    np.testing.assert_allclose(t.sort_values("split")["rmse"], raw / sd, rtol=1e-10)


def test_classification_error_and_log_loss_equal_scikit_learn():
    est = LogisticRegression(C=0.5)
    t = st.run_study(CLF, [est], 3, progress=False)
    assert t["method"].iloc[0] == "sklearn=sklearn.linear_model.LogisticRegression:C=0.5"
    X, y = load_breast_cancer(return_X_y=True)
    cv = _cv(CLF, 3)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.5))
    acc = cross_val_score(model, X, y, cv=cv, scoring="accuracy")
    np.testing.assert_allclose(t["error_rate"], 1 - acc, rtol=1e-12)
    ref = -cross_val_score(model, X, y, cv=cv, scoring="neg_log_loss")
    np.testing.assert_allclose(t["log_loss"], ref, rtol=1e-8)
    assert (t["probabilistic"] == 1).all()


def test_return_std_gives_the_gaussian_nlpd_and_coverage():
    t = st.run_study(REG, "sklearn=sklearn.linear_model.BayesianRidge", 1, progress=False)
    s = st.load_split(REG, 0)
    est = BayesianRidge().fit(s.X_train, s.y_train)
    mean, std = est.predict(s.X_test, return_std=True)
    nlpd = -np.mean(stats.norm.logpdf(s.y_test, mean, std))
    z = stats.norm.ppf(0.975)
    cover = np.mean(np.abs(s.y_test - mean) <= z * std)
    np.testing.assert_allclose(t[["nlpd", "coverage95"]].iloc[0], [nlpd, cover], rtol=1e-10)


def test_estimator_object_and_spec_string_are_one_method():
    from sklearn.ensemble import RandomForestRegressor

    a = st.MethodSpec.parse(RandomForestRegressor(n_estimators=5))
    b = st.MethodSpec.parse("sklearn=sklearn.ensemble.RandomForestRegressor:n_estimators=5")
    assert a.label == b.label == "sklearn=sklearn.ensemble.RandomForestRegressor:n_estimators=5"
    # random_state left at None is set from the cell seed: every executor, the same numbers
    t1 = st.run_study(REG, [RandomForestRegressor(n_estimators=5)], 1, progress=False)
    t2 = st.run_study(REG, [b], 1, progress=False)
    assert t1["rmse"].iloc[0] == t2["rmse"].iloc[0]


def test_bad_estimators_are_refused_before_any_cell(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(executors, "run_cell",
                        lambda cell: pytest.fail(f"a cell ran: {cell}"))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="is not a scikit-learn estimator class"):
        st.run_study(REG, "sklearn=numpy.linalg.norm", 1, out, progress=False)
    with pytest.raises(ValueError, match="cannot import 'Nope'"):
        st.run_study(REG, "sklearn=sklearn.linear_model.Nope", 1, out, progress=False)
    with pytest.raises(ValueError, match=r"bad parameter\(s\) \['n_trees'\]"):
        st.run_study(REG, "sklearn=sklearn.ensemble.RandomForestRegressor:n_trees=3", 1, out,
                     progress=False)
    with pytest.raises(ValueError, match="LogisticRegression is a classifier: not for "
                       "regression"):
        st.run_study(REG, "sklearn=sklearn.linear_model.LogisticRegression", 1, out,
                     progress=False)
    with pytest.raises(TypeError, match="scikit-learn estimator object"):
        st.run_study(REG, [Ridge], 1, out, progress=False)  # the class, not an object
    assert not out.exists()
    assert main(["study", "--data", REG, "--methods", "sklearn=os.path.join", "--out",
                 str(out), "--no-progress"]) == 2
    assert "not a scikit-learn estimator" in capsys.readouterr().err


def test_report_marks_what_a_point_estimator_cannot_score(tmp_path):
    from sparsebayes.inference.study.report import write_report

    out = tmp_path / "r"
    st.run_study(REG, "rvm/evidence,sklearn=sklearn.neighbors.KNeighborsRegressor", 2, out,
                 progress=False)
    md = write_report(out).read_text()
    row = next(line for line in md.splitlines() if line.startswith("| `KNeighborsRegressor`"))
    assert row.count("n/a") == 2  # NLPD and coverage
    assert "`sklearn=sklearn.neighbors.KNeighborsRegressor` give no predictive" in md
    assert isinstance(pd.read_csv(out / "results.csv"), pd.DataFrame)
