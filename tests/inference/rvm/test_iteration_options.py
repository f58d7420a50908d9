"""Every type-II ML and variational loop refuses a bad ``max_iter``, ``tol`` or
``alpha_min`` with the same message naming the option, called directly (the route ``fit``
checks first) and in its leave-out refits."""

import numpy as np
import pytest

from sparsebayes.inference import fit
from sparsebayes.inference.numerics import check_iterations
from sparsebayes.inference.rvm import counts, evidence, laplace, vrvm, vrvm_classification
from sparsebayes.models import (
    GaussianKernel,
    RVMClassification,
    RVMPoissonRegression,
    RVMRegression,
    datasets,
)

BAD = [({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
       ({"max_iter": True}, "max_iter must be a positive integer, got True"),
       ({"max_iter": 2.5}, "max_iter must be a positive integer, got 2.5"),
       ({"tol": 0.0}, r"tol must be > 0.*, got 0.0"),
       ({"tol": "1e-3"}, r"tol must be > 0.*, got '1e-3'")]


@pytest.fixture(scope="module")
def problems():
    x, t = datasets.sinc(30, seed=0)
    X, y = datasets.ripley_mixture(30, seed=0)
    xp, c = datasets.poisson_sine(30, seed=0)
    k = GaussianKernel(1.0)
    return {"regression": RVMRegression(x, t, kernel=k), "classification":
            RVMClassification(X, y, kernel=GaussianKernel(0.5)),
            "counts": RVMPoissonRegression(xp, c, kernel=k)}


LOOPS = [("regression", evidence.fit_fast), ("regression", evidence.fit_mackay),
         ("regression", vrvm.fit_vrvm), ("classification", laplace.fit_fast),
         ("classification", laplace.fit_mackay),
         ("classification", vrvm_classification.fit_vrvm_classification),
         ("counts", counts.fit_evidence), ("counts", counts.fit_mackay)]


@pytest.mark.parametrize("kind, loop", LOOPS, ids=lambda v: getattr(v, "__qualname__", v))
@pytest.mark.parametrize("options, message", BAD)
def test_each_loop_refuses_bad_iteration_options(problems, kind, loop, options, message):
    with pytest.raises(ValueError, match=message):
        loop(problems[kind], **options)


@pytest.mark.parametrize("kind, loop", [l for l in LOOPS if l[0] != "regression"],
                         ids=lambda v: getattr(v, "__qualname__", v))
def test_alpha_min_outside_0_1_is_refused(problems, kind, loop):
    for bad in (1.0, -0.1, np.nan):
        with pytest.raises(ValueError, match=r"alpha_min must be a number in \[0, 1\)"):
            loop(problems[kind], alpha_min=bad)


REFITS = [("regression", "evidence", evidence.EvidenceRefits, 10000),
          ("regression", "evidence-mackay", evidence.EvidenceRefits, 5000),
          ("regression", "vrvm", vrvm.VRVMRefits, 5000),
          ("classification", "evidence", laplace.LaplaceRefits, 10000),
          ("classification", "evidence-mackay", laplace.LaplaceRefits, 5000),
          ("classification", "vrvm", vrvm_classification.VRVMClassificationRefits, 10000),
          ("counts", "evidence", counts.RVM_POISSON.warm_refits["evidence"], 10000),
          ("counts", "evidence-mackay", counts.RVM_POISSON.warm_refits["evidence-mackay"],
           5000)]


@pytest.mark.parametrize("kind, method, refits, default_max_iter", REFITS,
                         ids=lambda v: getattr(v, "__qualname__", v))
def test_refits_refuse_the_same_options_and_repeat_the_fits(problems, kind, method, refits,
                                                             default_max_iter):
    """The documented defaults (``fit_fast`` 10000, ``fit_mackay`` 5000, ...) unless the fit
    was given ``max_iter``, which its refits repeat unless they are given their own."""
    post = fit(problems[kind], method, seed=0, draws=5, chains=1)
    for options, message in BAD[:1] + BAD[3:4]:
        with pytest.raises(ValueError, match=message):
            refits(post, **options)
    assert refits(post).max_iter == default_max_iter
    post = fit(problems[kind], method, seed=0, draws=5, chains=1, max_iter=4321)
    assert refits(post).max_iter == 4321
    assert refits(post, max_iter=17).max_iter == 17


def test_vrvm_classification_refits_stop_where_the_fit_was_told_to(problems):
    """A fit stopped at ``max_iter=2`` is refitted with the same cap, so the refit does not
    converge either (it ran to its own default of 10000 before)."""
    with pytest.warns(Warning, match="did not converge"):
        post = fit(problems["classification"], "vrvm", seed=0, draws=5, chains=1, max_iter=2)
    logpdf, converged = vrvm_classification.VRVMClassificationRefits(post).fold(np.array([0]))
    assert not converged and np.isfinite(logpdf).all()


def test_tol_none_only_where_the_loop_takes_it():
    check_iterations(10, None, tol_optional=True)
    with pytest.raises(ValueError, match="tol must be > 0, got None"):
        check_iterations(10, None)
