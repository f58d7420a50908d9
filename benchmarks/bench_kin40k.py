"""KIN40K side by side in one run: the exact GP on 2000 training points, the sparse GP
(Titsias 2009) on all 10 000 (``--inducing`` k-means inputs held fixed, and ``--learn``
inputs learned with the hyperparameters), the RVM with 8 learned widths on 2000 points
(widths from a GP's type-II ML, the default, on ``--draws`` draws; the RVM's own evidence
rounds on the first draw) and the RVM on 10 000 points with a k-means dictionary of ``--centres``
centres. Test: the first 2000 of KIN40K's test points; time is wall-clock seconds of one
fit (one BLAS thread). Writes ``benchmarks/results/kin40k.md``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_kin40k.py [--draws 3] [--inducing 1000]
        [--learn 600]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from bench_ard import kin40k

ROOT = Path(__file__).resolve().parents[1]


def one_fit(problem, X_test, t_test, **options) -> dict:
    from sparsebayes.inference import fit, predict

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit(problem, "evidence", seed=0, **options)
    seconds = time.perf_counter() - start
    a = post.attrs
    vectors = (post["posterior"].sizes["basis"] if "basis" in post["posterior"].sizes
               else a.get("inducing", problem.X.shape[0]))
    return {"s": seconds, "nlpd": -float(np.mean(predict(post, X_test).logpdf(t_test))),
            "vec": vectors, "route": a.get("width_route", ""),
            "route_s": a.get("width_route_seconds", np.nan), "conv": a["converged"],
            "rounds": a.get("width_rounds", ""),
            "warnings": sorted({str(w.message)[:70] for w in caught})}


def main() -> None:
    from sparsebayes.models import GaussianKernel, GPRegression, RVMRegression

    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--n-large", type=int, default=10000)
    ap.add_argument("--inducing", type=int, default=1000)
    ap.add_argument("--centres", type=int, default=1000)
    ap.add_argument("--learn", type=int, default=600,
                    help="inducing inputs of the sparse GP that learns them (0: none)")
    args = ap.parse_args()

    def ard(X, t, **kw):
        return RVMRegression(X, t, kernel=GaussianKernel(np.full(X.shape[1], 2.0)),
                             learn_width=True, **kw)

    # the numba kernels compiled (or loaded from their cache) before any fit is timed
    one_fit(ard(*kin40k(200, seed=99)[:2]), *kin40k(200, seed=99)[2:], draws=10, chains=1)
    rows = []
    for draw in range(args.draws):
        X, t, Xt, tt = kin40k(args.n, seed=draw)
        gp = one_fit(GPRegression(X, t), Xt, tt, restarts=1)
        rows.append(("exact GP", args.n, draw, gp, gp["s"]))
        rvm = one_fit(ard(X, t), Xt, tt, draws=10, chains=1)
        rows.append(("RVM, 8 widths from the GP (default)", args.n, draw, rvm, gp["s"]))
        if draw == 0:
            rounds = one_fit(ard(X, t), Xt, tt, draws=10, chains=1, widths_from_gp=False)
            rows.append(("RVM, 8 widths by its own evidence (rounds)", args.n, draw, rounds,
                         gp["s"]))
        print(*(f"{r[0]} draw {r[2]}: {r[3]['s']:.1f} s NLPD {r[3]['nlpd']:.3f}"
                for r in rows[-3:]), sep="\n", flush=True)
    gp_s = float(np.mean([r[3]["s"] for r in rows if r[0] == "exact GP"]))
    X, t, Xt, tt = kin40k(args.n_large, seed=0)
    sparse = one_fit(GPRegression(X, t, inducing=args.inducing), Xt, tt, restarts=1)
    rows.append((f"sparse GP (VFE, {args.inducing} inducing)", args.n_large, 0, sparse, gp_s))
    if args.learn:
        learned = one_fit(GPRegression(X, t, inducing=args.learn, learn_inducing=True), Xt,
                          tt, restarts=1)
        rows.append((f"sparse GP (VFE, {args.learn} inducing inputs learned)", args.n_large, 0,
                     learned, gp_s))
    big = one_fit(ard(X, t, centres=args.centres), Xt, tt, draws=10, chains=1)
    rows.append((f"RVM, 8 widths from the GP, {args.centres}-centre dictionary",
                 args.n_large, 0, big, gp_s))
    load = os.getloadavg()[0]
    out = [
        "# KIN40K side by side (issue 48's table)", "",
        f"`benchmarks/bench_kin40k.py --draws {args.draws} --inducing {args.inducing} "
        f"--centres {args.centres} --learn {args.learn}`: one process, one BLAS thread, load "
        f"average {load:.2f} at the end. Test: the first 2000 of KIN40K's test points. "
        "`time / exact GP`: against "
        "the exact GP on the same draw (2000 points) or their mean (10 000 points). "
        "Vectors: relevance vectors (RVM), inducing inputs (sparse GP), training points "
        "(exact GP). Route s: the GP type-II ML that gave the RVM its widths.", "",
        "| model | N | draw | fit s | time / exact GP | test NLPD | vectors | route | route s "
        "| converged | warnings |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, draw, r, ref in rows:
        out.append(f"| {name} | {n} | {draw} | {r['s']:.1f} | {r['s'] / ref:.2f} | "
                   f"{r['nlpd']:.3f} | {r['vec']} | {r['route']} | "
                   f"{'' if np.isnan(r['route_s']) else f'{r['route_s']:.1f}'} | {r['conv']} | "
                   f"{'; '.join(r['warnings'])} |")
    path = ROOT / "benchmarks" / "results" / "kin40k.md"
    path.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
