"""The main job, timed as a new user meets it: ``sparsebayes study`` with the
default study (every method on all 10 splits, NUTS 4 x (500 + 2000) draws on a 30-centre
dictionary, ADVI on a 50-centre one) in a fresh output folder with cold compilation caches
(a new PyTensor ``base_compiledir`` and ``NUMBA_CACHE_DIR``, as on a fresh machine), on
every core. Target: < 5 minutes on 2 cores; every method ``n_ok = 10``; every NUTS cell
``max_rhat < 1.01``; a paired-test p-value for every pair (no ``n<2`` in the report).
Where the time goes, per method (sums over its cells, in core-seconds): fit, compilation
(a sampler's own and each method's first use in a worker process), prediction,
leave-one-out, and the whole cell (figures, loading and scoring too).

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
        load_end = os.getloadavg()
        table = pd.read_csv(tmp / "study" / "results.csv")
        table.to_csv(OUT.with_suffix(".csv"), index=False)  # every cell, for a closer look
        report = (tmp / "study" / "report.md").read_text()
    ok = table[table["status"] == "ok"]
    rows = []
    for method, sub in table.groupby("method", sort=False):
        good = ok[ok["method"] == method]
        row = {"method": method, "cells": len(sub),
               "min n_ok per data set": int(good.groupby("dataset").size().min())}
        for col, name in (("fit_seconds", "fit s"), ("compile_seconds", "compile s"),
                          ("predict_seconds", "predict s"), ("loo_seconds", "LOO s"),
                          ("cell_seconds", "cell s")):
            if col in sub:
                row[name] = float(sub[col].sum())
        if good["max_rhat"].notna().any():
            row["max R-hat"] = f"{good['max_rhat'].max():.4f}"
            row["min ESS bulk"] = f"{good['min_ess_bulk'].min():.0f}"
            row["divergences"] = int(good["divergences"].sum())
        rows.append(row)
    per_data = (table.groupby(["method", "dataset"], sort=False)
                [["fit_seconds", "compile_seconds", "loo_seconds", "cell_seconds"]].sum()
                .round(1).reset_index()
                .rename(columns={"fit_seconds": "fit s", "compile_seconds": "compile s",
                                 "loo_seconds": "LOO s", "cell_seconds": "cell s"}))
    busy = float(table["cell_seconds"].sum()) if "cell_seconds" in table else float("nan")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = ["# The default study, cold caches", "",
             f"{cores} cores, 1-minute load average {load:.2f} at the start and "
             f"{load_end[0]:.2f} at the end (15-minute {load_end[2]:.2f}; other work on the "
             "machine shares the cores); `python benchmarks/bench_default_study.py` (a fresh "
             "output folder, fresh PyTensor and numba caches).", "",
             f"Wall time {wall / 60:.1f} min for {len(table)} cells ({len(ok)} ok); "
             f"target < 5 min. Cells busy {busy:.0f} core-s in all (the rest of "
             f"{cores} x wall = {cores * wall:.0f} core-s: worker start-up and imports, "
             "idle workers at the end, and the report). Paired-test entries without a "
             f"p-value (`n<2` in a table): {report.count('| n<2 |')}.", "",
             "Sums over each method's cells, in seconds of one core:", "",
             *markdown_table(rows), "",
             "The same sums per data set:", "",
             *markdown_table(per_data.to_dict("records"))]
    write_report(lines, OUT)


if __name__ == "__main__":
    main()
