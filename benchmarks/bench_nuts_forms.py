"""Issue 31's NUTS target: ``fit(problem, "nuts")`` on noisy sinc (N = 100, width 3),
4 chains x (1000 tuning + 1000 draws), nutpie, with the collapsed likelihood as the
closed-form-gradient Op (the default under nutpie) and as the PyTensor-differentiated
Woodbury graph, alternated in one process (the first fit of each form compiles).
Target: <= 30 s wall after compilation.

``--mixing N_OP N_GRAPH``: how often a chain fails to mix under each form. The default
study's regression NUTS cells (sinc and diabetes with 150 training points, 30 k-means
centres, 4 chains x (500 + 2000) one after the other), a third of the 10 splits per round
with a new seed each round; N_OP rounds of the Op, N_GRAPH of the graph. Per form: cells,
chains, cells with R-hat > 1.01, the largest R-hat, the smallest bulk ESS, divergences and
seconds per cell (``nuts_mixing.md``; every cell in ``nuts_mixing.csv``, not tracked).

    .venv/bin/python benchmarks/bench_nuts_forms.py [--mixing 23 9]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

from report import markdown_table, write_report

from sparsebayes.inference import fit
from sparsebayes.models import GaussianKernel, RVMRegression, datasets

OUT = Path(__file__).parent / "results" / "nuts_forms.md"
MIXING_OUT = OUT.with_name("nuts_mixing.md")
MIXING_DATA = ("sinc", "diabetes:n_train=150")


def run(problem, form: str) -> dict:
    """One fit; ``form="op"`` samples the closed-form-gradient Op (``form="woodbury"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        post = fit(problem, "nuts", seed=1, draws=1000, tune=1000, chains=4, max_seconds=1e9,
                   form="woodbury" if form == "op" else "woodbury-graph")
        wall = time.perf_counter() - start
    compile_s = float(post.attrs.get("compile_time", 0.0))
    return {"form": "Op (closed-form gradient)" if form == "op" else "Woodbury graph",
            "wall s": wall, "compile s": compile_s, "wall after compile s": wall - compile_s,
            "sampling s": float(post.attrs["sampling_time"]),
            "divergences": int(post["sample_stats"]["diverging"].sum())}


def mixing_cells(form: str, rounds: int, first: int = 0):
    """The default study's regression NUTS cells under ``form``: round r fits the splits
    with (split + r) % 3 == 0 of each data set, seeded 7919 r + split."""
    import arviz as az

    from sparsebayes.inference.study import cells, specs
    from sparsebayes.inference.study.data import load_split, parse_data

    kind = specs.FAMILIES["rvm"]["regression"][0]
    for r in range(first, first + rounds):
        for spec in parse_data(list(MIXING_DATA)):
            for split in (s for s in range(10) if (s + r) % 3 == 0):
                sp = load_split(spec, split, 0, None)
                problem = cells._rvm_problem(kind, sp.X_train, sp.y_train, spec.width,
                                             {"centres": 30})
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    post = fit(problem, "nuts", form=form, chains=4, cores=1, draws=2000,
                               tune=500, seed=7919 * r + split)
                diag = az.summary(post, var_names=["alpha", "beta"], kind="diagnostics")
                yield {"form": form, "data": spec.label, "split": split,
                       "seed": 7919 * r + split, "s": time.perf_counter() - start,
                       "rhat": float(diag["r_hat"].max()),
                       "ess_bulk": float(diag["ess_bulk"].min()),
                       "divergences": int(post["sample_stats"]["diverging"].sum())}


def mixing_main(n_op: int, n_graph: int) -> None:
    import pandas as pd

    load = os.getloadavg()[0]
    cells = pd.DataFrame([row for form, n in (("woodbury", n_op), ("woodbury-graph", n_graph))
                          for row in mixing_cells(form, n)])
    cells.to_csv(MIXING_OUT.with_suffix(".csv"), index=False)
    rows = [{"form": form, "cells": len(g), "chains": 4 * len(g),
             "cells with R-hat > 1.01": int((g["rhat"] > 1.01).sum()),
             "max R-hat": g["rhat"].max(), "min bulk ESS": g["ess_bulk"].min(),
             "divergences": int(g["divergences"].sum()), "s per cell": g["s"].mean()}
            for form, g in cells.groupby("form", sort=False)]
    lines = ["# NUTS mixing: the closed-form-gradient Op against the Woodbury graph", "",
             "The default study's regression NUTS cells (sinc; diabetes, 150 training "
             "points), 30 k-means centres, nutpie, 4 chains x (500 + 2000) one after the "
             f"other, one BLAS thread; load average {load:.2f} at the start. "
             f"`python benchmarks/bench_nuts_forms.py --mixing {n_op} {n_graph}`.", "",
             *markdown_table(rows)]
    write_report(lines, MIXING_OUT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixing", nargs=2, type=int, metavar=("N_OP", "N_GRAPH"))
    args = ap.parse_args()
    if args.mixing:
        return mixing_main(*args.mixing)
    X, t = datasets.sinc(100, noise="gaussian", noise_scale=0.1, seed=0)
    problem = RVMRegression(X, t, kernel=GaussianKernel(width=3.0))
    load = os.getloadavg()[0]
    rows = [run(problem, form) for _ in range(2) for form in ("op", "graph")]
    lines = ["# NUTS on sinc N = 100: the collapsed likelihood's two forms", "",
             f"4 chains x (1000 + 1000), nutpie, one process, load average {load:.2f} at the "
             "start; rounds alternate, the first fit of each form compiles.", "",
             *markdown_table(rows)]
    write_report(lines, OUT)


if __name__ == "__main__":
    main()
