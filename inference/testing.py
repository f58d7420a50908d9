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
"""

from __future__ import annotations

from .gp.classification import _layout as gp_classification_layout
from .gp.classification import _lml_and_grad as gp_classification_lml_and_grad
from .gp.classification import _softmax_lml_and_grad as gp_softmax_lml_and_grad
from .gp.classification import _softmax_posterior_map as gp_softmax_posterior_map
from .gp.regression import _bounds as gp_regression_bounds
from .gp.regression import _lml_and_grad as gp_regression_lml_and_grad
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
           "gp_regression_bounds", "gp_classification_layout", "distinct_digits"]
