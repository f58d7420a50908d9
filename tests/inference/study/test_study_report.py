"""The study report (inference/study/report.py): Markdown whose links resolve and one
self-contained HTML page that a headless browser renders."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import STUDY_DATA as DATA
from conftest import STUDY_METHODS as METHODS
from scipy import stats

from sparsebayes.inference import fit
from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main
from sparsebayes.inference.study.report import paired_tests, write_report
from sparsebayes.models import GaussianKernel, RVMRegression
from sparsebayes.models.datasets import DATASETS

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A tiny study with a built-in set, the user's data and an estimator baseline."""
    out = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=50)
    t = st.run_study({"wave": (X, y)}, ["rvm/evidence", "svm",
                                        "sklearn=sklearn.neighbors.KNeighborsRegressor"], 2,
                     out, progress=False)
    assert (t["status"] == "ok").all(), t["error"].tolist()  # the figure inputs too
    return write_report(out)


def _md_links(md: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", md)


def test_every_markdown_link_resolves(report):
    links = _md_links(report.read_text())
    assert "results.csv" in links and "figures/wave_summary.png" in links
    assert "figures/wave_predictive.png" in links  # 1-D regression: the bands
    with np.load(next((report.parent / "cells").glob("wave*/svm*/split000.npz"))) as f:
        assert f["grid_mean"].shape == (300,)  # svm's curve is drawn in the figure
    for link in links:
        assert (report.parent / link).is_file(), link


def test_html_embeds_every_figure_and_the_table(report):
    page = (report.parent / "report.html").read_text()
    figures = [x for x in _md_links(report.read_text()) if x.endswith(".png")]
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(srcs) == len(figures) >= 3
    for src, fig in zip(srcs, figures):
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.partition(",")[2]) == (report.parent / fig).read_bytes()
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert all(h.startswith(("data:", "http", "#")) for h in hrefs), hrefs
    csv = next(h for h in hrefs if h.startswith("data:text/csv"))
    assert base64.b64decode(csv.partition(",")[2]) == \
        (report.parent / "results.csv").read_bytes()
    assert "<table>" in page and "KNeighborsRegressor" in page


def test_html_renders_in_a_headless_browser(report, tmp_path):
    """A screenshot of the page, alone in an empty folder (so nothing beside it can be
    loaded), is not blank: it shows text, tables and the figures' colours."""
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium/Chrome on this machine (apt-get install chromium)")
    page = tmp_path / "alone.html"
    shutil.copy(report.parent / "report.html", page)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", f"--screenshot={shot}", "--window-size=1200,2000",
                    page.as_uri()], check=True, timeout=120, capture_output=True)
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    ink = np.any(img < 0.9, axis=-1).mean()  # not white
    colour = (np.ptp(img, axis=-1) > 0.25).mean()  # saturated pixels: the figures' lines
    assert img.shape[:2] == (2000, 1200)
    assert ink > 0.03 and colour > 0.001, (ink, colour)


def test_paired_tests_match_scipy(tiny_table):
    pt = paired_tests(tiny_table, DATA, "mse")
    a = tiny_table[tiny_table["method"] == "rvm/evidence"].sort_values("split")["mse"]
    b = tiny_table[tiny_table["method"] == "svm"].sort_values("split")["mse"]
    p = stats.ttest_rel(b.to_numpy(), a.to_numpy()).pvalue
    expected = "<0.01" if p < 0.01 else f"{p:.2f}"
    assert pt.loc["rvm/evidence", "svm"] == expected
    assert pt.loc["mean loss", "svm"] == f"{b.mean():.3f}"


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
    # the report takes the posterior this process saved from memory: the same as the store
    from sparsebayes.inference.compare import basis_key
    from sparsebayes.inference.study import storage

    kept = storage.load_posterior(cell.path(out).with_suffix(".zarr"))
    assert kept is storage.load_posterior(cell.path(out).with_suffix(".zarr"))  # memory
    assert basis_key(kept) == basis_key(stored)
    for group in ("posterior", "gaussian_posterior", "constant_data"):
        xr.testing.assert_allclose(kept[group].to_dataset(), stored[group].to_dataset())
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



def test_holm_against_a_hand_computation():
    """Holm (1979): sorted p = (0.005, 0.01, 0.03, 0.04), m = 4 -> 4 x 0.005 = 0.02,
    3 x 0.01 = 0.03, 2 x 0.03 = 0.06, then max(0.06, 1 x 0.04) = 0.06 (monotone)."""
    from sparsebayes.inference.metrics import holm

    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])  # 2 x 0.5 = 1, then monotone
    with pytest.raises(ValueError, match="p-values"):
        holm([0.1, 1.5])


def _synthetic(losses: dict[str, list[float]], **extra) -> pd.DataFrame:
    rows = []
    for m, values in losses.items():
        for split, v in enumerate(values):
            rows.append({"dataset": "d", "split": split, "method": m, "task": "regression",
                         "status": "ok", "mse": v, "rmse": np.sqrt(v), "mae": v,
                         "n_relevant": extra.get(m, np.nan)})
    return pd.DataFrame(rows)


def test_conclusions_name_the_best_method_with_holm_corrected_tests():
    """The best method is the lowest mean loss; the others' paired t-tests against it
    (scipy.stats.ttest_rel) are Holm-corrected before they are called different."""
    from sparsebayes.inference.metrics import holm
    from sparsebayes.inference.study.report import best_methods, conclusions

    rng = np.random.default_rng(0)
    base = rng.uniform(1, 2, 10)
    t = _synthetic({"a": base + 0.3 + 0.01 * rng.normal(size=10),
                    "b": base + 0.001 * rng.normal(size=10),
                    "c": base + 0.02 + 0.05 * rng.normal(size=10)}, a=5, b=20, c=8)
    res = best_methods(t, "d", "mse")
    assert res["best"] == "b"
    raw = [stats.ttest_rel(t[t.method == m]["mse"], t[t.method == "b"]["mse"]).pvalue
           for m in ("a", "c")]
    np.testing.assert_allclose([res["p"]["a"], res["p"]["c"]], holm(raw))
    text = "\n".join(conclusions(t, "d", "regression"))
    mean_b = t[t.method == "b"]["mse"].mean()
    assert f"`b` is lowest ({mean_b:.3f})" in text
    assert "worse (Holm-adjusted p < 0.05): `a`" in text
    assert "**Sparsity**: `a` keeps the fewest vectors (5.0)" in text


def test_one_colour_per_method_across_the_report():
    from sparsebayes.inference.study.report import method_colors

    names = ["rvm/evidence", "rvm/nuts", "svm"]
    assert method_colors(names) == {"rvm/evidence": "C0", "rvm/nuts": "C1", "svm": "C2"}
    many = method_colors([f"m{i}" for i in range(13)])
    assert len({tuple(v) for v in many.values()}) == 13


def test_a_study_whose_cells_all_fail_reports_the_errors(tmp_path, monkeypatch):
    """Every cell fails (bad option values are refused before any cell runs, so: a fit that
    raises); the report lists each cell's error instead of crashing."""
    import functools

    from sparsebayes.inference import api

    method = api.FIT_METHODS["regression"]["evidence"]

    @functools.wraps(method)  # keeps its signature: the options are still checked
    def failing(*args, **kwargs):
        raise np.linalg.LinAlgError("matrix not positive definite")

    monkeypatch.setitem(api.FIT_METHODS["regression"], "evidence", failing)
    out = tmp_path / "fail"
    t = st.run_study("sinc:n_train=20:n_test=20", "rvm/evidence", 2, out, progress=False)
    assert (t["status"] != "ok").all()
    md = write_report(out).read_text()
    assert "No cell of this data set finished." in md
    for err in t["error"]:
        assert str(err)[:60].replace("|", "\\|") in md
    assert "Training size nan" not in md


def test_marked_vectors_equal_the_tables_count(tmp_path):
    """The figure marks the positions of the relevance vectors the table counts
    (n_relevant: T01's count of kernel vectors, the bias apart), for a pruning fit and for
    one that keeps every weight (VRVM)."""
    out = tmp_path / "marks"
    st.run_study("sinc:n_train=40:n_test=40", "rvm/evidence,rvm/vrvm", 1, out,
                 progress=False)
    t = pd.read_csv(out / "results.csv")
    for cell in out.glob("cells/*/*/*.npz"):
        with np.load(cell) as f:
            marked = f["relevant_x"].shape[0]
        method = "rvm/vrvm" if "vrvm" in str(cell) else "rvm/evidence"
        assert marked == t.loc[t["method"] == method, "n_relevant"].iloc[0], method


def test_report_defines_its_terms_and_the_references_basis():
    """Issue 33 item 4: every column of the tables and each term of the conclusions is
    defined where it appears; the NUTS reference's basis (30 k-means centres) is said beside
    the others' (every training point), since the ratios then compare bases too."""
    from sparsebayes.inference.study.report import TERMS, conclusions, summary_table

    rows = []
    for s in range(3):
        for m, sd, centres in [("rvm/nuts", 0.20, 30), ("rvm/advi", 0.16, 50),
                               ("rvm/evidence", 0.19, 100)]:
            rows.append({"dataset": "d", "split": s, "method": m, "task": "regression",
                         "status": "ok", "pred_sd": sd, "n_centres": centres,
                         "mse": sd + 0.01 * s, "nlpd": -sd - 0.01 * s,
                         "mae": sd, "rmse": sd, "coverage95": 0.95, "fit_seconds": 1.0,
                         "compile_seconds": 2.0 if s == 0 else 0.0, "n_relevant": 5})
    t = pd.DataFrame(rows)
    text = next(c for c in conclusions(t, "d", "regression")
                if c.startswith("**Posteriors**"))
    assert ("the full posterior of the RVM on 30 candidate centres (a k-means dictionary), "
            "while `rvm/advi` 50, `rvm/evidence` 100") in text
    assert "not the same basis" in text and "(the full posterior)" not in text
    same = t.assign(n_centres=30)
    text = next(c for c in conclusions(same, "d", "regression")
                if c.startswith("**Posteriors**"))
    assert "the full posterior on the same 30 candidate centres" in text
    # every column heading of the summary table is a defined term
    columns = set(summary_table(t, "d").columns) - {"method"}
    defined = {part.strip() for key in TERMS for part in key.split("/")}
    assert columns <= defined | {"RMSE", "MAE"}, columns - defined
    assert summary_table(t, "d").iloc[0]["compile s (total)"] == "2.00"  # the sum


def test_generated_report_defines_every_term_it_uses(tmp_path):
    """A written report: each term the issue found undefined is explained in the text."""
    out = tmp_path / "terms"
    st.run_study("sinc:n_train=20:n_test=20", "rvm/evidence,gp/evidence", 2, out,
                 progress=False)
    md = write_report(out).read_text()
    for term, definition in [("NLPD", "mean negative log predictive density"),
                             ("compile s (total)", "seconds of compilation"),
                             ("relevance vectors", "'–' for a GP"),
                             ("Kendall's tau", "the rank correlation of the two orders"),
                             ("## Glossary", "max R-hat"),
                             ("### Methods", "- `gp/evidence`: a Gaussian process"),
                             ("`n<2`", "fewer than two common splits"),
                             ("`equal`", "the same loss on every common split"),
                             ("Holm", "Holm-adjusted"),
                             ("LOO elpd per point", "Vehtari, Gelman & Gabry 2017")]:
        assert term in md and definition in md, term


def test_first_cell_compilation_is_reported_apart_from_its_fit(tmp_path, monkeypatch):
    """A study whose first fit compiles: the compilation (here a stand-in that sleeps on a
    method's first call in the process, as numba's JIT does) is in compile_seconds, timed by
    the warm-up, and not in fit_seconds; later cells compile nothing."""
    import functools
    import time

    from sparsebayes.inference import api
    from sparsebayes.inference.study import cells

    method = api.FIT_METHODS["regression"]["evidence"]
    compiled = []

    @functools.wraps(method)
    def compiling(*args, **kwargs):
        if not compiled:
            time.sleep(3.0)  # the first call compiles
            compiled.append(True)
        return method(*args, **kwargs)

    monkeypatch.setitem(api.FIT_METHODS["regression"], "evidence", compiling)
    monkeypatch.setattr(cells, "_WARM", set())
    t = st.run_study("sinc:n_train=30:n_test=20", "rvm/evidence:loo=false", 3, None,
                     progress=False)
    assert (t["status"] == "ok").all()
    assert t["compile_seconds"].iloc[0] >= 3.0 and (t["compile_seconds"].iloc[1:] == 0).all()
    assert (t["fit_seconds"] < 3.0).all()


# --------------------------------------------------------------------------------------
# issue 46 item 6: the report as a reader wants it
# --------------------------------------------------------------------------------------
def _two_sets() -> pd.DataFrame:
    """A regression set `r` (`a` best by NLPD, then `x`, then `b`; `svm` without a
    predictive density) and a classification set `c` (`b` best by log loss, LOO preferring
    `a`), six splits each."""
    rng = np.random.default_rng(3)
    rows = []
    for d, task, col, held in [("r", "regression", "nlpd", {"a": 0.5, "x": 0.8, "b": 1.0}),
                               ("c", "classification", "log_loss", {"a": 0.6, "b": 0.3})]:
        loo = {"a": -0.4, "x": -0.9, "b": -1.1}  # a first by LOO on both data sets
        for m in [*held, "svm"]:
            for s in range(6):
                v = held[m] + 0.01 * rng.normal() if m in held else np.nan
                rows.append({"dataset": d, "split": s, "method": m, "task": task,
                             "status": "ok", col: v, "probabilistic": int(m in held),
                             "loo_elpd_per_point": loo[m] + 0.01 * rng.normal()
                             if m in held else np.nan})
    return pd.DataFrame(rows)


def test_conclusion_states_the_best_per_data_set_and_across_from_the_numbers():
    """The report's Conclusion: per data set the best held-out score with the Holm-adjusted
    paired tests' verdict and whether LOO ranks alike; across data sets the mean rank, the
    data sets each method is best on and how often LOO picks the held-out best."""
    from sparsebayes.inference.study.report import study_conclusion

    t = _two_sets()
    lines = study_conclusion(t, ["r", "c"])
    r, c, across, loo = lines
    nlpd_a = t[(t.dataset == "r") & (t.method == "a")]["nlpd"].mean()
    assert r.startswith(f"`r` (regression): `a` has the best held-out NLPD ({nlpd_a:.3f}), "
                        "and the paired t-tests find every other method worse (p < 0.05)")
    assert "not ranked (no predictive density): `svm`" in r
    assert "LOO ranks the 3 methods with a LOO as held-out does and puts `a` first too" in r
    assert c.startswith("`c` (classification): `b` has the best held-out log loss")
    assert "LOO ranks the 2 methods with a LOO differently (Kendall's tau -1.00) and puts " \
        "`a` first (held-out: `b`)" in c
    # ranks: r a 1, x 2, b 3; c b 1, a 2 -> a 1.5, b 2.0, x 2.0 on 1 of 2 data sets
    assert "Across the 2 data sets, mean rank by the held-out score" in across
    assert "`a` 1.5" in across and "`b` 2.0" in across
    assert "`x` 2.0 (1 of 2 data sets)" in across
    assert "best: `a` on `r`; `b` on `c`" in across
    assert loo.startswith("LOO on the training split picks the held-out best on 1 of 2 "
                          "data sets (mean Kendall's tau 0.00)")
    # a close call: the tests cannot tell the best from the rest, and the text says so
    close = t.assign(nlpd=np.where(t["method"] == "x", t["nlpd"] - 0.3, t["nlpd"]))
    r = study_conclusion(close, ["r"])[0]
    assert "`a` has the best held-out NLPD" in r and "cannot tell it from `x` (" in r
    assert "worse (p < 0.05): `b`" in r and len(study_conclusion(close, ["r"])) == 1


def test_report_opens_with_the_conclusion_and_ends_with_a_glossary_of_its_methods(report):
    """Conclusion before the first data set; a glossary naming each method of this study
    (and no other) and each abbreviation the text uses."""
    md = report.read_text()
    assert md.index("## Conclusion") < md.index("## `wave`") < md.index("## Glossary")
    conclusion = md[md.index("## Conclusion"):md.index("## `wave`")]
    assert "`rvm/evidence` has a held-out NLPD" in conclusion or \
        "only `rvm/evidence` has a held-out NLPD" in conclusion
    glossary = md[md.index("## Glossary"):]
    methods = glossary[glossary.index("### Methods"):glossary.index("### Terms")]
    assert "- `rvm/evidence`: the relevance vector machine (RVM, Tipping 2001)" in methods
    assert "- `svm`: a support vector machine" in methods
    assert "- `KNeighborsRegressor`: a scikit-learn estimator, " \
        "`sklearn.neighbors.KNeighborsRegressor`" in methods
    assert "NUTS" not in methods and "`rvm/vrvm`" not in methods  # not in this study
    for term in ("NLPD", "LOO", "elpd", "Holm", "held-out"):
        assert f"- **{term}**" in glossary, term


def test_method_glossary_says_what_options_change():
    from sparsebayes.inference.study.report import method_glossary

    methods = [st.MethodSpec.parse(m) for m in
               ("rvm/nuts:centres=30:chains=4:draws=2000:tune=500", "rvm*/evidence",
                "rvm/vrvm", "rvm/advi:centres=50")]
    lines = method_glossary(methods, {methods[0].label: "rvm/nuts",
                                      methods[3].label: "rvm/advi"})
    assert lines[0].startswith("- `rvm/nuts`: the RVM's full posterior sampled by the "
                               "No-U-Turn sampler")
    assert "k-means dictionary of 30 candidate centres" in lines[0]
    assert "4 chains, 2000 draws each, 500 tuning steps" in lines[0]
    assert lines[1].startswith("- `rvm*/evidence`: the `rvm/evidence` fit predicting as RVM*")
    assert lines[2].startswith("- `rvm/vrvm`: the variational RVM (Bishop & Tipping 2000)")
    assert lines[3].startswith("- `rvm/advi`: the RVM's PyMC model fitted by mean-field")


def test_summary_figure_tick_labels_do_not_run_together():
    """Losses of 0.0100 ... 0.0118 in a narrow panel printed "0.010750.011000.01125" (seven
    5-decimal ticks): at most 4 ticks, an offset where needed, no two labels touching."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from sparsebayes.inference.study.report import method_colors, summary_figure

    rng = np.random.default_rng(0)
    rows = [{"dataset": "sinc", "split": s, "method": m, "task": "regression",
             "status": "ok", "mse": 0.0108 + 3e-4 * (i + rng.normal()),
             "mae": 0.08 + 3e-4 * rng.normal(), "nlpd": -0.9 + 3e-4 * rng.normal()}
            for i, m in enumerate(["rvm/evidence", "rvm*/evidence"]) for s in range(10)]
    fig = summary_figure(pd.DataFrame(rows), "sinc", "regression",
                         method_colors(["rvm/evidence", "rvm*/evidence"]))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in fig.axes:
        lo, hi = sorted(ax.get_xlim())
        labels = [t for t in ax.get_xticklabels()
                  if t.get_visible() and t.get_text() and lo <= t.get_position()[0] <= hi]
        assert 2 <= len(labels) <= 5, [t.get_text() for t in labels]
        boxes = [t.get_window_extent(renderer) for t in labels]
        gaps = [b.x0 - a.x1 for a, b in zip(boxes, boxes[1:])]
        assert min(gaps) > 4, [t.get_text() for t in labels]  # pixels between labels


def test_mean_losses_print_distinct_when_they_differ():
    """Every method's mean squared error on sinc printed 0.011: the paired tests' first row
    and the conclusions take the digits that tell distinct means apart."""
    from sparsebayes.inference.study.report import conclusions
    from sparsebayes.inference.testing import distinct_digits as _distinct

    t = _synthetic({"a": [0.01071, 0.01079], "b": [0.01100, 0.01104],
                    "c": [0.01090, 0.01106]})
    row = paired_tests(t, "d", "mse").loc["mean loss"]
    assert row.to_dict() == {"a": "0.01075", "b": "0.01102", "c": "0.01098"}
    assert _distinct([0.0107, 0.011, 0.011]) == ["0.0107", "0.0110", "0.0110"]
    assert _distinct([0.1 + 0.2, 0.3]) == ["0.300", "0.300"]  # equal but for rounding
    assert _distinct([0.5, 0.25]) == ["0.500", "0.250"]  # 3 decimals still the least
    text = conclusions(t, "d", "regression")[0]
    assert "`a` is lowest (0.01075)" in text and "0.011)" not in text


def test_high_pareto_k_is_counted_never_rounded_to_zero_percent():
    """1 point of 400 with a high Pareto k printed "(0% of points)"; now its count."""
    from sparsebayes.inference.study.report import loo_agreement, loo_table

    rows = [{"dataset": "d", "split": s, "method": m, "task": "regression", "status": "ok",
             "nlpd": 1.0 + i + 0.01 * s, "loo_elpd_per_point": -1.0 - i + 0.01 * s,
             "loo_estimator": e, "loo_bad_k": k, "n_train": 200}
            for s in range(2) for i, (m, e, k) in enumerate(
                [("rvm/nuts", "psis", s), ("rvm/evidence", "subsample", np.nan),
                 ("rvm/advi", "reloo", 0)])]
    t = pd.DataFrame(rows)
    text = loo_agreement(t, "d", "regression")
    assert "PSIS unreliable where Pareto k is high (Vehtari et al. 2024): `rvm/nuts` (1 of " \
        "400 training points)." in text
    assert "0%" not in text and "`rvm/advi` (" not in text  # reloo refitted its points
    est = loo_table(t, "d").set_index("method")["estimator"]
    assert est["`rvm/nuts`"] == "psis (Pareto k high at 1 of 400 training points)"
    assert est["`rvm/advi`"] == "reloo"


def test_warnings_are_shortened_towhole_sentences_and_grouped():
    """A warnings cell stopped at "Run more draws or ": whole sentences only, the same
    warnings of a method on a data set in one row with its splits."""
    from sparsebayes.inference.study.report import warnings_table, whole_sentences

    nuts = ("SamplingWarning: NUTS diagnostics look bad: max R-hat 1.013 > 1.01 (chains "
            "disagree); min bulk ESS 150 < 400; min tail ESS 180 < 400; 3 divergent "
            "transitions (the sampler missed regions of high curvature; try "
            "target_accept=0.95 or more). Run more draws or chains before trusting the "
            "posterior.")
    other = "NumericalWarning: alpha reached its floor. Some classes may be separable."
    assert whole_sentences(nuts) == nuts  # 255 characters: whole
    short = whole_sentences(nuts, 100)
    assert short.endswith("or more). [more in results.csv]")
    assert "Run more" not in short
    warn = pd.DataFrame({"dataset": "sinc", "method": "rvm/nuts", "split": [2, 0, 1],
                         "warnings": [nuts + " | " + other, nuts + " | " + other, other]})
    wt = warnings_table(warn)
    assert wt["splits"].tolist() == ["0, 2", "1"]
    for text in wt["warnings"]:
        assert text.endswith(("posterior.", "separable.", "[more in results.csv]")), text
    assert whole_sentences(np.nan) == ""
    assert whole_sentences("LinAlgError: not\npositive definite.") == \
        "LinAlgError: not positive definite."  # one line in a table cell


def test_cli_names_both_report_files(report, capsys):
    assert main(["report", str(report.parent)]) == 0
    said = capsys.readouterr().out
    assert f"{report}" in said and f"{report.parent / 'report.html'}" in said
