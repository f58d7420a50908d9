"""One cell of a study, (data set, split, method): load the split, fit, predict on the test
inputs, score with :mod:`sparsebayes.inference.metrics`. Cells are independent and seeded
from (study seed, data set, split, method) only, so every executor gives the same record."""

from __future__ import annotations

import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sparsebayes.inference.families import family_of
from sparsebayes.inference.methods import METHODS, method_of
from sparsebayes.models.datasets import CLASSIFICATION, Split

from . import storage
from .data import DataSpec, load_split
from .specs import BASELINES, FAMILIES, RUNNER_OPTIONS, MethodSpec, seed_of

__all__ = ["Cell", "run_cell", "score", "leave_one_out", "STUDY_LOO_REFITS", "GP_EXACT_MAX_N",
           "GP_INDUCING", "RVM_CENTRES", "LEARNED_LIKELIHOOD_CENTRES", "dictionary_size"]

#: The most exact refits of a study cell's subsampled leave-one-out (``loo_refits`` option)
STUDY_LOO_REFITS = 10
#: GP regression on more training points than this is the sparse GP (Titsias 2009) on
#: ``GP_INDUCING`` k-means inducing inputs, unless the method's ``inducing`` option is given
#: (``inducing=none``: the exact GP at any size)
GP_EXACT_MAX_N = 3000
GP_INDUCING = 300
#: The RVM families' cells on more training points than this fit a k-means dictionary of this
#: many centres (Tipping & Faul 2003 on a candidate subset), unless the method's ``centres``
#: option is given (``centres=none``: every training point a candidate)
RVM_CENTRES = 1000
#: ... and the RVMs whose likelihood learns parameters of its own (the Student-t's scale and
#: degrees of freedom, the negative binomial's dispersion: every value tried is a whole
#: sparse fit) this many
LEARNED_LIKELIHOOD_CENTRES = 200


def dictionary_size(family) -> int:
    """The k-means dictionary's size of a model family's cells above :data:`RVM_CENTRES`
    training points (:data:`LEARNED_LIKELIHOOD_CENTRES` where its likelihood has parameters
    learned by type-II ML, else :data:`RVM_CENTRES`)."""
    likelihood = getattr(family.problem_type, "likelihood_type", None)
    return LEARNED_LIKELIHOOD_CENTRES if getattr(likelihood, "param_names", ()) else RVM_CENTRES

WIDTH_FACTORS = np.array([0.5, 0.7, 1.0, 1.4, 2.0])  # width=cv tries these x the default


@dataclass(frozen=True)
class Cell:
    """One (data set, split, method) of a study; ``figures`` asks for the plot inputs and
    the posterior to be returned as well."""

    data: DataSpec
    split: int
    method: MethodSpec
    seed: int = 0
    data_dir: str | None = None
    figures: bool = False
    blas_threads: int | None = 1

    @property
    def key(self) -> dict[str, Any]:
        """What a stored result must match to be reused."""
        return storage.cell_key(self.data.label, self.split, self.method.label, self.seed,
                                self.data.digest)

    @property
    def fit_seed(self) -> int:
        return seed_of(self.seed, self.data.label, self.split, self.method.label)

    def path(self, out: Path) -> Path:
        return storage.cell_path(out, self.data.label, self.method.label, self.split)


def score(pred, y, task: str) -> dict[str, float]:
    """The table's losses of one cell by :mod:`sparsebayes.inference.metrics`: ``pred`` is a
    predictive (Gaussian / mixture; class probabilities) or, for a method without one, the
    array of predicted means / labels (then only the point losses)."""
    from sparsebayes.inference import metrics

    if task != CLASSIFICATION:  # real targets or counts: the predictive's mean and density
        out = {"mse": metrics.squared_error(pred, y), "rmse": metrics.rmse(pred, y),
               "mae": metrics.mae(pred, y)}
        if hasattr(pred, "logpdf"):
            out.update(nlpd=metrics.nlpd(pred, y), coverage95=metrics.coverage(pred, y, 0.95),
                       coverage90=metrics.coverage(pred, y, 0.90),
                       pred_sd=float(np.mean(np.sqrt(pred.var))))
        return out
    if not hasattr(pred, "proba"):
        return {"error_rate": metrics.error_rate(pred, y, classes="labels")}
    return {"error_rate": metrics.error_rate(pred, y), "log_loss": metrics.log_loss(pred, y),
            "brier": metrics.brier_score(pred, y)}


def _plot_grid(split: Split, task: str) -> np.ndarray | None:
    """Inputs for the report's figures: a line for 1-D regression or counts, a 2-D mesh for
    2-D classification; ``None`` otherwise."""
    X = np.vstack([split.X_train, split.X_test])
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * (hi - lo)
    if task != CLASSIFICATION and X.shape[1] == 1:
        return np.linspace(lo[0] - pad[0], hi[0] + pad[0], 300)[:, None]
    if task == CLASSIFICATION and X.shape[1] == 2:
        g0 = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 60)  # a sampled posterior's
        g1 = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 60)  # predictive: every draw
        return np.stack(np.meshgrid(g0, g1), -1).reshape(-1, 2)
    return None


def relevant_points(post) -> np.ndarray:
    """Where the relevance vectors are, (k, d) in input space (the training point or the
    dictionary centre of each kernel column): the kernel columns on dim ``basis`` when the
    fit pruned the basis, else, for methods that keep every column (sampling, VRVM), the
    ``n_relevant`` kernel columns with the smallest posterior mean ``alpha`` (the fit's
    ``n_relevant``: T01 eq. 17's ``sum gamma_i`` for a sampled posterior). The figures mark
    these and the table counts them, one rule for both."""
    centres = np.asarray(post["constant_data"]["centres"].values)
    kernel = np.isfinite(centres).all(axis=1)
    keep = np.flatnonzero(kernel)
    n_rel = int(post.attrs.get("n_kernel_vectors", post.attrs.get("n_relevant", keep.size)))
    if n_rel < keep.size and "alpha" in post["posterior"]:
        alpha = post["posterior"]["alpha"].mean(("chain", "draw")).values
        alpha = alpha.min(axis=tuple(range(1, alpha.ndim))) if alpha.ndim > 1 else alpha
        keep = keep[np.argsort(alpha[keep], kind="stable")[:n_rel]]
    return centres[np.sort(keep)]


def diagnostics(post) -> dict[str, float]:
    """Divergences, max R-hat and min bulk ESS of a sampled posterior: the numbers the fit
    stored in its attrs (computed by :func:`sparsebayes.inference.rvm.pymc.diagnose`, over
    the sampled variables), so the table and the result agree; a posterior with sampler
    statistics but without those attrs is diagnosed by the same function."""
    attrs = post.attrs
    if "max_rhat" not in attrs:
        stats = post["sample_stats"] if "sample_stats" in post.children else None
        if stats is None or "diverging" not in stats:
            return {}
        from sparsebayes.inference.samplers import diagnose

        attrs = diagnose(post, warn=False)
    return {"divergences": int(attrs["n_divergent"]), "max_rhat": float(attrs["max_rhat"]),
            "min_ess_bulk": float(attrs["min_ess_bulk"])}


def leave_one_out(post, n_train: int, pkind: str | None = None,
                  estimator: str | bool | None = None,
                  refits: int | None = None) -> dict[str, Any]:
    """The cell's leave-one-out columns from :func:`sparsebayes.inference.loo` of the fit on
    the training split: ``loo_elpd_per_point`` = elpd / N (Vehtari, Gelman & Gabry 2017
    eq. 4, the sum of ``log p(t_n | t_-n)`` over the N training points, divided by N) and
    its standard error / N (with a subsampled estimator's subsampling SE added in
    quadrature), the estimator that ran, its time, and for PSIS the number of
    points whose Pareto k exceeds ArviZ's ``good_k`` (Vehtari et al. 2024: those
    estimates are unreliable). A LOO that the library does not offer for this result
    (``ValueError`` / ``NotImplementedError``) or that fails is missing (NaN) with the reason
    in ``loo_missing``: the cell's test scores still stand. ``pkind`` is the cell's
    predictive kind: ``loo`` scores the fit's own predictive, so a cell scored by another one
    (RQ05's augmented ``rvm*``) has no LOO of its predictive. ``estimator``: the method
    spec's ``loo`` option (None or True: the library's default; False: none; else its name,
    passed to ``loo``); ``refits``: the most exact refits of the subsampled estimator
    (default ``STUDY_LOO_REFITS``: every method's LOO in a study is the same estimator, at a
    budget that keeps a study's cells within a few fits each)."""
    out: dict[str, Any] = {"loo_elpd_per_point": np.nan, "loo_se_per_point": np.nan,
                           "loo_estimator": "", "loo_seconds": np.nan, "loo_bad_k": np.nan,
                           "loo_missing": ""}
    if estimator is False:
        out["loo_missing"] = "not asked for (loo=false)"
        return out
    if pkind is not None:
        out["loo_missing"] = (f"the test scores use the {pkind!r} predictive; leave-one-out "
                              "scores the fit's own")
        return out
    import inspect

    from sparsebayes.inference import loo

    opts = {"progressbar": False} if "progressbar" in inspect.signature(loo).parameters \
        else {}  # the study shows its own bar
    if estimator is not None and estimator is not True:
        opts["estimator"] = estimator
    if "refits" in inspect.signature(loo).parameters:
        opts["refits"] = int(refits) if refits is not None else STUDY_LOO_REFITS
    start = time.perf_counter()
    try:
        res = loo(post, **opts)
    except (ValueError, NotImplementedError) as exc:
        out["loo_missing"] = f"not available: {type(exc).__name__}: {exc}"
        return out
    except Exception as exc:  # a failing LOO leaves the cell's test scores standing
        out["loo_missing"] = f"failed: {type(exc).__name__}: {exc}"
        return out
    se = np.hypot(float(res.se), float(getattr(res, "subsampling_se", 0.0)))
    out.update(loo_elpd_per_point=float(res.elpd) / n_train,
               loo_se_per_point=se / n_train,
               loo_estimator=str(getattr(res, "estimator", "")),
               loo_seconds=float(getattr(res, "seconds", time.perf_counter() - start)))
    k = getattr(res, "pareto_k", None)
    if k is not None:
        good = getattr(res, "good_k", None) or 0.7
        out["loo_bad_k"] = int(np.sum(np.asarray(k, float) > good))
    return out


def _rvm_problem(kind: str, X, y, width, opts: dict[str, Any]):
    """The problem of an rvm/rvm*/gp cell; reads (and leaves) the runner options."""
    from sparsebayes.models import GaussianKernel, as_kernel

    family = family_of(kind)
    if not family.weights:  # a GP: its hyperparameters are fitted, not set by the runner
        if family.labels:
            if opts.get("inducing") is not None:
                raise ValueError("inducing is GP regression's option (the sparse GP); GP "
                                 "classification is exact")
            return family.problem_type(X, y)
        inducing = opts.get("inducing", GP_INDUCING if X.shape[0] > GP_EXACT_MAX_N else None)
        return family.problem_type(
            X, y, inducing=None if inducing is None else min(int(inducing), X.shape[0]))
    if "kernel" in opts:
        kernel = as_kernel(opts["kernel"])
    else:
        kernel = GaussianKernel(np.full(X.shape[1], width) if opts.get("ard") else width)
    common = {"kernel": kernel, "bias": bool(opts.get("bias", True)),
              "learn_width": bool(opts.get("learn_width", False))}
    centres = opts.get("centres",
                       dictionary_size(family) if X.shape[0] > RVM_CENTRES else None)
    if centres is not None:  # a k-means dictionary of at most this many centres
        common["centres"] = min(int(centres), X.shape[0])
    return family.problem_type(X, y, **common)


def _cv_width(cell: Cell, kind: str, pkind, split: Split, widths, opts, fit_opts) -> float:
    """T01 App. E's protocol: the kernel width with the best k-fold cross-validated loss on
    the training split (mean NLPD for regression, log loss for classification)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    from sparsebayes.inference.api import fit, predict

    if method_of(cell.method.method).draws:
        cheap = [m.name for m in METHODS.values() if not m.draws]
        raise ValueError(f"width=cv refits {len(widths)} x {opts.get('cv', 5)} times: use it "
                         f"with one of {cheap}, not {cell.method.method!r} "
                         "(or give a width, or learn_width=true)")
    k = int(opts.get("cv", 5))
    folds = (StratifiedKFold if family_of(kind).labels else KFold)(k, shuffle=True,
                                                                 random_state=cell.fit_seed)
    X, y = split.X_train, split.y_train
    losses = []
    for w in widths:
        loss = 0.0
        for tr, va in folds.split(X, y):
            post = fit(_rvm_problem(kind, X[tr], y[tr], w, opts), cell.method.method,
                       seed=cell.fit_seed, **fit_opts)
            loss -= np.sum(predict(post, X[va], kind=pkind).logpdf(y[va]))
        losses.append(loss / y.size)
    return float(widths[int(np.argmin(losses))])


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell and return its record (never raises for a failing method: the record
    has ``status="failed"`` and the error as text, picklable whatever was raised). With
    ``cell.figures`` the record also carries ``"_arrays"`` (plot inputs) and
    ``"_posterior"`` (the DataTree)."""
    from sparsebayes.inference.numerics import blas_threads

    start = time.perf_counter()
    record: dict[str, Any] = {**cell.key, "task": cell.data.info.task, "status": "ok",
                              "error": "", "fit_seed": cell.fit_seed}
    from sparsebayes.inference.progress import quiet

    # PyMC's and our INFO lines would break the study's progress bar
    with warnings.catch_warnings(record=True) as caught, \
            blas_threads(cell.blas_threads), quiet("pymc", "sparsebayes"):
        warnings.simplefilter("always")
        try:
            record.update(_run(cell))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a failing cell is a result, not a crash; a Rust
            # panic in nutpie (pyo3's PanicException) is a BaseException, and unpicklable
            record["status"] = "failed"
            record["error"] = f"{type(exc).__name__}: {exc}"
            record["traceback"] = traceback.format_exc(limit=20)
    from sparsebayes.models import SparseBayesWarning

    ours = [w for w in caught if issubclass(w.category, SparseBayesWarning)]
    record["cell_seconds"] = time.perf_counter() - start  # the whole cell, figures too
    record["n_warnings"] = len(ours)
    record["warnings"] = " | ".join(sorted({f"{w.category.__name__}: {w.message}"
                                            for w in ours}))
    return record


_WARM: set[tuple[str, str]] = set()  # (problem kind, method label) run in this process


def warm_up(cell: Cell, kind: str, pkind: str | None, split: Split, width: float,
            runner: dict[str, Any], opts: dict[str, Any]) -> float:
    """The seconds of this method's first use in this process, timed apart from every
    cell's fit: a fit on the training split (with the method's ``warm_up`` options: few
    draws, one restart, ADVI's optimisation cut short) and its prediction, and the
    leave-one-out of a fit on a few training rows (30 for regression, 15 a class), which
    pay the numba and PyTensor compilations the cell's own fit would (on a fresh machine,
    the disk caches' too). 0 when this process has run the method before, or for a method
    with no ``warm_up`` (NUTS: its sampler times its own compilation, the result's
    ``compile_time``, paid once per model and data shape)."""
    from sparsebayes.inference.api import fit, fit_options, predict

    key = (kind, cell.method.label)
    warm_options = method_of(cell.method.method).warm_up
    if key in _WARM or warm_options is None:
        return 0.0
    _WARM.add(key)
    y = split.y_train
    rows = np.arange(min(30, y.size)) if not family_of(kind).labels else np.concatenate(
        [np.flatnonzero(y == c)[:15] for c in np.unique(y)])
    valid = fit_options(kind, cell.method.method)
    small = {**opts, **{k: (min(v, opts.get(k, v)) if k == "max_iter" else v)
                        for k, v in warm_options.items() if k in valid}}
    start = time.perf_counter()
    with warnings.catch_warnings():  # a warm-up's warnings are no cell's
        warnings.simplefilter("ignore")
        try:
            for X, t in ((split.X_train, y), (split.X_train[rows], y[rows])):
                post = fit(_rvm_problem(kind, X, t, width, runner), cell.method.method,
                           seed=cell.fit_seed, **small)
                if t.size == y.size:
                    predict(post, split.X_test, kind=pkind)
            leave_one_out(post, t.size, pkind, runner.get("loo"), runner.get("loo_refits"))
        except Exception:  # the cell's own fit says what is wrong
            pass
    return time.perf_counter() - start


def _run_baseline(cell: Cell, split: Split, widths, grid) -> tuple[dict, dict, np.ndarray]:
    """An svm / sklearn cell: fit, predict, score; the record, plot arrays, support set."""
    from .baselines import baseline_predictions, fit_svm, make_estimator

    task = cell.data.info.task
    out: dict[str, Any] = {}
    start = time.perf_counter()
    if cell.method.family == "svm":
        est = fit_svm(cell.method, task, split, widths, cell.fit_seed)
        out["width"] = float(1 / np.sqrt(est.gamma))
    else:
        est = make_estimator(cell.method, cell.fit_seed)
        est.fit(split.X_train, split.y_train)
    out["fit_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    pred, probabilistic = baseline_predictions(est, split.X_test, task)
    out["predict_seconds"] = time.perf_counter() - start
    out["probabilistic"] = int(probabilistic)
    out.update(loo_elpd_per_point=np.nan, loo_se_per_point=np.nan, loo_estimator="",
               loo_seconds=np.nan, loo_bad_k=np.nan,
               loo_missing="scikit-learn baseline: no leave-one-out")
    support = getattr(est, "support_", None)
    out["n_relevant"] = int(support.size) if support is not None else np.nan
    out["converged"] = 1
    out.update(score(pred, split.y_test, task))
    arrays: dict[str, np.ndarray] = {}
    if grid is not None:
        gpred, _ = baseline_predictions(est, grid, task)
        if task != CLASSIFICATION:
            mean = gpred if isinstance(gpred, np.ndarray) else gpred.mean
            arrays["grid_mean"] = np.asarray(mean, float)
            if hasattr(gpred, "interval"):
                arrays["grid_lo"], arrays["grid_hi"] = gpred.interval(0.95)
        elif hasattr(gpred, "proba"):
            arrays["grid_proba"] = np.asarray(gpred.proba)[:, -1]
        else:
            arrays["grid_label"] = np.asarray(gpred)
            if hasattr(est, "decision_function"):
                arrays["grid_score"] = est.decision_function(grid)
    relevant = split.X_train[np.sort(support)] if support is not None \
        else np.empty((0, split.X_train.shape[1]))
    return out, arrays, relevant


def _run(cell: Cell) -> dict[str, Any]:
    from sparsebayes.inference.api import fit, fit_options, predict

    task = cell.data.info.task
    reason = cell.method.check(task)
    if reason is not None:
        raise ValueError(reason)
    split = load_split(cell.data, cell.split, cell.seed, cell.data_dir)
    out: dict[str, Any] = {"n_train": split.X_train.shape[0], "n_test": split.X_test.shape[0],
                           "n_features": split.X_train.shape[1]}
    opts = dict(cell.method.options)
    opts.pop("splits", None)
    width = opts.pop("width", cell.data.width) if cell.method.family != "sklearn" else 1.0
    widths = cell.data.width * WIDTH_FACTORS if width == "cv" else np.array([float(width)])
    grid = _plot_grid(split, task) if cell.figures else None
    post = None

    if cell.method.family in BASELINES:
        res, arrays, relevant = _run_baseline(cell, split, widths, grid)
        out.update(res)
    else:
        arrays = {}
        kind, pkind = FAMILIES[cell.method.family][task]
        pkind = opts.pop("predict", pkind)
        runner = {k: opts.pop(k) for k in RUNNER_OPTIONS if k in opts}  # width etc. gone
        if "progressbar" in fit_options(kind, cell.method.method):
            opts["progressbar"] = False  # the study shows its own bar
        width = float(widths[0])
        warm_s = warm_up(cell, kind, pkind, split, width, runner, opts)
        start = time.perf_counter()
        if widths.size > 1 and family_of(kind).weights:
            width = _cv_width(cell, kind, pkind, split, widths, runner, opts)
        problem = _rvm_problem(kind, split.X_train, split.y_train, width, runner)
        # the candidate kernel centres: every training point, or a k-means dictionary
        basis = getattr(problem, "basis", None)
        inducing = getattr(problem, "inducing", None)  # a sparse GP's
        out["n_centres"] = (basis.n_kernel if basis is not None else inducing.shape[0]
                            if inducing is not None else split.X_train.shape[0])
        post = fit(problem, cell.method.method, seed=cell.fit_seed, **opts)
        # compilation apart from the fit: a sampler's own (the first NUTS cell of a model
        # and data shape) or this method's first use in this process (warm_up)
        compile_s = float(post.attrs.get("compile_time", 0.0) or 0.0)
        out["fit_seconds"] = time.perf_counter() - start - compile_s
        out["compile_seconds"] = compile_s + warm_s
        if "width" in post.attrs:  # the width used (learned by the evidence, if asked)
            w = np.atleast_1d(np.asarray(post.attrs["width"], float))
            out["width"] = float(w[0]) if w.size == 1 else float(np.exp(np.mean(np.log(w))))
        elif family_of(kind).weights:
            out["width"] = float(width)
        start = time.perf_counter()
        pred = predict(post, split.X_test, kind=pkind)
        out["predict_seconds"] = time.perf_counter() - start
        out["probabilistic"] = 1
        # relevance vectors (T01's count, the bias apart); a GP keeps every training point
        # and has none to count: its result has no n_relevant, the table NaN (shown "–")
        n_rel = post.attrs.get("n_kernel_vectors", post.attrs.get("n_relevant"))
        out["n_relevant"] = np.nan if n_rel is None else int(n_rel)
        out["converged"] = int(post.attrs.get("converged", 1))
        if "log_evidence" in post.attrs:
            out["log_evidence"] = float(post.attrs["log_evidence"])
        if "psis_khat" in post.attrs:  # how far q is from the posterior (Yao et al. 2018)
            out["psis_khat"] = float(post.attrs["psis_khat"])
        out.update(diagnostics(post))
        out.update(score(pred, split.y_test, task))
        out.update(leave_one_out(post, split.y_train.size, pkind,  # timed apart from the fit
                                 runner.get("loo"), runner.get("loo_refits")))
        relevant = (relevant_points(post) if family_of(kind).weights
                    else np.empty((0, split.X_train.shape[1])))
        if grid is not None:
            gp_ = predict(post, grid, kind=pkind)
            if task != CLASSIFICATION:
                lo, hi = gp_.interval(0.95)
                arrays.update(grid_mean=gp_.mean, grid_lo=lo, grid_hi=hi)
            else:
                arrays["grid_proba"] = np.asarray(gp_.proba)[:, -1]
    if grid is not None:
        arrays.update(grid=grid, X_train=split.X_train, y_train=split.y_train,
                      relevant_x=relevant)
        if split.truth is not None:
            arrays["grid_truth"] = split.truth(grid)
        out["_arrays"] = arrays
    if post is not None and cell.figures:
        out["_posterior"] = post
    return out
