"""Issue 31's NUTS target: ``fit(problem, "nuts")`` on noisy sinc (N = 100, width 3),
4 chains x (1000 tuning + 1000 draws), nutpie, with the collapsed likelihood as the
closed-form-gradient Op (opt-in) and as the PyTensor-differentiated Woodbury graph (the
default), alternated in one process (the first fit of each form compiles).
Target: <= 30 s wall after compilation.

    .venv/bin/python benchmarks/bench_nuts_forms.py
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from report import markdown_table, write_report

from sparsebayes.inference import fit
from sparsebayes.models import GaussianKernel, RVMRegression, datasets

OUT = Path(__file__).parent / "results" / "nuts_forms.md"


def run(problem, form: str) -> dict:
    """One fit; ``form="op"`` samples the closed-form-gradient Op (``form="woodbury"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        post = fit(problem, "nuts", seed=1, draws=1000, tune=1000, chains=4, max_seconds=1e9,
                   form="woodbury" if form == "op" else "auto")
        wall = time.perf_counter() - start
    compile_s = float(post.attrs.get("compile_time", 0.0))
    return {"form": "Op (closed-form gradient)" if form == "op" else "Woodbury graph",
            "wall s": wall, "compile s": compile_s, "wall after compile s": wall - compile_s,
            "sampling s": float(post.attrs["sampling_time"]),
            "divergences": int(post["sample_stats"]["diverging"].sum())}


def main() -> None:
    X, t = datasets.sinc(100, noise="gaussian", noise_scale=0.1, seed=0)
    problem = RVMRegression(X, t, kernel=GaussianKernel(width=3.0))
    load = os.getloadavg()[0]
    rows = [run(problem, form) for _ in range(2) for form in ("op", "graph")]
    lines = ["# NUTS on sinc N = 100: the collapsed likelihood's two forms", "",
             f"4 chains x (1000 + 1000), nutpie, one process, load average {load:.2f} at the "
             "start; rounds alternate, the first fit of each form compiles.", "",
             *markdown_table(rows)]
    write_report(lines, OUT)


if __name__ == "__main__":
    main()
