"""``run_study``: data sets x splits x methods -> one tidy table, with every finished cell
stored at once in the output folder (so an interrupted study resumes where it stopped)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import storage
from .cells import Cell
from .data import DataSpec, check_files, parse_data
from .executors import Progress, cost_rank, dask_client, dask_slots, execute
from .specs import MethodSpec, parse_methods, valid_methods

__all__ = ["run_study", "DEFAULT_STUDY", "SMALL_STUDY"]


@dataclass(frozen=True)
class StudyConfig:
    data: tuple[DataSpec, ...]
    methods: tuple[MethodSpec, ...]
    splits: int
    seed: int

    def manifest(self) -> dict[str, Any]:
        out = {"format": storage.CELL_FORMAT, "data": [d.label for d in self.data],
               "methods": [m.label for m in self.methods], "splits": self.splits,
               "seed": self.seed}
        digests = {d.label: d.digest for d in self.data if d.digest}
        if digests:  # the user's data: which values the cells were computed on
            out["digests"] = digests
            out["user_data"] = {d.label: {"description": d.info.description,
                                          "spec": d.source} for d in self.data if d.digest}
        return out

    def cells(self, data_dir=None, figure_splits: int = 1,
              blas_threads: int | None = 1) -> tuple[list[Cell], list[dict[str, str]]]:
        """Runnable cells and the skipped (data set, method) pairs with the reason."""
        cells, skipped = [], []
        for d in self.data:
            n_split = self.splits
            if d.max_splits is not None:
                n_split = min(n_split, d.max_splits)
            for m in self.methods:
                reason = m.check(d.info.task)
                if reason is not None:
                    skipped.append({"dataset": d.label, "method": m.label, "reason": reason})
                    continue
                k = n_split if m.max_splits is None else min(n_split, m.max_splits)
                cells += [Cell(d, s, m, self.seed, None if data_dir is None else str(data_dir),
                               s < figure_splits, blas_threads) for s in range(k)]
        return cells, skipped


def config(data, methods, splits, seed) -> StudyConfig:
    """The parsed, checked study (every error before any cell runs)."""
    data_specs = parse_data(data)
    method_specs = parse_methods(methods)
    if not isinstance(splits, int | np.integer) or splits < 1:
        raise ValueError(f"splits must be a positive integer, got {splits!r}")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    limits = [d.max_splits for d in data_specs]
    if all(k is not None for k in limits):  # e.g. folds=5: "up to 5 splits", not 10
        splits = min(splits, max(limits))
    cfg = StudyConfig(tuple(data_specs), tuple(method_specs), int(splits), int(seed))
    tasks = {d.info.task for d in data_specs}
    for m in method_specs:
        reasons = {t: m.check(t) for t in sorted(tasks)}
        if all(r is not None for r in reasons.values()):
            raise ValueError(f"method {m.label!r} cannot run on any of the data sets: "
                             f"{'; '.join(reasons.values())}. Methods available now: "
                             f"{valid_methods()}")
        for task, reason in reasons.items():
            if reason is None:
                m.check_options(task)
    return cfg


def run_study(
    data,
    methods,
    splits: int = 10,
    out: str | os.PathLike | None = None,
    *,
    seed: int = 0,
    n_jobs: int = 1,
    scheduler=None,
    resume: bool = False,
    retry_failed: bool = False,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
    figure_splits: int = 1,
    timeout: float = 5.0,
    blas_threads: int | None = 1,
) -> pd.DataFrame:
    """Run a comparison study and return its tidy table (one row per cell).

    Parameters
    ----------
    data : str or list
        Data specs (``"sinc,ripley_mixture"`` or a list), names in
        :data:`sparsebayes.models.datasets.DATASETS`; the user's files
        (``"mine.csv:target=y"``, ``:task=classification``; ``.parquet`` too); or a dict
        ``{name: (X, y) | (DataFrame, target column)}`` (see :func:`.data.user_data`).
    methods : str or list
        Method specs (``"rvm/evidence,rvm*/evidence,gp/evidence,svm"``), scikit-learn
        estimators (``"sklearn=sklearn.ensemble.RandomForestRegressor:n_estimators=200"``)
        or, in a list, estimator objects.
    splits : int, default 10
        Splits per data set (fewer where the data set stores fewer, or a method asks for
        fewer with ``:splits=k``).
    out : path, optional
        Folder for the per-cell results, ``results.csv`` and the report inputs; ``None``
        keeps everything in memory. A folder holding a study is refused unless ``resume``.
    seed : int, default 0
        Study seed; every data split and fit seed derives from it.
    n_jobs : int, default 1
        Local worker processes (1: in this process).
    scheduler : str or distributed.Client, optional
        Dask scheduler address (``"tcp://host:8786"``) or ``distributed.Client``; replaces
        the local processes. An unreachable address raises ``ConnectionError`` after
        ``timeout`` seconds.
    resume : bool, default False
        Continue the study in ``out``: reuse every stored cell with the same data, split,
        method and seed, and compute the rest.
    retry_failed : bool, default False
        With ``resume``, recompute the cells that failed before.
    data_dir : path, optional
        Folder of the data files (default ``$SPARSEBAYES_DATA``), for data sets read from
        files.
    progress : bool, default True
        Show a progress bar.
    figure_splits : int, default 1
        For the first ``figure_splits`` splits, keep the plot inputs and the posterior
        (zarr) for the report.
    timeout : float, default 5.0
        Seconds to wait for the Dask ``scheduler``.
    blas_threads : int or None, default 1
        BLAS threads per cell (1 keeps the numbers identical across executors).

    Returns
    -------
    pandas.DataFrame
        One row per cell (data set, split, method): losses, timings, status.
    """
    cfg = config(data, methods, splits, seed)
    if not isinstance(n_jobs, int | np.integer) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer, got {n_jobs!r}")
    check_files(cfg.data, data_dir)
    cells, skipped = cfg.cells(data_dir, figure_splits, blas_threads)
    out_path = None if out is None else Path(out)
    client, own = (None, False)
    if scheduler is not None:  # fail fast on a bad address, before touching the folder
        client, own = dask_client(scheduler, timeout)
    try:
        records: dict[int, dict[str, Any]] = {}
        if out_path is not None:
            storage.prepare_out(out_path, cfg.manifest(), resume)
            storage.atomic_write(out_path / "skipped.json", json.dumps(skipped, indent=1))
            for i, cell in enumerate(cells):
                rec = storage.load_cell(out_path, cell.path(out_path), cell.key)
                if rec is not None and (rec.get("status") == "ok" or not retry_failed):
                    records[i] = rec
        todo = sorted((c for i, c in enumerate(cells) if i not in records), key=cost_rank)
        index = {id(c): i for i, c in enumerate(cells)}
        n_failed = sum(r.get("status") != "ok" for r in records.values())
        slots = n_jobs if client is None else dask_slots(client)
        bar = Progress(len(cells), len(records), n_failed, slots, progress, todo,
                       records.values())

        def on_result(cell: Cell, rec: dict[str, Any]) -> None:
            if out_path is not None:
                rec = storage.save_cell(out_path, cell, rec)
            else:
                rec = {k: v for k, v in rec.items() if not k.startswith("_")}
            records[index[id(cell)]] = rec

        try:
            execute(todo, n_jobs, client, on_result, bar)
        finally:
            bar.close()
    finally:
        if own:
            client.close()
    table = storage.table([records[i] for i in sorted(records)])
    if out_path is not None:
        table.to_csv(out_path / storage.TABLE, index=False)
    return table


# The README's main job: built-in data only (no files, no network), every posterior, on
# 2 cores including nutpie's (numba) and PyTensor's first compilations. Sampling on the
# full basis costs O(N M^2) per gradient with M = N + 1 columns, so the two scikit-learn
# data sets use a random 150 of their training points (every method sees the same split)
# and the sampled posteriors run on k-means dictionaries (ADVI 50 centres, NUTS 30: cost
# O(M^3) per gradient), NUTS with 4 chains of 2000 draws one chain after the other
# (cores=1: the study already runs one cell per core; with 1000 draws a cell's max R-hat
# reached 1.014, above the benchmark's 1.01). Every method runs on all
# 10 splits; paired tests use the splits both methods finished. Every method's
# leave-one-out is the same estimator (loo's "subsample"; NUTS: PSIS with its bad points
# refitted), at most cells.STUDY_LOO_REFITS cold refits a cell (benchmarks/results
# default_study.md has the times).
#: The default study (``sparsebayes study``, ``make study``): built-in data only, every
#: posterior on 10 splits; keyword arguments of :func:`run_study`.
DEFAULT_STUDY: dict[str, Any] = {
    "data": ["sinc", "ripley_mixture", "diabetes:n_train=150",
             "breast_cancer_wisconsin:n_train=150"],
    "methods": ["rvm/evidence", "rvm*/evidence", "trvm/evidence", "gp/evidence", "rvm/vrvm",
                "rvm/advi:centres=50",
                "rvm/nuts:centres=30:chains=4:cores=1:draws=2000:tune=500",
                "svm"],
    "splits": 10,
}
#: A study of a few minutes (evidence fits, RVM*, GP and SVM on 2 splits); keyword
#: arguments of :func:`run_study`.
SMALL_STUDY: dict[str, Any] = {
    "data": ["sinc", "ripley_mixture", "diabetes", "breast_cancer_wisconsin"],
    "methods": ["rvm/evidence", "rvm*/evidence", "gp/evidence", "svm"],
    "splits": 2,
}
