"""Gamma hyperpriors of the RVM (T01 eq. 6 and Appendix A)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GammaPrior"]


@dataclass(frozen=True)
class GammaPrior:
    """``alpha_i ~ Gamma(a, b)`` and ``beta ~ Gamma(c, d)`` with ``b``, ``d`` rates (T01 eq. 6).

    ``a = b = c = d = 0`` (the default) is Tipping's improper prior, flat in ``log alpha`` and
    ``log beta``: fine for the evidence and VRVM methods, whose objectives stay bounded, but it
    makes the joint posterior improper, so MCMC and ADVI refuse it.
    """

    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    d: float = 0.0

    def __post_init__(self) -> None:
        for name in "abcd":
            v = getattr(self, name)
            if not isinstance(v, int | float | np.floating | np.integer) or not np.isfinite(v):
                raise TypeError(f"GammaPrior {name} must be a finite number, got {v!r}")
            if v < 0:
                raise ValueError(f"GammaPrior {name} must be >= 0, got {v!r}")
        if self.a > 0 and self.b == 0:
            raise ValueError(
                "GammaPrior a > 0 needs a rate b > 0: with b = 0 the hyperprior term a ln(alpha) "
                "grows without bound, so the evidence objective has no maximum"
            )

    @property
    def is_proper(self) -> bool:
        """All four parameters > 0, so both Gamma densities normalise."""
        return min(self.a, self.b, self.c, self.d) > 0

    @property
    def is_flat(self) -> bool:
        return max(self.a, self.b, self.c, self.d) == 0
