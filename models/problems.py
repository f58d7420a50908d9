"""Problem descriptions: frozen records of *what* is believed (data, basis, hyperprior).

``fit(problem, method=...)`` in :mod:`sparsebayes.inference` computes a posterior for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .basis import Basis
from .kernels import GaussianKernel, Kernel, as_kernel
from .priors import GammaPrior

__all__ = ["RVMRegression", "RVMClassification", "check_inputs", "check_targets"]


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


def _common(problem, X) -> np.ndarray:
    X = check_inputs(X)
    if X.shape[0] < 2:
        raise ValueError(f"X needs at least 2 samples, got {X.shape[0]}")
    kernel = as_kernel(problem.kernel)
    object.__setattr__(problem, "kernel", kernel)
    object.__setattr__(problem, "X", X)
    if problem.prior is not None and not isinstance(problem.prior, GammaPrior):
        raise TypeError(f"prior must be a GammaPrior or None, got {type(problem.prior).__name__}")
    object.__setattr__(problem, "extra_columns", tuple(problem.extra_columns))
    if problem.learn_width and not isinstance(kernel, GaussianKernel):
        raise ValueError("learn_width=True needs a GaussianKernel")
    Basis(kernel, X, problem.bias, problem.extra_columns)  # validates kernel and extra columns
    return X


@dataclass(frozen=True, eq=False)
class RVMRegression:
    """Sparse Bayesian regression ``t = Phi w + eps`` (Tipping 2001, eqs. 1-6).

    Parameters
    ----------
    X, t : inputs (n, d) and real targets (n,).
    kernel : a :class:`Kernel`, a kernel name, or a callable ``k(X, C)``; centres are the
        training inputs.
    bias : add a bias column (label ``"bias"``).
    extra_columns : ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    noise_sd : ``None`` to estimate the noise; a number to keep it fixed.
    prior : :class:`GammaPrior` on ``alpha`` and ``beta``; ``None`` is the method's default
        (Tipping's flat prior for evidence/VRVM, a proper one for sampling).
    learn_width : maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    """

    X: np.ndarray
    t: np.ndarray
    kernel: Kernel | str | Callable = field(default_factory=lambda: GaussianKernel(1.0))
    bias: bool = True
    extra_columns: Sequence[str] = ()
    noise_sd: float | None = None
    prior: GammaPrior | None = None
    learn_width: bool = False

    kind = "regression"

    def __post_init__(self) -> None:
        X = _common(self, self.X)
        t = check_targets(self.t, X.shape[0])
        if np.ptp(t) == 0:
            raise ValueError("t is constant: there is nothing to regress")
        object.__setattr__(self, "t", t)
        if self.noise_sd is not None:
            sd = self.noise_sd
            if not np.isscalar(sd) or not np.isfinite(sd) or sd <= 0:
                raise ValueError(f"noise_sd must be None or a number > 0, got {self.noise_sd!r}")
            object.__setattr__(self, "noise_sd", float(self.noise_sd))

    @property
    def basis(self) -> Basis:
        return Basis(self.kernel, self.X, self.bias, self.extra_columns)

    def design_matrix(self) -> np.ndarray:
        """Phi (n, M), Fortran-ordered."""
        return self.basis.design(self.X)

    def pymc_model(self, collapsed: bool = False, prior: GammaPrior | None = None, **kwargs):
        """The hierarchical ``pm.Model`` (non-centred joint, or ``collapsed`` with ``w``
        integrated out); see :func:`sparsebayes.models.pymc_models.regression_model`."""
        from .pymc_models import regression_model

        return regression_model(self, collapsed=collapsed, prior=prior, **kwargs)


@dataclass(frozen=True, eq=False)
class RVMClassification:
    """Sparse Bayesian classification with a Bernoulli-logit (2 classes, eq. 23) or softmax
    (K classes, eq. 28) likelihood. ``y`` may hold any labels; ``classes`` are its sorted
    unique values and ``t`` the integer codes 0..K-1."""

    X: np.ndarray
    y: np.ndarray
    kernel: Kernel | str | Callable = field(default_factory=lambda: GaussianKernel(1.0))
    bias: bool = True
    extra_columns: Sequence[str] = ()
    prior: GammaPrior | None = None
    learn_width: bool = False
    classes: np.ndarray = field(init=False)
    t: np.ndarray = field(init=False)

    kind = "classification"

    def __post_init__(self) -> None:
        X = _common(self, self.X)
        y = np.asarray(self.y)
        if y.ndim != 1:
            y = y.reshape(-1) if y.ndim == 2 and 1 in y.shape else y
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X and y have mismatched lengths: {X.shape[0]} and {y.shape[0]}")
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
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "t", codes.astype(np.int64))
        object.__setattr__(self, "y", y)

    @property
    def n_classes(self) -> int:
        return int(self.classes.size)

    @property
    def basis(self) -> Basis:
        return Basis(self.kernel, self.X, self.bias, self.extra_columns)

    def design_matrix(self) -> np.ndarray:
        return self.basis.design(self.X)

    def pymc_model(self, prior: GammaPrior | None = None, likelihood: str | None = None,
                   collapsed: bool = False):
        """The hierarchical non-centred ``pm.Model`` (Bernoulli-logit or softmax), or with
        ``collapsed=True`` ``alpha`` integrated out (``w`` Student-t; the model NUTS and ADVI
        sample by default); see :func:`sparsebayes.models.pymc_models.classification_model`."""
        from .pymc_models import classification_model

        return classification_model(self, prior=prior, likelihood=likelihood,
                                    collapsed=collapsed)
