"""The cost of each point method's default leave-one-out relative to its fit, side by side in
one run (``sparsebayes.inference.loo``).

Regression: noisy sinc (Tipping 2001 App. E, noise sd 0.1), Gaussian kernel width 3, a basis
at every training input; methods evidence (Tipping & Faul 2003), VRVM (Bishop & Tipping
2000; with its default flat prior, refitted cold, and with a weakly informative one,
warm-started) and the GP (type-II ML). Classification: Ripley's synthetic data (Ripley 1996; the 250
training points, and 1000 from his test set), width 0.5; the RVM by the Laplace evidence and
the GP classifier. Per row: the wall time of ``fit``, of ``loo(post)`` with its default
estimator (``results/loo.md`` holds the run of the earlier default: exact warm-started
refits up to 2000 / 1000 points, else 10 folds; today's is the subsampled one), their
ratio, and elpd/N beside the mean log density on held-out data. Each row's fit and LOO run
back to back in this one process, one BLAS thread (the fits' own setting).

    .venv/bin/python benchmarks/bench_loo.py [--sizes 100,1000,5000] [--gp-max 1000]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from report import markdown_table, timed, write_report

from sparsebayes.inference import fit, loo, predict
from sparsebayes.models import (
    GaussianKernel,
    GPClassification,
    GPRegression,
    RVMClassification,
    RVMRegression,
    datasets,
)

DATA = os.environ.get("SPARSEBAYES_DATA", str(Path(__file__).resolve().parents[2] / "shared"
                                               / "data"))


def row(task, N, name, problem, method, X_test, y_test):
    fit(problem, method, seed=1)  # warm-up: numba / compile caches
    post, fit_s = timed(fit, problem, method, seed=1)
    res, loo_s = timed(loo, post, progressbar=False)
    held = predict(post, X_test).logpdf(y_test).mean()
    return {"task": task, "N": N, "method": name, "estimator": res.estimator,
            "fit s": fit_s, "LOO s": loo_s, "LOO / fit": loo_s / fit_s,
            "elpd/N": res.elpd / N, "held-out mean log density": held}


def regression_rows(sizes, gp_max, vrvm_max):
    Xt, tt = datasets.sinc(5000, noise="gaussian", noise_scale=0.1, seed=100)
    out = []
    for N in sizes:
        X, t = datasets.sinc(N, noise="gaussian", noise_scale=0.1, seed=0)
        problem = RVMRegression(X, t, kernel=GaussianKernel(3.0))
        out.append(row("regression", N, "evidence", problem, "evidence", Xt, tt))
        print(out[-1], flush=True)
        weak = RVMRegression(X, t, kernel=GaussianKernel(3.0), prior="weakly_informative")
        for name, p, limit in [("vrvm (flat prior)", problem, vrvm_max[0]),
                               ("vrvm (weakly informative)", weak, vrvm_max[1])]:
            if N <= limit:
                out.append(row("regression", N, name, p, "vrvm", Xt, tt))
                print(out[-1], flush=True)
        if N <= gp_max:
            out.append(row("regression", N, "gp", GPRegression(X, t), "evidence", Xt, tt))
            print(out[-1], flush=True)
    return out


def classification_rows(gpc_max):
    train, test = (datasets.load_ripley(split, data_dir=DATA) for split in ("train", "test"))
    out = []
    for N, (X, y), (Xt, yt) in [(250, train, test), (1000, test, train)]:
        out.append(row("classification", N, "evidence",
                       RVMClassification(X, y, kernel=GaussianKernel(0.5)), "evidence", Xt, yt))
        print(out[-1], flush=True)
        if N <= gpc_max:
            out.append(row("classification", N, "gp", GPClassification(X, y), "evidence",
                           Xt, yt))
            print(out[-1], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--tasks", default="regression,classification")
    ap.add_argument("--gp-max", type=int, default=1000, help="largest N for GP regression")
    ap.add_argument("--gpc-max", type=int, default=250, help="largest N for GP classification")
    ap.add_argument("--vrvm-max", default="100,1000",
                    help="largest N for VRVM with the flat / weakly informative prior")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "loo.md"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    vrvm_max = [int(v) for v in args.vrvm_max.split(",")]
    rows = []
    if "regression" in args.tasks:
        rows += regression_rows(sizes, args.gp_max, vrvm_max)
    if "classification" in args.tasks:
        rows += classification_rows(args.gpc_max)
    cols = ["task", "N", "method", "estimator", "fit s", "LOO s", "LOO / fit", "elpd/N",
            "held-out mean log density"]
    write_report(["# Leave-one-out cost relative to the fit", "",
        f"Default estimator of each point method (named in each row); "
        f"{os.cpu_count()} CPU cores, load average at "
        f"start {os.getloadavg()[0]:.1f}. elpd/N beside the held-out mean log density "
        "(sinc: 5000 new points; Ripley: the other split).", "",
        *markdown_table([{c: r[c] for c in cols} for r in rows])], args.out)


if __name__ == "__main__":
    main()
