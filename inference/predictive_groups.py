"""ArviZ's predictive groups for every posterior the library returns, computed from the
result itself (its draws of ``w`` and ``beta``), so they are right for every method, evidence
and VRVM included, without PyMC:

* ``posterior_predictive``: one replicate of ``t`` at the training inputs per posterior draw
  (regression: ``t_rep = Phi w_s + eps_s``, ``eps_s ~ N(0, 1/beta_s)``, T01 eq. 4 at the
  draw; classification: a class code drawn from the Bernoulli-logit / softmax probabilities
  of the draw, T01 eqs. 23, 28), dims ``(chain, draw, obs)`` like ``observed_data.t``;
* ``predictions`` and ``predictions_constant_data``: the same at new inputs.

With them ``az.loo_pit``, ``az.plot_ppc_dist``, ``az.plot_ppc_pit`` and ``az.plot_lm`` work on
every result (``az.loo`` and ``az.compare`` need only ``log_likelihood``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import expit, softmax

from .predictive import check_new_inputs
from .results import basis_from_posterior

__all__ = ["add_posterior_predictive", "add_predictions"]


def _check_post(post) -> str:
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError("post must be a DataTree returned by sparsebayes.inference.fit")
    kind = post.attrs["problem_kind"]
    if kind not in ("regression", "classification"):
        raise ValueError(f"predictive groups are for RVM posteriors (regression or "
                         f"classification), got a {kind!r} posterior")
    return kind


def _replicates(post, kind: str, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw of ``t`` at ``X`` per posterior draw: (chain, draw, n)."""
    basis, columns = basis_from_posterior(post)
    Phi = basis.design(X, columns=columns)
    w = post["posterior"]["w"].values
    if kind == "regression":
        beta = post["posterior"]["beta"].values
        mean = w @ Phi.T
        return mean + rng.standard_normal(mean.shape) / np.sqrt(beta)[..., None]
    if w.ndim == 3:  # Bernoulli-logit: w is the logit weight of classes[1]
        p1 = expit(w @ Phi.T)
        return (rng.random(p1.shape) < p1).astype(np.int64)
    P = softmax(np.einsum("nm,cdmk->cdnk", Phi, w), axis=-1)
    u = rng.random(P.shape[:-1])[..., None]
    return np.minimum((np.cumsum(P, axis=-1) < u).sum(axis=-1), P.shape[-1] - 1)


def _group(values: np.ndarray, obs_dim: str) -> xr.Dataset:
    c, d, n = values.shape
    return xr.Dataset({"t": (("chain", "draw", obs_dim), values)},
                      coords={"chain": np.arange(c), "draw": np.arange(d),
                              obs_dim: np.arange(n)})


def add_posterior_predictive(post: xr.DataTree, seed: int | None = None) -> xr.DataTree:
    """``post`` with a ``posterior_predictive`` group: a replicate of the training targets
    per posterior draw (see the module docstring). Returns a new tree."""
    kind = _check_post(post)
    X = post["constant_data"]["X"].values
    rep = _replicates(post, kind, X, np.random.default_rng(seed))
    out = post.copy()
    out["posterior_predictive"] = xr.DataTree(_group(rep, "obs"))
    return out


def add_predictions(post: xr.DataTree, X_new, seed: int | None = None) -> xr.DataTree:
    """``post`` with ``predictions`` (a draw of ``t`` at each row of ``X_new`` per posterior
    draw, dims ``(chain, draw, obs)``) and ``predictions_constant_data`` (``X_new``), as
    ArviZ names them. Returns a new tree."""
    kind = _check_post(post)
    X_new = check_new_inputs(post, X_new)
    rep = _replicates(post, kind, X_new, np.random.default_rng(seed))
    out = post.copy()
    out["predictions"] = xr.DataTree(_group(rep, "obs"))
    out["predictions_constant_data"] = xr.DataTree(xr.Dataset(
        {"X": (("obs", "feature"), X_new)},
        coords={"obs": np.arange(X_new.shape[0]), "feature": np.arange(X_new.shape[1])}))
    return out
