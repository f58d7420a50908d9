"""VRVM classification (``fit(problem, "vrvm")``, Bishop & Tipping 2000 §4) against the
Laplace evidence fit (``fit(problem, "evidence")``) in one run, side by side.

Data: Ripley-250 (width 0.5, Tipping 2001 §4.2; the 1000 test points), Ripley-100 over 20
random subsets, scikit-learn's Wisconsin breast cancer (569 x 30, standardised, a random
80/20 split, width 8 as in the study's ``breast_cancer_wisconsin``) and a 3-class problem
(three Gaussian blobs, 150 training / 900 test points, width 1.5; VRVM with Böhning's
bound). Both methods return the default result (1000 weight draws). Each method fits a small
problem once before timing, then the median of ``--repeats`` fits is reported. Target:
VRVM fit time within 10x of the Laplace evidence fit. Writes
``benchmarks/results/vrvm_classification.md``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vrvm_classification.py [--repeats 15]
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
DATA = os.environ.get("SPARSEBAYES_DATA", str(ROOT.parent / "shared" / "data"))
METHODS = ("evidence", "vrvm")


def problems():
    from sklearn.datasets import load_breast_cancer

    from sparsebayes.models import datasets

    Xtr, ytr = datasets.load_ripley("train", data_dir=DATA)
    Xte, yte = datasets.load_ripley("test", data_dir=DATA)
    Xb, yb = load_breast_cancer(return_X_y=True)
    perm = np.random.default_rng(0).permutation(yb.size)
    n_tr = int(0.8 * yb.size)
    tr, te = perm[:n_tr], perm[n_tr:]
    m, s = Xb[tr].mean(0), Xb[tr].std(0)
    rng = np.random.default_rng(1)
    centres = [(-2, 0), (2, 0), (0, 2.5)]

    def blobs(n_per):
        X = np.vstack([rng.normal(c, 1.0, (n_per, 2)) for c in centres])
        return X, np.repeat(np.arange(3), n_per)

    X3, y3 = blobs(50)
    X3t, y3t = blobs(300)
    return {
        "Ripley-250": (Xtr, ytr, Xte, yte, 0.5),
        f"breast cancer ({n_tr})": ((Xb[tr] - m) / s, yb[tr], (Xb[te] - m) / s, yb[te], 8.0),
        "3 blobs (150, K = 3)": (X3, y3, X3t, y3t, 1.5),
    }


def measure(method: str, data, repeats: int) -> dict:
    from sparsebayes.inference import fit, predict
    from sparsebayes.models import GaussianKernel, RVMClassification

    X, y, Xt, yt, width = data
    warm = np.random.default_rng(1).choice(len(y), min(50, len(y)), replace=False)
    fit(RVMClassification(X[warm], y[warm], kernel=GaussianKernel(width)), method)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        post = fit(RVMClassification(X, y, kernel=GaussianKernel(width)), method)
        times.append(time.perf_counter() - start)
    pred = predict(post, Xt)
    return {"method": method, "fit": statistics.median(times),
            "error": float(np.mean(pred.label != yt)),
            "log_loss": float(-np.mean(pred.logpdf(yt))), "n_vec": post.attrs["n_relevant"],
            "n_iter": post.attrs["n_iter"]}


def measure_subsets(method: str, n_subsets: int) -> dict:
    from sparsebayes.models import datasets

    Xtr, ytr = datasets.load_ripley("train", data_dir=DATA)
    Xte, yte = datasets.load_ripley("test", data_dir=DATA)
    runs = []
    for s in range(n_subsets):
        idx = np.random.default_rng(100 + s).choice(250, 100, replace=False)
        runs.append(measure(method, (Xtr[idx], ytr[idx], Xte, yte, 0.5), 3))
    out = {"fit": statistics.median(r["fit"] for r in runs)}
    out.update({k: float(np.mean([r[k] for r in runs]))
                for k in ("error", "log_loss", "n_vec", "n_iter")})
    return {"method": method, **out}


def table(name: str, rows: list[dict]) -> str:
    ev = next(r for r in rows if r["method"] == "evidence")
    out = [f"### {name}", "",
           "| method | fit (s) | error | log loss | vectors | iterations | fit / evidence |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['method']} | {r['fit']:.4f} | {100 * r['error']:.2f}% | "
                   f"{r['log_loss']:.4f} | {r['n_vec']:.3g} | {r['n_iter']:.4g} | "
                   f"{r['fit'] / ev['fit']:.2f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--subsets", type=int, default=20,
                        help="Ripley-100 subsets for the averaged table (0: skip)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"
                                             / "vrvm_classification.md"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sections = []
    for name, data in problems().items():
        rows = [measure(m, data, args.repeats) for m in METHODS]
        for r in rows:
            print(f"{name:22s} {r['method']:9s} fit {r['fit']:.4f} s  err "
                  f"{100 * r['error']:.2f}%  log loss {r['log_loss']:.4f}  vectors {r['n_vec']}",
                  flush=True)
        sections.append(table(name, rows))
    if args.subsets:
        rows = [measure_subsets(m, args.subsets) for m in METHODS]
        for r in rows:
            print(f"Ripley-100 x {args.subsets} {r['method']:9s} fit {r['fit']:.4f} s  err "
                  f"{100 * r['error']:.2f}%  log loss {r['log_loss']:.4f}", flush=True)
        sections.append(table(f"Ripley-100, mean over {args.subsets} random subsets "
                              "(median fit time)", rows))
    load = os.getloadavg()
    header = (
        "# VRVM classification benchmark\n\n"
        "`OPENBLAS_NUM_THREADS=" + os.environ.get("OPENBLAS_NUM_THREADS", "unset")
        + f"`, load average {load[0]:.1f} during the run (a shared 2-core machine: absolute "
        "times are inflated, ratios less so). Median of repeated fits; `python "
        "benchmarks/bench_vrvm_classification.py`. Target: VRVM fit within 10x of "
        "the Laplace evidence fit. `iterations`: the evidence method's sequential steps, the "
        "VRVM's updates of the variational parameters (3 sequential steps each).\n\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(header + "\n".join(sections))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
