"""Type-II maximum likelihood of GP hyperparameters (Rasmussen & Williams 2006, §5.4.1):
L-BFGS-B on the log marginal likelihood over the free log hyperparameters, from several
starts, within bounds; the best optimum is kept."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg, optimize

FAILED = 1e20  # objective value where the covariance is not numerically positive definite


def maximise(make_objective: Callable[[], Callable], fixed: np.ndarray, lo: np.ndarray,
             hi: np.ndarray, starts: np.ndarray, *, max_iter: int, **lbfgsb_options):
    """L-BFGS-B from each of ``starts`` over the entries of the log-hyperparameter vector
    that ``fixed`` leaves NaN (the others stay at ``fixed``), within ``[lo, hi]``.

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
    for start in starts:
        lml_and_grad = make_objective()

        def negative(x, lml_and_grad=lml_and_grad):
            theta = fixed.copy()
            theta[free] = x
            value, g = _negative(lml_and_grad, theta)
            return value, g[free]

        res = optimize.minimize(negative, np.clip(start[free], lo[free], hi[free]), jac=True,
                                method="L-BFGS-B", bounds=list(zip(lo[free], hi[free])),
                                options={"maxiter": max_iter, **lbfgsb_options})
        theta = fixed.copy()
        theta[free] = res.x
        runs.append((theta, -float(res.fun), bool(res.success), int(res.nit)))
    return max(runs, key=lambda r: r[1])[0], runs


def _negative(lml_and_grad: Callable, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """``(-lml, -gradient)`` at ``theta``; ``(FAILED, 0)`` where the covariance fails."""
    try:
        value, g = lml_and_grad(theta)
    except linalg.LinAlgError:
        return FAILED, np.zeros_like(theta)
    return -float(value), -np.asarray(g)
