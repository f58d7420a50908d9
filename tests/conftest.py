"""Fixtures and checks shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]  # the repository
# The real benchmark files (never in the repository): $SPARSEBAYES_DATA, else ../shared/data
DATA = Path(os.environ.get("SPARSEBAYES_DATA") or ROOT.parent / "shared" / "data")

STUDY_DATA = "diabetes:n_train=60"
STUDY_METHODS = "rvm/evidence,svm"


@pytest.fixture
def pytensor_in_python():
    """PyTensor graphs compiled in the test run in Python (``FAST_COMPILE``: each Op's
    ``perform``) instead of numba, PyTensor 3's default linker. For tests that evaluate a
    density or draw forward a few times: the values are what they check, and a numba
    compile costs seconds on a new machine. Sampling and ADVI tests keep numba (nutpie
    compiles with it whatever the mode)."""
    import pytensor

    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield


def needs_data(*names: str):
    """Skips a test unless the files of the data sets ``names`` (``datasets.FILES``) are in
    :data:`DATA`; the reason names the missing files and where they go."""
    from sparsebayes.models.datasets import missing_files

    missing = [f for name in names for f in missing_files(name, DATA)[1]]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} in {DATA} "
                              "($SPARSEBAYES_DATA, else ../shared/data beside the repository)")


def friedman1_raw(seed, n=240):
    """Tipping (2001) App. E: ``n`` training points of Friedman #1 on the unit cube with N(0, 1)
    noise (the generator's default for #1), 1000 noise-free test points."""
    from sparsebayes.models import datasets

    X, t = datasets.friedman(n, 1, seed=seed)
    U, f = datasets.friedman(1000, 1, seed=1000 + seed, noise=0.0)
    return X, t, U, f


def friedman1(seed, n=240):
    """:func:`friedman1_raw` with the inputs standardised by the training set."""
    X, t, U, f = friedman1_raw(seed, n)
    m, s = X.mean(0), X.std(0)
    return (X - m) / s, t, (U - m) / s, f


def dense_rbf_log_evidence(post) -> float:
    """T01 eq. (15) of a Gaussian-kernel RVM regression result evaluated densely: SciPy's
    N x N density ``N(t | 0, beta^-1 I + Phi A^-1 Phi^T)`` at its widths, alpha and beta,
    the design rebuilt with scikit-learn's ``rbf_kernel`` on inputs scaled by 1 / width
    (gamma = 1), the bias column (centre index -1) constant."""
    from scipy import stats
    from sklearn.metrics.pairwise import rbf_kernel

    X, t = post["constant_data"]["X"].values, post["observed_data"]["t"].values
    g = post["gaussian_posterior"]
    alpha, beta = g["alpha"].values, float(g["beta"])
    idx = post["constant_data"]["centre_index"].values
    width = np.asarray(post.attrs["width"])
    K = rbf_kernel(X / width, X[np.maximum(idx, 0)] / width, gamma=1.0)
    Phi = np.where(idx >= 0, K, 1.0)
    C = np.eye(t.size) / beta + (Phi / alpha) @ Phi.T
    return float(stats.multivariate_normal(np.zeros(t.size), C).logpdf(t))


def _same_table(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Two study tables hold the same numbers (timings aside)."""
    from sparsebayes.inference.study import TIMING_COLUMNS

    timing = list(TIMING_COLUMNS)
    pd.testing.assert_frame_equal(a.drop(columns=timing, errors="ignore").reset_index(drop=True),
                                  b.drop(columns=timing, errors="ignore").reset_index(drop=True))


@pytest.fixture
def same_table():
    return _same_table


@pytest.fixture(scope="session")
def tiny_table() -> pd.DataFrame:
    """Two splits of a small regression study, computed in-process."""
    from sparsebayes.inference import study as st

    return st.run_study(STUDY_DATA, STUDY_METHODS, splits=2, progress=False)


def assert_reused_sampler_equals_fresh(first, second, names, **opts) -> None:
    """NUTS on ``second`` through the compiled sampler of ``first`` (same shapes, other data:
    what the study does for every split) gives the draws a fresh compile gives, bit for bit.
    A warm-up fit fills PyTensor's compile cache first: a cold compile and a cached one may
    differ in the last bits (measured on the GP classifier), which is not what this checks."""
    from sparsebayes.inference import fit
    from sparsebayes.inference.samplers import clear_compiled

    opts = {"seed": 3, "draws": 100, "tune": 100, "chains": 2, "warn": False, **opts}
    fit(first, "nuts", **opts)  # fills the compile caches
    clear_compiled()
    fresh = fit(second, "nuts", **opts)
    clear_compiled()
    fit(first, "nuts", **opts)
    reused = fit(second, "nuts", **opts)
    assert reused.attrs["compile_time"] == 0.0  # the first fit's sampler was reused
    for name in names:
        np.testing.assert_array_equal(reused["posterior"][name], fresh["posterior"][name])
