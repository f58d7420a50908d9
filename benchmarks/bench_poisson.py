"""The Poisson RVM (``RVMPoissonRegression``, ``fit(problem, "evidence")``: Laplace type-II
ML by Tipping & Faul's algorithm on the Laplace surrogate) beside scikit-learn's
``PoissonRegressor`` (an L2-penalised Poisson GLM, Newton-Cholesky) on the same full kernel
basis (a Gaussian kernel at every training input plus the bias), in one run.

Data: 1-D counts with the rate ``exp(1 + sin x)``, x uniform on [-5, 5]; N = 200 and 2000
training points (and N = 2000 with a 200-centre k-means dictionary); the rate's relative
RMS error on 1000 test inputs on a grid, and the mean log predictive probability of 1000
fresh test counts (the GLM: its plug-in Poisson). Fit times are wall-clock seconds of one fit
with one BLAS thread after a warm-up fit (the RVM's include its 500 x 2 Laplace draws and
their pointwise log likelihood; "optimise s" is the type-II ML alone); ratios are the GLM's
time over the RVM's. Writes ``benchmarks/results/poisson.md``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_poisson.py
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1.5
GLM_ALPHAS = (1e-4, 1e-2)  # sklearn's penalty (on the mean deviance): two fixed values


def data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, n)[:, None]
    Xt = np.linspace(-5, 5, 1000)[:, None]
    rate_t = np.exp(1 + np.sin(Xt[:, 0]))
    return X, rng.poisson(np.exp(1 + np.sin(X[:, 0]))), Xt, rate_t, rng.poisson(rate_t)


def rel_rms(pred, rate):
    return float(np.sqrt(np.mean((pred - rate) ** 2) / np.mean(rate**2)))


def rvm(X, t, Xt, rate_t, tt, centres=None) -> dict:
    from sparsebayes.inference import fit, predict
    from sparsebayes.models import GaussianKernel, RVMPoissonRegression

    start = time.perf_counter()
    post = fit(RVMPoissonRegression(X, t, kernel=GaussianKernel(WIDTH), centres=centres),
               "evidence", seed=0)
    seconds = time.perf_counter() - start
    pred = predict(post, Xt)
    return {"seconds": seconds, "rate_rms": rel_rms(pred.mean, rate_t),
            "lpd": float(np.mean(pred.logpdf(tt))), "relevant": post.attrs["n_relevant"],
            "optimise": post.attrs["optimise_seconds"]}


def glm(X, t, Xt, rate_t, tt, alpha) -> dict:
    from sklearn.linear_model import PoissonRegressor

    from sparsebayes.models import GaussianKernel

    k = GaussianKernel(WIDTH)
    start = time.perf_counter()
    model = PoissonRegressor(alpha=alpha, solver="newton-cholesky", max_iter=300)
    model.fit(k(X, X), t)
    seconds = time.perf_counter() - start
    mean = model.predict(k(Xt, X))
    return {"seconds": seconds, "rate_rms": rel_rms(mean, rate_t),
            "lpd": float(np.mean(stats.poisson.logpmf(tt, mean))), "relevant": X.shape[0] + 1}


def main() -> None:
    from threadpoolctl import threadpool_limits

    rows = []
    with threadpool_limits(1):
        rvm(*data(50, seed=0))  # warm-up: imports and compiled functions out of the timings
        for n, centres in ((200, None), (2000, None), (2000, 200)):
            X, t, Xt, rate_t, tt = data(n, seed=n)
            r = rvm(X, t, Xt, rate_t, tt, centres)
            basis = "all inputs" if centres is None else f"{centres} k-means centres"
            rows.append((n, f"RVM evidence ({basis})", r, None))
            print(rows[-1])
            if centres is None:
                for a in GLM_ALPHAS:
                    g = glm(X, t, Xt, rate_t, tt, a)
                    rows.append((n, f"sklearn PoissonRegressor(alpha={a:g})", g,
                                 g["seconds"] / r["seconds"]))
            print(rows[-1])
    lines = [
        "# Poisson RVM (counts) vs scikit-learn's PoissonRegressor",
        "",
        "`python benchmarks/bench_poisson.py` (one run, one BLAS thread; "
        f"{platform.processor() or platform.machine()}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}).",
        "Rate `exp(1 + sin x)`, x ~ U(-5, 5); Gaussian kernel width 1.5; test: 1000 grid "
        "inputs (rate) and 1000 fresh counts there (mean log predictive probability). "
        "The GLM is fitted on the full kernel basis at a fixed penalty (no tuning).",
        "",
        "| N | method | fit s | optimise s | GLM s / RVM s | rate rel. RMS | mean log pred. "
        "| columns |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, name, r, ratio in rows:
        opt = f"{r['optimise']:.3f}" if "optimise" in r else ""
        lines.append(f"| {n} | {name} | {r['seconds']:.3f} | {opt} | "
                     f"{'' if ratio is None else f'{ratio:.2f}'} | {r['rate_rms']:.3f} | "
                     f"{r['lpd']:.4f} | {r['relevant']} |")
    lines.append("")
    out = ROOT / "benchmarks" / "results" / "poisson.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
