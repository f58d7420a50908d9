"""Leave-one-out cross-validation that is right for each method, as ArviZ ``ELPDData``.

``az.loo(post)`` on a result's ``log_likelihood`` group (``log p(t_n | w_s, beta_s)`` per
draw) is PSIS-LOO (Vehtari, Gelman & Gabry 2017) over the draws the result holds. For the
type-II ML results (evidence, evidence-mackay, VRVM) those are draws of ``w`` at
hyperparameters fitted on all N points, with the basis pruned on all N points: PSIS takes
point n out of ``w``'s posterior but not out of the hyperparameters or the pruning, so the
estimate is optimistic and not comparable with the sampled methods'. :func:`loo` computes:

* **Sampled regression** (``nuts``, ``advi``, ``fullrank_advi``; GP ``nuts``): the
  non-factorised Gaussian LOO of Bürkner, Gabry & Vehtari (2021). For each draw
  ``theta_s = (alpha_s, beta_s)`` the weights are integrated out, ``t ~ N(0, C)`` with
  ``C = beta^-1 I + Phi A^-1 Phi^T`` (T01 eq. 15), and the LOO predictive given ``theta`` is
  (Rasmussen & Williams 2006, GPML eqs. 5.10-5.12)
  ``p(t_n | t_-n, theta) = N(t_n | t_n - [C^-1 t]_n / [C^-1]_nn, 1 / [C^-1]_nn)``.
  Since ``p(theta | t_-n) ∝ p(theta | t) / p(t_n | t_-n, theta)``, PSIS with
  ``log p(t_n | t_-n, theta_s)`` as the pointwise log-likelihood estimates ``p(t_n | t_-n)``
  (Bürkner et al. 2021 §3): the importance sampling over ``w`` is done exactly, only
  ``theta`` is reweighted. For ADVI the draws come from ``q(theta)`` and the same weights
  assume leaving a point out moves ``q`` as it moves the posterior (Pareto k flags failures).
* **Point (type-II ML) results** (``evidence``, ``evidence-mackay``, ``vrvm``; GP
  ``evidence``), regression and classification: ``estimator="refit"`` is the exact LOO of the
  method: for each n the same method refitted on the other N - 1 points (hyperparameters
  re-estimated, basis re-pruned from the same candidates: kernels at every fitted centre,
  point n's included, since LOO leaves out a target, not a basis function) and its own
  predictive evaluated at ``x_n``. The refits are warm-started from the full-data solution
  with the data's statistics downdated by the row left out (:func:`warm_refits`). Where the
  objective has one optimum near the start they reach a cold refit's; where it has several
  a warm refit follows the full-data one (its evidence was measured equal to or above the
  cold refit's, not always: see :func:`cold_reason` for the fits refitted cold).
  ``"kfold"``: the same with ``folds`` folds (the elpd of a fit to (K-1)/K of the points,
  so slightly pessimistic). The optimistic estimators hold
  the hyperparameters fitted to all N points: ``"gaussian"`` (regression, GPML eq. 5.12) and
  ``"cavity"`` (classification, the Laplace LOO of Vehtari, Mononen, Tolvanen, Sivula &
  Winther 2016).
* **Sampled classification**: NUTS / ADVI sample ``w`` and the likelihood factorises, so
  plain PSIS-LOO is right and is returned.

The default (:func:`default_estimator`) depends on the method and the size alone: "psis"
for sampled results; "refit" for point results up to ``EXACT_MAX_N`` training points, else
"kfold" with ``KFOLD`` folds; never an optimistic one. Exact estimators do no importance
sampling: their ``pareto_k`` and ``good_k`` are None. The result's ``estimator``,
``optimistic`` and ``seconds`` say which estimator ran and how long it took.
:func:`loo_compare` ranks methods and shows each row's estimator.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping

import numpy as np
import xarray as xr

from sparsebayes.models import NumericalWarning

from .families import FAMILIES, REGISTERED, family_of
from .gp.families import gp_loo_logpdf
from .numerics import gaussian_loo_logpdf, show_progress, warn_user
from .results import prior_from_posterior
from .rvm.families import RVM_REGRESSION

__all__ = ["loo", "loo_compare", "default_estimator", "gaussian_loo_logpdf", "gp_loo_logpdf",
           "cold_refit_logpdf", "warm_refit_logpdf", "observed_logpdf", "warm_refits",
           "kfold_folds", "training_problem", "cold_reason", "EXACT_MAX_N", "KFOLD",
           "SAMPLED_METHODS", "WARM_REFITS"]

SAMPLED_METHODS = ("nuts", "advi", "fullrank_advi")
# views of the registered families: (problem kind, method) of the point (type-II ML) results
# -> their warm-started refits; the largest training set whose point results get the exact
# LOO by default (N refits; above it KFOLD folds)
WARM_REFITS = {(f.kind, m): cls for f in REGISTERED for m, cls in f.warm_refits.items()}
EXACT_MAX_N = {f.kind: f.exact_max_n for f in REGISTERED}
COLD_EXACT_MAX_N = 100  # the same for results refitted cold (cold_reason)
KFOLD = 10


def training_problem(post: xr.DataTree, rows: np.ndarray | slice = slice(None)):
    """The problem ``post`` was fitted to, on the training rows ``rows``: the same kernel
    (at its fitted width), bias, extra columns, fixed noise, prior and width learning, and
    the same basis: kernels at *all* the fitted centres (the training inputs of the classic
    RVM), since the model conditions on the inputs and leave-one-out leaves out a target,
    not a column. For refits (:func:`cold_refit_logpdf`)."""
    return family_of(post).training_problem(post, rows)


def _progress(progressbar, total: int, desc: str):
    if not show_progress(progressbar):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="fit")


def cold_refit_logpdf(post: xr.DataTree, folds, *, progressbar: bool | None = None,
                      **options) -> tuple[np.ndarray, int]:
    """The brute-force reference: for each fold (an array of rows left out) the method
    fitted from scratch by ``fit`` on :func:`training_problem` without those rows, and its
    own predictive density at them. Returns ``log p(t_n | t_rest)`` (N,) and the number of
    refits that did not converge. ``options`` go to ``fit``."""
    from .api import fit, predict

    method = post.attrs["method"]
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    seed = int(post.attrs.get("seed", -1))
    out, failed = np.empty(t.shape[0]), 0
    bar = _progress(progressbar, len(folds), f"cold LOO refits ({method})")
    with warnings.catch_warnings():  # one summary by the caller instead of one per refit
        warnings.simplefilter("ignore")
        for rows_out in folds:
            keep = np.ones(t.shape[0], bool)
            keep[rows_out] = False
            sub = fit(training_problem(post, keep), method, seed=None if seed < 0 else seed,
                      **options)
            out[rows_out] = observed_logpdf(predict(sub, X[rows_out]), t[rows_out])
            failed += not int(sub.attrs.get("converged", 1))
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    return out, failed


def cold_reason(post: xr.DataTree) -> str | None:
    """Why ``post``'s refits start cold, or None when they are warm-started: widths learned
    by the evidence (a warm start holds the basis), or a VRVM regression fit whose
    hyperprior on ``alpha`` has shape < 1 (Tipping's flat prior, the nearly flat
    default): its bound has many local maxima, and a warm refit keeps the relevance vectors
    the full fit chose with the left-out targets (an optimistic estimate)."""
    if int(post.attrs.get("learn_width", 0)):
        return "widths learned by the evidence"
    if (family_of(post) is RVM_REGRESSION and post.attrs["method"] == "vrvm"):
        prior = prior_from_posterior(post)
        if prior is None or prior.a < 1:
            return "a VRVM hyperprior of shape < 1 (its bound has many local maxima)"
    return None


def warm_refits(post: xr.DataTree):
    """The family's warm-started refits of ``post`` (an object whose ``fold(rows_out)``
    returns the refit's log predictive density at the rows left out and whether it
    converged), or None where the fit is refitted cold (:func:`cold_reason`)."""
    cls = WARM_REFITS.get((post.attrs["problem_kind"], post.attrs["method"]))
    if cls is None or cold_reason(post) is not None:
        return None
    return cls(post)


def warm_refit_logpdf(post: xr.DataTree, folds, *, progressbar: bool | None = None
                      ) -> tuple[np.ndarray, int]:
    """``log p(t_n | t_rest)`` (N,) with each fold's rows left out, by the family's
    warm-started refits (:func:`warm_refits`; cold ones where it has none), and the number
    of refits that did not converge."""
    refits = warm_refits(post)
    if refits is None:
        return cold_refit_logpdf(post, folds, progressbar=progressbar)
    out, failed = np.empty(post["observed_data"]["t"].shape[0]), 0
    bar = _progress(progressbar, len(folds), f"LOO refits ({post.attrs['method']})")
    for rows_out in folds:
        out[rows_out], converged = refits.fold(np.asarray(rows_out, dtype=int))
        failed += not converged
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return out, failed


def kfold_folds(post: xr.DataTree, k: int = KFOLD) -> list[np.ndarray]:
    """``k`` folds of the training rows, fixed by the data alone (a permutation seeded by
    0; stratified by class for classification), so the estimate never depends on the run."""
    from sklearn.model_selection import KFold, StratifiedKFold

    t = post["observed_data"]["t"].values
    if family_of(post).labels:
        split = StratifiedKFold(k, shuffle=True, random_state=0).split(t, t)
    else:
        split = KFold(k, shuffle=True, random_state=0).split(t)
    return [test for _, test in split]


def _elpd_data(post, elpd_i: np.ndarray, lppd_i: np.ndarray, pointwise: bool):
    """An ``ELPDDataLOO`` of exact pointwise values: no importance sampling (``pareto_k``,
    ``good_k`` None); ``p = lppd - elpd`` with ``lppd`` the in-sample log predictive density
    (Vehtari et al. 2017 eqs. 4, 23)."""
    from arviz_stats.utils import ELPDDataLOO

    n = elpd_i.size
    da = xr.DataArray(elpd_i, dims=["obs"],
                      coords={"obs": post["observed_data"]["obs"].values}, name="t")
    return ELPDDataLOO(elpd=float(elpd_i.sum()), se=float(np.sqrt(n * np.var(elpd_i))),
                       p=float(lppd_i.sum() - elpd_i.sum()), n_samples=1, n_data_points=n,
                       scale="log", warning=False, good_k=None,
                       elpd_i=da if pointwise else None, pareto_k=None)


def _psis(post, ll: np.ndarray, pointwise: bool):
    """``az.loo`` with ``ll`` (S, N) as the pointwise log-likelihood of the posterior's
    hyperparameter draws (their relative efficiency sets PSIS's)."""
    import arviz_stats as azs

    ds = post["posterior"]
    names = [v for v in ("alpha", "beta", "length_scale", "signal_sd", "noise_sd") if v in ds]
    tree = xr.DataTree.from_dict({
        "posterior": ds.to_dataset()[names],
        "log_likelihood": xr.Dataset(
            {"t": (("chain", "draw", "obs"), ll.reshape(ds.sizes["chain"], ds.sizes["draw"], -1))},
            coords={"chain": ds["chain"].values, "draw": ds["draw"].values,
                    "obs": post["observed_data"]["obs"].values}),
    })
    return azs.loo(tree, pointwise=pointwise)


def observed_logpdf(pred, t: np.ndarray) -> np.ndarray:
    """Log predictive density of the observed targets ``t`` (class codes 0..K-1 for a
    class predictive, whose ``logpdf`` takes the labels)."""
    if hasattr(pred, "log_proba"):
        return pred.log_proba[np.arange(t.shape[0]), np.asarray(t, dtype=int)]
    return pred.logpdf(t)


def _in_sample_lppd(post) -> np.ndarray:
    from .api import predict

    return observed_logpdf(predict(post, post["constant_data"]["X"].values),
                           post["observed_data"]["t"].values)


def default_estimator(post: xr.DataTree) -> str:
    """The estimator :func:`loo` uses by default: "psis" for sampled results; for point
    (type-II ML) results "refit" (exact) up to ``EXACT_MAX_N[kind]`` training points, else
    "kfold". Decided by the method and the size alone, never by a clock."""
    if post.attrs.get("method") in SAMPLED_METHODS:
        return "psis"
    n = post["observed_data"]["t"].shape[0]
    limit = COLD_EXACT_MAX_N if cold_reason(post) is not None else \
        EXACT_MAX_N[family_of(post).kind]
    return "refit" if n <= limit else "kfold"


def _check(post, estimator):
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError(f"post must be a DataTree returned by sparsebayes.inference.fit, got "
                        f"{type(post).__name__}")
    family, method = family_of(post), post.attrs.get("method")
    kind = family.kind
    sampled = method in SAMPLED_METHODS
    point = method in family.warm_refits
    if not (sampled or point):
        raise ValueError(f"no leave-one-out estimator for a {kind} {method!r} result")
    optimistic = family.optimistic if point else None
    allowed = ("psis",) if sampled else ("refit", "kfold", optimistic)
    if estimator not in (None, *allowed):
        raise ValueError(f"estimator must be one of {allowed} for a {kind} {method!r} result, "
                         f"got {estimator!r}")
    return sampled, optimistic


def loo(post: xr.DataTree, estimator: str | None = None, *, pointwise: bool = True,
        folds: int = KFOLD, progressbar: bool | None = None):
    """Leave-one-out ``elpd`` of a fitted result by the estimator right for its method (see
    the module docstring), as an ArviZ ``ELPDDataLOO`` (``elpd_i`` on dim ``obs``);
    ``az.compare`` takes a dict of them (or use :func:`loo_compare`).

    estimator : None for :func:`default_estimator`; "psis" (sampled results); for point
        results "refit" (exact, warm-started refits), "kfold" (``folds`` warm-started
        refits: the elpd of a fit to ``(folds - 1) / folds`` of the points) or the optimistic
        estimate at the fitted hyperparameters ("gaussian" for regression, GPML eq. 5.12;
        "cavity" for classification, Vehtari et al. 2016's Laplace LOO).

    The result's ``estimator`` says which ran, ``seconds`` how long it took, ``optimistic``
    whether it holds anything fitted to all the points.
    """
    sampled, optimistic = _check(post, estimator)
    family = family_of(post)
    if estimator is None:
        estimator = default_estimator(post)
    if not isinstance(folds, int | np.integer) or not 2 <= folds <= post["observed_data"][
            "t"].shape[0]:
        raise ValueError(f"folds must be an integer in [2, N], got {folds!r}")
    start = time.perf_counter()
    if estimator == "psis" and family.psis_loglik is None:
        import arviz_stats as azs

        res = azs.loo(post, pointwise=pointwise)
    elif estimator == "psis":
        res = _psis(post, family.psis_loglik(post), pointwise)
    if estimator == "psis":
        _warn_high_pareto_k(post, res)
    else:
        n = post["observed_data"]["t"].shape[0]
        if estimator in ("refit", "kfold"):
            parts = ([np.array([i]) for i in range(n)] if estimator == "refit"
                     else kfold_folds(post, folds))
            elpd_i, failed = warm_refit_logpdf(post, parts, progressbar=progressbar)
            if failed:
                warn_user(f"{failed} of {len(parts)} refits did not converge; their "
                          "predictive densities are those of the last iterate",
                          NumericalWarning)
        else:
            elpd_i = family.optimistic_loo(post)
        res = _elpd_data(post, elpd_i, _in_sample_lppd(post), pointwise)
    res.estimator = estimator
    res.problem_kind = family.kind
    res.optimistic = estimator == optimistic
    res.folds = folds if estimator == "kfold" else None
    res.refits = None if estimator in ("psis", optimistic) else (
        "cold" if cold_reason(post) else "warm")
    res.seconds = time.perf_counter() - start
    return res


def _warn_high_pareto_k(post, res) -> None:
    """A ``NumericalWarning`` when PSIS's Pareto k exceeds its threshold (``good_k``,
    Vehtari et al. 2024) at some points: its elpd there is not to be trusted."""
    if res.pareto_k is None:
        return
    k = np.asarray(res.pareto_k, dtype=float).reshape(-1)
    bad = int(np.sum(k > res.good_k))
    if bad:
        warn_user(f"PSIS-LOO of this {post.attrs.get('method')!r} result is unreliable: Pareto "
                  f"k > {res.good_k:.2f} at {bad} of {k.size} points (max {np.max(k):.2f}), "
                  "so its elpd may be far off; draw more samples, or compare methods on "
                  "held-out data", NumericalWarning)


def loo_compare(posts: Mapping[str, xr.DataTree], **kwargs):
    """``az.compare`` of ``{name: result}`` by :func:`loo` of each (``ELPDData`` values are
    taken as they are), with a column ``estimator`` naming each row's estimator; ``kwargs``
    go to ``az.compare`` (e.g. ``method``). Refuses to rank an optimistic estimate (held at
    hyperparameters fitted to all points) against others, and warns when K-fold rows (a fit
    to fewer points) are ranked against leave-one-out ones."""
    import arviz_stats as azs
    from arviz_stats.utils import ELPDData

    if not isinstance(posts, Mapping) or len(posts) < 2:
        raise ValueError("posts must be a mapping of at least two {name: result}")
    res = {k: v if isinstance(v, ELPDData) else loo(v) for k, v in posts.items()}
    est = {k: getattr(v, "estimator", "psis") for k, v in res.items()}
    optimistic = sorted(k for k, v in res.items() if getattr(v, "optimistic", False))
    if optimistic and len(optimistic) < len(res):
        fitted = sorted({FAMILIES[res[k].problem_kind].fitted_to_all
                         if getattr(res[k], "problem_kind", None) in FAMILIES
                         else "the hyperparameters" for k in optimistic})
        raise ValueError(
            f"{optimistic} hold an optimistic LOO (estimator "
            f"{sorted({est[k] for k in optimistic})}: {'; '.join(fitted)} fitted to all "
            "points) and cannot be ranked against the other rows; use "
            "loo(post, 'refit') (exact) or loo(post, 'kfold') for them")
    kinds = {"kfold" if e == "kfold" else "loo" for e in est.values()}
    if len(kinds) > 1:
        warn_user("ranking K-fold estimates (each fold fitted to (K-1)/K of the points, "
                  "pessimistic by the learning curve) against leave-one-out ones: pass "
                  "estimator='kfold' to every result for a like-for-like ranking",
                  NumericalWarning)
    table = azs.compare(res, **kwargs)
    table.insert(0, "estimator", [est[k] for k in table.index])
    return table
