"""Data sets of the RVM literature: generators (no files) and loaders for the real benchmark
files, which are read from a data directory (argument or ``SPARSEBAYES_DATA``) and never
shipped with the package."""

from __future__ import annotations

import os
from pathlib import Path

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
    "GENERATORS",
    "IDA_SETS",
    "FILES",
]

IDA_SETS = ("banana", "breast_cancer", "german", "heart", "image", "ringnorm", "titanic",
            "waveform")
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
    """Friedman's functions #1-#3 through scikit-learn's generators (Tipping App. E eqs.
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


GENERATORS = {"sinc": sinc, "sinc2d": sinc2d, "friedman": friedman,
              "ripley_mixture": ripley_mixture}


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
    d = data_dir(path)
    f = d / name
    if not f.is_file():
        raise FileNotFoundError(f"data file {name} not found in {d.resolve()}")
    return f


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
        if d is None:
            out[name] = f"missing: {reason}"
            continue
        missing = [f for f in files if not (d / f).is_file()]
        out[name] = str(d / files[0]) if not missing else f"missing: {missing[0]} in {d}"
    return out
