"""Kernel widths: their scale against the inputs' nearest-neighbour spacing (bounds of a
learned width, warnings for a fixed one) and the log widths ``ln r_d`` that L-BFGS-B moves
(the gradient in them is the kernel's own, ``Kernel.log_width_gradient``); and the widths
of a GP's type-II ML (:func:`gp_widths`, ``widths_from_gp`` of an evidence fit)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from sparsebayes.models import GPRegression, NumericalWarning
from sparsebayes.models.basis import Basis
from sparsebayes.models.kernels import sq_distances
from sparsebayes.models.problems import kmeans_centres

from ..gp import type2
from ..gp.regression import optimise
from ..numerics import one_blas_thread, warn_user

__all__ = ["WIDE_FACTOR", "NARROW_SPACING", "median_nn_distance", "check_width",
           "default_width_bounds", "estimator_width_range", "estimator_ard_bounds",
           "with_log_width", "GP_EXACT_MAX", "GP_INDUCING", "GPWidths", "gp_widths"]

WIDE_FACTOR = 100.0  # width > 100 x the input range: the columns are nearly constant
NARROW_SPACING = 5.0  # median neighbour > 5 widths away: a basis is exp(-25) there
NN_QUERIES = 500  # the nearest-neighbour spacing from at most this many rows
GP_EXACT_MAX = 1000  # gp_widths: the exact GP up to this many training points, above it
GP_INDUCING = 300  # Titsias's (2009) sparse GP on this many k-means inducing inputs


def median_nn_distance(Z: np.ndarray, max_queries: int | None = NN_QUERIES) -> float | None:
    """Median over (at most ``max_queries`` evenly spaced; ``None``: all) distinct rows of
    ``Z`` of the distance to the nearest other distinct row; ``None`` with fewer than two
    distinct rows. Exact: a k-d tree query in up to 20 dimensions, brute force beyond."""
    from scipy.spatial import cKDTree

    U = np.unique(Z, axis=0)
    if U.shape[0] < 2:
        return None
    n = U.shape[0] if max_queries is None else min(max_queries, U.shape[0])
    rows = np.unique(np.linspace(0, U.shape[0] - 1, n).astype(int))
    if Z.shape[1] <= 20:
        return float(np.median(cKDTree(U).query(U[rows], k=2)[0][:, 1]))
    nearest = np.empty(rows.size)  # a k-d tree does not prune in many dimensions: BLAS
    for lo in range(0, rows.size, 1000):
        D = sq_distances(U[rows[lo : lo + 1000]], U)
        D[np.arange(D.shape[0]), rows[lo : lo + 1000]] = np.inf
        nearest[lo : lo + 1000] = D.min(axis=1)
    return float(np.sqrt(np.median(nearest)))


def check_width(problem) -> None:
    """Warn when a fixed Gaussian width is far off the scale of the inputs (the centres,
    with a dictionary), both ways a fit silently degenerates:

    * far larger than the input range (> ``WIDE_FACTOR`` x in every dimension): the kernel
      columns are nearly constant and collinear;
    * far smaller than the spacing of the inputs: the median distance from an input to its
      nearest neighbour, measured in widths (per dimension for ARD), exceeds
      ``NARROW_SPACING``, where a basis function has fallen to ``exp(-25)`` of its peak. Then
      ``Phi`` is ``[1, I]`` to machine precision: every basis function sees only its own
      point and away from the training inputs the model predicts the bias alone (unscaled
      inputs: raw breast cancer with width 0.5 is 32 widths apart and predicted one
      probability for every point). Legitimate widths are near the spacing or above it
      (the evidence's own lower bound, :func:`default_width_bounds`, is one spacing).

    A learned width (``learn_width``) is not checked: the given one is only its start."""
    kernel = problem.kernel
    if "width" not in kernel.parameters or problem.learn_width:
        return
    X = problem.X if problem.centres is None else problem.centres
    width = np.asarray(kernel.width, dtype=float)
    extent = np.ptp(X, axis=0) * np.ones_like(np.atleast_1d(width))
    if np.all(width > WIDE_FACTOR * np.maximum(extent, 1e-300)):
        warn_user(f"kernel width {kernel.width} is far larger than the input range "
                  f"{np.ptp(X, axis=0)}: the kernel columns are nearly constant and "
                  "collinear", NumericalWarning)
        return
    spacing = median_nn_distance(X / width)
    if spacing is not None and spacing > NARROW_SPACING:
        what = "X" if problem.centres is None else "the centres"
        raw = "" if width.ndim else f" ({spacing * float(width):.3g} in input units)"
        warn_user(
            f"kernel width {kernel.width} is far smaller than the spacing of {what}: the "
            f"median distance from a point to its nearest neighbour is {spacing:.3g} "
            f"widths{raw}, so each basis "
            f"function is below exp(-{spacing**2:.0f}) at every other point and the model "
            "predicts little more than the bias away from the training points. Standardise "
            "the inputs (sklearn.preprocessing.StandardScaler) and use a width near the "
            "nearest-neighbour spacing or larger, or learn it (learn_width=True; RVR/RVC: "
            "width=None)", NumericalWarning)


def default_width_bounds(X: np.ndarray, ard: bool = False) -> np.ndarray | None:
    """Default search interval of a learned Gaussian width, shape (n_widths, 2), or None if
    the inputs have fewer than two distinct points.

    Isotropic: from the median distance of an input to its nearest distinct neighbour
    (narrower bases each fit a single point: the degenerate limit of the evidence) to 100
    times the bounding-box diagonal (wider bases are nearly constant). ARD (one width per
    input): :func:`estimator_ard_bounds`, a floor in the joint input space (one home for the
    model API and the estimators). Not the spacing of each input alone: with several inputs
    the one-dimensional nearest neighbour is orders of magnitude closer than the neighbour in
    all inputs, so per-input floors let every width shrink to where each basis sees its own
    point only (every point kept, the noise at its floor).
    """
    if ard:
        return None if np.unique(X, axis=0).shape[0] < 2 else estimator_ard_bounds(X)
    extent = float(np.sqrt(np.sum(np.ptp(X, axis=0) ** 2)))
    spacing = median_nn_distance(X, max_queries=None)
    if spacing is None or not extent > 0:
        return None
    return np.array([(spacing, 100.0 * extent)])


def estimator_width_range(X: np.ndarray) -> tuple[float, float]:
    """Lower bound and start of the scikit-learn estimators' evidence search over the
    Gaussian width (``width=None``).

    * start ``r0 = sqrt(sum_k var(x_k))``: ``sqrt(n_features)`` on standardised inputs, where
      ``E||x - x'||^2 = 2 r0^2`` and a typical basis value is ``exp(-2)``;
    * lower bound ``r_min = 2 * median distance to the nearest distinct neighbour``, where a
      basis function still has the value ``exp(-1/4)`` at the neighbouring input.

    The bound matters: as the width shrinks below the spacing of the inputs, ``Phi`` tends to
    ``[1, I]`` and the evidence tends to that of a model with one free variance per point,
    which is larger than at any sensible width (the noise estimate then hits its floor and
    every point becomes a relevance vector; seen on pure-noise data and on diabetes).
    Returns ``(r_min, max(r0, r_min))``.
    """
    r2 = float(np.sum(np.var(X, axis=0)))
    r0 = float(np.sqrt(r2)) if np.isfinite(r2) and r2 > 0 else 1.0
    spacing = median_nn_distance(X, max_queries=None)
    if spacing is None:
        return r0, r0
    r_min = 2.0 * spacing
    return r_min, max(r0, r_min)


def estimator_ard_bounds(X: np.ndarray) -> np.ndarray:
    """Bounds (n_features, 2) of the estimators' per-input widths (RVR's ``width=None``):
    :func:`estimator_width_range`'s lower bound and 100 times the bounding-box diagonal, both
    on the inputs divided by their standard deviations ``sd_k``, times ``sd_k``.

    With every ``r_k`` at least its lower bound, ``sum_k (x_k - c_k)^2 / r_k^2`` is at most
    ``||(x - c) / sd||^2 / r_min^2``: the kernel is at least ``exp(-1/4)`` at the median
    nearest neighbour, as for one width at ``r_min``; without the bound single widths
    shrink to the one-dimensional spacing on pure noise (every point kept). Scaled by
    ``sd_k``, the bounds follow the units of each input (a constant input: ``sd_k = 1``).
    """
    sd = np.std(X, axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Z = X / sd
    r_min = estimator_width_range(Z)[0]
    if not r_min > 0:  # spacings below double precision (squared distances underflow)
        r_min = 1.0
    extent = float(np.sqrt(np.sum(np.ptp(Z, axis=0) ** 2)))
    return np.column_stack([r_min * sd, max(100.0 * extent, 2.0 * r_min) * sd])


def with_log_width(basis: Basis, log_width: np.ndarray) -> Basis:
    """``basis`` with its kernel at widths ``exp(log_width)`` (one entry for an
    isotropic kernel, one per input for ARD)."""
    width = np.exp(log_width)
    kernel = basis.kernel
    return basis.with_kernel(kernel.with_width(width if kernel.is_ard else float(width[0])))


@dataclass(frozen=True)
class GPWidths:
    """:func:`gp_widths`' result: the log widths, the GP's noise sd, its route (``"gp"``
    exact, ``"sparse-gp"`` Titsias's bound), inducing inputs (0 for the exact GP), its log
    marginal likelihood or bound, and the seconds it took."""

    log_width: np.ndarray
    noise_sd: float
    route: str
    inducing: int
    log_evidence: float
    seconds: float


def gp_widths(problem, log_bounds) -> GPWidths | None:
    """The kernel widths of a GP's type-II ML on the problem's data: an SE-ARD GP (its
    noise held at the problem's ``noise_sd`` if that is fixed) on the centred targets, by
    the log marginal likelihood (GPML eq. 5.8) up to :data:`GP_EXACT_MAX` points and by
    Titsias's (2009, eq. 9) bound on :data:`GP_INDUCING` k-means inducing inputs above, one
    L-BFGS-B start from the data scales; its length scales turned into the kernel's widths
    (:meth:`~sparsebayes.models.Kernel.width_from_length_scale`) and clipped to ``log_bounds``
    (one (low, high) pair per input). None, with a warning, when the GP's covariance was
    not positive definite."""
    start = time.perf_counter()
    X = np.asarray(problem.X, dtype=float)
    t = np.asarray(problem.t, dtype=float)
    n, d = X.shape
    inducing = None if n <= GP_EXACT_MAX else kmeans_centres(X, GP_INDUCING)
    gp = GPRegression(X, t - t.mean(), noise_sd=problem.noise_sd, inducing=inducing)
    with one_blas_thread():
        theta, runs = optimise(gp, seed=0, restarts=1, max_iter=1000)
    best = max(r[1] for r in runs)
    if not np.isfinite(best) or best <= -type2.FAILED / 2:
        warn_user("the GP's type-II ML for the kernel widths failed (its covariance was not "
                  "positive definite); the widths are learned by the RVM's evidence instead",
                  NumericalWarning)
        return None
    width = problem.basis.kernel.width_from_length_scale(np.exp(theta[:d]))
    lo, hi = np.transpose(np.asarray(log_bounds, dtype=float))
    return GPWidths(np.clip(np.log(width), lo, hi), float(np.exp(theta[d + 1])),
                    "gp" if inducing is None else "sparse-gp",
                    0 if inducing is None else inducing.shape[0], float(best),
                    time.perf_counter() - start)
