"""PyMC's samplers for every model of the library: NUTS through nutpie, PyMC, NumPyro or
BlackJAX, caches of compiled nutpie samplers and ADVI step functions (data of the same
shapes reuse one), sample statistics under one set of names, and convergence diagnostics
(Vehtari et al. 2021)."""

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
    a key seen before reuses its sampler with the new model's data. A key of ``None`` (a
    model with constants besides its ``pm.Data``) is compiled afresh and not kept."""

    def __init__(self) -> None:
        self._kept: dict = {}  # key -> (compiled sampler, the model it was compiled from)

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def sampler(self, model, key):
        """nutpie's compiled sampler of ``model`` and the compile time (0 when reused)."""
        import nutpie

        if key is not None and key in self._kept:
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
        kind = _kind(model) if key is None else key[0]
        with compiling(f"nutpie's NUTS sampler of a {kind} model of this shape"):
            compiled = nutpie.compile_pymc_model(model)
        elapsed = time.perf_counter() - start
        if key is not None:
            self._kept[key] = (compiled, model)
        return compiled, elapsed


def _kind(model) -> str:
    return getattr(model, "rvm_info", {}).get("kind", "PyMC")


class VIRun:
    """One compiled ADVI of a model (``method`` "advi": ``pm.MeanField``, "fullrank_advi":
    ``pm.FullRank``; Kucukelbir et al. 2017): PyMC's step function (one Adam step of the
    ELBO's Monte Carlo gradient under ``optimizer``, returning the loss) and the model's
    log density ``logp`` compiled once, the step reset for every fit: ``q`` at the fit's
    start, the optimiser's state at its initial values and the step's random generators
    reseeded, so a reused run and a fresh one iterate alike."""

    def __init__(self, model, method: str, optimizer) -> None:
        from pymc import variational

        self.model = model
        self.family = variational.MeanField if method == "advi" else variational.FullRank
        with model:
            inference = variational.KLqp(self.family(model=model))
        self.approx = inference.approx
        for group in self.approx.groups:
            group.include_transformed = False  # as pm.fit leaves them
        self.step = inference.objective.step_function(score=True, obj_optimizer=optimizer)
        shared = self.step.get_shared()
        data = {v.name for v in model.data_vars}
        params = set(self.approx.params)
        self.rngs = [v for v in shared
                     if isinstance(v.get_value(borrow=True), np.random.Generator)]
        self.optimizer_state = [(v, np.copy(v.get_value())) for v in shared
                                if v.name not in data and v not in params
                                and v not in self.rngs]
        # the joint log density in the unconstrained space, Jacobians included, for the
        # PSIS diagnostic; it reads the current data
        self.logp = model.compile_logp(jacobian=True)
        # numba compiles a function at its first call: call the step, the density and q's
        # sampler here, so that the time is the compile time and not the first fit's
        # (reset() undoes the step)
        self.step()
        self.logp(model.initial_point())
        self.approx.sample(1, random_seed=0, return_inferencedata=False)

    def set_data(self, model) -> None:
        """The data (every ``pm.Data``) of ``model``, a model of the same key."""
        for v in model.data_vars:
            self.model[v.name].set_value(v.get_value())

    def reset(self, start: dict, seed: int) -> None:
        """``q`` where a fresh approximation from ``start`` begins, the optimiser's state at
        its initial values, the step's random generators seeded from ``seed``."""
        fresh = self.family(start=start, model=self.model)
        for param, value in zip(self.approx.params, fresh.params, strict=True):
            param.set_value(value.get_value())
        for var, value in self.optimizer_state:
            var.set_value(np.copy(value))
        for var, child in zip(self.rngs, np.random.SeedSequence(seed).spawn(len(self.rngs)),
                              strict=True):
            var.set_value(np.random.Generator(np.random.PCG64(child)), borrow=True)

    def iterate(self, max_iter: int, callback, progressbar: bool, what: str) -> np.ndarray:
        """Up to ``max_iter`` steps; ``callback(approx, losses, i)`` after each may end them
        by ``StopIteration`` (as a ``pm.fit`` callback). Returns the losses (-ELBO); a NaN
        loss raises ``FloatingPointError``."""
        from .progress import progress_bar

        losses = np.empty(max_iter)
        n = 0
        with progress_bar(total=max_iter, desc=what, disable=not progressbar,
                          leave=False) as bar:
            try:
                for i in range(max_iter):
                    loss = float(self.step())
                    if np.isnan(loss):
                        raise FloatingPointError(f"{what}: NaN loss at iteration {i + 1}")
                    losses[i] = loss
                    n = i + 1
                    if n % 100 == 0:
                        bar.update(100)
                        bar.set_postfix_str(f"-ELBO {np.mean(losses[max(0, n - 1000):n]):,.5g}")
                    callback(self.approx, losses[:n], n)
            except StopIteration:
                pass
        return losses[:n]


class CompiledVI:
    """:class:`VIRun` s by key (the method, the learning rate and the model key of
    :class:`CompiledSamplers`): a fit of a key seen before sets its data on the kept run."""

    def __init__(self) -> None:
        self._kept: dict = {}

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def run(self, model, key, method: str, optimizer) -> tuple[VIRun, float]:
        """The kept run of ``key`` holding ``model``'s data (or a new one; ``key=None``: new
        and not kept) and the compile time (0 when reused). ``optimizer(model)``: the
        step's ``obj_optimizer``."""
        if key is not None and key in self._kept:
            run = self._kept[key]
            run.set_data(model)
            return run, 0.0
        start = time.perf_counter()
        name = "ADVI" if method == "advi" else "full-rank ADVI"
        with compiling(f"{name}'s step function of a {_kind(model)} model of this shape"):
            run = VIRun(model, method, optimizer(model))
        if key is not None:
            self._kept[key] = run
        return run, time.perf_counter() - start


COMPILED = CompiledSamplers()  # the samplers every fit of this process shares
COMPILED_VI = CompiledVI()  # the same for ADVI


def clear_compiled() -> None:
    """Forget every compiled nutpie sampler and ADVI step function (the next fit of each
    model compiles afresh)."""
    COMPILED.clear()
    COMPILED_VI.clear()


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


