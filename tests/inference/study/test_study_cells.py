"""One study cell (inference/study/cells.py): every metric recomputed from a direct
``fit``/``predict`` or ``GridSearchCV`` on the same split with scikit-learn's metrics;
failures recorded, inapplicable methods skipped."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STUDY_DATA as DATA
from scipy import stats
from sklearn.metrics import mean_absolute_error, mean_squared_error

from sparsebayes.inference import fit, predict
from sparsebayes.inference import study as st
from sparsebayes.inference.study.cells import WIDTH_FACTORS
from sparsebayes.inference.study.run import config as study_config
from sparsebayes.models import GaussianKernel, RVMRegression
from sparsebayes.models.datasets import DATASETS


def test_table_matches_direct_fits(tiny_table):
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.svm import SVR

    t = tiny_table
    assert list(t["method"].unique()) == ["rvm/evidence", "svm"]
    assert (t["status"] == "ok").all() and len(t) == 4
    width = DATASETS["diabetes"].width
    for split in (0, 1):
        s = st.load_split(DATA, split, seed=0)
        row = t[(t["split"] == split) & (t["method"] == "rvm/evidence")].iloc[0]
        cell = st.Cell(st.DataSpec.parse(DATA), split, st.MethodSpec.parse("rvm/evidence"))
        post = fit(RVMRegression(s.X_train, s.y_train, kernel=GaussianKernel(width)),
                   "evidence", seed=cell.fit_seed)
        pred = predict(post, s.X_test)
        assert row["n_relevant"] == post.attrs["n_kernel_vectors"]
        assert row["mse"] == pytest.approx(mean_squared_error(s.y_test, pred.mean), rel=1e-9)
        assert row["mae"] == pytest.approx(mean_absolute_error(s.y_test, pred.mean), rel=1e-9)
        nlpd = -np.mean(stats.norm.logpdf(s.y_test, pred.mean, np.sqrt(pred.var)))
        assert row["nlpd"] == pytest.approx(nlpd, rel=1e-9)
        lo, hi = stats.norm.interval(0.95, pred.mean, np.sqrt(pred.var))
        assert row["coverage95"] == pytest.approx(np.mean((s.y_test > lo) & (s.y_test < hi)))

        svm = t[(t["split"] == split) & (t["method"] == "svm")].iloc[0]
        sd = np.std(s.y_train)
        grid = {"C": sd * np.logspace(-1, 2, 4), "epsilon": sd * np.array([0.01, 0.1, 0.3])}
        svm_seed = st.Cell(cell.data, split, st.MethodSpec.parse("svm")).fit_seed
        folds = KFold(5, shuffle=True, random_state=svm_seed)
        ref = GridSearchCV(SVR(gamma=1 / width**2), grid, cv=folds).fit(s.X_train, s.y_train)
        assert svm["n_relevant"] == ref.best_estimator_.support_.size
        assert svm["mse"] == pytest.approx(
            mean_squared_error(s.y_test, ref.predict(s.X_test)), rel=1e-9)
        assert np.isnan(svm["nlpd"])


def test_classification_cell_matches_direct_fit():
    from sklearn.metrics import accuracy_score, brier_score_loss, log_loss

    from sparsebayes.models import RVMClassification

    data = "breast_cancer_wisconsin:n_train=80"
    row = st.run_study(data, "rvm/evidence", 1, progress=False).iloc[0]
    assert row["status"] == "ok", row["error"]
    s = st.load_split(data, 0)
    cell = st.Cell(st.DataSpec.parse(data), 0, st.MethodSpec.parse("rvm/evidence"))
    post = fit(RVMClassification(s.X_train, s.y_train, kernel=GaussianKernel(
        DATASETS["breast_cancer_wisconsin"].width)), "evidence", seed=cell.fit_seed)
    p1 = predict(post, s.X_test).proba[:, 1]  # moderated output, the default
    assert row["n_relevant"] == post.attrs["n_kernel_vectors"]
    assert row["error_rate"] == pytest.approx(1 - accuracy_score(s.y_test, p1 > 0.5))
    assert row["log_loss"] == pytest.approx(log_loss(s.y_test, p1), rel=1e-9)
    # two-class Brier summed over both columns is twice scikit-learn's binary score
    assert row["brier"] == pytest.approx(2 * brier_score_loss(s.y_test, p1), rel=1e-9)


def test_width_by_cross_validation():
    t = st.run_study(DATA, "rvm/evidence:width=cv:cv=3,svm:width=cv,rvm/evidence-mackay", 1,
                     progress=False)
    assert (t["status"] == "ok").all(), t["error"].tolist()
    grid = DATASETS["diabetes"].width * WIDTH_FACTORS
    for w in t["width"].iloc[:2]:
        assert np.isclose(grid, w).any()
    assert t["width"].iloc[2] == DATASETS["diabetes"].width
    with pytest.raises(ValueError, match="max_iter must be a positive integer, got 0 in "
                       "method spec"):  # refused before any cell runs
        st.run_study(DATA, "rvm/evidence:width=cv:max_iter=0", 1, progress=False)


def test_failing_cell_records_its_error(monkeypatch):
    import functools

    from sparsebayes.inference import api

    method = api.FIT_METHODS["regression"]["evidence"]

    @functools.wraps(method)  # keeps its signature: the options are still checked
    def failing(*args, **kwargs):
        raise np.linalg.LinAlgError("matrix not positive definite")

    monkeypatch.setitem(api.FIT_METHODS["regression"], "evidence", failing)
    t = st.run_study(DATA, "rvm/evidence:max_iter=5,svm", 1, progress=False)
    bad = t[t["method"] == "rvm/evidence:max_iter=5"].iloc[0]
    assert bad["status"] == "failed" and bad["error"] == ("LinAlgError: matrix not positive "
                                                          "definite")
    assert t[t["method"] == "svm"]["status"].eq("ok").all()


def test_method_not_applicable_to_a_task_is_skipped():
    # rvm* has no classification form: with a regression and a classification data set the
    # study runs it on the first and lists the pair as skipped, instead of failing
    cfg = study_config(f"{DATA},breast_cancer_wisconsin", "svm,rvm*/evidence", 2, 0)
    cells, skipped = cfg.cells()
    assert sorted((c.data.name, c.method.label) for c in cells if c.split == 0) == [
        ("breast_cancer_wisconsin", "svm"), ("diabetes", "rvm*/evidence"), ("diabetes", "svm")]
    assert skipped == [{"dataset": "breast_cancer_wisconsin", "method": "rvm*/evidence",
                        "reason": "rvm* does not do classification"}]



def _direct_fit_mse(data: str, method: str, problem_of) -> float:
    """Test MSE of ``problem_of(split)`` fitted by the evidence directly, on split 0 of
    ``data`` with the seed of the study's cell of ``method``."""
    s = st.load_split(data, 0)
    cell = st.Cell(st.DataSpec.parse(data), 0, st.MethodSpec.parse(method))
    post = fit(problem_of(s), "evidence", seed=cell.fit_seed)
    return float(np.mean((predict(post, s.X_test).mean - s.y_test) ** 2))


def test_gp_cells_above_the_size_are_the_sparse_gp(monkeypatch):
    """A GP regression cell on more than GP_EXACT_MAX_N training points fits the sparse GP
    on GP_INDUCING k-means inducing inputs (its record's n_centres), equal to a direct fit;
    ``inducing=none`` keeps the exact GP; the report's glossary says which; GP
    classification refuses the option."""
    from sparsebayes.inference.study import cells
    from sparsebayes.inference.study.report import method_glossary
    from sparsebayes.models import GPRegression

    monkeypatch.setattr(cells, "GP_EXACT_MAX_N", 40)
    monkeypatch.setattr(cells, "GP_INDUCING", 12)
    data = "sinc:n_train=60"
    table = st.run_study(data, "gp/evidence:loo=false,gp/evidence:loo=false:inducing=none", 1,
                         progress=False).set_index("method")
    assert (table["status"] == "ok").all(), table["error"]
    assert table.loc["gp/evidence:loo=False", "n_centres"] == 12
    assert table.loc["gp/evidence:inducing=None:loo=False", "n_centres"] == 60
    mse = _direct_fit_mse(data, "gp/evidence:loo=false",
                          lambda s: GPRegression(s.X_train, s.y_train, inducing=12))
    assert table.loc["gp/evidence:loo=False", "mse"] == pytest.approx(mse, rel=1e-9)
    [line] = method_glossary([st.MethodSpec.parse("gp/evidence:inducing=50")], {})
    assert "sparse GP (Titsias 2009) on 50 k-means inducing inputs" in line
    bad = st.run_study("breast_cancer_wisconsin:n_train=60", "gp/evidence:inducing=10", 1,
                       progress=False).iloc[0]
    assert bad["status"] == "failed" and "inducing is GP regression's option" in bad["error"]


def test_rvm_cells_above_the_size_fit_a_dictionary(monkeypatch):
    """An RVM cell on more than RVM_CENTRES training points fits a k-means dictionary of
    RVM_CENTRES centres (its record's n_centres), equal to a direct fit; ``centres=none``
    keeps every training point; the report's glossary says so unless centres is given."""
    from sparsebayes.inference.study import cells
    from sparsebayes.inference.study.report import method_glossary
    from sparsebayes.models import GaussianKernel, RVMRegression

    monkeypatch.setattr(cells, "RVM_CENTRES", 12)
    data = "sinc:n_train=60"
    table = st.run_study(data, "rvm/evidence:loo=false,rvm/evidence:loo=false:centres=none", 1,
                         progress=False).set_index("method")
    assert (table["status"] == "ok").all(), table["error"]
    assert table.loc["rvm/evidence:loo=False", "n_centres"] == 12
    assert table.loc["rvm/evidence:centres=None:loo=False", "n_centres"] == 60
    width = float(table.loc["rvm/evidence:loo=False", "width"])
    mse = _direct_fit_mse(data, "rvm/evidence:loo=false", lambda s: RVMRegression(
        s.X_train, s.y_train, kernel=GaussianKernel(width), centres=12))
    assert table.loc["rvm/evidence:loo=False", "mse"] == pytest.approx(mse, rel=1e-9)
    default, given = method_glossary([st.MethodSpec.parse("rvm/evidence"),
                                      st.MethodSpec.parse("rvm/evidence:centres=50")], {})
    assert "above 12 training points on a k-means dictionary of 12 candidate" in default
    assert "above 12" not in given and "dictionary of 50 candidate centres" in given


def test_rvms_that_learn_their_likelihood_take_a_smaller_dictionary(monkeypatch):
    """Every value of a Student-t's scale and dof is a whole sparse fit (about an hour a fit
    on KIN40K's 8000 points and 1000 centres): above RVM_CENTRES training points its cells
    fit LEARNED_LIKELIHOOD_CENTRES centres, equal to a direct fit on them, and the glossary
    says so; the Gaussian RVM keeps RVM_CENTRES."""
    from sparsebayes.inference.study import cells
    from sparsebayes.inference.study.report import method_glossary
    from sparsebayes.models import GaussianKernel, RVMStudentTRegression

    monkeypatch.setattr(cells, "RVM_CENTRES", 12)
    monkeypatch.setattr(cells, "LEARNED_LIKELIHOOD_CENTRES", 6)
    data = "sinc:n_train=40"
    table = st.run_study(data, "trvm/evidence:loo=false,rvm/evidence:loo=false", 1,
                         progress=False).set_index("method")
    assert (table["status"] == "ok").all(), table["error"]
    assert table.loc["trvm/evidence:loo=False", "n_centres"] == 6
    assert table.loc["rvm/evidence:loo=False", "n_centres"] == 12
    width = float(table.loc["trvm/evidence:loo=False", "width"])
    mse = _direct_fit_mse(data, "trvm/evidence:loo=false", lambda s: RVMStudentTRegression(
        s.X_train, s.y_train, kernel=GaussianKernel(width), centres=6))
    assert table.loc["trvm/evidence:loo=False", "mse"] == pytest.approx(mse, rel=1e-9)
    line, = method_glossary([st.MethodSpec.parse("trvm/evidence")], {})
    assert "above 12 training points on a k-means dictionary of 6 candidate" in line
