"""sparsebayes.models: what is believed. Kernels, priors, problem descriptions, PyMC model
builders and data sets. NumPy only at import time; PyMC is imported lazily."""

from .basis import Basis
from .exceptions import ConvergenceWarning, NumericalWarning, SamplingWarning, SparseBayesWarning
from .gp import GPClassification, GPRegression
from .kernels import (
    CallableKernel,
    GaussianKernel,
    Kernel,
    LinearKernel,
    LinearSplineKernel,
    LogBasis,
    PolynomialKernel,
    as_kernel,
    register_kernel,
)
from .latent import RVMLatent
from .negative_binomial import RVMNegativeBinomialRegression
from .priors import GammaPrior
from .problems import RVMClassification, RVMPoissonRegression, RVMRegression
from .student_t import RVMStudentTRegression

__all__ = [
    "Basis",
    "CallableKernel",
    "ConvergenceWarning",
    "GPClassification",
    "GPRegression",
    "GammaPrior",
    "GaussianKernel",
    "Kernel",
    "LinearKernel",
    "LinearSplineKernel",
    "LogBasis",
    "NumericalWarning",
    "PolynomialKernel",
    "RVMClassification",
    "RVMLatent",
    "RVMNegativeBinomialRegression",
    "RVMPoissonRegression",
    "RVMRegression",
    "RVMStudentTRegression",
    "SamplingWarning",
    "SparseBayesWarning",
    "as_kernel",
    "datasets",
    "register_kernel",
]


def __getattr__(name):
    if name == "datasets":
        import importlib

        return importlib.import_module(".datasets", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
