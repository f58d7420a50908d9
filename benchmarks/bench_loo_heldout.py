"""Does leave-one-out rank methods as held-out data does? Each method's default ``loo(post)``
against its held-out log density, per point, on random 70/30 splits (issue 45).

Data sets: diabetes (scikit-learn, 442 points), breast cancer (scikit-learn's Wisconsin
set, 569), 1000 of scikit-learn's digits (10 classes), an 8-D Friedman #1 regression of
1500 points (``make_friedman1``, noise sd 1) and a Poisson problem of 400 points
(``datasets.poisson_sine``). Inputs standardised on the training split, regression targets
too. Methods: the RVM by the evidence (and MacKay for counts), VRVM, ADVI on a 50-centre
k-means dictionary, NUTS on a 30-centre one (regression and counts) and the GP (regression
and binary classification). Per row: the LOO elpd per point with its SE (the subsampling SE
added in quadrature) beside the mean held-out log density with its SE, their z, and the
seconds the LOO took; per data set and split, Kendall's tau between the two rankings and
whether every pair that held-out separates by more than 2 SE is ordered alike by LOO.
``--before`` also runs the estimators that were the default before the subsampled one
(warm refits up to 1000 points else 10 folds; VRVM 10 cold folds; PSIS for ADVI / NUTS).

    .venv/bin/python benchmarks/bench_loo_heldout.py [--splits 5] [--data diabetes,...]
        [--first 0] [--before] [--skip data/method,...] [--out benchmarks/results/loo_heldout.md]
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np
import pandas as pd
from report import markdown_table, write_report
from scipy import stats

from sparsebayes.inference import fit, loo, loo_compare, predict
from sparsebayes.inference.loo import observed_logpdf
from sparsebayes.models import (
    GaussianKernel,
    GPClassification,
    GPRegression,
    RVMClassification,
    RVMPoissonRegression,
    RVMRegression,
    datasets,
)

SAMPLED = {"advi": {"centres": 50}, "nuts": {"centres": 30}}
METHODS = {
    "diabetes": ("evidence", "vrvm", "advi", "nuts", "gp"),
    "breast_cancer": ("evidence", "vrvm", "advi", "gp"),
    "digits": ("evidence", "vrvm", "advi"),
    "friedman8": ("evidence", "vrvm", "advi", "nuts", "gp"),
    "poisson": ("evidence", "evidence-mackay", "advi", "nuts"),
}


def load(name: str):
    """(X, y, task) of a data set."""
    from sklearn import datasets as skd

    if name == "diabetes":
        X, y = skd.load_diabetes(return_X_y=True)
        return X, y, "regression"
    if name == "breast_cancer":
        X, y = skd.load_breast_cancer(return_X_y=True)
        return X, y, "classification"
    if name == "digits":
        X, y = skd.load_digits(return_X_y=True)
        idx = np.random.default_rng(0).permutation(y.size)[:1000]
        return X[idx], y[idx], "classification"
    if name == "friedman8":
        X, y = skd.make_friedman1(1500, n_features=8, noise=1.0, random_state=0)
        return X, y, "regression"
    if name == "poisson":
        X, y = datasets.poisson_sine(400, seed=0)
        return X, y, "counts"
    raise ValueError(f"unknown data set {name!r}")


def split(X, y, task, seed: int):
    """A random 70/30 split (stratified for classes), inputs standardised on the training
    part (and regression targets)."""
    from sklearn.model_selection import train_test_split

    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, random_state=seed,
                                      stratify=y if task == "classification" else None)
    mu, sd = Xa.mean(0), Xa.std(0)
    sd[sd == 0] = 1.0
    Xa, Xb = (Xa - mu) / sd, (Xb - mu) / sd
    if task == "regression":
        m, s = ya.mean(), ya.std()
        ya, yb = (ya - m) / s, (yb - m) / s
    return Xa, ya, Xb, yb


def problem(task, method, X, y):
    width = np.sqrt(X.shape[1])  # one width per sqrt(d) standardised units
    if method == "gp":
        return (GPRegression if task == "regression" else GPClassification)(X, y)
    cls = {"regression": RVMRegression, "classification": RVMClassification,
           "counts": RVMPoissonRegression}[task]
    return cls(X, y, kernel=GaussianKernel(width), **SAMPLED.get(method, {}))


BEFORE = {"advi": "psis", "nuts": "psis", "vrvm": "kfold"}


def before_estimator(method, n):
    return BEFORE.get(method, "refit" if n <= 1000 else "kfold")


def run(name: str, seeds, before: bool, skip=(), tables=None) -> list[dict]:
    """The rows of data set ``name``; ``tables`` collects ``loo_compare`` of the first
    split, as a user sees it."""
    X, y, task = load(name)
    rows = []
    for seed in seeds:
        results = {}
        Xa, ya, Xb, yb = split(X, y, task, seed)
        for method in METHODS[name]:
            if f"{name}/{method}" in skip:
                continue
            fit_method = "evidence" if method == "gp" else method
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                quiet = {"progressbar": False} if method in SAMPLED else {}
                post = fit(problem(task, method, Xa, ya), fit_method, seed=seed, **quiet)
            fit_s = time.perf_counter() - start
            held = observed_logpdf(predict(post, Xb), yb)
            base = {"data": name, "N": ya.size, "split": seed, "method": method,
                    "held": held.mean(), "held se": held.std(ddof=1) / np.sqrt(held.size),
                    "fit s": fit_s}
            for which in ("after", "before") if before else ("after",):
                est = None if which == "after" else before_estimator(method, ya.size)
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = loo(post, est, progressbar=False)
                n = ya.size
                if which == "after":
                    results[method] = res
                se = np.hypot(res.se, getattr(res, "subsampling_se", 0.0)) / n
                row = {**base, "estimator": which + ":" + res.estimator,
                       "loo": res.elpd / n, "loo se": se,
                       "loo s": time.perf_counter() - start}
                row["z"] = (row["loo"] - row["held"]) / np.hypot(se, row["held se"])
                rows.append(row)
                print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()},
                      flush=True)
        if tables is not None and seed == seeds[0] and len(results) > 1:
            table = loo_compare(results, unreliable="rank")
            tables.append(f"### {name}, split {seed} (N = {ya.size})")
            tables += ["", "```", table.to_string(), "```", ""]
            print(table.to_string(), flush=True)
    return rows


def agreement(df: pd.DataFrame) -> list[dict]:
    """Per data set, estimator kind and split: Kendall's tau of the LOO and held-out
    rankings, and the pairs held-out separates by > 2 SE (paired over the test points is
    not available here, so the SE of a difference is the two SEs in quadrature) that LOO
    orders the other way."""
    out = []
    df = df.assign(kind=df["estimator"].str.split(":").str[0])
    for (data, kind, seed), g in df.groupby(["data", "kind", "split"], sort=False):
        g = g.set_index("method")
        tau = stats.kendalltau(g["loo"], g["held"]).statistic
        wrong, separated = [], 0
        for a, b in itertools.combinations(g.index, 2):
            gap = g.loc[a, "held"] - g.loc[b, "held"]
            if abs(gap) > 2 * np.hypot(g.loc[a, "held se"], g.loc[b, "held se"]):
                separated += 1
                if np.sign(g.loc[a, "loo"] - g.loc[b, "loo"]) != np.sign(gap):
                    wrong.append(f"{a}/{b}")
        out.append({"data": data, "estimators": kind, "split": seed, "tau": tau,
                    "pairs separated": separated, "ordered otherwise": ", ".join(wrong) or "-",
                    "max abs z": float(np.max(np.abs(g["z"])))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--first", type=int, default=0, help="seed of the first split")
    ap.add_argument("--data", default=",".join(METHODS))
    ap.add_argument("--before", action="store_true")
    ap.add_argument("--skip", default="", help="data/method pairs left out, e.g. friedman8/vrvm")
    ap.add_argument("--out", default="benchmarks/results/loo_heldout.md")
    args = ap.parse_args()
    start = time.perf_counter()
    skip = set(filter(None, args.skip.split(",")))
    tables: list[str] = []
    rows = [r for name in args.data.split(",")
            for r in run(name, range(args.first, args.first + args.splits), args.before, skip,
                         tables)]
    df = pd.DataFrame(rows)
    lines = ["# Leave-one-out against held-out data (issue 45)", "",
             f"`benchmarks/bench_loo_heldout.py --splits {args.splits} --data {args.data}"
             + (f" --first {args.first}" if args.first else "")
             + (" --before" if args.before else "")
             + (f" --skip {args.skip}" if args.skip else "") + f"`: {len(rows)} rows in "
             f"{time.perf_counter() - start:.0f} s, one process.", "",
             "## Per split and method", ""]
    lines += markdown_table(rows)
    lines += ["", "## Rankings per split", ""] + markdown_table(agreement(df))
    summary = df.groupby(["data", "estimator", "method"], sort=False).agg(
        loo=("loo", "mean"), held=("held", "mean"), max_abs_z=("z", lambda z: z.abs().max()),
        loo_s=("loo s", "mean")).reset_index()
    lines += ["", "## Means over splits", ""] + markdown_table(summary.to_dict("records"))
    lines += ["", "## loo_compare of the first split, as printed", ""] + tables
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
