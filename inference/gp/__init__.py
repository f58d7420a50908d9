"""Gaussian-process posteriors (Rasmussen & Williams 2006): regression (``regression``) and
binary and multi-class classification by the Laplace approximation (``classification``),
with type-II maximum-likelihood hyperparameters or PyMC's NUTS."""
