"""The comparison-study runner, its command line and its report.

References: every metric in the study table is recomputed here from a direct
``fit``/``predict`` (or a direct scikit-learn ``GridSearchCV``) on the same split with
scikit-learn's metrics / SciPy; paired-test p-values against ``scipy.stats.ttest_rel``;
executors against each other (in-process, processes, a Dask ``LocalCluster``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import mean_absolute_error, mean_squared_error

from sparsebayes.inference import fit, predict
from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main
from sparsebayes.inference.study.cells import WIDTH_FACTORS
from sparsebayes.inference.study.report import paired_tests, write_report
from sparsebayes.inference.study.run import config as study_config
from sparsebayes.models import GaussianKernel, RVMRegression
from sparsebayes.models.datasets import DATASETS

DATA = "diabetes:n_train=60"
METHODS = "rvm/evidence,svm"
TIMING = list(st.TIMING_COLUMNS)


def _compare(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.drop(columns=TIMING).reset_index(drop=True),
                                  b.drop(columns=TIMING).reset_index(drop=True))


@pytest.fixture(scope="module")
def tiny_table() -> pd.DataFrame:
    return st.run_study(DATA, METHODS, splits=2, progress=False)


# ---------------------------------------------------------------------------- specs
def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown data set 'nope'.*diabetes"):
        st.parse_data("diabetes,nope")
    with pytest.raises(ValueError, match=r"unknown method family 'lasso'.*'rvm'"):
        st.parse_methods("lasso/evidence")
    with pytest.raises(ValueError, match=r"'rvm/frobnicate' cannot run.*rvm/evidence"):
        st.run_study(DATA, "rvm/evidence,rvm/frobnicate", 1, progress=False)
    with pytest.raises(ValueError, match="bad option"):
        st.parse_methods("rvm/evidence:draws")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['n'\] for data set"):
        st.parse_data("diabetes:n=3")
    with pytest.raises(ValueError, match="given twice"):
        st.parse_methods("svm,svm")
    with pytest.raises(ValueError, match="needs a fit method"):
        st.parse_methods("rvm")


def test_spec_labels_round_trip():
    m = st.MethodSpec.parse("rvm/nuts:draws=300:chains=2:learn_width=true")
    assert m.label == "rvm/nuts:chains=2:draws=300:learn_width=True"
    assert st.MethodSpec.parse(m.label) == m
    d = st.DataSpec.parse("diabetes:test_fraction=0.25")
    assert st.DataSpec.parse(d.label) == d and d.width == DATASETS["diabetes"].width


# ---------------------------------------------------------------------------- splits
def test_splits_are_seeded_and_standardised():
    a = st.load_split(DATA, 1, seed=3)
    b = st.load_split(DATA, 1, seed=3)
    c = st.load_split(DATA, 2, seed=3)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.X_train, c.X_train)
    assert a.X_train.shape == (60, 10)
    np.testing.assert_allclose(a.X_train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(a.X_train.std(0), 1, atol=1e-12)
    np.testing.assert_allclose([a.y_train.mean(), a.y_train.std()], [0, 1], atol=1e-12)


def test_folds_partition_the_data():
    from sklearn.datasets import load_diabetes

    X, _ = load_diabetes(return_X_y=True)
    sizes = []
    rows = []
    for k in range(5):
        s = st.load_split("diabetes:folds=5", k, seed=0)
        sizes.append((s.X_train.shape[0], s.X_test.shape[0]))
        rows.append(s.X_test)
    assert all(tr + te == X.shape[0] for tr, te in sizes)
    assert sum(te for _, te in sizes) == X.shape[0]  # test folds are disjoint and cover
    with pytest.raises(ValueError, match="split 5 does not exist"):
        st.load_split("diabetes:folds=5", 5)


# ---------------------------------------------------------------------------- metrics
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
        assert row["n_relevant"] == post.attrs["n_relevant"]
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
    assert row["n_relevant"] == post.attrs["n_relevant"]
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
    bad = st.run_study(DATA, "rvm/evidence:width=cv:max_iter=0", 1, progress=False).iloc[0]
    assert bad["status"] == "failed"


def test_paired_tests_match_scipy(tiny_table):
    pt = paired_tests(tiny_table, DATA, "mse")
    a = tiny_table[tiny_table["method"] == "rvm/evidence"].sort_values("split")["mse"]
    b = tiny_table[tiny_table["method"] == "svm"].sort_values("split")["mse"]
    p = stats.ttest_rel(b.to_numpy(), a.to_numpy()).pvalue
    expected = "<0.01" if p < 0.01 else f"{p:.2f}"
    assert pt.loc["rvm/evidence", "svm"] == expected
    assert pt.loc["mean loss", "svm"] == f"{b.mean():.3f}"


def test_failing_cell_records_its_error():
    t = st.run_study(DATA, "rvm/evidence:max_iter=0,svm", 1, progress=False)
    bad = t[t["method"] == "rvm/evidence:max_iter=0"].iloc[0]
    assert bad["status"] == "failed" and "max_iter must be a positive integer" in bad["error"]
    assert t[t["method"] == "svm"]["status"].eq("ok").all()


def test_method_not_applicable_to_a_task_is_skipped(monkeypatch):
    # rvm* has no classification form: with a regression and a classification data set the
    # study runs it on the first and lists the pair as skipped, instead of failing
    from sparsebayes.inference import api

    monkeypatch.setitem(api.PREDICT_KINDS["regression"], "rvm*",
                        api.PREDICT_KINDS["regression"].get("rvm*", "predictive:predict_rvm"))
    cfg = study_config(f"{DATA},breast_cancer_wisconsin", "svm,rvm*/evidence", 2, 0)
    cells, skipped = cfg.cells()
    assert sorted((c.data.name, c.method.label) for c in cells if c.split == 0) == [
        ("breast_cancer_wisconsin", "svm"), ("diabetes", "rvm*/evidence"), ("diabetes", "svm")]
    assert skipped == [{"dataset": "breast_cancer_wisconsin", "method": "rvm*/evidence",
                        "reason": "rvm* does not do classification"}]


# ---------------------------------------------------------------------------- storage
def test_output_folder_of_another_study_is_refused(tmp_path, capsys):
    out = tmp_path / "res"
    st.run_study(DATA, "svm", 1, out, progress=False)
    with pytest.raises(st.StudyExistsError, match="already holds a study"):
        st.run_study(DATA, "rvm/evidence", 1, out, progress=False)
    assert main(["study", "--data", DATA, "--methods", "svm", "--splits", "1", "--out",
                 str(out), "--no-progress", "--no-report"]) == 2
    assert "--resume" in capsys.readouterr().err
    # with resume, only the new cells are computed and the old file is untouched
    cell = st.Cell(st.DataSpec.parse(DATA), 0, st.MethodSpec.parse("svm"))
    before = cell.path(out).stat().st_mtime_ns
    t = st.run_study(DATA, "svm,rvm/evidence", 1, out, progress=False, resume=True)
    assert len(t) == 2 and cell.path(out).stat().st_mtime_ns == before


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (Linux /proc)."""
    pids = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in env.read_bytes().split(b"\0"):
                pids.append(int(env.parent.name))
        except OSError:  # gone meanwhile, or not ours
            pass
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("user", [False, True], ids=["built-in", "csv+estimator"])
def test_resume_after_kill_computes_only_missing_cells(tmp_path, user):
    """Kill a running `sparsebayes study` half-way (at most 9 of its 18 cells kept, so a
    fast finish cannot hide the resume); re-running with --resume leaves the finished
    cells' files untouched and computes the rest; the table equals a clean run.
    The killed study's pool workers exit by themselves (they used to wait forever). The
    same with the user's data (a CSV file) and a scikit-learn estimator baseline."""
    out = tmp_path / "res"
    data, methods = "diabetes:n_train=80", "rvm/evidence,svm,rvm/evidence-mackay"
    if user:
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True, as_frame=True)
        X.assign(target=y).to_csv(tmp_path / "mine.csv", index=False)
        data = f"{tmp_path / 'mine.csv'}:target=target:n_train=80"
        methods = "rvm/evidence,svm,sklearn=sklearn.ensemble.RandomForestRegressor:" \
            "n_estimators=30"
    args = ["--data", data, "--methods", methods, "--splits", "6", "--out", str(out),
            "--n-jobs", "2", "--no-progress", "--no-report"]
    cmd = [sys.executable, "-m", "sparsebayes.inference.cli", "study", *args]
    tag = uuid.uuid4().hex
    marker = f"SPARSEBAYES_TEST_STUDY={tag}"
    env = {**os.environ, "SPARSEBAYES_TEST_STUDY": tag}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("cells/*/*/*.json"))) < 3:
        time.sleep(0.02)
    assert len(_processes_with(marker)) >= 2  # the study and its workers (n_jobs = cores)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while _processes_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert not _processes_with(marker), "orphaned study workers"
    files = sorted(out.glob("cells/*/*/*.json"), key=lambda p: p.stat().st_mtime_ns)
    assert len(files) >= 3
    for p in files[9:]:  # a loaded machine may finish every cell before the kill lands
        p.unlink()
    done = {p: p.stat().st_mtime_ns for p in files[:9]}
    assert main(["study", *args, "--resume"]) == 0
    after = list(out.glob("cells/*/*/*.json"))
    assert len(after) == 18
    assert all(p.stat().st_mtime_ns == m for p, m in done.items())
    clean = st.run_study(data, methods, 6, progress=False)
    _compare(st.load_table(out), clean)


@pytest.mark.slow
def test_local_processes_equal_in_process(tiny_table):
    _compare(st.run_study(DATA, METHODS, 2, n_jobs=2, progress=False), tiny_table)


# ---------------------------------------------------------------------------- dask
def test_unreachable_scheduler_fails_fast(tmp_path):
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match="could not reach the Dask scheduler"):
        st.run_study(DATA, "svm", 1, tmp_path / "x", scheduler="tcp://127.0.0.1:9",
                     timeout=2, progress=False)
    assert time.perf_counter() - start < 15
    assert not (tmp_path / "x").exists()  # nothing written
    with pytest.raises(ValueError, match="scheduler must be an address"):
        st.run_study(DATA, "svm", 1, scheduler="localhost", progress=False)


@pytest.mark.slow
def test_dask_local_cluster_equals_local_run(tiny_table, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        table = st.run_study(DATA, METHODS, 2, tmp_path / "d", scheduler=cluster.scheduler_address,
                             progress=False)
        with distributed.Client(cluster) as client:  # a Client object works too
            table2 = st.run_study(DATA, METHODS, 2, scheduler=client, progress=False)
    _compare(table, tiny_table)
    _compare(table2, tiny_table)


# ---------------------------------------------------------------------------- report
def _links(md: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", md)


def test_report_links_resolve(tmp_path):
    out = tmp_path / "rep"
    st.run_study(DATA, METHODS, 2, out, progress=False)
    path = write_report(out)
    md = path.read_text()
    links = _links(md)
    assert any(x.endswith(".png") for x in links) and "results.csv" in links
    for link in links:
        assert (path.parent / link).is_file(), link
    # the first split's posterior is stored and equals a direct fit on that split
    import xarray as xr

    cell = st.Cell(st.DataSpec.parse(DATA), 0, st.MethodSpec.parse("rvm/evidence"))
    stored = xr.open_datatree(cell.path(out).with_suffix(".zarr"), engine="zarr",
                              consolidated=False).load()
    s = st.load_split(DATA, 0)
    direct = fit(RVMRegression(s.X_train, s.y_train, kernel=GaussianKernel(
        DATASETS["diabetes"].width)), "evidence", seed=cell.fit_seed)
    np.testing.assert_array_equal(stored["gaussian_posterior"]["mu"].values,
                                  direct["gaussian_posterior"]["mu"].values)
    assert not cell.path(out).with_name("split001.zarr").exists()
    # summary numbers come from the table
    t = pd.read_csv(out / "results.csv")
    rmse = t[t["method"] == "svm"]["rmse"]
    assert f"{rmse.mean():.3f} ± {rmse.std(ddof=1):.3f}" in md


def test_cli_report_and_datasets(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no study" in capsys.readouterr().err
    assert main(["datasets"]) == 0
    text = capsys.readouterr().out
    for name in DATASETS:
        assert name in text
    assert main(["study", "--data", "nope", "--out", str(tmp_path / "a")]) == 2
    assert "diabetes" in capsys.readouterr().err


def test_missing_data_file_names_file_and_folder(tmp_path, monkeypatch):
    files = [i for i in DATASETS.values() if i.files]
    if not files:
        pytest.skip("no file-based data set registered")
    info = files[0]
    with pytest.raises(FileNotFoundError, match=re.escape(info.files[0])) as err:
        st.run_study(info.name, "svm", 1, data_dir=tmp_path, progress=False)
    assert str(tmp_path) in str(err.value)


# ---------------------------------------------------------------------------- data sets
SHARED = "../shared/data"  # the benchmark files, relative to the repo root (see COMMON)


def test_generated_and_file_splits_match_the_loaders():
    """Each study data set against a direct call of sparsebayes.models.datasets."""
    from sparsebayes.models import datasets as ds

    s = st.load_split("sinc:n_train=40:n_test=30", 0, seed=2)
    assert s.X_train.shape == (40, 1) and s.X_test.shape == (30, 1)
    np.testing.assert_allclose(s.X_train[:, 0], np.linspace(-10, 10, 40))
    # Gaussian noise of sd 0.1 around sin(x)/x (a loose check of the generator's noise)
    resid = np.concatenate([s.y_train - np.sin(s.X_train[:, 0]) / s.X_train[:, 0],
                            s.y_test - np.sin(s.X_test[:, 0]) / s.X_test[:, 0]])
    assert 0.06 < resid.std() < 0.14
    np.testing.assert_allclose(s.truth(np.array([[np.pi / 2]])), [2 / np.pi])
    r = st.load_split("ripley_mixture", 3)
    assert r.X_train.shape == (100, 2) and set(np.unique(r.y_train)) == {0, 1}

    for k in (0, 7):
        got = st.load_split("german", k, data_dir=SHARED)
        X, y, Xs, ys = ds.load_ida("german", k, data_dir=SHARED)
        np.testing.assert_array_equal(got.X_train, X)
        np.testing.assert_array_equal(got.y_test, ys)
    with pytest.raises(ValueError, match="image has 9 stored splits"):
        st.load_split("image", 9, data_dir=SHARED)
    sub = st.load_split("ripley", 0, data_dir=SHARED)
    X, y = ds.load_ripley("train", data_dir=SHARED)
    assert sub.X_train.shape == (100, 2) and sub.X_test.shape == (1000, 2)
    assert all((X == row).all(1).any() for row in sub.X_train)  # a subset of the 250


def test_boston_folds_are_rqc_ten_fold_cv():
    """R&QC (2005) §3: 10-fold CV, test folds of 51 or 50 cases covering the 506 once."""
    from sparsebayes.models import datasets as ds

    X, y, _ = ds.load_boston(data_dir=SHARED)
    sizes = [st.load_split("boston", k, data_dir=SHARED).X_test.shape[0] for k in range(10)]
    assert sorted(sizes) == [50] * 4 + [51] * 6 and sum(sizes) == X.shape[0]
    s = st.load_split("boston", 0, data_dir=SHARED)
    np.testing.assert_allclose([s.y_train.mean(), s.y_train.std()], [0, 1], atol=1e-12)
    # the study asks for 12 splits, the data set has 10 folds: 10 cells
    cells, _ = study_config("boston", "svm", 12, 0).cells()
    assert len(cells) == 10


def test_default_study_is_what_the_cli_runs(monkeypatch, tmp_path):
    """`sparsebayes study --out X` (no --data/--methods) runs DEFAULT_STUDY on built-in data
    only, with every posterior, and writes the report."""
    seen = {}

    def fake_run(data, methods, splits, out, **kw):
        seen.update(data=data, methods=methods, splits=splits, out=out, **kw)
        study_config(data, methods, splits, kw["seed"])  # the specs parse and can all run
        return pd.DataFrame({"status": []})

    monkeypatch.setattr(st, "run_study", fake_run)
    monkeypatch.setattr("sparsebayes.inference.study.report.write_report",
                        lambda out, table=None: out / "report.md")
    assert main(["study", "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    assert seen["data"].split(",") == st.DEFAULT_STUDY["data"]
    assert seen["methods"].split(",") == st.DEFAULT_STUDY["methods"]
    assert seen["splits"] == st.DEFAULT_STUDY["splits"]
    assert all(st.DataSpec.parse(d).info.source != "file" for d in st.DEFAULT_STUDY["data"])
    fits = {st.MethodSpec.parse(m).method for m in st.DEFAULT_STUDY["methods"]}
    assert {"evidence", "vrvm", "advi", "nuts"} <= fits
    families = {st.MethodSpec.parse(m).family for m in st.DEFAULT_STUDY["methods"]}
    assert families == set(st.FAMILIES) - {"sklearn"}  # the user names the estimator


def test_report_compares_posteriors_with_short_names(tmp_path):
    out = tmp_path / "post"
    methods = "rvm/evidence,rvm/evidence-mackay:max_iter=500,gp/evidence"
    st.run_study("sinc:n_train=30:n_test=50", methods, 2, out, progress=False)
    md = write_report(out).read_text()
    assert "![posterior comparison](figures/sinc_n_test50_n_train30_posteriors.png)" in md
    for link in _links(md):
        assert (out / link).is_file(), link
    assert "| `rvm/evidence-mackay` |" in md and "`rvm/evidence-mackay`: max_iter=500" in md
    t = pd.read_csv(out / "results.csv")
    assert t.loc[t["method"] == "gp/evidence", "n_relevant"].isna().all()
