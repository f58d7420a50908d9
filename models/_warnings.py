"""Warning classes of sparsebayes (tests turn these into errors)."""


class SparseBayesWarning(UserWarning):
    """Base class of every warning sparsebayes emits."""


class ConvergenceWarning(SparseBayesWarning):
    """An optimiser or sampler stopped before its convergence rule was met."""


class NumericalWarning(SparseBayesWarning):
    """Numerical trouble (ill-conditioning, jitter, pruned duplicates) was handled."""


class SamplingWarning(SparseBayesWarning):
    """MCMC or VI diagnostics (divergences, R-hat, ESS) look bad."""
