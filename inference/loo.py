"""Leave-one-out cross-validation by one estimator for every method, as ArviZ ``ELPDData``.

``az.loo(post)`` on a result's ``log_likelihood`` group is PSIS-LOO (Vehtari, Gelman & Gabry
2017) over the draws the result holds. For the type-II ML results (evidence, MacKay, VRVM)
those are draws of ``w`` at hyperparameters fitted on all N points, with the basis pruned
on all N points, so the estimate is optimistic; for ADVI the draws come from ``q``, far
from the posterior PSIS reweights (Pareto k of 5-45 measured), so it is noise. Each method
with its own estimator ranks methods by their estimators' biases. :func:`loo` gives them
one estimator by default (:func:`default_estimator`):

* ``"subsample"`` (point and variational results): the difference estimator of Magnusson,
  Andersen, Jonasson & Vehtari (2019, 2020) (:func:`subsample_loo`): a cheap
  approximation on every point (:func:`approximate_loo`: GPML eq. 5.12 or the Laplace
  cavity LOO of Vehtari, Mononen, Tolvanen, Sivula & Winther 2016 at the fitted
  hyperparameters; PSIS where its Pareto k is good for ADVI), corrected by the method
  refitted from scratch (:func:`cold_refit`) on a simple random sample of the points fixed
  by a seed. Its subsampling SE says what the subsample costs in certainty; with N no more
  than the refit budget it is the exact LOO.
* ``"reloo"`` (NUTS): PSIS, the points with Pareto k above ``good_k`` refitted exactly.

PSIS for the collapsed regression models (``nuts``, ``advi``; GP ``nuts``) is the
non-factorised Gaussian LOO of Bürkner, Gabry & Vehtari (2021): for each draw ``theta_s =
(alpha_s, beta_s)`` the weights are integrated out, ``t ~ N(0, C)`` with ``C = beta^-1 I +
Phi A^-1 Phi^T`` (T01 eq. 15), ``p(t_n | t_-n, theta) = N(t_n | t_n - [C^-1 t]_n /
[C^-1]_nn, 1 / [C^-1]_nn)`` (GPML eqs. 5.10-5.12), and only ``theta`` is reweighted.
Classification and counts factorise over draws of ``w``: plain PSIS on the stored
log-likelihood.

Estimators to be asked for by name: ``"psis"`` alone; for point results ``"refit"`` (the
exact LOO by warm-started refits at every point, :func:`warm_refits`; cold where
:func:`cold_reason` says so), ``"kfold"`` (``KFOLD`` folds) and the optimistic estimate at
the hyperparameters fitted to all N points (``"gaussian"``, ``"cavity"``). The result's
``estimator``, ``optimistic``, ``refits`` and ``seconds`` say which estimator ran and how
long it took; :func:`loo_compare` ranks methods and shows each row's estimator.
"""

from __future__ import annotations

import time
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr
from arviz_stats.utils import ELPDDataLOO, ELPDDataLOOSubsample

from sparsebayes.models import NumericalWarning

from .contract import options_from_attrs
from .families import FAMILIES, REGISTERED, family_of
from .gp.families import gp_loo_logpdf
from .methods import method_of
from .numerics import gaussian_loo_logpdf, show_progress, warn_user

__all__ = ["loo", "loo_compare", "default_estimator", "approximate_loo", "subsample_loo",
           "subsample_order", "reloo", "unreliable_reason", "gaussian_loo_logpdf",
           "gp_loo_logpdf", "cold_refit", "cold_refit_logpdf", "refit_options",
           "warm_refit_logpdf", "observed_logpdf", "warm_refits", "kfold_folds",
           "training_problem", "cold_reason", "ELPDDataRefits", "ELPDDataSubsample",
           "KFOLD", "SUBSAMPLE_REFITS", "SUBSAMPLE_SE", "WARM_REFITS"]

# views of the registered families: (problem kind, method) of the point (type-II ML) results
# -> their warm-started refits; the largest training set whose point results get the exact
# LOO by default (N refits; above it KFOLD folds)
WARM_REFITS = {(f.kind, m): cls for f in REGISTERED for m, cls in f.warm_refits.items()}
KFOLD = 10
#: The "subsample" estimator: at most this many cold refits (all points when N is no more)
SUBSAMPLE_REFITS = 30
#: ... at least this many before the subsampling SE is first checked, then every STEP refits
SUBSAMPLE_FIRST = 10
SUBSAMPLE_STEP = 5
#: ... stopping early once the subsampling SE is at most this many nats; 0: never, so that
#: every result refits the same points and loo_compare's pairwise differences (on the
#: shared subsample) equal the differences of the estimates
SUBSAMPLE_SE = 0.0
#: a run of refits expected to take longer than this (seconds) says so up front
LONG_REFITS = 10.0


def training_problem(post: xr.DataTree, rows: np.ndarray | slice = slice(None)):
    """The problem ``post`` was fitted to, on the training rows ``rows``: the same kernel
    (at its fitted width), bias, extra columns, fixed noise, prior and width learning, and
    the same basis: kernels at *all* the fitted centres (the training inputs of the classic
    RVM), since the model conditions on the inputs and leave-one-out leaves out a target,
    not a column. For refits (:func:`cold_refit_logpdf`)."""
    return family_of(post).training_problem(post, rows)


class _Refits:
    """Progress of a run of refits: a bar in a terminal or notebook, and ``logging``
    records in every case: after the first refit, when the whole run is expected to take
    more than ``LONG_REFITS`` seconds, the estimate; at the end, the time it took."""

    def __init__(self, post, total: int, what: str, progressbar) -> None:
        from .progress import logger

        self.logger, self.total, self.done = logger, int(total), 0
        self.what = f"{what} of a {post.attrs.get('method')!r} result"
        self.start = time.perf_counter()
        self.bar = None
        if show_progress(progressbar) and total > 1:
            from .progress import progress_bar

            self.bar = progress_bar(total=total, desc=what, unit="fit")

    def update(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update()
        if self.done == 1 and self.total > 1:
            first = time.perf_counter() - self.start
            if first * self.total > LONG_REFITS:
                self.logger.info(f"{self.what}: up to {self.total} fits, about "
                                 f"{first * self.total:.0f} s (the first took {first:.1f} s)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        seconds = time.perf_counter() - self.start
        if seconds > LONG_REFITS:
            self.logger.info(f"{self.what}: {self.done} fits in {seconds:.1f} s")


def refit_options(post: xr.DataTree) -> dict:
    """The options a cold refit of ``post`` repeats: its seed, the options passed to its fit
    (``options_from_attrs``), and for a method whose result holds draws of the
    hyperparameters (``Method.draws``) the chains and draws it holds."""
    seed = int(post.attrs.get("seed", -1))
    options = {**options_from_attrs(post.attrs), "seed": None if seed < 0 else seed}
    if method_of(post).draws:
        options.update(chains=int(post["posterior"].sizes["chain"]),
                       draws=int(post["posterior"].sizes["draw"]))
    return options


def cold_refit(post: xr.DataTree, rows_out, **options) -> tuple[np.ndarray, bool]:
    """The method of ``post`` fitted from scratch by ``fit`` on :func:`training_problem`
    without the rows ``rows_out``, and its own predictive density at them: ``log p(t_n |
    t_rest)`` at each row left out, and whether the refit converged. ``options`` go to
    ``fit`` (default :func:`refit_options`)."""
    from .api import fit, predict
    from .progress import quiet

    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    keep = np.ones(t.shape[0], bool)
    keep[rows_out] = False
    # one summary by the caller instead of a warning and a start and end line per refit
    with warnings.catch_warnings(), quiet("sparsebayes", "pymc"):
        warnings.simplefilter("ignore")
        sub = fit(training_problem(post, keep), post.attrs["method"],
                  **{**refit_options(post), **options})
        logp = observed_logpdf(predict(sub, X[rows_out]), t[rows_out])
    return logp, bool(int(sub.attrs.get("converged", 1)))


def cold_refit_logpdf(post: xr.DataTree, folds, *, progressbar: bool | None = None,
                      **options) -> tuple[np.ndarray, int]:
    """The brute-force reference: :func:`cold_refit` of each fold (an array of rows left
    out). Returns ``log p(t_n | t_rest)`` (N,) and the number of refits that did not
    converge. ``options`` go to ``fit``."""
    out, failed = np.full(post["observed_data"]["t"].shape[0], np.nan), 0
    bar = _Refits(post, len(folds), "cold LOO refits", progressbar)
    for rows_out in folds:
        out[rows_out], converged = cold_refit(post, rows_out, **options)
        failed += not converged
        bar.update()
    bar.close()
    return out, failed


def cold_reason(post: xr.DataTree) -> str | None:
    """Why ``post``'s refits start cold, or None when they are warm-started: widths learned
    by the evidence (a warm start holds the basis), a sparse GP, or the reason the family's
    refits class gives (``cold_reason(post)`` of a :class:`~.family.Refits`, e.g. a VRVM
    regression fit whose hyperprior on ``alpha`` has shape < 1: its bound has many local
    maxima, and a warm refit keeps the relevance vectors the full fit chose with the
    left-out targets, an optimistic estimate)."""
    if int(post.attrs.get("learn_width", 0)):
        return "widths learned by the evidence"
    if "inducing" in post.attrs:
        return "a sparse GP (the warm refits are the exact GP's)"
    own = getattr(family_of(post).warm_refits.get(post.attrs["method"]), "cold_reason", None)
    return None if own is None else own(post)


def warm_refits(post: xr.DataTree):
    """The family's warm-started refits of ``post`` (an object whose ``fold(rows_out)``
    returns the refit's log predictive density at the rows left out and whether it
    converged), or None where the fit is refitted cold (:func:`cold_reason`)."""
    cls = _warm_refits_class(post)
    return None if cls is None else cls(post)


def _warm_refits_class(post: xr.DataTree):
    """The family's warm-refits class for ``post``, or None where its refits are cold (the
    family has none for the method, or :func:`cold_reason`)."""
    cls = family_of(post).warm_refits.get(post.attrs["method"])
    return None if cls is None or cold_reason(post) is not None else cls


def warm_refit_logpdf(post: xr.DataTree, folds, *, progressbar: bool | None = None
                      ) -> tuple[np.ndarray, int]:
    """``log p(t_n | t_rest)`` (N,) with each fold's rows left out, by the family's
    warm-started refits (:func:`warm_refits`; cold ones where it has none), and the number
    of refits that did not converge."""
    refits = warm_refits(post)
    if refits is None:
        return cold_refit_logpdf(post, folds, progressbar=progressbar)
    out, failed = np.empty(post["observed_data"]["t"].shape[0]), 0
    bar = _Refits(post, len(folds), "warm LOO refits", progressbar)
    for rows_out in folds:
        out[rows_out], converged = refits.fold(np.asarray(rows_out, dtype=int))
        failed += not converged
        bar.update()
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


@dataclass(kw_only=True, repr=False)
class ELPDDataRefits(ELPDDataLOO):
    """Exact leave-one-out (or K-fold) by refits, as ArviZ's ``ELPDDataLOO``: no importance
    sampling (``pareto_k``, ``good_k`` None); ``how`` says which refits ran (the printed
    header, in place of a count of posterior samples that a refit does not have)."""

    how: str = ""

    def _header(self):
        return self.how

    def _table(self):  # no p_loo: refits are not importance sampling over draws
        return f"          Estimate      SE\nelpd_loo {self.elpd:9.2f} {self.se:7.2f}\n"


@dataclass(kw_only=True, repr=False)
class ELPDDataSubsample(ELPDDataLOOSubsample):
    """The difference estimator over exact refits on a subsample, as ArviZ's
    ``ELPDDataLOOSubsample`` (so ``az.compare`` pairs two of them on their shared
    subsample): ``elpd_i`` holds the exact values at ``loo_subsample_observations`` and the
    approximation elsewhere, ``elpd_loo_approx`` the approximation everywhere."""

    how: str = ""

    def _header(self):
        return self.how

    def _table(self):
        return ("          Estimate      SE  subsampling SE\n"
                f"elpd_loo {self.elpd:9.2f} {self.se:7.2f} {self.subsampling_se:15.2f}\n")


def _pointwise(post, values: np.ndarray, name: str = "t") -> xr.DataArray:
    return xr.DataArray(values, dims=["obs"],
                        coords={"obs": post["observed_data"]["obs"].values}, name=name)


def _elpd_data(post, elpd_i: np.ndarray, lppd_i: np.ndarray, pointwise: bool, how: str):
    """An ``ELPDDataRefits`` of exact pointwise values; ``p = lppd - elpd`` with ``lppd``
    the in-sample log predictive density (Vehtari et al. 2017 eqs. 4, 23)."""
    n = elpd_i.size
    return ELPDDataRefits(elpd=float(elpd_i.sum()), se=float(np.sqrt(n * np.var(elpd_i))),
                          p=float(lppd_i.sum() - elpd_i.sum()), n_samples=1, n_data_points=n,
                          scale="log", warning=False, good_k=None,
                          elpd_i=_pointwise(post, elpd_i) if pointwise else None,
                          pareto_k=None, how=how)


def _loglik(post) -> np.ndarray:
    """(S, N) pointwise log-likelihood PSIS weights a sampled result's draws by: the
    family's (hyperparameter draws of a collapsed model) or the stored ``log_likelihood``."""
    family = family_of(post)
    if family.psis_loglik is not None:
        return family.psis_loglik(post)
    ll = post["log_likelihood"]["t"].values
    return ll.reshape(-1, ll.shape[-1])


def _psis(post, ll: np.ndarray, pointwise: bool = True):
    """``az.loo`` with ``ll`` (S, N) as the pointwise log-likelihood of the posterior's
    draws (their relative efficiency sets PSIS's)."""
    import arviz_stats as azs

    ds = post["posterior"]
    names = [v for v in ("alpha", "beta", "length_scale", "signal_sd", "noise_sd", "w")
             if v in ds]
    tree = xr.DataTree.from_dict({
        "posterior": ds.to_dataset()[names],
        "log_likelihood": xr.Dataset(
            {"t": (("chain", "draw", "obs"), ll.reshape(ds.sizes["chain"], ds.sizes["draw"], -1))},
            coords={"chain": ds["chain"].values, "draw": ds["draw"].values,
                    "obs": post["observed_data"]["obs"].values}),
    })
    with warnings.catch_warnings():  # the caller warns, naming the method and the cure
        warnings.simplefilter("ignore")
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


def approximate_loo(post: xr.DataTree) -> tuple[np.ndarray, str]:
    """The cheap approximation of ``log p(t_n | t_-n)`` on every point (N,) that
    :func:`loo`'s ``"subsample"`` estimator corrects by exact refits, and its name.

    Point results: the estimate at the hyperparameters fitted to all points (GPML eq. 5.12
    for regression, the Laplace cavity LOO of Vehtari et al. 2016 for classification and
    counts). Sampled and variational results: PSIS-LOO where its Pareto k is below
    ``good_k``; elsewhere the unweighted ``log mean_s p(t_n | ..., theta_s)`` (Magnusson et
    al. 2019's lpd approximation; for the collapsed regression models the conditional
    ``p(t_n | t_-n, theta_s)``), since PSIS's own values there are noise."""
    family = family_of(post)
    if not method_of(post).draws:
        return np.asarray(family.optimistic_loo(post), float), family.optimistic
    from scipy.special import logsumexp

    ll = _loglik(post)
    res = _psis(post, ll)
    plain = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    k = np.asarray(res.pareto_k, float).reshape(-1)
    good = np.isfinite(k) & (k <= res.good_k)
    return np.where(good, np.asarray(res.elpd_i, float).reshape(-1), plain), "psis/lpd"


def subsample_order(n: int, seed: int = 0) -> np.ndarray:
    """The order in which :func:`loo`'s ``"subsample"`` estimator refits the points: a
    permutation of ``range(n)`` fixed by ``seed`` alone, so every result on the same data
    is refitted on the same points (``az.compare`` then pairs them by the difference
    estimator) and the estimate never depends on the run; any prefix of it is a simple
    random sample."""
    return np.random.default_rng(seed).permutation(n)


def _difference_estimate(exact: np.ndarray, approx: np.ndarray, sample: np.ndarray):
    """Magnusson et al. (2020) eqs. 7-9, the difference estimator under simple random
    sampling without replacement: ``elpd``, its subsampling SE and its total SE."""
    import arviz_stats  # noqa: F401  (the azstats accessor)

    if sample.size == approx.size:  # every point refitted: the exact LOO
        n = approx.size
        return float(exact.sum()), 0.0, float(np.sqrt(n * np.var(exact)))
    elpd, sub_se, se = xr.DataArray(exact[sample]).azstats.diff_srs_estimator(
        lpd_approx_sample=approx[sample], lpd_approx_all=approx, n_data_points=approx.size)
    return float(elpd), float(sub_se), float(se)


def subsample_loo(post: xr.DataTree, *, refits: int = SUBSAMPLE_REFITS,
                  target_se: float = SUBSAMPLE_SE, seed: int = 0, pointwise: bool = True,
                  progressbar: bool | None = None) -> ELPDDataSubsample:
    """The ``"subsample"`` estimator of :func:`loo` (Magnusson, Andersen, Jonasson & Vehtari
    2019, 2020): :func:`approximate_loo` on all N points; the method refitted from scratch
    (:func:`cold_refit`) on the first points of :func:`subsample_order`, at least
    ``SUBSAMPLE_FIRST`` and at most ``refits`` of them, stopping once the subsampling SE is
    at most ``target_se`` nats (every point when N <= ``refits``: the exact LOO); combined
    by the difference estimator."""
    t = post["observed_data"]["t"].values
    n = t.shape[0]
    approx, approx_name = approximate_loo(post)
    order = subsample_order(n, seed)
    budget = min(refits, n)
    exact, failed, m = np.full(n, np.nan), 0, 0
    bar = _Refits(post, budget, "cold LOO refits on a subsample", progressbar)
    while m < budget:
        row = order[m:m + 1]
        exact[row], converged = cold_refit(post, row)
        failed += not converged
        m += 1
        bar.update()
        if budget < n and m >= SUBSAMPLE_FIRST and (m - SUBSAMPLE_FIRST) % SUBSAMPLE_STEP == 0:
            if _difference_estimate(exact, approx, order[:m])[1] <= target_se:
                break
    bar.close()
    if failed:
        warn_user(f"{failed} of {m} cold refits did not converge; their predictive densities "
                  "are those of the last iterate", NumericalWarning)
    sample = np.sort(order[:m])
    elpd, sub_se, se = _difference_estimate(exact, approx, sample)
    lppd = _in_sample_lppd(post)
    filled = approx.copy()
    filled[sample] = exact[sample]
    how = (f"Exact refits (cold) at {m} of {n} observations, combined with the {approx_name} "
           "approximation by the difference estimator (Magnusson et al. 2020).")
    return ELPDDataSubsample(
        elpd=elpd, se=se, p=float(lppd.sum() - elpd), n_samples=m, n_data_points=n,
        scale="log", warning=bool(failed), good_k=None,
        elpd_i=_pointwise(post, filled) if pointwise else None, pareto_k=None,
        subsample_size=m, subsampling_se=sub_se, loo_subsample_observations=sample,
        elpd_loo_approx=_pointwise(post, approx), how=how)


def reloo(post: xr.DataTree, *, pointwise: bool = True, progressbar: bool | None = None):
    """PSIS-LOO of a sampled result with the points whose Pareto k exceeds ``good_k``
    refitted exactly (:func:`cold_refit`), as ArviZ's ``reloo`` does: their ``elpd_i`` are
    the refits' and their ``pareto_k`` 0."""
    res = _psis(post, _loglik(post))
    k = np.asarray(res.pareto_k, float).reshape(-1)
    bad = np.flatnonzero(~(k <= res.good_k))
    if bad.size:
        elpd_i = np.asarray(res.elpd_i, float).reshape(-1).copy()
        refit, _ = cold_refit_logpdf(post, [bad[i:i + 1] for i in range(bad.size)],
                                     progressbar=progressbar)
        old = elpd_i[bad].sum()
        elpd_i[bad] = refit[bad]
        k[bad] = 0.0
        n = elpd_i.size
        res.elpd, res.se = float(elpd_i.sum()), float(np.sqrt(n * np.var(elpd_i)))
        res.p = float(res.p + old - elpd_i[bad].sum())
        res.elpd_i = _pointwise(post, elpd_i)
        res.pareto_k = _pointwise(post, k, "pareto_k")
        res.warning = False
    res.refitted = bad
    if not pointwise:
        res.elpd_i = res.pareto_k = None
    return res


def default_estimator(post: xr.DataTree) -> str:
    """The estimator :func:`loo` uses by default, the method's ``loo_estimator``:
    ``"reloo"`` for NUTS (PSIS, the points with a high Pareto k refitted), ``"subsample"``
    for every other result (point and variational). Decided by the method alone, never by a
    clock."""
    return method_of(post).loo_estimator


def _check(post, estimator):
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError(f"post must be a DataTree returned by sparsebayes.inference.fit, got "
                        f"{type(post).__name__}")
    family, method = family_of(post), post.attrs.get("method")
    kind = family.kind
    sampled = method_of(post).draws
    point = method in family.warm_refits
    if not (sampled or point):
        raise ValueError(f"no leave-one-out estimator for a {kind} {method!r} result")
    optimistic = family.optimistic if point else None
    allowed = (("subsample", "psis", "reloo") if sampled
               else ("subsample", "refit", "kfold", optimistic))
    if estimator not in (None, *allowed):
        raise ValueError(f"estimator must be one of {allowed} for a {kind} {method!r} result, "
                         f"got {estimator!r}")
    return optimistic


_CACHE: dict[int, dict] = {}  # id of a result -> its computed LOOs, dropped with the result


def loo(post: xr.DataTree, estimator: str | None = None, *, pointwise: bool = True,
        folds: int = KFOLD, refits: int = SUBSAMPLE_REFITS, target_se: float = SUBSAMPLE_SE,
        seed: int = 0, progressbar: bool | None = None):
    """Leave-one-out ``elpd`` of a fitted result, as an ArviZ ``ELPDData``.

    ``az.compare`` takes a dict of them (or use :func:`loo_compare`). A second call with
    the same arguments returns the first call's result.

    Parameters
    ----------
    post : xarray.DataTree
        A result of :func:`~sparsebayes.inference.fit`.
    estimator : str, optional
        ``None`` for :func:`default_estimator`; ``"subsample"``: :func:`subsample_loo`, the
        method refitted from scratch on a random subsample of at most ``refits`` points
        (fewer once the subsampling SE is at most ``target_se`` nats; all points when
        N <= ``refits``: the exact LOO), correcting :func:`approximate_loo` on every point
        by the difference estimator; ``"reloo"`` (sampled results): PSIS, the points with
        Pareto k above ``good_k`` refitted exactly (:func:`reloo`); ``"psis"``: PSIS alone;
        point results also ``"refit"`` (exact, warm-started refits at every point),
        ``"kfold"`` (``folds`` warm-started refits) or the optimistic estimates at the
        fitted hyperparameters ``"gaussian"`` (GPML eq. 5.12) and ``"cavity"`` (Vehtari et
        al. 2016's Laplace LOO).
    pointwise : bool, default True
        Keep ``elpd_i`` (dim ``obs``) and the Pareto k per point.
    folds : int, default 10
        Folds of ``"kfold"``: the elpd of a fit to ``(folds - 1) / folds`` of the points.
    refits : int, default 30
        At most this many cold refits for ``"subsample"``.
    target_se : float, default 0.0
        ``"subsample"`` stops once its subsampling SE is at most this many nats (checked
        from ``SUBSAMPLE_FIRST`` refits on); 0: never. Results that stop at different
        sizes are compared by ``loo_compare`` on the smaller shared subsample, whose
        difference need not equal the difference of their estimates.
    seed : int, default 0
        Seed of the ``"subsample"`` draw of points (the subsample depends on it alone).
    progressbar : bool, optional
        A bar over the refits; ``None``: on in a terminal or notebook, off under CI or
        without a terminal (the log says what a long run expects either way).

    Returns
    -------
    ELPDData
        With ``estimator`` (which ran), ``seconds`` (how long it took) and ``optimistic``
        (whether it holds anything fitted to all the points).
    """
    optimistic = _check(post, estimator)
    family = family_of(post)
    if estimator is None:
        estimator = default_estimator(post)
    n = post["observed_data"]["t"].shape[0]
    if not isinstance(folds, int | np.integer) or not 2 <= folds <= n:
        raise ValueError(f"folds must be an integer in [2, N], got {folds!r}")
    if not isinstance(refits, int | np.integer) or refits < 2:
        raise ValueError(f"refits must be an integer >= 2, got {refits!r}")
    if not isinstance(target_se, int | float) or not target_se >= 0:
        raise ValueError(f"target_se must be a number >= 0 (nats), got {target_se!r}")
    key = (estimator, pointwise, int(folds), int(refits), float(target_se), seed)
    cached = _CACHE.get(id(post), {}).get(key)
    if cached is not None:
        return cached
    start = time.perf_counter()
    kind = "cold" if estimator in ("subsample", "reloo") else None  # of the refits, if any
    if estimator == "subsample":
        res = subsample_loo(post, refits=int(refits), target_se=float(target_se), seed=seed,
                            pointwise=pointwise, progressbar=progressbar)
    elif estimator == "reloo":
        res = reloo(post, pointwise=pointwise, progressbar=progressbar)
    elif estimator == "psis":
        res = _psis(post, _loglik(post), pointwise)
        _warn_high_pareto_k(post, res)
    else:
        if estimator in ("refit", "kfold"):
            parts = ([np.array([i]) for i in range(n)] if estimator == "refit"
                     else kfold_folds(post, folds))
            elpd_i, failed = warm_refit_logpdf(post, parts, progressbar=progressbar)
            if failed:
                warn_user(f"{failed} of {len(parts)} refits did not converge; their "
                          "predictive densities are those of the last iterate",
                          NumericalWarning)
            kind = "cold" if _warm_refits_class(post) is None else "warm"
            how = (f"Exact leave-one-out: {n} refits ({kind})." if estimator == "refit" else
                   f"{folds}-fold cross-validation: {folds} refits ({kind}).")
        else:
            elpd_i = family.optimistic_loo(post)
            how = (f"The {estimator} leave-one-out at the hyperparameters fitted to all "
                   f"{n} observations (optimistic).")
        res = _elpd_data(post, elpd_i, _in_sample_lppd(post), pointwise, how)
    res.estimator = estimator
    res.problem_kind = family.kind
    res.optimistic = estimator == optimistic
    res.folds = folds if estimator == "kfold" else None
    res.refits = kind
    res.seconds = time.perf_counter() - start
    if id(post) not in _CACHE:
        weakref.finalize(post, _CACHE.pop, id(post), None)
    _CACHE.setdefault(id(post), {})[key] = res
    return res


def unreliable_reason(res) -> str | None:
    """Why a leave-one-out result's own diagnostics say its elpd is not to be trusted (PSIS
    with Pareto k above ``good_k`` left unrefitted; a non-finite elpd), or None."""
    if not np.isfinite(res.elpd):
        return "its elpd is not finite"
    if getattr(res, "pareto_k", None) is not None and res.good_k is not None:
        k = np.asarray(res.pareto_k, float).reshape(-1)
        bad = int(np.sum(~(k <= res.good_k)))
        if bad:
            return (f"PSIS with Pareto k > {res.good_k:.2f} at {bad} of {k.size} points "
                    f"(max {np.nanmax(k):.2f})")
    return None


def _warn_high_pareto_k(post, res) -> None:
    """A ``NumericalWarning`` when PSIS's Pareto k exceeds its threshold (``good_k``,
    Vehtari et al. 2024) at some points: its elpd there is not to be trusted."""
    reason = unreliable_reason(res)
    if reason is not None and res.pareto_k is not None:
        warn_user(f"PSIS-LOO of this {post.attrs.get('method')!r} result is unreliable: "
                  f"{reason}, so its elpd may be far off; use loo(post) (its default "
                  "estimator refits exactly where PSIS fails)", NumericalWarning)


def _label(res) -> str:
    """The estimator of a row, as ``loo_compare`` shows it."""
    est = getattr(res, "estimator", None) or ("subsample" if isinstance(
        res, ELPDDataLOOSubsample) else "psis")
    if est == "subsample":
        return f"subsample ({res.subsample_size}/{res.n_data_points} cold refits)"
    if est == "reloo":
        refitted = getattr(res, "refitted", ())
        return f"psis + {len(refitted)} refits" if len(refitted) else "psis"
    if est in ("refit", "kfold"):
        size = f"{res.folds} folds" if est == "kfold" else f"{res.n_data_points}"
        return f"{est} ({size}, {res.refits})"
    return est


def _plug_in_dse(table, ranked) -> None:
    """Where ArviZ's difference estimator of the SE of ``elpd_diff`` came out 0 (its
    variance estimate is a difference of terms, clipped at 0 when the subsample is small),
    the plug-in ``sqrt(N var(elpd_i - elpd_i of the best))`` over the pointwise values
    (exact on the subsample, approximated elsewhere); ``p_worse`` then from ``elpd_diff``
    against that SE and the subsampling SE of the difference together."""
    from scipy.stats import norm

    best = table.index[0]
    ref = np.asarray(ranked[best].elpd_i, float).reshape(-1)
    for name in table.index[1:]:
        if name not in ranked or not table.loc[name, "dse"] <= 0:
            continue
        diff = np.asarray(ranked[name].elpd_i, float).reshape(-1) - ref
        table.loc[name, "dse"] = float(np.sqrt(diff.size * np.var(diff)))
    if "p_worse" in table:
        spread = np.hypot(table["dse"].astype(float), table["subsampling_dse"].astype(float))
        table["p_worse"] = [np.nan if k == best else
                            float(norm.cdf(0, table.loc[k, "elpd_diff"], spread[k] + 1e-12))
                            for k in table.index]


def loo_compare(posts: Mapping[str, xr.DataTree], *, unreliable: str = "refuse",
                round_to: int = 2, **kwargs):
    """``az.compare`` of several results by the :func:`loo` of each.

    Pairs of ``"subsample"`` rows are compared by the difference estimator on their
    shared subsample (``subsampling_dse``). A row with no finite elpd is never ranked and
    is shown last. An optimistic estimate (held at hyperparameters fitted to all points)
    is refused against other rows, and K-fold rows ranked against leave-one-out ones are
    warned of.

    Parameters
    ----------
    posts : mapping of str to xarray.DataTree or ELPDData
        ``{name: result}``; ``ELPDData`` values are taken as they are, and a result's
        default LOO is computed once and kept.
    unreliable : {"refuse", "rank"}, default "refuse"
        A row whose own diagnostics say it is unreliable (:func:`unreliable_reason`) is
        refused with the reason (``"refuse"``), or ranked with the reason in a column
        ``warning`` (``"rank"``).
    round_to : int, default 2
        Decimals of ``elpd``, ``se``, ``elpd_diff`` and ``dse``.
    **kwargs
        Passed to ``az.compare`` (e.g. ``method``).

    Returns
    -------
    pandas.DataFrame
        ``az.compare``'s table with a column ``estimator`` naming each row's estimator.
    """
    import arviz_stats as azs
    import pandas as pd
    from arviz_stats.utils import ELPDData

    if not isinstance(posts, Mapping) or len(posts) < 2:
        raise ValueError("posts must be a mapping of at least two {name: result}")
    if unreliable not in ("refuse", "rank"):
        raise ValueError(f"unreliable must be 'refuse' or 'rank', got {unreliable!r}")
    if not isinstance(round_to, int) or round_to < 0:
        raise ValueError(f"round_to must be an integer >= 0 (decimals), got {round_to!r}")
    res = {k: v if isinstance(v, ELPDData) else loo(v) for k, v in posts.items()}
    est = {k: getattr(v, "estimator", "psis") for k, v in res.items()}
    reasons = {k: unreliable_reason(v) for k, v in res.items()}
    if unreliable == "refuse":
        refused = {k: r for k, r in reasons.items() if r and np.isfinite(res[k].elpd)}
        if refused:
            raise ValueError(
                "not ranked, since their own diagnostics say their elpd is unreliable: "
                + "; ".join(f"{k!r}: {r}" for k, r in refused.items())
                + ". Use loo(post) (exact refits where PSIS fails) for them, or pass "
                "unreliable='rank' to rank them anyway")
    optimistic = sorted(k for k, v in res.items() if getattr(v, "optimistic", False))
    if optimistic and len(optimistic) < len(res):
        fitted = sorted({FAMILIES[res[k].problem_kind].fitted_to_all
                         if getattr(res[k], "problem_kind", None) in FAMILIES
                         else "the hyperparameters" for k in optimistic})
        raise ValueError(
            f"{optimistic} hold an optimistic LOO (estimator "
            f"{sorted({est[k] for k in optimistic})}: {'; '.join(fitted)} fitted to all "
            "points) and cannot be ranked against the other rows; use loo(post) for them")
    kinds = {"kfold" if e == "kfold" else "loo" for e in est.values()}
    if len(kinds) > 1:
        warn_user("ranking K-fold estimates (each fold fitted to (K-1)/K of the points, "
                  "pessimistic by the learning curve) against leave-one-out ones: pass "
                  "estimator='kfold' to every result for a like-for-like ranking",
                  NumericalWarning)
    ranked = {k: v for k, v in res.items() if np.isfinite(v.elpd)}
    if len(ranked) >= 2:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*(order|subsample|observations included).*")
            table = azs.compare(ranked, round_to="none", **kwargs)
    else:
        table = pd.DataFrame({"rank": [0] * len(ranked),
                              "elpd": [v.elpd for v in ranked.values()],
                              "se": [v.se for v in ranked.values()]}, index=list(ranked))
    unranked = [k for k in res if k not in ranked]
    if unranked:
        table = pd.concat([table, pd.DataFrame(
            {"elpd": [res[k].elpd for k in unranked], "se": [res[k].se for k in unranked]},
            index=unranked)])
    if "subsampling_dse" in table and len(ranked) >= 2:
        _plug_in_dse(table, ranked)
    for column in ("elpd", "se", "elpd_diff", "dse", "subsampling_dse", "p", "weight"):
        if column in table:
            digits = round_to + 1 if column == "weight" else round_to
            table[column] = table[column].astype(float).round(digits)
    if "p" in table:  # p_loo has a meaning for PSIS rows only
        table["p"] = [table.loc[k, "p"] if est[k] in ("psis", "reloo") else np.nan
                      for k in table.index]
    table.insert(0, "estimator", [_label(res[k]) for k in table.index])
    if any(reasons.values()):
        table["warning"] = [reasons[k] or "" for k in table.index]
    return table
