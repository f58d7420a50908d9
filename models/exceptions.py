"""Warning classes of sparsebayes (tests turn these into errors)."""

import os
import warnings


class SparseBayesWarning(UserWarning):
    """Base class of every warning sparsebayes emits."""


class ConvergenceWarning(SparseBayesWarning):
    """An optimiser or sampler stopped before its convergence rule was met."""


class NumericalWarning(SparseBayesWarning):
    """Numerical trouble (ill-conditioning, jitter, pruned duplicates) was handled."""


class SamplingWarning(SparseBayesWarning):
    """MCMC or VI diagnostics (divergences, R-hat, ESS) look bad."""


_HERE = os.path.dirname(os.path.abspath(__file__))
# the package's own directories (sparsebayes.models and its sibling sparsebayes.inference)
OWN_DIRS = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), "inference") + os.sep)


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first caller outside sparsebayes (the user's
    line, however deep the library's own call chain: ``fit``, ``RVC.fit`` ...)."""
    warnings.warn(message, category, skip_file_prefixes=OWN_DIRS)
