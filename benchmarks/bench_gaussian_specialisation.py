"""The Gaussian RVM's conjugate route against the latent RVM's Laplace driver on the same
model, in one run: ``RVMRegression`` (closed-form posterior and evidence, sufficient
statistics for a dictionary, the noise re-estimated inside the loop) and
``testing.RVMLatentNormalRegression`` (Gaussian noise as a latent likelihood: the Laplace
mode and evidence, exact here, with the noise sd by the profile evidence) on sinc, noise sd
0.1: log evidence, relevance vectors, noise sd and fit time of each, and the time ratio.
N = 100, 1000 (the full basis), 2000 and 10 000 (200 and 300 centres); both evidence
methods (MacKay's to N = 2000). One process, one BLAS thread.

    python benchmarks/bench_gaussian_specialisation.py [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from report import markdown_table, timed, write_report  # noqa: E402

CASES = [(100, 0), (1000, 0), (2000, 200), (10000, 300)]
MACKAY_MAX_N = 2000


def main() -> None:
    from sparsebayes.inference import fit
    from sparsebayes.inference.families import register_family
    from sparsebayes.inference.testing import RVMLatentNormalRegression, latent_normal_families
    from sparsebayes.models import GaussianKernel, RVMRegression, datasets

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gaussian_specialisation.md")
    args = ap.parse_args()
    for family in latent_normal_families():
        register_family(family)
    load = os.getloadavg()[0]
    x0, t0 = datasets.sinc(50, seed=1)  # numba compiled before any timing
    fit(RVMLatentNormalRegression(x0, t0, kernel=GaussianKernel(1.0)), "evidence")
    rows = []
    for n, centres in CASES:
        x, t = datasets.sinc(n, seed=0)
        options = {"kernel": GaussianKernel(1.0)}
        if centres:
            options["centres"] = x[np.linspace(0, n - 1, centres).astype(int)]
        for method in ("evidence", "evidence-mackay"):
            if method == "evidence-mackay" and n > MACKAY_MAX_N:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                closed, closed_s = timed(fit, RVMRegression(x, t, **options), method, seed=0)
                latent, latent_s = timed(fit, RVMLatentNormalRegression(x, t, **options),
                                         method, seed=0)
            rows.append({
                "N": n, "basis": centres or n + 1, "method": method,
                "log ev (conjugate)": f"{closed.attrs['log_evidence']:.3f}",
                "log ev (latent)": f"{latent.attrs['log_evidence']:.3f}",
                "vectors": f"{closed['posterior'].sizes['basis']} / "
                           f"{latent['posterior'].sizes['basis']}",
                "noise sd": f"{float(closed['posterior']['noise_sd'].values.ravel()[0]):.5f} / "
                            f"{float(latent['posterior']['sigma'].values.ravel()[0]):.5f}",
                "fit s (conjugate)": f"{closed_s:.3f}", "fit s (latent)": f"{latent_s:.2f}",
                "latent / conjugate": f"{latent_s / closed_s:.1f}"})
            print(rows[-1], flush=True)
    lines = ["# The Gaussian RVM: conjugate route against the latent driver", "",
             "`benchmarks/bench_gaussian_specialisation.py`, one process, one BLAS thread, "
             f"2 cores, 1-minute load average {load:.2f} at the start. The same model (sinc, "
             "Gaussian kernel of width 1, Tipping's flat prior, the noise learned) fitted by "
             "`RVMRegression`'s closed-form route and by the latent RVM's Laplace driver "
             "with Gaussian noise written as a latent likelihood "
             "(`sparsebayes.inference.testing.LatentNormal`, its sd by the profile "
             "evidence). Pairs are conjugate / latent. The two log evidences are of the "
             "same function (at its optimum the latent driver's is T01 eq. 7, "
             "`tests/inference/rvm/test_gaussian_specialisation.py`); where the two paths "
             "part they end at different local optima of it.", "", *markdown_table(rows)]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
