"""scikit-learn baselines of a study: the SVM (SVR/SVC with the Gaussian kernel, C by k-fold
CV) and any scikit-learn estimator (``sklearn=module.Class:param=value``, or the object).

A baseline's predictions are scored by :mod:`sparsebayes.inference.metrics` like every
other method: probabilistic losses (NLPD, coverage; log loss, Brier) when the estimator
offers ``predict(X, return_std=True)`` (a Gaussian predictive) or ``predict_proba``; else
those losses are left empty and the record says ``probabilistic = 0``.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np

from sparsebayes.models.datasets import CLASSIFICATION, REGRESSION, Split

from .specs import MethodSpec, check_splits, parse_spec

__all__ = ["estimator_spec", "fit_svm", "make_estimator", "baseline_predictions"]

_SIMPLE = (bool, int, float, str, type(None))


def _import(path: str):
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
        cls = _import(head)
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

    est = spec.estimator if spec.estimator is not None else _import(spec.method)
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


def make_estimator(spec: MethodSpec, seed: int):
    """A fresh (cloned) estimator of ``spec``; a ``random_state`` left at ``None`` is set to
    the cell's seed, so every executor gets the same numbers."""
    from sklearn.base import clone

    if spec.estimator is not None:
        est = clone(spec.estimator)
    else:
        params = {k: v for k, v in spec.options if k != "splits"}
        est = _import(spec.method)(**params)
    if "random_state" in est.get_params(deep=False) and est.get_params()["random_state"] is None:
        est.set_params(random_state=seed)
    return est


def fit_svm(method: MethodSpec, task: str, split: Split, widths, seed: int):
    """scikit-learn SVR/SVC with the Gaussian kernel, C (and epsilon) by k-fold CV; with
    several ``widths`` the width too (T01 eq. 30's ``exp(-|x-c|^2/r^2)`` is scikit-learn's
    ``gamma = 1 / r^2``)."""
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.svm import SVC, SVR

    opts = dict(method.options)
    grid: dict[str, Any] = {"gamma": 1.0 / np.asarray(widths, float) ** 2}
    if task == REGRESSION:
        sd = np.std(split.y_train)  # C and epsilon scale with the targets
        est = SVR(kernel="rbf")
        grid.update(C=sd * np.logspace(-1, 2, 4), epsilon=sd * np.array([0.01, 0.1, 0.3]))
        folds = KFold(int(opts.get("cv", 5)), shuffle=True, random_state=seed)
    else:
        est = SVC(kernel="rbf")
        grid["C"] = np.logspace(-1, 3, 5)
        folds = StratifiedKFold(int(opts.get("cv", 5)), shuffle=True, random_state=seed)
    if "C" in opts:
        grid["C"] = [float(opts["C"])]
    search = GridSearchCV(est, grid, cv=folds, n_jobs=1)
    search.fit(split.X_train, split.y_train)
    return search.best_estimator_


def baseline_predictions(est, X, task: str):
    """What the metrics score: for regression a Gaussian
    :class:`~sparsebayes.inference.predictive.Predictive` when ``predict`` takes
    ``return_std`` (else the mean array); for classification a
    :class:`~sparsebayes.inference.predictive.ClassPredictive` when the estimator has
    ``predict_proba`` (else the label array). Returns ``(prediction, probabilistic)``."""
    if task == REGRESSION:
        if "return_std" in inspect.signature(est.predict).parameters:
            from sparsebayes.inference.predictive.regression import Predictive

            mean, std = est.predict(X, return_std=True)
            return Predictive(np.asarray(mean, float), np.asarray(std, float) ** 2,
                              "sklearn"), True
        return np.asarray(est.predict(X), float), False
    try:
        proba = est.predict_proba(X)  # SVC(probability=False) raises AttributeError
    except AttributeError:
        return np.asarray(est.predict(X)), False
    from sparsebayes.inference.predictive.classification import ClassPredictive

    # a probability of exactly 0 (a forest's vote) counts as the smallest float, as in
    # metrics.log_loss, so that one point cannot make the loss infinite
    log_proba = np.log(np.clip(np.asarray(proba, float), np.finfo(float).tiny, None))
    return ClassPredictive(log_proba, np.asarray(est.classes_), "sklearn"), True
