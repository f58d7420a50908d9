"""The result DataTree (inference/results.py): ``make_datatree`` builds each ArviZ group in
one ``Dataset`` constructor; the reference is ArviZ's own ``from_dict`` converter, which it
must match exactly (names, dims, coords, values, group attributes except the time stamp)."""

import arviz_base as azb
import numpy as np
import pytest
import xarray as xr
from conftest import ROOT

from sparsebayes.inference.results import library_versions, make_datatree
from sparsebayes.models import GaussianKernel, RVMClassification, RVMRegression


def _reference(problem, basis, columns, posterior, log_likelihood, sample_stats, gaussian,
               extra_dims, extra_coords):
    """The tree as ``arviz_base.from_dict`` builds it, sample statistics given as
    ``(dims, array)`` traces appended to the ArviZ group, the Gaussian group added last."""
    labels = np.asarray(basis.labels, dtype=str)[columns]
    n, d = problem.X.shape
    coords = {"basis": labels, "obs": np.arange(n), "feature": np.arange(d), **extra_coords}
    dims = {"w": ["basis"], "z": ["basis"], "alpha": ["basis"], "t": ["obs"],
            "X": ["obs", "feature"],
            "centres": ["basis", "feature"], "centre_index": ["basis"], **extra_dims}
    dims["z"] = dims["w"]  # z = w sqrt(alpha), the joint model's variable, on w's dims
    cidx = basis.centre_index()[columns]
    centres = np.full((columns.size, d), np.nan)
    centres[cidx >= 0] = basis.centres[cidx[cidx >= 0]]
    plain = {k: v for k, v in sample_stats.items() if not isinstance(v, tuple)}
    posterior = {**posterior, "z": posterior["w"] * np.sqrt(posterior["alpha"])}  # joint model
    groups = {"posterior": posterior, "log_likelihood": {"t": log_likelihood},
              "observed_data": {"t": problem.t},
              "constant_data": {"X": problem.X, "centres": centres, "centre_index": cidx}}
    if plain:
        groups["sample_stats"] = plain
    dt = azb.from_dict(groups, coords=coords, dims=dims)
    ss = dt["sample_stats"].to_dataset() if plain else xr.Dataset()
    for k, v in sample_stats.items():
        if isinstance(v, tuple):
            ss[k] = v
    dt["sample_stats"] = xr.DataTree(ss)
    gp = xr.Dataset(coords={"basis": labels, "basis_bis": labels})
    for k, v in gaussian.items():
        gp[k] = {1: ("basis",), 2: ("basis", "basis_bis")}[v.ndim], v
    dt["gaussian_posterior"] = xr.DataTree(gp)
    return dt


def _without_time_stamps(dt):
    dt = dt.copy()
    for node in dt.subtree:
        node.attrs.pop("created_at", None)
    return dt


@pytest.mark.parametrize("plain_stats", [True, False])
def test_make_datatree_equals_arviz_from_dict(plain_stats, tmp_path):
    """The result tree is ArviZ's tree and behaves as any DataTree: paths, parents, a group
    added later, copy and a netCDF round trip."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    problem = RVMClassification(X, np.arange(12) % 3, kernel=GaussianKernel(1.0))
    basis = problem.basis
    columns = np.array([0, 3, 7])  # the bias and two kernel columns
    chains, draws, K = 2, 4, 3
    posterior = {"w": rng.normal(size=(chains, draws, 3, K)),
                 "alpha": rng.gamma(1.0, size=(chains, draws, 3, K)),
                 "scale": rng.gamma(1.0, size=(chains, draws, 5))}  # a dim without coords
    loglik = rng.normal(size=(chains, draws, 12))
    stats = {"log_evidence": (("iteration",), rng.normal(size=7))}
    if plain_stats:
        stats["energy"] = rng.normal(size=(chains, draws))
    gaussian = {"mu": rng.normal(size=3), "Sigma": np.eye(3)}
    extra_dims = {"w": ["basis", "class"], "alpha": ["basis", "class"]}
    extra_coords = {"class": np.array(["a", "b", "c"])}
    got = make_datatree(problem, basis=basis, columns=columns, posterior=posterior,
                        log_likelihood=loglik, sample_stats=stats, gaussian=gaussian,
                        extra_dims=extra_dims, extra_coords=extra_coords)
    ref = _reference(problem, basis, columns, posterior, loglik, stats, gaussian, extra_dims,
                     extra_coords)
    assert list(got.children) == list(ref.children)
    for name in ref.children:
        assert list(got[name].attrs) == list(ref[name].attrs)
        assert list(got[name].to_dataset().variables) == list(ref[name].to_dataset().variables)
    ref.attrs.update(got.attrs)  # the root attributes are ours alone
    xr.testing.assert_identical(_without_time_stamps(got), _without_time_stamps(ref))
    assert got["posterior"]["scale"].dims == ("chain", "draw", "scale_dim_0")
    assert got["posterior"].path == "/posterior" and got["posterior"].parent is got
    got["predictions"] = xr.DataTree(xr.Dataset({"t": ("obs", np.zeros(12))}))
    assert list(got.children)[-1] == "predictions"
    xr.testing.assert_identical(got.copy(deep=True), got)
    got.to_netcdf(tmp_path / "tree.nc")
    back = xr.open_datatree(tmp_path / "tree.nc")
    xr.testing.assert_allclose(back["posterior"].to_dataset(), got["posterior"].to_dataset())


def test_make_datatree_regression_without_gaussian_group():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(9, 1))
    problem = RVMRegression(X, rng.normal(size=9), kernel=GaussianKernel(1.0))
    columns = np.arange(len(problem.basis.labels))  # bias + 9 kernel columns
    post = {"w": rng.normal(size=(1, 3, columns.size)), "beta": rng.gamma(1.0, size=(1, 3))}
    loglik = rng.normal(size=(1, 3, 9))
    got = make_datatree(problem, basis=problem.basis, columns=columns, posterior=post,
                        log_likelihood=loglik)
    ref = azb.from_dict(
        {"posterior": post, "log_likelihood": {"t": loglik}, "observed_data": {"t": problem.t},
         "constant_data": {"X": X, "centres": got["constant_data"]["centres"].values,
                           "centre_index": got["constant_data"]["centre_index"].values}},
        coords={"basis": np.asarray(problem.basis.labels, dtype=str)[columns],
                "obs": np.arange(9), "feature": np.arange(1)},
        dims={"w": ["basis"], "t": ["obs"], "X": ["obs", "feature"],
              "centres": ["basis", "feature"], "centre_index": ["basis"]})
    assert list(got.children) == list(ref.children)
    ref.attrs.update(got.attrs)
    xr.testing.assert_identical(_without_time_stamps(got), _without_time_stamps(ref))


def test_library_versions_is_read_once_and_names_numpy():
    first = library_versions()
    assert library_versions() is first  # cached: importlib.metadata is read once
    assert f"numpy=={np.__version__}" in first.split()


def test_the_package_uses_public_xarray_only():
    """No private xarray API anywhere in the package (pyproject pins no upper bound, so a
    release may change any of it): no import from ``xarray.core`` and no private attribute
    of an xarray object."""
    import ast

    root = ROOT
    private = {"_construct_direct", "_set_node_data", "_parent", "_children", "_copy_node",
               "_variables", "_coord_names"}
    found = []
    for path in [*root.glob("inference/**/*.py"), *root.glob("models/**/*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xarray."):
                if node.module.split(".")[1].startswith(("core", "_")):
                    found.append(f"{path.name}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                found += [f"{path.name}: import {a.name}" for a in node.names
                          if a.name.startswith("xarray.core")]
            elif isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not found, found


def test_relevance_counts_separate_the_bias_from_the_kernel_vectors():
    """Tipping (2001) counts relevance *vectors* (kernel functions), not the bias:
    ``n_kernel_vectors`` is the count of relevant columns whose basis label is a kernel
    centre, ``n_relevant`` includes the bias and raw-input terms, for every RVM method."""
    import warnings

    from sparsebayes.inference import fit

    x = np.linspace(-10, 10, 60)
    t = np.sinc(x / np.pi) + 0.05 * x + np.random.default_rng(0).normal(0, 0.1, 60)
    problem = RVMRegression(x[:, None], t, kernel=GaussianKernel(3.0),
                            extra_columns=("linear",))
    labels = np.asarray(problem.basis.labels)
    for method in ("evidence", "evidence-mackay", "vrvm"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = fit(problem, method, seed=0)
        kept = post["posterior"]["basis"].values
        if method == "vrvm":  # every weight kept; relevant: gamma_i > 0.01
            g = post["gaussian_posterior"]
            Sigma = g["Sigma"].values
            gamma = 1 - g["alpha"].values * np.diag(Sigma)
            kept = kept[gamma > 0.01]
        is_kernel = np.array([lab.isdigit() for lab in kept])
        assert set(kept) <= set(labels)
        assert post.attrs["n_relevant"] == kept.size
        assert post.attrs["n_kernel_vectors"] == is_kernel.sum()
        assert post.attrs["n_relevant"] - post.attrs["n_kernel_vectors"] == (~is_kernel).sum()


@pytest.mark.parametrize("kind", ["regression", "classification", "gp"])
def test_optimise_seconds_times_the_optimiser_alone(kind, monkeypatch):
    """Every evidence fit records ``optimise_seconds``, the type-II ML optimisation without
    the draws and the DataTree: with the result builder held 0.2 s (monkeypatched to sleep
    first), the recorded time stays at least 0.2 s below the whole ``fit`` timed around it
    by the wall clock, and is positive."""
    import time

    from sparsebayes.inference import fit
    from sparsebayes.inference.gp import regression as gp_regression
    from sparsebayes.inference.rvm import evidence, laplace
    from sparsebayes.models import GPRegression

    module, builder = {"regression": (evidence, "_to_datatree"),
                       "classification": (laplace, "laplace_datatree"),
                       "gp": (gp_regression, "_gp_datatree")}[kind]
    build = getattr(module, builder)

    def held(*args, **kwargs):
        time.sleep(0.2)
        return build(*args, **kwargs)

    monkeypatch.setattr(module, builder, held)
    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 5, (60, 1))
    if kind == "classification":
        problem = RVMClassification(X, (X[:, 0] > 0).astype(int), kernel=GaussianKernel(2.0))
    else:
        t = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60)
        problem = (GPRegression(X, t) if kind == "gp"
                   else RVMRegression(X, t, kernel=GaussianKernel(2.0)))
    start = time.perf_counter()
    post = fit(problem, "evidence", seed=0)
    whole = time.perf_counter() - start
    assert 0 < post.attrs["optimise_seconds"] <= whole - 0.2


def test_gaussian_draws_log_likelihood_is_scipy_normal_logpdf_per_draw():
    """log N(t_n | phi_n^T w_s, 1/beta_s) (T01 eq. 5) with one beta per draw, against SciPy
    draw by draw, and so does ``gaussian_log_likelihood`` of the draws' means."""
    from scipy import stats

    from sparsebayes.inference.results import (
        gaussian_draws_log_likelihood,
        gaussian_log_likelihood,
    )

    rng = np.random.default_rng(5)
    t, Phi = rng.standard_normal(40), np.asfortranarray(rng.standard_normal((40, 7)))
    w, beta = rng.standard_normal((2, 9, 7)), rng.gamma(2.0, 3.0, (2, 9))
    got = gaussian_draws_log_likelihood(t, w, Phi, beta)
    ref = np.array([[stats.norm.logpdf(t, Phi @ w[c, d], 1 / np.sqrt(beta[c, d]))
                     for d in range(9)] for c in range(2)])
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(gaussian_log_likelihood(t, w @ Phi.T, beta), ref, rtol=0,
                               atol=1e-10)


def test_basis_labels_are_built_once_and_not_shared():
    """``labels`` is a new list each call (mutating it leaves the basis alone);
    ``column_labels`` and ``n_columns`` agree with it."""
    from sparsebayes.models import Basis

    basis = Basis(GaussianKernel(1.0), np.zeros((4, 2)), extra=("quadratic",))
    labels = basis.labels
    assert labels == ["bias", "0", "1", "2", "3", "x0^2", "x1^2", "x0*x1"]
    labels[0] = "changed"
    assert basis.labels[0] == "bias" and basis.labels is not basis.labels
    assert basis.n_columns == 8
    for b in (basis, Basis(GaussianKernel(1.0), np.zeros((12, 1)), bias=False,
                           dictionary=True)):
        cols = np.array([b.n_columns - 1, 0, 3])
        ref = np.asarray(b.labels, dtype=str)[cols]
        got = b.column_labels(cols)
        np.testing.assert_array_equal(got, ref)
        assert got.dtype == ref.dtype and b.n_columns == len(b.labels)
    assert b.labels[:3] == ["c0", "c1", "c2"] and b.n_columns == 12
