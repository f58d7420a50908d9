"""NUTS and ADVI on RVM classification: the library's default (Gamma shape a = 2 at the
unit-logit scale, alpha integrated out) vs the same prior on the non-centred joint model and
vs the previous default (joint model, shape a = 0.01 as for regression).

Ripley-100 (a fixed random 100 of Ripley's 250 training points, width 0.5, 1000 test points)
and breast cancer (scikit-learn's Wisconsin data standardised, a random 150 training points,
width 8, the other 419 for testing). NUTS: 4 chains x 1000 draws (1000 tuning), nutpie.
Reports divergences, max R-hat and min bulk / tail ESS over the sampled parameters, compile
and sampling time, test error, log loss and the mean absolute difference of the predictive
probabilities from the evidence (Laplace) method's, in ``benchmarks/results/
nuts_classification.md``.

    .venv/bin/python benchmarks/bench_nuts_classification.py [--draws 1000] [--chains 4]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit, predict
from sparsebayes.models import GammaPrior, GaussianKernel, RVMClassification, datasets
from sparsebayes.models.priors import ALPHA_CEILING, default_sampling_prior

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def ripley():
    X, y = datasets.load_ripley("train", data_dir=os.environ.get("SPARSEBAYES_DATA", DATA))
    Xt, yt = datasets.load_ripley("test", data_dir=os.environ.get("SPARSEBAYES_DATA", DATA))
    idx = np.random.default_rng(0).choice(250, 100, replace=False)
    return RVMClassification(X[idx], y[idx], kernel=GaussianKernel(0.5)), Xt, yt


def breast_cancer():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    perm = np.random.default_rng(0).permutation(len(y))
    tr, te = perm[:150], perm[150:]
    return RVMClassification(X[tr], y[tr], kernel=GaussianKernel(8.0)), X[te], y[te]


def scores(post, Xt, yt, p_ref=None) -> dict:
    p = np.asarray(predict(post, Xt).proba)
    p = p[:, 1] if p.ndim == 2 else p
    pc = np.clip(p, 1e-12, 1 - 1e-12)
    out = {"test error %": 100 * float(np.mean((p > 0.5) != yt)),
           "log loss": float(-np.mean(yt * np.log(pc) + (1 - yt) * np.log1p(-pc))),
           "n_relevant": post.attrs["n_relevant"]}
    out["mean abs(p - p_evidence)"] = float(np.mean(np.abs(p - p_ref))) if p_ref is not None \
        else 0.0
    return out, p


def run(name, problem, method, Xt, yt, p_ref, **options) -> dict:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            post = fit(problem, method, seed=1, **options)
        except FloatingPointError:
            return {"model": name, "failed": "diverged: NaN (FloatingPointError)"}
    wall = time.perf_counter() - start
    a = post.attrs
    row = {"model": name, "divergences": a.get("n_divergent", ""),
           "max R-hat": a.get("max_rhat", ""), "min bulk ESS": a.get("min_ess_bulk", ""),
           "min tail ESS": a.get("min_ess_tail", ""),
           "compile s": a.get("compile_time", ""),
           "sampling s": a.get("sampling_time", a.get("fit_time", "")), "wall s": wall}
    row.update(scores(post, Xt, yt, p_ref)[0])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"
                                         / "nuts_classification.md"))
    args = ap.parse_args()
    nuts = dict(draws=args.draws, tune=args.tune, chains=args.chains, warn=False,
                max_seconds=1e9)
    lines = ["# RVM classification: NUTS and ADVI posteriors against the evidence method", "",
             f"{args.chains} chains x {args.draws} draws ({args.tune} tuning), nutpie; "
             f"{os.cpu_count()} CPU cores (shared; load average at start "
             f"{os.getloadavg()[0]:.1f}). R-hat / ESS over the sampled parameters (w for the "
             "default, alpha and z-derived w for the joint model).", ""]
    for data_name, loader in (("Ripley-100", ripley), ("breast cancer 150", breast_cancer)):
        problem, Xt, yt = loader()
        ev = fit(problem, "evidence")
        ref, p_ref = scores(ev, Xt, yt)
        default = default_sampling_prior(problem)
        old = GammaPrior(a=0.01, b=1.0 / (ALPHA_CEILING * default.a / default.b), c=0, d=0)
        rows = [{"model": "evidence (Laplace)", **ref},
                run("NUTS default: a = 2, alpha integrated out", problem, "nuts", Xt, yt,
                    p_ref, **nuts),
                run("NUTS joint non-centred, a = 2", problem, "nuts", Xt, yt, p_ref,
                    collapsed=False, **nuts),
                run("NUTS previous default: joint, a = 0.01", problem, "nuts", Xt, yt, p_ref,
                    collapsed=False, prior=old, **nuts),
                run("ADVI default", problem, "advi", Xt, yt, p_ref),
                run("ADVI previous default: joint, a = 0.01", problem, "advi", Xt, yt, p_ref,
                    prior=old, collapsed=False)]
        lines += [f"## {data_name}", "", *markdown_table(rows), ""]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
