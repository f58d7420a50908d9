"""Internals the tests check against independent references, in one documented place: the
tests import them from here, never as private names of their modules.

* :func:`laplace_mode`, :func:`laplace_surrogate`, :func:`squarem_step`: the RVM
  classifier's Laplace mode by Newton's method (T01 eq. 25), the linearised Gaussian problem
  at a mode (TF03 eq. 14) and the SQUAREM extrapolation of MacKay's re-estimation.
* :func:`tied_columns`, :func:`tied_objective`: the evidence over tied ARD widths.
* :func:`joint_objective`: minus the evidence (T01 eq. 15) over log Gaussian widths, log
  precisions of the bases and log noise precision.
* :class:`JaakkolaJordan`, :class:`Bohning`, :class:`Bouchard`, :func:`check_bound`: the
  VRVM classifier's bounds on the Bernoulli and softmax likelihoods.
* :func:`gp_regression_lml_and_grad`, :func:`gp_classification_lml_and_grad`,
  :func:`gp_softmax_lml_and_grad`: the GPs' log marginal likelihoods and gradients
  (GPML eqs. 5.8-5.9, 5.20-5.23, 3.44); :func:`gp_regression_bounds`,
  :func:`gp_classification_layout`: the search bounds of their type-II ML (and the
  classifier's fixed entries and data scales, its first start);
  :func:`gp_softmax_posterior_map`: the linear map of the softmax Laplace draws.
* :func:`distinct_digits`: the study report's numbers, printed with the digits that keep
  distinct values distinct.
* :class:`LatentNormal`, :class:`FixedLatentNormal` and their problems
  :class:`RVMLatentNormalRegression`, :class:`RVMFixedLatentNormalRegression`: Gaussian
  noise written as a latent likelihood (noise sd learned, or fixed at
  ``FixedLatentNormal.noise_sd``), which the latent RVM's Laplace driver fits where
  ``RVMRegression`` takes its conjugate route; :func:`latent_normal_families` gives their
  families for ``register_family``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from sparsebayes.models.likelihoods import RealLikelihood
from sparsebayes.models.problems import RVMRealRecord, checked_real_fields

from .gp.classification import _layout as gp_classification_layout
from .gp.classification import _lml_and_grad as gp_classification_lml_and_grad
from .gp.classification import _softmax_lml_and_grad as gp_softmax_lml_and_grad
from .gp.classification import _softmax_posterior_map as gp_softmax_posterior_map
from .gp.regression import _bounds as gp_regression_bounds
from .gp.regression import _lml_and_grad as gp_regression_lml_and_grad
from .rvm.counts import RealPredictive, latent_family
from .rvm.evidence import _joint_objective as joint_objective
from .rvm.evidence import _tied_columns as tied_columns
from .rvm.evidence import _tied_objective as tied_objective
from .rvm.laplace import _mode as laplace_mode
from .rvm.laplace import _squarem_step as squarem_step
from .rvm.laplace import _surrogate as laplace_surrogate
from .rvm.vrvm_classification import _Bohning as Bohning
from .rvm.vrvm_classification import _Bouchard as Bouchard
from .rvm.vrvm_classification import _check_bound as check_bound
from .rvm.vrvm_classification import _JaakkolaJordan as JaakkolaJordan
from .study.report import _distinct as distinct_digits

__all__ = ["laplace_mode", "laplace_surrogate", "squarem_step", "tied_columns",
           "tied_objective", "joint_objective", "Bouchard", "Bohning",
           "JaakkolaJordan", "check_bound", "gp_regression_lml_and_grad",
           "gp_classification_lml_and_grad", "gp_softmax_lml_and_grad",
           "gp_softmax_posterior_map",
           "gp_regression_bounds", "gp_classification_layout", "distinct_digits",
           "LatentNormal", "FixedLatentNormal", "RVMLatentNormalRegression",
           "RVMFixedLatentNormalRegression", "latent_normal_families"]


class LatentNormal(RealLikelihood):
    """``t_n ~ N(f_n, sigma^2)`` as a latent likelihood (T01 eq. 4 with ``f = Phi w``):
    ``ln p = -1/2 ln(2 pi sigma^2) - (t - f)^2 / (2 sigma^2)``, gradient ``(t - f) /
    sigma^2``, ``B = 1 / sigma^2`` (so the Laplace approximation is exact), ``dB/df = 0``;
    ``sigma`` learned within ``(1e-3, 10) sd(t)``."""

    name, label = "latent_normal", "Gaussian"
    param_names = ("sigma",)

    @property
    def log_bounds(self) -> dict:
        return {"sigma": tuple(np.log(np.multiply((1e-3, 10.0), self.target_sd)))}

    def initial_params(self, t: np.ndarray) -> dict:
        return {"sigma": 0.1 * self.target_sd}

    def sigma(self):
        return self.params["sigma"]

    def gradient_scale(self) -> float:
        return 1.0 / float(np.min(self.sigma()))

    def initial_logits(self) -> np.ndarray:
        return np.full((self.t.size, 1), float(np.mean(self.t)))

    def logpdf(self, t, f) -> np.ndarray:
        s = self.sigma()
        return -0.5 * np.log(2 * np.pi * s**2) - 0.5 * ((np.asarray(t, float) - f) / s) ** 2

    def derivatives(self, f):
        s2 = np.asarray(self.sigma()) ** 2
        return (self.t - f) / s2, np.broadcast_to(1.0 / s2, np.shape(f)).copy(), \
            np.zeros(np.shape(f))

    def cdf(self, y, f) -> np.ndarray:
        return ndtr((np.asarray(y, dtype=float) - f) / self.sigma())

    def noise_variance(self):
        return np.asarray(self.sigma()) ** 2

    def draw(self, f, rng: np.random.Generator) -> np.ndarray:
        return f + self.sigma() * rng.standard_normal(np.shape(f))

    def prior_draws(self, shape, rng: np.random.Generator) -> dict:
        return {"sigma": self.target_sd * np.abs(rng.standard_normal(shape))}

    def observe(self, f, t_obs, n) -> None:
        import pymc as pm

        sigma = pm.HalfNormal("sigma", sigma=self.target_sd)
        pm.Normal("t", mu=f, sigma=sigma, observed=t_obs, dims="obs", shape=n)


class FixedLatentNormal(LatentNormal):
    """:class:`LatentNormal` with the noise sd fixed at :attr:`noise_sd` (no parameter)."""

    name = "fixed_latent_normal"
    param_names = ()
    noise_sd = 0.1

    def sigma(self):
        return self.noise_sd

    def prior_draws(self, shape, rng: np.random.Generator) -> dict:
        return {}

    def observe(self, f, t_obs, n) -> None:
        import pymc as pm

        pm.Normal("t", mu=f, sigma=self.noise_sd, observed=t_obs, dims="obs", shape=n)


class RVMLatentNormalRegression(RVMRealRecord):
    """RVM regression with :class:`LatentNormal` noise (arguments as
    :class:`~sparsebayes.models.RVMStudentTRegression`'s)."""

    kind = "latent_normal"
    likelihood_type = LatentNormal

    def __init__(self, X, t, **options) -> None:
        super().__init__(*checked_real_fields(X, t, **options))


class RVMFixedLatentNormalRegression(RVMLatentNormalRegression):
    """RVM regression with :class:`FixedLatentNormal` noise."""

    kind = "fixed_latent_normal"
    likelihood_type = FixedLatentNormal


def latent_normal_families():
    """The families of :class:`RVMLatentNormalRegression` and
    :class:`RVMFixedLatentNormalRegression` (the latent RVM's, real targets)."""
    return [latent_family(p, p.kind.replace("_", "-"), task="regression",
                          predictive=RealPredictive)
            for p in (RVMLatentNormalRegression, RVMFixedLatentNormalRegression)]
