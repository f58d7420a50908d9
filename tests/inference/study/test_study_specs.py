"""Study specifications (inference/study/specs.py): names, labels, and errors listing
the valid names."""

from __future__ import annotations

import pytest
from conftest import STUDY_DATA as DATA

from sparsebayes.inference import study as st
from sparsebayes.models.datasets import DATASETS


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown data set 'nope'.*diabetes"):
        st.parse_data("diabetes,nope")
    with pytest.raises(ValueError, match=r"unknown method family 'lasso'.*'rvm'"):
        st.parse_methods("lasso/evidence")
    with pytest.raises(ValueError, match=r"'rvm/frobnicate' cannot run.*rvm/evidence"):
        st.run_study(DATA, "rvm/evidence,rvm/frobnicate", 1, progress=False)
    with pytest.raises(ValueError, match="bad option"):
        st.parse_methods("rvm/evidence:draws")
    with pytest.raises(ValueError, match=r"unknown option 'n' for data set"):
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



def test_bad_options_are_refused_before_any_cell_runs(tmp_path, monkeypatch, capsys):
    """A misspelt method option or folds=1 failed every cell (and the report
    crashed); both are refused up front, naming the option and the closest valid name."""
    import pandas as pd

    from sparsebayes.inference.cli import main
    from sparsebayes.inference.study import executors

    def boom(cell):
        raise AssertionError(f"a cell ran: {cell}")

    monkeypatch.setattr(executors, "run_cell", boom)
    csv = tmp_path / "p.csv"
    pd.DataFrame({"x": range(20), "z": [0.5 * i % 3 for i in range(20)],
                  "y": [i % 2 for i in range(20)]}).to_csv(csv, index=False)
    out = tmp_path / "out"
    bad = {
        "rvm/nuts:draw=100": r"unknown option 'draw' for rvm/nuts; did you mean 'draws'\?",
        "rvm/evidence:max_iters=5": r"unknown option 'max_iters' for rvm/evidence; did "
                                    r"you mean 'max_iter'\?",
        "gp/evidence:restart=2": r"'restart' for gp/evidence; did you mean 'restarts'",
        "rvm/advi:progressbar=true": r"unknown option 'progressbar'",  # the study's own
        "svm:c=1": r"unknown option 'c' for svm; did you mean 'C'\?",
        "svm:width=-1": r"width must be a positive number or 'cv' in 'svm:width=-1'",
        "svm:C=0": r"C must be a positive number in 'svm:C=0'",
        "rvm/evidence:width=cv:cv=1": r"cv must be an integer >= 2 \(folds\)",
    }
    for method, message in bad.items():
        with pytest.raises(ValueError, match=message):
            st.run_study(f"{csv}:target=y", method, 2, out, progress=False)
    data = {
        "folds=1": r"folds must be an integer >= 2 and <= 20 \(the rows\), got 1",
        "folds=21": r"folds must be an integer >= 2 and <= 20",
        "n_train=0": r"n_train must be an integer >= 2 and <= 16",
        "folds=5:n_train=17": r"n_train must be an integer >= 2 and <= 16 \(the training",
        "test_fraction=1.5": r"test_fraction must lie in \(0, 1\)",
        "task=ranking": r"task must be one of \['regression', 'classification', 'counts'\], "
                        r"got 'ranking'",
        "fold=5": r"unknown option 'fold' for data set 'p'; did you mean 'folds'\?",
    }
    for option, message in data.items():
        with pytest.raises(ValueError, match=message):
            st.run_study(f"{csv}:target=y:{option}", "rvm/evidence", 2, out, progress=False)
    with pytest.raises(ValueError, match=r"'diabetes': folds must be an integer >= 2"):
        st.run_study("diabetes:folds=1", "rvm/evidence", 2, out, progress=False)
    with pytest.raises(ValueError, match=r"'n_trian' for data set 'sinc'; did you mean"):
        st.run_study("sinc:n_trian=50", "rvm/evidence", 2, out, progress=False)
    assert not out.exists()  # nothing was written, no cell ran
    assert main(["study", "--data", f"{csv}:target=y:folds=5", "--methods",
                 "rvm/nuts:draw=100", "--out", str(out), "--no-progress"]) == 2
    assert "did you mean 'draws'?" in capsys.readouterr().err
    assert not out.exists()
    spec = st.DataSpec.parse(f"{csv}:target=y:folds=5:n_train=16")  # the bounds are inclusive
    assert st.load_split(spec, 4).X_train.shape[0] == 16
