"""Refusals before work (issue 33 item 3): every option value of every fit method is
checked by the one function fit runs (api.check_fit_options) and a study runs it before any
cell; a GP result has no relevance-vector count; messages name the missing data file, the
folder searched and where such files come from; the optimistic-LOO message names what each
family fits to all points."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys

import numpy as np
import pytest

from sparsebayes.inference import api
from sparsebayes.inference import study as st
from sparsebayes.inference.families import REGISTERED
from sparsebayes.models import datasets
from sparsebayes.models.datasets import DATASETS

# bad values of each option (bad types, zero and negative counts, out-of-range numbers)
BAD = {
    **dict.fromkeys(("draws", "chains", "cores", "max_iter", "window", "restarts"),
                    [-5, 0, 2.5, "many", True]),
    "tune": [-1, 1.5, "long"],
    **dict.fromkeys(("tol", "learning_rate"), [0, -1e-3, "small", True]),
    "max_seconds": [-1, float("nan"), "long", True],
    **dict.fromkeys(("target_accept", "relevance"), [0, 1, 1.5, -0.1, "high"]),
    "alpha_min": [-0.1, 1, "tiny"],
    "sampler": ["stan", 3],
    "adaptation": ["full", 1],
    "form": ["op", 3],
    "likelihood": ["probit", 2],
    "alpha": ["per-row", 0],
    "softmax_bound": ["jensen", 1],
    "backend": ["jax", 1],
    **dict.fromkeys(("collapsed", "warn", "local_search", "posterior_predictive",
                     "prior_predictive", "widths_from_gp"), [2, "yes"]),
    "progressbar": ["yes", 2],
    "prior": ["flat", 1.0],
    "width_bounds": [(2.0, 1.0), (-1.0, 1.0), "wide"],
}
# problem kind -> (study family, a built-in data set of that task)
GENERATED = {info.task: name for name, info in reversed(DATASETS.items())
             if info.source == "generator"}  # the first generated data set of each task
STUDY = {f.kind: (f.study_name, GENERATED[f.task]) for f in REGISTERED}
CASES = [(kind, method, option) for kind, methods in api.FIT_METHODS.items()
         for method in methods for option in api.fit_options(kind, method)]


def test_every_option_of_every_method_has_a_check():
    missing = {(k, m, o) for k, m, o in CASES if o not in api.OPTION_CHECKS}
    assert not missing
    assert {o for _, _, o in CASES} <= set(BAD)  # and this test has bad values for it


@pytest.mark.parametrize(("kind", "method", "option"), CASES)
def test_bad_option_values_are_refused(kind, method, option):
    """By check_fit_options and by a study's spec validation, before any cell runs."""
    params = inspect.signature(api.FIT_METHODS[kind][method]).parameters
    defaults = {o: params[o].default for o in api.fit_options(kind, method) if o in params
                and params[o].default is not None}
    api.check_fit_options(kind, method, defaults)  # the defaults pass
    family, data = STUDY[kind]
    for value in BAD[option]:
        with pytest.raises((ValueError, TypeError), match=option):
            api.check_fit_options(kind, method, {option: value})
        if option == "progressbar":  # the study's own option, refused as unknown
            continue
        text = f"{family}/{method}:{option}={value}"
        spec = st.MethodSpec.parse(text) if isinstance(value, str | int | float) else None
        if spec is None or dict(spec.options).get(option) != value:
            continue  # a value the spec grammar cannot write (a tuple) or reads otherwise
        with pytest.raises((ValueError, TypeError), match=option):
            st.run_study(data, text, 1, None, progress=False)


def test_the_op_form_is_refused_where_it_does_not_apply():
    """``form`` chooses the collapsed regression likelihood: a classifier's NUTS and the
    joint model are refused by the same check fit runs."""
    api.check_fit_options("regression", "nuts", {"form": "woodbury"})
    for kind, options in (("classification", {"form": "woodbury"}),
                          ("poisson", {"form": "direct"}),
                          ("regression", {"form": "woodbury", "collapsed": False})):
        with pytest.raises(ValueError, match="applies to the collapsed regression model"):
            api.check_fit_options(kind, "nuts", options)


def test_study_refuses_nuts_negative_draws_before_any_cell(tmp_path, monkeypatch, capsys):
    """The issue's case: rvm/nuts:draws=-5 ran 10 cells that all failed."""
    from sparsebayes.inference.cli import main
    from sparsebayes.inference.study import executors

    def boom(cell):
        raise AssertionError(f"a cell ran: {cell}")

    monkeypatch.setattr(executors, "run_cell", boom)
    out = tmp_path / "out"
    assert main(["study", "--data", "sinc", "--methods", "rvm/nuts:draws=-5", "--out",
                 str(out), "--no-progress"]) == 2
    assert "draws must be a positive integer, got -5 in method spec 'rvm/nuts:draws=-5'" \
        in capsys.readouterr().err
    assert not out.exists()
    for text, message in {"rvm/evidence:centres=0": "centres must be a positive integer",
                          "rvm/evidence:bias=3": "bias must be true or false",
                          "rvm/evidence:kernel=foo": "unknown kernel 'foo'",
                          "rvm/nuts:tune=0": "tune must be >= 1 with sampler='nutpie'"}.items():
        with pytest.raises(ValueError, match=message):
            st.run_study("sinc", text, 1, out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("splits", [0, -3])
def test_cli_refuses_zero_and_negative_splits(tmp_path, splits):
    """Issue 46 item 7: ``--splits 0`` ran the default 10 splits (``args.splits or 10``);
    the command (stdout and stderr piped) and ``run_study`` refuse it as they refuse -3."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "sparsebayes.inference.cli", "study", "--splits", str(splits),
         "--data", "sinc", "--methods", "svm", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith(
        f"sparsebayes study: error: splits must be a positive integer, got {splits}")
    assert proc.stdout == "" and not out.exists()
    with pytest.raises(ValueError, match=f"splits must be a positive integer, got {splits}"):
        st.run_study("sinc", "svm", splits, None, progress=False)


def test_fit_refuses_bad_values_before_any_work(monkeypatch):
    """fit runs the same checks first: the evidence method's draws were checked only after
    the optimisation (when building the result)."""
    from sparsebayes.models import GaussianKernel, RVMRegression

    @functools.wraps(api.FIT_METHODS["regression"]["evidence"])  # its signature
    def boom(*args, **kwargs):
        raise AssertionError("the method ran")

    monkeypatch.setitem(api.FIT_METHODS["regression"], "evidence", boom)
    X, t = datasets.sinc(20, seed=0)
    problem = RVMRegression(X, t, kernel=GaussianKernel(3.0))
    with pytest.raises(ValueError, match="draws must be a positive integer, got -5"):
        api.fit(problem, "evidence", draws=-5)
    with pytest.raises(ValueError, match="posterior_predictive must be true or false"):
        api.fit(problem, "evidence", posterior_predictive="yes")


def test_gp_results_have_no_relevance_vector_count():
    """A GP keeps every training point: no n_relevant (it said -1); the study table's
    column is NaN and the report shows '–'."""
    from sparsebayes.inference.study.report import summary_table
    from sparsebayes.models import GPRegression

    X, t = datasets.sinc(30, seed=1)
    post = api.fit(GPRegression(X, t), "evidence", seed=0)
    assert "n_relevant" not in post.attrs
    table = st.run_study("sinc", "gp/evidence,rvm/evidence:loo=false", 1, None,
                         progress=False)
    gp = table[table["method"] == "gp/evidence"]
    assert gp["n_relevant"].isna().all()
    assert (table.loc[table["method"] != "gp/evidence", "n_relevant"] >= 1).all()
    row = summary_table(table, "sinc").set_index("method").loc["`gp/evidence`"]
    assert row["relevance vectors"] == "–"


def test_missing_data_file_message_says_what_where_and_whence(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSEBAYES_DATA", raising=False)
    with pytest.raises(FileNotFoundError) as err:
        st.run_study("boston,banana", "rvm/evidence", 1, None, progress=False)
    text = str(err.value)
    for part in ("boston.csv", "no data folder given", "--data-dir", "SPARSEBAYES_DATA",
                 "scikit-learn 1.1.3"):
        assert part in text
    with pytest.raises(FileNotFoundError) as err:
        st.run_study("banana", "rvm/evidence", 1, None, data_dir=tmp_path, progress=False)
    text = str(err.value)
    for part in ("banana.npz", f"not found in the data folder {tmp_path.resolve()}",
                 "IDA benchmark"):
        assert part in text
    with pytest.raises(FileNotFoundError, match=r"boston\.csv.*does not exist"):
        datasets.load_boston(data_dir=tmp_path / "nope")
    assert set(datasets.SOURCES) == set(datasets.FILES)  # every file has its provenance


def test_optimistic_loo_message_names_each_familys_hyperparameters():
    """The GP's message said 'the pruning', which a GP does not have."""
    from sparsebayes.inference import loo, loo_compare
    from sparsebayes.models import GaussianKernel, GPRegression, RVMRegression

    X, t = datasets.sinc(25, seed=2)
    gp = api.fit(GPRegression(X, t), "evidence", seed=0)
    rvm = api.fit(RVMRegression(X, t, kernel=GaussianKernel(3.0)), "evidence", seed=0)
    with pytest.raises(ValueError) as err:
        loo_compare({"gp": loo(gp, "gaussian"), "rvm": loo(rvm, "refit")})
    text = str(err.value)
    assert "length scales, signal sd and noise sd" in text
    assert "pruning" not in text and "alpha" not in text
    with pytest.raises(ValueError, match="the RVM's alpha, beta and pruning"):
        loo_compare({"rvm": loo(rvm, "gaussian"), "gp": loo(gp, "refit")})
    assert np.isfinite(float(loo(gp, "gaussian").elpd))
