"""Running a study (inference/study/run.py, storage.py): the default study, output folders."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT
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
    tasks = {st.DataSpec.parse(d).info.task for d in st.DEFAULT_STUDY["data"]}
    serving = {f for f, by_task in st.FAMILIES.items() if tasks & set(by_task)}
    assert families == serving - {"sklearn"}  # the user names the estimator

    for text in st.DEFAULT_STUDY["methods"]:  # full posteriors on every split
        options = dict(st.MethodSpec.parse(text).options)
        assert "splits" not in options, text
        if st.MethodSpec.parse(text).method == "nuts":
            assert options["chains"] >= 4 and options["draws"] >= 1000


def _readme_commands(marker: str) -> list[list[str]]:
    """The ``sparsebayes study`` commands of the README's bash block after ``marker``
    (continuation lines joined), as argument lists without the program name."""
    import re
    import shlex

    text = (ROOT / "docs" / "guide" / "studies.md").read_text()
    block = text[text.index(marker):]
    block = block[block.index("```bash"):].split("```")[1]
    lines = re.sub(r"\\\n\s*", " ", block).splitlines()
    return [shlex.split(line)[1:] for line in lines if line.startswith("sparsebayes study")]


def _patients_csv(path, n: int = 40) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    pd.DataFrame({"age": X[:, 0], "dose": X[:, 1],
                  "outcome": (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)}
                 ).to_csv(path, index=False)


def test_readme_cli_examples_run(tmp_path, monkeypatch, capsys):
    """The README's own `--data patients.csv:target=outcome:task=classification:
    folds=5` example finished its cells and then reported "No finished cells", "random
    splits" and `--splits 10` (the report dropped the options from the data set's name)."""
    import json

    monkeypatch.chdir(tmp_path)
    mine, patients = _readme_commands("## Your own data and your own baselines")
    assert "patients.csv:target=outcome:task=classification:folds=5" in patients
    _patients_csv(tmp_path / "patients.csv")
    assert main([*patients, "--n-jobs", "1", "--no-progress"]) == 0
    out = tmp_path / "results" / "p"
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 10 and (table["status"] == "ok").all()  # 2 methods x 5 folds
    assert set(table["dataset"]) == {"patients:folds=5"}
    assert sorted(table["split"].unique()) == [0, 1, 2, 3, 4]
    manifest = json.loads((out / "study.json").read_text())
    assert manifest["data"] == ["patients:folds=5"] and manifest["splits"] == 5
    user = manifest["user_data"]["patients:folds=5"]
    assert user["spec"].endswith(":folds=5") and "5-fold cross-validation" in \
        user["description"]
    report = (out / "report.md").read_text()
    assert "No finished cells" not in report and "random" not in report
    assert "5-fold cross-validation" in report and "--splits 5" in report
    assert "| `rvm/evidence` | 5/5 |" in report
    # the regression example (fewer splits, to keep the test short)
    y = pd.read_csv("patients.csv").eval("price = 3 * age - dose")
    y.drop(columns="outcome").to_csv("mydata.csv", index=False)
    assert main([*mine, "--splits", "2", "--n-jobs", "1", "--no-progress"]) == 0
    table = pd.read_csv(tmp_path / "results" / "mine" / "results.csv")
    assert len(table) == 8 and (table["status"] == "ok").all()


def test_a_panicking_cell_is_recorded_and_the_study_goes_on(tmp_path, monkeypatch, capsys):
    """nutpie's Rust panics are BaseExceptions (pyo3's PanicException), not Exceptions, and
    cannot be pickled: they killed the study with a PicklingError and no results.csv."""
    import json
    import pickle

    from sparsebayes.inference import api

    class Panic(BaseException):  # as pyo3_runtime.PanicException
        pass

    def panicking_fit(problem, method, **kw):
        raise Panic("Poisoned sampler state mutex")

    monkeypatch.setattr(api, "fit", panicking_fit)
    out = tmp_path / "out"
    assert main(["study", "--data", DATA, "--methods", "rvm/evidence,svm", "--splits", "2",
                 "--out", str(out), "--n-jobs", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "2 failed" in printed and "Panic: Poisoned sampler state mutex" in printed
    table = pd.read_csv(out / "results.csv")
    bad = table[table["method"] == "rvm/evidence"]
    assert len(bad) == 2 and (bad["status"] == "failed").all()
    assert (bad["error"] == "Panic: Poisoned sampler state mutex").all()
    assert (table.loc[table["method"] == "svm", "status"] == "ok").all()
    cell = st.Cell(st.DataSpec.parse(DATA), 0, st.MethodSpec.parse("rvm/evidence"))
    stored = json.loads(cell.path(out).read_text())
    assert stored["status"] == "failed" and "Panic" in stored["traceback"]
    pickle.dumps(st.run_cell(cell))  # what a worker process sends back
    assert "Failed cells" in (out / "report.md").read_text()

    def interrupted(problem, method, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "fit", interrupted)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C still stops the study
        st.run_cell(cell)
