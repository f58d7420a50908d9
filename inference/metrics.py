"""Losses that compare predictive distributions (Rasmussen & Quiñonero-Candela 2005, Tables
1-2) and a paired test across splits.

Regression metrics take any predictive object with ``mean`` (and, where needed, ``logpdf``
and ``interval``): :class:`~sparsebayes.inference.predictive.Predictive`,
:class:`~sparsebayes.inference.predictive.MixturePredictive`, the GP predictive; the
mean-only losses also take a plain array of predictions. Classification metrics take an
object with ``proba`` (n, K) and ``classes`` (e.g. a ``ClassPredictive``) or arrays.
Every loss is the average over the test points (the per-split value of the paper's tables).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from sparsebayes.models.checks import check_targets

__all__ = [
    "holm",
    "squared_error",
    "absolute_error",
    "nlpd",
    "rmse",
    "mae",
    "coverage",
    "error_rate",
    "log_loss",
    "brier_score",
    "paired_t_test",
]


def _mean_and_y(pred: Any, y) -> tuple[np.ndarray, np.ndarray]:
    mean = pred.mean if hasattr(pred, "mean") and not isinstance(pred, np.ndarray) else pred
    try:
        mean = np.asarray(mean, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"pred must be a predictive object or an array of predictions: "
                        f"{exc}") from exc
    return mean, check_targets(y, mean.size, name="y")


def squared_error(pred: Any, y) -> float:
    """Mean squared error ``mean (y - m(x))^2`` of the predictive mean (R&QC's squared
    error loss)."""
    mean, y = _mean_and_y(pred, y)
    return float(np.mean((y - mean) ** 2))


def absolute_error(pred: Any, y) -> float:
    """Mean absolute error ``mean |y - m(x)|`` (R&QC's absolute error loss)."""
    mean, y = _mean_and_y(pred, y)
    return float(np.mean(np.abs(y - mean)))


mae = absolute_error


def rmse(pred: Any, y) -> float:
    """Root mean squared error."""
    return float(np.sqrt(squared_error(pred, y)))


def _need(pred: Any, attr: str, what: str) -> None:
    if not hasattr(pred, attr):
        raise TypeError(f"{what} needs a predictive distribution with .{attr}, got "
                        f"{type(pred).__name__}")


def nlpd(pred: Any, y) -> float:
    """Negative log predictive density ``-mean log p(y_n | x_n, D)`` (R&QC's "negative log
    test density")."""
    _need(pred, "logpdf", "nlpd")
    return float(-np.mean(pred.logpdf(y)))


def coverage(pred: Any, y, p: float = 0.95) -> float:
    """Fraction of ``y`` inside the central predictive interval of probability ``p``."""
    _need(pred, "interval", "coverage")
    lo, hi = pred.interval(p)
    y = check_targets(y, np.asarray(lo).size, name="y")
    return float(np.mean((lo <= y) & (y <= hi)))


def _proba_and_codes(pred: Any, y, classes=None) -> tuple[np.ndarray, np.ndarray]:
    """(n, K) probabilities and the column index of each label of ``y``."""
    if hasattr(pred, "proba"):
        proba = np.asarray(pred.proba, dtype=float)
        classes = getattr(pred, "classes", None) if classes is None else classes
    else:
        proba = np.asarray(pred, dtype=float)
    if proba.ndim == 1:  # binary: probability of the second class
        proba = np.column_stack([1 - proba, proba])
    if proba.ndim != 2:
        raise ValueError(f"probabilities must be (n, K) or (n,), got shape {proba.shape}")
    if not np.all(np.isfinite(proba)) or np.any(proba < 0) or np.any(proba > 1):
        raise ValueError("probabilities must be finite and in [0, 1]")
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1 or y.shape[0] != proba.shape[0]:
        raise ValueError(f"y must be 1-D with {proba.shape[0]} labels, got shape {y.shape}")
    classes = np.arange(proba.shape[1]) if classes is None else np.asarray(classes)
    if classes.size != proba.shape[1]:
        raise ValueError(f"{classes.size} classes for {proba.shape[1]} probability columns")
    if classes.dtype.kind in "US":
        y = y.astype(str)
    hit = y[:, None] == classes[None, :]
    if not hit.any(axis=1).all():
        bad = np.unique(y[~hit.any(axis=1)])
        raise ValueError(f"y has labels {bad.tolist()} not among the classes {classes.tolist()}")
    return proba, np.argmax(hit, axis=1)


def error_rate(pred: Any, y, classes=None) -> float:
    """Fraction of misclassified points. ``pred``: an object with ``proba`` (and
    ``classes``), an (n, K) / (n,) probability array, or, if ``classes`` is ``"labels"``,
    an array of predicted labels."""
    if isinstance(classes, str) and classes == "labels":
        labels = np.asarray(pred).reshape(-1)
        y = np.asarray(y).reshape(-1)
        if labels.shape != y.shape:
            raise ValueError(f"predicted labels {labels.shape} and y {y.shape} differ in shape")
        return float(np.mean(labels != y))
    proba, codes = _proba_and_codes(pred, y, classes)
    return float(np.mean(np.argmax(proba, axis=1) != codes))


def log_loss(pred: Any, y, classes=None) -> float:
    """Mean negative log probability of the true class (cross-entropy)."""
    if hasattr(pred, "log_proba"):  # exact logs, no underflow at tiny probabilities
        _, codes = _proba_and_codes(pred, y, classes)
        return float(-np.mean(np.asarray(pred.log_proba)[np.arange(codes.size), codes]))
    proba, codes = _proba_and_codes(pred, y, classes)
    p = proba[np.arange(codes.size), codes]
    return float(-np.mean(np.log(np.clip(p, np.finfo(float).tiny, None))))


def brier_score(pred: Any, y, classes=None) -> float:
    """Brier (1950) score ``mean_n sum_k (p_nk - [y_n = k])^2``. For two classes this is
    twice scikit-learn's binary ``brier_score_loss`` (which scores only the positive class)."""
    proba, codes = _proba_and_codes(pred, y, classes)
    onehot = np.eye(proba.shape[1])[codes]
    return float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))


def paired_t_test(loss_a, loss_b) -> tuple[float, float]:
    """Two-sided paired t-test of the per-split average losses of two methods (as in R&QC
    §3): returns ``(mean(loss_a - loss_b), p-value)``, by :func:`scipy.stats.ttest_rel`.

    With cross-validation the training sets overlap, so the independence assumption is
    violated (R&QC footnote 5) and the p-value is optimistic.
    """
    a = np.asarray(loss_a, dtype=float).reshape(-1)
    b = np.asarray(loss_b, dtype=float).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"loss_a and loss_b need one value per split each, got {a.size} and "
                         f"{b.size}")
    if a.size < 2:
        raise ValueError("a paired t-test needs at least 2 splits")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("losses contain NaN or inf")
    diff = a - b
    if np.all(diff == diff[0]):
        return float(diff[0]), (1.0 if diff[0] == 0 else 0.0)
    return float(np.mean(diff)), float(stats.ttest_rel(a, b).pvalue)


def holm(pvalues) -> np.ndarray:
    """Holm's (1979) step-down adjustment of ``m`` p-values for the family-wise error rate:
    the ``k``-th smallest becomes ``max_{j <= k} min(1, (m - j + 1) p_(j))``. Rejecting the
    hypotheses whose adjusted p-value is below ``a`` controls the chance of any false
    rejection at ``a``, whatever the dependence between the tests."""
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p}")
    order = np.argsort(p, kind="stable")
    m = p.size
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out
