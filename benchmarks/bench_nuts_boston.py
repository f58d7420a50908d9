"""NUTS's defaults on Boston with a 100-centre dictionary, over seeds: does it converge?

All 506 points (13 inputs and the target standardised), ``centres=100`` k-means centres,
Gaussian width sqrt(13), ``fit(problem, "nuts", seed=s)`` with the library's defaults
(nutpie, 4 chains x 1000 draws after 1000 tuning steps, and 2000 when those do not converge)
for each seed. Reported per seed:
divergences, the largest rank-normalised split R-hat over every variable (Vehtari et al.
2021; threshold 1.01) and where it is, the smallest bulk and tail ESS, and the times.

    .venv/bin/python benchmarks/bench_nuts_boston.py [--seeds 5] [--draws 1000 2000]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit
from sparsebayes.models import GaussianKernel, RVMRegression, datasets


def boston_problem() -> RVMRegression:
    """All 506 Boston points, inputs and target standardised, width sqrt(13), 100 centres."""
    X, t, _ = datasets.load_boston()
    X = (X - X.mean(0)) / X.std(0)
    t = (t - t.mean()) / t.std()
    return RVMRegression(X, t, GaussianKernel(np.sqrt(X.shape[1])), centres=100)


def one_seed(problem, seed: int, **options) -> dict:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit(problem, "nuts", seed=seed, **options)
    wall = time.perf_counter() - start
    summary = az.summary(post, kind="diagnostics")
    worst = summary["r_hat"].idxmax()
    return {"seed": seed, "draws per chain": post.attrs["draws"],
            "divergences": post.attrs["n_divergent"],
            "max R-hat": float(summary["r_hat"].max()), "at": str(worst),
            "min bulk ESS": float(summary["ess_bulk"].min()),
            "min tail ESS": float(summary["ess_tail"].min()),
            "compile s": post.attrs["compile_time"], "sampling s": post.attrs["sampling_time"],
            "wall s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--draws", type=int, nargs="*", default=[0],
                    help="draws per chain; 0 is the default (draws=None), each value one table")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    problem = boston_problem()
    lines = ["# NUTS's defaults on Boston, 100 centres, over seeds", "",
             f"{os.cpu_count()} cores, 1-minute load average {load:.2f} at the start; all 506 "
             "points, inputs and target standardised, width sqrt(13), `centres=100`; "
             "`fit(problem, \"nuts\", seed=s)` at the defaults (nutpie, 4 chains x 1000 draws, "
             "1000 tuning steps, and one more run of 2000 draws when R-hat or ESS over every "
             "variable fail) and with more draws per chain given. R-hat and ESS by "
             "`az.summary(kind=\"diagnostics\")` over every variable.", ""]
    for draws in args.draws:
        options = {} if draws == 0 else {"draws": draws}
        rows = []
        for seed in range(args.seeds):
            rows.append(one_seed(problem, seed, **options))
            print(rows[-1], flush=True)
        worst = max(r["max R-hat"] for r in rows)
        lines += [f"## {draws} draws per chain" if options else "## The default draws",
                  "", *markdown_table(rows), "",
                  f"Largest R-hat over the {len(rows)} seeds: {worst:.4f} (threshold 1.01); "
                  f"divergences in all: {sum(r['divergences'] for r in rows)}.", ""]
    write_report(lines, Path(__file__).parent / "results" / "nuts_boston.md")


if __name__ == "__main__":
    main()
