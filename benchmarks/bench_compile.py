"""Compilation paid once per install, not per process: the same fits run in fresh Python
processes one after another, sharing compilation caches that start empty (a new PyTensor
``base_compiledir`` and ``NUMBA_CACHE_DIR``, as on a fresh clone). Process 1 pays the cold
compilation; processes 2 and 3 should load it (target: a first evidence fit in a fresh
process <= 5 s of compilation once one earlier process has run).

Each process times importing ``sparsebayes.inference``, its first evidence fit (regression
and classification) and optionally a small NUTS fit (nutpie); the numba compile time and
nutpie's compile time come from the library's own log lines (logger "sparsebayes":
"numba compiled for X s during this fit", "compiled nutpie's ... in X s").

    .venv/bin/python benchmarks/bench_compile.py [--processes 3] [--nuts]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from report import markdown_table, write_report

OUT = Path(__file__).parent / "results" / "compile.md"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from sparsebayes.inference import fit
from sparsebayes.models import GaussianKernel, RVMClassification, RVMRegression, datasets
out = {"import s": time.perf_counter() - t0}
X, t = datasets.sinc(100, noise="gaussian", noise_scale=0.1, seed=0)
s = time.perf_counter()
fit(RVMRegression(X, t, kernel=GaussianKernel(width=3.0)), "evidence")
out["evidence regression s"] = time.perf_counter() - s
rng = np.random.default_rng(0)
Xc = rng.normal(size=(100, 2))
y = (Xc[:, 0] + 0.3 * rng.normal(size=100) > 0).astype(int)
s = time.perf_counter()
fit(RVMClassification(Xc, y, kernel=GaussianKernel(width=1.0)), "evidence")
out["evidence classification s"] = time.perf_counter() - s
out["pymc imported"] = "pymc" in sys.modules
if sys.argv[1] == "nuts":
    s = time.perf_counter()
    post = fit(RVMRegression(X, t, kernel=GaussianKernel(width=3.0)), "nuts", draws=100,
               tune=100, chains=2, warn=False, seed=1)
    out["nuts wall s"] = time.perf_counter() - s
    out["nutpie compile s"] = post.attrs["compile_time"]
print("RESULT " + json.dumps(out))
"""


def run(env: dict, nuts: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, "nuts" if nuts else "-"], env=env,
                          capture_output=True, text=True, check=True)
    row = json.loads(proc.stdout.split("RESULT ", 1)[1])
    numba = [float(x) for x in re.findall(r"numba compiled for ([\d.]+) s", proc.stderr)]
    row["numba compile s (logged)"] = sum(numba)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--nuts", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={Path(tmp) / 'pytensor'}",
               "NUMBA_CACHE_DIR": str(Path(tmp) / "numba"), "OPENBLAS_NUM_THREADS": "1",
               "CI": "1"}
        for i in range(args.processes):
            rows.append({"process": i + 1, **run(env, args.nuts)})
            print(rows[-1], flush=True)
    first = rows[0]["numba compile s (logged)"]
    later = max(r["numba compile s (logged)"] for r in rows[1:]) if len(rows) > 1 else 0.0
    lines = ["# Compilation: once per install, not per process", "",
             f"Fresh processes one after another sharing caches that start empty; "
             f"{os.cpu_count()} cores shared with other jobs (load average at start "
             f"{load:.1f}). Seconds of wall time; numba compile time from the library's log.",
             "", *markdown_table(rows), "",
             f"Numba compile time: process 1 {first:.1f} s, later processes at most "
             f"{later:.2f} s (ratio {later / max(first, 1e-9):.3f}).", ""]
    write_report(lines, args.out)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
