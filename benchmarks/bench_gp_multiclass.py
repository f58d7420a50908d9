"""Multiclass GP classification (softmax Laplace, GPML Algorithms 3.3/3.4): ours vs
scikit-learn's GaussianProcessClassifier (one-vs-rest binary Laplace GPs) and the RVM softmax.

Both GPs use an SE-ARD covariance (scikit-learn ``ConstantKernel * RBF(l)``, one kernel per
binary problem; ours one kernel shared by the K latent GPs) and maximise a Laplace log
marginal likelihood by L-BFGS-B from 3 starts (scikit-learn: ``n_restarts_optimizer=2``).
The LMLs are not comparable (scikit-learn reports the mean of its K binary LMLs). Data:
scikit-learn's iris and wine, standardised, stratified 60/40 splits (seeds 0 and 1).
Reported: median fit time, test error and log loss (ours averaged by Monte Carlo and, in
brackets, the plug-in softmax of the latent mean), the ratio of fit times.

    python benchmarks/bench_gp_multiclass.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit, metrics, predict
from sparsebayes.models import GaussianKernel, GPClassification, RVMClassification


def data_sets():
    from sklearn.datasets import load_iris, load_wine
    from sklearn.model_selection import train_test_split

    for name, loader in [("iris", load_iris), ("wine", load_wine)]:
        X, y = loader(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        for split in (0, 1):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.4, stratify=y,
                                                  random_state=split)
            yield f"{name} split {split}", Xtr, ytr, Xte, yte


def run(repeats: int) -> list[dict]:
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    rows = []
    for name, X, y, Xt, yt in data_sets():
        d = X.shape[1]
        ours_t, sk_t = [], []
        for rep in range(repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                post = fit(GPClassification(X, y), "evidence", seed=rep, restarts=3)
                ours_t.append(time.perf_counter() - start)
                start = time.perf_counter()
                g = GaussianProcessClassifier(ConstantKernel() * RBF(np.ones(d)),
                                              n_restarts_optimizer=2, random_state=rep
                                              ).fit(X, y)
                sk_t.append(time.perf_counter() - start)
                rvm = fit(RVMClassification(X, y, kernel=GaussianKernel(np.sqrt(d))),
                          "evidence")
        p_ours, p_plug = predict(post, Xt), predict(post, Xt, kind="plugin")
        p_rvm = predict(rvm, Xt)
        p_sk = g.predict_proba(Xt)
        rows.append({
            "data": name, "N": y.size, "d": d,
            "ours fit s": statistics.median(ours_t),
            "sklearn fit s": statistics.median(sk_t),
            "time ratio": statistics.median(ours_t) / statistics.median(sk_t),
            "ours signal sd": float(post["posterior"]["signal_sd"].values[0, 0]),
            "ours error (plugin)": f"{metrics.error_rate(p_ours, yt):.3f} "
                                   f"({metrics.error_rate(p_plug, yt):.3f})",
            "sklearn error": metrics.error_rate(p_sk, yt),
            "RVM error": metrics.error_rate(p_rvm, yt),
            "ours log loss (plugin)": f"{metrics.log_loss(p_ours, yt):.3f} "
                                      f"({metrics.log_loss(p_plug, yt):.3f})",
            "sklearn log loss": metrics.log_loss(p_sk, yt),
            "RVM log loss": metrics.log_loss(p_rvm, yt)})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = run(args.repeats)
    lines = ["# Multiclass GP classification: softmax Laplace (ours) vs scikit-learn OvR", "",
             f"{os.cpu_count()} cores, 1-minute load average {load:.2f} at the start; median "
             f"of {args.repeats} fits each, 3 starts on both sides. RVM: softmax evidence, "
             "Gaussian width sqrt(d).", "", *markdown_table(rows), ""]
    write_report(lines, Path(__file__).parent / "results" / "gp_multiclass.md")


if __name__ == "__main__":
    main()
