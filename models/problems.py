"""Problem descriptions: frozen records of *what* is believed (data, basis, hyperprior).

``fit(problem, method=...)`` in :mod:`sparsebayes.inference` computes a posterior for them.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

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
from .kernels import Kernel, as_kernel
from .likelihoods import Bernoulli, CountLikelihood, LatentLikelihood, Likelihood, Poisson, Softmax
from .priors import PRIOR_NAMES, GammaPrior, resolve_prior

__all__ = ["RVMRegression", "RVMClassification", "RVMPoissonRegression", "LatentRVM",
           "RVMCountsRecord", "checked_counts_fields", "RVMRealRecord", "checked_real_fields"]


# Targets varying less than this are refused (rescale them): the sequential algorithm squares
# precisions up to BETA_MAX_FACTOR / var(t) = 1e6 / sd^2 times squared column norms up to N,
# which overflow below sd ~ 1e-72 sqrt(N)
TINY_SD = 1e-60
COUNT_MAX = 1e9  # Poisson RVM counts above this are refused (check_fit_counts says why)
KMEANS_SEED = 0  # the k-means dictionary is a deterministic function of X and M
KMEANS_ROWS = 50_000  # k-means runs on a fixed random subsample of this many rows at most


def check_centres(centres, X: np.ndarray, name: str = "centres") -> np.ndarray | None:
    """The basis dictionary: ``None`` (the training inputs: the classic RVM), an int ``M``
    (``M`` k-means centres of ``X`` by scikit-learn's ``MiniBatchKMeans`` with a fixed seed),
    or an (M, d) array of centres. Tipping (2001) §2 allows any set of basis functions.
    ``name``: the argument's name in messages (a sparse GP's ``inducing``)."""
    if centres is None:
        return None
    n, d = X.shape
    if isinstance(centres, bool):
        raise TypeError(f"{name} must be None, an int or an (M, d) array, got a bool")
    if isinstance(centres, int | np.integer):
        M = int(centres)
        if not 1 <= M <= n:
            raise ValueError(f"{name}={M}: the number of k-means centres must be between 1 "
                             f"and the number of training points ({n})")
        return kmeans_centres(X, M)
    if np.ndim(centres) == 0:
        raise TypeError(f"{name} must be None, an int or an (M, d) array, got {centres!r}")
    C = check_inputs(centres, name=name)
    if C.shape[1] != d:
        raise ValueError(f"{name} has {C.shape[1]} features but X has {d}")
    return C


class KMeansCentres:
    """k-means dictionaries of recent inputs: ``centres(X, M)`` is a deterministic function
    of ``(X, M)``; for NumPy inputs the last ``size`` results are kept by ``(M, shape,
    digest of X)``, so fits on the same inputs (the K binary fits of
    ``OneVsRestClassifier(RVC(centres=M))``, a grid search over the width) run k-means once.
    Thread-safe (study cells may fit in threads)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._kept: dict[tuple, np.ndarray] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def centres(self, X, M: int) -> np.ndarray:
        """``M`` centres of ``X`` by :func:`kmeans_centres`' rule, a copy of a kept result
        when ``X`` and ``M`` were seen recently."""
        key = None
        if isinstance(X, np.ndarray):
            data = np.ascontiguousarray(X, dtype=float)
            key = (int(M), data.shape, hashlib.blake2b(data.view(np.uint8)).hexdigest())
            with self._lock:
                kept = self._kept.get(key)
            if kept is not None:
                return kept.copy()
        centres = _kmeans(X, M)
        if key is not None:
            with self._lock:
                while len(self._kept) >= self.size:
                    self._kept.pop(next(iter(self._kept)))
                self._kept[key] = centres.copy()
        return centres


KMEANS = KMeansCentres(size=4)  # the dictionaries every problem record shares


def kmeans_centres(X, M: int) -> np.ndarray:
    """``M`` cluster centres of ``X`` (MiniBatchKMeans, seed ``KMEANS_SEED``), fitted on a
    fixed random subsample of at most ``KMEANS_ROWS`` rows (or ``20 M``, if more), so that
    the cost does not grow with ``N``; ``X`` may be a NumPy or Dask array. The last few
    results are kept by :data:`KMEANS` (:class:`KMeansCentres`)."""
    return KMEANS.centres(X, M)


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


def _checked_common(X, kernel, bias, extra_columns, prior, learn_width, centres):
    """The checked inputs, kernel, extra columns and dictionary centres of an RVM problem
    (in this order the checks run)."""
    if is_dask(X):
        X = check_dask_inputs(X)
    else:
        X = check_inputs(X)
    if X.shape[0] < 2:
        raise ValueError(f"X needs at least 2 samples, got {X.shape[0]}")
    kernel = as_kernel(kernel)
    if prior is not None and not isinstance(prior, GammaPrior | str):
        raise TypeError(f"prior must be a GammaPrior, a prior name ({', '.join(PRIOR_NAMES)}) "
                        f"or None, got {type(prior).__name__}")
    extra = tuple(extra_columns)
    if learn_width and not kernel.learns_width:
        raise ValueError(f"learn_width=True needs a kernel with a width gradient; the "
                         f"{kernel.name!r} kernel declares none (GaussianKernel has one; "
                         "a kernel of your own implements Kernel.log_width_gradient)")
    if centres is None and is_dask(X):
        raise ValueError("a Dask array X needs a basis dictionary: pass centres=M (k-means) "
                         "or an (M, d) array; the classic RVM (a kernel at every training "
                         "point) holds an N x N design")
    centres = check_centres(centres, X)
    make_basis(kernel, X, centres, bias, extra)  # validates kernel and extra columns
    return X, kernel, extra, centres


def _named_prior(record, prior):
    """A prior given by name ("weakly_informative", "default") becomes the
    :class:`GammaPrior` it means for the data and basis of ``record`` (built with
    ``prior=None``), so every method (the evidence ones included) uses the same one.
    ``record`` is an instance of the record class, not of the public one: class attributes
    the priors read (``kind``) belong on the record classes."""
    return resolve_prior(record, prior) if isinstance(prior, str) else prior


def make_basis(kernel, X, centres: np.ndarray | None, bias: bool, extra: Sequence[str]
               ) -> Basis:
    """A kernel at every row of ``X`` (``centres=None``, the classic RVM) or at each checked
    dictionary centre (``check_centres``), with the bias and extra columns."""
    if centres is None:
        return Basis(kernel, X, bias, tuple(extra))
    return Basis(kernel, centres, bias, tuple(extra), dictionary=True)


class RVMBasis:
    """What every RVM problem record derives from its fields: the basis (built once, T01
    §2: a kernel at every training input or dictionary centre, a bias and extra columns) and
    the design matrix ``Phi``."""

    @cached_property
    def basis(self) -> Basis:
        return make_basis(self.kernel, self.X, self.centres, self.bias, self.extra_columns)

    def design_matrix(self) -> np.ndarray:
        return self.basis.design(self.X)


@dataclass(frozen=True, eq=False)
class RVMRegressionRecord(RVMBasis):
    """The checked fields of an :class:`RVMRegression` (build that, not this)."""

    X: np.ndarray
    t: np.ndarray
    kernel: Kernel
    bias: bool
    extra_columns: tuple[str, ...]
    noise_sd: float | None
    prior: GammaPrior | None
    learn_width: bool
    centres: np.ndarray | None

    kind = "regression"
    gaussian_noise = True  # t = Phi w + eps, eps ~ N(0, 1/beta) (T01 eq. 4)

    def pymc_model(self, collapsed: bool = False, prior: GammaPrior | None = None, **kwargs):
        """The hierarchical ``pm.Model`` (non-centred joint, or ``collapsed`` with ``w``
        integrated out); see :func:`sparsebayes.models.pymc_models.regression_model`."""
        from .pymc_models import regression_model

        return regression_model(self, collapsed=collapsed, prior=prior, **kwargs)


class RVMRegression(RVMRegressionRecord):
    """Sparse Bayesian regression ``t = Phi w + eps`` (T01 eqs. 1-6).

    Parameters
    ----------
    X : array of shape (n, d)
        Inputs.
    t : array of shape (n,)
        Real targets.
    kernel : Kernel, str or callable, default "gaussian"
        A :class:`Kernel`, a kernel name, or a callable ``k(X, C)``; centred on the training
        inputs (or on ``centres``).
    bias : bool, default True
        Add a bias column (label ``"bias"``).
    extra_columns : sequence of str, default ()
        ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    noise_sd : float, optional
        ``None`` to estimate the noise; a number to keep it fixed.
    prior : GammaPrior, str or None, default None
        Hyperprior on ``alpha`` (and ``beta``); ``None`` is the method's default (Tipping's
        flat prior for evidence/VRVM, a proper one for sampling); ``"weakly_informative"``
        or ``"default"``: that named prior for this data (:mod:`sparsebayes.models.priors`),
        used by every method.
    learn_width : bool, default False
        Maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    centres : int or array of shape (M, d), optional
        The basis dictionary: ``None`` (a kernel at every training input, the classic
        RVM), an int ``M`` (``M`` k-means centres, deterministic), or an (M, d) array. With
        a dictionary every method costs O(M^3) per step, not O(N^3); X and t may then be
        Dask arrays (the statistics are a map-reduce over their row chunks).

    See Also
    --------
    RVMClassification, RVMPoissonRegression, GPRegression
    sparsebayes.inference.fit : Its posterior by any method.
    """

    def __init__(self, X, t, kernel: Kernel | str | Callable = "gaussian", bias: bool = True,
                 extra_columns: Sequence[str] = (), noise_sd: float | None = None,
                 prior: GammaPrior | str | None = None, learn_width: bool = False,
                 centres: int | np.ndarray | None = None) -> None:
        X, kernel, extra, centres = _checked_common(X, kernel, bias, extra_columns, prior,
                                                    learn_width, centres)
        if is_dask(X):
            t = check_dask_targets(t, X)
        else:
            t = check_targets(t, X.shape[0])
            if np.ptp(t) == 0:
                raise ValueError("t is constant: there is nothing to regress")
            if not np.std(t) > TINY_SD:
                raise ValueError(f"t varies by only {np.ptp(t):.3g}, too little for the "
                                 "evidence in double precision (its precisions would "
                                 "overflow): rescale t")
        if noise_sd is not None:
            if not np.isscalar(noise_sd) or not np.isfinite(noise_sd) or noise_sd <= 0:
                raise ValueError(f"noise_sd must be None or a number > 0, got {noise_sd!r}")
            noise_sd = float(noise_sd)
        fields = (X, t, kernel, bias, extra, noise_sd)
        prior = _named_prior(RVMRegressionRecord(*fields, None, learn_width, centres), prior)
        super().__init__(*fields, prior, learn_width, centres)


@dataclass(frozen=True, eq=False)
class RVMClassificationRecord(RVMBasis):
    """The checked fields of an :class:`RVMClassification` (build that, not this)."""

    X: np.ndarray
    y: np.ndarray
    kernel: Kernel
    bias: bool
    extra_columns: tuple[str, ...]
    prior: GammaPrior | None
    learn_width: bool
    centres: np.ndarray | None
    classes: np.ndarray
    t: np.ndarray

    kind = "classification"

    @property
    def n_classes(self) -> int:
        return int(self.classes.size)

    def likelihood(self, softmax_model: bool = False) -> Likelihood:
        """Bernoulli-logit (T01 eq. 23) or, with ``softmax_model``, softmax (eq. 28) on the
        class codes."""
        return Softmax(self.t, self.n_classes) if softmax_model else Bernoulli(self.t)

    def pymc_model(self, prior: GammaPrior | None = None, likelihood: str | None = None,
                   collapsed: bool = False):
        """The hierarchical non-centred ``pm.Model`` (Bernoulli-logit or softmax), or with
        ``collapsed=True`` ``alpha`` integrated out (``w`` Student-t; the model NUTS and ADVI
        sample by default); see :func:`sparsebayes.models.pymc_models.classification_model`."""
        from .pymc_models import classification_model

        return classification_model(self, prior=prior, likelihood=likelihood,
                                    collapsed=collapsed)


class RVMClassification(RVMClassificationRecord):
    """Sparse Bayesian classification with a Bernoulli-logit (2 classes, T01 eq. 23) or softmax
    (K classes, T01 eq. 28) likelihood.

    Parameters
    ----------
    X : array of shape (n, d)
        Inputs (NumPy; for Dask arrays use a dictionary and ``X.compute()``).
    y : array of shape (n,)
        Class labels, of any type; ``classes`` are its sorted unique values and ``t`` the
        integer codes 0..K-1.
    kernel : Kernel, str or callable, default "gaussian"
        A :class:`Kernel`, a kernel name, or a callable ``k(X, C)``; centred on the training
        inputs (or on ``centres``).
    bias : bool, default True
        Add a bias column (label ``"bias"``).
    extra_columns : sequence of str, default ()
        ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    prior : GammaPrior, str or None, default None
        Hyperprior on ``alpha`` (and ``beta``); ``None`` is the method's default (Tipping's
        flat prior for evidence/VRVM, a proper one for sampling); ``"weakly_informative"``
        or ``"default"``: that named prior for this data (:mod:`sparsebayes.models.priors`),
        used by every method.
    learn_width : bool, default False
        Maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    centres : int or array of shape (M, d), optional
        The basis dictionary: ``None`` (a kernel at every training input, the classic
        RVM), an int ``M`` (``M`` k-means centres, deterministic), or an (M, d) array
        (cost O(M^3) per step instead of O(N^3)).

    See Also
    --------
    RVMRegression, GPClassification
    sparsebayes.inference.RVC : The scikit-learn classifier.
    """

    def __init__(self, X, y, kernel: Kernel | str | Callable = "gaussian", bias: bool = True,
                 extra_columns: Sequence[str] = (), prior: GammaPrior | str | None = None,
                 learn_width: bool = False, centres: int | np.ndarray | None = None) -> None:
        if is_dask(X) or is_dask(y):
            raise TypeError("Dask arrays are taken by RVMRegression; for classification pass "
                            "NumPy arrays (X.compute()) with a dictionary (centres=M)")
        X, kernel, extra, centres = _checked_common(X, kernel, bias, extra_columns, prior,
                                                    learn_width, centres)
        y, classes, codes = check_labels(y, X.shape[0])
        record = RVMClassificationRecord(X, y, kernel, bias, extra, None, learn_width, centres,
                                         classes, codes)
        super().__init__(X, y, kernel, bias, extra, _named_prior(record, prior), learn_width,
                         centres, classes, codes)


def check_counts(counts, n: int, name: str = "counts") -> np.ndarray:
    """Non-negative integer counts of length ``n`` (integer-valued floats are taken), as int64."""
    arr = check_targets(counts, n, name=name)
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative, got minimum {arr.min():g}")
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integers (counts), got non-integer values")
    if arr.max() > 2**53:
        raise ValueError(f"{name} exceeds 2**53: such counts are not exact in double precision")
    return arr.astype(np.int64)


def check_fit_counts(counts: np.ndarray, name: str = "counts", what: str = "Poisson") -> None:
    """``ValueError`` for counts a ``what`` RVM cannot fit (checked counts, before any work):
    all zero, where the log rate has no finite maximum-likelihood value (every fit drives it
    towards -inf and only the prior stops it); and counts above :data:`COUNT_MAX`, where the
    Poisson's relative noise ``1/sqrt(t)`` is below 3e-5 and the Laplace fits lose the rate
    (MacKay's overflows ``exp`` from ~1e10; the fast one puts weights at the alpha floor)."""
    if not np.any(counts):
        raise ValueError(f"{name} are all zero: the log rate has no finite maximum-likelihood "
                         f"value (a fit only drives it towards -inf); a {what} RVM needs at "
                         "least one non-zero count")
    if counts.max() > COUNT_MAX:
        raise ValueError(
            f"{name} must be at most {COUNT_MAX:.0e} for the {what} RVM, got a maximum of "
            f"{counts.max():.3g}: at such counts the Poisson noise (relative sd "
            "1/sqrt(count) < 3e-5) is all but absent and the Laplace fits lose the log rate; "
            f"fit RVMRegression to log({name}) instead")


class LatentRVM(RVMBasis):
    """What an RVM with a :class:`~sparsebayes.models.likelihoods.LatentLikelihood` on
    ``f = Phi w`` derives from its fields and its class's ``likelihood_type``: the
    likelihood and the PyMC model."""

    likelihood_type: ClassVar[type[LatentLikelihood]]

    def likelihood(self, softmax_model: bool = False) -> LatentLikelihood:
        """The likelihood on the targets, its parameters at their start values."""
        return self.likelihood_type(self.t)

    def pymc_model(self, prior: GammaPrior | None = None, likelihood: str | None = None,
                   collapsed: bool = False):
        """The hierarchical ``pm.Model``: non-centred ``w = z / sqrt(alpha)`` and the targets
        observed by the likelihood's :meth:`~.LatentLikelihood.observe` given ``f = Phi w``,
        or with ``collapsed=True`` ``alpha`` integrated out (``w`` Student-t, T01 eq. 32);
        see :func:`sparsebayes.models.pymc_models.latent_model`. ``likelihood``: None (the
        argument is the classifier's)."""
        from .pymc_models import latent_model

        if likelihood is not None:
            raise ValueError(f"likelihood must be None (the {self.likelihood_type.name}), got "
                             f"{likelihood!r}")
        return latent_model(self, self.likelihood().observe, prior=prior, collapsed=collapsed)


@dataclass(frozen=True, eq=False)
class LatentRecord(LatentRVM):
    """The checked fields of an RVM with a latent likelihood (the targets ``t``)."""

    X: np.ndarray
    t: np.ndarray
    kernel: Kernel
    bias: bool
    extra_columns: tuple[str, ...]
    prior: GammaPrior | None
    learn_width: bool
    centres: np.ndarray | None


class RVMCountsRecord(LatentRecord):
    """The checked fields of an RVM for counts with the likelihood ``likelihood_type`` (a
    :class:`~sparsebayes.models.likelihoods.CountLikelihood`) on ``f = Phi w``: a subclass
    (:class:`RVMPoissonRegression`, ...) names its ``kind`` and ``likelihood_type`` and
    builds its fields with :func:`checked_counts_fields`."""

    kind = "counts"

    @property
    def counts(self) -> np.ndarray:
        """The counts (int64; ``t`` is the same array)."""
        return self.t


class RVMRealRecord(LatentRecord):
    """The checked fields of an RVM for real targets ``t`` with a non-Gaussian likelihood
    ``likelihood_type`` on ``f = Phi w`` (e.g. Student-t): a subclass names its ``kind``
    and ``likelihood_type`` and builds its fields with :func:`checked_real_fields`. Its
    latent function is at the targets' scale (the sampling priors read ``real_targets``)."""

    kind = "latent"
    real_targets = True


def checked_real_fields(X, t, kernel: Kernel | str | Callable = "gaussian",
                        bias: bool = True, extra_columns: Sequence[str] = (),
                        prior: GammaPrior | str | None = None, learn_width: bool = False,
                        centres: int | np.ndarray | None = None) -> tuple:
    """The checked fields of an :class:`RVMRealRecord`, in order (the arguments are those
    of :class:`RVMRegression` without ``noise_sd``)."""
    if is_dask(X) or is_dask(t):
        raise TypeError("Dask arrays are taken by RVMRegression; here pass NumPy arrays "
                        "(X.compute()) with a dictionary (centres=M)")
    X, kernel, extra, centres = _checked_common(X, kernel, bias, extra_columns, prior,
                                                learn_width, centres)
    t = check_targets(t, X.shape[0])
    if not np.std(t) > TINY_SD:
        raise ValueError(f"t varies by only {np.ptp(t):.3g}: there is no function to fit and "
                         "no noise scale (rescale t)")
    fields = (X, t, kernel, bias, extra)
    record = RVMRealRecord(*fields, None, learn_width, centres)
    return (*fields, _named_prior(record, prior), learn_width, centres)


def checked_counts_fields(likelihood_type: type[CountLikelihood], X, counts,
                          kernel: Kernel | str | Callable = "gaussian", bias: bool = True,
                          extra_columns: Sequence[str] = (),
                          prior: GammaPrior | str | None = None, learn_width: bool = False,
                          centres: int | np.ndarray | None = None) -> tuple:
    """The checked fields of an :class:`RVMCountsRecord` with the likelihood
    ``likelihood_type``, in order: what its class's ``__init__`` passes on (the arguments
    are those of :class:`RVMPoissonRegression`)."""
    if is_dask(X) or is_dask(counts):
        raise TypeError("Dask arrays are taken by RVMRegression; for counts pass NumPy "
                        "arrays (X.compute()) with a dictionary (centres=M)")
    X, kernel, extra, centres = _checked_common(X, kernel, bias, extra_columns, prior,
                                                learn_width, centres)
    counts = check_counts(counts, X.shape[0])
    check_fit_counts(counts, what=likelihood_type.label)
    fields = (X, counts, kernel, bias, extra)
    record = RVMCountsRecord(*fields, None, learn_width, centres)
    return (*fields, _named_prior(record, prior), learn_width, centres)


COUNTS_PARAMETERS = """
    Parameters
    ----------
    X : array of shape (n, d)
        Inputs (NumPy arrays only).
    counts : array of shape (n,)
        Non-negative integer counts, not all zero; ``t`` is the same array.
    kernel : Kernel, str or callable, default "gaussian"
        A :class:`Kernel`, a kernel name, or a callable ``k(X, C)``; centred on the training
        inputs (or on ``centres``).
    bias : bool, default True
        Add a bias column (label ``"bias"``).
    extra_columns : sequence of str, default ()
        ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    prior : GammaPrior, str or None, default None
        Hyperprior on ``alpha``; ``None`` is the method's default (Tipping's flat prior for
        the evidence, a proper one for sampling); ``"weakly_informative"`` or ``"default"``:
        that named prior for this data (:mod:`sparsebayes.models.priors`), used by every
        method.
    learn_width : bool, default False
        Maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    centres : int or array of shape (M, d), optional
        The basis dictionary: ``None`` (a kernel at every training input, the classic
        RVM), an int ``M`` (``M`` k-means centres, deterministic), or an (M, d) array
        (cost O(M^3) per step instead of O(N^3)).
"""


class RVMPoissonRegression(RVMCountsRecord):
    __doc__ = """Sparse Bayesian Poisson regression for counts: ``t_n ~ Poisson(exp(f_n))``,
    ``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)``.

    The RVM of Tipping 2001 §3 with a Poisson likelihood and log link (PRML §7.2.3).
""" + COUNTS_PARAMETERS + """
    See Also
    --------
    RVMRegression
    """

    kind = "poisson"
    likelihood_type = Poisson

    def __init__(self, X, counts, kernel: Kernel | str | Callable = "gaussian",
                 bias: bool = True, extra_columns: Sequence[str] = (),
                 prior: GammaPrior | str | None = None, learn_width: bool = False,
                 centres: int | np.ndarray | None = None) -> None:
        super().__init__(*checked_counts_fields(Poisson, X, counts, kernel, bias,
                                                extra_columns, prior, learn_width, centres))
