"""Leave-one-out of the type-II ML RVM classifiers: the cost of the warm-started refits
(``LaplaceRefits``, ``VRVMClassificationRefits``) and of the Laplace cavity LOO (Vehtari,
Mononen, Tolvanen, Sivula & Winther 2016) against the fit, and how far the cavity LOO (alpha
and pruning fitted to all points) is from the exact refit LOO.

Per row: the fit's wall time; the N warm refits' (set-up included) and their elpd; the
cavity LOO's time and elpd; the brute-force Laplace refits at the full-data alpha
(``--fixed``: the mode refitted without the point, the likelihood integrated over its own
Laplace predictive by the same quadrature), which isolate the cavity's approximation from
the effect of refitting alpha; cold refits (``--cold``: ``fit`` of the kept rows from
scratch, as ``loo.cold_refit_logpdf`` does; slow); and the mean held-out log density where
a test set exists (Ripley 250: the 1000-point test file; Ripley 1000: the 250-point train
file). "max |d|": the largest pointwise difference of the cavity LOO from the
refit LOO (or from the fixed-alpha refits). One BLAS thread (the fits' own setting); a
warm-up fit first (numba caches).

Data: Ripley (1996) train (250) and test (1000) sets, Gaussian width 0.5; scikit-learn's
breast cancer (569 x 30, standardised), width 8; wine (178 x 13, 3 classes, standardised),
width 3.6.

    .venv/bin/python benchmarks/bench_loo_classification.py [--cases ripley250,...]
        [--methods evidence] [--fixed] [--cold ripley250]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from report import markdown_table, timed, write_report
from scipy.special import log_expit, logsumexp
from sklearn.datasets import load_breast_cancer, load_wine

from sparsebayes.inference import fit, predict
from sparsebayes.inference.numerics import one_blas_thread
from sparsebayes.inference.rvm.laplace import (
    LaplaceRefits,
    laplace_cavity_logpdf,
    laplace_posterior,
)
from sparsebayes.inference.rvm.vrvm_classification import VRVMClassificationRefits
from sparsebayes.models import GaussianKernel, RVMClassification, datasets

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def standardised(X):
    return (X - X.mean(0)) / X.std(0)


def case(name):
    """(X, y, width, X_test, y_test) of a named case."""
    if name == "ripley250":
        X, y = datasets.load_ripley("train", data_dir=DATA)
        Xt, yt = datasets.load_ripley("test", data_dir=DATA)
        return X, y, 0.5, Xt, yt
    if name == "ripley1000":
        X, y = datasets.load_ripley("test", data_dir=DATA)
        Xt, yt = datasets.load_ripley("train", data_dir=DATA)
        return X, y, 0.5, Xt, yt
    if name == "breast_cancer":
        d = load_breast_cancer()
        return standardised(d.data), d.target, 8.0, None, None
    if name == "wine":
        d = load_wine()
        return standardised(d.data), d.target, 3.6, None, None
    raise ValueError(name)


def warm_loo(post):
    refits = (VRVMClassificationRefits if post.attrs["method"] == "vrvm"
              else LaplaceRefits)(post)
    N = post["observed_data"]["t"].size
    out, ok = np.empty(N), 0
    for n in range(N):
        lp, conv = refits.fold(np.array([n]))
        out[n], ok = lp[0], ok + conv
    return out, ok


def fixed_alpha_loo(problem, post):
    """The Laplace mode refitted without each point at the full-data alpha, and
    ``ln int p(t_n | f) N(f | m_n, v_n) df`` under its Laplace predictive (binary only;
    Gauss-Hermite, 64 nodes)."""
    from sparsebayes.inference.rvm.laplace import posterior_pairs

    Phi = problem.design_matrix()
    cols, _, alpha, theta = posterior_pairs(post)
    a = np.full(Phi.shape[1], np.inf)
    a[cols] = alpha
    w0 = np.zeros(Phi.shape[1])
    w0[cols] = theta
    x, wq = np.polynomial.hermite.hermgauss(64)
    t = problem.t
    out = np.empty(t.size)
    with one_blas_thread():
        for n in range(t.size):
            keep = np.arange(t.size) != n
            lap = laplace_posterior(Phi[keep], t[keep], a, w0=w0[cols])
            phi = Phi[n, lap.cols]
            m, v = phi @ lap.theta, phi @ lap.Sigma @ phi
            f = m + np.sqrt(2 * v) * x
            out[n] = logsumexp(log_expit((2 * t[n] - 1) * f), b=wq / np.sqrt(np.pi))
    return out


def cold_loo(problem, method, width):
    X, y = problem.X, problem.y
    out = np.empty(y.size)
    for n in range(y.size):
        keep = np.arange(y.size) != n
        sub = fit(RVMClassification(X[keep], y[keep], kernel=GaussianKernel(width), centres=X),
                  method, seed=1)
        out[n] = predict(sub, X[n:n + 1]).logpdf(y[n:n + 1])[0]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="ripley250,breast_cancer,ripley1000,wine")
    parser.add_argument("--methods", default="evidence")
    parser.add_argument("--fixed", action="store_true")
    parser.add_argument("--cold", default="")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                             / "loo_classification.md"))
    args = parser.parse_args()
    rows = []
    for name in args.cases.split(","):
        X, y, width, Xt, yt = case(name)
        problem = RVMClassification(X, y, kernel=GaussianKernel(width))
        for method in args.methods.split(","):
            timed(fit, problem, method, seed=1)  # warm-up
            post, fit_s = timed(fit, problem, method, seed=1)
            (warm, ok), warm_s = timed(warm_loo, post)
            cav, cav_s = timed(laplace_cavity_logpdf, post)
            N = y.size
            r = {"case": name, "N": N, "K": int(np.unique(y).size), "method": method,
                 "M_t": int(post.attrs["n_relevant"]), "fit s": fit_s,
                 "N warm refits s": warm_s, "refits / fit": warm_s / fit_s,
                 "converged": f"{ok}/{N}", "elpd refit": float(warm.sum()),
                 "cavity s": cav_s, "elpd cavity": float(cav.sum()),
                 "cavity max |d|": float(np.abs(cav - warm).max())}
            if args.fixed and r["K"] == 2 and method != "vrvm":
                fixed, fixed_s = timed(fixed_alpha_loo, problem, post)
                r.update({"fixed-alpha s": fixed_s, "elpd fixed-alpha": float(fixed.sum()),
                          "cavity vs fixed max |d|": float(np.abs(cav - fixed).max())})
            if name in args.cold.split(","):
                cold, cold_s = timed(cold_loo, problem, method, width)
                r.update({"cold s": cold_s, "elpd cold": float(cold.sum()),
                          "refit vs cold max |d|": float(np.abs(warm - cold).max())})
            if Xt is not None:
                r["held-out elpd/N"] = float(predict(post, Xt).logpdf(yt).mean())
                r["refit elpd/N"] = float(warm.mean())
            rows.append(r)
            print(r, flush=True)
    write_report(["# LOO of the RVM classifiers: refits and the Laplace cavity", "",
                  *markdown_table(rows)], args.out)


if __name__ == "__main__":
    main()
