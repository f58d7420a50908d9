"""Sufficient statistics of RVM regression: ``G = Phi^T Phi``, ``Phi^T t``, ``t^T t``, ``sum t``
and ``N`` (T01 eqs. 12-13 and 15 need the data only through them), computed in row chunks
with the kernel block written in place into one reused buffer, so memory is
O(M^2 + chunk x M) and the N x M design is never held; or, for Dask arrays, as a map-reduce
over their row chunks on whatever scheduler is active (a ``distributed.Client`` if the user
made one). Also the memory guard for large allocations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from sparsebayes.models.basis import Basis
from sparsebayes.models.checks import is_dask

__all__ = ["GramStatistics", "gram_statistics", "check_memory", "available_memory",
           "CHUNK_BYTES"]

CHUNK_BYTES = 64 * 2**20  # one chunk of the design (rows x M doubles) at most


@dataclass
class GramStatistics:
    """``G = Phi^T Phi`` (M, M), ``Phit = Phi^T t`` (M,), ``tt = t^T t``, ``tsum = sum t``,
    ``n`` rows."""

    G: np.ndarray
    Phit: np.ndarray
    tt: float
    tsum: float
    n: int

    def __add__(self, other: GramStatistics) -> GramStatistics:
        return GramStatistics(self.G + other.G, self.Phit + other.Phit, self.tt + other.tt,
                              self.tsum + other.tsum, self.n + other.n)

    def products(self, beta: float):
        """The sequential algorithm's view of the data at noise precision ``beta``."""
        from .sequential import GramProducts

        return GramProducts(self.G, self.Phit, self.tt, self.n, beta)

    def gram(self, active) -> np.ndarray:
        return self.G[np.ix_(active, active)]

    def column_sq_norms(self) -> np.ndarray:
        return np.diag(self.G).copy()

    def rss(self, active, mu: np.ndarray) -> float:
        """``||t - Phi_active mu||^2 = tt - 2 mu^T Phi_a^T t + mu^T G_aa mu`` (>= 0)."""
        return max(float(self.tt - 2 * mu @ self.Phit[active]
                         + mu @ self.gram(active) @ mu), 0.0)

    @property
    def var_t(self) -> float:
        """The (population) variance of the targets."""
        mean = self.tsum / self.n
        return max(self.tt / self.n - mean * mean, 0.0)


def chunk_rows(n_columns: int) -> int:
    """Rows per chunk so that a chunk of the design stays within ``CHUNK_BYTES``."""
    return max(1, CHUNK_BYTES // (8 * max(n_columns, 1)))


def gram_statistics(basis: Basis, X, t, columns: np.ndarray | None = None,
                    chunk: int | None = None) -> GramStatistics:
    """The statistics of the design ``basis.design(X)`` (or only its ``columns``) and
    targets ``t``. NumPy inputs: row chunks of ``chunk`` rows (default: 64 MB of design)
    through one buffer, ``G`` accumulated by BLAS ``dsyrk`` (half the flops of ``Phi^T
    Phi``). Dask inputs: the same per row chunk of ``X``, summed as a tree of tasks."""
    M = basis.n_columns if columns is None else len(columns)
    if is_dask(X):
        return _dask_statistics(basis, X, t, columns)
    X = np.asarray(X, dtype=float)
    t = np.asarray(t, dtype=float)
    n = X.shape[0]
    step = chunk or chunk_rows(M)
    G = np.zeros((M, M), order="F")
    Phit = np.zeros(M)
    buf = np.empty((min(step, n), M), order="F")
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        Phi = _design_into(basis, X[lo:hi], columns, buf if hi - lo == buf.shape[0] else None)
        G = linalg.blas.dsyrk(1.0, Phi, beta=1.0, c=G, trans=1, lower=0, overwrite_c=1)
        Phit += Phi.T @ t[lo:hi]
    G = np.triu(G) + np.triu(G, 1).T
    return GramStatistics(G, Phit, float(t @ t), float(t.sum()), n)


def _design_into(basis: Basis, X: np.ndarray, columns, out: np.ndarray | None) -> np.ndarray:
    if columns is not None:
        return basis.design(X, columns=columns)
    return basis.design(X, out=out)


def _chunk_statistics(X: np.ndarray, t: np.ndarray, basis: Basis, columns) -> GramStatistics:
    """One Dask row chunk (checked for NaN/inf here, where its values first exist)."""
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(t))):
        raise ValueError("X or t contains NaN or inf (in a chunk of the Dask array)")
    return gram_statistics(basis, X, t, columns)


def _dask_statistics(basis: Basis, X, t, columns) -> GramStatistics:
    import dask

    xs = X.to_delayed().ravel()
    ts = t.to_delayed().ravel()
    if len(xs) != len(ts):
        raise ValueError("t must be chunked like the rows of X")
    parts = [dask.delayed(_chunk_statistics)(xb, tb, basis, columns) for xb, tb in zip(xs, ts)]
    while len(parts) > 1:  # a tree of sums: no task holds more than two partial results
        parts = [dask.delayed(np.add)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                 else parts[i] for i in range(0, len(parts), 2)]
    (stats,) = dask.compute(parts[0])
    return stats


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo, else physical)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # pragma: no cover


def check_memory(nbytes: float, what: str) -> None:
    """Raise ``MemoryError`` before allocating ``nbytes`` for ``what`` if it will not fit in
    the memory available, naming the size and the way out (a basis dictionary)."""
    avail = available_memory()
    if nbytes > 0.9 * avail:
        raise MemoryError(
            f"{what} needs {nbytes / 2**30:.1f} GiB but only {avail / 2**30:.1f} GiB of "
            "memory is available; use a basis dictionary (centres=M, e.g. M = 500: "
            "k-means centres), whose cost is O(M^2) memory whatever the number of points")
