"""Problem descriptions: frozen records of *what* is believed (data, basis, hyperprior).

``fit(problem, method=...)`` in :mod:`sparsebayes.inference` computes a posterior for them.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .basis import Basis
from .checks import (
    check_dask_inputs,
    check_dask_targets,
    check_inputs,
    check_labels,
    check_targets,
    is_dask,
)
from .kernels import GaussianKernel, Kernel, as_kernel
from .priors import PRIOR_NAMES, GammaPrior, resolve_prior

__all__ = ["RVMRegression", "RVMClassification"]


TINY_SD = 1e-100  # targets varying less than this are refused (rescale them)
KMEANS_SEED = 0  # the k-means dictionary is a deterministic function of X and M
KMEANS_ROWS = 50_000  # k-means runs on a fixed random subsample of this many rows at most
KMEANS_CACHE: dict[tuple, np.ndarray] = {}  # (M, shape, digest of X) -> centres
KMEANS_CACHE_SIZE = 4
KMEANS_LOCK = threading.Lock()  # study cells may fit in threads



def check_centres(centres, X: np.ndarray) -> np.ndarray | None:
    """The basis dictionary: ``None`` (the training inputs: the classic RVM), an int ``M``
    (``M`` k-means centres of ``X`` by scikit-learn's ``MiniBatchKMeans`` with a fixed seed),
    or an (M, d) array of centres. Tipping (2001) §2 allows any set of basis functions."""
    if centres is None:
        return None
    n, d = X.shape
    if isinstance(centres, bool):
        raise TypeError("centres must be None, an int or an (M, d) array, got a bool")
    if isinstance(centres, int | np.integer):
        M = int(centres)
        if not 1 <= M <= n:
            raise ValueError(f"centres={M}: the number of k-means centres must be between 1 "
                             f"and the number of training points ({n})")
        return kmeans_centres(X, M)
    if np.ndim(centres) == 0:
        raise TypeError(f"centres must be None, an int or an (M, d) array, got {centres!r}")
    C = check_inputs(centres, name="centres")
    if C.shape[1] != d:
        raise ValueError(f"centres has {C.shape[1]} features but X has {d}")
    return C



def kmeans_centres(X, M: int) -> np.ndarray:
    """``M`` cluster centres of ``X`` (MiniBatchKMeans, seed ``KMEANS_SEED``), fitted on a
    fixed random subsample of at most ``KMEANS_ROWS`` rows (or ``20 M``, if more) so that
    the dictionary costs seconds at a million points; ``X`` may be a NumPy or Dask array.
    A deterministic function of ``(X, M)``: for NumPy inputs the last few results are kept
    by the digest of ``X``, so that fits on the same inputs (the K binary fits of
    ``OneVsRestClassifier(RVC(centres=M))``, a grid search over the width) run k-means once."""
    key = None
    if isinstance(X, np.ndarray):
        data = np.ascontiguousarray(X, dtype=float)
        key = (int(M), data.shape, hashlib.blake2b(data.view(np.uint8)).hexdigest())
        with KMEANS_LOCK:
            kept = KMEANS_CACHE.get(key)
        if kept is not None:
            return kept.copy()
    centres = _kmeans(X, M)
    if key is not None:
        with KMEANS_LOCK:
            while len(KMEANS_CACHE) >= KMEANS_CACHE_SIZE:
                KMEANS_CACHE.pop(next(iter(KMEANS_CACHE)))
            KMEANS_CACHE[key] = centres.copy()
    return centres


def _kmeans(X, M: int) -> np.ndarray:
    from sklearn.cluster import MiniBatchKMeans

    n = X.shape[0]
    cap = max(KMEANS_ROWS, 20 * M)
    if n > cap:
        rows = np.sort(np.random.default_rng(KMEANS_SEED).choice(n, cap, replace=False))
        X = X[rows]
    if not isinstance(X, np.ndarray):  # dask: the subsample, computed once
        X = np.asarray(X.compute(), dtype=float)
    if M == X.shape[0]:
        return np.array(X, dtype=float)
    km = MiniBatchKMeans(n_clusters=M, random_state=KMEANS_SEED, n_init=3,
                         batch_size=max(1024, 4 * M))
    return km.fit(X).cluster_centers_.astype(float)


def _common(problem, X) -> np.ndarray:
    if is_dask(X):
        X = check_dask_inputs(X)
    else:
        X = check_inputs(X)
    if X.shape[0] < 2:
        raise ValueError(f"X needs at least 2 samples, got {X.shape[0]}")
    kernel = as_kernel(problem.kernel)
    object.__setattr__(problem, "kernel", kernel)
    object.__setattr__(problem, "X", X)
    if problem.prior is not None and not isinstance(problem.prior, GammaPrior | str):
        raise TypeError(f"prior must be a GammaPrior, a prior name ({', '.join(PRIOR_NAMES)}) "
                        f"or None, got {type(problem.prior).__name__}")
    object.__setattr__(problem, "extra_columns", tuple(problem.extra_columns))
    if problem.learn_width and not isinstance(kernel, GaussianKernel):
        raise ValueError("learn_width=True needs a GaussianKernel")
    if problem.centres is None and is_dask(X):
        raise ValueError("a Dask array X needs a basis dictionary: pass centres=M (k-means) "
                         "or an (M, d) array; the classic RVM (a kernel at every training "
                         "point) holds an N x N design")
    object.__setattr__(problem, "centres", check_centres(problem.centres, X))
    problem.basis  # validates kernel and extra columns  # noqa: B018
    return X


def _name_to_prior(problem) -> None:
    """A prior given by name ("weakly_informative", "default") becomes the
    :class:`GammaPrior` it means for this problem's data and basis, so every method (the
    evidence ones included) uses the same one."""
    if isinstance(problem.prior, str):
        object.__setattr__(problem, "prior", resolve_prior(problem, problem.prior))


def make_basis(kernel, X, centres: np.ndarray | None, bias: bool, extra: Sequence[str]
               ) -> Basis:
    """A kernel at every row of ``X`` (``centres=None``, the classic RVM) or at each checked
    dictionary centre (``check_centres``), with the bias and extra columns."""
    if centres is None:
        return Basis(kernel, X, bias, tuple(extra))
    return Basis(kernel, centres, bias, tuple(extra), dictionary=True)


def _basis(problem) -> Basis:
    return make_basis(problem.kernel, problem.X, problem.centres, problem.bias,
                      problem.extra_columns)


@dataclass(frozen=True, eq=False)
class RVMRegression:
    """Sparse Bayesian regression ``t = Phi w + eps`` (T01 eqs. 1-6).

    Parameters
    ----------
    X, t : inputs (n, d) and real targets (n,).
    kernel : a :class:`Kernel`, a kernel name, or a callable ``k(X, C)``; centres are the
        training inputs.
    bias : add a bias column (label ``"bias"``).
    extra_columns : ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    noise_sd : ``None`` to estimate the noise; a number to keep it fixed.
    prior : :class:`GammaPrior` on ``alpha`` and ``beta``; ``None`` is the method's default
        (Tipping's flat prior for evidence/VRVM, a proper one for sampling);
        ``"weakly_informative"`` or ``"default"``: that named prior for this data
        (:mod:`sparsebayes.models.priors`), used by every method.
    learn_width : maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    centres : the basis dictionary: ``None`` (a kernel at every training input, the classic
        RVM), an int ``M`` (``M`` k-means centres, deterministic), or an (M, d) array. With
        a dictionary every method costs O(M^3) per step, not O(N^3); X and t may then be
        Dask arrays (the statistics are a map-reduce over their row chunks).
    """

    X: np.ndarray
    t: np.ndarray
    kernel: Kernel | str | Callable = field(default_factory=lambda: GaussianKernel(1.0))
    bias: bool = True
    extra_columns: Sequence[str] = ()
    noise_sd: float | None = None
    prior: GammaPrior | str | None = None
    learn_width: bool = False
    centres: int | np.ndarray | None = None

    kind = "regression"

    def __post_init__(self) -> None:
        X = _common(self, self.X)
        if is_dask(X):
            t = check_dask_targets(self.t, X)
        else:
            t = check_targets(self.t, X.shape[0])
            if np.ptp(t) == 0:
                raise ValueError("t is constant: there is nothing to regress")
            if not np.std(t) > TINY_SD:
                raise ValueError(f"t varies by only {np.ptp(t):.3g}, too little for the "
                                 "evidence in double precision (its precisions would "
                                 "overflow): rescale t")
        object.__setattr__(self, "t", t)
        if self.noise_sd is not None:
            sd = self.noise_sd
            if not np.isscalar(sd) or not np.isfinite(sd) or sd <= 0:
                raise ValueError(f"noise_sd must be None or a number > 0, got {self.noise_sd!r}")
            object.__setattr__(self, "noise_sd", float(self.noise_sd))
        _name_to_prior(self)

    @property
    def basis(self) -> Basis:
        return _basis(self)

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
    """Sparse Bayesian classification with a Bernoulli-logit (2 classes, T01 eq. 23) or softmax
    (K classes, T01 eq. 28) likelihood. ``y`` may hold any labels; ``classes`` are its sorted
    unique values and ``t`` the integer codes 0..K-1."""

    X: np.ndarray
    y: np.ndarray
    kernel: Kernel | str | Callable = field(default_factory=lambda: GaussianKernel(1.0))
    bias: bool = True
    extra_columns: Sequence[str] = ()
    prior: GammaPrior | str | None = None
    learn_width: bool = False
    centres: int | np.ndarray | None = None
    classes: np.ndarray = field(init=False)
    t: np.ndarray = field(init=False)

    kind = "classification"

    def __post_init__(self) -> None:
        if is_dask(self.X) or is_dask(self.y):
            raise TypeError("Dask arrays are taken by RVMRegression; for classification pass "
                            "NumPy arrays (X.compute()) with a dictionary (centres=M)")
        X = _common(self, self.X)
        y, classes, codes = check_labels(self.y, X.shape[0])
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "t", codes)
        object.__setattr__(self, "y", y)
        _name_to_prior(self)

    @property
    def n_classes(self) -> int:
        return int(self.classes.size)

    @property
    def basis(self) -> Basis:
        return _basis(self)

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
