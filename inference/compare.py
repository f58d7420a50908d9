"""Posteriors of several methods on one coordinate set, for ArviZ's multi-model functions.

An evidence result keeps only its relevance vectors on dim ``basis`` and a few hundred
independent draws; a NUTS result has every basis column and chains of correlated draws. ArviZ
pads such a mix with NaN (``az.plot_forest``) or fails on coordinates the evidence result
lacks. :func:`compare_posteriors` puts them on the model's whole basis (a pruned weight is
exactly 0 with ``alpha = inf``, T01 §2: ``alpha_i -> inf`` switches basis ``i`` off) and
gives each the same number of draws.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from .numerics import check_positive_int
from .results import ALPHA_PRUNED, basis_from_posterior

__all__ = ["compare_posteriors", "basis_key"]

# the value a variable on dim ``basis`` takes for a column the fit pruned
PRUNED = {"w": 0.0, "z": 0.0, "alpha": np.inf}


def basis_key(post: xr.DataTree) -> tuple[str, bytes]:
    """What fixes the basis functions: the basis attrs (kernel, its parameters, bias, extra
    terms) and the centres (the dictionary, or the training inputs)."""
    const = post["constant_data"]
    centres = const["dictionary"].values if "dictionary" in const else const["X"].values
    spec = [(k, np.asarray(v).tolist()) for k, v in sorted(post.attrs.items())
            if k.startswith("kernel") or k in ("bias", "extra_columns", "dictionary")]
    return repr(spec), np.ascontiguousarray(centres).tobytes()


def compare_posteriors(posteriors: Mapping[str, xr.DataTree], *, draws: int = 1000,
                       seed: int = 0) -> dict[str, xr.DataTree]:
    """The results in ``posteriors`` ({method name: result of ``fit``}) aligned for side-by-
    side comparison: every ``posterior`` variable on dim ``basis`` over the model's whole
    basis (pruned columns: ``w = z = 0``, ``alpha = inf``), and ``draws`` draws per result
    in one chain, taken at random (seeded) from all its chains without replacement (with
    replacement only when it has fewer); point hyperparameters (coordinates of an evidence
    result's ``posterior``) become variables like every other method's. Returns {name:
    DataTree with ``posterior``}, what ``az.plot_forest``, ``az.summary`` and
    :func:`~sparsebayes.inference.plots.plot_posteriors` take. Convergence diagnostics
    (R-hat, ESS) belong to the original results, not to these resampled draws.

    Results fitted on different basis functions (another kernel width, another dictionary
    of centres, other training inputs) are refused: equal labels such as ``c11`` would then
    name different functions."""
    if not isinstance(posteriors, Mapping) or not posteriors:
        raise TypeError("posteriors must be a non-empty dict {method name: DataTree}")
    draws = check_positive_int("draws", draws)
    first = None
    for name, post in posteriors.items():
        if not isinstance(post, xr.DataTree) or "posterior" not in post.children:
            raise TypeError(f"posteriors[{name!r}] is not a DataTree returned by fit()")
        if "basis" not in post["posterior"].dims:
            raise ValueError(f"posteriors[{name!r}] has no basis weights (a "
                             f"{post.attrs.get('problem_kind', 'non-RVM')} result); compare "
                             "its predictions with predict() instead")
        if first is None:
            first = (name, basis_key(post))
        elif basis_key(post) != first[1]:
            raise ValueError(
                f"posteriors[{name!r}] and posteriors[{first[0]!r}] were fitted on different "
                "basis functions (kernel, width or centres differ), so their weights are not "
                "comparable; fit both on the same problem")
    rng = np.random.default_rng(seed)
    out = {}
    for name, post in posteriors.items():
        basis, _ = basis_from_posterior(post)
        ds = post["posterior"].to_dataset().reset_coords()  # point values as variables
        n = ds.sizes["chain"] * ds.sizes["draw"]
        take = rng.choice(n, size=draws, replace=draws > n)
        flat = ds.stack(sample=("chain", "draw")).isel(sample=take)
        flat = flat.drop_vars(["sample", "chain", "draw"]).rename(sample="draw")
        flat = flat.expand_dims("chain").assign_coords(chain=[0], draw=np.arange(draws))
        fill = {k: v for k, v in PRUNED.items() if k in flat}
        aligned = flat.reindex(basis=np.asarray(basis.labels, dtype=str), fill_value=fill)
        if "alpha" in aligned:  # a pair pruned for one class: inf, as a column pruned for all
            aligned["alpha"] = aligned["alpha"].where(aligned["alpha"] < ALPHA_PRUNED, np.inf)
        tree = xr.DataTree.from_dict({"posterior": aligned.transpose("chain", "draw", ...)})
        tree.attrs.update(post.attrs)
        out[name] = tree
    return out
