"""A study's folder: ``study.json`` (the manifest), one JSON record per finished cell
(``cells/<data>/<method>/splitNNN.json``, written last and atomically, so its presence marks
the cell done), the figure inputs (``.npz``) and the first splits' posteriors (``.zarr``),
and ``results.csv``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["StudyExistsError", "load_table", "load_posterior", "MANIFEST", "TABLE",
           "TIMING_COLUMNS"]

CELL_FORMAT = 2  # 2: cells carry the leave-one-out columns (format-1 cells are recomputed)
#: The study's settings and versions, in the output folder.
MANIFEST = "study.json"
#: The table of every cell, one row per cell, in the output folder (:func:`load_table`).
TABLE = "results.csv"
#: The columns of the table that hold timings (seconds), which vary from run to run.
TIMING_COLUMNS = ("fit_seconds", "predict_seconds", "compile_seconds", "loo_seconds",
                  "cell_seconds")
# the posteriors this process saved, by path, for its own report (opening a zarr store of
# many small arrays costs more than drawing the figure); the oldest go past this many bytes
SAVED_POSTERIOR_BYTES = 500_000_000
_SAVED: OrderedDict[Path, Any] = OrderedDict()


class StudyExistsError(FileExistsError):
    """The output folder already holds a study and ``resume`` was not given."""


def cell_key(data_label: str, split: int, method_label: str, seed: int,
             digest: str = "") -> dict[str, Any]:
    """What a stored cell must match to be reused (the user's data: its digest too)."""
    key = {"format": CELL_FORMAT, "dataset": data_label, "split": split,
           "method": method_label, "seed": seed}
    if digest:
        key["data_digest"] = digest
    return key


def _slug(label: str) -> str:
    text = label.replace("*", "star").replace("/", "-").replace(":", "_").replace("=", "")
    text = re.sub(r"[^A-Za-z0-9_.+-]", "_", text)[:80]
    return f"{text}-{hashlib.sha256(label.encode()).hexdigest()[:6]}"


def cell_path(out: Path, data_label: str, method_label: str, split: int) -> Path:
    return Path(out) / "cells" / _slug(data_label) / _slug(method_label) / \
        f"split{split:03d}.json"


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def save_cell(out: Path, cell, record: dict[str, Any]) -> dict[str, Any]:
    """Write the cell's figure inputs and posterior first, its JSON record last (the
    record's presence marks the cell done)."""
    record = dict(record)
    path = cell.path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = record.pop("_arrays", None)
    post = record.pop("_posterior", None)
    if arrays is not None:
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.npz")
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, path.with_suffix(".npz"))
        record["arrays_file"] = path.with_suffix(".npz").name
    if post is not None:  # zarr (a nutpie dependency, so always there) keeps the DataTree
        final = path.with_suffix(".zarr")
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.zarr")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            post.to_zarr(tmp, consolidated=False)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            record["posterior_file"] = final.name
            _remember(final, post)
        except Exception as exc:  # the metrics still count; say why the file is missing
            shutil.rmtree(tmp, ignore_errors=True)
            record["posterior_file"] = ""
            record["posterior_error"] = f"{type(exc).__name__}: {exc}"
    atomic_write(path, json.dumps(record, indent=1, default=_json_default))
    return record


def _remember(path: Path, post) -> None:
    _SAVED[path.resolve()] = post
    _SAVED.move_to_end(path.resolve())
    while sum(p.nbytes for p in _SAVED.values()) > SAVED_POSTERIOR_BYTES and len(_SAVED) > 1:
        _SAVED.popitem(last=False)


def load_posterior(path: Path):
    """The DataTree stored at ``path`` (a cell's ``.zarr``), from memory when this process
    saved it."""
    path = Path(path).resolve()
    if path in _SAVED:
        return _SAVED[path]
    import xarray as xr

    return xr.open_datatree(path, engine="zarr", consolidated=False).load()


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in a cell record")


def load_cell(out: Path, path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The stored record at ``path`` if it matches ``key``, else ``None``."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is recomputed
    if any(record.get(k) != v for k, v in key.items()):
        return None
    return record


def prepare_out(out: Path, manifest: dict[str, Any], resume: bool) -> None:
    path = out / MANIFEST
    if path.is_file() and not resume:
        old = json.loads(path.read_text())
        raise StudyExistsError(
            f"{out} already holds a study (data {old.get('data')}, methods "
            f"{old.get('methods')}, {old.get('splits')} splits); pass resume=True "
            f"(--resume) to continue it and compute only the missing cells, or choose "
            f"another output folder")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(manifest, indent=1))


_FIRST = ["dataset", "split", "method", "task", "status", "error", "n_train", "n_test",
          "n_features", "width", "mse", "rmse", "mae", "nlpd", "coverage95", "coverage90",
          "pred_sd", "error_rate", "log_loss", "brier", "probabilistic", "n_relevant",
          "n_centres", "fit_seconds", "compile_seconds", "predict_seconds", "converged",
          "log_evidence", "psis_khat", "loo_elpd_per_point", "loo_se_per_point",
          "loo_estimator", "loo_seconds", "loo_bad_k", "loo_missing", "divergences",
          "max_rhat", "min_ess_bulk", "n_warnings", "warnings", "seed", "fit_seed",
          "cell_seconds"]


# columns every table has, whatever its methods and tasks and even if every cell failed
# (a failed cell's record stops at its error)
_ALWAYS = ["dataset", "split", "method", "task", "status", "error", "n_train", "n_test",
           "n_features", "n_relevant", "fit_seconds", "predict_seconds", "converged",
           "n_warnings", "warnings"]


def table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The tidy table (one row per cell) of the records; failed cells have ``status``
    "failed" and their ``error`` ("Type: message"), their losses empty."""
    drop = {"format", "traceback", "arrays_file", "posterior_file", "posterior_error",
            "data_digest"}
    rows = [{k: v for k, v in r.items() if k not in drop and not k.startswith("_")}
            for r in records]
    frame = pd.DataFrame(rows)
    if len(frame):
        frame = frame.reindex(columns=[*frame.columns,
                                       *(c for c in _ALWAYS if c not in frame.columns)])
    cols = [c for c in _FIRST if c in frame.columns]
    cols += [c for c in frame.columns if c not in cols]
    return frame[cols].reset_index(drop=True) if len(frame) else frame


def load_table(out: str | os.PathLike) -> pd.DataFrame:
    """The table of the study in ``out`` from its cell files (finished cells only), in the
    order of the study's data sets, methods and splits (read from the manifest alone: the
    user's data need not be at hand)."""
    out = Path(out)
    path = out / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{out} holds no study ({MANIFEST} not found)")
    m = json.loads(path.read_text())
    digests = m.get("digests", {})
    records = []
    for d in m["data"]:
        for meth in m["methods"]:
            for s in range(m["splits"]):
                rec = load_cell(out, cell_path(out, d, meth, s),
                                cell_key(d, s, meth, m["seed"], digests.get(d, "")))
                if rec is not None:
                    records.append(rec)
    return table(records)
