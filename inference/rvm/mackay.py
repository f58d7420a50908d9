"""Tipping's (2001) re-estimation of the weight precisions, shared by regression and
classification: ``alpha_i = (gamma_i + 2a) / (w_i^2 + 2b)`` (T01 eq. 44; eq. 16 for the flat
prior ``a = b = 0``) with ``gamma_i = 1 - alpha_i Sigma_ii`` (eq. 17), pruning the bases whose
precision diverges (App. B.1)."""

from __future__ import annotations

import numpy as np

__all__ = ["mackay_update"]


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
