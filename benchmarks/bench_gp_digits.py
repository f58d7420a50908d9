"""The 10-class GP classifier at size: scikit-learn's digits (8 x 8 images, 64 inputs,
standardised), ``--n`` training points (stratified) and the rest as test points; softmax
Laplace type-II ML (GPML Algorithms 3.3/3.4, shared SE-ARD covariance) from ``--restarts``
starts, against scikit-learn's ``GaussianProcessClassifier`` (one-vs-rest binary Laplace
GPs, one isotropic RBF each, one start) and our RVM softmax (evidence). One process, one
BLAS thread inside the type-II ML. Writes ``benchmarks/results/gp_digits.md``.

    python benchmarks/bench_gp_digits.py [--n 1000] [--restarts 1]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from sklearn.datasets import load_digits
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.model_selection import train_test_split

    from sparsebayes.inference import fit, predict
    from sparsebayes.models import GaussianKernel, GPClassification, RVMClassification

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--restarts", type=int, default=1)
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=args.n, stratify=y, random_state=0)
    m, s = Xtr.mean(0), Xtr.std(0)
    s[s == 0] = 1.0
    Xtr, Xte = (Xtr - m) / s, (Xte - m) / s

    def scores(proba):
        p = np.clip(proba[np.arange(yte.size), yte], 1e-300, None)
        return float(np.mean(np.argmax(proba, axis=1) != yte)), float(-np.mean(np.log(p)))

    rows = []
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit(GPClassification(Xtr, ytr), "evidence", seed=0, restarts=args.restarts)
    secs = time.perf_counter() - start
    err, loss = scores(predict(post, Xte).proba)
    rows.append(("GP, softmax Laplace (ours)", secs, err, loss, post.attrs["n_iter"],
                 sorted({str(w.message)[:60] for w in caught})))
    start = time.perf_counter()
    sk = GaussianProcessClassifier(ConstantKernel() * RBF(8.0), random_state=0).fit(Xtr, ytr)
    secs = time.perf_counter() - start
    rows.append(("GP, scikit-learn one-vs-rest (isotropic)", secs, *scores(sk.predict_proba(Xte)),
                 "", []))
    start = time.perf_counter()
    rvm = fit(RVMClassification(Xtr, ytr, kernel=GaussianKernel(np.sqrt(Xtr.shape[1]))),
              "evidence", seed=0)
    secs = time.perf_counter() - start
    rows.append(("RVM, softmax evidence", secs, *scores(predict(rvm, Xte).proba),
                 rvm.attrs["n_iter"], []))
    out = ["# The 10-class GP classifier on digits", "",
           f"`benchmarks/bench_gp_digits.py --n {args.n} --restarts {args.restarts}`: "
           f"{args.n} training and {yte.size} test digits, load average "
           f"{os.getloadavg()[0]:.2f} at the end.", "",
           "| model | fit s | test error | test log loss | iterations | warnings |",
           "|---|---|---|---|---|---|"]
    out += [f"| {r[0]} | {r[1]:.1f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]} | {'; '.join(r[5])} |"
            for r in rows]
    (ROOT / "benchmarks" / "results" / "gp_digits.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
