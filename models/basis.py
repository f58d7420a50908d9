"""The design matrix Phi: an optional bias column, one kernel column per centre, and extra
columns (linear or quadratic terms in the inputs), each labelled (Tipping 2001, eqs. 1-2, §4.3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .kernels import GaussianKernel, Kernel, kernel_from_spec

__all__ = ["Basis", "EXTRA_COLUMNS"]

EXTRA_COLUMNS = ("linear", "quadratic")


@dataclass(frozen=True, eq=False)
class Basis:
    """Columns ``[bias | k(., c_1) ... k(., c_m) | extra terms]`` of the design matrix.

    Labels: ``"bias"``, the centre index as a string (``"0"``, ``"1"``, ...) for kernel
    columns, and ``"x0"``, ``"x0^2"``, ``"x0*x1"`` for extra columns.
    """

    kernel: Kernel
    centres: np.ndarray
    bias: bool = True
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = [e for e in self.extra if e not in EXTRA_COLUMNS]
        if bad:
            raise ValueError(f"extra_columns: unknown {bad}; choose from {EXTRA_COLUMNS}")
        self.kernel.check_inputs(self.centres.shape[1])

    @property
    def n_features(self) -> int:
        return self.centres.shape[1]

    @property
    def n_kernel(self) -> int:
        return self.centres.shape[0]

    @property
    def kernel_offset(self) -> int:
        """Index of the first kernel column."""
        return int(self.bias)

    def _extra_terms(self) -> list[tuple[str, tuple[int, ...]]]:
        d = self.n_features
        terms: list[tuple[str, tuple[int, ...]]] = []
        if "linear" in self.extra:
            terms += [(f"x{k}", (k,)) for k in range(d)]
        if "quadratic" in self.extra:
            terms += [(f"x{k}^2", (k, k)) for k in range(d)]
            terms += [(f"x{j}*x{k}", (j, k)) for j in range(d) for k in range(j + 1, d)]
        return terms

    @property
    def labels(self) -> list[str]:
        head = ["bias"] if self.bias else []
        return head + [str(i) for i in range(self.n_kernel)] + [n for n, _ in self._extra_terms()]

    @property
    def n_columns(self) -> int:
        return len(self.labels)

    def centre_index(self) -> np.ndarray:
        """Training-point index of each column (-1 for bias and extra columns)."""
        idx = np.full(self.n_columns, -1)
        off = self.kernel_offset
        idx[off : off + self.n_kernel] = np.arange(self.n_kernel)
        return idx

    def design(self, X: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """Phi (n, M) in Fortran order (contiguous columns), or only ``columns`` of it.

        The kernel block is written in place into the preallocated matrix, so no
        second n x m temporary is made (an N = 4000 RVM design is 128 MB).
        """
        X = np.asarray(X, dtype=float)
        n = X.shape[0]
        if columns is not None:
            return self._design_columns(X, np.asarray(columns, dtype=int))
        Phi = np.empty((n, self.n_columns), order="F")
        off = self.kernel_offset
        if self.bias:
            Phi[:, 0] = 1.0
        # Phi.T[off:off+m] is C-contiguous (m, n): fill K^T in place, no copy.
        block = Phi.T[off : off + self.n_kernel]
        if _symmetric(self.kernel):
            self.kernel(self.centres, X, out=block)  # k(c, x) = k(x, c): K^T in place
        else:
            block[...] = self.kernel(X, self.centres).T
        for j, (_, ks) in enumerate(self._extra_terms()):
            Phi[:, off + self.n_kernel + j] = np.prod(X[:, list(ks)], axis=1)
        return Phi

    def _design_columns(self, X: np.ndarray, columns: np.ndarray) -> np.ndarray:
        off = self.kernel_offset
        Phi = np.empty((X.shape[0], columns.size), order="F")
        kind = np.where(columns < off, 0, np.where(columns < off + self.n_kernel, 1, 2))
        Phi[:, kind == 0] = 1.0
        kcols = np.flatnonzero(kind == 1)
        if kcols.size:
            Phi[:, kcols] = self.kernel(X, self.centres[columns[kcols] - off])
        terms = self._extra_terms()
        for j in np.flatnonzero(kind == 2):
            ks = terms[columns[j] - off - self.n_kernel][1]
            Phi[:, j] = np.prod(X[:, list(ks)], axis=1)
        return Phi

    def with_kernel(self, kernel: Kernel) -> Basis:
        return Basis(kernel=kernel, centres=self.centres, bias=self.bias, extra=self.extra)

    def spec(self) -> str:
        """JSON description (kernel, bias, extra columns); centres are stored as data."""
        return json.dumps({"kernel": self.kernel.spec(), "bias": self.bias, "extra": self.extra})

    @staticmethod
    def from_spec(spec: str, centres: np.ndarray) -> Basis:
        d: dict[str, Any] = json.loads(spec)
        return Basis(kernel_from_spec(d["kernel"]), np.asarray(centres, dtype=float),
                     bool(d["bias"]), tuple(d["extra"]))


def _symmetric(kernel: Kernel) -> bool:
    """Kernels with k(x, c) = k(c, x), whose transpose block can be filled in place."""
    return isinstance(kernel, GaussianKernel) or kernel.name in ("log", "linear", "poly",
                                                                 "linear_spline")
