"""Nothing long is silent (issue 46): a GP's type-II ML, a likelihood's learned
parameters, leave-one-out refits and NUTS of a non-Gaussian family say up front what they
expect to take, in a subprocess whose output goes to a pipe (no terminal, CI set: no bar,
only the log). The thresholds are set to zero in the subprocess so that small problems count
as long."""

import os
import re
import subprocess
import sys
import textwrap

import pytest


def run(body: str) -> str:
    script = textwrap.dedent("""
        import importlib
        import numpy as np
        from sparsebayes.inference import fit, loo, progress
        progress.LONG_SECONDS = 0.0
        loo_module = importlib.import_module("sparsebayes.inference.loo")
        loo_module.LONG_REFITS = 0.0
    """) + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "CI": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr


def test_gp_classification_estimates_its_type2_ml_up_front():
    err = run("""
        from sparsebayes.models import GPClassification
        rng = np.random.default_rng(0)
        X = rng.normal(size=(60, 2))
        y = np.argmax(X @ rng.normal(size=(2, 3)), axis=1)
        fit(GPClassification(X, y), "evidence", seed=0, restarts=1)
    """)
    # 40 evaluations and one per free hyperparameter (2 length scales, the signal sd)
    assert re.search(r"type-II ML of GPClassification, N=60, 3 classes: the first evaluation "
                     r"took \d+\.\d s; typically 43 evaluations: expect roughly \d+ s", err), err


def test_gp_regression_estimates_its_type2_ml_up_front_exact_and_with_learned_inducing():
    err = run("""
        from sparsebayes.models import GPRegression
        rng = np.random.default_rng(0)
        X = rng.normal(size=(80, 2))
        t = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
        fit(GPRegression(X, t), "evidence", seed=0, restarts=2)
        fit(GPRegression(X, t, inducing=10, learn_inducing=True), "evidence", seed=0,
            restarts=1)
    """)
    # 40 evaluations and one per free hyperparameter (2 length scales, signal and noise sd),
    # per start; with learned inducing inputs the stalled run's typical count
    assert re.search(r"type-II ML of GPRegression, N=80: the first evaluation took "
                     r"\d+\.\d s; typically 88 evaluations: expect roughly \d+ s", err), err
    assert re.search(r"type-II ML of GPRegression, N=80: the first evaluation took "
                     r"\d+\.\d s; typically 70 evaluations", err), err


def test_loo_refits_estimate_their_time_after_the_first():
    err = run("""
        from sparsebayes.models import GaussianKernel, RVMRegression, datasets
        X, t = datasets.sinc(40, noise="gaussian", noise_scale=0.1, seed=0)
        loo(fit(RVMRegression(X, t, kernel=GaussianKernel(3.0)), "evidence"))
    """)
    assert re.search(r"cold LOO refits on a subsample of a 'evidence' result: up to 30 fits, "
                     r"about \d+ s \(the first took \d+\.\d s\)", err), err
    assert re.search(r"cold LOO refits on a subsample of a 'evidence' result: 30 fits in "
                     r"\d+\.\d s", err), err


@pytest.mark.slow
def test_nuts_of_counts_estimates_its_time_up_front():
    err = run("""
        from sparsebayes.models import GaussianKernel, RVMPoissonRegression, datasets
        X, y = datasets.poisson_sine(40, seed=0)
        fit(RVMPoissonRegression(X, y, kernel=GaussianKernel(1.0)), "nuts", draws=20,
            tune=20, chains=1, seed=0, warn=False)
    """)
    assert re.search(r"NUTS on N=40, M=41 \(\d+ parameters, 1 x 40 iterations\): expect "
                     r"roughly \d+ s", err), err


def test_learned_likelihood_parameters_estimate_their_search_up_front():
    err = run("""
        from sparsebayes.models import GaussianKernel, RVMStudentTRegression, datasets
        X, t = datasets.sinc(60, noise_scale=0.1, seed=0)
        fit(RVMStudentTRegression(X, t, kernel=GaussianKernel(2.0)), "evidence", seed=0)
    """)
    assert re.search(r"the Student-t likelihood's sigma and nu by the profile evidence of "
                     r"RVMStudentTRegression, N=60, M=61: the first evaluation took \d+\.\d s; "
                     r"typically 60 evaluations: expect roughly \d+ s", err), err
