"""The design matrix Phi: an optional bias column, one kernel column per centre, and extra
columns (linear or quadratic terms in the inputs), each labelled (T01 eqs. 1-2, §4.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from .kernels import Kernel, kernel_from_spec

__all__ = ["Basis", "EXTRA_COLUMNS"]

EXTRA_COLUMNS = ("linear", "quadratic")


@dataclass(frozen=True, eq=False)
class Basis:
    """Columns ``[bias | k(x, c_1), ..., k(x, c_m) | extra terms]`` of the design matrix.

    Labels: ``"bias"``; for kernel columns the index of the training input they are centred
    on (``"0"``, ``"1"``, ...), or ``"c0"``, ``"c1"``, ... when the centres are a dictionary
    (``dictionary=True``: k-means or user-given centres, not the training inputs); and
    ``"x0"``, ``"x0^2"``, ``"x0*x1"`` for extra columns.
    """

    kernel: Kernel
    centres: np.ndarray
    bias: bool = True
    extra: tuple[str, ...] = ()
    dictionary: bool = False

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
        """The label of each column (a new list each call; built once per basis)."""
        return list(self._labels)

    @cached_property
    def _labels(self) -> tuple[str, ...]:
        # cached on the instance (a frozen dataclass: its fields, and so its columns, are
        # fixed)
        return tuple(self.column_labels(np.arange(self.n_columns)).tolist())

    def column_labels(self, columns: np.ndarray) -> np.ndarray:
        """The labels of the columns at indices ``columns`` (a string array of the width of
        ``np.asarray(labels, dtype=str)``), built without the labels of the others."""
        columns = np.asarray(columns, dtype=int)
        off, m = self.kernel_offset, self.n_kernel
        prefix = "c" if self.dictionary else ""
        extra = [n for n, _ in self._extra_terms()]
        widths = ([4] if self.bias else []) + ([len(f"{prefix}{m - 1}")] if m else []) + [
            len(n) for n in extra]
        labels = ["bias" if c < off else f"{prefix}{c - off}" if c < off + m
                  else extra[c - off - m] for c in columns.ravel().tolist()]
        return np.array(labels, dtype=f"<U{max(widths, default=1)}").reshape(columns.shape)

    @property
    def n_columns(self) -> int:
        return int(self.bias) + self.n_kernel + len(self._extra_terms())

    def kernel_index(self) -> np.ndarray:
        """Row of ``centres`` of each column (-1 for bias and extra columns)."""
        idx = np.full(self.n_columns, -1)
        off = self.kernel_offset
        idx[off : off + self.n_kernel] = np.arange(self.n_kernel)
        return idx

    def centre_index(self) -> np.ndarray:
        """Training-point index of each column: -1 for bias and extra columns, and for every
        column of a dictionary (its centres are not training inputs)."""
        if self.dictionary:
            return np.full(self.n_columns, -1)
        return self.kernel_index()

    def design(self, X: np.ndarray, columns: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
        """Phi (n, M) in Fortran order (contiguous columns), or only ``columns`` of it.

        The kernel block is written in place into the preallocated matrix (or ``out``, an
        (n, M) Fortran-ordered buffer to reuse), so no second n x m temporary is made (an
        N = 4000 RVM design is 128 MB).
        """
        X = np.asarray(X, dtype=float)
        n = X.shape[0]
        if columns is not None:
            return self._design_columns(X, np.asarray(columns, dtype=int))
        if out is not None and out.shape == (n, self.n_columns) and out.flags.f_contiguous:
            Phi = out
        else:
            Phi = np.empty((n, self.n_columns), order="F")
        off = self.kernel_offset
        if self.bias:
            Phi[:, 0] = 1.0
        # Phi.T[off:off+m] is C-contiguous (m, n): fill K^T in place, no copy.
        block = Phi.T[off : off + self.n_kernel]
        if self.kernel.symmetric:
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

    def tensor_design(self, X):
        """The whole design (n, M) as a PyTensor expression of the symbolic inputs ``X``
        (the same columns as :meth:`design`; the centres are constants)."""
        import pytensor.tensor as pt

        cols = []
        if self.bias:
            cols.append(pt.ones((X.shape[0], 1)))
        cols.append(self.kernel.tensor(X, self.centres))
        for _, ks in self._extra_terms():
            term = X[:, ks[0]]
            for k in ks[1:]:
                term = term * X[:, k]
            cols.append(term[:, None])
        return pt.concatenate(cols, axis=1)

    def mean_square(self, X: np.ndarray, chunk: int = 8192) -> float:
        """``mean(Phi**2)`` of the design at ``X``, in row chunks (no N x M design held)."""
        total = 0.0
        for lo in range(0, X.shape[0], chunk):
            Phi = self.design(np.asarray(X[lo : lo + chunk]))
            total += float(np.einsum("nm,nm->", Phi, Phi))
        return total / (X.shape[0] * self.n_columns)

    def with_kernel(self, kernel: Kernel) -> Basis:
        return Basis(kernel=kernel, centres=self.centres, bias=self.bias, extra=self.extra,
                     dictionary=self.dictionary)

    def to_attrs(self) -> dict[str, Any]:
        """The basis as result attrs, each a value (kernel name and parameters, bias, extra
        columns, dictionary); the centres are stored as data."""
        out: dict[str, Any] = {f"kernel_{k}" if k != "name" else "kernel":
                               np.asarray(v, dtype=float) if isinstance(v, tuple) else v
                               for k, v in self.kernel.spec().items()}
        return {**out, "bias": int(self.bias), "extra_columns": " ".join(self.extra),
                "dictionary": int(self.dictionary)}

    @staticmethod
    def from_attrs(attrs, centres: np.ndarray, kernel: Kernel | None = None) -> Basis:
        """The basis of :meth:`to_attrs` on ``centres``; ``kernel`` replaces the stored kernel
        (a user callable, which the attrs cannot hold)."""
        if kernel is None:
            spec = {k.removeprefix("kernel_"): v for k, v in attrs.items()
                    if k.startswith("kernel_")}
            spec = {k: tuple(float(x) for x in v) if isinstance(v, np.ndarray) else v
                    for k, v in spec.items()}  # an ARD width: one per input
            kernel = kernel_from_spec({"name": attrs["kernel"], **spec})
        return Basis(kernel, np.asarray(centres, dtype=float), bool(attrs["bias"]),
                     tuple(attrs["extra_columns"].split()),
                     bool(attrs.get("dictionary", 0)))

    def same_as(self, attrs) -> bool:
        """Whether result attrs describe this basis (kernel, its parameters, bias, extra
        columns, dictionary)."""
        mine = self.to_attrs()
        return all(k in attrs and np.array_equal(np.asarray(attrs[k]), np.asarray(v))
                   for k, v in mine.items())
