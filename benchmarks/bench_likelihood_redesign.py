"""Issue 47's likelihood step, before and after, in one run: the log evidence, the number of
relevance vectors and the fit time of the evidence fits the redesign touches (the Laplace
driver of the classifiers and of counts; the Gaussian evidence for reference) on sinc,
Ripley, breast cancer, USPS 1000 (softmax, 333 centres), KIN40K 2000 and Poisson counts,
and the new negative-binomial RVM's fit (after only). Each configuration runs in its own
process, the "before" tree from ``--before DIR`` (a checkout of the commit before, holding
``sparsebayes/models`` and ``sparsebayes/inference``), one BLAS thread; time: median of
``--repeat`` fits after a warm-up fit. ``--method evidence-mackay`` times Tipping's
re-estimation instead (``--out`` another file).

    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_likelihood_redesign.py \\
        --before /tmp/sb_before [--method evidence-mackay --cases sinc ripley --out ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ["sinc", "ripley", "breast_cancer", "usps1000", "kin40k2000", "poisson1000",
         "negbin1000"]


def _problem(case: str):
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    from sparsebayes.models import (
        GaussianKernel,
        RVMClassification,
        RVMPoissonRegression,
        RVMRegression,
        datasets,
    )

    if case == "sinc":
        X, t = datasets.sinc(100, noise_scale=0.1, seed=0)[:2]
        return RVMRegression(X, t, kernel=GaussianKernel(3.0))
    if case == "ripley":
        X, y = datasets.load_ripley("train")
        return RVMClassification(X, y, kernel=GaussianKernel(0.5))
    if case == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        return RVMClassification(X, y, kernel=GaussianKernel(float(np.sqrt(X.shape[1]))))
    if case == "usps1000":
        X, y = datasets.load_usps()[:2]
        rows = np.random.default_rng(0).choice(len(y), 1000, replace=False)
        return RVMClassification(X[rows], y[rows], kernel=GaussianKernel(5.0), centres=333)
    if case == "kin40k2000":
        X, t = datasets.load_kin40k()[:2]
        return RVMRegression(X[:2000], t[:2000], kernel=GaussianKernel(2.0))
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-5, 5, 1000))[:, None]
    rate = np.exp(1.5 + np.sin(X[:, 0]))
    if case == "poisson1000":
        return RVMPoissonRegression(X, rng.poisson(rate), kernel=GaussianKernel(1.5))
    from sparsebayes.models import RVMNegativeBinomialRegression

    counts = rng.negative_binomial(2.0, 2.0 / (2.0 + rate))
    return RVMNegativeBinomialRegression(X, counts, kernel=GaussianKernel(1.5))


def _one(case: str, repeat: int, method: str = "evidence") -> dict:
    import time
    import warnings

    import numpy as np

    from sparsebayes.inference import fit

    problem = _problem(case)
    times, post = [], None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(problem, method, seed=0)  # warm-up: numba, k-means, caches
        for _ in range(repeat):
            start = time.perf_counter()
            post = fit(problem, method, seed=0)
            times.append(time.perf_counter() - start)
    out = {"log_evidence": float(post.attrs["log_evidence"]),
           "vectors": int(post["posterior"].sizes["basis"]),
           "fit_s": float(np.median(times)), "n_iter": int(post.attrs["n_iter"])}
    if "dispersion" in post["posterior"].coords:
        out["dispersion"] = float(post["posterior"]["dispersion"].values.flat[0])
    return out


def _run(case: str, before: str | None, repeat: int, method: str) -> dict:
    sys.path.insert(0, str(HERE))
    from report import run_in_tree

    return run_in_tree("bench_likelihood_redesign", f"_one({case!r}, {repeat}, {method!r})",
                       before)


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", nargs="*", default=CASES)
    ap.add_argument("--method", default="evidence")
    ap.add_argument("--out", default=str(HERE / "results" / "likelihood_redesign.md"))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for case in args.cases:
        before = _run(case, args.before, args.repeat, args.method)
        after = _run(case, "None", args.repeat, args.method)
        print(case, before, after, flush=True)
        rows.append({
            "case": case,
            "log evidence before": f"{before['log_evidence']:.12g}" if "log_evidence" in before
            else before.get("error", "-"),
            "log evidence after": f"{after['log_evidence']:.12g}" if "log_evidence" in after
            else after.get("error", "-"),
            "identical (every digit, iterations)": before.get("log_evidence")
            == after.get("log_evidence") and before.get("n_iter") == after.get("n_iter"),
            "vectors before / after": f"{before.get('vectors', '-')} / {after.get('vectors')}",
            "fit s before": before.get("fit_s", float("nan")),
            "fit s after": after.get("fit_s", float("nan")),
            "time ratio after / before": after.get("fit_s", np.nan) / before.get("fit_s", np.nan)
            if "fit_s" in before else float("nan"),
            **({"dispersion": after["dispersion"]} if "dispersion" in after else {}),
        })
    sys.path.insert(0, str(HERE))
    from report import markdown_table, write_report

    write_report([
        "# The likelihood step of issue 47: before and after", "",
        f"`python benchmarks/bench_likelihood_redesign.py --before <checkout> "
        f"--method {args.method}`; 2 cores, one "
        f"BLAS thread, each fit in its own process, median of {args.repeat} fits "
        f"after a warm-up; 1-minute load average {load:.2f} at the start. Before: the "
        "commit before the step; after: this tree.", "",
        *markdown_table(rows), ""], args.out)


if __name__ == "__main__":
    main()
