"""The Student-t RVM against the Gaussian RVM on sinc with gross outliers (noise sd 0.1, 10%
of the targets moved by +-1 to 3), in one run: the RMS error of each predictive mean
against the true function on 1000 test inputs, relevance vectors, the learned scale and
degrees of freedom, and fit times; N = 100 (3 draws), 1000 and 3000 (200 k-means
centres); with ``--samplers`` also ADVI and NUTS on a 30-centre dictionary at N = 100.
One BLAS thread.

    python benchmarks/bench_student_t.py [--samplers] [--out benchmarks/results/student_t.md]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from report import markdown_table, timed, write_report  # noqa: E402

X_TEST = np.linspace(-10, 10, 1000)[:, None]
F_TEST = np.sinc(X_TEST[:, 0] / np.pi)
CASES = [(100, 0, None), (100, 1, None), (100, 2, None), (1000, 0, None), (3000, 0, 200)]


def sinc_with_outliers(n: int, seed: int, fraction: float = 0.1):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-10, 10, n))[:, None]
    t = np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(n)
    out = rng.choice(n, int(fraction * n), replace=False)
    t[out] += rng.choice([-1, 1], out.size) * rng.uniform(1, 3, out.size)
    return X, t


def rms(post) -> float:
    from sparsebayes.inference import predict

    return float(np.sqrt(np.mean((predict(post, X_TEST).mean - F_TEST) ** 2)))


def point(post, name: str) -> float:
    return float(np.mean(post["posterior"][name].values))


def main() -> None:
    from sparsebayes.inference import fit
    from sparsebayes.models import GaussianKernel, RVMRegression, RVMStudentTRegression

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samplers", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/student_t.md")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for n, seed, centres in CASES:
        X, t = sinc_with_outliers(n, seed)
        kw = {"kernel": GaussianKernel(2.0), "centres": centres}
        gauss, gauss_s = timed(fit, RVMRegression(X, t, **kw), "evidence", seed=0)
        robust, robust_s = timed(fit, RVMStudentTRegression(X, t, **kw), "evidence", seed=0)
        rows.append({"N": n, "draw": seed, "centres": centres or n,
                     "Gaussian RMS": rms(gauss), "Student-t RMS": rms(robust),
                     "ratio": rms(robust) / rms(gauss),
                     "vectors (G)": gauss["posterior"].sizes["basis"],
                     "vectors (t)": robust["posterior"].sizes["basis"],
                     "sigma": point(robust, "sigma"), "nu": point(robust, "nu"),
                     "fit s (G)": gauss_s, "fit s (t)": robust_s})
        print(rows[-1], flush=True)
    lines = ["# The Student-t RVM on sinc with 10% gross outliers", "",
             f"`benchmarks/bench_student_t.py{' --samplers' if args.samplers else ''}`, one "
             f"process, one BLAS thread, 2 cores, 1-minute load average {load:.2f} at the "
             "start. RMS: of the predictive mean against the true function on 1000 test "
             "inputs. Evidence fits (type-II ML; the Student-t's sigma and nu "
             "by the Laplace evidence).", "", *markdown_table(rows)]
    if args.samplers:
        X, t = sinc_with_outliers(100, 0)
        gauss = rms(fit(RVMRegression(X, t, kernel=GaussianKernel(2.0)), "evidence"))
        sampled = []
        for method in ("advi", "nuts"):
            problem = RVMStudentTRegression(X, t, kernel=GaussianKernel(2.0), centres=30)
            post, seconds = timed(fit, problem, method, seed=0)
            sampled.append({"method": method, "RMS": rms(post), "ratio": rms(post) / gauss,
                            "sigma": point(post, "sigma"), "nu": point(post, "nu"),
                            "max R-hat": post.attrs.get("max_rhat", ""),
                            "divergences": post.attrs.get("n_divergent", ""),
                            "fit s (with compile)": seconds})
            print(sampled[-1], flush=True)
        lines += ["", "## Sampled (N = 100, draw 0, 30 centres; ratio to the Gaussian RVM's "
                  "evidence fit on the full basis)", "", *markdown_table(sampled)]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
