"""Study data (inference/study/data.py): the built-in sets and the user's own (files,
DataFrames, arrays); seeded splits and standardisation; clear errors before any cell."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import DATA as SHARED
from conftest import STUDY_DATA as DATA
from conftest import STUDY_METHODS as METHODS
from conftest import needs_data
from sklearn.datasets import load_diabetes

from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main
from sparsebayes.inference.study import executors
from sparsebayes.inference.study.run import config as study_config
from sparsebayes.models.datasets import DATASETS


def _frame(n: int = 60) -> pd.DataFrame:
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    return X.iloc[:n].assign(progression=y.iloc[:n])



@pytest.fixture
def no_cells(monkeypatch):
    """Any cell that starts fails the test: errors must come before the first cell."""
    def boom(cell):
        raise AssertionError(f"a cell ran: {cell}")

    monkeypatch.setattr(executors, "run_cell", boom)


def test_csv_parquet_dataframe_and_arrays_give_identical_tables(tmp_path, same_table):
    df = _frame()
    csv = tmp_path / "mine.csv"
    df.to_csv(csv, index=False)
    from_csv = st.run_study(f"{csv}:target=progression", METHODS, 2, progress=False)
    from_df = st.run_study({"mine": (df, "progression")}, METHODS, 2, progress=False)
    X, y = df.drop(columns="progression").to_numpy(), df["progression"].to_numpy()
    assert (from_csv["status"] == "ok").all() and (from_csv["dataset"] == "mine").all()
    same_table(from_csv, from_df)
    # the arrays carry no column names: the digest differs, the numbers do not
    from_arrays = st.run_study({"mine": (X, y)}, METHODS, 2, progress=False)
    same_table(from_csv, from_arrays)
    pytest.importorskip("pyarrow")
    df.to_parquet(tmp_path / "mine.parquet")
    same_table(st.run_study(f"{tmp_path / 'mine.parquet'}:target=progression", METHODS, 2,
                       progress=False), from_df)


def test_user_splits_are_the_built_in_protocol():
    """Random 80/20 splits seeded per (seed, label, split), standardised by the training
    split: the rows and scaling are those of the same arrays split by hand."""
    df = _frame(50)
    spec = st.user_data(df, target="progression", name="mine")
    s = st.load_split(spec, 1, seed=4)
    X, y = df.drop(columns="progression").to_numpy(), df["progression"].to_numpy()
    tr, te = s.train_index, s.test_index
    assert te.size == 10 and np.intersect1d(tr, te).size == 0 and tr.size + te.size == 50
    m, sd = X[tr].mean(0), X[tr].std(0)
    np.testing.assert_allclose(s.X_test, (X[te] - m) / sd)
    np.testing.assert_allclose(s.y_train, (y[tr] - y[tr].mean()) / y[tr].std())
    assert not np.array_equal(st.load_split(spec, 2, seed=4).test_index, te)
    k5 = [st.load_split(st.user_data(df, target="progression", folds=5), k).test_index
          for k in range(5)]
    np.testing.assert_array_equal(np.sort(np.concatenate(k5)), np.arange(50))


def test_task_is_inferred_or_given():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    labels = np.where(X[:, 0] > 0, "yes", "no")
    spec = st.user_data((X, labels), name="c")
    assert spec.info.task == "classification"
    s = st.load_split(spec, 0)
    assert set(np.unique(s.y_train)) <= {0, 1}  # coded in sorted order: "no" 0, "yes" 1
    np.testing.assert_array_equal(s.y_test, (labels[s.test_index] == "yes").astype(int))
    assert "classes ['no', 'yes']" in spec.info.description
    assert st.user_data((X, X[:, 1]), name="r").info.task == "regression"
    counts = rng.integers(0, 3, 40)
    assert st.user_data((X, counts), name="k").info.task == "classification"
    assert st.user_data((X, counts), name="k", task="regression").info.task == "regression"
    t = st.run_study({"c": (X, labels)}, "rvm/evidence,svm", 1, progress=False)
    assert (t["status"] == "ok").all() and t["error_rate"].notna().all()


def test_bad_data_is_refused_before_any_cell_runs(tmp_path, no_cells, capsys):
    df = _frame(30)
    out = tmp_path / "out"
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        st.run_study(f"{tmp_path / 'nope.csv'}:target=y", "svm", 1, out, progress=False)
    with pytest.raises(ValueError, match=r"unknown target column 'y'.*'progression'"):
        st.run_study(f"{csv}:target=y", "svm", 1, out, progress=False)
    with pytest.raises(ValueError, match="needs the target column"):
        st.run_study(str(csv), "svm", 1, out, progress=False)
    bad = df.copy()
    bad.loc[3, "progression"] = np.nan
    with pytest.raises(ValueError, match=r"target column 'progression' has 1 missing"):
        st.run_study({"d": (bad, "progression")}, "svm", 1, out, progress=False)
    bad = df.copy()
    bad.loc[5, "bmi"] = np.nan
    with pytest.raises(ValueError, match=r"missing values in input column\(s\) \['bmi'\]"):
        st.run_study({"d": (bad, "progression")}, "svm", 1, out, progress=False)
    bad = df.assign(city="Oslo")
    with pytest.raises(ValueError, match=r"non-numeric input column\(s\) \['city'\]"):
        st.run_study({"d": (bad, "progression")}, "svm", 1, out, progress=False)
    with pytest.raises(ValueError, match="task must be"):
        st.run_study(f"{csv}:target=progression:task=ranking", "svm", 1, out, progress=False)
    with pytest.raises(ValueError, match=r"unknown option 'n' for data set"):
        st.run_study(f"{csv}:target=progression:n=3", "svm", 1, out, progress=False)
    assert not out.exists()
    # the command line says the same, with exit status 2
    assert main(["study", "--data", f"{csv}:target=y", "--methods", "svm", "--out",
                 str(out), "--no-progress"]) == 2
    assert "unknown target column 'y'" in capsys.readouterr().err
    assert not out.exists()


def test_parquet_without_an_engine_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        st.parse_data(f"{tmp_path / 'd.parquet'}:target=y")


def test_changed_file_is_not_resumed_from_old_cells(tmp_path, same_table):
    df = _frame(40)
    csv = tmp_path / "mine.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "out"
    first = st.run_study(f"{csv}:target=progression", "svm", 1, out, progress=False)
    again = st.run_study(f"{csv}:target=progression", "svm", 1, out, progress=False,
                         resume=True)
    same_table(first, again)
    df.assign(progression=df["progression"] * 2 + 1).to_csv(csv, index=False)
    changed = st.run_study(f"{csv}:target=progression", "svm", 1, out, progress=False,
                           resume=True)
    # new values -> new digest -> recomputed (standardised targets: the same split gives the
    # same scaled numbers, but the stored record now carries the new digest)
    cell = next((out / "cells").glob("*/*/split000.json"))
    import json

    assert json.loads(cell.read_text())["data_digest"] == \
        st.parse_data(f"{csv}:target=progression")[0].digest != \
        st.user_data(df, target="progression", name="mine").digest
    assert len(changed) == 1


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


def test_missing_data_file_names_file_and_folder(tmp_path, monkeypatch):
    from sparsebayes.models.datasets import missing_files

    files = [i for i in DATASETS.values() if i.files and missing_files(i.name, tmp_path)[1]]
    if not files:
        pytest.skip("no file-based data set that the package does not ship")
    info = files[0]
    with pytest.raises(FileNotFoundError, match=re.escape(info.files[0])) as err:
        st.run_study(info.name, "svm", 1, data_dir=tmp_path, progress=False)
    assert str(tmp_path) in str(err.value)


def test_generated_splits_match_the_generators():
    """The generated study data sets against their generators' formulas."""
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


@needs_data("german", "image", "ripley")
def test_file_splits_match_the_loaders():
    """Each file-based study data set against a direct call of sparsebayes.models.datasets."""
    from sparsebayes.models import datasets as ds

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


@needs_data("boston")
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

