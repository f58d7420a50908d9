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
# # 3. One model, three posteriors: evidence, VRVM, ADVI and NUTS on the same RVM
#
# The RVM is one hierarchical model, $t \mid w, \beta \sim \mathcal N(\Phi w, \beta^{-1} I)$,
# $w_i \mid \alpha_i \sim \mathcal N(0, \alpha_i^{-1})$, Gamma hyperpriors on $\alpha_i$ and
# $\beta$ (Tipping 2001, eqs. 2-6). The library offers several posteriors for it, all returned
# as ArviZ `DataTree`s with the same groups (`posterior`, `log_likelihood`, `sample_stats`,
# ...), so ArviZ's diagnostics and model comparison work on each of them:
#
# | method | posterior | hyperparameters |
# |---|---|---|
# | `evidence` | type-II ML (Tipping & Faul 2003), Gaussian $w$ (eqs. 12-13) | point estimate |
# | `vrvm` | variational (Bishop & Tipping 2000), $q(w) q(\alpha) q(\beta)$ | Gamma |
# | `advi` | PyMC's mean-field ADVI on the (collapsed) model | log-normal |
# | `nuts` | nutpie's NUTS, $w$ drawn from its exact conditional | full posterior |
#
# Data: sinc with Gaussian noise (sd 0.1), Gaussian kernel of width 3 (Tipping §4.1).
#
# `SPARSEBAYES_SMALL=1` runs a quick version (50 points, 2 short chains). Full size
# (100 points, 4 chains of 1000 draws after 1000 tuning steps; a minute or two including
# nutpie's first compilation): `python notebooks/run.py 03`, which writes
# `notebooks/03_posteriors.ipynb` with the outputs.

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sparsebayes.inference import compare_posteriors, fit, loo, loo_compare, predict
from sparsebayes.inference.plots import plot_posteriors
from sparsebayes.models import GaussianKernel, RVMRegression, datasets

SMALL = os.environ.get("SPARSEBAYES_SMALL") == "1"
N = 50 if SMALL else 100
NUTS = {"draws": 200, "tune": 200, "chains": 2} if SMALL else {"draws": 1000, "tune": 1000,
                                                                "chains": 4}

X, t = datasets.sinc(N, noise="gaussian", noise_scale=0.1, seed=1)
problem = RVMRegression(X, t, kernel=GaussianKernel(3.0))
posts = {
    "evidence": fit(problem, "evidence", seed=0),
    "vrvm": fit(problem, "vrvm", seed=0),
    "advi": fit(problem, "advi", seed=0),
    "nuts": fit(problem, "nuts", seed=0, **NUTS),
}

# %% [markdown]
# ## The four answers side by side
# Sparsity, the noise level and the test error against the true function. The point-estimate
# hyperparameters of the evidence prune the basis; the sampling methods keep every column
# and "relevant" counts the weights whose posterior is not shrunk to zero.

# %%
grid = np.linspace(-10, 10, 400)[:, None]
truth = datasets.sinc_function(grid[:, 0])
rows = []
for name, post in posts.items():
    pred = predict(post, grid)
    rows.append({
        "method": name,
        "relevant": post.attrs.get("n_relevant"),
        "noise sd (posterior mean)": float(post["posterior"]["noise_sd"].mean()),
        "RMS error vs sinc": float(np.sqrt(np.mean((pred.mean - truth) ** 2))),
        "seconds": round(float(post.attrs.get("wall_time", np.nan)), 2),
    })
pd.DataFrame(rows).set_index("method").round(4)

# %%
fig = plot_posteriors(posts, X=grid, X_train=X, t_train=t, max_weights=12)

# %% [markdown]
# ## NUTS diagnostics (ArviZ 1.x)
# Before trusting the samples: divergences, rank-normalised $\hat R$ and effective sample
# sizes (Vehtari et al. 2021), trace and rank plots. Rank plots of well-mixed chains are
# flat, the same for every chain.

# %%
nuts = posts["nuts"]
print("divergences:", int(nuts["sample_stats"]["diverging"].sum()))
summary = az.summary(nuts, var_names=["noise_sd", "alpha"], ci_prob=0.9)
print(f"max R-hat {summary['r_hat'].max():.3f}, min bulk ESS {summary['ess_bulk'].min():.0f}, "
      f"min tail ESS {summary['ess_tail'].min():.0f}")
summary.sort_values("ess_bulk").head(8)

# %%
# the weights with the largest posterior mean |w| (the relevance vectors, in effect)
w_mean = np.abs(nuts["posterior"]["w"].mean(("chain", "draw")))
top = [str(b) for b in w_mean.sortby(w_mean, ascending=False)["basis"].values[:3]]
pc = az.plot_trace(nuts, var_names=["noise_sd", "w"], coords={"basis": top})

# %%
pc = az.plot_rank(nuts, var_names=["noise_sd", "w"], coords={"basis": top})

# %%
pc = az.plot_ess(nuts, var_names=["noise_sd", "w"], coords={"basis": top})

# %% [markdown]
# ## Forest plot: the same weights under every posterior
# The relevance vectors of the evidence fit, their weights' 90% intervals per method. The
# evidence and VRVM condition on (or factorise away) the hyperparameter uncertainty and are
# narrower; NUTS integrates over it.

# %%
rv = [str(b) for b in posts["evidence"]["posterior"]["basis"].values if str(b) != "bias"]
shown = rv[:6]
pc = az.plot_forest(compare_posteriors(posts), var_names=["w"],
                    coords={"basis": shown}, combined=True, ci_probs=(0.5, 0.9))

# %% [markdown]
# ## Leave-one-out predictive accuracy
# Every result carries the pointwise log likelihood of the training targets under each draw
# (group `log_likelihood`), but `az.loo` on it is only right for the sampled posteriors: the
# evidence and VRVM draws of $w$ sit at hyperparameters (and a pruning) fitted to every
# point, the one left out included, so their PSIS-LOO is optimistic, and ADVI's draws come
# from $q$, which PSIS may not be able to reweight. `loo` gives every method one estimator:
# a cheap approximation on every point (GPML eq. 5.12 at the fitted hyperparameters; PSIS
# over the hyperparameter draws with $w$ integrated out, Bürkner, Gabry & Vehtari 2021)
# corrected by the method refitted from scratch on a random subsample of the points, the
# same points for every method (Magnusson et al. 2020); NUTS keeps PSIS and refits only
# the points whose Pareto $\hat k > 0.7$.

# %%
naive = {name: az.loo(post) for name, post in posts.items()}
own = {name: loo(post, refits=10 if SMALL else 30) for name, post in posts.items()}
for name, res in own.items():
    print(f"{name:8s} {res.estimator:9s} elpd_loo {res.elpd:8.2f} ± {res.se:5.2f} "
          f"(subsampling SE {getattr(res, 'subsampling_se', 0.0):4.2f})   "
          f"az.loo on the stored log-likelihood {naive[name].elpd:8.2f}")
loo_compare(own)

# %%
fig, ax = plt.subplots(figsize=(7, 3.2))
for i, (name, res) in enumerate(own.items()):
    if res.pareto_k is not None:  # only PSIS has a Pareto k
        ax.plot(X[:, 0], np.asarray(res.pareto_k), "o", ms=3, color=f"C{i}", label=name)
ax.axhline(0.7, color="grey", ls="--")
ax.set_xlabel("x of the training point")
ax.set_ylabel("Pareto k")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Posterior predictive checks
# `add_posterior_predictive` draws one replicate of the training targets per posterior draw
# (from the result's own draws of $w$ and $\beta$, so it is right for every method, the
# evidence fit included); ArviZ's checks then apply as to any PyMC result. LOO-PIT values
# of a well-calibrated model are uniform: the ECDF stays inside the band.

# %%
from sparsebayes.inference import add_posterior_predictive  # noqa: E402

ppc = {name: add_posterior_predictive(post, seed=0) for name, post in posts.items()}
for name, p in ppc.items():
    az.plot_ppc_dist(p)
    plt.gcf().suptitle(f"{name}: observed t vs replicates")
# %%
for name, p in ppc.items():
    pit = np.asarray(az.loo_pit(p)["t"])
    print(f"{name:8s} LOO-PIT mean {pit.mean():.3f} (uniform: 0.5), sd {pit.std():.3f} "
          "(uniform: 0.289)")
az.plot_ppc_pit(ppc["nuts"])

# %% [markdown]
# ## Prior predictive checks
# What does each model say before it sees the data? `add_prior_predictive` (or
# `fit(..., prior_predictive=True)`) draws the hyperprior the result was fitted with and a
# replicate of the targets from each draw.
#
# * The evidence and VRVM fits above use Tipping's flat prior ($a=b=c=d=0$): improper, so it
#   has no draws, and `add_prior_predictive` says so.
# * ADVI and NUTS sample with the default proper prior, nearly flat in $\log\alpha$ like
#   Tipping's: every draw is finite, but its spread is astronomical. The prior says nothing
#   about the scale of $f$, by design; the data decide.
# * `prior="weakly_informative"` puts the prior predictive at the scale of the data (the
#   function and the noise each with prior mean square $\mathrm{var}(t)/2$, weights Student-t
#   with 4 degrees of freedom). Below, every method fitted again with it: a prior predictive
#   check is now possible, and the posteriors barely move.

# %%
from sparsebayes.inference import add_prior_predictive  # noqa: E402

try:
    add_prior_predictive(posts["evidence"])
except ValueError as err:
    print("evidence:", str(err).split(":")[0])
for name in ("advi", "nuts"):
    sd = add_prior_predictive(posts[name], seed=0)["prior_predictive"]["t"].std("obs")
    print(f"{name}: default prior, median prior-predictive sd = {float(sd.median()) / t.std():.2g}"
          " x sd(t)")

weak = RVMRegression(X, t, kernel=GaussianKernel(3.0), prior="weakly_informative")
weak_posts = {name: fit(weak, name, seed=0, prior_predictive=True, posterior_predictive=True,
                        **(NUTS if name == "nuts" else {}))
              for name in posts}
rows = []
for name, post in weak_posts.items():
    sd = post["prior_predictive"]["t"].std("obs")
    rows.append({
        "method": name,
        "prior-predictive median sd / sd(t)": float(sd.median()) / t.std(),
        "RMS error vs sinc (weakly informative)": float(np.sqrt(np.mean(
            (predict(post, grid).mean - truth) ** 2))),
        "RMS error vs sinc (default)": float(np.sqrt(np.mean(
            (predict(posts[name], grid).mean - truth) ** 2))),
    })
pd.DataFrame(rows).set_index("method").round(4)

# %%
for name, p in weak_posts.items():
    az.plot_ppc_dist(p, group="prior_predictive")
    plt.gcf().suptitle(f"{name}: observed t vs prior-predictive replicates")
az.plot_prior_posterior(weak_posts["nuts"], var_names=["noise_sd"])
plt.gcf().suptitle("NUTS, weakly informative prior: noise sd, prior vs posterior")
