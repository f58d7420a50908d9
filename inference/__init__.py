"""sparsebayes.inference: how posteriors are computed. ``fit`` and ``predict`` are the
entry points; PyMC is imported only by the methods that need it."""

from .api import FIT_METHODS, PREDICT_KINDS, fit, predict
from .predictive import Predictive

__all__ = ["FIT_METHODS", "PREDICT_KINDS", "Predictive", "fit", "predict"]
