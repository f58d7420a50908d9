"""The main job, timed as a new user meets it: ``sparsebayes study`` with the
default study (every method on all 10 splits, NUTS 4 x (500 + 2000) draws on a 30-centre
dictionary, ADVI on a 50-centre one) in a fresh output folder with cold compilation caches
(a new PyTensor ``base_compiledir`` and ``NUMBA_CACHE_DIR``, as on a fresh machine), on
every core. Target: < 10 minutes on 2 cores; every method ``n_ok = 10``; every NUTS cell
``max_rhat < 1.01``; a paired-test p-value for every pair (no ``n<2`` in the report).

    .venv/bin/python benchmarks/bench_default_study.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from report import markdown_table, write_report

OUT = Path(__file__).parent / "results" / "default_study.md"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={tmp / 'pytensor'}",
               "NUMBA_CACHE_DIR": str(tmp / "numba"), "OPENBLAS_NUM_THREADS": "1"}
        load = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sparsebayes.inference.cli", "study", "--out",
                        str(tmp / "study"), "--no-progress"], env=env, check=True)
        wall = time.perf_counter() - start
        table = pd.read_csv(tmp / "study" / "results.csv")
        report = (tmp / "study" / "report.md").read_text()
    ok = table[table["status"] == "ok"]
    rows = []
    for method, sub in table.groupby("method", sort=False):
        good = ok[ok["method"] == method]
        row = {"method": method, "cells": len(sub),
               "min n_ok per data set": int(good.groupby("dataset").size().min()),
               "fit s (sum)": float(sub["fit_seconds"].sum())}
        if good["max_rhat"].notna().any():
            row["max R-hat"] = f"{good['max_rhat'].max():.4f}"
            row["divergences"] = int(good["divergences"].sum())
        rows.append(row)
    lines = ["# The default study, cold caches", "",
             f"{os.cpu_count()} cores, 1-minute load average {load:.2f} at the start; "
             "`python benchmarks/bench_default_study.py` (a fresh output folder, fresh "
             "PyTensor and numba caches).", "",
             f"Wall time {wall / 60:.1f} min for {len(table)} cells ({len(ok)} ok); "
             f"target < 10 min. Paired-test entries without a p-value (`n<2`): "
             f"{report.count('n<2')}.", "", *markdown_table(rows)]
    write_report(lines, OUT)


if __name__ == "__main__":
    main()
