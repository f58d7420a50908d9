"""The negative-binomial RVM for over-dispersed counts: ``t_n ~ NB(mean exp(f_n), r)``,
``Var[t | f] = exp(f) + exp(2 f) / r``, ``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)`` (Tipping
2001 §3's Laplace scheme with the negative-binomial likelihood and log link; the
parametrisation of PyMC's ``NegativeBinomial(mu, alpha=r)``). The dispersion ``r`` is
learned: by type-II ML with the weights' precisions, or sampled under the prior
``1 / sqrt(r) ~ HalfNormal(1)``, which shrinks towards the Poisson (``r -> inf``; the
penalised-complexity prior of Simpson et al. 2017 in Stan's recommended form).

This module is the whole likelihood; the inference side registers it in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import betainc, expit, gammaln

from .kernels import Kernel
from .likelihoods import CountLikelihood
from .priors import GammaPrior
from .problems import COUNTS_PARAMETERS, RVMCountsRecord, checked_counts_fields

__all__ = ["NegativeBinomial", "RVMNegativeBinomialRegression"]

DISPERSION_RANGE = (1e-2, 1e4)  # the dispersion's type-II ML bounds (1e4: all but Poisson)


class NegativeBinomial(CountLikelihood):
    """``ln p(t | f, r) = ln Gamma(t + r) - ln Gamma(r) - ln t! + r ln r + t f
    - (t + r) ln(r + e^f)`` (evaluated as ``... + t (f - ln(r + e^f)) - r ln(1 + e^f / r)``,
    without the cancellation of ``r ln r`` at large ``r``): with ``s = e^f / (r + e^f)``, the
    gradient is ``t - (t + r) s``,
    the negative Hessian ``B = (t + r) s (1 - s)`` (> 0: log-concave in ``f``) and
    ``dB/df = B (1 - 2 * s)``. Parameter ``dispersion`` ``r`` > 0."""

    name = "negative_binomial"
    label = "negative-binomial"
    param_names = ("dispersion",)
    log_bounds = {"dispersion": tuple(np.log(DISPERSION_RANGE))}

    def initial_params(self, t: np.ndarray) -> dict:
        """The method of moments on the counts alone, ``r = m^2 / (v - m)``, within the
        bounds (an upper bound: the counts' spread includes the rate's own variation)."""
        m, v = float(np.mean(t)), float(np.var(t))
        r = m * m / (v - m) if v > m else DISPERSION_RANGE[1]
        return {"dispersion": float(np.clip(r, *DISPERSION_RANGE))}

    @property
    def dispersion(self):
        return self.params["dispersion"]

    def logpdf(self, t, f) -> np.ndarray:
        r = self.dispersion
        t = np.asarray(t, dtype=float)
        log_r = np.log(r)
        return (gammaln(t + r) - gammaln(r) - gammaln(t + 1.0)
                + t * (f - np.logaddexp(log_r, f)) - r * np.logaddexp(0.0, f - log_r))

    def derivatives(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = self.dispersion
        s = expit(f - np.log(r))
        B = (self.t + r) * s * (1.0 - s)
        return self.t - (self.t + r) * s, B, B * (1.0 - 2.0 * s)

    def cdf(self, k, f) -> np.ndarray:
        """``P(t <= k) = I_p(r, k + 1)`` with ``p = r / (r + e^f)`` (regularised beta)."""
        r = self.dispersion
        return betainc(r, np.asarray(k, dtype=float) + 1.0, expit(np.log(r) - f))

    def extra_variance(self):
        return 1.0 / self.dispersion

    def draw(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Counts drawn as NumPy's ``negative_binomial(r, r / (r + e^f))`` (failures before
        ``r`` successes: mean ``e^f``)."""
        r = np.broadcast_to(self.dispersion, np.shape(f))
        return rng.negative_binomial(r, expit(np.log(r) - f)).astype(np.int64)

    @classmethod
    def prior_draws(cls, shape: tuple[int, ...], rng: np.random.Generator) -> dict:
        """``r = 1 / u^2``, ``u ~ HalfNormal(1)``: the prior of :meth:`observe`."""
        return {"dispersion": 1.0 / np.abs(rng.standard_normal(shape)) ** 2}

    def observe(self, f, t_obs, n) -> None:
        """``t ~ NB(exp(f), r)`` in the stable form of :meth:`logpdf`, with
        ``inv_sqrt_dispersion ~ HalfNormal(1)`` and ``dispersion = 1 / inv_sqrt_dispersion^2``
        (a deterministic of the posterior)."""
        import pymc as pm
        import pytensor.tensor as pt

        u = pm.HalfNormal("inv_sqrt_dispersion", sigma=1.0)
        r = pm.Deterministic("dispersion", 1.0 / pt.square(u))

        def logp(value, f, r):
            log_r = pt.log(r)
            return (pt.gammaln(value + r) - pt.gammaln(r) - pt.gammaln(value + 1.0)
                    + value * (f - pt.logaddexp(log_r, f))
                    - r * pt.logaddexp(0.0, f - log_r))

        pm.CustomDist("t", f, r, logp=logp, signature="(),()->()",
                      dist=lambda f, r, size: pm.NegativeBinomial.dist(mu=pt.exp(f), alpha=r,
                                                                       size=size),
                      observed=t_obs, dims="obs", shape=n)


class RVMNegativeBinomialRegression(RVMCountsRecord):
    __doc__ = """Sparse Bayesian negative-binomial regression for over-dispersed counts:
    ``t_n ~ NB(mean exp(f_n), dispersion r)``, ``Var[t_n] = mu_n + mu_n^2 / r``,
    ``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)``; the dispersion is learned (a posterior
    variable named ``dispersion``).
""" + COUNTS_PARAMETERS + """
    See Also
    --------
    RVMPoissonRegression
    """

    kind = "negative_binomial"
    likelihood_type = NegativeBinomial

    def __init__(self, X, counts, kernel: Kernel | str | Callable = "gaussian",
                 bias: bool = True, extra_columns: Sequence[str] = (),
                 prior: GammaPrior | str | None = None, learn_width: bool = False,
                 centres: int | np.ndarray | None = None) -> None:
        super().__init__(*checked_counts_fields(NegativeBinomial, X, counts, kernel, bias,
                                                extra_columns, prior, learn_width, centres))
