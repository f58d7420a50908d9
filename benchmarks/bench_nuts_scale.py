"""NUTS with a basis dictionary: cost per draw set by M, not N.

1. Boston house prices (455 training points of the 506, 13 standardised inputs, target
   standardised), ``centres=100`` k-means centres, Gaussian width sqrt(13), 4 chains x 1000
   draws (1000 tuning), nutpie, including compilation. Beside it the evidence fit of the same
   dictionary model. (The classic RVM, M = 456, costs O(M^3) per gradient: one chain of
   200 + 200 draws took 85 s already at N = 200.) Target: < 3 min, 0
   divergences, R-hat < 1.01.
2. Time per draw at fixed M = 100 for N = 200, 1000, 5000 (noisy 2-D sinc): flat in N.
3. ``--large`` points (10 000) of the same sinc on 100 centres at NUTS's defaults (draws and
   chains not given: 4 x 1000, sampled once more with twice the draws when R-hat or ESS
   fail): minutes, converged.

    .venv/bin/python benchmarks/bench_nuts_scale.py [--draws 1000] [--chains 4]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit, predict
from sparsebayes.models import GaussianKernel, RVMRegression, datasets


def nuts_row(name: str, problem, X_test, t_test, **options) -> dict:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = fit(problem, "nuts", seed=1, warn=False, **options)
    wall = time.perf_counter() - start
    a = post.attrs
    draws = post["posterior"].sizes["chain"] * post["posterior"].sizes["draw"]
    pred = predict(post, X_test)
    return {"model": name, "N": problem.X.shape[0], "M": post["posterior"].sizes["basis"],
            "divergences": a["n_divergent"], "max R-hat": a["max_rhat"],
            "min bulk ESS": a["min_ess_bulk"], "compile s": a["compile_time"],
            "sampling s": a["sampling_time"], "wall s": wall,
            "ms per draw": 1000 * a["sampling_time"] / draws,
            "draws per chain": post["posterior"].sizes["draw"],
            "test RMSE": float(np.sqrt(np.mean((pred.mean - t_test) ** 2))),
            "test NLPD": float(-np.mean(pred.logpdf(t_test)))}


def boston(draws: int, chains: int) -> list[dict]:
    X, t, _ = datasets.load_boston()
    rng = np.random.default_rng(0)
    idx = rng.permutation(t.size)
    tr, te = idx[:455], idx[455:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    X = (X - mu) / sd
    t = (t - t[tr].mean()) / t[tr].std()
    kernel = GaussianKernel(np.sqrt(X.shape[1]))
    rows = []
    dic = RVMRegression(X[tr], t[tr], kernel, centres=100)
    rows.append(nuts_row("NUTS, centres=100", dic, X[te], t[te], draws=draws, chains=chains))
    start = time.perf_counter()
    ev = fit(dic, "evidence", seed=0)
    p = predict(ev, X[te])
    rows.append({"model": "evidence, centres=100", "N": 455, "M": ev.attrs["n_relevant"],
                 "wall s": time.perf_counter() - start,
                 "test RMSE": float(np.sqrt(np.mean((p.mean - t[te]) ** 2))),
                 "test NLPD": float(-np.mean(p.logpdf(t[te])))})
    print(rows, flush=True)
    return rows


def per_draw(draws: int, chains: int) -> list[dict]:
    rows = []
    for n in (200, 1000, 5000):
        X, t = datasets.sinc2d(n, noise_sd=0.1, seed=n)
        Xt, _ = datasets.sinc2d(1000, noise_sd=0.0, seed=n + 1)
        ft = datasets.sinc_function(np.linalg.norm(Xt, axis=1))
        problem = RVMRegression(X, t, GaussianKernel(2.5), centres=100)
        rows.append(nuts_row("NUTS, centres=100", problem, Xt, ft, draws=draws,
                             tune=draws, chains=chains))
        print(rows[-1], flush=True)
    return rows


def at_defaults(n: int) -> list[dict]:
    X, t = datasets.sinc2d(n, noise_sd=0.1, seed=n)
    Xt, _ = datasets.sinc2d(1000, noise_sd=0.0, seed=n + 1)
    ft = datasets.sinc_function(np.linalg.norm(Xt, axis=1))
    row = nuts_row("NUTS, centres=100, defaults", RVMRegression(X, t, GaussianKernel(2.5),
                                                                 centres=100), Xt, ft)
    print(row, flush=True)
    return [row]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--large", type=int, default=10000)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    a = boston(args.draws, args.chains)
    b = per_draw(min(args.draws, 500), min(args.chains, 2))
    c = at_defaults(args.large)
    lines = ["# NUTS with a basis dictionary", "",
             f"{os.cpu_count()} cores, 1-minute load average {load:.2f} at the start (other "
             "jobs share the cores); nutpie; wall time includes compilation.", "",
             f"## Boston (455 / 51 split, standardised), {args.chains} x {args.draws} draws",
             "", *markdown_table(a), "",
             "## Time per draw at fixed M = 100 (noisy 2-D sinc), 2 x 500 draws", "",
             *markdown_table(b), "",
             f"## {args.large} points (noisy 2-D sinc), M = 100, NUTS's defaults", "",
             "Draws per chain: " + str(c[0]["draws per chain"]) + " (4 x 1000, then twice "
             "that once when R-hat > 1.01 or ESS < 100 per chain).", "",
             *markdown_table(c), ""]
    write_report(lines, Path(__file__).parent / "results" / "nuts_scale.md")


if __name__ == "__main__":
    main()
