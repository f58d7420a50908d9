"""Validation of the data handed to a problem: inputs, targets, class labels and centres
(NumPy or Dask arrays), each error naming the argument and what was wrong."""

from __future__ import annotations

import numpy as np

__all__ = ["check_inputs", "check_targets", "check_labels", "is_dask",
           "check_dask_inputs", "check_dask_targets"]


def check_inputs(X, name: str = "X") -> np.ndarray:
    """X as a finite float (n, d) array; ``TypeError`` for non-numeric, ``ValueError`` otherwise."""
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"{name} must be a numeric array: {exc}") from exc
    if arr.dtype == object or arr.dtype.kind in "USVMmc":
        raise TypeError(f"{name} must be real numeric, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr



def check_targets(t, n: int, name: str = "t") -> np.ndarray:
    """Finite float targets of length ``n``."""
    try:
        arr = np.asarray(t)
    except Exception as exc:
        raise TypeError(f"{name} must be a numeric array: {exc}") from exc
    if arr.dtype == object or arr.dtype.kind in "USVMmc":
        raise TypeError(f"{name} must be real numeric, got dtype {arr.dtype}")
    arr = arr.astype(float).reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr.astype(float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"X and {name} have mismatched lengths: {n} and {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def is_dask(a) -> bool:
    """A ``dask.array.Array`` (checked without importing Dask)."""
    return type(a).__module__.startswith("dask.") and hasattr(a, "chunks")



def check_dask_inputs(X):
    """A Dask ``X`` kept lazy: 2-D, real numeric, known chunk sizes, whole columns per chunk.
    (Finiteness is checked chunk by chunk when the statistics are computed.)"""
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.dtype == object or X.dtype.kind not in "biuf":
        raise TypeError(f"X must be real numeric, got dtype {X.dtype}")
    if any(np.isnan(c) for cs in X.chunks for c in cs):
        raise ValueError("X is a Dask array with unknown chunk sizes; call "
                         "X.compute_chunk_sizes() (or X.to_dask_array(lengths=True)) first")
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    return X.astype(float)



def check_dask_targets(t, X, name: str = "t"):
    """Dask targets chunked like the rows of ``X``."""
    if not is_dask(t):
        raise TypeError(f"X is a Dask array, so {name} must be one too (chunked like X's rows)")
    if t.ndim == 2 and 1 in t.shape:
        t = t.reshape(-1)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {t.shape}")
    if any(np.isnan(c) for c in t.chunks[0]):
        raise ValueError(f"{name} is a Dask array with unknown chunk sizes; call "
                         f"{name}.compute_chunk_sizes() first")
    if t.shape[0] != X.shape[0]:
        raise ValueError(f"X and {name} have mismatched lengths: {X.shape[0]} and {t.shape[0]}")
    if t.dtype == object or t.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be real numeric, got dtype {t.dtype}")
    return t.rechunk((X.chunks[0],)).astype(float)



def check_labels(y, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class labels of length ``n``: ``(y, classes, codes)`` with ``classes`` the sorted
    unique labels and ``codes`` their integer index 0..K-1; at least two classes."""
    y = np.asarray(y)
    if y.ndim != 1:
        y = y.reshape(-1) if y.ndim == 2 and 1 in y.shape else y
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"X and y have mismatched lengths: {n} and {y.shape[0]}")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf")
        if np.any(y != np.round(y)):
            raise ValueError("y holds non-integer floats: class labels must be discrete")
    if y.dtype == object:
        y = y.astype(str)
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y has only one class ({classes[0]!r}); need at least 2")
    return y, classes, codes.astype(np.int64)
