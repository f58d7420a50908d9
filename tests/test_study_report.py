"""The study report (inference/study/report.py): Markdown whose links resolve and one
self-contained HTML page that a headless browser renders."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sparsebayes.inference import study as st
from sparsebayes.inference.study.report import write_report

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
