"""The README front page: its example runs as written and draws the committed figure, it
stays a front page (at most 250 lines), and its links into docs/ resolve. The Sphinx site
itself is built with warnings as errors by `make docs`, which `make test` runs first."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_is_a_front_page_whose_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http:", "https:"))]
    assert "docs/guide/index.md" in local and "docs/_static/readme_sinc.png" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing
    for command in ("make study  # main job", "make test   # the test suite"):
        assert command in text
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\bdocs\b", makefile, re.M)  # make test builds the docs
    assert "sphinx-build -W --keep-going -b html docs docs/_build/html" in makefile


def test_readme_example_runs_and_draws_its_figure(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    block = re.search(r"<!-- readme-example -->\s*```python\n(.*?)```", README.read_text(),
                      re.S).group(1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / "_static").mkdir(parents=True)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    post, rv, pred = scope["post"], scope["rv"], scope["pred"]
    assert post.attrs["converged"]
    # the circled vectors are the fit's relevance vectors (Tipping's count, bias excluded)
    assert len(rv) == post.attrs["n_kernel_vectors"] > 0
    lo, hi = pred.interval(0.95)
    assert (lo < pred.mean).all() and (pred.mean < hi).all()
    png = (tmp_path / "docs" / "_static" / "readme_sinc.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert (ROOT / "docs" / "_static" / "readme_sinc.png").read_bytes().startswith(b"\x89PNG")


def test_readme_count_example_recovers_the_rate():
    """The Count data section's block as written, and its numbers: the rate exp(1 + sin x)
    recovered to a relative RMS of 0.08 with 5 relevance vectors."""
    import numpy as np

    block = re.search(r"<!-- readme-counts -->\s*```python\n(.*?)```", README.read_text(),
                      re.S).group(1)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    post, pred, X = scope["post"], scope["pred"], scope["X"]
    rate = np.exp(1 + np.sin(X[:, 0]))
    rel_rms = np.sqrt(np.mean((pred.mean - rate) ** 2)) / np.sqrt(np.mean(rate**2))
    assert round(float(rel_rms), 2) == 0.08 and post.attrs["n_kernel_vectors"] == 5
    assert "relative RMS of 0.08 on these 200 points with 5 relevance vectors" in \
        " ".join(README.read_text().split())


def test_extending_guides_geometric_likelihood_runs_and_recovers_the_rate(monkeypatch):
    """The extending guide's new likelihood, as written: a geometric RVM registered at run
    time fits, predicts and gives leave-one-out; its rate recovered (relative RMS < 0.25),
    its predictive pmf at zero variance SciPy's ``geom`` (shifted to start at 0)."""
    import numpy as np
    from scipy import stats

    from sparsebayes.inference import families

    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    text = (ROOT / "docs" / "guide" / "extending.md").read_text()
    block = re.search(r"<!-- extending-geometric -->\s*```python\n(.*?)```", text,
                      re.S).group(1)
    scope: dict = {"__name__": "extending_example"}
    exec(compile(block, "extending.md", "exec"), scope)
    post, pred, rate, elpd = scope["post"], scope["pred"], scope["rate"], scope["elpd"]
    assert post.attrs["likelihood"] == "geometric" and np.isfinite(elpd.elpd)
    assert np.sqrt(np.mean((pred.mean / rate - 1) ** 2)) < 0.25
    lik = scope["Geometric"](np.zeros(0))
    k, f = np.arange(6), np.full(6, 0.7)
    np.testing.assert_allclose(lik.logpdf(k, f),
                               stats.geom(1 / (1 + np.exp(f))).logpmf(k + 1), rtol=1e-12)
    np.testing.assert_allclose(lik.cdf(k, f), stats.geom(1 / (1 + np.exp(f))).cdf(k + 1),
                               rtol=1e-12)
    lik, f, h = scope["Geometric"](k), np.linspace(-2, 3, 6), 1e-5
    g, B, _ = lik.derivatives(f)
    np.testing.assert_allclose(g, (lik.logpdf(k, f + h) - lik.logpdf(k, f - h)) / (2 * h),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(B, (lik.derivatives(f - h)[0] - lik.derivatives(f + h)[0])
                               / (2 * h), rtol=1e-6)


def test_models_guides_robust_regression_block_runs_and_the_outliers_do_not_pull_it(capsys):
    """The models guide's Student-t block, as written: its two printed errors (Gaussian,
    then Student-t) are those the guide states, the robust one under half the other."""

    text = (ROOT / "docs" / "guide" / "models.md").read_text()
    block = re.search(r"<!-- robust-regression -->\s*```python\n(.*?)```", text,
                      re.S).group(1)
    exec(compile(block, "models.md", "exec"), {"__name__": "robust_example"})
    gauss, robust = (float(v) for v in capsys.readouterr().out.split())
    assert robust < 0.5 * gauss
    stated = re.search(r"prints ([0-9.]+) and ([0-9.]+)", " ".join(text.split()))
    assert stated is not None and (float(stated.group(1)), float(stated.group(2))) == \
        (round(gauss, 3), round(robust, 3))
