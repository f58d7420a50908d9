"""Study specifications (inference/study/specs.py): names, labels, and errors listing
the valid names."""

from __future__ import annotations

import pytest
from conftest import STUDY_DATA as DATA

from sparsebayes.inference import study as st
from sparsebayes.models.datasets import DATASETS


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown data set 'nope'.*diabetes"):
        st.parse_data("diabetes,nope")
    with pytest.raises(ValueError, match=r"unknown method family 'lasso'.*'rvm'"):
        st.parse_methods("lasso/evidence")
    with pytest.raises(ValueError, match=r"'rvm/frobnicate' cannot run.*rvm/evidence"):
        st.run_study(DATA, "rvm/evidence,rvm/frobnicate", 1, progress=False)
    with pytest.raises(ValueError, match="bad option"):
        st.parse_methods("rvm/evidence:draws")
    with pytest.raises(ValueError, match=r"unknown option 'n' for data set"):
        st.parse_data("diabetes:n=3")
    with pytest.raises(ValueError, match="given twice"):
        st.parse_methods("svm,svm")
    with pytest.raises(ValueError, match="needs a fit method"):
        st.parse_methods("rvm")


def test_spec_labels_round_trip():
    m = st.MethodSpec.parse("rvm/nuts:draws=300:chains=2:learn_width=true")
    assert m.label == "rvm/nuts:chains=2:draws=300:learn_width=True"
    assert st.MethodSpec.parse(m.label) == m
    d = st.DataSpec.parse("diabetes:test_fraction=0.25")
    assert st.DataSpec.parse(d.label) == d and d.width == DATASETS["diabetes"].width

