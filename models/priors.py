"""Gamma hyperpriors of the RVM (T01 eq. 6 and Appendix A) and the named, scale-aware ones:

* ``"default"`` (:func:`default_sampling_prior`): what NUTS and ADVI use when none is given;
  nearly flat in ``log alpha`` like Tipping's, so it says nothing about the scale of ``f``;
* ``"weakly_informative"`` (:func:`weakly_informative_prior`): a prior predictive at the
  scale of the data, for prior predictive checks.

A problem's ``prior=`` and ``fit(..., prior=)`` accept a :class:`GammaPrior` or one of these
names; a name is turned into a :class:`GammaPrior` from the problem's data and basis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "GammaPrior",
    "PRIOR_NAMES",
    "default_sampling_prior",
    "weakly_informative_prior",
    "resolve_prior",
    "data_scales",
    "unit_scale_prior",
]


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

    def as_array(self) -> np.ndarray:
        """``(a, b, c, d)``, as results store it (attrs ``prior``)."""
        return np.array([float(getattr(self, k)) for k in "abcd"])

    @staticmethod
    def from_array(values) -> GammaPrior:
        """The prior of :meth:`as_array`."""
        return GammaPrior(*(float(v) for v in np.asarray(values, dtype=float).reshape(4)))

    @property
    def is_proper(self) -> bool:
        """All four parameters > 0, so both Gamma densities normalise."""
        return min(self.a, self.b, self.c, self.d) > 0

    @property
    def is_flat(self) -> bool:
        return max(self.a, self.b, self.c, self.d) == 0


# Scale-aware default hyperprior (see default_sampling_prior)
SHAPE = 0.05  # a and c: nearly flat in log alpha / log beta, as Tipping's a = c = 0
ALPHA_CEILING = 1e6  # 1/b in units of the "one weight explains t" precision
BETA_CEILING = 1e6  # 1/d in units of 1/var(t): noise sd down to 1e-3 sd(t)
CLASS_SHAPE = 2.0  # classification a: weights Student-t, 4 dof, at the unit-logit scale


def _gaussian_noise(problem) -> bool:
    """The problem's targets have Gaussian noise of precision ``beta`` (hyperprior c, d)."""
    return bool(getattr(problem, "gaussian_noise", False))


def _real_targets(problem) -> bool:
    """The latent function is at the scale of real-valued targets (Gaussian noise, or a
    latent RVM with ``real_targets``, e.g. Student-t), not at a logit's or log rate's."""
    return _gaussian_noise(problem) or bool(getattr(problem, "real_targets", False))


def data_scales(problem) -> tuple[float, float]:
    """``alpha_unit = mean_m mean_n phi_nm^2 / var(t)``: the precision of a weight that alone
    explains the spread of the targets; and ``var(t)`` (1 for classification logits and log
    rates)."""
    ms = problem.basis.mean_square(problem.X)
    var_t = float(np.var(problem.t)) if _real_targets(problem) else 1.0
    return max(ms, 1e-300) / var_t, var_t


def default_sampling_prior(problem) -> GammaPrior:
    """The proper Gamma hyperprior used by MCMC and VI when ``problem.prior`` is None.

    Regression: ``a = c = SHAPE`` (0.05): nearly flat in ``log alpha`` and ``log beta`` like
    Tipping's ``a = b = c = d = 0``, so the marginal prior on each weight stays a
    sparsity-promoting Student-t with ``2 a`` degrees of freedom (T01 eq. 32). The rates set
    where that flatness ends, in the units of the data so the prior is invariant to rescaling
    ``t`` or ``Phi`` (as the flat prior is): ``b = 1e-6 / alpha_unit`` with ``alpha_unit =
    mean(Phi^2) / var(t)``, i.e. a weight prior sd down to 1e-3 of the size of a weight that
    alone explains ``t`` (irrelevant weights are shrunk to nothing, so sparsity is allowed);
    and ``d = 1e-6 var(t)``, a noise sd down to 1e-3 sd(t) (the evidence method's floor).
    Without the rates the posterior of an irrelevant ``alpha_i`` is flat out to infinity
    (improper); with them it is a plateau of a few units of ``log alpha``.
    The shape bounds the other end: below the rate the prior of ``log alpha`` decays like
    ``exp(a log alpha)``, so it spans about ``1 / a`` nats; ``a = 0.05`` keeps every prior
    draw of ``alpha`` finite (underflow needs ``u < e^-38`` per weight) while staying nearly
    flat. The prior predictive is astronomically wide: this prior says nothing about the
    scale of ``f``, by design. For a prior predictive check use
    :func:`weakly_informative_prior`.

    Classification (``c``, ``d`` unused): ``a = 2``, ``b = a / alpha_unit`` with
    ``alpha_unit = mean(Phi^2)`` (logits have unit scale), so ``E[alpha] = alpha_unit`` and
    each weight is marginally Student-t with ``2a = 4`` degrees of freedom and scale
    ``1 / sqrt(alpha_unit)``: a weight that alone moves the logits by about 1, in the spirit
    of the weakly-informative Student-t priors of Gelman et al. (2008, Ann. Appl. Stat. 2,
    1360) for logistic regression, made hierarchical. The regression choice fails here: the
    Bernoulli likelihood is bounded, so ``p(t | alpha)`` tends to a positive constant as
    ``alpha_i -> 0`` (unlike T01 eq. 15, which vanishes like ``alpha_i^(1/2)``), and with a
    small shape the posterior of ``log alpha_i`` decays only like ``alpha_i^a`` towards huge
    weights, which NUTS and ADVI cannot sample.
    """
    alpha_unit, var_t = data_scales(problem)
    if _gaussian_noise(problem):
        return GammaPrior(a=SHAPE, b=1.0 / (ALPHA_CEILING * alpha_unit), c=SHAPE,
                          d=var_t / BETA_CEILING)
    return unit_scale_prior(alpha_unit)


def unit_scale_prior(mean_square: float) -> GammaPrior:
    """``alpha ~ Gamma(2, 2 / mean(Phi^2))`` (``c = d = 0``): each weight marginally
    Student-t with 4 degrees of freedom at the scale of a weight that alone moves a latent
    function of unit scale by about 1 (classification's default, see
    :func:`default_sampling_prior`; :class:`~sparsebayes.models.RVMLatent`'s)."""
    return GammaPrior(a=CLASS_SHAPE, b=CLASS_SHAPE / max(mean_square, 1e-300), c=0.0, d=0.0)


WEAK_SHAPE = 2.0  # a (and c): weights Student-t with 4 dof, noise variance inverse-Gamma(2)
LOGIT_SD = 2.5  # classification: prior rms of the logit function (Gelman et al. 2008's scale)


def weakly_informative_prior(problem) -> GammaPrior:
    """A proper Gamma hyperprior whose prior predictive is at the scale of the data.

    ``a = 2``, so ``E[1/alpha_i] = b`` and the prior mean square of ``f(x_n) = phi_n^T w``,
    averaged over the training inputs, is ``b S`` with ``S = mean_n ||phi_n||^2`` (T01 eq. 5
    integrated over ``alpha``). Regression: ``b = var(t) / (2 S)`` and ``c = 2``,
    ``d = var(t) / 2``, so the function and the noise each have prior mean square
    ``var(t) / 2``. Classification: ``b = LOGIT_SD^2 / S``, a logit function of rms 2.5
    (Gelman et al. 2008's scale, here for the whole function). Each weight is marginally
    Student-t with 4 degrees of freedom (T01 eq. 32): still heavy-tailed, so a few relevant
    weights can be large, but far less sparsity-promoting than the default.
    """
    alpha_unit, var_t = data_scales(problem)
    S = alpha_unit * var_t * problem.basis.n_columns
    a = WEAK_SHAPE
    if _gaussian_noise(problem):
        return GammaPrior(a=a, b=(a - 1) * var_t / (2 * S), c=a, d=(a - 1) * var_t / 2)
    if _real_targets(problem):  # the likelihood's own noise parameters have their prior
        return GammaPrior(a=a, b=(a - 1) * var_t / (2 * S), c=0.0, d=0.0)
    return GammaPrior(a=a, b=(a - 1) * LOGIT_SD**2 / S, c=0.0, d=0.0)


PRIOR_NAMES = {"default": default_sampling_prior, "weakly_informative": weakly_informative_prior}


def resolve_prior(problem, prior: GammaPrior | str | None) -> GammaPrior:
    """The :class:`GammaPrior` meant by ``prior``: itself; a name in ``PRIOR_NAMES`` built
    from ``problem``; ``None``: ``problem.prior``, else the default sampling prior."""
    if prior is None:
        prior = problem.prior if problem.prior is not None else "default"
    if isinstance(prior, str):
        if prior not in PRIOR_NAMES:
            raise ValueError(f"prior must be a GammaPrior, None or one of {sorted(PRIOR_NAMES)}, "
                             f"got {prior!r}")
        prior = PRIOR_NAMES[prior](problem)
    if not isinstance(prior, GammaPrior):
        raise TypeError(f"prior must be a GammaPrior, a prior name or None, got "
                        f"{type(prior).__name__}")
    return prior
