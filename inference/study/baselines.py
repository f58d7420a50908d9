"""scikit-learn baselines of a study: the SVM (SVR/SVC with the Gaussian kernel, C by k-fold
CV) and any scikit-learn estimator (``sklearn=module.Class:param=value``, or the object).

A baseline's predictions are scored by :mod:`sparsebayes.inference.metrics` like every
other method: probabilistic losses (NLPD, coverage; log loss, Brier) when the estimator
offers ``predict(X, return_std=True)`` (a Gaussian predictive) or ``predict_proba``; else
those losses are left empty and the record says ``probabilistic = 0``.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from sparsebayes.models.datasets import REGRESSION, Split

from .specs import MethodSpec, import_estimator

__all__ = ["fit_svm", "make_estimator", "baseline_predictions"]

def make_estimator(spec: MethodSpec, seed: int):
    """A fresh (cloned) estimator of ``spec``; a ``random_state`` left at ``None`` is set to
    the cell's seed, so every executor gets the same numbers."""
    from sklearn.base import clone

    if spec.estimator is not None:
        est = clone(spec.estimator)
    else:
        params = {k: v for k, v in spec.options if k != "splits"}
        est = import_estimator(spec.method)(**params)
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
