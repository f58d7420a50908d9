"""Predictive distributions at new inputs: Gaussian and mixture predictives of the targets
(``regression``) and class probabilities (``classification``)."""

from .classification import ClassPredictive
from .regression import MixturePredictive, Predictive

__all__ = ["ClassPredictive", "MixturePredictive", "Predictive"]
