"""Type-II maximum likelihood of GP hyperparameters (Rasmussen & Williams 2006, §5.4.1):
L-BFGS-B on the log marginal likelihood over the free log hyperparameters, from several
starts, within bounds; the best optimum is kept."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg, optimize

FAILED = 1e20  # objective value where the covariance is not numerically positive definite
STALLED = 99  # scipy's status of a run its callback ended
# L-BFGS-B's stopping: scipy's defaults (ftol 2.2e-9 relative, gtol 1e-5) stop short of the
# optimum where the log marginal likelihood is flat
FTOL, GTOL = 1e-12, 1e-6
# ... and the relative-decrease stop itself can end a run on a ridge whose L-BFGS memory is
# badly scaled (a projected gradient still above GTOL): fresh runs from there, at most this
# many, while each gains more than 1e-8 relative
CONTINUATIONS = 5
#: objective evaluations of one L-BFGS-B start, typically, besides one per free
#: hyperparameter (the estimate logged up front; GP classification of 1000 digits, 65
#: hyperparameters: 88)
TYPICAL_EVALUATIONS = 40


class _Stall:
    """An L-BFGS-B callback that ends a run (``StopIteration``) once its last ``window``
    iterations lowered the objective by less than ``gain`` in all."""

    def __init__(self, window: int, gain: float) -> None:
        self.window, self.gain, self.values = window, gain, []

    def __call__(self, intermediate_result) -> None:
        self.values.append(float(intermediate_result.fun))
        if (len(self.values) > self.window
                and self.values[-1 - self.window] - self.values[-1] < self.gain):
            raise StopIteration


def maximise(make_objective: Callable[[], Callable], fixed: np.ndarray, lo: np.ndarray,
             hi: np.ndarray, starts: np.ndarray, *, max_iter: int,
             stall: tuple[int, float] | None = None, **lbfgsb_options):
    """L-BFGS-B from each of ``starts`` over the entries of the log-hyperparameter vector
    that ``fixed`` leaves NaN (the others stay at ``fixed``), within ``[lo, hi]``, stopped
    by ``FTOL`` and ``GTOL`` unless ``lbfgsb_options`` say otherwise. A run stopped by the
    relative decrease with its projected gradient above ``gtol`` is continued by fresh runs
    (``CONTINUATIONS``). A run whose line search fails (the objective's rounding noise, at
    large N) is continued by a fresh run with SciPy's default stop: converged if that
    converges or finds no decrease from its first step along the gradient. ``stall``
    ``(window, gain)``: a run whose last ``window`` iterations raised the log marginal
    likelihood by less than ``gain`` in all ends there, converged (the slow tail of a flat
    optimum over many hyperparameters).

    ``make_objective()`` returns, for one start, ``theta -> (log marginal likelihood,
    gradient)`` over the full vector (a fresh one per start, so it may warm-start from its
    own previous call); a ``LinAlgError`` counts as a failed point (value ``-FAILED``).
    Returns the best ``theta`` and every run's ``(theta, lml, success, n_iter)``; with
    nothing free, the one run at ``fixed``.
    """
    free = np.isnan(fixed)
    if not free.any():
        return fixed, [(fixed, -_negative(make_objective(), fixed)[0], True, 0)]
    runs = []
    bounds = list(zip(lo[free], hi[free]))
    options = {"maxiter": max_iter, "ftol": FTOL, "gtol": GTOL, **lbfgsb_options}
    for start in starts:
        lml_and_grad = make_objective()

        def negative(x, lml_and_grad=lml_and_grad):
            theta = fixed.copy()
            theta[free] = x
            value, g = _negative(lml_and_grad, theta)
            return value, g[free]

        def run(x, negative=negative):
            return optimize.minimize(negative, x, jac=True, method="L-BFGS-B", bounds=bounds,
                                     options=options,
                                     callback=None if stall is None else _Stall(*stall))

        res = run(np.clip(start[free], lo[free], hi[free]))
        success, nit = bool(res.success) or res.status == STALLED, int(res.nit)
        for _ in range(CONTINUATIONS):  # stopped on a flat ridge by the relative decrease
            if res.status != 0 or np.abs(projected_gradient(res.x, res.jac, lo[free],
                                                            hi[free])).max() <= options["gtol"]:
                break
            again = run(res.x)
            nit += int(again.nit)
            gain = res.fun - again.fun
            if gain > 0:
                res, success = again, bool(again.success) or again.status == STALLED
            if gain <= 1e-8 * max(1.0, abs(res.fun)):
                break
        if res.status == 2:  # the line search failed: at N in the thousands the objective's
            # rounding noise can stop it at the optimum. A fresh run from there (a first
            # step along the gradient, SciPy's default stop) decides: it converges, or
            # finds no decrease at all (stationary to the objective's precision)
            again = optimize.minimize(negative, res.x, jac=True, method="L-BFGS-B",
                                      bounds=bounds, options={"maxiter": max_iter})
            success = bool(again.success) or (again.status == 2 and again.fun >= res.fun)
            if again.fun <= res.fun:
                res = again
            nit += int(again.nit)
        theta = fixed.copy()
        theta[free] = res.x
        runs.append((theta, -float(res.fun), success, nit))
    return max(runs, key=lambda r: r[1])[0], runs


def projected_gradient(x: np.ndarray, g: np.ndarray, lo: np.ndarray,
                       hi: np.ndarray) -> np.ndarray:
    """The gradient ``g`` of a minimised function at ``x`` with the components zeroed whose
    descent would leave the box ``[lo, hi]`` (the quantity L-BFGS-B's ``gtol`` bounds)."""
    return np.where(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)), 0.0, g)


def se_ard_gradient(B: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, float]:
    """The gradient in ``(log length scales, log signal sd)`` of a GP objective whose
    derivative in the SE-ARD covariance ``K`` (GPML eq. 5.1) is ``1/2 sum_ij W_ij dK_ij``,
    given ``B = W o K`` (symmetric) and the scaled inputs ``Z = X / length_scale``:
    ``dK_ij / d log l_d = K_ij (z_id - z_jd)^2`` and ``dK / d log sf = 2 K``, contracted as
    ``sum_ij B_ij (z_id - z_jd)^2 = 2 sum_i z_id^2 (B 1)_i - 2 z_d^T B z_d`` (O(n^2 d), no
    n x n x d array), ``Z`` centred first (the identity holds for any shift; centring keeps
    its two terms small)."""
    Z = Z - Z.mean(axis=0)
    return B.sum(axis=1) @ Z**2 - np.einsum("id,id->d", Z, B @ Z), float(B.sum())


def _negative(lml_and_grad: Callable, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """``(-lml, -gradient)`` at ``theta``; ``(FAILED, 0)`` where the covariance fails."""
    try:
        value, g = lml_and_grad(theta)
    except linalg.LinAlgError:
        return FAILED, np.zeros_like(theta)
    return -float(value), -np.asarray(g)
