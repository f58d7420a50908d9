"""The cost of each method's leave-one-out relative to its fit (``sparsebayes.inference.loo``).

Noisy sinc (Tipping 2001 App. E, noise sd 0.1), Gaussian kernel width 3, N = 100 (basis at
every training input) and N = 1000 (a 100-centre dictionary, the same basis for every
method so the sampled fits stay in minutes). Per method: wall time of ``fit``, of each LOO
estimator it offers, and their ratio; elpd/N of each estimator beside the mean log density
on 5000 new points. NUTS / ADVI: PSIS over the hyperparameter draws with the weights
integrated out (Bürkner et al. 2021); evidence / VRVM: "gaussian" (GPML eqs. 5.10-5.12 at
the fitted hyperparameters, optimistic) and "refit" (exact: N refits). At N = 1000 the refit
is timed on ``--refits`` left-out points and extrapolated to N (stated in the table).

    .venv/bin/python benchmarks/bench_loo.py [--refits 20]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit, loo, predict
from sparsebayes.inference.loo import training_problem
from sparsebayes.models import GaussianKernel, RVMRegression, datasets

METHODS = ("evidence", "vrvm", "advi", "nuts")


def timed(f, *args, **kwargs):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f(*args, **kwargs)
    return out, time.perf_counter() - start


def extrapolated_refit_seconds(post, method: str, n_refits: int) -> float:
    """Seconds for N refits, from ``n_refits`` of them (rows spread over the data)."""
    N = post["observed_data"]["t"].size
    rows = np.linspace(0, N - 1, n_refits).astype(int)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in rows:
            fit(training_problem(post, np.arange(N) != n), method, seed=1)
    return (time.perf_counter() - start) / n_refits * N


def bench(N: int, centres, n_refits: int) -> list[dict]:
    X, t = datasets.sinc(N, noise="gaussian", noise_scale=0.1, seed=0)
    Xt, tt = datasets.sinc(5000, noise="gaussian", noise_scale=0.1, seed=100)
    problem = RVMRegression(X, t, kernel=GaussianKernel(3.0), centres=centres)
    rows = []
    for method in METHODS:
        post, fit_s = timed(fit, problem, method, seed=1, progressbar=False) \
            if method in ("advi", "nuts") else timed(fit, problem, method, seed=1)
        held = float(predict(post, Xt).logpdf(tt).mean())
        estimators = ("psis",) if method in ("advi", "nuts") else ("gaussian", "refit")
        for est in estimators:
            row = {"N": N, "basis": "all inputs" if centres is None else f"{centres} centres",
                   "method": method, "LOO": est, "fit s": fit_s}
            if est == "refit" and N > 200:
                loo_s = extrapolated_refit_seconds(post, method, n_refits)
                row.update({"LOO s": loo_s, "LOO / fit": loo_s / fit_s, "elpd/N": "",
                            "note": f"extrapolated from {n_refits} refits"})
            else:
                res, loo_s = timed(loo, post, est, progressbar=False)
                row.update({"LOO s": loo_s, "LOO / fit": loo_s / fit_s,
                            "elpd/N": res.elpd / N, "note": ""})
            row["held-out mean log density"] = held
            rows.append(row)
            print(row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refits", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "loo.md"))
    args = ap.parse_args()
    X, t = datasets.sinc(20, seed=0)  # warm-up: imports and numba caches, not timed
    for method in ("evidence", "vrvm"):
        timed(fit, RVMRegression(X, t, kernel=GaussianKernel(3.0)), method)
    rows = bench(100, None, args.refits) + bench(1000, 100, args.refits)
    lines = [
        "# Leave-one-out cost relative to the fit",
        "",
        f"Noisy sinc (noise sd 0.1), Gaussian width 3, default options of each method, "
        f"{os.cpu_count()} CPU cores (load average at start {os.getloadavg()[0]:.1f}). "
        "NUTS / ADVI fit time includes compiling the model for that N (the evidence methods "
        "are warmed up first). "
        "elpd/N should be compared with the held-out mean log density: the 'gaussian' "
        "estimator of a type-II ML fit is optimistic, 'refit' is exact.",
        "",
        *markdown_table(rows), "",
    ]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
