"""Leave-one-out in a study (inference/study/cells.py, report.py): each cell's LOO elpd on
its training split equals ``loo`` of a direct fit of that split; a LOO the library does not
offer, or that fails, leaves the cell standing; the LOO time is not fit time; cells stored
before the LOO columns are recomputed on resume; the report's agreement sentence matches
Kendall's tau (``scipy.stats.kendalltau``) of the two rankings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import STUDY_DATA as DATA
from scipy import stats

import sparsebayes.inference as inference
from sparsebayes.inference import fit, loo
from sparsebayes.inference import study as st
from sparsebayes.inference.study import cells
from sparsebayes.inference.study.cells import STUDY_LOO_REFITS
from sparsebayes.inference.study.report import (
    conclusions,
    loo_agreement,
    loo_table,
    write_report,
)
from sparsebayes.models import GaussianKernel, RVMRegression
from sparsebayes.models.datasets import DATASETS

LOO_COLUMNS = ["loo_elpd_per_point", "loo_se_per_point", "loo_estimator", "loo_seconds",
               "loo_bad_k", "loo_missing"]
SMALL = "sinc:n_train=20:n_test=20"


def test_cell_loo_equals_loo_of_a_direct_fit(tiny_table):
    """The cell's LOO columns are ``loo(post)`` of the same split's fit made here (elpd and
    se over N training points, the estimator), on the second split (the first's differs);
    the baseline has none, with the reason."""
    t = tiny_table
    assert set(LOO_COLUMNS) <= set(t.columns)
    assert "loo_seconds" in st.TIMING_COLUMNS  # resume / executor equality ignore it
    rvm = t[t["method"] == "rvm/evidence"].set_index("split")
    assert rvm.loc[0, "loo_elpd_per_point"] != rvm.loc[1, "loo_elpd_per_point"]
    s = st.load_split(DATA, 1, seed=0)
    cell = st.Cell(st.DataSpec.parse(DATA), 1, st.MethodSpec.parse("rvm/evidence"))
    post = fit(RVMRegression(s.X_train, s.y_train,
                             kernel=GaussianKernel(DATASETS["diabetes"].width)),
               "evidence", seed=cell.fit_seed)
    res = loo(post, refits=STUDY_LOO_REFITS)
    row, n = rvm.loc[1], s.y_train.size
    assert row["n_train"] == n == res.elpd_i.size
    assert res.estimator == "subsample" and res.subsample_size == STUDY_LOO_REFITS
    assert row["loo_elpd_per_point"] == pytest.approx(res.elpd / n, rel=1e-9)
    assert row["loo_se_per_point"] == pytest.approx(np.hypot(res.se, res.subsampling_se) / n,
                                                    rel=1e-9)
    assert row["loo_estimator"] == res.estimator
    assert (rvm["loo_seconds"] > 0).all() and (rvm["loo_missing"] == "").all()
    svm = t[t["method"] == "svm"]
    assert svm["loo_elpd_per_point"].isna().all() and svm["loo_se_per_point"].isna().all()
    assert svm["loo_missing"].str.contains("baseline").all()


def _cell(method: str = "rvm/evidence") -> st.Cell:
    return st.Cell(st.DataSpec.parse(SMALL), 0, st.MethodSpec.parse(method))


class _Clock:
    """``time`` for cells.py whose ``perf_counter`` jumps by ``skip`` when told."""

    def __init__(self):
        import time

        self.now, self.skip = time.perf_counter, 0.0

    def perf_counter(self) -> float:
        return self.now() + self.skip


def test_loo_time_is_apart_from_the_fit_time(monkeypatch):
    """A LOO that takes 1000 s (on a clock it advances) adds 1000 s to ``loo_seconds``
    (timed by the cell when the result has no ``seconds``) and nothing to ``fit_seconds``."""
    clock = _Clock()

    class Res:  # an ELPDData without the library's `seconds` attribute
        elpd, se, estimator = -20.0, 2.0, "refit"

    def slow_loo(post, **kwargs):
        clock.skip += 1000.0
        return Res()

    monkeypatch.setattr(cells, "time", clock)
    monkeypatch.setattr(inference, "loo", slow_loo)
    rec = cells.run_cell(_cell())
    assert rec["status"] == "ok", rec["error"]
    assert rec["loo_elpd_per_point"] == -1.0 and rec["loo_se_per_point"] == 0.1
    assert rec["loo_seconds"] >= 1000.0 and rec["fit_seconds"] < 1000.0


@pytest.mark.parametrize("exc, word", [(ValueError("no LOO for this kind"), "not available"),
                                       (NotImplementedError("later"), "not available"),
                                       (RuntimeError("boom"), "failed")])
def test_a_missing_or_failing_loo_leaves_the_cell_standing(monkeypatch, exc, word):
    def no_loo(post, **kwargs):
        raise exc

    monkeypatch.setattr(inference, "loo", no_loo)
    rec = cells.run_cell(_cell())
    assert rec["status"] == "ok" and np.isfinite(rec["nlpd"])
    assert np.isnan(rec["loo_elpd_per_point"]) and rec["loo_estimator"] == ""
    assert rec["loo_missing"] == f"{word}: {type(exc).__name__}: {exc}"


def test_augmented_predictive_has_no_loo_of_its_own(monkeypatch):
    """``rvm*`` is scored by RQ05's predictive, ``loo`` by the fit's own: no LOO (and no
    call) rather than the plain RVM's LOO beside rvm*'s test density."""
    def never(post, **kwargs):
        raise AssertionError("loo called for rvm*")

    monkeypatch.setattr(inference, "loo", never)
    rec = cells.run_cell(_cell("rvm*/evidence"))
    assert rec["status"] == "ok" and np.isnan(rec["loo_elpd_per_point"])
    assert "'rvm*' predictive" in rec["loo_missing"]


def test_pareto_k_above_the_threshold_is_counted(monkeypatch):
    """``loo_bad_k`` counts the points whose Pareto k exceeds the result's ``good_k``
    (ArviZ's threshold); an exact estimator (``pareto_k`` None) has none to count."""
    class Res:
        elpd, se, estimator, seconds = -20.0, 2.0, "psis", 0.5
        good_k = 0.67
        pareto_k = np.array([0.1, 0.66, 0.68, 0.9, 1.5] + [0.2] * 15)

    monkeypatch.setattr(inference, "loo", lambda post, **kw: Res())
    rec = cells.run_cell(_cell())
    assert rec["loo_bad_k"] == np.sum(Res.pareto_k > 0.67) == 3
    Res.pareto_k = None
    assert np.isnan(cells.run_cell(_cell())["loo_bad_k"])


def test_loo_option_chooses_or_skips_the_estimator(monkeypatch):
    """``:loo=kfold`` asks ``loo`` for that estimator, ``:loo=false`` for none; other values
    and the option on a baseline are refused when the spec is parsed."""
    asked = []

    def fake(post, estimator=None, **kwargs):
        asked.append(estimator)
        raise ValueError("stop here")

    monkeypatch.setattr(inference, "loo", fake)
    monkeypatch.setattr(cells, "warm_up", lambda *args: 0.0)  # its own LOO call aside
    cells.run_cell(_cell("rvm/evidence:loo=kfold"))
    cells.run_cell(_cell("rvm/evidence"))
    assert asked == ["kfold", None]
    rec = cells.run_cell(_cell("rvm/evidence:loo=false"))
    assert rec["status"] == "ok" and rec["loo_missing"] == "not asked for (loo=false)"
    assert asked == ["kfold", None]
    with pytest.raises(ValueError, match="loo must be true, false or one of"):
        st.MethodSpec.parse("rvm/evidence:loo=exact")
    with pytest.raises(ValueError, match="loo"):
        st.MethodSpec.parse("svm:loo=false")


@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("loo") / "s"
    t = st.run_study(SMALL, "rvm/evidence,rvm/evidence-mackay,svm", 2, out, progress=False)
    assert (t["status"] == "ok").all(), t["error"].tolist()
    return out, t


def test_cells_stored_before_the_loo_columns_are_recomputed(small_study, tmp_path,
                                                           same_table):
    """A cell file of the previous format (no LOO columns) is not reused by ``--resume``:
    it is recomputed, the current cells are kept, and the table equals a clean run."""
    import shutil

    src, clean = small_study
    out = tmp_path / "s"
    shutil.copytree(src, out)
    files = sorted(out.glob("cells/*/*/*.json"))
    old = next(p for p in files if "evidence-mackay" not in p.parent.name
               and "svm" not in p.parent.name)
    rec = json.loads(old.read_text())
    old.write_text(json.dumps({**{k: v for k, v in rec.items() if not k.startswith("loo_")},
                               "format": 1}))
    kept = {p: p.stat().st_mtime_ns for p in files if p != old}
    t = st.run_study(SMALL, "rvm/evidence,rvm/evidence-mackay,svm", 2, out, resume=True,
                     progress=False)
    assert json.loads(old.read_text())["format"] == 2
    assert all(p.stat().st_mtime_ns == m for p, m in kept.items())
    same_table(t, clean)
    same_table(st.load_table(out), clean)


def test_report_shows_loo_beside_held_out_and_says_whether_they_agree(small_study):
    """The report's LOO table and agreement sentence are those of the study's numbers: the
    means over the splits, Kendall's tau of the two rankings, the first method of each."""
    out, t = small_study
    md = write_report(out).read_text()
    assert "LOO elpd per point: the leave-one-out expected log predictive density" in md
    assert "| method | LOO elpd per point | held-out mean log density | estimator |" in md
    means = t[t["method"] != "svm"].groupby("method", sort=False).agg(
        loo=("loo_elpd_per_point", "mean"), nlpd=("nlpd", "mean"))
    tau = stats.kendalltau(means["loo"], -means["nlpd"]).statistic
    sentence = next(line for line in md.splitlines() if "**LOO vs held-out**" in line)
    assert f"Kendall's tau = {tau:.2f}" in sentence
    best_loo, best_held = means["loo"].idxmax(), (-means["nlpd"]).idxmax()
    if best_loo == best_held:
        assert f"both rank `{best_loo}` first" in sentence
    else:
        assert f"`{best_loo}` by LOO" in sentence and f"`{best_held}` held-out" in sentence
    assert sentence.endswith("no LOO: `svm`.")
    for m in means.index:
        assert f"| `{m}` | {means.loc[m, 'loo']:.3f} ± " in md


def _table(loo_by: dict, held_by: dict, task: str = "regression", **estimators):
    """Three splits per method; per-split values around the given means (the noise sums to
    zero, so the means are exact); ``held_by`` is the held-out mean log density."""
    noise = np.array([-0.01, 0.0, 0.01])
    loss = "nlpd" if task == "regression" else "log_loss"
    rows = []
    for m in loo_by:
        for s in range(3):
            rows.append({"dataset": "d", "split": s, "method": m, "task": task,
                         "status": "ok", "loo_elpd_per_point": loo_by[m] + noise[s],
                         loss: -(held_by[m] + noise[::-1][s]),
                         "loo_estimator": estimators.get(m, "refit") if
                         np.isfinite(loo_by[m]) else "", "loo_seconds": 0.1,
                         "loo_missing": "" if np.isfinite(loo_by[m]) else "baseline"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_agreement_sentence_on_constructed_tables(task):
    """Same order -> agree (tau 1), both first alike; reversed -> disagree (tau -1), the
    best differs; one swap of three -> partly agree (tau 1/3). Held-out density is minus
    NLPD / log loss: the lower loss ranks higher."""
    loo = {"a": -1.0, "b": -1.2, "c": -1.5}
    same = loo_agreement(_table(loo, {"a": -1.1, "b": -1.3, "c": -1.4}, task), "d", task)
    assert "the 3 methods with both agree (Kendall's tau = 1.00)" in same
    assert "both order `a` > `b` > `c`" in same and "both rank `a` first" in same

    held = {"a": -1.6, "b": -1.3, "c": -1.1}
    rev = loo_agreement(_table(loo, held, task), "d", task)
    assert stats.kendalltau(list(loo.values()), list(held.values())).statistic == -1
    assert "disagree (Kendall's tau = -1.00)" in rev
    assert "LOO orders `a` > `b` > `c`; held-out `c` > `b` > `a`" in rev
    assert "the best differs: `a` by LOO (-1.000), `c` held-out (-1.100)" in rev

    held = {"a": -1.3, "b": -1.1, "c": -1.4}
    part = loo_agreement(_table(loo, held, task), "d", task)
    tau = stats.kendalltau(list(loo.values()), list(held.values())).statistic
    assert tau == pytest.approx(1 / 3)
    assert f"partly agree (Kendall's tau = {tau:.2f})" in part
    assert "`a` by LOO (-1.000), `b` held-out (-1.100)" in part


def test_agreement_names_missing_and_optimistic_loo():
    loo = {"a": -1.0, "b": -1.2, "svm": np.nan}
    held = {"a": -1.1, "b": -1.3, "svm": -1.0}
    t = _table(loo, held, b="gaussian")
    text = loo_agreement(t, "d", "regression")
    assert "the 2 methods with both agree" in text  # svm has no LOO: not ranked
    assert "at the full-data hyperparameters (optimistic): `b`" in text
    assert text.endswith("no LOO: `svm`.")
    assert text in conclusions(t, "d", "regression")
    t = pd.concat([t, _table({"c": -1.4}, {"c": -1.2}, c="psis").assign(
        loo_bad_k=[0, 10, 2], n_train=20)])
    text = loo_agreement(t, "d", "regression")
    assert "PSIS unreliable where Pareto k is high (Vehtari et al. 2024): `c` (12 of 60 " \
        "training points)" in text  # 12 of 3 x 20 points
    lt = loo_table(t, "d").set_index("method")
    assert lt.loc["`c`", "estimator"] == "psis (Pareto k high at 12 of 60 training points)"
    assert lt.loc["`b`", "estimator"] == "gaussian"
    assert lt.loc["`svm`", "LOO elpd per point"] == "–"
    assert lt.loc["`svm`", "no LOO because"] == "baseline"
    assert lt.loc["`a`", "held-out mean log density"] == "-1.100 ± 0.010"
    # a table stored without LOO columns: no sentence, no table
    old = t.drop(columns=[c for c in t if c.startswith("loo_")])
    assert loo_agreement(old, "d", "regression") is None and loo_table(old, "d").empty


def test_posteriors_sentence_shows_each_approximation_k_hat_beside_its_sd_ratio():
    """The stored Pareto k-hat (Yao et al. 2018) of a variational fit is reported, as the
    median over its splits, beside its predictive sd relative to NUTS."""
    rows = []
    for s in range(3):
        for m, sd, k in [("rvm/nuts", 0.20, np.nan), ("rvm/advi", 0.16, 2.0 + s),
                         ("rvm/evidence", 0.19, np.nan)]:
            rows.append({"dataset": "d", "split": s, "method": m, "task": "regression",
                         "status": "ok", "pred_sd": sd, "psis_khat": k})
    text = next(c for c in conclusions(pd.DataFrame(rows), "d", "regression")
                if c.startswith("**Posteriors**"))
    assert "`rvm/advi` 0.80 (differs by more than 10%), Pareto k-hat 3.00" in text
    assert "`rvm/evidence` 0.95" in text and "`rvm/evidence` 0.95, Pareto" not in text
    assert "Yao et al. 2018" in text
