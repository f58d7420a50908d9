"""Default ``RVR()`` / ``RVC()`` against cross-validated SVMs, on standardised inputs.

scikit-learn's bundled diabetes (regression, 442 x 10) and breast cancer (classification,
569 x 30), 5 random 70/30 splits (stratified for classification, seed 0). Ours:
``make_pipeline(StandardScaler(), RVR())`` and ``RVC()`` with every argument at its default
(the Gaussian width learned by the evidence). Peers: ``SVR`` / ``SVC`` in the same pipeline
with ``C``, ``gamma`` (and SVR's ``epsilon``) chosen by 5-fold ``GridSearchCV`` on the
training part; SVC's probabilities are Platt's (``probability=True``). Reported: mean test
RMSE, error and log loss over the splits, and ours / SVM. Results in ``results/defaults.md``.

    python benchmarks/bench_defaults.py
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, ShuffleSplit, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR

from sparsebayes.inference import RVC, RVR

C_GRID = np.logspace(-1, 3, 9)
GAMMA_GRID = ["scale", 0.01, 0.03, 0.1]


def regression() -> dict:
    X, y = load_diabetes(return_X_y=True)
    rmse = {"RVR()": [], 'RVR(width="cv")': [], "SVR (CV)": []}
    for tr, te in ShuffleSplit(5, test_size=0.3, random_state=0).split(X):
        ours = make_pipeline(StandardScaler(), RVR()).fit(X[tr], y[tr])
        cv = make_pipeline(StandardScaler(), RVR(width="cv")).fit(X[tr], y[tr])
        svr = GridSearchCV(make_pipeline(StandardScaler(), SVR()),
                           {"svr__C": C_GRID, "svr__gamma": GAMMA_GRID,
                            "svr__epsilon": [0.1, 1, 10]}, cv=5).fit(X[tr], y[tr])
        for name, model in (("RVR()", ours), ('RVR(width="cv")', cv), ("SVR (CV)", svr)):
            rmse[name].append(float(np.sqrt(np.mean((model.predict(X[te]) - y[te]) ** 2))))
    return {k: float(np.mean(v)) for k, v in rmse.items()}


def classification() -> dict:
    X, y = load_breast_cancer(return_X_y=True)
    out = {"RVC()": ([], []), 'RVC(width="cv")': ([], []), "SVC (CV, Platt)": ([], [])}
    for tr, te in StratifiedShuffleSplit(5, test_size=0.3, random_state=0).split(X, y):
        ours = make_pipeline(StandardScaler(), RVC()).fit(X[tr], y[tr])
        cv = make_pipeline(StandardScaler(), RVC(width="cv")).fit(X[tr], y[tr])
        svc = GridSearchCV(make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)),
                           {"svc__C": C_GRID, "svc__gamma": GAMMA_GRID}, cv=5).fit(X[tr], y[tr])
        for name, model in (("RVC()", ours), ('RVC(width="cv")', cv),
                            ("SVC (CV, Platt)", svc)):
            out[name][0].append(float(np.mean(model.predict(X[te]) != y[te])))
            out[name][1].append(float(log_loss(y[te], model.predict_proba(X[te]))))
    return {k: (float(np.mean(e)), float(np.mean(ll))) for k, (e, ll) in out.items()}


def main() -> None:
    load = os.getloadavg()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = regression()
        cls = classification()
    r_ours, r_cv, r_svr = reg["RVR()"], reg['RVR(width="cv")'], reg["SVR (CV)"]
    (e_ours, l_ours), (e_cv, l_cv) = cls["RVC()"], cls['RVC(width="cv")']
    e_svc, l_svc = cls["SVC (CV, Platt)"]
    text = "\n".join([
        "# Defaults against cross-validated SVMs (standardised inputs, 5 random 70/30 splits)",
        "", f"1-minute load average {load:.2f} at the start. Ours: every argument at its "
        'default (width by the evidence), and `width="cv"` (the width by 5-fold CV).', "",
        '| data | ours (defaults) | ours, `width="cv"` | SVM (CV) | defaults / SVM | '
        'cv / SVM |', "|---|---|---|---|---|---|",
        f"| diabetes, test RMSE | {r_ours:.2f} | {r_cv:.2f} | {r_svr:.2f} | "
        f"{r_ours / r_svr:.3f} | {r_cv / r_svr:.3f} |",
        f"| breast cancer, test error | {e_ours:.4f} | {e_cv:.4f} | {e_svc:.4f} | "
        f"{e_ours / e_svc:.3f} | {e_cv / e_svc:.3f} |",
        f"| breast cancer, test log loss | {l_ours:.4f} | {l_cv:.4f} | {l_svc:.4f} | "
        f"{l_ours / l_svc:.3f} | {l_cv / l_svc:.3f} |",
    ]) + "\n"
    print(text)
    (Path(__file__).parent / "results" / "defaults.md").write_text(text)


if __name__ == "__main__":
    main()
