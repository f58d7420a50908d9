"""Study specs: the ``name[:key=value...]`` grammar of data sets and methods, and the methods
parsed into :class:`MethodSpec` (scikit-learn estimators too); the data sets' own
:class:`~.data.DataSpec` is in :mod:`.data`.

Method families are registered in one place, :data:`FAMILIES` (add a line there for a new
model family); the fit methods are those of :data:`sparsebayes.inference.api.FIT_METHODS`.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparsebayes.inference.families import REGISTERED
from sparsebayes.inference.numerics import unknown_names
from sparsebayes.inference.rvm.families import RVM_REGRESSION
from sparsebayes.models.datasets import CLASSIFICATION, REGRESSION, TASKS

__all__ = [
    "FAMILIES",
    "MethodSpec",
    "parse_methods",
]


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_spec(text: str, what: str) -> tuple[str, dict[str, Any]]:
    """``"name:key=value:..."`` -> ``(name, {key: value})`` (values cast to bool, None,
    int or float where they read as one)."""
    if not isinstance(text, str):
        raise TypeError(f"a {what} spec must be a string, got {type(text).__name__} {text!r}")
    if not text.strip():
        raise ValueError(f"empty {what} spec {text!r}")
    name, *pairs = text.strip().split(":")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"bad option {pair!r} in {what} spec {text!r}: use key=value")
        options[key] = _parse_value(value)
    return name.strip(), options


def label(name: str, options: dict[str, Any]) -> str:
    """The canonical spec text: the name and the options sorted by key."""
    return ":".join([name, *(f"{k}={options[k]}" for k in sorted(options))])


def split_list(items: str | Iterable[str]) -> list[str]:
    if isinstance(items, str):
        items = items.split(",")
    return [s.strip() for s in items if str(s).strip()]


def seed_of(*parts: Any) -> int:
    """A stable 32-bit seed from strings and integers (not Python's salted ``hash``)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "little")


# --------------------------------------------------------------------------------------
# methods
# --------------------------------------------------------------------------------------
# THE method registry: family -> task -> (problem kind, predictive kind or None = the
# default), a view of the registered model families (sparsebayes.inference.families) plus
# "rvm*" (the RVM regression scored by RQ05's predictive) and the scikit-learn baselines
# "svm" and "sklearn" (.baselines).
#: The method families of a method spec ``family/method``: family -> task -> (problem kind,
#: predictive kind or ``None`` for the default).
FAMILIES: dict[str, dict[str, tuple[str, str | None]]] = {}
for _family in REGISTERED:
    FAMILIES.setdefault(_family.study_name, {})[_family.task] = (_family.kind, None)
    if _family is RVM_REGRESSION:
        FAMILIES["rvm*"] = {REGRESSION: (_family.kind, "rvm*")}
FAMILIES["svm"] = {REGRESSION: ("svm", None), CLASSIFICATION: ("svm", None)}
FAMILIES["sklearn"] = {task: ("sklearn", None) for task in TASKS}
BASELINES = ("svm", "sklearn")  # families fitted by scikit-learn, not by api.fit
# options the runner uses itself for svm; everything else is refused
_SVM_OPTIONS = {"width", "splits", "cv", "C"}
# options the runner uses itself for rvm / rvm* / gp (cells._run); the rest go to fit
RUNNER_OPTIONS = ("width", "learn_width", "ard", "bias", "kernel", "cv", "centres",
                  "inducing", "predict", "splits", "loo", "loo_refits")
# values of the ``loo`` option besides true / false: estimators of sparsebayes.inference.loo
LOO_ESTIMATORS = ("subsample", "reloo", "psis", "refit", "kfold", "gaussian", "cavity")


@dataclass(frozen=True)
class MethodSpec:
    """``family/method[:key=value...]``, e.g. ``rvm/evidence``, ``rvm*/evidence``,
    ``rvm/nuts:draws=300:chains=2:splits=2``, ``svm``, or a scikit-learn estimator
    ``sklearn=sklearn.ensemble.RandomForestRegressor:n_estimators=200`` (import path and
    constructor parameters; in Python also the estimator object itself).

    Runner options: ``width`` (Gaussian kernel width; default the data set's; ``cv``: the
    best of 0.5, 0.7, 1, 1.4, 2 x the default by 5-fold CV of the predictive loss on the
    training split, as in T01 App. E; ``cv=k`` sets the folds),
    ``learn_width`` (evidence over the width), ``ard`` (one width per input, with
    ``learn_width``), ``centres`` (a k-means basis dictionary of at most that many centres:
    every method's cost then depends on it, not on N), ``kernel`` (a kernel name instead
    of the Gaussian), ``bias``,
    ``predict`` (predictive kind), ``splits`` (run on the first k splits only), ``loo``
    (the leave-one-out on the training split: true, the library's default estimator;
    false, none; or an estimator name, e.g. ``kfold``), ``loo_refits`` (the most exact
    refits of the subsampled estimator; default ``cells.STUDY_LOO_REFITS``). The rest go
    to ``fit`` (``draws``, ``chains``, ``max_iter``, ...). For ``svm``: ``cv`` folds and a
    fixed ``C`` instead of the cross-validated one. For ``sklearn=...``: ``splits``; the
    rest are the estimator's parameters.
    """

    family: str
    method: str | None
    options: tuple[tuple[str, Any], ...] = ()
    estimator: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text) -> MethodSpec:
        if isinstance(text, MethodSpec):
            return text
        if not isinstance(text, str) and hasattr(text, "fit"):
            return estimator_spec(text)
        if isinstance(text, str) and text.strip().startswith("sklearn="):
            return estimator_spec(text)
        head, options = parse_spec(text, "method")
        family, _, method = head.partition("/")
        if family not in FAMILIES or family == "sklearn":
            raise ValueError(f"unknown method family {family!r} in {text!r}; choose one of "
                             f"{sorted(set(FAMILIES) - {'sklearn'})} (e.g. 'rvm/evidence', "
                             "'svm') or a scikit-learn estimator 'sklearn=module.Class'")
        if family == "svm":
            if method:
                raise ValueError(f"'svm' takes no fit method (scikit-learn SVR/SVC), got "
                                 f"{text!r}")
            bad = set(options) - _SVM_OPTIONS
            if bad:
                raise ValueError(unknown_names("option", bad, _SVM_OPTIONS, "svm"))
            method = None
        elif not method:
            raise ValueError(f"method spec {text!r} needs a fit method: '{family}/evidence', "
                             f"'{family}/nuts', ...")
        check_runner_values(options, text)
        return cls(family, method, tuple(sorted(options.items())))

    @property
    def label(self) -> str:
        if self.family == "sklearn":
            return label(f"sklearn={self.method}", dict(self.options))
        head = self.family if self.method is None else f"{self.family}/{self.method}"
        return label(head, dict(self.options))

    @property
    def max_splits(self) -> int | None:
        return dict(self.options).get("splits")

    def check(self, task: str) -> str | None:
        """``None`` if this method can run on a ``task`` data set, else the reason."""
        from sparsebayes.inference import api

        entry = FAMILIES[self.family].get(task)
        if entry is None:
            return f"{self.family} does not do {task}"
        kind, pkind = entry
        if self.family == "sklearn":
            return estimator_task_reason(self, task)
        if kind == "svm":
            return None
        registered = api.FIT_METHODS.get(kind, {})
        if self.method not in registered:
            return (f"fit method {self.method!r} is not available for {kind} problems; "
                    f"registered: {sorted(registered)}")
        pkind = dict(self.options).get("predict", pkind)
        kinds = api.PREDICT_KINDS.get(kind, {})
        if pkind is not None and pkind not in kinds:
            return (f"predictive kind {pkind!r} is not available for {kind} posteriors; "
                    f"registered: {sorted(kinds)}")
        return None

    def check_options(self, task: str) -> None:
        """``ValueError`` naming an option that neither the runner (:data:`RUNNER_OPTIONS`)
        nor the fit method on a ``task`` data set takes (read from its signature,
        :func:`~sparsebayes.inference.api.fit_options`), with the closest valid name, or a
        bad value of a fit option (by :func:`~sparsebayes.inference.api.check_fit_options`,
        the checks ``fit`` runs). The runner's values are checked when parsed
        (:func:`check_runner_values`), so are the baselines' options; ``progressbar`` is the
        study's own."""
        if self.family in BASELINES:
            return
        from sparsebayes.inference import api

        kind = FAMILIES[self.family][task][0]
        valid = {*RUNNER_OPTIONS, *api.fit_options(kind, self.method)} - {"progressbar"}
        options = dict(self.options)
        bad = set(options) - valid
        if bad:
            raise ValueError(unknown_names("option", bad, valid,
                                           f"{self.family}/{self.method}"))
        try:  # the values, by the checks fit runs (so no cell fails on them)
            api.check_fit_options(kind, self.method, {k: v for k, v in options.items()
                                                      if k not in RUNNER_OPTIONS})
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{exc} in method spec {self.label!r}") from None


def spec_from_label(text: str) -> MethodSpec:
    """The :class:`MethodSpec` of a stored label, without importing or checking anything
    (a study's report reads its methods so; the estimator objects are not at hand)."""
    head, options = parse_spec(text.replace("sklearn=", "sklearn/", 1)
                               if text.startswith("sklearn=") else text, "method")
    family, _, method = head.partition("/")
    return MethodSpec(family, method or None, tuple(sorted(options.items())))


def _number(value, integer: bool = False) -> bool:
    return isinstance(value, int if integer else int | float) and not isinstance(value, bool)


def check_splits(options: dict[str, Any], text: str) -> None:
    if "splits" in options and not (_number(options["splits"], True) and options["splits"] >= 1):
        raise ValueError(f"splits must be a positive integer in {text!r}")


def check_runner_values(options: dict[str, Any], text: str) -> None:
    """``ValueError`` for a bad value of an option the study's RVM/GP/SVM runners share:
    ``splits`` (>= 1), ``centres`` and ``inducing`` (>= 1, or none) and ``cv`` (>= 2 folds)
    integers, ``width`` and
    ``C`` positive numbers (``width=cv``: chosen by cross-validation), ``ard``, ``bias`` and
    ``learn_width`` true or false, ``kernel`` a kernel name, ``loo`` true, false or an
    estimator name."""
    check_splits(options, text)
    for key in ("centres", "inducing"):
        if key in options and options[key] is not None \
                and not (_number(options[key], True) and options[key] >= 1):
            raise ValueError(f"{key} must be a positive integer in {text!r}")
    for key in ("ard", "bias", "learn_width"):
        if key in options and not isinstance(options[key], bool):
            raise ValueError(f"{key} must be true or false in {text!r}")
    if "kernel" in options:
        from sparsebayes.models import as_kernel

        try:
            as_kernel(options["kernel"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"kernel: {exc} in {text!r}") from None
    loo = options.get("loo", True)
    if not (isinstance(loo, bool) or loo in LOO_ESTIMATORS):
        raise ValueError(f"loo must be true, false or one of {list(LOO_ESTIMATORS)} in "
                         f"{text!r}")
    if "loo_refits" in options and not (_number(options["loo_refits"], True)
                                        and options["loo_refits"] >= 2):
        raise ValueError(f"loo_refits must be an integer >= 2 in {text!r}")
    if "cv" in options and not (_number(options["cv"], True) and options["cv"] >= 2):
        raise ValueError(f"cv must be an integer >= 2 (folds) in {text!r}")
    for key in ("width", "C"):
        value = options.get(key)
        if value is not None and not (key == "width" and value == "cv") \
                and not (_number(value) and value > 0):
            raise ValueError(f"{key} must be a positive number"
                             + (" or 'cv'" if key == "width" else "") + f" in {text!r}")


def parse_methods(methods) -> list[MethodSpec]:
    """Method specs from ``"rvm/evidence,rvm*/evidence,svm"`` or a list of specs,
    :class:`MethodSpec` and scikit-learn estimator objects."""
    items = split_list(methods) if isinstance(methods, str) else list(methods)
    specs = [MethodSpec.parse(m) for m in items]
    return distinct(specs, "method")


def distinct(specs: list, what: str) -> list:
    """``specs`` if there is one at least and none twice, else ``ValueError``."""
    if not specs:
        raise ValueError(f"no {what} given")
    labels = [s.label for s in specs]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise ValueError(f"{what}(s) given twice: {dup}")
    return specs


def valid_methods() -> list[str]:
    """Method specs that can run on some task now (their backend is registered)."""
    from sparsebayes.inference import api

    out = []
    for family, tasks in FAMILIES.items():
        if family == "sklearn":
            continue
        for task, (kind, _) in tasks.items():
            names = [None] if kind == "svm" else list(api.FIT_METHODS.get(kind, {}))
            for m in names:
                spec = MethodSpec(family, m)
                if spec.check(task) is None:
                    out.append(spec.label)
    return sorted(set(out)) + ["sklearn=<module.Estimator>"]


# --------------------------------------------------------------------------------------
# scikit-learn estimators as methods (family "sklearn")
# --------------------------------------------------------------------------------------
_SIMPLE = (bool, int, float, str, type(None))


def import_estimator(path: str):
    """The estimator class at the import path ``module.Class`` (``ValueError`` if none)."""
    module, _, attr = path.rpartition(".")
    if not module:
        raise ValueError(f"sklearn={path!r}: give the import path module.Class, e.g. "
                         "sklearn.ensemble.RandomForestRegressor")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"sklearn={path!r}: cannot import {attr!r} from {module!r} "
                         f"({type(exc).__name__}: {exc})") from None
    return obj


def _is_estimator(obj) -> bool:
    return all(callable(getattr(obj, a, None)) for a in ("fit", "predict", "get_params"))


def estimator_spec(source) -> MethodSpec:
    """A :class:`MethodSpec` of family ``sklearn`` from ``"sklearn=module.Class:k=v..."``
    or an estimator object; ``ValueError`` if it is no scikit-learn-style estimator (fit,
    predict, get_params) or a parameter is unknown."""
    if isinstance(source, str):
        head, options = parse_spec(source.strip()[len("sklearn="):], "method")
        check_splits(options, source)
        params = {k: v for k, v in options.items() if k != "splits"}
        cls = import_estimator(head)
        if not (inspect.isclass(cls) and _is_estimator(cls)):
            raise ValueError(f"sklearn={head!r} is not a scikit-learn estimator class (needs "
                             "fit, predict and get_params)")
        try:
            cls(**params)
        except TypeError as exc:
            raise ValueError(f"sklearn={head!r}: bad parameter(s) {sorted(params)}: "
                             f"{exc}") from None
        return MethodSpec("sklearn", head, tuple(sorted(options.items())))
    if inspect.isclass(source) or not _is_estimator(source):
        raise TypeError(f"a method must be a spec string or a scikit-learn estimator object "
                        f"(with fit, predict, get_params), got {source!r}")
    cls = type(source)
    params = source.get_params(deep=False)
    try:
        defaults = cls().get_params(deep=False)
    except TypeError:  # required constructor arguments: every parameter is named
        defaults = {}
    changed = {k: v for k, v in params.items()
               if k not in defaults or not _same(v, defaults[k])}
    options = {k: (v if isinstance(v, _SIMPLE) else repr(v).replace(":", ";").replace(",", ";"))
               for k, v in changed.items()}
    return MethodSpec("sklearn", _public_path(cls), tuple(sorted(options.items())),
                      estimator=source)


def _public_path(cls) -> str:
    """``sklearn.ensemble.RandomForestRegressor`` rather than the defining private module
    ``sklearn.ensemble._forest``: the shortest parent module that exports the class (so
    the object and its spec string get one label)."""
    parts = cls.__module__.split(".")
    for k in range(1, len(parts) + 1):
        module = ".".join(parts[:k])
        try:
            if getattr(importlib.import_module(module), cls.__name__, None) is cls:
                return f"{module}.{cls.__name__}"
        except ImportError:
            continue
    return f"{cls.__module__}.{cls.__qualname__}"


def _same(a, b) -> bool:
    try:
        return bool(a == b) if isinstance(a, _SIMPLE) else repr(a) == repr(b)
    except Exception:
        return False


def estimator_task_reason(spec: MethodSpec, task: str) -> str | None:
    """``None`` if the estimator fits ``task`` (a classifier for classification, else a
    regressor), else the reason."""
    from sklearn.base import is_classifier

    est = spec.estimator if spec.estimator is not None else import_estimator(spec.method)
    if inspect.isclass(est):
        try:
            est = est()
        except TypeError:
            return None
    clf = is_classifier(est)
    if clf != (task == CLASSIFICATION):
        kind = "a classifier" if clf else "not a classifier"
        return f"{spec.method} is {kind}: not for {task}"
    return None
