"""Every result of every family and method keeps the declared contract (groups, dims, typed
attrs: values, not JSON or prose), and survives netCDF with its attrs as they were."""

import numpy as np
import pytest
import xarray as xr

from sparsebayes.inference import fit, predict
from sparsebayes.inference.contract import ATTRS, ContractError, check_result
from sparsebayes.inference.families import REGISTERED
from sparsebayes.inference.results import basis_from_posterior
from sparsebayes.models import GaussianKernel

SAMPLED = {"nuts"}  # compiled samplers: marked slow
CASES = [pytest.param(f, m, marks=pytest.mark.slow) if m in SAMPLED else (f, m)
         for f in REGISTERED for m in f.fit_methods]


def _problem(family):
    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 5, (40, 1))
    f = np.sin(X[:, 0])
    t = {"regression": f + 0.1 * rng.standard_normal(40),
         "classification": (f + 0.3 * rng.standard_normal(40) > 0).astype(int),
         "counts": rng.poisson(np.exp(1 + f))}[family.task]
    if family.weights:
        return family.problem_type(X, t, kernel=GaussianKernel(2.0))
    return family.problem_type(X, t)


@pytest.mark.parametrize(("family", "method"), CASES,
                         ids=lambda v: getattr(v, "kind", v))
def test_every_result_keeps_the_contract(family, method, tmp_path):
    options = {"draws": 60, "tune": 60, "chains": 1, "warn": False} if method in SAMPLED else {}
    post = fit(_problem(family), method, seed=0, **options)  # fit checks it too
    check_result(post, kinds=(family.kind,))
    assert post.attrs["hyperparameters"] in ("point", "variational", "sampled")
    path = tmp_path / "post.nc"
    post.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf").load()
    assert set(back.attrs) == set(post.attrs)
    for name, value in post.attrs.items():
        np.testing.assert_array_equal(np.asarray(back.attrs[name]), np.asarray(value),
                                      err_msg=name)
    X = post["constant_data"]["X"].values
    np.testing.assert_allclose(_point(predict(back, X[:5])), _point(predict(post, X[:5])))
    if family.weights:  # the basis is rebuilt from the attrs alone
        basis, columns = basis_from_posterior(back)
        assert basis.design(X, columns=columns).shape == (X.shape[0], columns.size)


def _point(pred):
    return np.asarray(pred.proba if hasattr(pred, "proba") else pred.mean)


def _good():
    post = fit(_problem(REGISTERED[0]))
    return post.copy()


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: p.attrs.update(prior='{"a": 0.0}'), "'prior'"),
    (lambda p: p.attrs.update(note="alpha is constant across the draws of w"), "not declared"),
    (lambda p: p.attrs.update(hyperparameters="point estimates (type-II ML): one draw"),
     "'hyperparameters'"),
    (lambda p: p.attrs.update(kernel="gaussian kernel with the width learned by the evidence"),
     "'kernel'"),
    (lambda p: p.attrs.pop("method"), "'method' missing"),
    (lambda p: p.attrs.update(n_relevant=3.5), "'n_relevant'"),
    (lambda p: p.__delitem__("observed_data"), "'observed_data' missing"),
    (lambda p: p["posterior"].__setitem__(
        "bad", xr.DataArray(np.zeros(3), dims=["other"])), "posterior.bad"),
])
def test_the_contract_refuses_what_breaks_it(change, message):
    post = _good()
    check_result(post)
    change(post)
    with pytest.raises(ContractError, match=message):
        check_result(post)


def test_every_attr_is_documented():
    assert all(spec.doc for spec in ATTRS.values())
