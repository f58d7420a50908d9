"""Data sets of the RVM literature: generators (no files) and loaders for the real benchmark
files, which are read from a data directory (argument or ``SPARSEBAYES_DATA``) and never
shipped with the package."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "sinc_function",
    "sinc",
    "sinc2d",
    "friedman",
    "ripley_mixture",
    "data_dir",
    "load_ripley",
    "load_ida",
    "load_boston",
    "load_pima",
    "load_haberman",
    "load_kin40k",
    "load_usps",
    "available",
    "catalogue",
    "missing_files",
    "missing_message",
    "random_split",
    "standardise",
    "DataInfo",
    "Split",
    "GENERATORS",
    "IDA_SETS",
    "FILES",
    "BUNDLED",
    "DATASETS",
    "REGRESSION",
    "CLASSIFICATION",
    "COUNTS",
    "TASKS",
    "poisson_sine",
]

#: The tasks a data set is for (``DataInfo.task``): real targets, class labels, event
#: counts.
REGRESSION, CLASSIFICATION, COUNTS = "regression", "classification", "counts"
#: The three tasks.
TASKS = (REGRESSION, CLASSIFICATION, COUNTS)  # real targets, class labels, event counts

#: The IDA benchmark sets of Rätsch et al. (``load_ida``), each read from ``NAME.npz``.
IDA_SETS = ("banana", "breast_cancer", "german", "heart", "image", "ringnorm", "titanic",
            "waveform")
#: Data set -> the files it reads from the data folder (:func:`data_dir`).
FILES = {
    "ripley": ("ripley_train.csv", "ripley_test.csv"),
    "boston": ("boston.csv",),
    "pima_ripley": ("pima_ripley_train.csv", "pima_ripley_test.csv"),
    "pima_uci": ("pima_uci.csv",),
    "haberman": ("haberman.csv",),
    "kin40k": ("kin40k.npz",),
    "usps": ("usps.npz",),
    **{name: (f"{name}.npz",) for name in IDA_SETS},
}


#: The folder of the small public data sets shipped with the package (its README.md gives
#: their source and licence): a file of :data:`FILES` is read from here when the data
#: folder does not hold it (Ripley's synthetic data).
BUNDLED = Path(__file__).resolve().parent / "data"

# where the files of FILES come from (the data folder's README has the full provenance)
_IDA = ("Rätsch's IDA benchmark repository (realisations 1-10; the ASCII files "
        "<name>_{train,test}_{data,labels}_<k>.asc, e.g. of the GitHub repository "
        "fernando2393/Relevance-Vector-Machine, packed as one .npz: X, y, train_idx, test_idx, "
        "split_ids)")
SOURCES = {
    "ripley": "Ripley's synth.tr / synth.te (PRNN book data, R package MASS) as CSV with the "
              "header xs,ys,yc; shipped with the package (models/data)",
    "boston": "scikit-learn 1.1.3's sklearn/datasets/data/boston_house_prices.csv without its "
              "first line (removed from scikit-learn in 1.2)",
    "pima_ripley": "Ripley's pima.tr / pima.te (R package MASS: Pima.tr, Pima.te) as CSV, "
                   "type Yes/No recoded 1/0",
    "pima_uci": "the UCI pima-indians-diabetes.data with a header line",
    "haberman": "the UCI haberman.data with a header line",
    "kin40k": "the KIN40K 10000/30000 split (Schwaighofer & Tresp 2003; e.g. the GitHub "
              "repository trungngv/fgp, data/kin40k) as one .npz: X_train, y_train, X_test, "
              "y_test",
    "usps": "the USPS digits' 7291/2007 split (usps.h5 repack, e.g. of "
            "fernando2393/Relevance-Vector-Machine) as one .npz: X_train, y_train, X_test, "
            "y_test",
    **dict.fromkeys(IDA_SETS, _IDA),
}


def missing_message(name: str, data_dir: str | os.PathLike | None = None) -> str | None:
    """``None`` if every file of data set ``name`` (:data:`FILES`) is in the data folder,
    else what to do: the missing files, the folder searched (or that none was given), how to
    give one (``--data-dir`` / ``data_dir=``, or ``$SPARSEBAYES_DATA``) and where such files
    come from (:data:`SOURCES`)."""
    folder, missing = missing_files(name, data_dir)
    if not missing:
        return None
    if folder is not None:
        where = f"not found in the data folder {folder.resolve()}"
    else:
        raw = data_dir if data_dir is not None else os.environ.get("SPARSEBAYES_DATA")
        where = ("no data folder given (neither --data-dir / data_dir=... nor "
                 "$SPARSEBAYES_DATA is set)" if raw is None
                 else f"the data folder {Path(raw).expanduser()} does not exist")
    return (f"data set {name!r} needs the file(s) {', '.join(missing)}: {where}. Put them in "
            "a folder and pass it with --data-dir DIR (data_dir=DIR in Python) or set "
            f"SPARSEBAYES_DATA=DIR. {name} files: {SOURCES.get(name, 'see the data README')}.")


def sinc_function(x) -> np.ndarray:
    """``sin(x) / x`` with value 1 at 0 (Tipping 2001 §4.1)."""
    return np.sinc(np.asarray(x, dtype=float) / np.pi)


def sinc(n: int = 100, noise: str | None = "gaussian", noise_scale: float | None = None,
         seed: int | None = None, x_range: tuple[float, float] = (-10.0, 10.0),
         evenly_spaced: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Tipping's sinc data: ``n`` inputs on ``x_range`` (evenly spaced or uniform) and
    ``t = sinc(x) + noise``: ``"gaussian"`` (sd ``noise_scale``, default 0.1), ``"uniform"``
    (on [-noise_scale, noise_scale], default 0.2 as in §4.1) or ``None``. Returns (X (n, 1), t)."""
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    rng = np.random.default_rng(seed)
    lo, hi = x_range
    x = np.linspace(lo, hi, n) if evenly_spaced else np.sort(rng.uniform(lo, hi, n))
    f = sinc_function(x)
    if noise is None:
        eps = np.zeros(n)
    elif noise == "gaussian":
        eps = rng.normal(0.0, 0.1 if noise_scale is None else noise_scale, n)
    elif noise == "uniform":
        s = 0.2 if noise_scale is None else noise_scale
        eps = rng.uniform(-s, s, n)
    else:
        raise ValueError(f"noise must be 'gaussian', 'uniform' or None, got {noise!r}")
    return x[:, None], f + eps


def sinc2d(n: int, noise_sd: float = 0.1, seed: int | None = None, extent: float = 10.0
           ) -> tuple[np.ndarray, np.ndarray]:
    """Tipping & Faul (2003) §5: ``y = sin|x| / |x|`` on the square ``[-extent, extent]^2``
    plus Gaussian noise. Returns (X (n, 2), t)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-extent, extent, (n, 2))
    return X, sinc_function(np.linalg.norm(X, axis=1)) + rng.normal(0.0, noise_sd, n)


def friedman(n: int, kind: int = 1, seed: int | None = None, noise: float | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Friedman's functions #1-#3 through scikit-learn's generators (T01 App. E eqs.
    62-64). Default noise: sd 1 for #1; for #2 and #3 one third of the signal's sd."""
    from sklearn import datasets as skd

    gen = {1: skd.make_friedman1, 2: skd.make_friedman2, 3: skd.make_friedman3}
    if kind not in gen:
        raise ValueError(f"kind must be 1, 2 or 3, got {kind!r}")
    state = np.random.RandomState(np.random.default_rng(seed).integers(2**31))
    X, f = gen[kind](n_samples=n, noise=0.0, random_state=state)
    sd = (1.0 if kind == 1 else np.std(f) / 3.0) if noise is None else noise
    return X, f + state.normal(0.0, sd, n)


# Ripley (1994): each class an equal mixture of two Gaussians with covariance 0.03 I.
_RIPLEY_MEANS = {0: np.array([[-0.7, 0.3], [0.3, 0.3]]), 1: np.array([[-0.3, 0.7], [0.4, 0.7]])}


def ripley_mixture(n: int, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Draws from Ripley's generating model (balanced classes). Returns (X (n, 2), y in {0,1})."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    rng.shuffle(y)
    comp = rng.integers(0, 2, n)
    means = np.stack([_RIPLEY_MEANS[c][k] for c, k in zip(y, comp)]) if n else np.empty((0, 2))
    return means + rng.normal(0.0, np.sqrt(0.03), (n, 2)), y


def poisson_sine_rate(x) -> np.ndarray:
    """The rate ``exp(1 + sin(x))`` of :func:`poisson_sine`."""
    return np.exp(1.0 + np.sin(np.asarray(x, dtype=float)))


def poisson_sine(n: int, seed: int | None = None, x_range: tuple[float, float] = (-5.0, 5.0)
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Counts ``t ~ Poisson(exp(1 + sin(x)))`` at ``n`` uniform inputs on ``x_range``: a 1-D
    log-link problem for the Poisson RVM. Returns (X (n, 1), t)."""
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(*x_range, n))
    return x[:, None], rng.poisson(poisson_sine_rate(x))


#: Name -> function drawing a synthetic data set (no files needed).
GENERATORS = {"sinc": sinc, "sinc2d": sinc2d, "friedman": friedman,
              "ripley_mixture": ripley_mixture, "poisson_sine": poisson_sine}


# ---- real data --------------------------------------------------------------------------


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data directory: ``path``, else ``$SPARSEBAYES_DATA``; it must exist."""
    raw = path if path is not None else os.environ.get("SPARSEBAYES_DATA")
    if raw is None:
        raise FileNotFoundError(
            "no data directory: pass data_dir=... or set SPARSEBAYES_DATA to the folder "
            "holding the benchmark files")
    d = Path(raw).expanduser()
    if not d.is_dir():
        raise FileNotFoundError(f"data directory {d} does not exist")
    return d


def _file(name: str, path) -> Path:
    """The data file ``name`` in the data folder, else the package's copy
    (:data:`BUNDLED`), else ``FileNotFoundError`` saying where to put it and where it comes
    from (:func:`missing_message`)."""
    found = _found(name, path)
    if found is None:
        dataset = next(k for k, files in FILES.items() if name in files)
        raise FileNotFoundError(missing_message(dataset, path))
    return found


def _found(name: str, path) -> Path | None:
    """Where the data file ``name`` is read from: the data folder, else :data:`BUNDLED`."""
    try:
        folder = data_dir(path)
    except FileNotFoundError:
        folder = None
    for where in (folder, BUNDLED):
        if where is not None and (where / name).is_file():
            return where / name
    return None


def _csv(name: str, path) -> tuple[np.ndarray, list[str]]:
    f = _file(name, path)
    with f.open() as fh:
        header = fh.readline().strip().split(",")
    return np.loadtxt(f, delimiter=",", skiprows=1, ndmin=2), header


def load_ripley(split: str = "train", data_dir: str | os.PathLike | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Ripley's synthetic data: 250 training or 1000 test points, labels {0, 1}."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    arr, _ = _csv(f"ripley_{split}.csv", data_dir)
    return arr[:, :2], arr[:, 2].astype(int)


def load_ida(name: str, split: int = 0, data_dir: str | os.PathLike | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rätsch's IDA benchmark realisation ``split`` (0-based among those stored):
    ``X_train, y_train, X_test, y_test`` with labels {0, 1}."""
    if name not in IDA_SETS:
        raise ValueError(f"unknown IDA data set {name!r}; choose one of {list(IDA_SETS)}")
    with np.load(_file(f"{name}.npz", data_dir)) as d:
        n_splits = d["train_idx"].shape[0]
        if not 0 <= split < n_splits:
            raise ValueError(f"split must be in [0, {n_splits}) for {name}, got {split}")
        X, y = d["X"], d["y"].astype(int)
        tr, te = d["train_idx"][split], d["test_idx"][split]
    return X[tr], y[tr], X[te], y[te]


def load_boston(data_dir: str | os.PathLike | None = None
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Boston house prices (506 x 13, target MEDV), only to reproduce the literature."""
    arr, header = _csv("boston.csv", data_dir)
    return arr[:, :-1], arr[:, -1], header[:-1]


def load_pima(kind: str = "ripley", data_dir: str | os.PathLike | None = None):
    """Pima diabetes: ``"ripley"`` -> (X_train, y_train, X_test, y_test) of Ripley's
    200/332 split (Tipping 2001); ``"uci"`` -> (X, y) of the full 768 rows."""
    if kind == "ripley":
        tr, _ = _csv("pima_ripley_train.csv", data_dir)
        te, _ = _csv("pima_ripley_test.csv", data_dir)
        return tr[:, :-1], tr[:, -1].astype(int), te[:, :-1], te[:, -1].astype(int)
    if kind == "uci":
        arr, _ = _csv("pima_uci.csv", data_dir)
        return arr[:, :-1], arr[:, -1].astype(int)
    raise ValueError(f"kind must be 'ripley' or 'uci', got {kind!r}")


def load_haberman(data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Haberman's survival data; y = 1 if the patient died within 5 years, else 0."""
    arr, _ = _csv("haberman.csv", data_dir)
    return arr[:, :3], (arr[:, 3] == 2).astype(int)


def load_kin40k(data_dir: str | os.PathLike | None = None):
    """KIN40K: X_train (10000 x 8), y_train, X_test (30000 x 8), y_test (standardised)."""
    with np.load(_file("kin40k.npz", data_dir)) as d:
        return d["X_train"], d["y_train"], d["X_test"], d["y_test"]


def load_usps(data_dir: str | os.PathLike | None = None):
    """USPS digits: X_train (7291 x 256), y_train, X_test (2007 x 256), y_test (0-9)."""
    with np.load(_file("usps.npz", data_dir)) as d:
        return (d["X_train"].astype(float), d["y_train"].astype(int),
                d["X_test"].astype(float), d["y_test"].astype(int))


def available(data_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Every data set by name with where it comes from: ``"generator"`` or the file path
    found, or ``"missing: <file> in <dir>"``."""
    out = {name: "generator" for name in GENERATORS}
    try:
        d = globals()["data_dir"](data_dir)
    except FileNotFoundError as exc:
        d, reason = None, str(exc)
    for name, files in FILES.items():
        found = [_found(f, data_dir) for f in files]
        if all(found):
            out[name] = str(found[0])
        else:
            missing = files[found.index(None)]
            out[name] = f"missing: {missing} in {d}" if d is not None else f"missing: {reason}"
    return out


def missing_files(name: str, data_dir: str | os.PathLike | None = None) -> tuple[Path | None,
                                                                              list[str]]:
    """The data folder (``None`` if there is none) and the files of data set ``name``
    (:data:`FILES`) found neither there nor in the package (:data:`BUNDLED`)."""
    files = FILES.get(name, ())
    try:
        d = globals()["data_dir"](data_dir)
    except FileNotFoundError:
        d = None
    return d, [f for f in files if _found(f, data_dir) is None]


# ---- train/test splits for comparison studies ----------------------------------------------


@dataclass(frozen=True)
class Split:
    """One train/test split; ``truth`` (optional) is the noise-free function for 1-D plots;
    ``train_index`` / ``test_index`` the rows of the data table, for splits of one table."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    truth: Callable[[np.ndarray], np.ndarray] | None = None
    train_index: np.ndarray | None = None
    test_index: np.ndarray | None = None


@dataclass(frozen=True)
class DataInfo:
    """A data set known by name to the comparison study (:data:`DATASETS`).

    ``width`` is the default Gaussian kernel width (Tipping's ``exp(-|x-c|^2/r^2)``) for RVM
    and SVM; ``loader(rng, split, fold_seed, *, data_dir, **options)`` returns a
    :class:`Split`; ``files`` (from :data:`FILES`) are read from the data directory;
    ``max_splits`` bounds the splits when they are stored with the data (IDA realisations)."""

    name: str
    task: str
    source: str  # "generator", "scikit-learn" (bundled, no network), "file" or "user"
    description: str
    width: float
    loader: Callable[..., Split]
    options: dict[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    max_splits: int | None = None


def standardise(split: Split, targets: bool) -> Split:
    """Inputs (and, if ``targets``, the targets) scaled by the training split's mean and sd."""
    m, s = split.X_train.mean(0), split.X_train.std(0)
    s = np.where(s > 0, s, 1.0)
    y_tr, y_te = split.y_train, split.y_test
    if targets:
        tm, ts = y_tr.mean(), y_tr.std()
        ts = ts if ts > 0 else 1.0
        y_tr, y_te = (y_tr - tm) / ts, (y_te - tm) / ts
    return Split((split.X_train - m) / s, y_tr, (split.X_test - m) / s, y_te,
                 train_index=split.train_index, test_index=split.test_index)


def random_split(X, y, rng, test_fraction: float, n_train: int | None, folds: int | None,
                 split: int, fold_seed: int, task: str) -> Split:
    """Split ``split`` of a data set without stored splits, standardised
    (:func:`standardise`): the ``split``-th of ``folds`` folds (one shuffle per
    ``fold_seed``), or a fresh random train/test partition drawn from ``rng``; ``n_train``
    keeps a random subset of the training points."""
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
    return standardise(Split(X[train], y[train], X[test], y[test], train_index=train,
                             test_index=test), task == REGRESSION)


def _sklearn_bunch(name: str):
    from sklearn import datasets as skd

    return getattr(skd, f"load_{name}")(return_X_y=True)


def _draw_seed(rng) -> int:
    return int(rng.integers(2**31))


def _split_diabetes(rng, split, fold_seed, *, test_fraction=0.2, n_train=None, folds=None,
                    data_dir=None) -> Split:
    X, y = _sklearn_bunch("diabetes")
    return random_split(X, y.astype(float), rng, test_fraction, n_train, folds, split,
                        fold_seed, REGRESSION)


def _split_wdbc(rng, split, fold_seed, *, test_fraction=0.2, n_train=None, folds=None,
                data_dir=None) -> Split:
    X, y = _sklearn_bunch("breast_cancer")
    return random_split(X, y, rng, test_fraction, n_train, folds, split, fold_seed,
                        CLASSIFICATION)


def _split_sinc(rng, split, fold_seed, *, n_train=100, n_test=1000, noise="gaussian",
                noise_sd=None, data_dir=None) -> Split:
    """Tipping (2001) §4.1 / App. E: ``n_train`` evenly spaced inputs on [-10, 10], a fresh
    noise draw per split; test targets are noisy too (``n_test`` uniform inputs), so the
    NLPD is defined; ``truth`` is the noise-free sinc for the report's figure. Raw units."""
    X, t = sinc(int(n_train), noise=noise, noise_scale=noise_sd, seed=_draw_seed(rng))
    Xs, ts = sinc(int(n_test), noise=noise, noise_scale=noise_sd, seed=_draw_seed(rng),
                  evenly_spaced=False)
    return Split(X, t, Xs, ts, truth=lambda g: sinc_function(np.asarray(g)[:, 0]))


def _split_ripley_mixture(rng, split, fold_seed, *, n_train=100, n_test=1000,
                          data_dir=None) -> Split:
    """Fresh draws from Ripley's generating model per split (raw units, as Tipping's Fig. 3)."""
    X, y = ripley_mixture(int(n_train), seed=_draw_seed(rng))
    Xs, ys = ripley_mixture(int(n_test), seed=_draw_seed(rng))
    return Split(X, y, Xs, ys)


def _split_poisson_sine(rng, split, fold_seed, *, n_train=200, n_test=1000,
                        data_dir=None) -> Split:
    """Fresh draws of :func:`poisson_sine` per split (raw units); ``truth`` is the rate."""
    X, t = poisson_sine(int(n_train), seed=_draw_seed(rng))
    Xs, ts = poisson_sine(int(n_test), seed=_draw_seed(rng))
    return Split(X, t, Xs, ts, truth=lambda g: poisson_sine_rate(np.asarray(g)[:, 0]))


def _subset(rng, X, y, n_train):
    if n_train is not None and int(n_train) < y.size:
        keep = np.sort(rng.choice(y.size, size=int(n_train), replace=False))
        return X[keep], y[keep]
    return X, y


def _split_ripley(rng, split, fold_seed, *, n_train=100, data_dir=None) -> Split:
    """Ripley's files: a random ``n_train`` of the 250 training points per split (Tipping
    2001 §4.2 used 100), tested on the 1000 test points; raw units."""
    X, y = _subset(rng, *load_ripley("train", data_dir), n_train)
    return Split(X, y, *load_ripley("test", data_dir))


def _split_boston(rng, split, fold_seed, *, folds=10, test_fraction=0.05, n_train=None,
                  data_dir=None) -> Split:
    """Boston housing: R&QC (2005) 10-fold CV by default (``folds=None``: Tipping's random
    481/25 splits with ``test_fraction=0.05``); inputs and targets standardised."""
    X, y, _ = load_boston(data_dir)
    return random_split(X, y, rng, test_fraction, n_train, folds, split, fold_seed,
                        REGRESSION)


def _split_ida(name: str) -> Callable[..., Split]:
    def load(rng, split, fold_seed, *, n_train=None, data_dir=None) -> Split:
        X, y, Xs, ys = load_ida(name, split, data_dir)
        return Split(*_subset(rng, X, y, n_train), Xs, ys)  # Rätsch's files are normalised

    return load


#: Every named data set (generated, bundled with scikit-learn, or read from files) -> its
#: :class:`DataInfo`; the data specs of studies name these.
DATASETS: dict[str, DataInfo] = {}


def _register(info: DataInfo) -> None:
    DATASETS[info.name] = info


_register(DataInfo(
    "sinc", REGRESSION, "generator",
    "Tipping (2001) §4.1: sinc(x) on 100 evenly spaced x in [-10, 10] + N(0, 0.1^2) noise, "
    "a new noise draw per split; 1000 noisy test points",
    width=3.0, loader=_split_sinc,
    options={"n_train": 100, "n_test": 1000, "noise": "gaussian", "noise_sd": None}))
_register(DataInfo(
    "ripley_mixture", CLASSIFICATION, "generator",
    "Ripley's (1994) generating model (2-D, two Gaussians per class), 100 training points "
    "(as Tipping's Fig. 3) and 1000 test points drawn afresh per split",
    width=0.5, loader=_split_ripley_mixture, options={"n_train": 100, "n_test": 1000}))
_register(DataInfo(
    "poisson_sine", COUNTS, "generator",
    "Counts t ~ Poisson(exp(1 + sin x)) at 200 uniform x in [-5, 5], drawn afresh per split; "
    "1000 test points",
    width=1.5, loader=_split_poisson_sine, options={"n_train": 200, "n_test": 1000}))
_register(DataInfo(
    "ripley", CLASSIFICATION, "file",
    "Ripley's synthetic data files: a random 100 of the 250 training points per split "
    "(Tipping 2001 §4.2), the 1000 test points",
    width=0.5, loader=_split_ripley, options={"n_train": 100}, files=FILES["ripley"]))
_register(DataInfo(
    "boston", REGRESSION, "file",
    "Boston housing (506 x 13): R&QC (2005) 10-fold CV (folds=None: Tipping's random "
    "481/25 splits), standardised",
    width=5.0, loader=_split_boston,
    options={"folds": 10, "test_fraction": 0.05, "n_train": None}, files=FILES["boston"]))
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
        width=float(_width), loader=_split_ida(_name), options={"n_train": None},
        files=FILES[_name], max_splits=9 if _name == "image" else 10))
_register(DataInfo(
    "diabetes", REGRESSION, "scikit-learn",
    "scikit-learn's bundled diabetes data (442 x 10); random 80/20 splits, standardised",
    width=5.0, loader=_split_diabetes,
    options={"test_fraction": 0.2, "n_train": None, "folds": None}))
_register(DataInfo(
    "breast_cancer_wisconsin", CLASSIFICATION, "scikit-learn",
    "scikit-learn's bundled Wisconsin diagnostic breast-cancer data (569 x 30); random "
    "80/20 splits, standardised (not the IDA 'breast_cancer' set)",
    width=8.0, loader=_split_wdbc,
    options={"test_fraction": 0.2, "n_train": None, "folds": None}))


def catalogue(data_dir: str | os.PathLike | None = None):
    """Every data set of :data:`DATASETS` as a ``pandas.DataFrame``: task, source and (for
    files) whether they are found in the data directory (``data_dir`` or
    ``$SPARSEBAYES_DATA``)."""
    import pandas as pd

    rows = []
    for info in DATASETS.values():
        folder, missing = missing_files(info.name, data_dir) if info.files else (None, [])
        rows.append({
            "name": info.name, "task": info.task, "source": info.source,
            "available": not missing,
            "where": str(folder) if info.files and folder is not None else "",
            "missing": ", ".join(missing),
            "description": info.description,
        })
    return pd.DataFrame(rows)
