"""``fit`` and ``predict``: one entry point for every posterior and predictive.

Methods are looked up in registries of functions; the method modules import PyMC inside the
functions that sample, so importing ``sparsebayes.inference`` (and running the evidence path)
never imports PyMC.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from sparsebayes.models import GammaPrior
from sparsebayes.models.priors import PRIOR_NAMES
from sparsebayes.models.pymc_models import check_form

from . import families, groups, progress
from .contract import FLAG_OPTIONS, check_result, option_attrs
from .methods import method_of
from .numerics import check_positive_int, show_progress, unknown_names
from .results import library_versions
from .rvm import evidence, vrvm_classification, widths
from .samplers import SAMPLERS, check_tune

__all__ = ["fit", "predict", "fit_options", "check_fit_options", "FIT_METHODS",
           "OPTION_CHECKS", "PREDICT_KINDS"]

# views of the registered families (sparsebayes.inference.families):
#: The fit methods: problem kind (``"regression"``, ``"classification"``, ``"poisson"``,
#: ``"gp"``, ``"gp_classification"``) -> method name -> ``fn(problem, *, seed, **options)``.
FIT_METHODS: dict[str, dict[str, Callable]] = {
    f.kind: f.fit_methods for f in families.REGISTERED}  # the same dicts
#: The predictive kinds of :func:`predict`: problem kind -> kind (``"rvm"``, ``"rvm*"``,
#: ``"samples"``, ``"moderated"``, ...) -> ``fn(post, X_new, **options)``.
PREDICT_KINDS: dict[str, dict[str, Callable]] = {
    f.kind: f.predict_kinds for f in families.REGISTERED}


_FIT_OWN = ("posterior_predictive", "prior_predictive")  # fit()'s options, not the method's


def fit_options(kind: str, method: str) -> tuple[str, ...]:
    """The keyword options ``fit(problem, method, **options)`` takes for a problem ``kind``
    (``"regression"``, ...): the method function's keyword arguments (read from its
    signature) and fit's own, ``seed`` aside."""
    params = inspect.signature(families.family_of(kind).fit_methods[method]).parameters.values()
    names = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return tuple(sorted((names | set(_FIT_OWN)) - {"seed"}))


def _choice(*choices):
    def check(name, value, _options):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"unknown {name} {value!r}; {name} must be one of "
                             f"{list(choices)}")
    return check


def _number(low: float, high: float = np.inf, closed_low: bool = False):
    def check(name, value, _options):
        ok = isinstance(value, int | float | np.integer | np.floating) \
            and not isinstance(value, bool | np.bool_) \
            and (low <= value if closed_low else low < value) \
            and (value < high if np.isfinite(high) else not np.isnan(value))
        if not ok:
            where = ("a positive number" if (low, high, closed_low) == (0, np.inf, False)
                     else f"a number in {'[' if closed_low else '('}{low:g}, {high:g}"
                     + ("]" if np.isinf(high) else ")"))
            raise ValueError(f"{name} must be {where}, got {value!r}")
    return check


def _flag(name, value, _options):
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def _prior(name, value, _options):  # what models.priors.resolve_prior takes
    if isinstance(value, str) and value not in PRIOR_NAMES:
        raise ValueError(f"{name} must be a GammaPrior, None or one of {sorted(PRIOR_NAMES)}, "
                         f"got {value!r}")
    if not isinstance(value, GammaPrior | str):
        raise TypeError(f"{name} must be a GammaPrior, a prior name or None, got "
                        f"{type(value).__name__}")


def _positive_int(name, value, _options):
    check_positive_int(name, value)


# option name -> check(name, value, options) of its value, for the keyword options the
# built-in methods share; a method's own options may add to them (``Method.options``), and
# every keyword option of every method in FIT_METHODS has a check in one of the two
# (tests/inference/study/test_study_refusals.py holds it to that): fit runs them before any
# work and a study before any cell (sparsebayes.inference.study.specs). ``options`` holds
# the other options and the problem's kind (``"problem_kind"``). ``None`` is taken where the
# method's default is ``None``; the methods keep their own checks for direct calls.
OPTION_CHECKS: dict[str, Callable[[str, Any, dict[str, Any]], None]] = {
    **dict.fromkeys(("draws", "chains", "cores", "max_iter", "window", "restarts"),
                    _positive_int),
    "tune": lambda name, value, options: check_tune(value, options.get("sampler") or "nutpie"),
    **dict.fromkeys(("tol", "learning_rate"), _number(0.0)),
    "max_seconds": _number(0.0, closed_low=True),  # 0: always say the expected time
    **dict.fromkeys(("target_accept", "relevance"), _number(0.0, 1.0)),
    "alpha_min": _number(0.0, 1.0, closed_low=True),
    "sampler": _choice(*SAMPLERS),
    "adaptation": _choice("diag", "low_rank"),
    "form": lambda name, value, options: check_form(
        value, options.get("problem_kind", "regression") == "regression"
        and options.get("collapsed") is not False),
    "likelihood": _choice("bernoulli", "softmax"),
    "alpha": _choice("per-class", "shared"),
    "softmax_bound": _choice(*vrvm_classification.SOFTMAX_BOUNDS),
    "backend": _choice("numpy", "pytensor"),
    **dict.fromkeys(FLAG_OPTIONS, _flag),
    "progressbar": lambda name, value, options: show_progress(value),
    "prior": _prior,
    "width_bounds": lambda name, value, options: evidence.check_width_bounds(value),
}


def check_fit_options(kind: str, method: str, options: dict[str, Any],
                      where: str | None = None) -> None:
    """``TypeError`` for an option ``fit(problem, method, **options)`` does not take on a
    ``kind`` problem, ``ValueError`` (naming it) for a bad value, by :data:`OPTION_CHECKS`:
    the checks ``fit`` runs before any work, so a study refuses a bad method spec before any
    cell runs, with the method's own (``Method.options``)."""
    valid = fit_options(kind, method)
    bad = set(options) - set(valid)
    if bad:
        raise TypeError(unknown_names("option", bad, valid, where or f"fit(..., {method!r}) "
                                      f"of a {kind} problem"))
    params = inspect.signature(families.family_of(kind).fit_methods[method]).parameters
    checks = {**OPTION_CHECKS, **method_of(method).options}
    for name, value in options.items():
        if value is None and (name not in params or params[name].default is None):
            continue
        if name not in checks:
            raise TypeError(f"option {name!r} of {method!r} has no check of its values: "
                            "declare one in the method's Method.options")
        checks[name](name, value, {**options, "problem_kind": kind})


def fit(problem, method: str = "evidence", *, seed: int | None = None,
        posterior_predictive: bool = False, prior_predictive: bool = False,
        **options: Any) -> xr.DataTree:
    """Posterior of ``problem`` by ``method``, as an ArviZ ``DataTree``.

    Every method returns the same layout (:mod:`~.results`), so predictions, leave-one-out
    and comparisons work on any of them.

    Parameters
    ----------
    problem : RVMRegression, RVMClassification, RVMPoissonRegression, GPRegression, ...
        The problem to fit: one of the registered families' (also ``GPClassification``).
    method : str, default "evidence"
        One of the family's fit methods (:data:`FIT_METHODS`): ``"evidence"`` (Tipping &
        Faul 2003's fast type-II ML), ``"evidence-mackay"`` (T01 eqs. 16-18), ``"vrvm"``,
        ``"advi"``, ``"fullrank_advi"`` or ``"nuts"``.
    seed : int, optional
        Seed of every random draw (posterior draws of ``w``, samplers).
    posterior_predictive : bool, default False
        Add a ``posterior_predictive`` group: a replicate of the training targets per
        posterior draw (:func:`~.groups.add_posterior_predictive`).
    prior_predictive : bool, default False
        Add ``prior`` and ``prior_predictive`` groups: draws of the result's hyperprior
        (attrs ``prior``) and replicates of the targets from them
        (:func:`~.groups.add_prior_predictive`). The hyperprior must be proper.
    **options
        Passed to the method (e.g. ``max_iter``, ``draws``, ``chains``).

    Returns
    -------
    xarray.DataTree
        The posterior, with attrs ``method``, ``seed``, ``wall_time``, ``converged`` and
        ``default_predict_kind``.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsebayes.inference import fit
    >>> from sparsebayes.models import GaussianKernel, RVMRegression
    >>> x = np.linspace(-10, 10, 60)
    >>> t = np.sinc(x / np.pi) + np.random.default_rng(0).normal(0, 0.1, 60)
    >>> post = fit(RVMRegression(x[:, None], t, kernel=GaussianKernel(3.0)), seed=1)
    >>> post.attrs["method"], post.attrs["n_kernel_vectors"] < 20
    ('evidence', True)
    """
    if isinstance(problem, str | xr.DataTree):
        raise TypeError(f"problem must be a problem record, got {type(problem).__name__}")
    family = families.family_of(problem)
    kind = family.kind
    if not isinstance(method, str) or method not in family.fit_methods:
        raise ValueError(
            f"unknown method {method!r} for {type(problem).__name__}; "
            f"choose one of {sorted(family.fit_methods)}"
        )
    if seed is not None and (not isinstance(seed, int | np.integer) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    check_fit_options(kind, method, {"posterior_predictive": posterior_predictive,
                                      "prior_predictive": prior_predictive, **options},
                      f"fit(..., {method!r}) of a {type(problem).__name__}")
    if family.weights:
        widths.check_width(problem)  # a Gaussian width far off the inputs' scale, either way
    start = time.perf_counter()
    with progress.fit_logged(method, problem):
        post = family.fit_methods[method](problem, seed=seed, **options)
    post.attrs.update(
        method=method,
        seed=-1 if seed is None else int(seed),
        wall_time=time.perf_counter() - start,
        versions=library_versions(),
        default_predict_kind=family.predict_kind(method),
    )
    post.attrs["converged"] = int(bool(post.attrs.get("converged", 1)))
    post.attrs.setdefault("hyperparameters", method_of(method).hyperparameters)
    post.attrs.update(option_attrs(options))  # what refits of it repeat
    if family.weights:  # the evidence methods' prior: the problem's
        post.attrs.setdefault("prior", (problem.prior or GammaPrior()).as_array())
    if posterior_predictive or prior_predictive:
        if posterior_predictive:
            post = groups.add_posterior_predictive(post, seed=seed)
        if prior_predictive:
            post = groups.add_prior_predictive(post, seed=seed)
    check_result(post, kinds=(kind,))
    return post


def predict(post: xr.DataTree, X_new, kind: str | None = None, **options: Any):
    """Predictive distribution at ``X_new`` from a fitted posterior.

    Parameters
    ----------
    post : xarray.DataTree
        A result of :func:`fit`.
    X_new : array of shape (n, d)
        The inputs to predict at.
    kind : str, optional
        The predictive (:data:`PREDICT_KINDS`): for regression ``"rvm"`` (T01 eqs. 21-22),
        ``"rvm*"`` (RQ05 eqs. 6-7) or ``"samples"`` (the mixture over posterior draws); for
        classification ``"moderated"``, ``"plugin"`` or ``"samples"``; ``"gp"`` for GP
        regression. ``None`` picks the natural one for the posterior.
    **options
        Passed to the predictive.

    Returns
    -------
    Predictive, MixturePredictive, ClassPredictive or CountPredictive
        Regression: a :class:`Predictive` (``mean``, ``var``, ``logpdf(y)``,
        ``interval(p)``) or, for ``"samples"``, a :class:`MixturePredictive`;
        classification: class probabilities ``proba``; counts: the predictive of the
        counts.
    """
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError("post must be a DataTree returned by sparsebayes.inference.fit")
    family = families.family_of(post)
    kinds = family.predict_kinds
    if kind is None:
        kind = post.attrs.get("default_predict_kind") or family.predict_kind(
            post.attrs.get("method", ""))
    if kind not in kinds:
        raise ValueError(
            f"predictive kind {kind!r} is not available for a {family.kind} posterior; "
            f"choose one of {sorted(kinds)}"
        )
    return kinds[kind](post, X_new, **options)
