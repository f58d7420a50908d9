"""Evidence optimiser vs the RVM peers on noisy 2-D sinc (Tipping & Faul 2003 §5).

Each fit runs in a fresh subprocess, so its peak memory (``ru_maxrss``) is its own. Before
the timed fit every method fits a tiny problem (N = 50) once, so one-time costs (lazy
imports such as xarray loading dask on its first DataArray, BLAS thread start-up) are not
timed, for peers and us alike. Reported: median fit time, peak RSS (absolute, and above the
process after imports, warm-up and data), test RMSE against the noise-free function and the
number of relevance vectors, with ratios ours / peer. ``--blas-threads 1`` runs the workers
with ``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1`` (fastrvm's bundled OpenBLAS
follows it too); each setting is its own section of ``results/regression.md``, with the
load average. Peers are benchmark-only extras: ``pip install -e ".[bench]"``.

    python benchmarks/bench_regression.py [--sizes 250 500 1000 2000 4000] [--repeats 3]
                                          [--blas-threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WIDTH = 2.5  # Tipping & Faul §5; Tipping's exp(-|x-c|^2 / r^2), i.e. gamma = 1 / r^2
METHODS = ("sparsebayes", "sparsebayes-centres500", "sparsebayes-mackay", "fastrvm",
           "sklearn-rvm", "ARDRegression")
# max N: past it the method needs more than the machine's 24 GB (an N x N design or kernel
# matrix: 20 000 points = 3.2 GB each, and the peers hold several) or hours
SLOW = {"sparsebayes": 20_000, "sparsebayes-mackay": 2000, "fastrvm": 20_000,
        "sklearn-rvm": 4000, "ARDRegression": 1000}
CENTRES = 500  # the dictionary of sparsebayes-centres500 (k-means)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(method: str, n: int, seed: int, warm_up: bool = True) -> dict:
    from sparsebayes.models import datasets

    if warm_up:
        worker(method, 50, seed, warm_up=False)
    X, t = datasets.sinc2d(n, noise_sd=0.1, seed=seed)
    Xt, _ = datasets.sinc2d(2000, noise_sd=0.0, seed=seed + 10_000)
    ft = datasets.sinc_function(np.linalg.norm(Xt, axis=1))
    gamma = 1.0 / WIDTH**2
    if method.startswith("sparsebayes"):
        from sparsebayes.inference import fit, predict
        from sparsebayes.models import GaussianKernel, RVMRegression

        algo = "evidence-mackay" if method.endswith("mackay") else "evidence"
        centres = min(CENTRES, n) if method.endswith("centres500") else None
        base = _rss_mb()
        start = time.perf_counter()  # the k-means dictionary is part of the fit's time
        post = fit(RVMRegression(X, t, kernel=GaussianKernel(WIDTH), centres=centres),
                   method=algo, seed=0)
        elapsed = time.perf_counter() - start
        pred, n_rv = predict(post, Xt).mean, post.attrs["n_relevant"]
    elif method == "fastrvm":
        from fastrvm import RVR

        base = _rss_mb()
        start = time.perf_counter()
        model = RVR(kernel="rbf", gamma=gamma, fit_intercept=True).fit(X, t)
        elapsed = time.perf_counter() - start
        pred, n_rv = model.predict(Xt), int(model.n_relevance_)
    elif method == "sklearn-rvm":
        from sklearn_rvm import EMRVR

        base = _rss_mb()
        start = time.perf_counter()
        model = EMRVR(kernel="rbf", gamma=gamma)
        model.fit(X, t)  # its fit returns None
        elapsed = time.perf_counter() - start
        pred, n_rv = model.predict(Xt), int(len(model.relevance_))
    elif method == "ARDRegression":
        from sklearn.linear_model import ARDRegression
        from sklearn.metrics.pairwise import rbf_kernel

        base = _rss_mb()
        start = time.perf_counter()
        Phi = np.hstack([np.ones((n, 1)), rbf_kernel(X, X, gamma=gamma)])
        model = ARDRegression(fit_intercept=False, threshold_lambda=1e12).fit(Phi, t)
        elapsed = time.perf_counter() - start
        pred = np.hstack([np.ones((len(Xt), 1)), rbf_kernel(Xt, X, gamma=gamma)]) @ model.coef_
        n_rv = int(np.sum(model.lambda_ < 1e12))
    else:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    return {"method": method, "n": n, "seed": seed, "time": elapsed, "peak_mb": _rss_mb(),
            "above_base_mb": _rss_mb() - base, "rmse": float(np.sqrt(np.mean((pred - ft) ** 2))),
            "n_rv": int(n_rv)}


def run(sizes, repeats, methods, max_seconds, env=None) -> list[dict]:
    """Fits in fresh subprocesses, the methods interleaved within each seed so that the
    load of other jobs on the machine falls on all of them alike."""
    rows = []
    for n in sizes:
        todo = [m for m in methods if n <= SLOW.get(m, n)]
        for m in set(methods) - set(todo):
            print(f"  skip {m} at N={n} (over its size cap {SLOW[m]})", flush=True)
        for seed in range(repeats):
            for method in list(todo):
                cmd = [sys.executable, __file__, "--worker", method, str(n), str(seed)]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                         timeout=max_seconds, env=env)
                except subprocess.TimeoutExpired:
                    print(f"  {method} N={n}: over {max_seconds} s, skipped", flush=True)
                    todo.remove(method)
                    continue
                except subprocess.CalledProcessError as exc:
                    print(f"  {method} N={n} failed: {exc.stderr.strip().splitlines()[-1]}")
                    todo.remove(method)
                    continue
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                r = rows[-1]
                print(f"  N={n:5d} {method:20s} {r['time']:8.3f} s {r['peak_mb']:7.0f} MB "
                      f"rmse {r['rmse']:.4f} RVs {r['n_rv']}", flush=True)
    return rows


def table(rows: list[dict], ours_name: str = "sparsebayes") -> str:
    med: dict[tuple[str, int], dict] = {}
    for key in {(r["method"], r["n"]) for r in rows}:
        sel = [r for r in rows if (r["method"], r["n"]) == key]
        med[key] = {k: statistics.median(r[k] for r in sel)
                    for k in ("time", "peak_mb", "above_base_mb", "rmse", "n_rv")}
    lines = ["| N | method | fit s | peak MB | MB above base | test RMSE | RVs | time ratio "
             f"({ours_name}/peer) | peak ratio | RMSE ratio |", "|" + "---|" * 10]
    for n in sorted({r["n"] for r in rows}):
        ours = med.get((ours_name, n))
        for method in METHODS:
            m = med.get((method, n))
            if m is None:
                continue
            ratios = ["", "", ""]
            if ours and method != ours_name:
                ratios = [f"{ours['time'] / m['time']:.2f}",
                          f"{ours['peak_mb'] / m['peak_mb']:.2f}",
                          f"{ours['rmse'] / m['rmse']:.3f}"]
            lines.append(f"| {n} | {method} | {m['time']:.3f} | {m['peak_mb']:.0f} | "
                         f"{m['above_base_mb']:.0f} | {m['rmse']:.4f} | {m['n_rv']:.0f} | "
                         + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--max-seconds", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="sizes 250 1000, one repeat")
    ap.add_argument("--scale", action="store_true",
                    help="the scale table (results/scale.md): N = 1e4, 1e5, 1e6 with "
                         "centres=500 against the full RVM and the peers up to where each "
                         "stops; one repeat, one BLAS thread")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS/OpenMP threads of the workers (default: the library default)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeats = [250, 1000], 1
    if args.scale:
        args.sizes, args.repeats, args.blas_threads = [4000, 10_000, 100_000, 1_000_000], 1, 1
        args.methods = ["sparsebayes-centres500", "sparsebayes", "fastrvm", "sklearn-rvm"]
        args.max_seconds = max(args.max_seconds, 900)
    env = None
    if args.blas_threads is not None:
        env = dict(os.environ, **{v: str(args.blas_threads) for v in
                                  ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    load_before = os.getloadavg()[0]
    rows = run(args.sizes, args.repeats, args.methods, args.max_seconds, env)
    load_after = os.getloadavg()[0]
    threads = "default" if args.blas_threads is None else str(args.blas_threads)
    if args.scale:
        text = (f"# Scale: centres=500 (k-means dictionary) vs the full RVM and the peers, "
                f"noisy 2-D sinc\n\n{os.cpu_count()} cores, one BLAS thread; load average "
                f"{load_before:.2f} before, {load_after:.2f} after; one fit per cell, each in "
                "its own process (peak = its max RSS); the k-means dictionary is inside the "
                "fit time. Methods past their size cap (an N x N design or kernel matrix "
                "beyond memory) are absent; ratios are sparsebayes-centres500 / the row's "
                f"method.\n\n{table(rows, 'sparsebayes-centres500')}\n")
        out = Path(__file__).parent / "results" / "scale.md"
        out.write_text(text)
        print(text, f"written to {out}")
        return
    section = (f"## BLAS threads: {threads}\n\n{os.cpu_count()} cores; 1-minute load average "
               f"{load_before:.2f} before, {load_after:.2f} after (other jobs share the cores); "
               f"{args.repeats} repeats (seeds) per cell.\n\n{table(rows)}\n")
    print(section)
    out = Path(__file__).parent / "results" / "regression.md"
    out.parent.mkdir(exist_ok=True)
    sections = {}
    if out.exists():  # keep the other thread settings' sections
        for part in out.read_text().split("\n## ")[1:]:
            sections[part.split("\n", 1)[0]] = "## " + part.rstrip("\n") + "\n"
    sections[f"BLAS threads: {threads}"] = section
    out.write_text("# Evidence optimiser vs peers, noisy 2-D sinc (medians)\n\n"
                   + "\n".join(sections[k] for k in sorted(sections)))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
