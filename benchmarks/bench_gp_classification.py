"""GP classification by Laplace type-II ML: ours vs scikit-learn's GaussianProcessClassifier.

Same model on both sides: binary logistic likelihood, SE-ARD covariance
``signal_sd^2 exp(-sum_d (x_d - x'_d)^2 / (2 l_d^2))`` (scikit-learn ``ConstantKernel *
RBF(l)``), Laplace approximation, log marginal likelihood maximised by L-BFGS-B from 3
starts on each side (scikit-learn: ``n_restarts_optimizer=2``). Ripley's 250 training points
(test on its 1000) and scikit-learn's breast cancer (standardised, 400 / 169 split). Reported:
median fit time over repeats, the log marginal likelihood reached, test error and log loss,
and the ratios ours / scikit-learn. Results in ``results/gp_classification.md``.

    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_gp_classification.py [--repeats 3]
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
from sparsebayes.models import GPClassification, datasets


def data_sets():
    X, y = datasets.load_ripley("train")
    Xt, yt = datasets.load_ripley("test")
    yield "Ripley-250", X, y, Xt, yt
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    Xb, yb = load_breast_cancer(return_X_y=True)
    idx = np.random.default_rng(0).permutation(yb.size)
    tr, te = idx[:400], idx[400:]
    sc = StandardScaler().fit(Xb[tr])
    yield "breast cancer (400 / 169)", sc.transform(Xb[tr]), yb[tr], sc.transform(Xb[te]), yb[te]


def run(repeats: int) -> list[dict]:
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    rows = []
    for name, X, y, Xt, yt in data_sets():
        d = X.shape[1]
        ours_t, sk_t = [], []
        for rep in range(repeats):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = fit(GPClassification(X, y), "evidence", seed=rep, restarts=3)
            ours_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = GaussianProcessClassifier(ConstantKernel() * RBF(np.ones(d)),
                                              n_restarts_optimizer=2, random_state=rep
                                              ).fit(X, y)
            sk_t.append(time.perf_counter() - start)
        p_ours = predict(post, Xt)
        p_sk = g.predict_proba(Xt)
        row = {"data": name, "N": y.size, "d": d,
               "ours fit s": statistics.median(ours_t),
               "sklearn fit s": statistics.median(sk_t),
               "time ratio": statistics.median(ours_t) / statistics.median(sk_t),
               "ours LML": post.attrs["log_marginal_likelihood"],
               "sklearn LML": g.log_marginal_likelihood_value_,
               "ours error": metrics.error_rate(p_ours, yt),
               "sklearn error": float(np.mean(np.argmax(p_sk, 1) != yt)),
               "ours log loss": metrics.log_loss(p_ours, yt),
               "sklearn log loss": float(-np.mean(np.log(np.clip(
                   p_sk[np.arange(yt.size), yt], 1e-300, None))))}
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = run(args.repeats)
    lines = ["# GP classification: Laplace type-II ML, ours vs scikit-learn", "",
             f"{os.cpu_count()} cores, 1-minute load average {load:.2f} at the start; median "
             f"of {args.repeats} fits each, 3 starts on both sides. Target: time ratio <= 2 at "
             "an equal or better log marginal likelihood.", "", *markdown_table(rows), ""]
    write_report(lines, Path(__file__).parent / "results" / "gp_classification.md")


if __name__ == "__main__":
    main()
