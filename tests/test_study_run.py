"""Running a study (inference/study/run.py, storage.py): the default study, output folders."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import STUDY_DATA as DATA

from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main
from sparsebayes.inference.study.run import config as study_config


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

    for text in st.DEFAULT_STUDY["methods"]:  # full posteriors on every split (issue 15)
        options = dict(st.MethodSpec.parse(text).options)
        assert "splits" not in options, text
        if st.MethodSpec.parse(text).method == "nuts":
            assert options["chains"] >= 4 and options["draws"] >= 1000
