"""The study's data: seeded splits of the built-in sets (:data:`sparsebayes.models.datasets.
DATASETS`, the one registry) and of the user's own data (a CSV / Parquet file, a DataFrame or
arrays), split and standardised as the built-in sets are."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sparsebayes.inference.numerics import unknown_names
from sparsebayes.models.datasets import (
    CLASSIFICATION,
    COUNTS,
    DATASETS,
    REGRESSION,
    TASKS,
    DataInfo,
    Split,
    missing_message,
    random_split,
)

from .specs import distinct, label, parse_spec, seed_of, split_list

__all__ = ["load_split", "user_data", "check_files", "check_data_options"]

@dataclass(frozen=True)
class DataSpec:
    """A data set with its options, e.g. ``DataSpec.parse("sinc:n_train=50")``, or the
    user's data (``DataSpec.parse("mine.csv:target=y")``, :func:`~.data.user_data`): then
    ``user`` holds its :class:`~sparsebayes.models.datasets.DataInfo` and ``digest`` a hash
    of its values (a changed file is not resumed from the old cells) and ``source`` the file
    spec it was read from (empty for data given in Python)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()
    digest: str = ""
    user: DataInfo | None = field(default=None, compare=False, repr=False)
    source: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str | DataSpec) -> DataSpec:
        if isinstance(text, DataSpec):
            return text
        if is_file_spec(text):
            return read_file_spec(text)
        name, options = parse_spec(text, "data")
        if name not in DATASETS:
            raise ValueError(f"unknown data set {name!r}; choose one of {sorted(DATASETS)}, "
                             "or give a file: PATH.csv:target=COLUMN")
        check_data_options(name, options, [*DATASETS[name].options, "width"])
        return cls(name, tuple(sorted(options.items())))

    @property
    def info(self) -> DataInfo:
        return self.user if self.user is not None else DATASETS[self.name]

    @property
    def label(self) -> str:
        return label(self.name, dict(self.options))

    @property
    def width(self) -> float:
        return float(dict(self.options).get("width", self.info.width))

    @property
    def max_splits(self) -> int | None:
        """The splits that exist: the stored realisations, or the folds of k-fold CV."""
        folds = dict(self.options).get("folds", self.info.options.get("folds"))
        sizes = [k for k in (self.info.max_splits, folds) if isinstance(k, int)]
        return min(sizes) if sizes else None


def parse_data(data) -> list[DataSpec]:
    """Data specs from ``"sinc,ripley_mixture:n_train=100,mine.csv:target=y"``, a list of
    specs / :class:`DataSpec`, or a dict ``{name: (X, y) | (DataFrame, target)}`` of the
    user's data; unknown names raise ``ValueError`` listing the valid ones."""
    if isinstance(data, dict):
        specs = [user_data(v, name=k) for k, v in data.items()]
    else:
        items = split_list(data) if isinstance(data, str) else list(data)
        specs = [DataSpec.parse(d) for d in items]
    return distinct(specs, "data set")


FILE_SUFFIXES = (".csv", ".parquet", ".pq")
# options of the user's data: how to read it, and how to split it (as diabetes)
_READ_OPTIONS = ("target", "task", "name")
_SPLIT_OPTIONS = {"test_fraction": 0.2, "n_train": None, "folds": None}
# a numeric target with integer values and at most this many of them is a class label
MAX_INFERRED_CLASSES = 20


def load_split(data: str | DataSpec, split: int, seed: int = 0,
               data_dir: str | os.PathLike | None = None) -> Split:
    """Split number ``split`` (0-based) of a data set; the same for every method and every
    executor (seeded from ``seed``, the data label and ``split``)."""
    spec = DataSpec.parse(data)
    info = spec.info
    if not isinstance(split, int | np.integer) or split < 0:
        raise ValueError(f"split must be a non-negative integer, got {split!r}")
    if info.max_splits is not None and split >= info.max_splits:
        raise ValueError(f"{spec.name} has {info.max_splits} stored splits; split {split} "
                         f"does not exist")
    options = {k: v for k, v in spec.options if k != "width"}
    rng = np.random.default_rng(seed_of(seed, spec.label, split))
    return info.loader(rng, int(split), seed_of(seed, spec.label, "folds"),
                       data_dir=data_dir, **options)


def check_files(specs, data_dir) -> None:
    """``FileNotFoundError`` naming the file and the folder for a data set whose files are
    missing (before any cell runs)."""
    for d in specs:
        if d.user is not None or not d.info.files:
            continue
        message = missing_message(d.name, data_dir)
        if message is not None:
            raise FileNotFoundError(message)


def _is_int(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and \
        not isinstance(value, bool)


def check_data_options(name: str, options: dict[str, Any], valid, n: int | None = None
                       ) -> None:
    """``ValueError`` for an option of data set ``name`` that is unknown (not in ``valid``;
    the closest name suggested) or out of range: ``folds`` in [2, n], ``n_train`` in [2,
    the smallest training split], ``test_fraction`` in (0, 1), ``n_test`` and ``width`` > 0
    (``n``, the number of rows, is known for the user's data only)."""
    bad = set(options) - set(valid)
    if bad:
        raise ValueError(unknown_names("option", bad, valid, f"data set {name!r}"))
    where = f"data set {name!r}:"
    folds = options.get("folds")
    if folds is not None and not (_is_int(folds) and 2 <= folds <= (n or folds)):
        raise ValueError(f"{where} folds must be an integer >= 2"
                         + (f" and <= {n} (the rows)" if n else "") + f", got {folds!r}")
    tf = options.get("test_fraction", 0.2)
    if not (_is_number(tf) and 0 < tf < 1):
        raise ValueError(f"{where} test_fraction must lie in (0, 1), got {tf!r}")
    n_train = options.get("n_train")
    if n_train is not None:
        high = n_train
        if n is not None:  # the smallest training split: n minus the largest test part
            high = n - (-(-n // folds) if folds else max(1, int(round(tf * n))))
        if not (_is_int(n_train) and 2 <= n_train <= high):
            raise ValueError(f"{where} n_train must be an integer >= 2"
                             + (f" and <= {high} (the training split)" if n else "")
                             + f", got {n_train!r}")
    n_test = options.get("n_test")
    if n_test is not None and not (_is_int(n_test) and n_test > 0):
        raise ValueError(f"{where} n_test must be a positive integer, got {n_test!r}")
    width = options.get("width")
    if width is not None and not (_is_number(width) and width > 0):
        raise ValueError(f"{where} width must be a positive number, got {width!r}")


# --------------------------------------------------------------------------------------
# the user's data
# --------------------------------------------------------------------------------------
def is_file_spec(text: str) -> bool:
    head = text.strip().split(":", 1)[0] if isinstance(text, str) else ""
    return head.lower().endswith(FILE_SUFFIXES)


def read_file_spec(text: str) -> DataSpec:
    """``PATH.csv:target=COLUMN[:task=classification][:test_fraction=..]`` -> a
    :class:`DataSpec` of the file's data, named after the file's stem (or ``name=``)."""
    path, options = parse_spec(text, "data")
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} not found (in {Path.cwd()})")
    if "target" not in options:
        raise ValueError(f"data spec {text!r} needs the target column: "
                         f"{path}:target=COLUMN")
    if path.suffix.lower() == ".csv":
        frame = pd.read_csv(path)
    else:
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise ImportError(f"reading {path.name} needs a Parquet engine: pip install "
                              "pyarrow")
        frame = pd.read_parquet(path)
    name = str(options.pop("name", path.stem))
    spec = user_data((frame, str(options.pop("target"))), name=name,
                     source=f"file {path.resolve()}", **options)
    return dataclasses.replace(spec, source=text.strip())


def _infer_task(y: pd.Series) -> str:
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        return CLASSIFICATION
    values = y.to_numpy(dtype=float)
    if np.all(values == np.round(values)) and np.unique(values).size <= MAX_INFERRED_CLASSES:
        return CLASSIFICATION
    return REGRESSION


def _frame_and_target(source, name: str) -> tuple[pd.DataFrame, pd.Series]:
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], pd.DataFrame):
        frame, target = source
        if not isinstance(target, str):
            raise TypeError(f"data {name!r}: give (DataFrame, target column name), got a "
                            f"{type(target).__name__} as the target")
        if target not in frame.columns:
            raise ValueError(f"data {name!r}: unknown target column {target!r}; columns: "
                             f"{[str(c) for c in frame.columns]}")
        return frame.drop(columns=[target]), frame[target]
    if isinstance(source, tuple) and len(source) == 2:
        X, y = source
        X = pd.DataFrame(np.asarray(X) if not isinstance(X, pd.DataFrame) else X)
        if X.ndim != 2:
            raise ValueError(f"data {name!r}: X must be 2-D")
        X.columns = [str(c) for c in X.columns]
        y = pd.Series(np.asarray(y).reshape(-1) if not isinstance(y, pd.Series) else y,
                      name="y")
        if len(y) != len(X):
            raise ValueError(f"data {name!r}: X has {len(X)} rows, y has {len(y)}")
        return X.reset_index(drop=True), y.reset_index(drop=True)
    raise TypeError(f"data {name!r} must be (X, y), (DataFrame, target column) or a file "
                    f"spec 'PATH.csv:target=COLUMN', got {type(source).__name__}")


def user_data(data, *, name: str = "data", target: str | None = None,
              task: str | None = None, source: str = "", **split_options: Any) -> DataSpec:
    """The user's data as a study data set: ``data`` is ``(X, y)``, ``(DataFrame, target
    column)``, a DataFrame with ``target=`` or a file spec ``"PATH.csv:target=COLUMN"``.

    The task is ``task`` or inferred from the target (non-numeric, boolean, or at most
    :data:`MAX_INFERRED_CLASSES` integer values: classification; else regression); class
    labels are coded 0..K-1 in sorted order. Splits as for scikit-learn's bundled sets:
    random ``test_fraction=0.2`` splits (or ``folds=k``), ``n_train`` subsets, inputs (and
    regression targets) standardised by the training split. Missing values and non-numeric
    inputs raise ``ValueError`` naming the columns."""
    if isinstance(data, str | os.PathLike):
        return read_file_spec(str(data))
    if not isinstance(name, str) or not name or ":" in name or "," in name:
        raise ValueError(f"data set name must be a non-empty string without ':' or ',', "
                         f"got {name!r}")
    if isinstance(data, pd.DataFrame):
        if target is None:
            raise ValueError(f"data {name!r}: a DataFrame needs its target column: give "
                             f"(DataFrame, 'COLUMN') or user_data(frame, target='COLUMN')")
        data = (data, target)
    if task is not None and task not in TASKS:
        raise ValueError(f"data set {name!r}: task must be one of {list(TASKS)}, got "
                         f"{task!r}")
    frame, y = _frame_and_target(data, name)
    bad = set(split_options) - set(_SPLIT_OPTIONS) - {"width"}
    if bad:  # the read options are valid in a file spec only, but name them all
        raise ValueError(unknown_names("option", bad, [*_READ_OPTIONS, *_SPLIT_OPTIONS,
                                                       "width"], f"data set {name!r}"))
    check_data_options(name, split_options, [*_SPLIT_OPTIONS, "width"], len(frame))
    if frame.shape[1] == 0 or len(frame) < 4:
        raise ValueError(f"data {name!r} needs at least one input column and 4 rows, got "
                         f"{frame.shape}")
    text = [str(c) for c in frame.columns if not (pd.api.types.is_numeric_dtype(frame[c])
                                                  or pd.api.types.is_bool_dtype(frame[c]))]
    if text:
        raise ValueError(f"data {name!r}: non-numeric input column(s) {text}; encode them "
                         "as numbers (e.g. pandas.get_dummies) or drop them")
    nan = [str(c) for c in frame.columns if frame[c].isna().any()]
    if nan:
        raise ValueError(f"data {name!r}: missing values in input column(s) {nan}; impute "
                         "or drop those rows first")
    if y.isna().any():
        raise ValueError(f"data {name!r}: the target column {str(y.name)!r} has "
                         f"{int(y.isna().sum())} missing value(s)")
    X = frame.to_numpy(dtype=float)
    if not np.all(np.isfinite(X)):
        cols = [str(c) for c, ok in zip(frame.columns, np.isfinite(X).all(0)) if not ok]
        raise ValueError(f"data {name!r}: infinite values in input column(s) {cols}")
    task = _infer_task(y) if task is None else task
    if task == CLASSIFICATION:
        classes, codes = np.unique(y.to_numpy(), return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"data {name!r}: the target {str(y.name)!r} has one class only")
        yv = codes.astype(int)
    else:
        if not pd.api.types.is_numeric_dtype(y):
            raise ValueError(f"data {name!r}: regression needs a numeric target, "
                             f"{str(y.name)!r} is {y.dtype}")
        yv = y.to_numpy(dtype=float)
        classes = np.array([])
        if task == COUNTS and not (np.all(yv >= 0) and np.all(yv == np.round(yv))):
            raise ValueError(f"data {name!r}: counts need a target of non-negative "
                             f"integers, {str(y.name)!r} is not")
    digest = hashlib.sha256(X.tobytes() + np.asarray(yv).tobytes() + task.encode() +
                            "\x1f".join(map(str, frame.columns)).encode()).hexdigest()[:16]
    what = f"{len(X)} x {X.shape[1]}, target {str(y.name)!r}"
    if task == CLASSIFICATION:
        what += f", classes {[str(c) for c in classes]}"
    info = DataInfo(
        name, task, "user", f"the user's data ({source or 'in memory'}): {what}; "
        f"{_protocol(split_options)}, standardised", width=float(np.sqrt(X.shape[1])),
        loader=partial(_split_user, X, yv, task), options=dict(_SPLIT_OPTIONS))
    return DataSpec(name, tuple(sorted(split_options.items())), digest, info)


def _protocol(options: dict[str, Any]) -> str:
    """How the user's data are split, in words (the report's description)."""
    if options.get("folds") is not None:
        text = f"{options['folds']}-fold cross-validation"
    else:
        tf = options.get("test_fraction", _SPLIT_OPTIONS["test_fraction"])
        text = f"random {1 - tf:.0%}/{tf:.0%} train/test splits"
    if options.get("n_train") is not None:
        text += f", {options['n_train']} training points drawn from each training split"
    return text


def _split_user(X, y, task, rng, split, fold_seed, *, test_fraction=0.2, n_train=None,
                folds=None, data_dir=None) -> Split:
    return random_split(X, y, rng, test_fraction, n_train, folds, split, fold_seed, task)
