"""sparsebayes.inference: how posteriors are computed. ``fit`` and ``predict`` are the
entry points; PyMC is imported only by the methods that need it."""

from .api import FIT_METHODS, PREDICT_KINDS, fit, predict
from .compare import compare_posteriors
from .groups import add_posterior_predictive, add_predictions, add_prior_predictive
from .loo import loo, loo_compare
from .methods import METHODS, Method, method_of, register_method
from .predictive.regression import MixturePredictive, Predictive
from .rvm.pymc_route import pymc_trace

__all__ = ["FIT_METHODS", "METHODS", "Method", "PREDICT_KINDS", "MixturePredictive",
           "Predictive", "RVC", "RVR", "add_posterior_predictive", "add_predictions",
           "add_prior_predictive", "compare_posteriors", "fit", "loo", "loo_compare",
           "method_of", "predict", "pymc_trace", "register_method"]


def __getattr__(name):
    # the scikit-learn estimators are imported on first use (scikit-learn is slow to import)
    if name in ("RVR", "RVC"):
        from . import sklearn as _sklearn

        return getattr(_sklearn, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
