"""Method comparison studies: data sets x splits x methods -> one tidy table.

A *cell* is one (data set, split, method): load the split, fit, predict on the test inputs,
score. Cells are independent and seeded from (study seed, data set, split, method) only, so
the table is the same whichever executor runs them: this process (``n_jobs=1``), a pool of
local processes (``n_jobs > 1``) or a Dask cluster (``scheduler="tcp://host:port"`` or a
``distributed.Client``). With an output folder every finished cell is written at once
(``cells/<data>/<method>/splitNNN.json``, plus the figure inputs and, for the first split,
the posterior as a zarr store), so an interrupted study resumes where it stopped; a cell that
raises records its error instead of stopping the study.

Method specs are ``family/method[:key=value...]``: the family says which model and
predictive are used ("rvm", "rvm*" = Rasmussen & Quiñonero-Candela's augmented predictive,
"gp", "svm" = scikit-learn's SVR/SVC with C by 5-fold CV), the method is a ``fit`` method
registered in :data:`sparsebayes.inference.api.FIT_METHODS`. Data specs are
``name[:key=value...]`` with the names in :data:`DATASETS`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "DATASETS",
    "FAMILIES",
    "DataInfo",
    "DataSpec",
    "MethodSpec",
    "Split",
    "StudyExistsError",
    "available_datasets",
    "load_split",
    "load_table",
    "parse_data",
    "parse_methods",
    "run_cell",
    "run_study",
]

CELL_FORMAT = 1
MANIFEST = "study.json"
TABLE = "results.csv"
REGRESSION, CLASSIFICATION = "regression", "classification"


class StudyExistsError(FileExistsError):
    """The output folder already holds a study and ``resume`` was not given."""


# --------------------------------------------------------------------------------------
# specs: "name:key=value:key=value"
# --------------------------------------------------------------------------------------
def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _parse_spec(text: str, what: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty {what} spec {text!r}")
    name, *pairs = text.strip().split(":")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"bad option {pair!r} in {what} spec {text!r}: use key=value")
        options[key] = _parse_value(value)
    return name.strip(), options


def _label(name: str, options: dict[str, Any]) -> str:
    return ":".join([name, *(f"{k}={options[k]}" for k in sorted(options))])


def _split_list(items: str | Iterable[str]) -> list[str]:
    if isinstance(items, str):
        items = items.split(",")
    return [s.strip() for s in items if str(s).strip()]


# --------------------------------------------------------------------------------------
# data sets
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """One train/test split; ``truth`` (optional) is the noise-free function for 1-D plots."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    truth: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass(frozen=True)
class DataInfo:
    """A data set the study knows by name.

    ``width`` is the default Gaussian kernel width (Tipping's ``exp(-|x-c|^2/r^2)``) for RVM
    and SVM; ``files`` are looked for in the data directory; ``max_splits`` bounds the
    number of splits when they are stored with the data (IDA realisations)."""

    name: str
    task: str
    source: str  # "generator", "scikit-learn" (bundled, no network) or "file"
    description: str
    width: float
    loader: Callable[..., Split]
    options: dict[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    max_splits: int | None = None


def _standardise(split: Split, targets: bool) -> Split:
    """Inputs (and regression targets) scaled by the training split's mean and sd."""
    m, s = split.X_train.mean(0), split.X_train.std(0)
    s = np.where(s > 0, s, 1.0)
    y_tr, y_te = split.y_train, split.y_test
    if targets:
        tm, ts = y_tr.mean(), y_tr.std()
        y_tr, y_te = (y_tr - tm) / ts, (y_te - tm) / ts
    return Split((split.X_train - m) / s, y_tr, (split.X_test - m) / s, y_te)


def _random_split(X, y, rng, test_fraction: float, n_train: int | None, folds: int | None,
                  split: int, fold_seed: int, task: str) -> Split:
    """Split ``split`` of a data set without stored splits: the ``split``-th of ``folds``
    folds (one shuffle per study seed), or a fresh random train/test partition."""
    n = X.shape[0]
    if folds is not None:
        if not isinstance(folds, int) or not 2 <= folds <= n:
            raise ValueError(f"folds must be an integer in [2, {n}], got {folds!r}")
        if split >= folds:
            raise ValueError(f"split {split} does not exist with folds={folds}")
        order = np.random.default_rng(fold_seed).permutation(n)
        test = np.sort(np.array_split(order, folds)[split])
        train = np.setdiff1d(np.arange(n), test)
    else:
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
        order = rng.permutation(n)
        n_test = max(1, int(round(test_fraction * n)))
        test, train = np.sort(order[:n_test]), np.sort(order[n_test:])
    if n_train is not None:
        train = np.sort(rng.choice(train, size=min(int(n_train), train.size), replace=False))
    return _standardise(Split(X[train], y[train], X[test], y[test]), task == REGRESSION)


def _sklearn_bunch(name: str):
    from sklearn import datasets as skd

    return getattr(skd, f"load_{name}")(return_X_y=True)


def _load_diabetes(rng, split, fold_seed, *, test_fraction=0.2, n_train=None, folds=None,
                   data_dir=None) -> Split:
    X, y = _sklearn_bunch("diabetes")
    return _random_split(X, y.astype(float), rng, test_fraction, n_train, folds, split,
                         fold_seed, REGRESSION)


def _load_wdbc(rng, split, fold_seed, *, test_fraction=0.2, n_train=None, folds=None,
               data_dir=None) -> Split:
    X, y = _sklearn_bunch("breast_cancer")
    return _random_split(X, y, rng, test_fraction, n_train, folds, split, fold_seed,
                         CLASSIFICATION)


DATASETS: dict[str, DataInfo] = {}


def _register(info: DataInfo) -> None:
    DATASETS[info.name] = info


def _folder(data_dir) -> Path:
    """The folder the data files are read from: ``data_dir``, ``$SPARSEBAYES_DATA`` or
    the current directory (the same rule as :func:`available_datasets`)."""
    return Path(data_dir or os.environ.get("SPARSEBAYES_DATA", ".")).expanduser()


def _draw_seed(rng) -> int:
    return int(rng.integers(2**31))


def _load_sinc(rng, split, fold_seed, *, n_train=100, n_test=1000, noise="gaussian",
               noise_sd=None, data_dir=None) -> Split:
    """Tipping (2001) §4.1 / App. E: ``n_train`` evenly spaced inputs on [-10, 10], a fresh
    noise draw per split; test targets are noisy too (``n_test`` uniform inputs), so the
    NLPD is defined; ``truth`` is the noise-free sinc for the report's figure. Raw units."""
    from sparsebayes.models import datasets as ds

    X, t = ds.sinc(int(n_train), noise=noise, noise_scale=noise_sd, seed=_draw_seed(rng))
    Xs, ts = ds.sinc(int(n_test), noise=noise, noise_scale=noise_sd, seed=_draw_seed(rng),
                     evenly_spaced=False)
    return Split(X, t, Xs, ts, truth=lambda g: ds.sinc_function(np.asarray(g)[:, 0]))


def _load_ripley_mixture(rng, split, fold_seed, *, n_train=100, n_test=1000,
                         data_dir=None) -> Split:
    """Fresh draws from Ripley's generating model per split (raw units, as Tipping's Fig. 3)."""
    from sparsebayes.models import datasets as ds

    X, y = ds.ripley_mixture(int(n_train), seed=_draw_seed(rng))
    Xs, ys = ds.ripley_mixture(int(n_test), seed=_draw_seed(rng))
    return Split(X, y, Xs, ys)


def _load_ripley(rng, split, fold_seed, *, n_train=100, data_dir=None) -> Split:
    """Ripley's files: a random ``n_train`` of the 250 training points per split (Tipping
    2001 §4.2 used 100), tested on the 1000 test points; raw units."""
    from sparsebayes.models import datasets as ds

    X, y = ds.load_ripley("train", _folder(data_dir))
    Xs, ys = ds.load_ripley("test", _folder(data_dir))
    if n_train is not None and int(n_train) < y.size:
        keep = np.sort(rng.choice(y.size, size=int(n_train), replace=False))
        X, y = X[keep], y[keep]
    return Split(X, y, Xs, ys)


def _load_boston(rng, split, fold_seed, *, folds=10, test_fraction=0.05, n_train=None,
                 data_dir=None) -> Split:
    """Boston housing: R&QC (2005) 10-fold CV by default (``folds=None``: Tipping's random
    481/25 splits with ``test_fraction=0.05``); inputs and targets standardised."""
    from sparsebayes.models import datasets as ds

    X, y, _ = ds.load_boston(_folder(data_dir))
    return _random_split(X, y, rng, test_fraction, n_train, folds, split, fold_seed,
                         REGRESSION)


def _ida_loader(name: str) -> Callable[..., Split]:
    def load(rng, split, fold_seed, *, n_train=None, data_dir=None) -> Split:
        from sparsebayes.models import datasets as ds

        X, y, Xs, ys = ds.load_ida(name, split, _folder(data_dir))
        if n_train is not None and int(n_train) < y.size:
            keep = np.sort(rng.choice(y.size, size=int(n_train), replace=False))
            X, y = X[keep], y[keep]
        return Split(X, y, Xs, ys)  # Rätsch's files are normalised already

    return load


_register(DataInfo(
    "sinc", REGRESSION, "generator",
    "Tipping (2001) §4.1: sinc(x) on 100 evenly spaced x in [-10, 10] + N(0, 0.1^2) noise, "
    "a new noise draw per split; 1000 noisy test points",
    width=3.0, loader=_load_sinc,
    options={"n_train": 100, "n_test": 1000, "noise": "gaussian", "noise_sd": None}))
_register(DataInfo(
    "ripley_mixture", CLASSIFICATION, "generator",
    "Ripley's (1994) generating model (2-D, two Gaussians per class), 100 training points "
    "(as Tipping's Fig. 3) and 1000 test points drawn afresh per split",
    width=0.5, loader=_load_ripley_mixture, options={"n_train": 100, "n_test": 1000}))
_register(DataInfo(
    "ripley", CLASSIFICATION, "file",
    "Ripley's synthetic data files: a random 100 of the 250 training points per split "
    "(Tipping 2001 §4.2), the 1000 test points",
    width=0.5, loader=_load_ripley, options={"n_train": 100},
    files=("ripley_train.csv", "ripley_test.csv")))
_register(DataInfo(
    "boston", REGRESSION, "file",
    "Boston housing (506 x 13): R&QC (2005) 10-fold CV (folds=None: Tipping's random "
    "481/25 splits), standardised",
    width=5.0, loader=_load_boston,
    options={"folds": 10, "test_fraction": 0.05, "n_train": None}, files=("boston.csv",)))
# Gaussian widths r (exp(-|x-c|^2/r^2)): the RVM widths chosen by 5-fold CV in the DD2434
# reproduction (Table 1) where given, else sqrt(d) (tune with the method option width=cv).
_IDA_WIDTHS = {"banana": 0.7, "breast_cancer": 4.6, "german": 5.1, "heart": 4.2,
               "image": 18**0.5, "ringnorm": 20**0.5, "titanic": 3**0.5,
               "waveform": 21**0.5}
for _name, _width in _IDA_WIDTHS.items():
    _register(DataInfo(
        _name, CLASSIFICATION, "file",
        f"Rätsch's IDA benchmark '{_name}': the stored train/test realisations (Tipping 2001 "
        "Table 2 averages the first 10)",
        width=float(_width), loader=_ida_loader(_name), options={"n_train": None},
        files=(f"{_name}.npz",), max_splits=9 if _name == "image" else 10))
_register(DataInfo(
    "diabetes", REGRESSION, "scikit-learn",
    "scikit-learn's bundled diabetes data (442 x 10); random 80/20 splits, standardised",
    width=5.0, loader=_load_diabetes,
    options={"test_fraction": 0.2, "n_train": None, "folds": None}))
_register(DataInfo(
    "breast_cancer_wisconsin", CLASSIFICATION, "scikit-learn",
    "scikit-learn's bundled Wisconsin diagnostic breast-cancer data (569 x 30); random "
    "80/20 splits, standardised (not the IDA 'breast_cancer' set)",
    width=8.0, loader=_load_wdbc,
    options={"test_fraction": 0.2, "n_train": None, "folds": None}))


@dataclass(frozen=True)
class DataSpec:
    """A data set with its options, e.g. ``DataSpec.parse("sinc:n_train=50")``."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, text: str | DataSpec) -> DataSpec:
        if isinstance(text, DataSpec):
            return text
        name, options = _parse_spec(text, "data")
        if name not in DATASETS:
            raise ValueError(f"unknown data set {name!r}; choose one of {sorted(DATASETS)}")
        info = DATASETS[name]
        bad = sorted(set(options) - set(info.options) - {"width"})
        if bad:
            raise ValueError(f"unknown option(s) {bad} for data set {name!r}; valid: "
                             f"{sorted([*info.options, 'width'])}")
        return cls(name, tuple(sorted(options.items())))

    @property
    def info(self) -> DataInfo:
        return DATASETS[self.name]

    @property
    def label(self) -> str:
        return _label(self.name, dict(self.options))

    @property
    def width(self) -> float:
        return float(dict(self.options).get("width", self.info.width))

    @property
    def max_splits(self) -> int | None:
        """The splits that exist: the stored realisations, or the folds of k-fold CV."""
        folds = dict(self.options).get("folds", self.info.options.get("folds"))
        sizes = [k for k in (self.info.max_splits, folds) if isinstance(k, int)]
        return min(sizes) if sizes else None


def parse_data(data: str | Sequence[str | DataSpec]) -> list[DataSpec]:
    """Data specs from ``"sinc,ripley_mixture:n_train=100"`` or a list; unknown names raise
    ``ValueError`` listing the valid ones."""
    specs = [DataSpec.parse(d) for d in (_split_list(data) if isinstance(data, str) else data)]
    if not specs:
        raise ValueError("no data set given")
    return specs


def _seed(*parts: Any) -> int:
    """A stable 32-bit seed from strings and integers (not Python's salted ``hash``)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "little")


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
    rng = np.random.default_rng(_seed(seed, spec.label, split))
    return info.loader(rng, int(split), _seed(seed, spec.label, "folds"), data_dir=data_dir,
                       **options)


def available_datasets(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every data set the study knows, its task, source and (for files) whether its files
    are found in the data directory (``data_dir`` or ``$SPARSEBAYES_DATA``)."""
    folder = Path(data_dir or os.environ.get("SPARSEBAYES_DATA", ".")).expanduser()
    rows = []
    for info in DATASETS.values():
        missing = [f for f in info.files if not (folder / f).is_file()]
        rows.append({
            "name": info.name, "task": info.task, "source": info.source,
            "available": not missing,
            "where": str(folder) if info.files else "",
            "missing": ", ".join(missing),
            "description": info.description,
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# methods
# --------------------------------------------------------------------------------------
# family -> task -> (problem kind for FIT_METHODS, predictive kind or None = the default)
FAMILIES: dict[str, dict[str, tuple[str, str | None]]] = {
    "rvm": {REGRESSION: ("regression", None), CLASSIFICATION: ("classification", None)},
    "rvm*": {REGRESSION: ("regression", "rvm*")},
    "gp": {REGRESSION: ("gp", None)},
    "svm": {REGRESSION: ("svm", None), CLASSIFICATION: ("svm", None)},
}
# options the runner uses itself; everything else goes to fit(**options)
_SVM_OPTIONS = {"width", "splits", "cv", "C"}


@dataclass(frozen=True)
class MethodSpec:
    """``family/method[:key=value...]``, e.g. ``rvm/evidence``, ``rvm*/evidence``,
    ``rvm/nuts:draws=300:chains=2:splits=2`` or ``svm``.

    Runner options: ``width`` (Gaussian kernel width; default the data set's; ``cv``: the
    best of 0.5, 0.7, 1, 1.4, 2 x the default by 5-fold CV of the predictive loss on the
    training split, as in Tipping's App. E; ``cv=k`` sets the folds),
    ``learn_width`` (evidence over the width), ``ard`` (one width per input, with
    ``learn_width``), ``kernel`` (a kernel name instead of the Gaussian), ``bias``,
    ``predict`` (predictive kind), ``splits`` (run on the first k splits only). The rest go
    to ``fit`` (``draws``, ``chains``, ``max_iter``, ...). For ``svm``: ``cv`` folds and a
    fixed ``C`` instead of the cross-validated one.
    """

    family: str
    method: str | None
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, text: str | MethodSpec) -> MethodSpec:
        if isinstance(text, MethodSpec):
            return text
        head, options = _parse_spec(text, "method")
        family, _, method = head.partition("/")
        if family not in FAMILIES:
            raise ValueError(f"unknown method family {family!r} in {text!r}; choose one of "
                             f"{sorted(FAMILIES)} (e.g. 'rvm/evidence', 'svm')")
        if family == "svm":
            if method:
                raise ValueError(f"'svm' takes no fit method (scikit-learn SVR/SVC), got "
                                 f"{text!r}")
            bad = sorted(set(options) - _SVM_OPTIONS)
            if bad:
                raise ValueError(f"unknown option(s) {bad} for 'svm'; valid: "
                                 f"{sorted(_SVM_OPTIONS)}")
            method = None
        elif not method:
            raise ValueError(f"method spec {text!r} needs a fit method: '{family}/evidence', "
                             f"'{family}/nuts', ...")
        if "splits" in options and (not isinstance(options["splits"], int)
                                    or options["splits"] < 1):
            raise ValueError(f"splits must be a positive integer in {text!r}")
        return cls(family, method, tuple(sorted(options.items())))

    @property
    def label(self) -> str:
        head = self.family if self.method is None else f"{self.family}/{self.method}"
        return _label(head, dict(self.options))

    @property
    def max_splits(self) -> int | None:
        return dict(self.options).get("splits")

    def problem_kind(self, task: str) -> str | None:
        entry = FAMILIES[self.family].get(task)
        return None if entry is None else entry[0]

    def check(self, task: str) -> str | None:
        """``None`` if this method can run on a ``task`` data set, else the reason."""
        from . import api

        entry = FAMILIES[self.family].get(task)
        if entry is None:
            return f"{self.family} does not do {task}"
        kind, pkind = entry
        if kind == "svm":
            return None
        registered = api.FIT_METHODS.get(kind, {})
        if self.method not in registered:
            return (f"fit method {self.method!r} is not available for {kind} problems; "
                    f"registered: {sorted(registered) or 'none yet'}")
        pkind = dict(self.options).get("predict", pkind)
        kinds = api.PREDICT_KINDS.get(kind, {})
        if pkind is not None and pkind not in kinds:
            return (f"predictive kind {pkind!r} is not available for {kind} posteriors; "
                    f"registered: {sorted(kinds) or 'none yet'}")
        if kind == "gp":
            import sparsebayes.models as models

            if not hasattr(models, "GPRegression"):
                return "sparsebayes.models has no GPRegression yet"
        return None


def parse_methods(methods: str | Sequence[str | MethodSpec]) -> list[MethodSpec]:
    """Method specs from ``"rvm/evidence,rvm*/evidence,svm"`` or a list."""
    items = _split_list(methods) if isinstance(methods, str) else list(methods)
    specs = [MethodSpec.parse(m) for m in items]
    if not specs:
        raise ValueError("no method given")
    labels = [s.label for s in specs]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise ValueError(f"method(s) given twice: {dup}")
    return specs


def _valid_methods() -> list[str]:
    """Method specs that can run on some task now (their backend is registered)."""
    from . import api

    out = []
    for family, tasks in FAMILIES.items():
        for task, (kind, _) in tasks.items():
            names = [None] if kind == "svm" else list(api.FIT_METHODS.get(kind, {}))
            for m in names:
                spec = MethodSpec(family, m)
                if spec.check(task) is None:
                    out.append(spec.label)
    return sorted(set(out))


# --------------------------------------------------------------------------------------
# one cell
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One (data set, split, method) of a study; ``figures`` asks for the plot inputs and
    the posterior to be returned as well."""

    data: DataSpec
    split: int
    method: MethodSpec
    seed: int = 0
    data_dir: str | None = None
    figures: bool = False
    blas_threads: int | None = 1

    @property
    def key(self) -> dict[str, Any]:
        """What a stored result must match to be reused."""
        return {"format": CELL_FORMAT, "dataset": self.data.label, "split": self.split,
                "method": self.method.label, "seed": self.seed}

    @property
    def fit_seed(self) -> int:
        return _seed(self.seed, self.data.label, self.split, self.method.label)

    def path(self, out: Path) -> Path:
        return out / "cells" / _slug(self.data.label) / _slug(self.method.label) / \
            f"split{self.split:03d}.json"


def _slug(label: str) -> str:
    text = label.replace("*", "star").replace("/", "-").replace(":", "_").replace("=", "")
    text = re.sub(r"[^A-Za-z0-9_.+-]", "_", text)
    return f"{text}-{hashlib.sha256(label.encode()).hexdigest()[:6]}"


def _regression_scores(mean, y, pred=None) -> dict[str, float]:
    # TODO(issue 7): switch to sparsebayes.inference.metrics once it lands
    mean = np.asarray(mean)
    out = {"mse": float(np.mean((mean - y) ** 2)), "mae": float(np.mean(np.abs(mean - y)))}
    out["rmse"] = float(np.sqrt(out["mse"]))
    if pred is not None:
        out["nlpd"] = float(-np.mean(pred.logpdf(y)))
        lo, hi = pred.interval(0.95)
        out["coverage95"] = float(np.mean((lo <= y) & (y <= hi)))
    return out


def _classification_scores(proba, labels, y_codes) -> dict[str, float]:
    # TODO(issue 7): switch to sparsebayes.inference.metrics once it lands
    out = {"error_rate": float(np.mean(labels != y_codes))}
    if proba is not None:
        p = np.clip(proba[np.arange(y_codes.size), y_codes], 1e-300, None)
        onehot = np.eye(proba.shape[1])[y_codes]
        out["log_loss"] = float(-np.mean(np.log(p)))
        out["brier"] = float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))
    return out


def _plot_grid(split: Split, task: str) -> np.ndarray | None:
    """Inputs for the report's figures: a line for 1-D regression, a 2-D mesh for 2-D
    classification; ``None`` otherwise."""
    X = np.vstack([split.X_train, split.X_test])
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * (hi - lo)
    if task == REGRESSION and X.shape[1] == 1:
        return np.linspace(lo[0] - pad[0], hi[0] + pad[0], 300)[:, None]
    if task == CLASSIFICATION and X.shape[1] == 2:
        g0 = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 120)
        g1 = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 120)
        return np.stack(np.meshgrid(g0, g1), -1).reshape(-1, 2)
    return None


def _relevant_index(post) -> np.ndarray:
    """Training indices of the relevance vectors: the kernel columns on dim ``basis`` when
    the fit pruned the basis, else the ``n_relevant`` columns with the smallest posterior
    mean ``alpha`` (for methods that keep every column, e.g. sampling)."""
    idx = np.asarray(post["constant_data"]["centre_index"].values)
    n_rel = int(post.attrs.get("n_relevant", idx.size))
    keep = np.arange(idx.size)
    if n_rel < idx.size and "alpha" in post["posterior"]:
        alpha = post["posterior"]["alpha"].mean(("chain", "draw")).values
        keep = np.argsort(alpha)[:n_rel]
    sel = idx[keep]
    return np.sort(sel[sel >= 0])


def _diagnostics(post) -> dict[str, float]:
    out: dict[str, float] = {}
    stats = post["sample_stats"] if "sample_stats" in post.children else None
    if stats is None or "diverging" not in stats:
        return out
    import arviz as az

    out["divergences"] = int(np.sum(stats["diverging"].values))
    names = [v for v in post["posterior"].data_vars]
    rhat = az.rhat(post, var_names=names)
    ess = az.ess(post, var_names=names, method="bulk")
    out["max_rhat"] = float(np.nanmax([np.nanmax(rhat[v].values) for v in names]))
    out["min_ess_bulk"] = float(np.nanmin([np.nanmin(ess[v].values) for v in names]))
    return out


WIDTH_FACTORS = np.array([0.5, 0.7, 1.0, 1.4, 2.0])  # width=cv tries these x the default


def _fit_svm(method: MethodSpec, task: str, split: Split, widths, seed: int):
    """scikit-learn SVR/SVC with the Gaussian kernel, C (and epsilon) by k-fold CV; with
    several ``widths`` the width too (``gamma = 1 / r^2``)."""
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.svm import SVC, SVR

    opts = dict(method.options)
    # Tipping's exp(-|x-c|^2 / r^2) is scikit-learn's gamma = 1 / r^2
    grid: dict[str, Any] = {"gamma": 1.0 / np.asarray(widths, float) ** 2}
    if task == REGRESSION:
        sd = np.std(split.y_train)  # C and epsilon scale with the targets
        est = SVR(kernel="rbf")
        grid.update(C=sd * np.logspace(-1, 2, 4), epsilon=sd * np.array([0.01, 0.1, 0.3]))
        folds = KFold(int(opts.get("cv", 5)), shuffle=True, random_state=seed)
    else:
        est = SVC(kernel="rbf")
        grid["C"] = np.logspace(-1, 3, 5)
        folds = StratifiedKFold(int(opts.get("cv", 5)), shuffle=True, random_state=seed)
    if "C" in opts:
        grid["C"] = [float(opts["C"])]
    search = GridSearchCV(est, grid, cv=folds, n_jobs=1)
    search.fit(split.X_train, split.y_train)
    return search.best_estimator_


def _rvm_problem(kind: str, X, y, width, opts: dict[str, Any]):
    """The problem of an rvm/rvm*/gp cell; reads (and leaves) the runner options."""
    from sparsebayes.models import GaussianKernel, RVMClassification, RVMRegression, as_kernel

    if kind == "gp":
        from sparsebayes.models import GPRegression

        return GPRegression(X, y)
    if "kernel" in opts:
        kernel = as_kernel(opts["kernel"])
    else:
        kernel = GaussianKernel(np.full(X.shape[1], width) if opts.get("ard") else width)
    common = {"kernel": kernel, "bias": bool(opts.get("bias", True)),
              "learn_width": bool(opts.get("learn_width", False))}
    if kind == "regression":
        return RVMRegression(X, y, **common)
    return RVMClassification(X, y, **common)


def _cv_width(cell: Cell, kind: str, pkind, split: Split, widths, opts, fit_opts) -> float:
    """Tipping's protocol (App. E): the kernel width with the best k-fold cross-validated
    loss on the training split (mean NLPD for regression, log loss for classification)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    from .api import fit, predict

    if cell.method.method not in ("evidence", "evidence-mackay", "vrvm"):
        raise ValueError(f"width=cv refits {len(widths)} x {opts.get('cv', 5)} times: use it "
                         f"with evidence, evidence-mackay or vrvm, not {cell.method.method!r} "
                         "(or give a width, or learn_width=true)")
    k = int(opts.get("cv", 5))
    folds = (KFold if kind == "regression" else StratifiedKFold)(k, shuffle=True,
                                                                 random_state=cell.fit_seed)
    X, y = split.X_train, split.y_train
    losses = []
    for w in widths:
        loss = 0.0
        for tr, va in folds.split(X, y):
            post = fit(_rvm_problem(kind, X[tr], y[tr], w, opts), cell.method.method,
                       seed=cell.fit_seed, **fit_opts)
            loss -= np.sum(predict(post, X[va], kind=pkind).logpdf(y[va]))
        losses.append(loss / y.size)
    return float(widths[int(np.argmin(losses))])


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell and return its record (never raises for a failing method: the record
    has ``status="failed"`` and the error). With ``cell.figures`` the record also carries
    ``"_arrays"`` (plot inputs) and ``"_posterior"`` (the DataTree)."""
    from threadpoolctl import threadpool_limits

    record: dict[str, Any] = {**cell.key, "task": cell.data.info.task, "status": "ok",
                              "error": "", "fit_seed": cell.fit_seed}
    pymc_log = logging.getLogger("pymc")  # its INFO lines would break the progress bar
    level = pymc_log.level
    pymc_log.setLevel(max(level, logging.WARNING))
    with warnings.catch_warnings(record=True) as caught, \
            threadpool_limits(limits=cell.blas_threads):
        warnings.simplefilter("always")
        try:
            record.update(_run(cell, record))
        except Exception as exc:  # a failing cell is a result, not a crash
            record["status"] = "failed"
            record["error"] = f"{type(exc).__name__}: {exc}"
            record["traceback"] = traceback.format_exc(limit=20)
        finally:
            pymc_log.setLevel(level)
    from sparsebayes.models import SparseBayesWarning

    ours = [w for w in caught if issubclass(w.category, SparseBayesWarning)]
    record["n_warnings"] = len(ours)
    record["warnings"] = " | ".join(sorted({f"{w.category.__name__}: {w.message}"
                                            for w in ours}))
    return record


def _run(cell: Cell, record: dict[str, Any]) -> dict[str, Any]:
    from .api import fit, predict

    task = cell.data.info.task
    reason = cell.method.check(task)
    if reason is not None:
        raise ValueError(reason)
    split = load_split(cell.data, cell.split, cell.seed, cell.data_dir)
    out: dict[str, Any] = {"n_train": split.X_train.shape[0], "n_test": split.X_test.shape[0],
                           "n_features": split.X_train.shape[1]}
    opts = dict(cell.method.options)
    opts.pop("splits", None)
    width = opts.pop("width", cell.data.width)
    widths = cell.data.width * WIDTH_FACTORS if width == "cv" else np.array([float(width)])
    grid = _plot_grid(split, task) if cell.figures else None
    arrays: dict[str, np.ndarray] = {}
    post = None

    if cell.method.family == "svm":
        start = time.perf_counter()
        est = _fit_svm(cell.method, task, split, widths, cell.fit_seed)
        out["fit_seconds"] = time.perf_counter() - start
        out["width"] = float(1 / np.sqrt(est.gamma))
        start = time.perf_counter()
        yhat = est.predict(split.X_test)
        out["predict_seconds"] = time.perf_counter() - start
        out["n_relevant"] = int(est.support_.size)
        out["converged"] = 1
        if task == REGRESSION:
            out.update(_regression_scores(yhat, split.y_test))
        else:
            out.update(_classification_scores(None, yhat, split.y_test))
        relevant = np.sort(est.support_)
        if grid is not None:
            arrays["grid_mean" if task == REGRESSION else "grid_label"] = est.predict(grid)
            if task == CLASSIFICATION:
                arrays["grid_score"] = est.decision_function(grid)
    else:
        kind, pkind = FAMILIES[cell.method.family][task]
        pkind = opts.pop("predict", pkind)
        runner = {k: opts.pop(k) for k in ("learn_width", "ard", "bias", "kernel", "cv")
                  if k in opts}
        start = time.perf_counter()
        width = float(widths[0])
        if widths.size > 1 and kind != "gp":
            width = _cv_width(cell, kind, pkind, split, widths, runner, opts)
        problem = _rvm_problem(kind, split.X_train, split.y_train, width, runner)
        post = fit(problem, cell.method.method, seed=cell.fit_seed, **opts)
        out["fit_seconds"] = time.perf_counter() - start
        if "width" in post.attrs:  # the width used (learned by the evidence, if asked)
            w = np.atleast_1d(np.asarray(post.attrs["width"], float))
            out["width"] = float(w[0]) if w.size == 1 else float(np.exp(np.mean(np.log(w))))
        elif kind != "gp":
            out["width"] = float(width)
        start = time.perf_counter()
        pred = predict(post, split.X_test, kind=pkind)
        out["predict_seconds"] = time.perf_counter() - start
        # a GP keeps every training point: no relevance vectors to count (NaN, shown "–")
        n_rel = int(post.attrs.get("n_relevant", -1))  # the GP's attrs say -1
        out["n_relevant"] = n_rel if n_rel >= 0 else np.nan
        out["converged"] = int(post.attrs.get("converged", 1))
        if "log_evidence" in post.attrs:
            out["log_evidence"] = float(post.attrs["log_evidence"])
        out.update(_diagnostics(post))
        if task == REGRESSION:
            out.update(_regression_scores(pred.mean, split.y_test, pred))
        else:
            codes = pred.codes(split.y_test)  # ValueError for a class unseen in training
            proba = np.asarray(pred.proba)
            out.update(_classification_scores(proba, proba.argmax(1), codes))
        relevant = _relevant_index(post) if kind != "gp" else np.array([], dtype=int)
        if grid is not None:
            gp_ = predict(post, grid, kind=pkind)
            if task == REGRESSION:
                lo, hi = gp_.interval(0.95)
                arrays.update(grid_mean=gp_.mean, grid_lo=lo, grid_hi=hi)
            else:
                arrays["grid_proba"] = np.asarray(gp_.proba)[:, -1]
    if grid is not None:
        arrays.update(grid=grid, X_train=split.X_train, y_train=split.y_train,
                      relevant=relevant)
        if split.truth is not None:
            arrays["grid_truth"] = split.truth(grid)
        out["_arrays"] = arrays
    if post is not None and cell.figures:
        out["_posterior"] = post
    return out


# --------------------------------------------------------------------------------------
# storage
# --------------------------------------------------------------------------------------
def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _save_cell(out: Path, cell: Cell, record: dict[str, Any]) -> dict[str, Any]:
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
        import shutil

        final = path.with_suffix(".zarr")
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.zarr")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            post.to_zarr(tmp, consolidated=False)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            record["posterior_file"] = final.name
        except Exception as exc:  # the metrics still count; say why the file is missing
            shutil.rmtree(tmp, ignore_errors=True)
            record["posterior_file"] = ""
            record["posterior_error"] = f"{type(exc).__name__}: {exc}"
    _atomic_write(path, json.dumps(record, indent=1, default=_json_default))
    return record


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in a cell record")


def _load_cell(out: Path, cell: Cell) -> dict[str, Any] | None:
    path = cell.path(out)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is recomputed
    if any(record.get(k) != v for k, v in cell.key.items()):
        return None
    return record


@dataclass(frozen=True)
class StudyConfig:
    data: tuple[DataSpec, ...]
    methods: tuple[MethodSpec, ...]
    splits: int
    seed: int

    def manifest(self) -> dict[str, Any]:
        return {"format": CELL_FORMAT, "data": [d.label for d in self.data],
                "methods": [m.label for m in self.methods], "splits": self.splits,
                "seed": self.seed}

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


def _config(data, methods, splits, seed) -> StudyConfig:
    data_specs = parse_data(data)
    method_specs = parse_methods(methods)
    if not isinstance(splits, int | np.integer) or splits < 1:
        raise ValueError(f"splits must be a positive integer, got {splits!r}")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    config = StudyConfig(tuple(data_specs), tuple(method_specs), int(splits), int(seed))
    tasks = {d.info.task for d in data_specs}
    for m in method_specs:
        reasons = [m.check(t) for t in sorted(tasks)]
        if all(r is not None for r in reasons):
            raise ValueError(f"method {m.label!r} cannot run on any of the data sets: "
                             f"{'; '.join(reasons)}. Methods available now: "
                             f"{_valid_methods()}")
    return config


def _check_files(config: StudyConfig, data_dir) -> None:
    folder = Path(data_dir or os.environ.get("SPARSEBAYES_DATA", ".")).expanduser()
    for d in config.data:
        missing = [f for f in d.info.files if not (folder / f).is_file()]
        if missing:
            raise FileNotFoundError(
                f"data set {d.name!r} needs {missing}, not found in {folder.resolve()} "
                f"(set --data-dir or $SPARSEBAYES_DATA)")


def _prepare_out(out: Path, config: StudyConfig, resume: bool) -> None:
    manifest = out / MANIFEST
    if manifest.is_file():
        if not resume:
            old = json.loads(manifest.read_text())
            raise StudyExistsError(
                f"{out} already holds a study (data {old.get('data')}, methods "
                f"{old.get('methods')}, {old.get('splits')} splits); pass resume=True "
                f"(--resume) to continue it and compute only the missing cells, or choose "
                f"another output folder")
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(manifest, json.dumps(config.manifest(), indent=1))


# --------------------------------------------------------------------------------------
# executors
# --------------------------------------------------------------------------------------
def _dask_client(scheduler, timeout: float):
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is a dev/optional dependency
        raise ImportError("a Dask scheduler needs 'distributed': pip install "
                          "'sparsebayes[dask]'") from exc
    if isinstance(scheduler, Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not re.fullmatch(r"[a-z]+://[^\s]+", scheduler):
        raise ValueError(f"scheduler must be an address like 'tcp://host:8786' or a "
                         f"distributed.Client, got {scheduler!r}")
    try:
        client = Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"could not reach the Dask scheduler at {scheduler} within "
                              f"{timeout:g} s ({type(exc).__name__}: {exc})") from None
    return client, True


class _Progress:
    """A tqdm bar with cells done / running / failed and the time left."""

    def __init__(self, total: int, done: int, failed: int, slots: int, enabled: bool):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=done, unit="cell", desc="study",
                        disable=not enabled, file=sys.stderr, dynamic_ncols=True)
        self.failed, self.slots, self.left = failed, slots, total - done
        self._post()

    def _post(self) -> None:
        self.bar.set_postfix(running=min(self.slots, self.left), failed=self.failed,
                             refresh=False)

    def update(self, record: dict[str, Any]) -> None:
        self.left -= 1
        self.failed += record.get("status") != "ok"
        self._post()
        self.bar.update(1)

    def refresh(self) -> None:
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def _init_worker(parent: int) -> None:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import threading

    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int, every: float = 0.5) -> None:
    """A pool worker whose parent was killed (SIGKILL, the OOM killer) would wait for work
    forever, holding its memory; it exits once it has been re-parented."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


def _execute(todo: list[Cell], n_jobs: int, client,
             on_result: Callable[[Cell, dict], None], progress: _Progress) -> None:
    if client is not None:
        from distributed import as_completed

        futures = {client.submit(run_cell, c, pure=False): c for c in todo}
        try:
            for fut in as_completed(futures, loop=client.loop):
                cell = futures[fut]
                try:
                    rec = fut.result()
                except Exception as exc:  # the worker died (KilledWorker) and the like
                    rec = {**cell.key, "task": cell.data.info.task, "status": "failed",
                           "error": f"{type(exc).__name__}: {exc}"}
                on_result(cell, rec)
                progress.update(rec)
        finally:
            client.cancel(list(futures))
        return
    if n_jobs == 1:
        for cell in todo:
            rec = run_cell(cell)
            on_result(cell, rec)
            progress.update(rec)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")  # fork after BLAS/numba threads is unsafe
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx, initializer=_init_worker,
                               initargs=(os.getpid(),))
    try:
        futures = {pool.submit(run_cell, c): c for c in todo}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            if not done:  # long cells: keep the elapsed time ticking
                progress.refresh()
            for fut in done:
                try:
                    rec = fut.result()
                except BrokenProcessPool as exc:
                    raise RuntimeError("a worker process died (out of memory?); the "
                                       "finished cells are saved: re-run with --resume"
                                       ) from exc
                on_result(futures[fut], rec)
                progress.update(rec)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_study(
    data: str | Sequence[str | DataSpec],
    methods: str | Sequence[str | MethodSpec],
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
    data : data specs (``"sinc,ripley_mixture"`` or a list), names in :data:`DATASETS`.
    methods : method specs (``"rvm/evidence,rvm*/evidence,gp/evidence,svm"``).
    splits : splits per data set (fewer where the data set stores fewer, or a method asks
        for fewer with ``:splits=k``).
    out : folder for the per-cell results, ``results.csv`` and the report inputs; ``None``
        keeps everything in memory. A folder holding a study is refused unless ``resume``.
    seed : study seed; every data split and fit seed derives from it.
    n_jobs : local worker processes (1: in this process).
    scheduler : Dask scheduler address (``"tcp://host:8786"``) or ``distributed.Client``;
        replaces the local processes. An unreachable address raises ``ConnectionError``
        after ``timeout`` seconds.
    resume : continue the study in ``out``: reuse every stored cell with the same data,
        split, method and seed, and compute the rest.
    retry_failed : with ``resume``, recompute the cells that failed before.
    figure_splits : for the first ``figure_splits`` splits, keep the plot inputs and the
        posterior (zarr) for the report.
    blas_threads : BLAS threads per cell (1 keeps the numbers identical across executors).
    """
    config = _config(data, methods, splits, seed)
    if not isinstance(n_jobs, int | np.integer) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer, got {n_jobs!r}")
    _check_files(config, data_dir)
    cells, skipped = config.cells(data_dir, figure_splits, blas_threads)
    out_path = None if out is None else Path(out)
    client, own = (None, False)
    if scheduler is not None:  # fail fast on a bad address, before touching the folder
        client, own = _dask_client(scheduler, timeout)
    try:
        records: dict[int, dict[str, Any]] = {}
        if out_path is not None:
            _prepare_out(out_path, config, resume)
            _atomic_write(out_path / "skipped.json", json.dumps(skipped, indent=1))
            for i, cell in enumerate(cells):
                rec = _load_cell(out_path, cell)
                if rec is not None and (rec.get("status") == "ok" or not retry_failed):
                    records[i] = rec
        todo = sorted((c for i, c in enumerate(cells) if i not in records), key=_cost_rank)
        index = {id(c): i for i, c in enumerate(cells)}
        n_failed = sum(r.get("status") != "ok" for r in records.values())
        slots = n_jobs if client is None else _dask_slots(client)
        bar = _Progress(len(cells), len(records), n_failed, slots, progress)

        def on_result(cell: Cell, rec: dict[str, Any]) -> None:
            if out_path is not None:
                rec = _save_cell(out_path, cell, rec)
            else:
                rec = {k: v for k, v in rec.items() if not k.startswith("_")}
            records[index[id(cell)]] = rec

        try:
            _execute(todo, n_jobs, client, on_result, bar)
        finally:
            bar.close()
    finally:
        if own:
            client.close()
    table = _table([records[i] for i in sorted(records)])
    if out_path is not None:
        table.to_csv(out_path / TABLE, index=False)
    return table


_COST = {"nuts": 0, "advi": 1, "fullrank_advi": 1, "vrvm": 2}


def _cost_rank(cell: Cell) -> int:
    """Expensive cells first (a longest-first order keeps every worker busy to the end);
    the order changes no number: every cell has its own seed."""
    return _COST.get(cell.method.method, 3)


def _dask_slots(client) -> int:
    try:
        return max(1, int(sum(client.nthreads().values())))
    except Exception:  # an informational number only
        return 1


_FIRST = ["dataset", "split", "method", "task", "status", "error", "n_train", "n_test",
          "n_features", "width", "mse", "rmse", "mae", "nlpd", "coverage95", "error_rate",
          "log_loss", "brier", "n_relevant", "fit_seconds", "predict_seconds", "converged",
          "log_evidence", "divergences", "max_rhat", "min_ess_bulk", "n_warnings",
          "warnings", "seed", "fit_seed"]
TIMING_COLUMNS = ("fit_seconds", "predict_seconds")


def _table(records: list[dict[str, Any]]) -> pd.DataFrame:
    drop = {"format", "traceback", "arrays_file", "posterior_file", "posterior_error"}
    rows = [{k: v for k, v in r.items() if k not in drop and not k.startswith("_")}
            for r in records]
    table = pd.DataFrame(rows)
    cols = [c for c in _FIRST if c in table.columns]
    cols += [c for c in table.columns if c not in cols]
    return table[cols].reset_index(drop=True) if len(table) else table


def load_table(out: str | os.PathLike) -> pd.DataFrame:
    """The table of the study in ``out`` from its cell files (finished cells only), in the
    order of the study's data sets, methods and splits."""
    out = Path(out)
    manifest = out / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{out} holds no study ({MANIFEST} not found)")
    m = json.loads(manifest.read_text())
    config = StudyConfig(tuple(DataSpec.parse(d) for d in m["data"]),
                         tuple(MethodSpec.parse(x) for x in m["methods"]), m["splits"],
                         m["seed"])
    records = []
    for d in config.data:
        for meth in config.methods:
            for s in range(config.splits):
                rec = _load_cell(out, Cell(d, s, meth, config.seed))
                if rec is not None:
                    records.append(rec)
    return _table(records)


# The README's main job: built-in data only (no files, no network), every posterior, in a
# few minutes on 2 cores including nutpie's (numba) and PyTensor's first compilations.
# Sampling costs O(N M^2) per gradient with M = N + 1 kernel columns (measured on 2 busy
# cores: NUTS 45-135 s per cell, ADVI ~8 s, everything else < 10 s), so the two
# scikit-learn data sets use a random 150 of their training points (every method sees the
# same split) and the sampling posteriors run on the first splits only: ADVI on 2, NUTS on 1
# with 2 chains of 300 draws after 300 tuning steps, one chain after the other (cores=1:
# the study already runs one cell per core). Paired t-tests use the splits both methods
# finished. Everything else runs on all 10 splits.
DEFAULT_STUDY: dict[str, Any] = {
    "data": ["sinc", "ripley_mixture", "diabetes:n_train=150",
             "breast_cancer_wisconsin:n_train=150"],
    "methods": ["rvm/evidence", "rvm*/evidence", "gp/evidence", "rvm/vrvm",
                "rvm/advi:splits=2", "rvm/nuts:chains=2:cores=1:draws=300:splits=1:tune=300",
                "svm"],
    "splits": 10,
}
SMALL_STUDY: dict[str, Any] = {
    "data": ["sinc", "ripley_mixture", "diabetes", "breast_cancer_wisconsin"],
    "methods": ["rvm/evidence", "rvm*/evidence", "gp/evidence", "svm"],
    "splits": 2,
}
