"""RVM classification vs the peers: Ripley-100, Ripley-250 and IDA banana split 1 (400 points).

Methods, all with the same Gaussian kernel ``exp(-|x - c|^2 / r^2)`` (``gamma = 1 / r^2``):
``sparsebayes`` (``fit(problem, "evidence")``: Laplace + Tipping & Faul fast sequential;
moderated probabilities), ``fastrvm`` (``RVC``, with intercept), ``sklearn-rvm`` (``EMRVC``)
and scikit-learn ``SVC`` with C chosen by 5-fold CV (``GridSearchCV`` over 10^-1..10^3; its
probabilities are Platt's, ``probability=True``). Width 0.5 for Ripley (Tipping 2001 §4.2)
and 0.7 for banana (r_RVM of the KTH DD2434 reproduction of Tipping (2001), Table 1).

Every method fits a small problem once before timing (imports, BLAS start-up), then the
methods are timed interleaved in one process: ``--repeats`` rounds of one fit per method in
turn, the median reported (sklearn-rvm: one fit, it takes seconds). The SVC fit time is the
final refit at the chosen C; the CV search time is reported separately. Reported: fit and
predict time, test error, test log loss, number of relevance/support vectors, and ratios
ours / peer; then the same for Ripley-100 averaged over 20 random subsets (one subset's log
loss differs between methods by more than the methods do on average). Our fits return the
default result (1000 weight draws and their pointwise log likelihood in an ArviZ DataTree),
which the peers do not make: the optimiser column is our fit's ``optimise_seconds``, the
type-II ML alone, the work a peer's fit does. Writes
``benchmarks/results/classification.md``. Peers are benchmark-only extras:
``pip install -e ".[bench]"``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_classification.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import log_loss

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("SPARSEBAYES_DATA", str(ROOT.parent / "shared" / "data"))
METHODS = ("sparsebayes", "fastrvm", "sklearn-rvm", "SVC")


def problems():
    from sparsebayes.models import datasets

    Xtr, ytr = datasets.load_ripley("train", data_dir=DATA)
    Xte, yte = datasets.load_ripley("test", data_dir=DATA)
    idx = np.random.default_rng(0).choice(250, 100, replace=False)
    Xb, yb, Xbt, ybt = datasets.load_ida("banana", 0, data_dir=DATA)
    return {
        "Ripley-100": (Xtr[idx], ytr[idx], Xte, yte, 0.5),
        "Ripley-250": (Xtr, ytr, Xte, yte, 0.5),
        "banana-1 (400)": (Xb, yb, Xbt, ybt, 0.7),
    }


def make_fit(method: str, width: float):
    """A function ``(X, y) -> (predict_proba, n_vectors, extra seconds, optimiser seconds)``:
    the extra seconds (SVC's C search) are taken off the fit time; the optimiser seconds are
    our fit's own ``optimise_seconds`` (the type-II ML alone, without the draws and the
    DataTree a peer does not make), None for the peers."""
    gamma = 1.0 / width**2
    if method == "sparsebayes":
        from sparsebayes.inference import fit, predict
        from sparsebayes.models import GaussianKernel, RVMClassification

        def run(X, y):
            post = fit(RVMClassification(X, y, kernel=GaussianKernel(width)), "evidence")
            return ((lambda Xn: predict(post, Xn).proba), post.attrs["n_relevant"], 0.0,
                    post.attrs["optimise_seconds"])
    elif method == "fastrvm":
        from fastrvm import RVC

        def run(X, y):
            m = RVC(kernel="rbf", gamma=gamma, fit_intercept=True).fit(X, y)
            return m.predict_proba, int(np.sum(m.n_relevance_)), 0.0, None
    elif method == "sklearn-rvm":
        from sklearn_rvm import EMRVC

        def run(X, y):
            m = EMRVC(kernel="rbf", gamma=gamma)
            m.fit(X, y)
            return m.predict_proba, len(m.relevance_), 0.0, None
    elif method == "SVC":
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        def run(X, y):
            start = time.perf_counter()
            cv = GridSearchCV(SVC(kernel="rbf", gamma=gamma), {"C": np.logspace(-1, 3, 9)},
                              cv=5).fit(X, y)
            cv_time = time.perf_counter() - start
            m = SVC(kernel="rbf", gamma=gamma, C=cv.best_params_["C"], probability=True,
                    random_state=0)
            m.fit(X, y)
            return m.predict_proba, int(m.n_support_.sum()), cv_time, None
    else:
        raise ValueError(f"unknown method {method!r}")
    return run


def measure(methods, data, repeats: int) -> list[dict]:
    """Every method on one problem, interleaved: after one warm-up fit each, ``repeats``
    rounds of one fit per method in turn (sklearn-rvm: one fit, it takes seconds), so a
    change of load touches every method alike; median fit time per method."""
    X, y, Xt, yt, width = data
    runs = {m: make_fit(m, width) for m in methods}
    warm = np.random.default_rng(1).choice(len(y), min(50, len(y)), replace=False)
    for run in runs.values():
        run(X[warm], y[warm])
    times = {m: [] for m in methods}
    cv_times = {m: [] for m in methods}
    optimise = {m: [] for m in methods}
    last = {}
    for rep in range(repeats):
        for m, run in runs.items():
            if m == "sklearn-rvm" and rep:
                continue
            start = time.perf_counter()
            proba_fn, n_vec, cv_time, opt = run(X, y)
            times[m].append(time.perf_counter() - start - cv_time)
            cv_times[m].append(cv_time)
            optimise[m].append(opt)
            last[m] = proba_fn, n_vec
    rows = []
    for m in methods:
        proba_fn, n_vec = last[m]
        start = time.perf_counter()
        proba = proba_fn(Xt)
        pred_time = time.perf_counter() - start
        proba = np.clip(proba, 1e-15, 1 - 1e-15)
        opt = optimise[m]
        rows.append({"method": m, "fit": statistics.median(times[m]),
                     "cv": statistics.median(cv_times[m]),
                     "optimise": statistics.median(opt) if None not in opt else None,
                     "predict": pred_time, "error": float(np.mean(np.argmax(proba, 1) != yt)),
                     "log_loss": float(log_loss(yt, proba, labels=[0, 1])),
                     "n_vec": int(n_vec)})
    return rows


def measure_subsets(methods, n_subsets: int) -> list[dict]:
    """Ripley-100 over ``n_subsets`` random 100-point subsets of the 250 training points (the
    10-subset protocol of the classification tests, doubled), every method on each subset
    in turn: median fit time, mean error, log loss, vectors."""
    from sparsebayes.models import datasets

    Xtr, ytr = datasets.load_ripley("train", data_dir=DATA)
    Xte, yte = datasets.load_ripley("test", data_dir=DATA)
    runs = {m: [] for m in methods}
    for s in range(n_subsets):
        idx = np.random.default_rng(100 + s).choice(250, 100, replace=False)
        for r in measure(methods, (Xtr[idx], ytr[idx], Xte, yte, 0.5), 1):
            runs[r["method"]].append(r)
    rows = []
    for m, rs in runs.items():
        out = {k: statistics.median(r[k] for r in rs) for k in ("fit", "cv", "predict")}
        opts = [r["optimise"] for r in rs]
        out["optimise"] = statistics.median(opts) if None not in opts else None
        out.update({k: float(np.mean([r[k] for r in rs]))
                    for k in ("error", "log_loss", "n_vec")})
        rows.append({"method": m, **out})
    return rows


def table(name: str, rows: list[dict]) -> str:
    ours = next(r for r in rows if r["method"] == "sparsebayes")
    out = [f"### {name}", "",
           "| method | fit (s) | of which optimiser (s) | predict (s) | error | log loss | "
           "vectors | fit ours/peer | optimiser ours / peer fit | log loss ours/peer |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        extra = f" (+ CV {r['cv']:.3f})" if r["cv"] else ""
        opt = "" if r["optimise"] is None else f"{r['optimise']:.4f}"
        ratio = ("" if r is ours else f"{ours['fit'] / r['fit']:.3g}")
        oratio = ("" if r is ours else f"{ours['optimise'] / r['fit']:.3g}")
        lratio = ("" if r is ours else f"{ours['log_loss'] / r['log_loss']:.3f}")
        out.append(f"| {r['method']} | {r['fit']:.4f}{extra} | {opt} | {r['predict']:.4f} | "
                   f"{100 * r['error']:.2f}% | {r['log_loss']:.4f} | {r['n_vec']:.3g} | {ratio} | "
                   f"{oratio} | {lratio} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--subsets", type=int, default=20,
                        help="Ripley-100 subsets for the averaged table (0: skip)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"
                                             / "classification.md"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # peers' deprecation chatter
    sections = []
    for name, data in problems().items():
        rows = measure(args.methods, data, args.repeats)
        for r in rows:
            method = r["method"]
            print(f"{name:16s} {method:12s} fit {r['fit']:.4f} s  predict {r['predict']:.4f} s"
                  f"  err {100 * r['error']:.1f}%  log loss {r['log_loss']:.4f}  "
                  f"vectors {r['n_vec']}", flush=True)
        sections.append(table(name, rows))
    if args.subsets:
        rows = measure_subsets(args.methods, args.subsets)
        for r in rows:
            print(f"Ripley-100 x {args.subsets} {r['method']:12s} fit {r['fit']:.4f} s  "
                  f"err {100 * r['error']:.2f}%  log loss {r['log_loss']:.4f}", flush=True)
        sections.append(table(f"Ripley-100, mean over {args.subsets} random subsets (median fit)",
                              rows))
    load = os.getloadavg()
    header = (
        "# Classification benchmark\n\n"
        "`OPENBLAS_NUM_THREADS=" + os.environ.get("OPENBLAS_NUM_THREADS", "unset")
        + f"`, load average {load[0]:.1f} during the run (a shared 2-core machine: absolute "
        "times are inflated, ratios less so). Median of repeated fits; `python "
        "benchmarks/bench_classification.py`. Targets: fit within 3x of fastrvm, "
        ">= 50x faster than sklearn-rvm, equal or better log loss.\n\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(header + "\n".join(sections))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
