"""One DataTree layout for every posterior (DESIGN.md, "Results").

Groups: ``posterior`` (``w``, ``alpha`` on dim ``basis``; ``beta``, ``noise_sd`` for
regression), ``log_likelihood`` (``t`` on dim ``obs``), ``observed_data``, ``constant_data``
(training inputs ``X``, the ``centres`` of the basis columns and their training index),
``sample_stats``, and for methods that end in a Gaussian over ``w`` (evidence, VRVM) a
``gaussian_posterior`` group with ``mu``, ``Sigma`` and the point hyperparameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import arviz_base as azb
import numpy as np
import xarray as xr

from sparsebayes.models import Basis

__all__ = ["make_datatree", "basis_from_posterior", "gaussian_log_likelihood", "draw_gaussian"]


def draw_gaussian(mu: np.ndarray, Sigma: np.ndarray, shape: tuple[int, ...],
                  rng: np.random.Generator) -> np.ndarray:
    """Draws of N(mu, Sigma) with leading ``shape``, through a symmetric eigen square root
    (robust to the semi-definite Sigma of nearly pruned weights)."""
    vals, vecs = np.linalg.eigh((Sigma + Sigma.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = rng.standard_normal((*shape, mu.size))
    return mu + z @ root.T


def gaussian_log_likelihood(t: np.ndarray, f: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Pointwise ``log N(t_n | f_n, 1/beta)``; ``f`` (..., n), ``beta`` broadcastable to (...)."""
    beta = np.asarray(beta)[..., None]
    return 0.5 * (np.log(beta) - np.log(2 * np.pi)) - 0.5 * beta * (t - f) ** 2


def make_datatree(
    problem,
    *,
    basis: Basis,
    columns: np.ndarray,
    posterior: Mapping[str, np.ndarray],
    log_likelihood: np.ndarray,
    sample_stats: Mapping[str, Any] | None = None,
    gaussian: Mapping[str, np.ndarray] | None = None,
    attrs: Mapping[str, Any] | None = None,
    extra_dims: Mapping[str, list[str]] | None = None,
    extra_coords: Mapping[str, Any] | None = None,
) -> xr.DataTree:
    """Assemble the result of a ``fit``.

    ``columns`` are the indices into ``basis`` of the columns on dim ``basis`` (e.g. the
    relevance vectors of an evidence fit, or every column for MCMC); their labels are kept
    so relevance vectors can be found in any posterior. Posterior arrays have leading
    ``(chain, draw)``; ``log_likelihood`` is ``(chain, draw, obs)``. ``sample_stats`` values
    are arrays with leading ``(chain, draw)`` or ``(dims, array)`` pairs for traces.
    """
    columns = np.asarray(columns, dtype=int)
    labels = np.asarray(basis.labels, dtype=str)[columns]
    n, d = problem.X.shape
    coords: dict[str, Any] = {"basis": labels, "obs": np.arange(n), "feature": np.arange(d)}
    coords.update(extra_coords or {})
    dims = {"w": ["basis"], "alpha": ["basis"], "t": ["obs"]}
    dims.update(extra_dims or {})

    centre_index = basis.centre_index()[columns]
    centres = np.full((columns.size, d), np.nan)
    is_kernel = centre_index >= 0
    centres[is_kernel] = basis.centres[centre_index[is_kernel]]

    stats_plain = {}
    traces = {}
    for k, v in (sample_stats or {}).items():
        if isinstance(v, tuple):
            traces[k] = v
        else:
            stats_plain[k] = np.asarray(v)
    groups = {
        "posterior": {k: np.asarray(v) for k, v in posterior.items()},
        "log_likelihood": {"t": np.asarray(log_likelihood)},
        "observed_data": {"t": np.asarray(problem.t)},
        "constant_data": {"X": problem.X, "centres": centres, "centre_index": centre_index},
    }
    if stats_plain:
        groups["sample_stats"] = stats_plain
    dims.update({"X": ["obs", "feature"], "centres": ["basis", "feature"],
                 "centre_index": ["basis"]})
    dt = azb.from_dict(groups, coords=coords, dims=dims)
    if traces:
        ss = dt["sample_stats"].to_dataset() if "sample_stats" in dt.children else xr.Dataset()
        for k, (tdims, arr) in traces.items():
            ss[k] = (tdims, np.asarray(arr))
        dt["sample_stats"] = xr.DataTree(ss)
    if gaussian is not None:
        gp = xr.Dataset(coords={"basis": labels, "basis_bis": labels})
        for k, v in gaussian.items():
            v = np.asarray(v)
            gp[k] = {0: (), 1: ("basis",), 2: ("basis", "basis_bis")}[v.ndim], v
        dt["gaussian_posterior"] = xr.DataTree(gp)

    base_attrs = {
        "problem_kind": problem.kind,
        "basis_spec": basis.spec(),
        "n_relevant": int(columns.size),
        "sparsebayes_version": _version(),
    }
    if getattr(problem, "classes", None) is not None:
        base_attrs["classes"] = json.dumps(np.asarray(problem.classes).tolist())
    dt.attrs.update(base_attrs)
    dt.attrs.update({k: v for k, v in (attrs or {}).items() if v is not None})
    return dt


def basis_from_posterior(post: xr.DataTree) -> tuple[Basis, np.ndarray]:
    """The fitted :class:`Basis` (training inputs as centres) and the column indices of
    dim ``basis``, rebuilt from the DataTree alone (so it works after a netCDF round trip)."""
    X = post["constant_data"]["X"].values
    basis = Basis.from_spec(post.attrs["basis_spec"], X)
    all_labels = basis.labels
    pos = {lab: i for i, lab in enumerate(all_labels)}
    columns = np.array([pos[str(lab)] for lab in post["posterior"]["basis"].values], dtype=int)
    return basis, columns


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparsebayes")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


def library_versions() -> str:
    """JSON of the versions of the libraries a result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("sparsebayes", "numpy", "scipy", "xarray", "arviz", "pymc", "pytensor", "nutpie"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return json.dumps(out)
