"""One DataTree layout for every posterior.

Groups: ``posterior`` (``w``, ``alpha`` on dim ``basis``; ``beta``, ``noise_sd`` for
regression), ``log_likelihood`` (``t`` on dim ``obs``), ``observed_data``, ``constant_data``
(training inputs ``X``, the ``centres`` of the basis columns and their training index),
``sample_stats``, and for methods that end in a Gaussian over ``w`` (evidence, VRVM) a
``gaussian_posterior`` group with ``mu``, ``Sigma`` and the point hyperparameters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import arviz_base as azb
import numpy as np
import xarray as xr
from xarray.indexes import PandasIndex

from sparsebayes.models import Basis, GammaPrior

from .contract import DRAWN
from .numerics import LOG_2PI, gaussian_draws

__all__ = ["is_result_of", "classes_attr", "datatree", "make_datatree", "classification_datatree",
           "prior_from_posterior",
           "basis_from_posterior", "flat_draws", "gaussian_log_likelihood",
           "gaussian_draws_log_likelihood", "pointwise_budget_ok", "relevance_counts",
           "ALPHA_PRUNED"]

POINTWISE_MAX = 25_000_000  # values (200 MB) of a log_likelihood group at most

# ``alpha`` in the ``posterior`` group of a (basis, class) pair the fit pruned (alpha = inf,
# T01 §2; ``gaussian_posterior`` holds inf). Finite, since ArviZ's mean-ESS of a constant inf
# is NaN (``az.loo``'s relative efficiency with it); a power of two, so ArviZ's sums of it
# are exact (mean exactly this, variance 0: a constant like any other) and rounding it in
# ``az.summary`` does not overflow (the largest float did). Results record it in
# ``attrs["alpha_pruned"]``.
ALPHA_PRUNED = 2.0**1000


def pointwise_budget_ok(chains: int, draws: int, n: int) -> bool:
    """Whether a (chain, draw, obs) log_likelihood fits ``POINTWISE_MAX``; above it a result
    leaves the group out (say so in its attrs) rather than exhaust memory at large N."""
    return chains * draws * n <= POINTWISE_MAX


def is_result_of(post, problem_type: type, method: str | None = None) -> bool:
    """Whether ``post`` is a result of ``fit`` on a ``problem_type`` problem (by ``method``,
    if given)."""
    return (isinstance(post, xr.DataTree)
            and post.attrs.get("problem_kind") == problem_type.kind
            and (method is None or post.attrs.get("method") == method))


def classes_attr(classes) -> np.ndarray | list[str]:
    """The class labels as a result attr: a numeric array, or a list of str for text labels
    (netCDF keeps both)."""
    classes = np.asarray(classes)
    return classes.astype(str).tolist() if classes.dtype.kind in "USO" else classes


def flat_draws(post: xr.DataTree, name: str) -> np.ndarray:
    """The posterior draws of ``name`` with (chain, draw) flattened into one leading axis."""
    v = post["posterior"][name].values
    return v.reshape(-1, *v.shape[2:])


def relevance_counts(basis: Basis, columns: np.ndarray, relevance=None) -> dict[str, int]:
    """``n_relevant``: the relevant columns among ``columns`` of ``basis`` (bias and extra
    terms included), and ``n_kernel_vectors``: those that are kernel functions, the count
    Tipping (2001) reports (its tables count relevance vectors, not the bias).
    ``relevance``: per column of ``columns``, 1/0 or an effective count such as
    ``gamma_i = 1 - alpha_i Sigma_ii`` (T01 eq. 17); each total is rounded and capped at the
    number of columns it sums over. Default: every column counts."""
    columns = np.asarray(columns, dtype=int)
    r = np.ones(columns.size) if relevance is None else np.asarray(relevance, dtype=float)
    kernel = basis.kernel_index()[columns] >= 0
    return {"n_relevant": int(min(round(float(r.sum())), columns.size)),
            "n_kernel_vectors": int(min(round(float(r[kernel].sum())), int(kernel.sum())))}


def gaussian_log_likelihood(t: np.ndarray, f: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Pointwise ``log N(t_n | f_n, 1/beta)`` (T01 eq. 5); ``f`` (..., n), ``beta``
    broadcastable to (...). Computed in place in one new array."""
    beta = np.asarray(beta, dtype=float)[..., None]
    out = np.empty(np.broadcast_shapes(np.shape(f), np.shape(t), beta.shape))
    np.subtract(f, t, out=out)
    np.multiply(out, np.sqrt(0.5 * beta), out=out)  # sqrt(beta / 2) (f - t), squared below
    np.square(out, out=out)
    return np.subtract(0.5 * (np.log(beta) - LOG_2PI), out, out=out)


def gaussian_draws_log_likelihood(t: np.ndarray, w: np.ndarray, Phi: np.ndarray,
                                  beta: np.ndarray | float) -> np.ndarray:
    """Pointwise ``log N(t_n | phi_n^T w_s, 1/beta_s)`` (T01 eq. 5) of weight draws ``w``
    (..., M) at the rows of ``Phi`` (n, M), ``beta`` broadcastable to (...): (..., n).

    The scaled residuals ``k_s (phi_n^T w_s - t_n)``, ``k_s = sqrt(beta_s / 2)``, are one
    matrix product ``[k w, -k] @ [Phi, t]^T``; squaring and subtracting them from
    ``(ln beta_s - ln 2 pi) / 2`` are done in place on it (no further S x n arrays)."""
    w, Phi, t = np.asarray(w, dtype=float), np.asarray(Phi), np.asarray(t, dtype=float)
    lead, (n, M) = w.shape[:-1], Phi.shape
    S = math.prod(lead)
    beta = np.broadcast_to(np.asarray(beta, dtype=float), lead).reshape(S, 1)
    k = np.sqrt(0.5 * beta)
    Wk = np.empty((S, M + 1))
    np.multiply(w.reshape(S, M), k, out=Wk[:, :M])
    Wk[:, M:] = -k
    Pt = np.empty((n, M + 1), order="F")
    Pt[:, :M], Pt[:, M] = Phi, t
    out = Wk @ Pt.T
    np.square(out, out=out)
    return np.subtract(0.5 * (np.log(beta) - LOG_2PI), out, out=out).reshape(*lead, n)


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
    labels = basis.column_labels(columns)
    n, d = problem.X.shape
    coords: dict[str, Any] = {"basis": labels, "obs": np.arange(n), "feature": np.arange(d)}
    coords.update(extra_coords or {})
    dims = {"w": ["basis"], "z": ["basis"], "alpha": ["basis"], "t": ["obs"]}
    dims.update(extra_dims or {})
    dims["z"] = dims["w"]  # z = w sqrt(alpha) shares w's dims

    centre_index = basis.centre_index()[columns]
    kernel_index = basis.kernel_index()[columns]
    centres = np.full((columns.size, d), np.nan)
    is_kernel = kernel_index >= 0
    centres[is_kernel] = basis.centres[kernel_index[is_kernel]]
    constant = {"X": np.asarray(problem.X), "centres": centres, "centre_index": centre_index}
    if basis.dictionary:  # the whole dictionary: predictions rebuild the basis from it
        constant["dictionary"] = basis.centres
        coords["dictionary_centre"] = np.arange(basis.n_kernel)

    stats_plain = {}
    traces = {}
    for k, v in (sample_stats or {}).items():
        if isinstance(v, tuple):
            traces[k] = v
        else:
            stats_plain[k] = np.asarray(v)
    dims.update({"X": ["obs", "feature"], "centres": ["basis", "feature"],
                 "centre_index": ["basis"], "dictionary": ["dictionary_centre", "feature"]})
    posterior = {k: np.asarray(v) for k, v in posterior.items()}
    if "w" in posterior and "alpha" in posterior and "z" not in posterior:
        # the joint PyMC model's own variable (w = z / sqrt(alpha)): PyMC's posterior
        # predictive on problem.pymc_model() then conditions on these draws, not z's prior
        with np.errstate(invalid="ignore", over="ignore"):
            posterior["z"] = np.nan_to_num(posterior["w"] * np.sqrt(posterior["alpha"]))
    groups: dict[str, Any] = {"posterior": posterior}
    if log_likelihood is not None:  # None: too large to hold (see pointwise_budget_ok)
        groups["log_likelihood"] = {"t": np.asarray(log_likelihood)}
    groups["observed_data"] = {"t": np.asarray(problem.t)}
    groups["constant_data"] = constant
    if stats_plain or traces:
        groups["sample_stats"] = stats_plain
    if gaussian is not None:
        gvars = {}
        for k, v in gaussian.items():
            v = np.asarray(v)
            gvars[k] = ({0: (), 1: ("basis",), 2: ("basis", "basis_bis")}[v.ndim], v)
        groups["gaussian_posterior"] = (gvars, {"basis": labels, "basis_bis": labels})
    dt = datatree(groups, dims=dims, coords=coords, traces=traces,
                  attrs={k: v for k, v in (attrs or {}).items() if k == "hyperparameters"})

    base_attrs = {
        "problem_kind": problem.kind,
        **basis.to_attrs(),
        **relevance_counts(basis, columns),
    }
    if getattr(problem, "classes", None) is not None:
        base_attrs["classes"] = classes_attr(problem.classes)
    dt.attrs.update(base_attrs)
    dt.attrs.update({k: v for k, v in (attrs or {}).items() if v is not None})
    return dt


SAMPLE_GROUPS = ("posterior", "log_likelihood", "sample_stats", "prior",
                 "posterior_predictive", "prior_predictive", "predictions")


def datatree(groups: Mapping[str, Any], *, dims: Mapping[str, list[str]],
             coords: Mapping[str, Any], traces: Mapping[str, tuple] | None = None,
             attrs: Mapping[str, Any] | None = None) -> xr.DataTree:
    """The one result builder of every method (RVM and GP): ``groups`` maps a group name
    to its variables as ArviZ's ``from_dict`` takes them (leading (chain, draw) in the
    groups of draws, :data:`SAMPLE_GROUPS`; ``log_likelihood`` without event dims), or to
    ``(data_vars, coords)`` already laid out by hand (``(dims, array)`` variables). The tree
    equals ``arviz_base.from_dict``'s (tests) but builds each group in one ``Dataset``
    constructor, with the coordinates' indexes built once for all groups. ``traces``:
    ``(dims, array)`` variables of ``sample_stats`` on their own dims (e.g. an optimiser's
    objective per iteration)."""
    cache: dict = {}  # the indexes of the coordinates, built once for all groups
    children = {}
    for name, data in groups.items():
        if isinstance(data, tuple):
            children[name] = _dataset(data[0], data[1], cache)
            continue
        sample = ["chain", "draw"] if name in SAMPLE_GROUPS else []
        extra = traces if name == "sample_stats" else None
        children[name] = _group({k: np.asarray(v) for k, v in data.items()}, dims, coords,
                                sample, skip_event_dims=name == "log_likelihood",
                                extra=extra, arviz_attrs=bool(data) or not extra,
                                index_cache=cache)
    if (attrs or {}).get("hyperparameters") == "point" and "posterior" in children:
        children["posterior"] = state_point_values(children["posterior"])
    dt = _tree(children)
    dt.attrs.update(attrs or {})
    return dt


def state_point_values(posterior: xr.Dataset) -> xr.Dataset:
    """The point hyperparameters of a type-II ML result (``alpha``, ``beta``, a GP's
    ``length_scale`` ...) as coordinates of its ``posterior``, with their (chain, draw)
    dims: the draws (``w``, ``f``) are conditional on them. Read as every other result's
    (``post.posterior["alpha"]``, :func:`flat_draws`); ArviZ's ``summary``, ``ess`` and
    ``rhat`` diagnose the data variables only, so constants show no ``nan`` R-hat."""
    if not any(k in posterior.data_vars for k in DRAWN):
        return posterior  # no draws to condition (left out at size): keep the values
    return posterior.set_coords([k for k in posterior.data_vars if k not in DRAWN])


def classification_datatree(problem, basis: Basis, lik, *, theta: np.ndarray, Sigma: np.ndarray,
                            alpha: np.ndarray, cols: np.ndarray, cls: np.ndarray,
                            sample_stats: Mapping[str, Any], attrs: Mapping[str, Any], seed,
                            draws: int, chains: int, q_alpha_shape: float | None = None
                            ) -> xr.DataTree:
    """The result of an RVM classifier whose weight posterior is a Gaussian ``N(theta,
    Sigma)`` over the (basis ``cols``, class ``cls``) pairs in the model (Laplace, T01 eq.
    26; variational ``q(w)``, Bishop & Tipping 2000): ``draws`` x ``chains`` draws of ``w``,
    their pointwise log likelihood (``lik``), its own parameters (``lik.params``, e.g. a
    dispersion) at their point values, and ``alpha`` at its point values or, with
    ``q_alpha_shape`` k, drawn from ``q(alpha_i) = Gamma(k, rate k / alpha_i)``.

    Binary: ``w``, ``alpha`` on dim ``basis``; ``w`` is the logit weight of ``classes[1]``.
    Softmax: ``w``, ``alpha`` on dims (``basis``, ``class``) over the union of the columns
    relevant for any class; a weight pruned for one class has ``w = 0`` there and ``alpha =
    inf`` in ``gaussian_posterior``, but :data:`ALPHA_PRUNED` in ``posterior`` (also in
    ``attrs["alpha_pruned"]``; inf there made ``az.loo``'s relative efficiency NaN and its
    Pareto k wrong). ``gaussian_posterior``: ``mu`` and ``Sigma`` (binary: (basis, basis_bis);
    softmax: (basis, class, basis_bis, class_bis), the joint covariance)."""
    for name, v in (("draws", draws), ("chains", chains)):
        if not isinstance(v, int | np.integer) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    rng = np.random.default_rng(seed)
    theta_draws = gaussian_draws(theta, Sigma, (chains, draws), rng)
    K = lik.n_out
    n = problem.X.shape[0]
    loglik = (lik.draws_loglik(basis.design(problem.X, columns=cols), cls, theta_draws)
              if pointwise_budget_ok(chains, draws, n) else None)
    attrs = {
        "log_likelihood_omitted": None if loglik is not None else "size",
        "likelihood": lik.name,
        "alpha_pruned": ALPHA_PRUNED,
        **attrs,
    }
    if "width" in basis.kernel.parameters:
        attrs["width"] = np.atleast_1d(np.asarray(basis.kernel.width, dtype=float))
    big = ALPHA_PRUNED
    if K == 1:
        if getattr(problem, "classes", None) is not None:
            attrs["positive_class"] = str(problem.classes[1])
        columns, A, mu, S = cols, alpha, theta, Sigma
        w = theta_draws
    else:
        columns, pos = np.unique(cols, return_inverse=True)
        Mu = columns.size
        w = np.zeros((chains, draws, Mu, K))
        w[:, :, pos, cls] = theta_draws
        A = np.full((Mu, K), np.inf)
        A[pos, cls] = alpha
        mu = np.zeros((Mu, K))
        mu[pos, cls] = theta
        S = np.zeros((Mu, K, Mu, K))
        S[pos[:, None], cls[:, None], pos[None, :], cls[None, :]] = Sigma
    if q_alpha_shape is None:
        alpha_draws = np.broadcast_to(np.minimum(A, big), w.shape).copy()
    else:
        alpha_draws = (np.random.default_rng(None if seed is None else seed + 1)
                       .gamma(q_alpha_shape, 1.0, w.shape) * (A / q_alpha_shape))
        alpha_draws = np.where(np.isfinite(alpha_draws), alpha_draws, big)
    gaussian = {"mu": mu, "Sigma": S, "alpha": A}
    if q_alpha_shape is not None:
        gaussian.update(q_alpha_shape=q_alpha_shape, q_alpha_rate=q_alpha_shape / A)
    params = {k: np.full((chains, draws), float(v)) for k, v in lik.params.items()}
    if K == 1:
        return make_datatree(problem, basis=basis, columns=columns,
                             posterior={"w": w, "alpha": alpha_draws, **params},
                             log_likelihood=loglik,
                             sample_stats=sample_stats, gaussian=gaussian, attrs=attrs)
    class_labels = np.asarray(problem.classes).astype(str)
    dt = make_datatree(
        problem, basis=basis, columns=columns, posterior={"w": w, "alpha": alpha_draws},
        log_likelihood=loglik, sample_stats=sample_stats, attrs=attrs,
        extra_dims={"w": ["basis", "class"], "alpha": ["basis", "class"]},
        extra_coords={"class": class_labels})
    labels = dt["posterior"]["basis"].values
    pairs, pairs_bis = ("basis", "class"), ("basis", "class", "basis_bis", "class_bis")
    gvars = {k: ({0: (), 2: pairs, 4: pairs_bis}[np.ndim(v)], v) for k, v in gaussian.items()}
    dt["gaussian_posterior"] = xr.DataTree(xr.Dataset(
        gvars, coords={"basis": labels, "basis_bis": labels, "class": class_labels,
                       "class_bis": class_labels}))
    return dt


def basis_from_posterior(post: xr.DataTree, kernel=None) -> tuple[Basis, np.ndarray]:
    """The fitted :class:`Basis` (the training inputs or the dictionary as centres) and the
    column indices of dim ``basis``, rebuilt from the DataTree alone (so it works after a
    netCDF round trip). ``kernel``: the kernel object, needed when the fit used a user
    callable (which a DataTree cannot store)."""
    const = post["constant_data"]
    centres = const["dictionary"].values if "dictionary" in const else const["X"].values
    basis = Basis.from_attrs(post.attrs, centres, kernel)
    pos = {lab: i for i, lab in enumerate(basis.labels)}
    columns = np.array([pos[str(lab)] for lab in post["posterior"]["basis"].values], dtype=int)
    return basis, columns


def prior_from_posterior(post: xr.DataTree, default: GammaPrior | None = None) -> GammaPrior | None:
    """The Gamma hyperprior (T01 eq. 6) a result was fitted with, from attrs ``prior``;
    ``default`` when the result records none."""
    return GammaPrior.from_array(post.attrs["prior"]) if "prior" in post.attrs else default


def _group(data: Mapping[str, np.ndarray], dims: Mapping[str, list[str]],
           coords: Mapping[str, Any], sample_dims: list[str], *,
           skip_event_dims: bool = False, extra: Mapping[str, tuple] | None = None,
           arviz_attrs: bool = True, index_cache: dict | None = None) -> xr.Dataset:
    """The group ``arviz_base.dict_to_dataset`` builds (as ``from_dict`` calls it): each
    variable's dims and default coordinates by ArviZ's ``generate_dims_coords``, the
    attributes by its ``make_attrs``, but one :func:`_dataset` instead of a ``DataArray`` per
    variable merged (a fit builds this tree every call).
    ``extra``: further ``(dims, array)`` variables without coordinates (traces)."""
    data_vars: dict[str, tuple] = {}
    var_coords: dict[str, Any] = {}
    for name, values in data.items():
        own = list(dims.get(name, []))
        var_dims = [d for d in sample_dims if d not in own] + own
        var_dims, c = azb.generate_dims_coords(values.shape, var_name=name, dims=var_dims,
                                               coords=coords, skip_event_dims=skip_event_dims)
        data_vars[name] = (var_dims, values)
        var_coords.update(c)
    data_vars.update(extra or {})
    attrs = azb.make_attrs(sample_dims=sample_dims) if arviz_attrs else None
    return _dataset(data_vars, var_coords, index_cache, attrs)


def _dataset(data_vars: Mapping[str, tuple], coords: Mapping[str, Any], cache: dict | None,
             attrs: Mapping | None = None) -> xr.Dataset:
    """``xr.Dataset(data_vars, coords=coords, attrs=attrs)`` for ``coords`` that are 1-D, each
    on its own dim, with the indexes from :func:`_indexed` (built once per tree)."""
    coord_vars, indexes = _indexed(coords, cache)
    return xr.Dataset(data_vars, coords=xr.Coordinates(coord_vars, indexes=indexes),
                      attrs=attrs)


def _tree(children: Mapping[str, xr.Dataset]) -> xr.DataTree:
    """A root without data over one level of ``children`` (assigned at once: half the cost
    of ``DataTree.from_dict``, which copies every node again)."""
    root = xr.DataTree()
    root.children = {name: xr.DataTree(ds) for name, ds in children.items()}
    return root


def _indexed(coords: Mapping[str, Any], cache: dict | None) -> tuple[dict, dict]:
    """The index variables and indexes of ``coords`` (1-D, each on its own dim). The indexes
    are built once per tree (``cache``: name -> (values, index, variable)) and shared by the
    groups; integer ranges (``chain``, ``draw``, ``obs``, ...) once per process
    (:func:`_range_index`; xarray indexes are immutable)."""
    cache = {} if cache is None else cache
    variables, indexes = {}, {}
    for name, values in coords.items():
        values = np.asarray(values)
        hit = cache.get(name)
        if hit is None or hit[0].shape != values.shape or not np.array_equal(hit[0], values):
            if (values.ndim == 1 and values.dtype == np.int64
                    and np.array_equal(values, np.arange(values.size))):
                index = _range_index(name, values.size)
            else:
                index = PandasIndex.from_variables({name: xr.Variable((name,), values)},
                                                   options={})
            hit = cache[name] = (values, index, index.create_variables()[name])
        indexes[name], variables[name] = hit[1], hit[2]
    return variables, indexes


@functools.lru_cache(maxsize=64)
def _range_index(name: str, n: int) -> PandasIndex:
    return PandasIndex.from_variables({name: xr.Variable((name,), np.arange(n))}, options={})


@functools.cache
def library_versions() -> str:
    """``name==version`` of the libraries a result depends on, space-separated, read once per
    process (``importlib.metadata`` parses every package's metadata file)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("sparsebayes", "numpy", "scipy", "xarray", "arviz", "pymc", "pytensor", "nutpie"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return " ".join(f"{k}=={v}" for k, v in out.items())
