"""Learned ARD widths by the RVM's own evidence (``learn_width=True`` with
``widths_from_gp=False``, one Gaussian width per input; the default route, widths from a
GP, is in ``bench_kin40k.py``) side by
side with scikit-learn's ``GaussianProcessRegressor`` (ARD RBF + white noise, type-II ML,
one start) and with the RVM at one fixed width.

1. Friedman #1 as in Tipping (2001) §4.4.1 / App. E: 240 training points (noise sd 1), 10
   inputs (5 irrelevant), 1000 noise-free test points, inputs standardised; ``--sets`` data
   sets. Paper: eta-RVM test MSE 0.27 with 11.5 vectors, RVM (one width by CV) 2.80.
2. Scale: 8 inputs (Friedman #1's generator with 3 irrelevant inputs), N = 2000, standardised,
   ``centres=None`` (a kernel at every input) and ``centres=200`` (k-means dictionary); the
   GP is not run there (O(N^3) per step).

3. ``--kin40k``: KIN40K (8 inputs, ``$SPARSEBAYES_DATA/kin40k.npz``), ``--n`` training points
   drawn from its training set and 2000 test points: the RVM with 8 learned widths (default
   bounds) against our GP with 8 length scales (type-II ML, one start) and the RVM with one
   learned width, in one process; then one sparse fit at the 8 learned widths held fixed,
   ours and fastrvm's (the step the width search repeats); the GP and the learned widths on
   ``--draws`` - 1 more draws of training points; then ``--n-dict`` points with a
   k-means dictionary of ``--centres`` centres. Replaces the KIN40K section of ``ard.md``
   only.

Fit times are wall-clock seconds of one fit (one BLAS thread), medians over the data sets.
Writes ``benchmarks/results/ard.md``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ard.py [--sets 10]
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ard.py --kin40k [--n 2000] [--draws 3]
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
    """Tipping's protocol; with the defaults the data sets of
    tests/inference/rvm/test_evidence_ard.py (``datasets.friedman``: its first three data
    sets are the tests')."""
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
               "evidence", seed=0, draws=10, chains=1, widths_from_gp=False)
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


KIN40K_HEAD = "## KIN40K"


def kin40k(n: int, seed: int = 0, n_test: int = 2000):
    data = np.load(Path(os.environ.get("SPARSEBAYES_DATA", ROOT.parent / "shared" / "data"))
                   / "kin40k.npz")
    i = np.random.default_rng(seed).choice(data["X_train"].shape[0], n, replace=False)
    return data["X_train"][i], data["y_train"][i], data["X_test"][:n_test], data["y_test"][:n_test]


def kin40k_fits(X, t, Xt, tt, which: str, centres=None) -> dict:
    """One fit: ``which`` in ("ard", "iso", "gp"); time, test NLPD, vectors, widths."""
    from sparsebayes.inference import fit, predict
    from sparsebayes.inference.rvm.widths import estimator_width_range
    from sparsebayes.models import GaussianKernel, GPRegression, RVMRegression

    opts: dict = {"seed": 0, "draws": 10, "chains": 1, "widths_from_gp": False}
    if which == "gp":
        problem, opts = GPRegression(X, t), {"seed": 0, "restarts": 1}
    elif which == "ard":
        problem = RVMRegression(X, t, kernel=GaussianKernel(np.full(X.shape[1], 2.0)),
                                learn_width=True, centres=centres)
    else:  # one width, the estimators' floor (RVC's width=None)
        r_min, r0 = estimator_width_range(X)
        problem = RVMRegression(X, t, kernel=GaussianKernel(r0), learn_width=True,
                                centres=centres)
        opts["width_bounds"] = (r_min, 100 * r0)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit(problem, "evidence", **opts)
    secs = time.perf_counter() - t0
    nlpd = -float(np.mean(predict(post, Xt).logpdf(tt)))
    a = post.attrs
    width = (np.sqrt(2.0) * post["posterior"]["length_scale"].values.reshape(-1, X.shape[1])[0]
             if which == "gp" else np.asarray(a["width"]))
    vec = t.size if which == "gp" else post["posterior"].sizes["basis"]
    return {"s": secs, "nlpd": nlpd, "vec": vec, "width": width,
            "rounds": a.get("width_rounds", ""), "at_bound": a.get("width_at_bound", ""),
            "warnings": sorted({str(w.message)[:60] for w in caught})}


def fixed_width_fits(Z, t, Zt, tt) -> dict:
    """Ours and fastrvm's sparse fit on inputs already divided by their widths (width 1):
    time (kernel included), iterations, convergence, vectors, T01 eq. 15 at the returned
    hyperparameters, test NLPD (T01 eqs. 21-22)."""
    from bench_sequential import peer_bindings_fit
    from sklearn.metrics.pairwise import rbf_kernel

    from sparsebayes.inference import fit, predict
    from sparsebayes.inference.numerics import log_evidence
    from sparsebayes.inference.predictive.regression import gaussian_predictive
    from sparsebayes.models import GaussianKernel, RVMRegression

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ConvergenceWarning is the iterations column
        post = fit(RVMRegression(Z, t, kernel=GaussianKernel(1.0)), "evidence", seed=0,
                   draws=10, chains=1)
    rows = {"ours": {"s": time.perf_counter() - t0, "iter": post.attrs["n_iter"],
                     "converged": bool(post.attrs["converged"]),
                     "vec": post["posterior"].sizes["basis"],
                     "logev": post.attrs["log_evidence"],
                     "nlpd": -float(np.mean(predict(post, Zt).logpdf(tt)))}}
    t0 = time.perf_counter()
    r, Phi = peer_bindings_fit(Z, t, 1.0)
    secs = time.perf_counter() - t0
    idx = np.asarray(r["relevant_idx"]).ravel()
    alpha, beta = np.asarray(r["alpha"]).ravel(), float(r["beta"])
    P = np.column_stack([rbf_kernel(Zt, Z, gamma=1.0), np.ones(tt.size)])[:, idx]
    peer_pred = gaussian_predictive(P, np.asarray(r["mean"]).ravel(),
                                    np.asarray(r["covariance"]), beta)
    rows["fastrvm"] = {"s": secs, "iter": int(r["n_iter"]), "converged": int(r["status"]) == 0,
                       "vec": idx.size, "logev": log_evidence(Phi[:, idx], t, alpha, beta),
                       "nlpd": -float(np.mean(peer_pred.logpdf(tt)))}
    return rows


def kin40k_main(args) -> None:
    data = kin40k(args.n)
    rows = {}
    for name, which in (("GP, 8 length scales (ours, 1 start)", "gp"),
                        ("RVM, 8 widths learned", "ard"), ("RVM, 1 width learned", "iso")):
        rows[name] = kin40k_fits(*data, which)
        print(name, rows[name], flush=True)
    gp_s = rows["GP, 8 length scales (ours, 1 start)"]["s"]
    out = [KIN40K_HEAD + f": {args.n} training points, 2000 test points", "",
           f"One BLAS thread, load average {os.getloadavg()[0]:.2f} (a shared 2-core machine: "
           "times are noisy, ratios are within one run). Widths are RVM widths r (GP: "
           "sqrt(2) x length scale).", "",
           "| method | fit s | time / GP | test NLPD | vectors | rounds | widths on floor | "
           "widths |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['s']:.1f} | {r['s'] / gp_s:.2f} | {r['nlpd']:.3f} | "
                   f"{r['vec']} | {r['rounds']} | {r['at_bound']} | "
                   f"{' '.join(f'{w:.2f}' for w in r['width'])} |")
    w = rows["RVM, 8 widths learned"]["width"]
    out += ["", "One sparse fit at those 8 learned widths, held fixed (the step the width search "
            "repeats), ours and fastrvm's (Tipping & Faul's algorithm in C++), at most 10 000 "
            "iterations each:", "",
            "| algorithm | fit s | time / GP | iterations | converged | vectors | log evidence "
            "(T01 eq. 15) | test NLPD |", "|---|---|---|---|---|---|---|---|"]
    for name, r in fixed_width_fits(data[0] / w, data[1], data[2] / w, data[3]).items():
        out.append(f"| {name} | {r['s']:.1f} | {r['s'] / gp_s:.2f} | {r['iter']} | "
                   f"{r['converged']} | {r['vec']} | {r['logev']:.1f} | {r['nlpd']:.3f} |")
        print(out[-1], flush=True)
    if args.draws > 1:
        out += ["", f"The GP and the 8 learned widths on other draws of {args.n} training points "
                "(the same 2000 test points):", "",
                "| draw | GP s | RVM s | time / GP | GP NLPD | RVM NLPD | vectors | rounds |",
                "|---|---|---|---|---|---|---|---|"]
        for seed in range(1, args.draws):
            d = kin40k(args.n, seed=seed)
            g, r = kin40k_fits(*d, "gp"), kin40k_fits(*d, "ard")
            out.append(f"| {seed} | {g['s']:.1f} | {r['s']:.1f} | {r['s'] / g['s']:.2f} | "
                       f"{g['nlpd']:.3f} | {r['nlpd']:.3f} | {r['vec']} | {r['rounds']} |")
            print(out[-1], flush=True)
    if args.n_dict:
        d = kin40k(args.n_dict)
        r = kin40k_fits(*d, "ard", centres=args.centres)
        print("dictionary", r, flush=True)
        out += ["", f"{args.n_dict} training points, k-means dictionary of {args.centres} "
                "centres, 8 widths learned:", "",
                "| fit s | test NLPD | vectors | rounds | widths on floor | widths |",
                "|---|---|---|---|---|---|",
                f"| {r['s']:.1f} | {r['nlpd']:.3f} | {r['vec']} | {r['rounds']} | "
                f"{r['at_bound']} | {' '.join(f'{w:.2f}' for w in r['width'])} |"]
    path = ROOT / "benchmarks" / "results" / "ard.md"
    old = path.read_text() if path.exists() else ""
    keep = old.split(KIN40K_HEAD)[0].rstrip() + "\n\n" if old else ""
    path.write_text(keep + "\n".join(out) + "\n")
    print("\n".join(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=10)
    ap.add_argument("--kin40k", action="store_true")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--n-dict", type=int, default=10000)
    ap.add_argument("--centres", type=int, default=500)
    args = ap.parse_args()
    if args.kin40k:
        return kin40k_main(args)
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
