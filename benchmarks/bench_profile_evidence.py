"""The learned likelihood parameters' profile evidence, before and after, in one run: the
fit time, the number of whole Laplace solves (alpha and pruning re-fitted at one value of the
parameters), the log evidence, the parameters and the relevance vectors of the Student-t
RVM's evidence fit (sigma and nu: a bounded Nelder-Mead) on sinc with 10% gross outliers
(N = 100, 1000, 3000 on 200 centres) and on KIN40K (2000 points, 200 centres), and of the
negative-binomial RVM's (the dispersion: Brent) on counts of dispersion 2 (N = 1000, 3000).
Each fit in its own process, the "before" tree from ``--before DIR`` (a checkout holding
``sparsebayes/models`` and ``sparsebayes/inference``), one BLAS thread, after a warm-up fit
of 100 points.

    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_profile_evidence.py \\
        --before /tmp/sb_before
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ["t_sinc100", "t_sinc1000", "t_sinc3000", "t_kin40k2000", "negbin1000", "negbin3000"]


def _problem(case: str):
    import numpy as np

    from sparsebayes.models import (
        GaussianKernel,
        RVMNegativeBinomialRegression,
        RVMStudentTRegression,
        datasets,
    )

    if case.startswith("t_sinc"):
        sys.path.insert(0, str(HERE))
        from bench_student_t import sinc_with_outliers

        n = int(case.removeprefix("t_sinc"))
        X, t = sinc_with_outliers(n, 0)
        return RVMStudentTRegression(X, t, kernel=GaussianKernel(2.0),
                                     centres=200 if n > 1000 else None)
    if case == "t_kin40k2000":
        X, t = datasets.load_kin40k()[:2]
        return RVMStudentTRegression(X[:2000], t[:2000], kernel=GaussianKernel(2.0),
                                     centres=200)
    n = int(case.removeprefix("negbin"))
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-5, 5, n))[:, None]
    rate = np.exp(1.5 + np.sin(X[:, 0]))
    counts = rng.negative_binomial(2.0, 2.0 / (2.0 + rate))
    return RVMNegativeBinomialRegression(X, counts, kernel=GaussianKernel(1.5),
                                         centres=200 if n > 1000 else None)


def _one(case: str) -> dict:
    import time
    import warnings

    from sparsebayes.inference import fit
    from sparsebayes.inference.rvm import laplace

    solves = [0]
    solve = laplace._solve

    def counted(*args, **kwargs):
        solves[0] += 1
        return solve(*args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm_up = "t_sinc100" if case.startswith("t_") else "negbin300"
        fit(_problem(warm_up), "evidence", seed=0)  # numba, caches
        problem = _problem(case)
        laplace._solve = counted
        solves[0] = 0
        start = time.perf_counter()
        post = fit(problem, "evidence", seed=0)
        seconds = time.perf_counter() - start
    params = {k: float(post["posterior"][k].values.flat[0]) for k in ("sigma", "nu", "dispersion")
              if k in post["posterior"]}
    return {"fit_s": seconds, "solves": solves[0], "log_evidence": post.attrs["log_evidence"],
            "vectors": int(post["posterior"].sizes["basis"]), **params}


def _run(case: str, before: str | None) -> dict:
    sys.path.insert(0, str(HERE))
    from report import run_in_tree

    return run_in_tree("bench_profile_evidence", f"_one({case!r})", before)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--cases", nargs="*", default=CASES)
    ap.add_argument("--out", default=str(HERE / "results" / "profile_evidence.md"))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for case in args.cases:
        for label, tree in (("before", args.before), ("after", "None")):
            row = {"case": case, "tree": label, **_run(case, tree)}
            if "log_evidence" in row:  # to the digits that separate the two trees
                row["log_evidence"] = f"{row['log_evidence']:.10g}"
            print(row, flush=True)
            rows.append(row)
    sys.path.insert(0, str(HERE))
    from report import markdown_table, write_report

    write_report([
        "# The likelihood parameters' profile evidence: before and after", "",
        "`python benchmarks/bench_profile_evidence.py --before <checkout>`; 2 cores, one BLAS "
        "thread, each fit in its own process after a warm-up fit; 1-minute load average "
        f"{load:.2f} at the start. Solves: whole Laplace fits (alpha and pruning) at one value "
        "of the likelihood's parameters. Before: the commit before the step; after: this "
        "tree.", "", *markdown_table(rows), ""], args.out)


if __name__ == "__main__":
    main()
