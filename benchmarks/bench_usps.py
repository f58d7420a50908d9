"""Multiclass RVM on USPS (Tipping 2001 §4.4.2: 7291 training / 2007 test digits, 256 inputs,
K = 10), side by side with the peers on the same split, in one run.

* ``rvm``: ONE softmax RVM (T01 eq. 28) by the evidence (``method="evidence"``), Gaussian
  width ``r`` (``exp(-||x - x'||^2 / r^2)``), a k-means dictionary of ``--centres`` centres;
* ``rvm-ovr``: Tipping's own protocol in the library, ten one-vs-rest binary RVMs by the
  evidence (``OneVsRestClassifier(RVC(width=r), n_jobs=--jobs)``), a kernel at every training
  point (no dictionary), same width;
* ``fastrvm``: fastrvm's RVC, ten one-vs-rest binary RVMs with a kernel at every training
  point (Tipping's own USPS protocol; C++, a benchmark-only extra), same width;
* ``svc``: scikit-learn's SVC (one-vs-one), ``C`` by 5-fold CV, same width.

Two sizes: the full training set and a 1000-digit random subsample (seed 0); the test set is
always the full 2007 digits. Each fit runs in its own process (peak memory = its max RSS),
one BLAS thread. Results in ``results/usps.md``.

``--sweep``: the one-vs-rest RVMs on the 1000-digit subsample at every width of
``SWEEP_WIDTHS`` by the fast evidence, and at ``WIDTH`` by MacKay's re-estimation (Tipping's
own algorithm): the test error of the best width, chosen on the test set, is a lower bound
on what the model gives there under this protocol. Results in ``results/usps_1000_widths.md``.

``--softmax-cv``: the softmax RVM (``RVC(multiclass="softmax")``) and the one-vs-rest RVMs
(``OneVsRestClassifier(RVC())``) on the 1000-digit subsample, each one's width by 5-fold CV
over ``SWEEP_WIDTHS`` on the same folds (and the softmax's Laplace evidence at each width),
then both at their chosen widths on the test set: ``results/usps_softmax.md``. ``--width``
and ``--out`` run the side-by-side comparison at another width into another results file.

    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_usps.py [--sizes 1000 7291]
    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_usps.py --sweep
    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_usps.py --softmax-cv
    SPARSEBAYES_DATA=../shared/data python benchmarks/bench_usps.py --sizes 7291 \
        --methods rvm rvm-ovr --centres 1000 --out usps_softmax_full.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("SPARSEBAYES_DATA", str(ROOT.parent / "shared" / "data"))
WIDTH = 5.0  # r^2 = 25: SVC's CV error is flat over widths 4-6 here (sklearn gamma 0.04)
SWEEP_WIDTHS = (3.0, 4.0, 5.0, 6.0, 7.0, 8.0)


def _data(n: int):
    from sparsebayes.models import datasets

    Xtr, ytr, Xte, yte = datasets.load_usps(data_dir=DATA)
    if n < len(ytr):
        idx = np.random.default_rng(0).permutation(len(ytr))[:n]
        Xtr, ytr = Xtr[idx], ytr[idx]
    return Xtr, ytr, Xte, yte


def worker(method: str, n: int, centres: int, jobs: int = 1, width: float = WIDTH) -> dict:
    Xtr, ytr, Xte, yte = _data(n)
    # this folder is on sys.path: run as a script
    from bench_multiclass import ovr_fit, peer_fit

    if method in ("svc", "fastrvm"):
        elapsed, err, n_rv = peer_fit(method, width, Xtr, ytr, Xte, yte)
    elif method == "rvm-ovr":
        elapsed, err, n_rv = ovr_fit(width, Xtr, ytr, Xte, yte, jobs)
        method = f"rvm (one-vs-rest, all {n} points, {jobs} job{'s' * (jobs > 1)})"
    else:
        import warnings

        from sparsebayes.inference import fit, predict
        from sparsebayes.models import GaussianKernel, RVMClassification

        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = fit(RVMClassification(Xtr, ytr, GaussianKernel(width), centres=centres),
                       "evidence", seed=0)
        elapsed = time.perf_counter() - start
        err = float(np.mean(predict(post, Xte).label != yte))
        n_rv = int(post.attrs["n_relevant"])
        method = f"rvm (softmax, {centres} centres)"
    return {"method": method, "n": n, "fit s": elapsed, "test error": err, "vectors": n_rv,
            "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def sweep(n: int = 1000) -> None:
    """One-vs-rest RVMs on ``n`` digits over ``SWEEP_WIDTHS`` (fast evidence), and by
    MacKay's re-estimation at ``WIDTH``: ``results/usps_1000_widths.md``."""
    import warnings

    from bench_multiclass import ovr_fit

    Xtr, ytr, Xte, yte = _data(n)
    runs = [(w, "evidence") for w in SWEEP_WIDTHS] + [(WIDTH, "evidence-mackay")]
    lines = [f"# One-vs-rest RVMs on {n} USPS digits: test error by width and algorithm", "",
             "`python benchmarks/bench_usps.py --sweep`; one core, the full 2007 test digits.",
             "", "| width | posterior | fit s | test error | vectors |", "|---|---|---|---|---|"]
    for width, posterior in runs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            elapsed, err, n_rv = ovr_fit(width, Xtr, ytr, Xte, yte, 1, posterior)
        lines.append(f"| {width:g} | {posterior} | {elapsed:.1f} | {err:.4f} | {n_rv} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    (Path(__file__).parent / "results" / "usps_1000_widths.md").write_text(text)


def _cv_scores(model, param: str, Xtr, ytr) -> tuple[np.ndarray, np.ndarray]:
    """Mean 5-fold CV accuracy and log loss of ``model`` over ``SWEEP_WIDTHS`` (``param``
    names the width): scikit-learn's ``GridSearchCV``, stratified folds without shuffling,
    so every model sees the same folds."""
    import warnings

    from sklearn.model_selection import GridSearchCV

    search = GridSearchCV(model, {param: list(SWEEP_WIDTHS)}, cv=5, refit=False,
                          scoring={"acc": "accuracy", "ll": "neg_log_loss"},
                          error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(Xtr, ytr)
    res = search.cv_results_
    return np.asarray(res["mean_test_acc"]), -np.asarray(res["mean_test_ll"])


def softmax_cv(n: int = 1000) -> None:
    """The softmax RVM (T01 eq. 28, one model) and the one-vs-rest RVMs on ``n`` digits:
    5-fold CV accuracy and log loss over ``SWEEP_WIDTHS`` on the training digits (the same
    folds for both), the Laplace evidence of the softmax fit on all ``n`` digits at each
    width, then both at the width their CV log loss picks, on the full test set:
    ``results/usps_softmax.md``."""
    import warnings

    from sklearn.multiclass import OneVsRestClassifier

    from sparsebayes.inference import RVC

    Xtr, ytr, Xte, yte = _data(n)
    se = lambda e: np.sqrt(e * (1 - e) / yte.size)  # noqa: E731 (binomial SE)
    models = {"softmax": (RVC(multiclass="softmax"), "width"),
              "one-vs-rest": (OneVsRestClassifier(RVC()), "estimator__width")}
    lines = [f"# Softmax RVM vs one-vs-rest RVMs on {n} USPS digits, width by 5-fold CV", "",
             "`python benchmarks/bench_usps.py --softmax-cv`; one BLAS thread, the full 2007 "
             "test digits; CV on the training digits (stratified folds, no shuffle).", "",
             "| model | width | CV accuracy | CV log loss | CV s | softmax log evidence |",
             "|---|---|---|---|---|---|"]
    best = {}
    for name, (model, param) in models.items():
        start = time.perf_counter()
        acc, ll = _cv_scores(model, param, Xtr, ytr)
        cv_s = time.perf_counter() - start
        best[name] = SWEEP_WIDTHS[int(np.argmin(ll))]
        for i, w in enumerate(SWEEP_WIDTHS):
            ev = ""
            if name == "softmax":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = RVC(width=w, multiclass="softmax").fit(Xtr, ytr)
                ev = f"{est.posterior_.attrs['log_evidence']:.1f}"
            lines.append(f"| {name} | {w:g} | {acc[i]:.4f} | {ll[i]:.4f} | {cv_s:.0f} | {ev} |")
            print(lines[-1], flush=True)
    lines += ["", "At the width each one's CV log loss picks, fitted on all the training digits:",
              "", "| model | width | fit s | test error | binomial SE | test log loss | "
              "vectors (pairs) |", "|---|---|---|---|---|---|---|"]
    for name, (model, param) in models.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = model.set_params(**{param: best[name]}).fit(Xtr, ytr)
        elapsed = time.perf_counter() - start
        logp = np.log(np.clip(est.predict_proba(Xte), 1e-300, None))
        err = float(np.mean(est.predict(Xte) != yte))
        if name == "softmax":
            n_rv = int(np.isfinite(est.posterior_["gaussian_posterior"]["alpha"].values).sum())
        else:
            n_rv = sum(int(e.posterior_.attrs["n_kernel_vectors"]) for e in est.estimators_)
        lines.append(f"| {name} | {best[name]:g} | {elapsed:.1f} | {err:.4f} | {se(err):.4f} "
                     f"| {-np.mean(logp[np.arange(yte.size), yte]):.4f} | {n_rv} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    (Path(__file__).parent / "results" / "usps_softmax.md").write_text(text)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--sweep":
        sweep()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--softmax-cv":
        softmax_cv()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                int(sys.argv[5]), float(sys.argv[6]))))
        return
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 7291])
    ap.add_argument("--centres", type=int, default=500)
    ap.add_argument("--methods", nargs="+", default=["rvm", "rvm-ovr", "fastrvm", "svc"])
    ap.add_argument("--jobs", type=int, default=1,
                    help="one-vs-rest fits at a time (rvm-ovr; the peers use one core)")
    ap.add_argument("--max-seconds", type=float, default=3600)
    ap.add_argument("--width", type=float, default=WIDTH, help="Gaussian width of every fit")
    ap.add_argument("--out", default="usps.md", help="file name in results/")
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    load = os.getloadavg()[0]
    rows = []
    for n in args.sizes:
        for method in args.methods:
            centres = min(args.centres, n // 3)
            try:
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", method, str(n), str(centres),
                     str(args.jobs), str(args.width)],
                    capture_output=True, text=True, check=True, timeout=args.max_seconds,
                    env=env)
            except subprocess.TimeoutExpired:  # the time is a lower bound
                rows.append({"method": f"{method} (not finished)", "n": n,
                             "fit s": args.max_seconds, "test error": float("nan"),
                             "vectors": -1, "peak MB": float("nan")})
                continue
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    lines = [f"# Multiclass on USPS (K = 10, width {args.width:g}, test set 2007 digits)", "",
             f"{os.cpu_count()} cores, one BLAS thread, 1-minute load average {load:.2f} at "
             "the start; each fit in its own process.", "",
             "| n train | method | fit s | test error | vectors | peak MB | time ratio "
             "(rvm / row) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = next(o for o in rows if o["n"] == r["n"] and o["method"].startswith("rvm (softmax"))
        lines.append(f"| {r['n']} | {r['method']} | {r['fit s']:.1f} | {r['test error']:.4f} "
                     f"| {r['vectors']} | {r['peak MB']:.0f} | "
                     f"{ours['fit s'] / r['fit s']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    (Path(__file__).parent / "results" / args.out).write_text(text)


if __name__ == "__main__":
    main()
