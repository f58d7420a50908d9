"""Tipping's (2001) re-estimation of the weight precisions, one loop for every likelihood:
``alpha_i = (gamma_i + 2a) / (w_i^2 + 2b)`` (T01 eq. 44; eq. 16 for the flat prior ``a = b =
0``) with ``gamma_i = 1 - alpha_i Sigma_ii`` (eq. 17), pruning the bases whose precision
diverges (App. B.1). The likelihood enters through its weight posterior at ``alpha``
(:class:`Posterior`): the Gaussian's in closed form (T01 eqs. 12-13) with its noise
re-estimated by eq. (46) (eq. 18), a non-Gaussian likelihood's Laplace approximation at the
mode (T01 eqs. 24-26)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

__all__ = ["mackay_update", "Posterior", "Reestimated", "reestimate"]


def mackay_update(alpha: np.ndarray, gamma: np.ndarray, w2: np.ndarray, a: float, b, *,
                  prune_at: float, scale=1.0, floor: float = 0.0):
    """One re-estimate of ``alpha`` from ``gamma`` and the squared posterior means ``w2``
    (T01 eq. 44), at least ``floor``. Returns the new precisions, the mask of the bases kept
    (``new * scale < prune_at``; ``scale`` maps the precisions to the units the threshold is
    in) and the largest ``|ln(new / old)|`` over the kept ones (0 if none is kept)."""
    new = (gamma + 2 * a) / (w2 + 2 * b)
    new = np.maximum(np.where(new > 0, new, np.inf), floor)
    keep = new * scale < prune_at
    change = np.max(np.abs(np.log(new[keep] / alpha[keep])), initial=0.0)
    return new, keep, change


class Posterior(Protocol):
    """The weight posterior a MacKay loop re-estimates ``alpha`` from, over the bases still
    in the model."""

    def at(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The posterior means, the diagonal of the covariance and the log evidence at the
        precisions ``alpha`` of the bases in the model."""

    def reestimate(self, gamma: np.ndarray) -> float:
        """Re-estimate the likelihood's own parameters at the last :meth:`at` (the Gaussian
        noise, T01 eq. 46); the largest change in their logs (0 when it has none)."""

    def keep(self, keep: np.ndarray) -> None:
        """Drop the bases pruned (``keep`` False)."""


class Reestimated(NamedTuple):
    """:func:`reestimate`'s result: the bases kept (positions in its starting ``alpha``),
    their precisions, the log-evidence trace, whether it converged and its iterations."""

    index: np.ndarray
    alpha: np.ndarray
    trace: list[float]
    converged: bool
    n_iter: int


def reestimate(posterior: Posterior, alpha: np.ndarray, *, a: float, b: np.ndarray,
               prune_at: float, scale: np.ndarray, max_iter: int, tol: float,
               floor: float = 0.0,
               pool: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
               ) -> Reestimated:
    """Tipping's (2001) loop from the precisions ``alpha`` of the bases in the model: the
    posterior at ``alpha``, then eq. (44) for every ``alpha`` and the likelihood's own
    re-estimate (:meth:`Posterior.reestimate`), pruning a basis once ``alpha * scale`` exceeds
    ``prune_at``; converged when nothing is pruned and no log precision or parameter moves by
    ``tol``. ``b``, ``scale`` (one per basis): the Gamma rate and the factor taking a precision
    to the units ``prune_at`` and ``floor`` hold in. ``pool(index, v)``: the sums of ``v``
    over the bases that share one precision (a softmax's classes of one column), or None."""
    index = np.arange(alpha.size)
    trace: list[float] = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (returned)
        mu, sigma_diag, log_evidence = posterior.at(alpha)
        trace.append(log_evidence)
        gamma = 1.0 - alpha * sigma_diag  # (17)
        w2 = mu**2
        if pool is not None:
            gamma, w2 = pool(index, gamma), pool(index, w2)
        sc = scale[index]
        new, keep, change = mackay_update(alpha, gamma, w2, a, b[index], prune_at=prune_at,
                                          floor=floor / sc, scale=sc)  # (44)
        change = max(change, posterior.reestimate(gamma))  # (46)
        pruned = not keep.all()
        index, alpha = index[keep], new[keep]
        posterior.keep(keep)
        if change < tol and not pruned:
            converged = True
            break
    return Reestimated(index, alpha, trace, converged, it)
