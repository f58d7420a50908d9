"""Fixtures shared by the study tests (tests/test_study_*.py)."""

from __future__ import annotations

import pandas as pd
import pytest

STUDY_DATA = "diabetes:n_train=60"
STUDY_METHODS = "rvm/evidence,svm"


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
