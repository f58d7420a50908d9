"""Gaussian process regression with a squared-exponential ARD covariance (the full-GP
comparison model of Rasmussen & Quiñonero-Candela 2005, §3).

``t = f(x) + eps``, ``f ~ GP(0, k)``, ``eps ~ N(0, noise_sd^2)`` with

    k(x, x') = signal_sd^2 exp(-1/2 sum_d (x_d - x'_d)^2 / length_scale_d^2)

(Rasmussen & Williams 2006, eq. 5.1). The mean function is zero: centre the targets.
In scikit-learn terms this is ``ConstantKernel(signal_sd**2) * RBF(length_scale) +
WhiteKernel(noise_sd**2)``; in PyMC ``signal_sd**2 * pm.gp.cov.ExpQuad(d, ls=length_scale)``
with ``pm.gp.Marginal(...).marginal_likelihood(..., sigma=noise_sd)``. With ``inducing``
inputs it is the sparse GP of Titsias (2009), PyMC's ``pm.gp.MarginalApprox(approx="VFE")``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import check_inputs, check_labels, check_targets
from .kernels import GaussianKernel
from .problems import check_centres

__all__ = ["GPRegression", "GPClassification", "se_ard_covariance", "gp_model"]


def se_ard_covariance(X1: np.ndarray, X2: np.ndarray | None, length_scale,
                      signal_sd: float) -> np.ndarray:
    """``signal_sd^2 exp(-||(x - x') / length_scale||^2 / 2)`` for all pairs (R&W eq. 5.1):
    the RVM's Gaussian kernel (Tipping 2001 eq. 30) at widths ``r = sqrt(2) length_scale``,
    scaled. ``X2=None`` means ``X1`` (the result is then exactly symmetric)."""
    kernel = GaussianKernel(np.sqrt(2.0) * np.asarray(length_scale, dtype=float))
    K = kernel(X1, X1 if X2 is None else X2)
    if X2 is None:
        K += K.T
        K *= 0.5
        np.fill_diagonal(K, 1.0)
    K *= signal_sd**2
    return K


def _positive(name: str, value, shape: tuple[int, ...] | None = None):
    if value is None:
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or None, got {value!r}") from exc
    if shape is None and arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    if shape is not None:
        if arr.ndim == 0:
            arr = np.full(shape, float(arr))
        if arr.shape != shape:
            raise ValueError(f"{name} must be a scalar or have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return float(arr) if arr.ndim == 0 else tuple(float(v) for v in arr)


@dataclass(frozen=True, eq=False)
class GPRegressionRecord:
    """The checked fields of a :class:`GPRegression` (build that, not this)."""

    X: np.ndarray
    t: np.ndarray
    length_scale: tuple[float, ...] | None
    signal_sd: float | None
    noise_sd: float | None
    inducing: np.ndarray | None = None
    learn_inducing: bool = False

    kind = "gp"

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    def covariance(self, X1, X2=None, *, length_scale, signal_sd) -> np.ndarray:
        """The noise-free covariance ``k(X1, X2)`` at the given hyperparameters."""
        return se_ard_covariance(X1, X2, length_scale, signal_sd)

    def pymc_model(self, jitter: float = 0.0):
        """The ``pm.gp.Marginal`` model; see :func:`gp_model`."""
        return gp_model(self, jitter=jitter)


class GPRegression(GPRegressionRecord):
    """GP regression with an SE-ARD covariance (see the module docstring).

    ``fit(GPRegression(X, t), method="evidence")`` maximises the log marginal likelihood
    (type-II ML); ``method="nuts"`` samples the hyperparameters of :func:`gp_model`.

    Parameters
    ----------
    X : array of shape (n, d)
        Inputs.
    t : array of shape (n,)
        Real targets; the GP has zero mean, so centre ``t``.
    length_scale : float or array of shape (d,), optional
        ``None`` to learn one length-scale per input; a scalar or (d,) values to hold them
        fixed.
    signal_sd, noise_sd : float, optional
        ``None`` to learn; a number > 0 to hold fixed.
    inducing : int or array of shape (M, d), optional
        ``None``: the exact GP (O(N^3)). An int ``M``: the sparse GP of Titsias (2009) on
        ``M`` k-means centres of ``X`` (the RVM's ``centres=M`` dictionary); an array: those
        inducing inputs. Type-II ML then maximises Titsias's bound in O(N M^2).
    learn_inducing : bool, default False
        With ``inducing``: ``False`` holds the inducing inputs fixed; ``True`` maximises the
        bound over them too (Titsias 2009, §3), from those given, with the
        hyperparameters. The fit's ``constant_data`` then holds the learned ``Z`` and the
        starting ``Z_start``.

    See Also
    --------
    RVMRegression, GPClassification
    """

    def __init__(self, X, t, length_scale=None, signal_sd: float | None = None,
                 noise_sd: float | None = None, inducing=None,
                 learn_inducing: bool = False) -> None:
        X = check_inputs(X)
        if X.shape[0] < 2:
            raise ValueError(f"X needs at least 2 samples, got {X.shape[0]}")
        t = check_targets(t, X.shape[0])
        if np.ptp(t) == 0:
            raise ValueError("t is constant: there is nothing to regress")
        if not isinstance(learn_inducing, (bool, np.bool_)):
            raise TypeError(f"learn_inducing must be True or False, got {learn_inducing!r}")
        if learn_inducing and inducing is None:
            raise ValueError("learn_inducing=True needs inducing inputs (inducing=M or an "
                             "array); the exact GP has none")
        super().__init__(X, t, _positive("length_scale", length_scale, (X.shape[1],)),
                         _positive("signal_sd", signal_sd), _positive("noise_sd", noise_sd),
                         check_centres(inducing, X, name="inducing"), bool(learn_inducing))


@dataclass(frozen=True, eq=False)
class GPClassificationRecord:
    """The checked fields of a :class:`GPClassification` (build that, not this)."""

    X: np.ndarray
    y: np.ndarray
    length_scale: tuple[float, ...] | None
    signal_sd: float | None
    classes: np.ndarray
    t: np.ndarray

    kind = "gp_classification"

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_classes(self) -> int:
        return int(self.classes.size)


class GPClassification(GPClassificationRecord):
    """GP classification with an SE-ARD covariance
    ``signal_sd^2 exp(-||(x - x') / length_scale||^2 / 2)`` (GPML eq. 5.1).

    Two classes: ``p(y = classes[1] | f) = sigma(f)`` with one zero-mean latent GP ``f``
    (GPML §3.3). K > 2 classes: the softmax ``p(y = classes[c] | f) = exp(f_c) / sum_c'
    exp(f_c')`` of K independent latent GPs (GPML §3.5) that share one covariance (the same
    length scales and signal sd for every class, so there are D + 1 hyperparameters as in
    the binary case).

    ``fit(GPClassification(X, y), "evidence")``: the Laplace approximation (GPML Algorithm
    3.1; 3.3 for K > 2) with its log marginal likelihood maximised over the hyperparameters
    (Algorithm 5.1; its softmax form for K > 2). ``"nuts"`` is binary only.

    Parameters
    ----------
    X : array of shape (n, d)
        Inputs.
    y : array of shape (n,)
        Class labels, two or more classes.
    length_scale : float or array of shape (d,), optional
        ``None`` to learn by type-II ML; numbers > 0 to hold fixed.
    signal_sd : float, optional
        ``None`` to learn by type-II ML; a number > 0 to hold fixed.

    See Also
    --------
    RVMClassification, GPRegression
    """

    def __init__(self, X, y, length_scale=None, signal_sd: float | None = None) -> None:
        X = check_inputs(X)
        if X.shape[0] < 2:
            raise ValueError(f"X needs at least 2 samples, got {X.shape[0]}")
        y, classes, codes = check_labels(y, X.shape[0])
        super().__init__(X, y, _positive("length_scale", length_scale, (X.shape[1],)),
                         _positive("signal_sd", signal_sd), classes, codes)


def default_prior_scales(problem: GPRegression) -> dict[str, np.ndarray]:
    """Data scales of the sampling priors: sd of each input and of the targets."""
    sx = problem.X.std(axis=0)
    sx = np.where(sx > 0, sx, 1.0)
    return {"ls_prior_mu": np.log(sx), "t_sd": np.asarray(np.std(problem.t))}


def gp_model(problem: GPRegression, jitter: float = 0.0):
    """``pm.Model`` of the GP (PyMC imported here): returns ``(model, gp)``.

    Free hyperparameters get proper priors scaled to the data (used by NUTS; type-II ML
    ignores them): ``length_scale_d ~ LogNormal(ln sd(x_d), 1)``, ``signal_sd ~
    HalfNormal(2 sd(t))``, ``noise_sd ~ HalfNormal(sd(t))``. Fixed ones are data. Inputs,
    targets and prior scales are ``pm.Data``, so a compiled model is reused for new data of
    the same shape. ``jitter`` is added to the covariance diagonal (PyMC's default is 1e-6;
    0 here so the density is exactly the GP marginal likelihood).
    """
    import pymc as pm

    n, d = problem.X.shape
    scales = default_prior_scales(problem)
    coords = {"feature": np.arange(d), "obs": np.arange(n)}
    with pm.Model(coords=coords) as model:
        X = pm.Data("X", problem.X, dims=("obs", "feature"))
        t = pm.Data("t_data", problem.t, dims="obs")
        if problem.length_scale is None:
            mu = pm.Data("ls_prior_mu", scales["ls_prior_mu"], dims="feature")
            ls = pm.LogNormal("length_scale", mu=mu, sigma=1.0, dims="feature")
        else:
            ls = pm.Data("length_scale_fixed", np.asarray(problem.length_scale), dims="feature")
        t_sd = pm.Data("t_sd", scales["t_sd"])
        eta = (pm.HalfNormal("signal_sd", sigma=2.0 * t_sd) if problem.signal_sd is None
               else pm.Data("signal_sd_fixed", problem.signal_sd))
        sigma = (pm.HalfNormal("noise_sd", sigma=t_sd) if problem.noise_sd is None
                 else pm.Data("noise_sd_fixed", problem.noise_sd))
        cov = eta**2 * pm.gp.cov.ExpQuad(d, ls=ls)
        gp = pm.gp.Marginal(cov_func=cov)
        gp.marginal_likelihood("t", X=X, y=t, sigma=sigma, jitter=jitter, dims="obs")
    return model, gp
