"""fit() for a user at a terminal: progress bars of the samplers, clear
messages in place of PyMC's, option names checked, warnings at the user's line."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from sparsebayes.inference import fit
from sparsebayes.inference.numerics import show_progress
from sparsebayes.models import GaussianKernel, RVMClassification, RVMRegression, SamplingWarning


@pytest.fixture(scope="module")
def problem():
    x = np.linspace(-10, 10, 25)
    t = np.sinc(x / np.pi) + np.random.default_rng(0).uniform(-0.2, 0.2, x.size)
    return RVMRegression(x[:, None], t, kernel=GaussianKernel(width=3.0))


def test_progressbar_default_follows_the_session(monkeypatch):
    import sys

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert show_progress(None) is True  # a terminal
    monkeypatch.setenv("CI", "true")
    assert show_progress(None) is False  # CI, even in a terminal
    assert show_progress(True) is True and show_progress(False) is False
    with pytest.raises(TypeError, match="progressbar must be True, False or None"):
        show_progress("yes")
    monkeypatch.delenv("CI")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert show_progress(None) is False  # a log file, a study's worker


def test_fit_names_unknown_options_and_refuses_tune_0_for_nutpie(problem):
    with pytest.raises(TypeError, match=r"unknown option 'draw' for fit\(\.\.\., 'nuts'\) "
                                        r"of a RVMRegression; did you mean 'draws'\?"):
        fit(problem, "nuts", draw=100)
    with pytest.raises(TypeError, match="unknown option 'progressbar' for fit"):
        fit(problem, "evidence", progressbar=True)  # nothing to show: no bar
    # nutpie's adaptation asserts tune > 0: a Rust panic (a BaseException) before this
    with pytest.raises(ValueError, match=r"tune must be >= 1 with sampler='nutpie'"):
        fit(problem, "nuts", tune=0, draws=10, chains=1)
    with pytest.raises(ValueError, match=r"form must be one of \('auto', 'direct', "):
        fit(problem, "nuts", form="op")
    with pytest.raises(ValueError, match="form='woodbury' applies to the collapsed regression"):
        fit(problem, "nuts", form="woodbury", collapsed=False)
    labels = RVMClassification(problem.X, (problem.t > 0.2).astype(int),
                               kernel=GaussianKernel(width=3.0))
    with pytest.raises(ValueError, match="form='woodbury' applies to the collapsed regression"):
        fit(labels, "nuts", form="woodbury")


def test_nuts_samples_the_op_form_by_default_under_nutpie(problem):
    """Under nutpie ``form="auto"`` samples the closed-form-gradient Op and says so; its draws
    of ``beta`` agree with the Woodbury graph's (the same posterior, differentiated by
    PyTensor) within Monte Carlo error. Other samplers keep the graph."""
    from sparsebayes.models.pymc_models import auto_form

    posts = {form: fit(problem, "nuts", seed=3, draws=500, tune=500, chains=2, form=form,
                       warn=False) for form in ("auto", "woodbury-graph")}
    assert posts["auto"].attrs["collapsed_form"] == "woodbury"
    assert posts["woodbury-graph"].attrs["collapsed_form"] == "woodbury-graph"
    assert auto_form(100, 31, "nutpie") == "woodbury"
    assert auto_form(100, 31, "pymc") == auto_form(100, 31) == "woodbury-graph"
    assert auto_form(20, 101, "nutpie") == "direct"
    means = [float(np.log(p["posterior"]["beta"]).mean()) for p in posts.values()]
    sds = [float(np.log(p["posterior"]["beta"]).std()) for p in posts.values()]
    assert abs(means[0] - means[1]) < 0.25 * max(sds)


def test_advi_runs_the_op_form_and_follows_the_graph(problem, monkeypatch):
    """ADVI on the collapsed regression model takes the Op by default; with the same seed
    the Woodbury graph (PyTensor's derivative of the same density) takes the same Adam
    steps up to rounding: the ELBO traces and the draws of ``beta`` agree."""
    import sparsebayes.inference.rvm.pymc as rvm_pymc
    from sparsebayes.models.pymc_models import auto_form

    assert auto_form(100, 31, "advi") == auto_form(100, 31, "fullrank_advi") == "woodbury"
    op = fit(problem, "advi", seed=5)
    monkeypatch.setattr(rvm_pymc, "auto_form", lambda n, m, sampler=None: "woodbury-graph")
    graph = fit(problem, "advi", seed=5)
    assert op.attrs["collapsed_form"] == "woodbury"
    assert graph.attrs["collapsed_form"] == "woodbury-graph"
    elbo = [p["sample_stats"]["elbo"].values for p in (op, graph)]
    assert elbo[0].shape == elbo[1].shape
    np.testing.assert_allclose(elbo[0], elbo[1], rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(op["posterior"]["beta"], graph["posterior"]["beta"], rtol=1e-7)


def test_advi_progress_and_convergence_message(problem, capfd, caplog):
    """PyMC's "Interrupted at 1,499 [4%]" after the convergence check stopped pm.fit is
    replaced by "ADVI converged after n iterations" (with the bar only)."""
    caplog.set_level(logging.INFO, logger="pymc")  # as in a session: PyMC logs INFO
    quiet = fit(problem, "advi", seed=0, window=100, draws=20, progressbar=False)
    assert quiet.attrs["converged"] == 1
    out = capfd.readouterr()
    assert "Interrupted" not in out.out + out.err + caplog.text
    assert "converged after" not in out.err  # no bar, no line
    shown = fit(problem, "advi", seed=0, window=100, draws=20, progressbar=True)
    out = capfd.readouterr()
    text = out.out + out.err + caplog.text
    assert "Interrupted at" not in text
    assert f"ADVI converged after {shown.attrs['n_iter']:,} iterations" in out.err
    np.testing.assert_allclose(shown["posterior"]["alpha"], quiet["posterior"]["alpha"])


def test_warnings_point_at_the_callers_line(problem):
    """A warning raised deep inside fit() (pymc_fit -> fit_advi -> fit) names this file,
    not the library's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit(problem, "advi", seed=0, max_iter=50, draws=10)
    assert post.attrs["converged"] == 0
    ours = [w for w in caught if issubclass(w.category, SamplingWarning)]
    assert ours and all(w.filename == __file__ for w in ours), \
        [(w.filename, w.lineno) for w in ours]


def test_nuts_progressbar_with_pymcs_sampler(problem, capfd):
    """progressbar=True reaches PyMC's sampler (and nutpie's); its warnings (a large run
    by the cost estimate, bad diagnostics of 1 short chain) name the caller's line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit(problem, "nuts", sampler="pymc", seed=1, draws=20, tune=20, chains=1,
                   progressbar=True, max_seconds=0)
    assert post["posterior"].sizes["draw"] == 20
    ours = [w for w in caught if issubclass(w.category, SamplingWarning)]
    assert {str(w.message)[:12] for w in ours} == {"this NUTS ru", "NUTS diagnos"}
    assert all(w.filename == __file__ for w in ours)
    assert "Interrupted" not in "".join(capfd.readouterr())


@pytest.mark.parametrize("method", ["evidence", "evidence-mackay", "vrvm"])
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_evidence_warnings_point_at_the_callers_line(problem, method, task):
    """The ConvergenceWarning of every closed-form method, raised two to four calls below
    fit(), names this file (it named api.py)."""
    from sparsebayes.models import ConvergenceWarning, RVMClassification

    if task == "classification":
        X = problem.X
        problem = RVMClassification(X, (X[:, 0] > 0.5).astype(int), kernel=problem.kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(problem, method, max_iter=2)
    ours = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert ours and all(w.filename == __file__ for w in ours), \
        [(w.filename, w.lineno) for w in ours]
