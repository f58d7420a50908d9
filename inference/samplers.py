"""PyMC's samplers for every model of the library: NUTS through nutpie, PyMC, NumPyro or
BlackJAX, a cache of compiled nutpie samplers (data of the same shapes reuse one), sample
statistics under one set of names, and convergence diagnostics (Vehtari et al. 2021)."""

from __future__ import annotations

import time
from importlib.util import find_spec

import numpy as np
import xarray as xr

from sparsebayes.models import SamplingWarning

from .numerics import check_positive_int, warn_user
from .progress import compiling, sampler_callback

__all__ = ["SAMPLERS", "check_tune", "clear_compiled", "diagnose", "normalise_sample_stats",
           "run_sampler"]

SAMPLERS = ("nutpie", "pymc", "numpyro", "blackjax")
# sample-stat names of each sampler -> the common names (PyMC's)
STAT_NAMES = {
    "depth": "tree_depth",
    "logp": "lp",
    "mean_tree_accept": "acceptance_rate",
    "maxdepth_reached": "reached_max_treedepth",
}
KEEP_STATS = ("diverging", "tree_depth", "step_size", "energy", "lp", "n_steps",
              "acceptance_rate", "reached_max_treedepth", "energy_error")


class CompiledSamplers:
    """nutpie's compiled samplers by model key (the model and its data shapes): a model of
    a key seen before reuses its sampler with the new model's data."""

    def __init__(self) -> None:
        self._kept: dict = {}  # key -> (compiled sampler, the model it was compiled from)

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def sampler(self, model, key):
        """nutpie's compiled sampler of ``model`` and the compile time (0 when reused)."""
        import nutpie

        if key in self._kept:
            compiled, first = self._kept[key]
            known = {v.name for v in compiled.shared_var_keys}
            data = {v.name: v.get_value() for v in model.data_vars}
            # nutpie's initial-point function reads the first model's shared variables:
            # point them at this data too, or the chains start where the first data set's
            # would
            for name, value in data.items():
                first[name].set_value(value)
            return compiled.with_data(**{k: v for k, v in data.items() if k in known}), 0.0
        start = time.perf_counter()
        with compiling(f"nutpie's NUTS sampler of a {key[0]} model of this shape"):
            compiled = nutpie.compile_pymc_model(model)
        elapsed = time.perf_counter() - start
        self._kept[key] = (compiled, model)
        return compiled, elapsed


COMPILED = CompiledSamplers()  # the samplers every fit of this process shares


def clear_compiled() -> None:
    """Forget every compiled nutpie sampler (the next fit of each model compiles afresh)."""
    COMPILED.clear()


def check_tune(tune, sampler: str) -> int:
    """``tune`` as an int >= 0; nutpie needs at least one tuning step (its adaptation
    asserts it: ``tune=0`` makes the Rust sampler panic)."""
    tune = check_positive_int("tune", tune, allow_zero=True)
    if sampler == "nutpie" and tune < 1:
        raise ValueError("tune must be >= 1 with sampler='nutpie' (its step-size and mass "
                         "matrix adaptation needs at least one tuning step; tune=0 makes it "
                         "panic); give tune >= 1, or sampler='pymc' to sample without tuning")
    return tune


def normalise_sample_stats(ss: xr.Dataset) -> dict[str, np.ndarray]:
    """Sample stats under one set of names for every sampler: ``diverging``, ``tree_depth``,
    ``step_size``, ``energy``, ``lp``, ``n_steps``, ``acceptance_rate``,
    ``reached_max_treedepth``, ``energy_error`` (nutpie's ``depth``, ``logp``,
    ``mean_tree_accept``, ``maxdepth_reached`` are renamed)."""
    out = {}
    for name in ss.data_vars:
        new = STAT_NAMES.get(name, name)
        if new in KEEP_STATS and ss[name].dims[:2] == ("chain", "draw"):
            out[new] = np.asarray(ss[name].values)
    if "diverging" in out:
        out["diverging"] = out["diverging"].astype(bool)
    return out


def run_sampler(model, sampler, *, draws, tune, chains, cores, seed, target_accept, key,
                adaptation="diag", progressbar: bool = False):
    """Sample and return (posterior Dataset, normalised stats, compile s, sampling s)."""
    import pymc as pm

    if sampler == "nutpie":
        import nutpie

        compiled, t_compile = COMPILED.sampler(model, key)
        start = time.perf_counter()
        logged = None if progressbar else sampler_callback("nuts", draws + tune, chains)
        tr = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, cores=cores,
                           seed=seed, target_accept=target_accept, progress_bar=progressbar,
                           save_warmup=False, adaptation=adaptation,
                           progress_callback=logged)
        t_sample = time.perf_counter() - start
    else:
        if sampler in ("numpyro", "blackjax"):
            missing = [m for m in ("jax", sampler) if find_spec(m) is None]
            if missing:
                raise ImportError(
                    f"sampler={sampler!r} needs {' and '.join(missing)}: install the optional "
                    "extra with `pip install sparsebayes[jax]` (JAX samplers pay off on a "
                    "GPU), or use sampler='nutpie' / 'pymc'")
        start = time.perf_counter()
        tr = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                       nuts_sampler=sampler, target_accept=target_accept, model=model,
                       progressbar=progressbar, compute_convergence_checks=False,
                       quiet=not progressbar)
        t_sample = time.perf_counter() - start
        t_compile = float("nan")  # PyMC compiles inside pm.sample
    return tr["posterior"].to_dataset(), normalise_sample_stats(
        tr["sample_stats"].to_dataset()), t_compile, t_sample


def diagnose(post: xr.DataTree, var_names=("alpha", "beta", "w"), *, warn: bool = True,
             max_rhat: float = 1.01, min_ess_per_chain: float = 100.0) -> dict[str, float]:
    """Divergences, max R-hat and min bulk / tail ESS over ``var_names`` (rank-normalised,
    Vehtari et al. 2021, via arviz_stats); a :class:`SamplingWarning` naming every problem
    when ``warn``. ESS is judged against ``min_ess_per_chain`` x chains (ArviZ's advice)."""
    import arviz_stats as azs

    ds = post["posterior"].to_dataset()
    names = [v for v in var_names if v in ds and ds[v].std() > 0]
    sub = ds[names]
    chains = ds.sizes["chain"]
    rhat = azs.rhat(sub)
    bulk = azs.ess(sub, method="bulk")
    tail = azs.ess(sub, method="tail")
    out = {
        "n_divergent": int(post["sample_stats"]["diverging"].sum())
        if "sample_stats" in post.children and "diverging" in post["sample_stats"] else 0,
        "max_rhat": float(max(float(rhat[v].max()) for v in names)),
        "min_ess_bulk": float(min(float(bulk[v].min()) for v in names)),
        "min_ess_tail": float(min(float(tail[v].min()) for v in names)),
    }
    problems = []
    if out["n_divergent"]:
        problems.append(f"{out['n_divergent']} divergent transitions (the sampler missed "
                        "regions of high curvature; try target_accept=0.95 or more)")
    if not out["max_rhat"] <= max_rhat:
        problems.append(f"max R-hat {out['max_rhat']:.3f} > {max_rhat} (chains disagree)")
    need = min_ess_per_chain * chains
    for kind in ("bulk", "tail"):
        if not out[f"min_ess_{kind}"] >= need:
            problems.append(f"min {kind} ESS {out[f'min_ess_{kind}']:.0f} < {need:.0f}")
    out["ok"] = not problems
    if problems and warn:
        warn_user("NUTS diagnostics look bad: " + "; ".join(problems) + ". Run more draws or "
              "chains before trusting the posterior.", SamplingWarning)
    return out


