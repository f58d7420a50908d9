"""compare_posteriors: results of several methods on one basis and one draw count."""

import re

import numpy as np
import pytest
from conftest import ROOT

from sparsebayes.inference import compare_posteriors, fit
from sparsebayes.models import GaussianKernel, RVMRegression

README = ROOT / "docs" / "guide" / "comparing.md"


@pytest.fixture(scope="module")
def sinc_posts():
    x = np.linspace(-10, 10, 60)
    t = np.sinc(x / np.pi) + np.random.default_rng(0).uniform(-0.2, 0.2, 60)
    problem = RVMRegression(x[:, None], t, kernel=GaussianKernel(3.0))
    return problem, {m: fit(problem, m, seed=1) for m in ("evidence", "vrvm")}


def test_readme_comparison_example_runs():
    """The README's comparison block, as written, runs (az.plot_forest on a mix of methods
    used to raise, or NaN-pad and drop the evidence result)."""
    import matplotlib

    matplotlib.use("Agg")
    block = re.search(r"<!-- compare-example -->\s*```python\n(.*?)```", README.read_text(),
                      re.S).group(1)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    aligned = scope["aligned"]
    assert set(aligned) == {"evidence", "vrvm", "advi"}
    sizes = {m: dict(p["posterior"].sizes) for m, p in aligned.items()}
    assert all(s == sizes["evidence"] for s in sizes.values())
    assert sizes["evidence"]["draw"] == 500 and sizes["evidence"]["basis"] == 61


def test_pruned_weights_are_zero_and_active_ones_keep_their_gaussian(sinc_posts):
    """On the whole basis an evidence result's pruned weights are exactly 0 with alpha =
    inf (T01 §2); its relevance vectors keep N(mu, Sigma): the aligned draws' means and sds
    equal mu and sqrt(diag Sigma) within Monte Carlo error (4 standard errors)."""
    problem, posts = sinc_posts
    aligned = compare_posteriors(posts, draws=1000, seed=3)["evidence"]["posterior"]
    g = posts["evidence"]["gaussian_posterior"]
    kept = [str(b) for b in g["basis"].values]
    pruned = sorted(set(problem.basis.labels) - set(kept))
    assert list(aligned["basis"].values) == problem.basis.labels
    assert np.all(aligned["w"].sel(basis=pruned).values == 0.0)
    assert np.all(np.isinf(aligned["alpha"].sel(basis=pruned).values))
    w = aligned["w"].sel(basis=kept).values.reshape(-1, len(kept))
    sd = np.sqrt(np.diag(g["Sigma"].values))
    assert np.all(np.abs(w.mean(0) - g["mu"].values) <= 4 * sd / np.sqrt(w.shape[0]))
    np.testing.assert_allclose(w.std(0), sd, rtol=0.1)


def test_resampling_keeps_the_draws_distribution(sinc_posts):
    """The common draw count comes from the result's own draws (seeded): every variable's
    mean stays within 4 Monte Carlo standard errors of the original's."""
    _, posts = sinc_posts
    orig = posts["vrvm"]["posterior"]
    got = compare_posteriors(posts, draws=700, seed=0)["vrvm"]["posterior"]
    for name in ("w", "noise_sd"):
        a = orig[name].values.reshape(-1, *orig[name].shape[2:])
        b = got[name].sel(basis=orig["basis"].values).values if "basis" in orig[name].dims \
            else got[name].values
        b = b.reshape(-1, *b.shape[2:])
        se = a.std(0) / np.sqrt(b.shape[0]) + 1e-12
        assert np.all(np.abs(b.mean(0) - a.mean(0)) <= 4 * se)


def test_different_basis_functions_are_refused(sinc_posts):
    """Equal labels on another dictionary or width name other functions: refused, naming
    both results."""
    problem, posts = sinc_posts
    other = RVMRegression(problem.X, problem.t, kernel=GaussianKernel(2.0))
    with pytest.raises(ValueError, match="'wide'.*'evidence'.*different basis functions"):
        compare_posteriors({"evidence": posts["evidence"], "wide": fit(other, seed=0)})
    dictionary = RVMRegression(problem.X, problem.t, kernel=GaussianKernel(3.0), centres=10)
    with pytest.raises(ValueError, match="different basis functions"):
        compare_posteriors({"evidence": posts["evidence"], "dict": fit(dictionary, seed=0)})
    with pytest.raises(TypeError, match="non-empty dict"):
        compare_posteriors([posts["evidence"]])
    with pytest.raises(ValueError, match="draws must be"):
        compare_posteriors(posts, draws=0)
