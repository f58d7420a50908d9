"""nutpie's mass-matrix adaptation, diagonal against low rank, on each RVM family's NUTS.

The latent-``f`` models (classification, Poisson, negative-binomial and Student-t counts or
targets; alpha integrated out, heavy-tailed weights) on a 30-centre dictionary, and the
collapsed Gaussian regression on Boston with 100 centres (``--boston``; the data file
from ``$SPARSEBAYES_DATA``). Each at the library's defaults (4 chains x 1000 draws after
1000 tuning steps) with ``adaptation="diag"`` and ``"low_rank"``, over seeds: sampling
time, mean tree depth, largest R-hat and smallest bulk ESS over the sampled variables,
divergences.

    .venv/bin/python benchmarks/bench_nuts_adaptation.py [--seeds 2] [--boston]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from bench_nuts_boston import boston_problem
from report import markdown_table, timed, write_report

from sparsebayes.inference import fit
from sparsebayes.models import (
    GaussianKernel,
    RVMClassification,
    RVMNegativeBinomialRegression,
    RVMPoissonRegression,
    RVMStudentTRegression,
    datasets,
)


def latent_problems() -> dict:
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-5, 5, 300))[:, None]
    rate = np.exp(1.5 + np.sin(x[:, 0]))
    nb = rng.negative_binomial(2.0, 2.0 / (2.0 + rate))
    poisson = rng.poisson(np.exp(1 + np.sin(x[:, 0])))
    xs = np.sort(rng.uniform(-10, 10, 100))[:, None]
    ts = np.sinc(xs[:, 0] / np.pi) + 0.1 * rng.standard_normal(100)
    out = rng.choice(100, 10, replace=False)
    ts[out] += rng.choice([-1, 1], 10) * rng.uniform(1, 3, 10)
    Xc, yc = datasets.ripley_mixture(100, seed=1)
    return {
        "classification (Ripley mixture, 100)": RVMClassification(
            Xc, yc, kernel=GaussianKernel(0.5), centres=30),
        "Poisson (300 counts)": RVMPoissonRegression(x, poisson, kernel=GaussianKernel(1.5),
                                                     centres=30),
        "negative binomial (300 counts, dispersion 2)": RVMNegativeBinomialRegression(
            x, nb, kernel=GaussianKernel(1.5), centres=30),
        "Student-t (sinc, 100 points, 10% outliers)": RVMStudentTRegression(
            xs, ts, kernel=GaussianKernel(2.0), centres=30),
    }


def one_run(name: str, problem, adaptation: str, seed: int) -> dict:
    post, wall = timed(fit, problem, "nuts", seed=seed, adaptation=adaptation, warn=False)
    return {"model": name, "adaptation": adaptation, "seed": seed,
            "sampling s": post.attrs["sampling_time"], "wall s": wall,
            "mean tree depth": float(post["sample_stats"]["tree_depth"].mean()),
            "max R-hat": post.attrs["max_rhat"], "min bulk ESS": post.attrs["min_ess_bulk"],
            "divergences": post.attrs["n_divergent"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--boston", action="store_true", help="also Boston, 100 centres")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    problems = latent_problems()
    if args.boston:
        problems["Gaussian regression (Boston, 506 points, 100 centres)"] = boston_problem()
    rows = []
    for name, problem in problems.items():
        for adaptation in ("diag", "low_rank"):
            for seed in range(args.seeds):
                rows.append(one_run(name, problem, adaptation, seed))
                print(rows[-1], flush=True)
    lines = ["# nutpie's mass-matrix adaptation: diagonal against low rank", "",
             f"{os.cpu_count()} cores, one BLAS thread, 1-minute load average {load:.2f} at the "
             "start; `python benchmarks/bench_nuts_adaptation.py --seeds "
             f"{args.seeds}{' --boston' if args.boston else ''}`; every fit at the library's "
             "defaults (4 chains x 1000 draws after 1000 tuning steps) but the adaptation. "
             "R-hat and ESS over the sampled variables (`diagnose`).", "",
             *markdown_table(rows), ""]
    write_report(lines, Path(__file__).parent / "results" / "nuts_adaptation.md")


if __name__ == "__main__":
    main()
