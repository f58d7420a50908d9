"""Problem records (and the other checked frozen records: the Gaussian kernel, the mixture
predictive) are built from checked arguments and never changed afterwards: assignment
raises, a pickle round trip (how the study sends problems to worker processes) gives an
equal record, and a named prior is the one the priors module builds for the finished
problem."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from sparsebayes.inference.predictive.regression import MixturePredictive
from sparsebayes.models import (
    GaussianKernel,
    GPClassification,
    GPRegression,
    RVMClassification,
    RVMRegression,
)
from sparsebayes.models.priors import default_sampling_prior, weakly_informative_prior

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 2))
T = np.sin(X[:, 0]) + 0.1 * RNG.normal(size=30)
Y = np.where(X[:, 0] > 0, "b", "a")

RECORDS = {
    "rvm_regression": lambda: RVMRegression(X, T, kernel="rbf", extra_columns=["linear"],
                                            noise_sd=0.5, centres=8),
    "rvm_classification": lambda: RVMClassification(X, Y, kernel=GaussianKernel([1.0, 2.0])),
    "gp_regression": lambda: GPRegression(X, T, length_scale=2.0),
    "gp_classification": lambda: GPClassification(X, Y, signal_sd=1.5),
    "gaussian_kernel": lambda: GaussianKernel(np.array([0.5, 2.0])),
    "mixture": lambda: MixturePredictive(np.ones((3, 4)), 2.0),
}


def _equal(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_equal(getattr(a, f.name), getattr(b, f.name))
                                           for f in dataclasses.fields(a))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_records_are_frozen_and_survive_pickling(name):
    record = RECORDS[name]()
    first = dataclasses.fields(record)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, first, None)
    back = pickle.loads(pickle.dumps(record))
    assert _equal(back, record)


def test_fields_hold_the_checked_values():
    """What the constructors normalise: kernel names to kernels, extra columns to a tuple,
    ``centres=M`` to M k-means centres, labels to sorted classes and codes, widths and
    scalars to floats and tuples, and the mixture's variances broadcast to its means."""
    reg = RECORDS["rvm_regression"]()
    assert isinstance(reg.kernel, GaussianKernel) and reg.kernel.width == 1.0
    assert reg.extra_columns == ("linear",) and reg.centres.shape == (8, 2)
    assert reg.noise_sd == 0.5 and type(reg.noise_sd) is float
    clf = RECORDS["rvm_classification"]()
    assert clf.classes.tolist() == ["a", "b"] and np.array_equal(clf.t, (Y == "b").astype(int))
    assert clf.kernel.width == (1.0, 2.0)
    assert RECORDS["gp_regression"]().length_scale == (2.0, 2.0)
    assert RECORDS["gaussian_kernel"]().width == (0.5, 2.0)
    assert RECORDS["mixture"]().vars.shape == (3, 4)


def test_bad_arguments_are_refused_before_a_record_exists():
    with pytest.raises(TypeError, match="kernel must be"):
        RVMRegression(X, T, kernel=None)
    with pytest.raises(ValueError, match="noise_sd"):
        RVMRegression(X, T, noise_sd=-1.0)
    with pytest.raises(ValueError, match="width"):
        GaussianKernel(0.0)
    with pytest.raises(ValueError, match="signal_sd"):
        GPClassification(X, Y, signal_sd=-2.0)
    with pytest.raises(ValueError, match="variances"):
        MixturePredictive(np.ones((2, 3)), -1.0)


@pytest.mark.parametrize("name, build", [
    ("weakly_informative", weakly_informative_prior),
    ("default", default_sampling_prior),
])
@pytest.mark.parametrize("problem", ["regression", "classification"])
def test_a_named_prior_is_the_prior_of_the_finished_problem(name, build, problem):
    """The name is resolved while the record is built; the result equals the priors
    module's function applied to the finished problem (built with ``prior=None``)."""
    if problem == "regression":
        named, plain = RVMRegression(X, T, prior=name), RVMRegression(X, T)
    else:
        named, plain = RVMClassification(X, Y, prior=name), RVMClassification(X, Y)
    assert named.prior == build(plain)
