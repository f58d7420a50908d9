"""A result's posterior on the whole basis of ``problem.pymc_model()``, for PyMC's
posterior-predictive route."""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["pymc_trace"]

PRUNED_ALPHA = 1e300  # alpha of a pruned weight: w = z / sqrt(alpha) = 0 (T01 sec. 2.3)


def pymc_trace(post: xr.DataTree, problem) -> xr.Dataset:
    """The posterior of ``post`` on every column of ``problem.basis``, as
    ``pm.sample_posterior_predictive(pymc_trace(post, problem), model=problem.pymc_model())``
    needs it: an evidence (or any pruned) result holds only its relevance vectors, so the
    pruned columns get ``w = z = 0`` and ``alpha = PRUNED_ALPHA`` (the limit alpha -> inf
    of T01 sec. 2.3), and the point hyperparameters (coordinates of an evidence result's
    ``posterior``) are variables again, the trace PyMC conditions on. Results on the whole
    basis (VRVM, ADVI, NUTS) come back unchanged.

    Raises ``ValueError`` when ``post`` is of another problem kind or was fitted on another
    basis (e.g. a learned kernel width): ``problem.pymc_model()`` would then predict with the
    wrong design matrix."""
    kind = post.attrs.get("problem_kind")
    if kind != problem.kind:
        raise ValueError(f"post is a {kind} posterior, problem is {problem.kind}")
    if not problem.basis.same_as(post.attrs):
        raise ValueError(
            "post was fitted on another basis than problem.basis (e.g. a learned kernel "
            f"width): {post.attrs.get('kernel_width', post.attrs.get('kernel'))} vs "
            f"{problem.basis.to_attrs().get('kernel_width', problem.basis.kernel.name)}; build "
            "the problem with the fitted kernel, or use sparsebayes.inference.predict")
    ds = post["posterior"].to_dataset().reset_coords()  # point values: variables PyMC reads
    labels = np.asarray(problem.basis.labels, dtype=str)
    have = np.asarray(ds["basis"].values, dtype=str)
    missing = set(have) - set(labels)
    if missing:
        raise ValueError(f"post has basis columns {sorted(missing)[:5]} that problem.basis "
                         "lacks: it was fitted on another problem")
    if have.size == labels.size:
        return ds
    out = {}
    for name, v in ds.data_vars.items():
        if "basis" not in v.dims:
            out[name] = v
            continue
        fill = PRUNED_ALPHA if name == "alpha" else 0.0
        out[name] = v.reindex(basis=labels, fill_value=fill)
    return xr.Dataset(out, attrs=ds.attrs)
