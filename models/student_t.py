"""The Student-t RVM for robust regression: ``t_n ~ Student-t(nu, f_n, sigma)``,
``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)`` (Tipping 2001 §3's Laplace scheme with a
Student-t likelihood, as for Gaussian processes in Vanhatalo, Jylänki & Vehtari 2009,
"Gaussian process regression with Student-t likelihood"). The scale ``sigma`` and the degrees
of freedom ``nu`` are learned: by type-II ML with the weights' precisions, or sampled under
``sigma ~ HalfNormal(sd(t))`` and ``nu ~ Gamma(2, 0.1)`` (Juárez & Steel 2010). A gross
outlier lies where the density is not log-concave in ``f`` (``B < 0``), so its pull on the
fit falls as it moves away, where a Gaussian's grows.

This module is the whole likelihood; the inference side registers it in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import betaln, stdtr

from .kernels import Kernel
from .likelihoods import RealLikelihood
from .priors import GammaPrior
from .problems import RVMRealRecord, checked_real_fields

__all__ = ["StudentT", "RVMStudentTRegression"]

DOF_RANGE = (1.0, 1e3)  # nu's type-II ML bounds (1: Cauchy; 1e3: all but Gaussian)
SCALE_RANGE = (1e-4, 10.0)  # sigma's type-II ML bounds, in units of sd(t)
NU_PRIOR = (2.0, 0.1)  # nu ~ Gamma(shape 2, rate 0.1) (Juárez & Steel 2010)


class StudentT(RealLikelihood):
    """``ln p(t | f) = ln Gamma((nu+1)/2) - ln Gamma(nu/2) - 1/2 ln(nu pi sigma^2)
    - (nu+1)/2 ln(1 + r^2 / (nu sigma^2))``, ``r = t - f``: with ``a = nu sigma^2`` the
    gradient is ``(nu+1) r / (a + r^2)``, the negative Hessian ``B = (nu+1) (a - r^2) /
    (a + r^2)^2`` (negative for ``|r| > sqrt(a)``: not log-concave) and ``dB/df = 2 (nu+1)
    r (3a - r^2) / (a + r^2)^3``. The surrogate's precisions are ``max(B, I)`` with the
    Fisher information ``I = (nu+1) / ((nu+3) sigma^2)``. Parameters ``sigma``, ``nu``."""

    name = "student_t"
    label = "Student-t"
    floor_reason = ("the fitted scale sigma is so small that the function follows the "
                    "targets closely and only the bound keeps the weights finite")
    param_names = ("sigma", "nu")
    log_concave = False

    @property
    def log_bounds(self) -> dict:
        """``sigma`` within ``SCALE_RANGE`` times sd(t), ``nu`` within ``DOF_RANGE``."""
        return {"sigma": tuple(np.log(np.multiply(SCALE_RANGE, self.target_sd))),
                "nu": tuple(np.log(DOF_RANGE))}

    def initial_params(self, t: np.ndarray) -> dict:
        """``sigma = sd(t) / 10``, ``nu = 4``: a fit explaining most of the spread, with
        heavy tails."""
        return {"sigma": 0.1 * self.target_sd, "nu": 4.0}

    def gradient_scale(self) -> float:
        """``1 / sigma``: the size of a point's gradient ``(nu+1) r / (nu sigma^2 + r^2)``."""
        return 1.0 / float(np.min(self.params["sigma"]))

    def initial_logits(self) -> np.ndarray:
        """The targets' median at every point: a start no outlier moves."""
        return np.full((self.t.size, 1), float(np.median(self.t)))

    def logpdf(self, t, f) -> np.ndarray:
        sigma, nu = self.params["sigma"], self.params["nu"]
        z2 = (np.asarray(t, dtype=float) - f) ** 2 / (nu * sigma**2)
        # ln Gamma((nu+1)/2) - ln Gamma(nu/2) - 1/2 ln(nu pi), without the cancellation of
        # the two ln Gamma at large nu: 1/2 ln pi - ln B(1/2, nu/2) - 1/2 ln(nu pi)
        return (-betaln(0.5, 0.5 * nu) - 0.5 * np.log(nu) - np.log(sigma)
                - 0.5 * (nu + 1) * np.log1p(z2))

    def derivatives(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sigma, nu = self.params["sigma"], self.params["nu"]
        a = nu * sigma**2
        r = self.t - f
        d = a + r * r
        return ((nu + 1) * r / d, (nu + 1) * (a - r * r) / d**2,
                2 * (nu + 1) * r * (3 * a - r * r) / d**3)

    def surrogate_precision(self, f: np.ndarray) -> np.ndarray:
        sigma, nu = self.params["sigma"], self.params["nu"]
        return np.maximum(self.derivatives(f)[1], (nu + 1) / ((nu + 3) * sigma**2))

    def cdf(self, y, f) -> np.ndarray:
        """``P(t <= y) = T_nu((y - f) / sigma)``."""
        return stdtr(self.params["nu"], (np.asarray(y, dtype=float) - f) / self.params["sigma"])

    def noise_variance(self):
        """``Var[t | f] = sigma^2 nu / (nu - 2)`` (infinite for ``nu <= 2``)."""
        sigma, nu = np.asarray(self.params["sigma"]), np.asarray(self.params["nu"])
        with np.errstate(divide="ignore"):
            return np.where(nu > 2, sigma**2 * nu / np.maximum(nu - 2, 1e-300), np.inf)

    def draw(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``t = f + sigma e``, ``e ~ t_nu``."""
        nu = np.broadcast_to(self.params["nu"], np.shape(f))
        return f + self.params["sigma"] * rng.standard_t(nu)

    def prior_draws(self, shape: tuple[int, ...], rng: np.random.Generator) -> dict:
        """``sigma ~ HalfNormal(sd(t))``, ``nu ~ Gamma(2, 0.1)``: the prior of
        :meth:`observe`."""
        return {"sigma": self.target_sd * np.abs(rng.standard_normal(shape)),
                "nu": rng.gamma(NU_PRIOR[0], 1.0 / NU_PRIOR[1], shape)}

    def observe(self, f, t_obs, n) -> None:
        """``t ~ StudentT(nu, f, sigma)`` with ``sigma ~ HalfNormal(sd(t))`` and
        ``nu ~ Gamma(2, 0.1)``."""
        import pymc as pm

        sigma = pm.HalfNormal("sigma", sigma=self.target_sd)
        nu = pm.Gamma("nu", alpha=NU_PRIOR[0], beta=NU_PRIOR[1])
        pm.StudentT("t", nu=nu, mu=f, sigma=sigma, observed=t_obs, dims="obs", shape=n)


class RVMStudentTRegression(RVMRealRecord):
    """Robust sparse Bayesian regression: ``t_n ~ Student-t(nu, f_n, sigma)``,
    ``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)``; the scale ``sigma`` and the degrees of freedom
    ``nu`` are learned (posterior variables of those names). Gross outliers do not pull the
    fit, as they pull :class:`RVMRegression`'s.

    Parameters
    ----------
    X : array of shape (n, d)
        Inputs (NumPy arrays only).
    t : array of shape (n,)
        Real targets, not constant.
    kernel : Kernel, str or callable, default "gaussian"
        A :class:`Kernel`, a kernel name, or a callable ``k(X, C)``.
    bias : bool, default True
        Add a bias column (label ``"bias"``).
    extra_columns : sequence of str, default ()
        ``("linear",)``, ``("quadratic",)`` or both: extra non-kernel columns.
    prior : GammaPrior, str or None, default None
        Hyperprior on ``alpha`` (as for :class:`RVMPoissonRegression`).
    learn_width : bool, default False
        Maximise the evidence over the Gaussian width(s) too (§4.3, App. C).
    centres : int or array of shape (M, d), optional
        The basis dictionary: ``None`` (a kernel at every training input), an int ``M``
        (k-means centres) or an (M, d) array.

    See Also
    --------
    RVMRegression
    """

    kind = "student_t"
    likelihood_type = StudentT

    def __init__(self, X, t, kernel: Kernel | str | Callable = "gaussian", bias: bool = True,
                 extra_columns: Sequence[str] = (), prior: GammaPrior | str | None = None,
                 learn_width: bool = False, centres: int | np.ndarray | None = None) -> None:
        super().__init__(*checked_real_fields(X, t, kernel, bias, extra_columns, prior,
                                              learn_width, centres))
