"""Learned ARD widths (``learn_width=True``, one Gaussian width per input) side by
side with scikit-learn's ``GaussianProcessRegressor`` (ARD RBF + white noise, type-II ML,
one start) and with the RVM at one fixed width.

1. Friedman #1 as in Tipping (2001) §4.4.1 / App. E: 240 training points (noise sd 1), 10
   inputs (5 irrelevant), 1000 noise-free test points, inputs standardised; ``--sets`` data
   sets. Paper: eta-RVM test MSE 0.27 with 11.5 vectors, RVM (one width by CV) 2.80.
2. Scale: 8 inputs (Friedman #1's generator with 3 irrelevant inputs), N = 2000, standardised,
   ``centres=None`` (a kernel at every input) and ``centres=200`` (k-means dictionary); the
   GP is not run there (O(N^3) per step).

Fit times are wall-clock seconds of one fit (one BLAS thread), medians over the data sets.
Writes ``benchmarks/results/ard.md``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ard.py [--sets 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXED_WIDTHS = (4.0, 5.0, 6.0)  # the isotropic baseline's grid, as in the tests


def friedman1(seed: int, n: int = 240, d: int = 10):
    """Tipping's protocol; with the defaults the data sets of tests/test_evidence_ard.py
    (``datasets.friedman``: its first three data sets are the tests')."""
    from sklearn.datasets import make_friedman1

    from sparsebayes.models import datasets

    if (n, d) == (240, 10):
        X, t = datasets.friedman(240, 1, seed=seed)
        Xt, ft = datasets.friedman(1000, 1, seed=1000 + seed, noise=0.0)
    else:
        X, t = make_friedman1(n, n_features=d, noise=1.0, random_state=seed)
        Xt, ft = make_friedman1(n, n_features=d, noise=0.0, random_state=10_000 + seed)
    m, s = X.mean(0), X.std(0)
    return (X - m) / s, t, (Xt - m) / s, ft


def rvm(X, t, Xt, ft, *, ard: bool, centres=None, width: float = 5.0) -> dict:
    from sparsebayes.inference import fit, predict
    from sparsebayes.models import GaussianKernel, RVMRegression

    kernel = GaussianKernel(np.full(X.shape[1], width) if ard else width)
    t0 = time.perf_counter()
    post = fit(RVMRegression(X, t, kernel=kernel, learn_width=ard, centres=centres),
               "evidence", seed=0, draws=10, chains=1)
    secs = time.perf_counter() - t0
    return {"s": secs, "mse": float(np.mean((predict(post, Xt).mean - ft) ** 2)),
            "vec": post["posterior"].sizes["basis"], "width": np.asarray(post.attrs["width"])}


def gp(X, t, Xt, ft) -> dict:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel() * RBF(np.ones(X.shape[1]), (1e-2, 1e4)) + WhiteKernel()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bound warnings of irrelevant length-scales
        model = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, t)
    secs = time.perf_counter() - t0
    ls = model.kernel_.k1.k2.length_scale
    return {"s": secs, "mse": float(np.mean((model.predict(Xt) - ft) ** 2)), "vec": t.size,
            "width": np.sqrt(2.0) * ls}  # GP length-scale l = RVM width r / sqrt(2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=10)
    args = ap.parse_args()
    fixed = {f"RVM, width {w:g} fixed": w for w in FIXED_WIDTHS}
    rows = {"RVM, ARD widths learned": [], **{k: [] for k in fixed}, "GP (scikit-learn)": []}
    for seed in range(args.sets):
        data = friedman1(seed)
        rows["RVM, ARD widths learned"].append(rvm(*data, ard=True))
        for name, w in fixed.items():
            rows[name].append(rvm(*data, ard=False, width=w))
        rows["GP (scikit-learn)"].append(gp(*data))
        print(seed, {k: round(v[-1]["mse"], 3) for k, v in rows.items()}, flush=True)
    ref = statistics.median(r["s"] for r in rows["RVM, ARD widths learned"])
    load = os.getloadavg()[0]
    out = [
        "# Learned ARD widths: Friedman #1 and an N = 2000 fit",
        "",
        f"One BLAS thread, load average {load:.2f}; times are medians of one fit per data set.",
        "",
        f"## Friedman #1 (Tipping 2001 §4.4.1): {args.sets} data sets of 240 points, 1000 "
        "noise-free test points",
        "",
        "Paper: eta-RVM test MSE 0.27 with 11.5 vectors; RVM with one width by 5-fold CV 2.80.",
        "",
        "| method | test MSE (mean) | vectors (mean) | fit s (median) | time ratio (ARD RVM / "
        "method) | widths 1-5 (median) | widths 6-10 (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs in rows.items():
        med = np.exp(np.median(np.log([r["width"] for r in rs]), axis=0))
        secs = statistics.median(r["s"] for r in rs)
        wide = med.size > 1
        out.append(
            f"| {name} | {np.mean([r['mse'] for r in rs]):.3f} | "
            f"{np.mean([r['vec'] for r in rs]):.1f} | {secs:.2f} | {ref / secs:.2f} | "
            f"{' '.join(f'{w:.1f}' for w in med[:5]) if wide else f'{med[0]:.1f}'} | "
            f"{' '.join(f'{w:.0f}' for w in med[5:]) if wide else ''} |")
    ard = rows["RVM, ARD widths learned"]
    W = np.log([r["width"] for r in ard])
    group = np.exp(W[:, 5:].mean(1) - W[:, :5].mean(1))
    best = min(np.mean([r["mse"] for r in rows[k]]) for k in fixed)
    mse = np.mean([r["mse"] for r in ard])
    out += ["", f"Best fixed width / learned ARD widths, mean test MSE: {best / mse:.1f}x "
            "(target >= 3). Irrelevant / relevant widths (geometric means of inputs 6-10 and "
            f"1-5) per data set: min {group.min():.1f}, median {np.median(group):.1f} "
            "(target >= 10)."]
    out += ["", "## 8 inputs (3 irrelevant), N = 2000, 2000 noise-free test points", "",
            "| centres | test MSE | vectors | fit s | widths |", "|---|---|---|---|---|"]
    data = friedman1(0, n=2000, d=8)
    for centres in (None, 200):
        r = rvm(*data, ard=True, centres=centres)
        out.append(f"| {centres} | {r['mse']:.3f} | {r['vec']} | {r['s']:.1f} | "
                   f"{' '.join(f'{w:.1f}' for w in r['width'])} |")
        print(out[-1], flush=True)
    path = ROOT / "benchmarks" / "results" / "ard.md"
    path.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
