"""The default sampling prior vs ``prior="weakly_informative"``: what each says
before the data (prior predictive) and what the posteriors do with it.

Sinc (100 points, noise sd 0.1, width 3; 1000 noise-free test points) and Ripley-100 (a fixed
random 100 of Ripley's 250 training points, width 0.5; the 1000 test points). For each
prior: the prior predictive (regression: median per-draw sd of ``t`` over sd(t);
classification: the 5-95% range of the per-draw class-1 frequency) and the posteriors of
NUTS (4 x 1000 draws, nutpie), ADVI and the evidence method with that hyperprior: test RMSE
and mean predictive sd, or error and log loss; for NUTS max R-hat (of the parameters
and of f at every 10th test input) and divergences.
Writes ``benchmarks/results/priors.md``.

    .venv/bin/python benchmarks/bench_priors.py
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
from report import markdown_table, write_report

from sparsebayes.inference import fit, predict
from sparsebayes.models import GaussianKernel, RVMClassification, RVMRegression, datasets

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OUT = Path(__file__).resolve().parent / "results" / "priors.md"
PRIORS = ("default", "weakly_informative")


def sinc(prior):
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-10, 10, 100))[:, None]
    t = np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(100)
    Xt = np.linspace(-10, 10, 1000)[:, None]
    return RVMRegression(X, t, GaussianKernel(3.0), prior=prior), Xt, np.sinc(Xt[:, 0] / np.pi)


def ripley(prior):
    d = os.environ.get("SPARSEBAYES_DATA", DATA)
    X, y = datasets.load_ripley("train", data_dir=d)
    Xt, yt = datasets.load_ripley("test", data_dir=d)
    idx = np.random.default_rng(0).choice(250, 100, replace=False)
    return RVMClassification(X[idx], y[idx], GaussianKernel(0.5), prior=prior), Xt, yt


def scores(post, Xt, yt) -> dict:
    if post.attrs["problem_kind"] == "regression":
        kind = "samples" if post.attrs["method"] in ("nuts", "advi") else None
        p = predict(post, Xt, kind=kind)
        return {"test RMSE": float(np.sqrt(np.mean((p.mean - yt) ** 2))),
                "mean predictive sd": float(np.mean(np.sqrt(p.var)))}
    p1 = predict(post, Xt).proba[:, 1]
    return {"error": float(np.mean((p1 > 0.5) != yt)),
            "log loss": float(-np.mean(yt * np.log(p1) + (1 - yt) * np.log1p(-p1)))}


def f_rhat(post, Xt) -> float:
    """Largest R-hat of the latent function at the test inputs (what predictions use)."""
    from sparsebayes.inference.results import basis_from_posterior

    basis, columns = basis_from_posterior(post)
    Phi = basis.design(Xt[::10], columns=columns)
    w = post["posterior"]["w"].values
    f = w @ Phi.T if w.ndim == 3 else np.einsum("cdmk,nm->cdnk", w, Phi)
    return float(np.max(az.rhat(np.ascontiguousarray(f.reshape(*f.shape[:2], -1)))))


def prior_summary(post) -> dict:
    rep = post["prior_predictive"]["t"].values[0]
    if post.attrs["problem_kind"] == "regression":
        t = post["observed_data"]["t"].values
        return {"prior pred. median sd / sd(t)": float(np.median(rep.std(axis=1)) / t.std())}
    lo, hi = np.quantile(rep.mean(axis=1), [0.05, 0.95])
    return {"prior pred. class-1 freq. 5-95%": f"{lo:.2f}-{hi:.2f}"}


def main() -> None:
    rows = []
    for name, loader in (("sinc-100", sinc), ("Ripley-100", ripley)):
        for prior in PRIORS:
            problem, Xt, yt = loader(prior)
            for method in ("evidence", "advi", "nuts"):
                opts = {"draws": 1000, "chains": 4, "warn": False} if method == "nuts" else {}
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    post = fit(problem, method, seed=1, prior_predictive=True, **opts)
                row = {"data": name, "prior": prior, "method": method,
                       "fit (s)": time.perf_counter() - start, **prior_summary(post),
                       **scores(post, Xt, yt)}
                if method == "nuts":
                    names = [v for v in ("alpha", "beta", "w") if v in post["posterior"]]
                    s = az.summary(post, var_names=names, kind="diagnostics")
                    row["max R-hat"] = float(s["r_hat"].max())
                    row["max R-hat of f(x*)"] = f_rhat(post, Xt)
                    row["divergences"] = int(post["sample_stats"]["diverging"].sum())
                rows.append(row)
                print(row, flush=True)
    write_report([
        "# Default vs weakly informative hyperprior",
        "",
        "`python benchmarks/bench_priors.py` (2 cores, shared machine). Default: regression "
        "a = c = 0.05 with data-scaled rates (nearly flat in log alpha, as Tipping's); "
        "classification a = 2 per weight at the unit-logit scale. Weakly informative: a = c = 2, "
        "rates so that f and the noise each have prior mean square var(t)/2 (regression) or f "
        "has prior rms 2.5 on the logit scale (classification). Regression test targets are "
        "noise-free (noise sd 0.1); the predictive sd includes the noise.",
        "",
        *markdown_table(rows),
    ], OUT)


if __name__ == "__main__":
    main()
