"""Multiclass RVM (one softmax model, T01 eq. 28) on scikit-learn's bundled digits.

``load_digits`` (1797 x 64, K = 10), a fixed random 1000 / 797 split, inputs standardised by
the training set, Gaussian width ``r = sqrt(64) = 8`` (scikit-learn's ``gamma = 1/64``).
Each fit runs in its own process (peak memory = its max RSS): the evidence fit with the
classic basis (a kernel at every training point: 10 010 candidate (basis, class) pairs) and
with a 300-centre k-means dictionary; ``rvm-ovr``, ten one-vs-rest binary RVMs by the evidence
(``OneVsRestClassifier(RVC(width=8))``, a kernel at every training point); fastrvm's RVC
(ten one-vs-rest binary RVMs, the peer; a benchmark-only extra); SVC (one-vs-one, C by
5-fold CV at the same width); and, with ``--baseline PYTHON``, the same evidence fit by
another checkout's interpreter (e.g. the code before the per-point softmax blocks, whose
surrogate was the N(K-1) x KM whitened design). Results in ``results/multiclass.md``.

    python benchmarks/bench_multiclass.py [--baseline /path/to/old/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WIDTH = 8.0


def _data():
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    tr, te = idx[:1000], idx[1000:]
    sc = StandardScaler().fit(X[tr])
    return sc.transform(X[tr]), y[tr], sc.transform(X[te]), y[te]


def peer_fit(method: str, width: float, Xtr, ytr, Xte, yte) -> tuple[float, float, int]:
    """Fit a peer (``"svc"``: SVC one-vs-one with C by 5-fold CV; ``"fastrvm"``: fastrvm's
    ten one-vs-rest binary RVMs, Tipping's USPS protocol, C++) at Gaussian width ``width``:
    (fit seconds, test error, support / relevance vectors)."""
    start = time.perf_counter()
    if method == "svc":
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        model = GridSearchCV(SVC(gamma=1 / width**2), {"C": np.logspace(-1, 3, 9)},
                             cv=5).fit(Xtr, ytr)
        elapsed = time.perf_counter() - start
        n_rv = int(model.best_estimator_.support_.size)
    else:
        from fastrvm import RVC

        model = RVC(kernel="rbf", gamma=1 / width**2).fit(Xtr, ytr)
        elapsed = time.perf_counter() - start
        n_rv = int(np.sum(model.n_relevance_))
    return elapsed, float(np.mean(model.predict(Xte) != yte)), n_rv


def ovr_fit(width: float, Xtr, ytr, Xte, yte, jobs: int = 1,
            posterior: str = "evidence") -> tuple[float, float, int]:
    """Tipping's (2001, §4.4.2) one-vs-rest protocol in the library: scikit-learn's
    ``OneVsRestClassifier`` over ten binary ``RVC(width=width, posterior=posterior)``
    (Bernoulli-logit, T01 eq. 23; a kernel at every training point), ``jobs`` fits at a
    time: (fit seconds, test error, relevance vectors summed over the ten classifiers, as
    fastrvm's count)."""
    from sklearn.multiclass import OneVsRestClassifier

    from sparsebayes.inference import RVC

    start = time.perf_counter()
    model = OneVsRestClassifier(RVC(width=width, posterior=posterior),
                               n_jobs=jobs).fit(Xtr, ytr)
    elapsed = time.perf_counter() - start
    n_rv = sum(int(e.posterior_.attrs["n_kernel_vectors"]) for e in model.estimators_)
    return elapsed, float(np.mean(model.predict(Xte) != yte)), n_rv


def worker(method: str) -> dict:
    Xtr, ytr, Xte, yte = _data()
    if method in ("svc", "fastrvm"):
        elapsed, err, n_rv = peer_fit(method, WIDTH, Xtr, ytr, Xte, yte)
    elif method == "rvm-ovr":
        elapsed, err, n_rv = ovr_fit(WIDTH, Xtr, ytr, Xte, yte)
    else:
        import warnings

        from sparsebayes.inference import fit, predict
        from sparsebayes.models import GaussianKernel, RVMClassification

        start = time.perf_counter()
        opts = {"centres": 300} if method == "rvm-centres300" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = fit(RVMClassification(Xtr, ytr, GaussianKernel(WIDTH), **opts), "evidence",
                       seed=0)
        elapsed = time.perf_counter() - start
        pred = predict(post, Xte)
        err = float(np.mean(pred.label != yte))
        n_rv = int(post.attrs["n_relevant"])
    return {"method": method, "fit s": elapsed, "test error": err, "vectors": n_rv,
            "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline", help="python of another checkout to time the same fit")
    ap.add_argument("--max-seconds", type=float, default=3600)
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    runs = [(sys.executable, m) for m in ("rvm", "rvm-centres300", "rvm-ovr", "fastrvm", "svc")]
    if args.baseline:
        runs.append((args.baseline, "rvm"))
    load = os.getloadavg()[0]
    rows = []
    for python, method in runs:
        try:
            out = subprocess.run([python, __file__, "--worker", method], capture_output=True,
                                 text=True, check=True, timeout=args.max_seconds, env=env)
        except subprocess.TimeoutExpired:  # a row all the same: the time is a lower bound
            print(f"{method} ({python}): over {args.max_seconds} s", flush=True)
            rows.append({"method": f"{method} (baseline {python}, not finished)",
                         "fit s": args.max_seconds, "test error": float("nan"),
                         "vectors": -1, "peak MB": float("nan")})
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if python != sys.executable:
            row["method"] = f"{method} (baseline {python})"
        rows.append(row)
        print(row, flush=True)
    ours = next(r for r in rows if r["method"] == "rvm")
    lines = ["# Multiclass RVM on digits (1000 / 797, K = 10, width 8)", "",
             f"{os.cpu_count()} cores, one BLAS thread, 1-minute load average {load:.2f} at "
             "the start; each fit in its own process.", "",
             "| method | fit s | test error | vectors | peak MB | time ratio (rvm / row) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['fit s']:.1f} | {r['test error']:.4f} | "
                     f"{r['vectors']} | {r['peak MB']:.0f} | {ours['fit s'] / r['fit s']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).parent / "results" / "multiclass.md"
    out.write_text(text)


if __name__ == "__main__":
    main()
