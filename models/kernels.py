"""Kernels and basis functions (NumPy only).

A kernel maps inputs ``X`` (n, d) and centres ``C`` (m, d) to the (n, m) matrix of basis
function values ``K[n, m] = k(x_n, c_m)``. RVM kernels need not be Mercer kernels
(Tipping 2001, §2): any function of an input and a centre is a valid basis.

A kernel declares its parameters (``parameters``: name -> meaning), which are its fields,
its ``spec`` (what a result stores as the attrs ``kernel_<parameter>``, so that a fitted
posterior saved to netCDF can still predict) and its contract entries. A kernel defined
outside the package becomes as much a citizen as the built-in ones through
:func:`register_kernel`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "Kernel",
    "GaussianKernel",
    "LinearSplineKernel",
    "LogBasis",
    "PolynomialKernel",
    "LinearKernel",
    "CallableKernel",
    "as_kernel",
    "kernel_from_spec",
    "register_kernel",
    "registered_kernel",
    "sq_distances",
    "weighted_sq_differences",
]


def sq_distances(X: np.ndarray, C: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """||x_n - c_m||^2 for all pairs, built in place in ``out`` (no N x N temporaries) as one
    product ``[x, ||x||^2, 1] [-2c, 1, ||c||^2]^T``: two passes over the result, not five."""
    d = X.shape[1]
    Xa = np.empty((X.shape[0], d + 2))
    Xa[:, :d] = X
    Xa[:, d] = np.einsum("ij,ij->i", X, X)
    Xa[:, d + 1] = 1.0
    Ca = np.empty((C.shape[0], d + 2))
    Ca[:, :d] = -2.0 * C
    Ca[:, d] = 1.0
    Ca[:, d + 1] = np.einsum("ij,ij->i", C, C)
    D = np.matmul(Xa, Ca.T, out=out)
    np.maximum(D, 0.0, out=D)
    return D


class Kernel:
    """Base class: ``kernel(X, C, out=None)`` returns the (n, m) basis matrix.

    A subclass declares ``name`` (its registered name), ``parameters`` (each parameter's
    name and meaning: fields of the kernel, stored in a result as ``kernel_<name>``, numbers
    or 1-D arrays) and ``symmetric`` (``k(x, c) == k(c, x)``, which lets the evidence fill a
    square block from its transpose)."""

    name: str = "kernel"
    parameters: ClassVar[dict[str, str]] = {}
    symmetric: ClassVar[bool] = False

    def __call__(self, X: np.ndarray, C: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """JSON-able description from which :func:`kernel_from_spec` rebuilds the kernel: its
        name and declared parameters."""
        return {"name": self.name, **{p: getattr(self, p) for p in self.parameters}}

    def diagonal(self, X: np.ndarray, chunk: int = 256) -> np.ndarray:
        """``k(x, x)`` for each row of ``X`` (RQ05's new basis function at its own centre)."""
        out = np.empty(X.shape[0])
        for lo in range(0, X.shape[0], chunk):
            out[lo:lo + chunk] = np.diagonal(self(X[lo:lo + chunk], X[lo:lo + chunk]))
        return out

    @property
    def learns_width(self) -> bool:
        """Whether the evidence can learn this kernel's ``width`` (``learn_width=True``): it
        declares a ``width`` parameter and implements :meth:`log_width_gradient`."""
        return "width" in self.parameters and \
            type(self).log_width_gradient is not Kernel.log_width_gradient

    @property
    def is_ard(self) -> bool:
        """One width per input (ARD, T01 eq. 31) rather than one for all."""
        return "width" in self.parameters and not np.isscalar(self.width)

    @property
    def has_gp_widths(self) -> bool:
        """Whether :meth:`width_from_length_scale` maps a GP's SE-ARD length scales to this
        kernel's widths (``widths_from_gp`` of a learned-width evidence fit)."""
        return type(self).width_from_length_scale is not Kernel.width_from_length_scale

    def width_from_length_scale(self, length_scale: np.ndarray) -> np.ndarray:
        """The widths at which this kernel's basis functions give an RVM the prior covariance
        of a GP with SE-ARD length scales ``length_scale`` (one per input)."""
        raise NotImplementedError(
            f"the {self.name!r} kernel has no widths matching a GP's length scales; "
            "implement width_from_length_scale(length_scale), or fit with widths_from_gp=False")

    def with_width(self, width) -> Kernel:
        """The same kernel at another ``width`` (a scalar, or one per input for ARD)."""
        return dataclasses.replace(self, width=width)

    def log_width_gradient(self, X: np.ndarray, C: np.ndarray, K: np.ndarray,
                           dK: np.ndarray) -> np.ndarray:
        """``dL/d ln width`` of an objective ``L`` whose gradient in the basis matrix ``K =
        k(X, C)`` is ``dK`` (the chain rule of T01 App. C, eqs. 53-57, through the kernel):
        one entry for a scalar width, one per input for ARD. A kernel whose width the
        evidence learns implements it."""
        raise NotImplementedError(
            f"the {self.name!r} kernel declares no width gradient, so learn_width=True "
            "cannot move its width; implement log_width_gradient(X, C, K, dK)")

    def tensor(self, X, C):
        """The same (n, m) basis matrix as a PyTensor expression of symbolic inputs ``X``
        (so a PyMC model builds ``Phi`` inside its graph and ``pm.set_data`` predicts out of
        sample). A kernel without one raises ``NotImplementedError``."""
        raise NotImplementedError(
            f"the {self.name!r} kernel has no PyTensor form: its design enters a PyMC model "
            "as precomputed data, so pm.set_data({'X': ...}) cannot move it; set the design "
            "with sparsebayes.models.pymc_models.set_inputs(model, problem, X_new)")

    def check_inputs(self, n_features: int) -> None:
        """Raise ``ValueError`` if the kernel cannot act on ``n_features`` input columns."""


@dataclass(frozen=True, eq=False)
class GaussianKernelRecord(Kernel):
    """The checked fields of a :class:`GaussianKernel` (build that, not this)."""

    width: float | tuple[float, ...]
    name: str = field(default="gaussian", init=False)
    parameters: ClassVar[dict[str, str]] = {
        "width": "Gaussian kernel width r: one, or one per input (ARD)"}
    symmetric: ClassVar[bool] = True

    @property
    def eta(self) -> np.ndarray:
        """Input scales ``eta = width**-2`` (scalar array or one per dimension)."""
        return np.asarray(self.width, dtype=float) ** -2

    def log_width_gradient(self, X, C, K, dK):
        """``dK * dK/d eta_d = -dK K (x_d - c_d)^2`` summed (T01 eqs. 56-57) with
        ``eta = r^-2``, then ``d/d ln r = -2 eta d/d eta`` (summed over the inputs for one
        width)."""
        g = 2.0 * self.eta * weighted_sq_differences(dK * K, X, C)
        return g if self.is_ard else np.array([g.sum()])

    def width_from_length_scale(self, length_scale):
        """``r = l``: over a dense set of centres ``c``, ``sum_c phi_c(x) phi_c(x')`` with
        ``phi_c(x) = exp(-sum_k (x_k - c_k)^2 / r_k^2)`` is proportional to
        ``exp(-sum_k (x_k - x'_k)^2 / (2 r_k^2))``, the SE-ARD covariance (GPML eq. 5.1) of
        length scales ``r`` (a Gaussian convolved with itself doubles its variance)."""
        return np.asarray(length_scale, dtype=float).copy()

    def check_inputs(self, n_features: int) -> None:
        if self.is_ard and len(self.width) != n_features:
            raise ValueError(
                f"width has {len(self.width)} values but X has {n_features} features; "
                "give a scalar or one width per input dimension"
            )

    def __call__(self, X, C, out=None):
        scale = np.sqrt(self.eta)
        D = sq_distances(X * scale, C * scale, out=out)
        np.negative(D, out=D)
        return np.exp(D, out=D)

    def diagonal(self, X, chunk=256):
        return np.ones(X.shape[0])

    def tensor(self, X, C):
        import pytensor.tensor as pt

        scale = np.sqrt(self.eta)
        D = pt.sum((X[:, None, :] * scale - (C * scale)[None, :, :]) ** 2, axis=-1)
        return pt.exp(-D)


def weighted_sq_differences(W: np.ndarray, X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``sum_nm W_nm (x_nd - c_md)^2`` for every input ``d`` (the derivative of Gaussian
    columns in their input scales, contracted), expanded as ``sum_n x_nd^2 (W 1)_n - 2
    sum_n x_nd (W C)_nd + sum_m c_md^2 (W^T 1)_m``: one product ``W C`` for every input,
    with ``x`` and ``c`` taken from their common mean (less cancellation)."""
    shift = X.mean(axis=0)
    Xs, Cs = X - shift, C - shift
    return (Xs**2).T @ W.sum(axis=1) - 2.0 * np.einsum("nd,nd->d", Xs, W @ Cs) \
        + (Cs**2).T @ W.sum(axis=0)


class GaussianKernel(GaussianKernelRecord):
    """Gaussian basis ``exp(-||x - c||^2 / r^2)`` in Tipping's convention (T01 eq. 30).

    ``width`` is ``r``: a scalar, or one value per input dimension (ARD, T01 eq. 31, with input
    scales ``eta_k = r_k^-2``). Note the convention: scikit-learn's ``rbf_kernel`` ``gamma``
    equals ``eta = 1 / r^2``, and a GP length-scale ``l`` corresponds to ``r = sqrt(2) l``.
    """

    def __init__(self, width: float | tuple[float, ...] | np.ndarray = 1.0) -> None:
        w = np.asarray(width, dtype=float)
        if w.ndim > 1 or w.size == 0:
            raise ValueError(f"width must be a positive scalar or 1-D array, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"width must be finite and > 0, got {width!r}")
        super().__init__(float(w) if w.ndim == 0 else tuple(float(v) for v in w))


@dataclass(frozen=True, eq=False)
class LinearSplineKernel(Kernel):
    """Univariate linear spline kernel of T01 eq. (29), ``m = min(x, c)``:
    ``1 + x c + x c m - (x + c) m^2 / 2 + m^3 / 3``."""

    name: str = field(default="linear_spline", init=False)
    symmetric: ClassVar[bool] = True

    def check_inputs(self, n_features: int) -> None:
        if n_features != 1:
            raise ValueError(f"LinearSplineKernel needs 1-D inputs, X has {n_features} features")

    def __call__(self, X, C, out=None):
        x = X[:, :1]
        c = C[:, 0][None, :]
        m = np.minimum(x, c, out=out)
        xc = x * c
        K = 1.0 + xc + xc * m - 0.5 * (x + c) * m**2 + m**3 / 3.0
        if out is None:
            return K
        out[...] = K
        return out

    def tensor(self, X, C):
        import pytensor.tensor as pt

        x = X[:, 0][:, None]
        c = C[:, 0][None, :]
        m = pt.minimum(x, c)
        xc = x * c
        return 1.0 + xc + xc * m - 0.5 * (x + c) * m**2 + m**3 / 3.0


@dataclass(frozen=True, eq=False)
class LogBasis(Kernel):
    """Non-localised basis ``log(1 + ||x - c||^2)`` (Rasmussen & Quiñonero-Candela 2005, Fig. 1)."""

    name: str = field(default="log", init=False)
    symmetric: ClassVar[bool] = True

    def __call__(self, X, C, out=None):
        D = sq_distances(X, C, out=out)
        return np.log1p(D, out=D)

    def tensor(self, X, C):
        import pytensor.tensor as pt

        return pt.log1p(pt.sum((X[:, None, :] - C[None, :, :]) ** 2, axis=-1))


@dataclass(frozen=True, eq=False)
class PolynomialKernel(Kernel):
    """Polynomial kernel ``(gamma x.c + coef0)^degree`` (scikit-learn's convention)."""

    degree: int = 2
    gamma: float = 1.0
    coef0: float = 1.0
    name: str = field(default="poly", init=False)
    parameters: ClassVar[dict[str, str]] = {"degree": "polynomial kernel degree",
                                             "gamma": "polynomial kernel scale",
                                             "coef0": "polynomial kernel offset"}
    symmetric: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if int(self.degree) != self.degree or self.degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {self.degree!r}")
        if not np.isfinite(self.gamma) or self.gamma <= 0:
            raise ValueError(f"gamma must be finite and > 0, got {self.gamma!r}")

    def __call__(self, X, C, out=None):
        K = np.matmul(X, C.T, out=out)
        K *= self.gamma
        K += self.coef0
        return np.power(K, self.degree, out=K)

    def tensor(self, X, C):
        return (self.gamma * (X @ C.T) + self.coef0) ** self.degree


@dataclass(frozen=True, eq=False)
class LinearKernel(Kernel):
    """Linear kernel ``x^T c``."""

    name: str = field(default="linear", init=False)
    symmetric: ClassVar[bool] = True

    def __call__(self, X, C, out=None):
        return np.matmul(X, C.T, out=out)

    def tensor(self, X, C):
        return X @ C.T


@dataclass(frozen=True, eq=False)
class CallableKernel(Kernel):
    """Any user function ``fn(X, C) -> (n, m) array``; Mercer or not."""

    fn: Callable[[np.ndarray, np.ndarray], np.ndarray] = None  # type: ignore[assignment]
    name: str = field(default="callable", init=False)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"kernel must be callable, got {type(self.fn).__name__}")

    def __call__(self, X, C, out=None):
        K = np.asarray(self.fn(X, C), dtype=float)
        if K.shape != (X.shape[0], C.shape[0]):
            raise ValueError(
                f"kernel callable returned shape {K.shape}, expected {(X.shape[0], C.shape[0])}"
            )
        if out is None:
            return K
        out[...] = K
        return out

    def spec(self):
        return {"name": self.name}  # a user's function: not restorable from a result


_REGISTRY: dict[str, type[Kernel]] = {}


def register_kernel(cls: type[Kernel] | None = None, *, aliases: tuple[str, ...] = ()):
    """Register a :class:`Kernel` subclass under its ``name``, as a class decorator or a call.

    ``as_kernel(name, **parameters)`` then builds it, and a result fitted with it passes the
    result contract (its parameters as attrs ``kernel_<parameter>``), reloads from netCDF,
    predicts and is refitted by leave-one-out from the file alone.

    Parameters
    ----------
    cls : type
        A :class:`Kernel` subclass declaring ``name`` (letters, digits, ``_``),
        ``parameters`` (its fields: name -> meaning) and ``symmetric``.
    aliases : tuple of str
        Further names it is built by (the Gaussian kernel's ``"rbf"``).

    Returns
    -------
    type
        ``cls`` itself (or, without ``cls``, the decorator).

    Examples
    --------
    See "A kernel of your own" in the model families guide (a Matérn 5/2).
    """

    def register(kernel_cls: type[Kernel]) -> type[Kernel]:
        if not (isinstance(kernel_cls, type) and issubclass(kernel_cls, Kernel)):
            raise TypeError(f"register_kernel takes a Kernel subclass, got {kernel_cls!r}")
        name = kernel_cls.name
        if not isinstance(name, str) or name in ("kernel", "callable") \
                or not name.replace("_", "").isalnum():
            raise ValueError(f"a registered kernel needs its own name (letters, digits, _): "
                             f"{kernel_cls.__name__} has name {name!r}")
        if not isinstance(kernel_cls.parameters, dict):
            raise TypeError(f"{kernel_cls.__name__}.parameters must be a dict of parameter "
                            "names to their meaning")
        for key in (name, *aliases):
            known = _REGISTRY.get(key)
            if known is not None and known.__qualname__ != kernel_cls.__qualname__:
                raise ValueError(f"kernel name {key!r} is taken by {known.__qualname__}")
            _REGISTRY[key] = kernel_cls
        return kernel_cls

    return register if cls is None else register(cls)


def registered_kernel(name: str) -> type[Kernel]:
    """The kernel class registered as ``name`` (``ValueError`` naming the registered ones)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown kernel {name!r}; choose one of {sorted(_REGISTRY)} or "
                         "register yours with sparsebayes.models.register_kernel")
    return _REGISTRY[name]


register_kernel(GaussianKernel, aliases=("rbf",))
for _cls in (LinearSplineKernel, LogBasis, PolynomialKernel, LinearKernel):
    register_kernel(_cls)


def as_kernel(kernel: Kernel | str | Callable, **params) -> Kernel:
    """A :class:`Kernel` from an instance, a registered name ("rbf", "gaussian", "linear",
    "poly", "linear_spline", "log", or yours) with parameters, or a callable ``k(X, C)``."""
    if isinstance(kernel, Kernel):
        if not isinstance(kernel, CallableKernel) \
                and _REGISTRY.get(kernel.name) is not type(kernel):
            raise TypeError(
                f"the kernel class {type(kernel).__name__} is not registered (as "
                f"{kernel.name!r}): decorate it with sparsebayes.models.register_kernel, so "
                "that a result fitted with it can be checked, saved and reloaded, or pass a "
                "plain function k(X, C)")
        return kernel
    if isinstance(kernel, str):
        return registered_kernel(kernel)(**params)
    if callable(kernel):
        return CallableKernel(kernel)
    raise TypeError(f"kernel must be a Kernel, a name or a callable, got {type(kernel).__name__}")


def kernel_from_spec(spec: dict[str, Any]) -> Kernel:
    """Inverse of :meth:`Kernel.spec` for the registered kernels."""
    params = {k: v for k, v in spec.items() if k != "name"}
    if spec["name"] == "callable":
        raise ValueError(
            "this posterior was fitted with a user callable kernel, which cannot be restored "
            "from its saved description; pass problem=... to predict"
        )
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    return as_kernel(spec["name"], **params)
