# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. RVM classification on Ripley's data: Tipping (2001), Figure 3
#
# Ripley's synthetic two-class problem: 250 training and 1000 test points in 2-D, drawn
# from two mixtures of two Gaussians each. Tipping fits a Gaussian-kernel RVM (width
# $r = 0.5$) to 100 points chosen at random from the 250 and reports **4 relevance
# vectors and 9.3% test error**, against 38 support vectors and 10.6% for an SVM.
#
# The classifier is Bernoulli-logit, $p(t = 1 \mid x) = \sigma(\phi(x)^\top w)$ (eq. 23),
# with the weight posterior approximated by a Gaussian at its mode (Laplace, eqs. 24-26).
# Predictive probabilities can use that Gaussian (MacKay's **moderated** output) or ignore
# it (the **plug-in** $\sigma(\phi(x)^\top \mu)$).
#
# Ripley's files `ripley_train.csv` and `ripley_test.csv` ship with the package
# (`datasets.load_ripley`; source and licence in `models/data/README.md`).
# `SPARSEBAYES_SMALL=1` runs a quick version.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import CenteredNorm
from sklearn.calibration import calibration_curve
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC

from sparsebayes.inference import compare_posteriors, fit, predict
from sparsebayes.models import GaussianKernel, RVMClassification, datasets

SMALL = os.environ.get("SPARSEBAYES_SMALL") == "1"
N_SUBSETS = 3 if SMALL else 10
(X_all, y_all), (X_test, y_test) = datasets.load_ripley("train"), datasets.load_ripley("test")
WIDTH = 0.5
print(X_all.shape, X_test.shape, np.bincount(y_all), np.bincount(y_test))

# %% [markdown]
# ## 1. Relevance vectors and support vectors (Figure 3)
#
# The SVM uses the same kernel, $\exp(-|x - x'|^2 / r^2)$, i.e. scikit-learn's
# `gamma = 1 / r**2`, with $C$ chosen by 5-fold cross-validation.

# %%
rng = np.random.default_rng(0)
subset = rng.choice(X_all.shape[0], 100, replace=False)
X, y = X_all[subset], y_all[subset]

post = fit(RVMClassification(X, y, kernel=GaussianKernel(WIDTH)), method="evidence", seed=0)
pred = predict(post, X_test)
rvm_err = np.mean(pred.label != y_test)
idx = post["constant_data"]["centre_index"].values
rv = idx[idx >= 0]

svc = GridSearchCV(SVC(kernel="rbf", gamma=1 / WIDTH**2), {"C": np.logspace(-1, 3, 9)},
                   cv=5).fit(X, y).best_estimator_
svm_err = np.mean(svc.predict(X_test) != y_test)

g0, g1 = np.meshgrid(np.linspace(-1.3, 1.1, 150), np.linspace(-0.3, 1.2, 150))
G = np.column_stack([g0.ravel(), g1.ravel()])
P = predict(post, G).proba[:, 1].reshape(g0.shape)
S = svc.decision_function(G).reshape(g0.shape)

fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
for ax, (title, centres) in zip(axes, [
        (f"RVM: {rv.size} relevance vectors, test error {100 * rvm_err:.1f}%", rv),
        (f"SVM: {svc.support_.size} support vectors, test error {100 * svm_err:.1f}%",
         svc.support_)]):
    for k, (c, m) in enumerate((("C0", "o"), ("C3", "s"))):
        ax.plot(*X[y == k].T, m, color=c, ms=4, alpha=0.8, label=f"class {k}")
    ax.plot(*X[centres].T, "o", mfc="none", mec="k", ms=12, mew=1.5)
    ax.set_title(title)
    ax.set_xlabel("$x_1$")
axes[0].contour(g0, g1, P, levels=[0.5], colors="k", linewidths=2)
axes[0].contour(g0, g1, P, levels=[0.25, 0.75], colors="0.4", linestyles="--")
axes[1].contour(g0, g1, S, levels=[0.0], colors="k", linewidths=2)
axes[1].contour(g0, g1, S, levels=[-1, 1], colors="0.4", linestyles="--")
axes[0].set_ylabel("$x_2$")
axes[0].legend(loc="upper left", fontsize=8)
fig.tight_layout()
print(f"RVM {rv.size} vectors, error {100 * rvm_err:.1f}%   (paper: 4, 9.3%)")
print(f"SVM {svc.support_.size} vectors, error {100 * svm_err:.1f}%   (paper: 38, 10.6%)")

# %% [markdown]
# The RVM's relevance vectors sit away from the boundary, at prototypical positions of
# each class, while the support vectors crowd the margin: a sparse Bayesian model
# explains the data with a few representative basis functions, an SVM with the hard cases.
#
# ## 2. Probabilities with and without moderation
#
# The moderated output $\sigma(\kappa(s^2)\, m)$ with $\kappa(s^2) = (1 + \pi s^2/8)^{-1/2}$
# shrinks the probabilities towards 1/2 where the logit $m$ is uncertain (variance $s^2$).
# It never moves the 0.5 boundary, so the error rate is the same; the log loss and the
# calibration change.

# %%
plug = predict(post, X_test, kind="plugin")
for name, p in (("moderated", pred), ("plug-in", plug)):
    p1 = p.proba[:, 1]
    print(f"{name:10s} log loss {-np.mean(p.logpdf(y_test)):.4f}   Brier "
          f"{np.mean((p1 - y_test) ** 2):.4f}   error {100 * np.mean(p.label != y_test):.1f}%")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for name, p, style in (("moderated", pred, "C0o-"), ("plug-in", plug, "C1s-")):
    frac, mean_p = calibration_curve(y_test, p.proba[:, 1], n_bins=10)
    axes[0].plot(mean_p, frac, style, label=name)
axes[0].plot([0, 1], [0, 1], "k:", lw=1)
axes[0].set_xlabel("predicted probability of class 1")
axes[0].set_ylabel("observed frequency")
axes[0].set_title("reliability on the 1000 test points")
axes[0].legend()
Pp = predict(post, G, kind="plugin").proba[:, 1].reshape(g0.shape)
im = axes[1].contourf(g0, g1, P - Pp, levels=21, cmap="RdBu_r", norm=CenteredNorm())
axes[1].contour(g0, g1, P, levels=[0.5], colors="k")
axes[1].plot(*X[rv].T, "o", mfc="none", mec="k", ms=12)
fig.colorbar(im, ax=axes[1], label="moderated - plug-in")
axes[1].set_title("moderation pulls probabilities towards 1/2 away from the data")
fig.tight_layout()

# %% [markdown]
# ## 3. Over random subsets
#
# Tipping's numbers come from one random subset. Over several subsets of 100 points:

# %%
rows = []
for s in range(N_SUBSETS):
    sub = np.random.default_rng(100 + s).choice(X_all.shape[0], 100, replace=False)
    p = fit(RVMClassification(X_all[sub], y_all[sub], kernel=GaussianKernel(WIDTH)),
            method="evidence", seed=s)
    err = np.mean(predict(p, X_test).label != y_test)
    sv = GridSearchCV(SVC(kernel="rbf", gamma=1 / WIDTH**2), {"C": np.logspace(-1, 3, 9)},
                      cv=5).fit(X_all[sub], y_all[sub]).best_estimator_
    rows.append({"subset": s, "RVM error %": 100 * err, "RVM vectors": p.attrs["n_relevant"],
                 "SVM error %": 100 * np.mean(sv.predict(X_test) != y_test),
                 "SVM vectors": sv.support_.size})
table = pd.DataFrame(rows)
print(table.round(2).to_string(index=False))
print(table.drop(columns="subset").mean().round(2).to_string())

# %% [markdown]
# ## 4. The same classifier under a full posterior: Laplace, ADVI and NUTS
#
# The evidence method fixes the hyperparameters at their type-II ML values and approximates
# the weight posterior by a Gaussian at its mode. `fit(..., "nuts")` samples the full
# posterior of the same hierarchical model and `"advi"` fits PyMC's mean-field ADVI to it.
# Both need a proper hyperprior: by default $\alpha_i \sim \mathrm{Gamma}(2, 2/\overline{\Phi^2})$,
# so each weight is marginally Student-t with 4 degrees of freedom at the scale of a weight
# that alone moves the logits by about 1, and $\alpha$ is integrated out for sampling (see
# `default_sampling_prior`). All three results have the same layout, so the predictive
# probabilities, ArviZ's diagnostics and the forest plot below read them alike.

# %%
import arviz as az  # noqa: E402

NUTS = {"draws": 300, "tune": 300, "chains": 2} if SMALL else {}
problem = RVMClassification(X, y, kernel=GaussianKernel(WIDTH))
posts = {"evidence": post, "advi": fit(problem, "advi", seed=0),
         "nuts": fit(problem, "nuts", seed=0, **NUTS)}
rows, maps = [], {}
for name, p in posts.items():
    pr = predict(p, X_test)
    maps[name] = predict(p, G).proba[:, 1].reshape(g0.shape)
    rows.append({"method": name, "error %": 100 * np.mean(pr.label != y_test),
                 "log loss": -np.mean(pr.logpdf(y_test)), "relevant": p.attrs["n_relevant"],
                 "seconds": p.attrs["wall_time"]})
print(pd.DataFrame(rows).set_index("method").round(3).to_string())
summary = az.summary(posts["nuts"], var_names=["w"], ci_prob=0.9)
print(f"NUTS: {int(posts['nuts']['sample_stats']['diverging'].sum())} divergences, "
      f"max R-hat {summary['r_hat'].max():.3f}, min bulk ESS {summary['ess_bulk'].min():.0f}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, name in zip(axes, ("advi", "nuts")):
    im = ax.contourf(g0, g1, maps[name] - maps["evidence"], levels=21, cmap="RdBu_r",
                     norm=CenteredNorm())
    ax.contour(g0, g1, maps["evidence"], levels=[0.5], colors="k")
    ax.contour(g0, g1, maps[name], levels=[0.5], colors="C1", linestyles="--")
    ax.plot(*X[rv].T, "o", mfc="none", mec="k", ms=12)
    ax.set_title(f"p(class 1): {name} - evidence (boundaries: black evidence, orange {name})")
    fig.colorbar(im, ax=ax)
fig.tight_layout()

# %% [markdown]
# The weights of the evidence fit's relevance vectors under the three posteriors. The
# Laplace Gaussian conditions on the optimised $\alpha$; NUTS integrates over it, and its
# intervals are wider and skewed away from zero where the Student-t prior's tails allow.

# %%
shown = [str(b) for b in post["posterior"]["basis"].values]
pc = az.plot_forest(compare_posteriors(posts), var_names=["w"], coords={"basis": shown},
                    combined=True, ci_probs=(0.5, 0.9))

# %% [markdown]
# ## 5. The variational RVM: a bound instead of the Laplace approximation
#
# `fit(..., "vrvm")` (Bishop & Tipping 2000 §4) keeps Tipping's flat hyperprior but treats
# $w$ and $\alpha$ as random, with a factorised posterior $q(w)\,q(\alpha)$. The logistic
# likelihood has no conjugate form, so it is replaced by the Jaakkola-Jordan lower bound
# $\sigma(z) \ge \sigma(\xi) \exp\{(z - \xi)/2 - \lambda(\xi)(z^2 - \xi^2)\}$, one $\xi_n$
# per point, updated in closed form to $\xi_n^2 = E[(\phi_n^\top w)^2]$. Every update raises
# the lower bound on $\ln p(t)$ (left), and irrelevant weights are pruned exactly
# ($\langle\alpha_i\rangle \to \infty$). $q(w)$ is Gaussian, so the predictive is the same
# moderated output as for the Laplace fit; right: where the two disagree.

# %%
vr = fit(problem, "vrvm", seed=0)
pv = predict(vr, X_test)
elbo = vr["sample_stats"]["elbo"].values
idx_v = vr["constant_data"]["centre_index"].values
rv_v = idx_v[idx_v >= 0]
print(f"VRVM: {rv_v.size} relevance vectors, error {100 * np.mean(pv.label != y_test):.1f}%, "
      f"log loss {-np.mean(pv.logpdf(y_test)):.4f}; bound {elbo[0]:.2f} -> {elbo[-1]:.2f} in "
      f"{elbo.size} updates, smallest step {np.diff(elbo).min():.2e}")
Pv = predict(vr, G).proba[:, 1].reshape(g0.shape)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
axes[0].plot(np.arange(1, elbo.size + 1), elbo, "C0.-")
axes[0].set_xlabel("update of the variational parameters $\\xi$")
axes[0].set_ylabel("lower bound (up to the flat prior's constant)")
axes[0].set_title("the bound never decreases")
im = axes[1].contourf(g0, g1, Pv - P, levels=21, cmap="RdBu_r", norm=CenteredNorm())
axes[1].contour(g0, g1, P, levels=[0.5], colors="k")
axes[1].contour(g0, g1, Pv, levels=[0.5], colors="C1", linestyles="--")
axes[1].plot(*X[rv_v].T, "o", mfc="none", mec="C1", ms=12)
fig.colorbar(im, ax=axes[1], label="vrvm - evidence")
axes[1].set_title("p(class 1): VRVM - Laplace (boundaries: black evidence, orange VRVM)")
fig.tight_layout()

# %% [markdown]
# Over the random subsets of section 3, the two agree closely (on 10 subsets: error 10.1%
# for both, log loss 0.254 for the VRVM and 0.255 for the Laplace fit, 3.9 and 4.3
# relevance vectors):

# %%
rows = []
for s in range(N_SUBSETS):
    sub = np.random.default_rng(100 + s).choice(X_all.shape[0], 100, replace=False)
    prob_s = RVMClassification(X_all[sub], y_all[sub], kernel=GaussianKernel(WIDTH))
    for method in ("evidence", "vrvm"):
        p = fit(prob_s, method, seed=s, draws=10)
        pr = predict(p, X_test)
        rows.append({"subset": s, "method": method, "error %": 100 * np.mean(pr.label != y_test),
                     "log loss": -np.mean(pr.logpdf(y_test)), "vectors": p.attrs["n_relevant"],
                     "seconds": p.attrs["wall_time"]})
table5 = pd.DataFrame(rows)
print(table5.groupby("method")[["error %", "log loss", "vectors", "seconds"]].mean().round(3)
      .to_string())

# %% [markdown]
# ## 6. The Gaussian process classifier beside the RVM
#
# `GPClassification` is the dense model the RVM is a sparse version of: a latent GP with an
# SE-ARD covariance, the same logistic likelihood, and the same Laplace machinery (GPML
# Algorithms 3.1-3.2), with its length scales and signal sd by type-II maximum likelihood
# (GPML eq. 3.32 and Algorithm 5.1). It keeps every training point, so compare its
# boundary and confidence with the RVM's few relevance vectors.

# %%
from sparsebayes.models import GPClassification  # noqa: E402

gpc = fit(GPClassification(X, y), "evidence", seed=0)
pg = predict(gpc, X_test)
print(f"GP: error {100 * np.mean(pg.label != y_test):.1f}%, log loss "
      f"{-np.mean(pg.logpdf(y_test)):.4f}, length scales "
      f"{np.round(gpc['posterior']['length_scale'].values[0, 0], 2)}, signal sd "
      f"{float(gpc['posterior']['signal_sd'].values.flat[0]):.2f}; RVM: error "
      f"{100 * np.mean(pred.label != y_test):.1f}%, log loss {-np.mean(pred.logpdf(y_test)):.4f}")
Pg = predict(gpc, G).proba[:, 1].reshape(g0.shape)
fig, ax = plt.subplots(figsize=(6.5, 4.5))
im = ax.contourf(g0, g1, Pg - P, levels=21, cmap="RdBu_r", norm=CenteredNorm())
ax.contour(g0, g1, P, levels=[0.5], colors="k")
ax.contour(g0, g1, Pg, levels=[0.5], colors="C2", linestyles="--")
ax.scatter(*X.T, c=y, cmap="coolwarm", s=12, edgecolors="k", linewidths=0.3)
fig.colorbar(im, ax=ax, label="GP - RVM")
ax.set_title("p(class 1): GP - RVM (boundaries: black RVM, green GP)")
fig.tight_layout()
