"""Default ``RVR()`` / ``RVC()`` against cross-validated SVMs, on standardised inputs.

scikit-learn's bundled diabetes (regression, 442 x 10) and breast cancer (classification,
569 x 30), 5 random 70/30 splits (stratified for classification, seed 0). Ours:
``make_pipeline(StandardScaler(), RVR())`` and ``RVC()`` with every argument at its default
(the Gaussian width learned by the evidence). Peers: ``SVR`` / ``SVC`` in the same pipeline
with ``C``, ``gamma`` (and SVR's ``epsilon``) chosen by 5-fold ``GridSearchCV`` on the
training part; SVC's probabilities are Platt's (``probability=True``). Reported: mean test
RMSE, error and log loss over the splits, ours / SVM, and the mean fit seconds (the SVMs':
the whole grid search). Results in ``results/defaults.md``.

Then the cost of RVR's per-input widths: Friedman #1 (``make_friedman1``: 10 inputs in
[0, 1], 5 of them irrelevant, noise sd 1; Tipping 2001 §4.4.1) with 500 and 2000 training
points and 2000 noise-free test points, ``RVR()`` against one width learned by the evidence
(``fit(RVMRegression(X, y, GaussianKernel(r0), learn_width=True), "evidence")``, started
where the estimators start) and against the cross-validated SVR: fit seconds, test RMSE
(against the noise-free function), vectors.

    python benchmarks/bench_defaults.py
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, make_friedman1
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, ShuffleSplit, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR

from sparsebayes.inference import RVC, RVR, fit, predict
from sparsebayes.inference.rvm.widths import estimator_width_range
from sparsebayes.models import GaussianKernel, RVMRegression

C_GRID = np.logspace(-1, 3, 9)
GAMMA_GRID = ["scale", 0.01, 0.03, 0.1]


def timed_fit(model, X, y):
    start = time.perf_counter()
    model.fit(X, y)
    return model, time.perf_counter() - start


def regression() -> dict:
    X, y = load_diabetes(return_X_y=True)
    rmse = {"RVR()": [], 'RVR(width="cv")': [], "SVR (CV)": []}
    seconds = {k: [] for k in rmse}
    for tr, te in ShuffleSplit(5, test_size=0.3, random_state=0).split(X):
        models = {"RVR()": make_pipeline(StandardScaler(), RVR()),
                  'RVR(width="cv")': make_pipeline(StandardScaler(), RVR(width="cv")),
                  "SVR (CV)": svr_search()}
        for name, model in models.items():
            model, sec = timed_fit(model, X[tr], y[tr])
            seconds[name].append(sec)
            rmse[name].append(float(np.sqrt(np.mean((model.predict(X[te]) - y[te]) ** 2))))
    return {k: (float(np.mean(v)), float(np.mean(seconds[k]))) for k, v in rmse.items()}


def classification() -> dict:
    X, y = load_breast_cancer(return_X_y=True)
    out = {"RVC()": ([], [], []), 'RVC(width="cv")': ([], [], []),
           "SVC (CV, Platt)": ([], [], [])}
    for tr, te in StratifiedShuffleSplit(5, test_size=0.3, random_state=0).split(X, y):
        models = {"RVC()": make_pipeline(StandardScaler(), RVC()),
                  'RVC(width="cv")': make_pipeline(StandardScaler(), RVC(width="cv")),
                  "SVC (CV, Platt)": GridSearchCV(
                      make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)),
                      {"svc__C": C_GRID, "svc__gamma": GAMMA_GRID}, cv=5)}
        for name, model in models.items():
            model, sec = timed_fit(model, X[tr], y[tr])
            out[name][0].append(float(np.mean(model.predict(X[te]) != y[te])))
            out[name][1].append(float(log_loss(y[te], model.predict_proba(X[te]))))
            out[name][2].append(sec)
    return {k: tuple(float(np.mean(v)) for v in vals) for k, vals in out.items()}


def svr_search():
    return GridSearchCV(make_pipeline(StandardScaler(), SVR()),
                        {"svr__C": C_GRID, "svr__gamma": GAMMA_GRID,
                         "svr__epsilon": [0.1, 1, 10]}, cv=5)


def friedman(sizes=(500, 2000)) -> list[str]:
    """Rows ``| N | method | fit s | test RMSE | vectors |`` on Friedman #1."""
    Xte, fte = make_friedman1(2000, noise=0.0, random_state=1)
    rows = []
    for n in sizes:
        X, y = make_friedman1(n, noise=1.0, random_state=0)
        start = time.perf_counter()
        ours = RVR().fit(X, y)
        rows.append((n, "`RVR()` (one width per input)", time.perf_counter() - start,
                     ours.predict(Xte), ours.relevance_.size))
        start = time.perf_counter()
        one = fit(RVMRegression(X, y, GaussianKernel(estimator_width_range(X)[1]),
                                learn_width=True), "evidence")
        rows.append((n, "one width by the evidence", time.perf_counter() - start,
                     np.asarray(predict(one, Xte).mean), int(one.attrs["n_kernel_vectors"])))
        svr, sec = timed_fit(svr_search(), X, y)
        rows.append((n, "SVR (CV)", sec, svr.predict(Xte),
                     svr.best_estimator_[-1].support_.size))
        for r in rows[-3:]:
            print(r[0], r[1], f"{r[2]:.1f} s", flush=True)
    return [f"| {n} | {name} | {sec:.1f} | {np.sqrt(np.mean((p - fte) ** 2)):.3f} | {v} |"
            for n, name, sec, p, v in rows]


def main() -> None:
    load = os.getloadavg()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = regression()
        cls = classification()
        fried = friedman()
    (r_ours, s_ours), (r_cv, s_cv), (r_svr, s_svr) = (
        reg["RVR()"], reg['RVR(width="cv")'], reg["SVR (CV)"])
    (e_ours, l_ours, c_ours), (e_cv, l_cv, c_cv) = cls["RVC()"], cls['RVC(width="cv")']
    e_svc, l_svc, c_svc = cls["SVC (CV, Platt)"]
    text = "\n".join([
        "# Defaults against cross-validated SVMs (standardised inputs, 5 random 70/30 splits)",
        "", f"1-minute load average {load:.2f} at the start. Ours: every argument at its "
        'default (RVR: one width per input by the evidence; RVC: one width by the evidence), '
        'and `width="cv"` (one width by 5-fold CV).', "",
        '| data | ours (defaults) | ours, `width="cv"` | SVM (CV) | defaults / SVM | '
        'cv / SVM |', "|---|---|---|---|---|---|",
        f"| diabetes, test RMSE | {r_ours:.2f} | {r_cv:.2f} | {r_svr:.2f} | "
        f"{r_ours / r_svr:.3f} | {r_cv / r_svr:.3f} |",
        f"| breast cancer, test error | {e_ours:.4f} | {e_cv:.4f} | {e_svc:.4f} | "
        f"{e_ours / e_svc:.3f} | {e_cv / e_svc:.3f} |",
        f"| breast cancer, test log loss | {l_ours:.4f} | {l_cv:.4f} | {l_svc:.4f} | "
        f"{l_ours / l_svc:.3f} | {l_cv / l_svc:.3f} |",
        f"| fit seconds, diabetes / breast cancer | {s_ours:.2f} / {c_ours:.2f} | "
        f"{s_cv:.2f} / {c_cv:.2f} | {s_svr:.2f} / {c_svc:.2f} (grid search) | | |",
        "", "## The cost of RVR's per-input widths: Friedman #1", "",
        "10 inputs in [0, 1], 5 irrelevant, noise sd 1; test RMSE against the noise-free "
        "function at 2000 points.", "",
        "| training points | method | fit s | test RMSE | vectors |", "|---|---|---|---|---|",
        *fried,
    ]) + "\n"
    print(text)
    (Path(__file__).parent / "results" / "defaults.md").write_text(text)


if __name__ == "__main__":
    main()
