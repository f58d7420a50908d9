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
* **Type-II ML regression** (``evidence``, ``evidence-mackay``, ``vrvm``; GP ``evidence``):
  ``estimator="refit"`` is the exact LOO of the method: for each n the same problem on the
  other N - 1 points is fitted by the same method (hyperparameters re-estimated, basis
  re-pruned from the same candidates: kernels at every fitted centre, point n's included,
  since LOO leaves out a target, not a basis function) and its own predictive (T01 eqs. 21-22, GPML
  eqs. 2.25-2.26) is evaluated at ``x_n``. ``estimator="gaussian"``: GPML eq. 5.12 at the
  fitted hyperparameters on the fitted basis; optimistic (nothing is refitted), but free.
* **Classification**: NUTS / ADVI sample ``w`` and the likelihood factorises, so plain
  PSIS-LOO is right and is returned; type-II ML classification is refused.

Exact estimators do no importance sampling: their ``pareto_k`` and ``good_k`` are None.
The result's ``estimator`` and ``seconds`` say which estimator ran and how long it took.
``az.compare({name: loo(post), ...})`` (or :func:`loo_compare`) ranks methods by them.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping

import numpy as np
import xarray as xr

from sparsebayes.models import GammaPrior, NumericalWarning

from .gp.regression import hyperparameter_draws
from .numerics import LOG_2PI, one_blas_thread, show_progress, warn_user
from .predictive.regression import beta_draws
from .results import basis_from_posterior, flat_draws

__all__ = ["loo", "loo_compare", "gaussian_loo_logpdf", "gp_loo_logpdf", "refit_loo_logpdf",
           "REFIT_SECONDS", "SAMPLED_METHODS", "POINT_METHODS"]

REFIT_SECONDS = 120.0  # default budget (s) for the N refits of the exact type-II ML LOO
SAMPLED_METHODS = ("nuts", "advi", "fullrank_advi")
POINT_METHODS = ("evidence", "evidence-mackay", "vrvm")
_BLOCK_FLOATS = 4_000_000  # floats of the batched matrices per block of draws (32 MB)


def _loo_from_precision(c_diag: np.ndarray, c_t: np.ndarray) -> np.ndarray:
    """GPML eq. 5.12: ``log N(t_n | mu_n, 1 / c_nn)`` with ``c_nn = [C^-1]_nn`` and
    ``t_n - mu_n = [C^-1 t]_n / c_nn``."""
    return 0.5 * (np.log(c_diag) - LOG_2PI) - 0.5 * c_t**2 / c_diag


def _from_covariance(C: np.ndarray, t: np.ndarray) -> np.ndarray:
    """GPML eq. 5.12 for a batch of covariances ``C`` (S, N, N) of ``t``: with ``C = L L^T``,
    ``[C^-1]_nn = sum_k (L^-1)_kn^2`` and ``C^-1 t = L^-T L^-1 t``."""
    L = np.linalg.cholesky(C)
    Linv = np.linalg.solve(L, np.broadcast_to(np.eye(C.shape[-1]), C.shape))
    return _loo_from_precision(np.einsum("skn,skn->sn", Linv, Linv),
                               np.einsum("skn,sk->sn", Linv, Linv @ t))


def gaussian_loo_logpdf(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray,
                        beta: np.ndarray) -> np.ndarray:
    """``log p(t_n | t_-n, alpha_s, beta_s)`` (S, N) of the RVM with ``w`` integrated out,
    for draws ``alpha`` (S, M) and ``beta`` (S,): GPML eqs. 5.10-5.12 with ``C = beta^-1 I +
    Phi A^-1 Phi^T`` (T01 eq. 15).

    ``M >= N``: from the Cholesky factor of ``C``. ``M < N``: through the weight posterior
    (Woodbury), ``C^-1 = beta I - beta^2 Phi Sigma Phi^T`` with ``Sigma = (A + beta Phi^T
    Phi)^-1`` (T01 eq. 13), so ``C^-1 t = beta (t - Phi mu)`` and ``[C^-1]_nn = beta (1 -
    beta phi_n^T Sigma phi_n)``; ``Sigma^-1`` is factorised at unit diagonal. Cost
    O(S (M^3 + N M^2))."""
    Phi = np.asarray(Phi, dtype=float)
    t = np.asarray(t, dtype=float)
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    S, M = alpha.shape
    N = t.size
    beta = np.broadcast_to(np.asarray(beta, dtype=float).reshape(-1), (S,))
    out = np.empty((S, N))
    step = max(1, _BLOCK_FLOATS // (min(N, M) * max(M, N)))
    with one_blas_thread():
        if M >= N:
            for lo in range(0, S, step):
                a, b = alpha[lo:lo + step], beta[lo:lo + step]
                C = np.einsum("nm,sm,km->snk", Phi, 1.0 / a, Phi)
                C[:, np.arange(N), np.arange(N)] += 1.0 / b[:, None]
                out[lo:lo + step] = _from_covariance(C, t)
            return out
        G, Pt = Phi.T @ Phi, Phi.T @ t
        for lo in range(0, S, step):
            a, b = alpha[lo:lo + step], beta[lo:lo + step]
            H = b[:, None, None] * G
            H[:, np.arange(M), np.arange(M)] += a
            d = np.sqrt(np.einsum("smm->sm", H))
            L = np.linalg.cholesky(H / (d[:, :, None] * d[:, None, :]))
            V = np.linalg.solve(L, Phi.T[None] / d[:, :, None])  # ||V_n||^2 = phi_n' Sigma phi_n
            u = np.linalg.solve(L, (b[:, None] * Pt / d)[..., None])
            mu = np.linalg.solve(np.swapaxes(L, 1, 2), u)[..., 0] / d
            q = np.maximum(1.0 - b[:, None] * np.einsum("smn,smn->sn", V, V),
                           np.finfo(float).tiny)
            out[lo:lo + step] = _loo_from_precision(b[:, None] * q,
                                                    b[:, None] * (t - mu @ Phi.T))
    return out


def gp_loo_logpdf(X: np.ndarray, t: np.ndarray, length_scale: np.ndarray,
                  signal_sd: np.ndarray, noise_sd: np.ndarray) -> np.ndarray:
    """``log p(t_n | t_-n, theta_s)`` (S, N) of GP regression (GPML eqs. 5.10-5.12) for
    hyperparameter draws ``length_scale`` (S, d), ``signal_sd`` and ``noise_sd`` (S,), with
    ``C = K + noise_sd^2 I`` and ``K`` the SE-ARD covariance."""
    from sparsebayes.models.gp import se_ard_covariance

    X, t = np.asarray(X, dtype=float), np.asarray(t, dtype=float)
    ls = np.atleast_2d(length_scale)
    sf, sn = np.atleast_1d(signal_sd), np.atleast_1d(noise_sd)
    S, N = ls.shape[0], t.size
    out = np.empty((S, N))
    step = max(1, _BLOCK_FLOATS // N**2)
    with one_blas_thread():
        for lo in range(0, S, step):
            hi = min(lo + step, S)
            C = np.stack([se_ard_covariance(X, None, ls[s], sf[s]) for s in range(lo, hi)])
            C[:, np.arange(N), np.arange(N)] += (sn[lo:hi] ** 2)[:, None]
            out[lo:hi] = _from_covariance(C, t)
    return out


def training_problem(post: xr.DataTree, rows: np.ndarray | slice = slice(None)):
    """The problem ``post`` was fitted to, on the training rows ``rows``: the same kernel
    (at its fitted width), bias, extra columns, fixed noise, prior and width learning, and
    the same basis: kernels at *all* the fitted centres (the training inputs of the classic
    RVM), since the model conditions on the inputs and leave-one-out leaves out a target,
    not a column. For refits (:func:`refit_loo_logpdf`)."""
    from sparsebayes.models import GPRegression, RVMRegression

    X = post["constant_data"]["X"].values[rows]
    t = post["observed_data"]["t"].values[rows]
    if post.attrs["problem_kind"] == "gp":
        ds = post["posterior"]
        fixed = {k: flat_draws(post, k)[0]
                 for k in post.attrs.get("fixed", "none").split(",") if k in ds}
        return GPRegression(X, t, **{k: v if v.ndim else float(v) for k, v in fixed.items()})
    basis, _ = basis_from_posterior(post)
    noise_sd = None
    if int(post.attrs.get("noise_fixed", 0)):
        noise_sd = float(post["posterior"]["noise_sd"].values.reshape(-1)[0])
    prior = GammaPrior.from_json(post.attrs["prior"]) if "prior" in post.attrs else None
    return RVMRegression(X, t, kernel=basis.kernel, bias=basis.bias,
                         extra_columns=basis.extra, noise_sd=noise_sd, prior=prior,
                         learn_width=bool(int(post.attrs.get("learn_width", 0))),
                         centres=basis.centres)


def refit_loo_logpdf(post: xr.DataTree, *, progressbar: bool | None = None,
                     max_seconds: float = np.inf, **options) -> np.ndarray | None:
    """Exact LOO of a type-II ML regression result: ``log p(t_n | t_-n)`` (N,), the method
    refitted by ``fit`` on :func:`training_problem` without row n (cold start, as a fit of
    those points would be) and its own predictive at ``x_n``. ``options`` go to ``fit``.
    Returns None, having done one refit, when N times that refit's time exceeds
    ``max_seconds``. Warns (``NumericalWarning``) when refits did not converge."""
    from .api import fit, predict

    method = post.attrs["method"]
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    N = t.size
    out = np.empty(N)
    failed = 0
    bar = None
    if show_progress(progressbar):
        from tqdm.auto import tqdm

        bar = tqdm(total=N, desc=f"LOO refits ({method})", unit="fit")
    seed = int(post.attrs.get("seed", -1))
    with warnings.catch_warnings():  # one summary below instead of a warning per refit
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        for n in range(N):
            rows = np.arange(N) != n
            sub = fit(training_problem(post, rows), method,
                      seed=None if seed < 0 else seed, **options)
            out[n] = float(predict(sub, X[n:n + 1]).logpdf(t[n:n + 1])[0])
            if n == 0 and N * (time.perf_counter() - start) > max_seconds:
                if bar is not None:
                    bar.close()
                return None
            failed += not int(sub.attrs.get("converged", 1))
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    if failed:
        warn_user(f"{failed} of {N} leave-one-out refits did not converge; their predictive "
                  "densities are those of the last iterate", NumericalWarning)
    return out


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


def _hyperparameters(post):
    """Draws (S, ...) of the hyperparameters the Gaussian LOO needs: RVM ``(alpha, beta)``,
    GP ``(length_scale, signal_sd, noise_sd)``; type-II ML results give one draw."""
    if post.attrs["problem_kind"] == "gp":
        ls, sf, sn = hyperparameter_draws(post)
        return (ls[:1], sf[:1], sn[:1]) if post.attrs["method"] == "evidence" else (ls, sf, sn)
    if "gaussian_posterior" in post.children:
        g = post["gaussian_posterior"]
        return g["alpha"].values[None], np.array([float(g["beta"])])
    return flat_draws(post, "alpha"), beta_draws(post)


def _gaussian_loo(post) -> np.ndarray:
    """(S, N) ``log p(t_n | t_-n, theta_s)`` for each hyperparameter draw of ``post``."""
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    if post.attrs["problem_kind"] == "gp":
        return gp_loo_logpdf(X, t, *_hyperparameters(post))
    from .predictive.regression import design

    return gaussian_loo_logpdf(design(post, X), t, *_hyperparameters(post))


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


def _in_sample_lppd(post) -> np.ndarray:
    from .api import predict

    return predict(post, post["constant_data"]["X"].values).logpdf(
        post["observed_data"]["t"].values)


def loo(post: xr.DataTree, estimator: str | None = None, *, pointwise: bool = True,
        max_seconds: float = REFIT_SECONDS, progressbar: bool | None = None, **options):
    """Leave-one-out ``elpd`` of a fitted result by the estimator right for its method (see
    the module docstring), as an ArviZ ``ELPDDataLOO`` (``elpd_i`` on dim ``obs``);
    ``az.compare`` takes a dict of them.

    estimator : None (the method's own), "psis" (sampled results), "refit" (type-II ML,
        exact) or "gaussian" (type-II ML at the fitted hyperparameters: optimistic).
    max_seconds : with ``estimator=None`` a type-II ML result is refitted N times when N
        times the first refit's time is within this; otherwise "gaussian" with a warning
        saying so. ``estimator="refit"`` always refits.
    options : passed to the refits' ``fit`` (e.g. ``max_iter``).
    """
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError(f"post must be a DataTree returned by sparsebayes.inference.fit, got "
                        f"{type(post).__name__}")
    kind, method = post.attrs["problem_kind"], post.attrs.get("method")
    sampled = method in SAMPLED_METHODS and kind in ("regression", "gp", "classification")
    point = (kind == "regression" and method in POINT_METHODS) or (
        kind == "gp" and method == "evidence")
    if not (sampled or point):
        raise ValueError(
            f"no leave-one-out estimator for a {kind} {method!r} result: the Laplace / "
            "variational classifiers have no closed-form LOO and their refits are not "
            "implemented (az.loo(post) would hold the hyperparameters fitted to all points)")
    allowed = ("psis",) if sampled else ("refit", "gaussian")
    if estimator not in (None, *allowed):
        raise ValueError(f"estimator must be one of {allowed} for a {kind} {method!r} result, "
                         f"got {estimator!r}")
    if sampled:
        estimator = "psis"
    start = time.perf_counter()
    elpd_i = None
    if sampled and kind == "classification":
        import arviz_stats as azs

        res = azs.loo(post, pointwise=pointwise)
    elif sampled:
        res = _psis(post, _gaussian_loo(post), pointwise)
    elif estimator in (None, "refit"):
        elpd_i = refit_loo_logpdf(post, progressbar=progressbar, **options,
                                  max_seconds=max_seconds if estimator is None else np.inf)
        if elpd_i is None:
            n = post["observed_data"]["t"].size
            warn_user(
                f"exact leave-one-out needs {n} refits (~{time.perf_counter() - start:.2g} s "
                f"each, over max_seconds={max_seconds:g} in all): using the Gaussian LOO at the "
                "hyperparameters fitted to all points instead, which is optimistic (alpha, "
                "beta and the pruning are not refitted). Pass estimator='refit' or a larger "
                "max_seconds to refit.", NumericalWarning)
    if point:
        estimator = "refit" if elpd_i is not None else "gaussian"
        if elpd_i is None:
            elpd_i = _gaussian_loo(post)[0]
        res = _elpd_data(post, elpd_i, _in_sample_lppd(post), pointwise)
    res.estimator = estimator
    res.seconds = time.perf_counter() - start
    return res


def loo_compare(posts: Mapping[str, xr.DataTree], **kwargs):
    """``az.compare`` of ``{name: result}`` by :func:`loo` of each (``ELPDData`` values are
    taken as they are); ``kwargs`` go to ``az.compare`` (e.g. ``method``)."""
    import arviz_stats as azs
    from arviz_stats.utils import ELPDData

    if not isinstance(posts, Mapping) or len(posts) < 2:
        raise ValueError("posts must be a mapping of at least two {name: result}")
    return azs.compare({k: v if isinstance(v, ELPDData) else loo(v) for k, v in posts.items()},
                       **kwargs)
