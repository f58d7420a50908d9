"""Gaussian process regression (SE-ARD covariance): type-II ML of the hyperparameters,
NUTS through the ``pm.gp.Marginal`` model, and the closed-form predictive; with inducing
inputs, type-II ML of Titsias's (2009) bound and its predictive (:mod:`.sparse`).

Equations are Rasmussen & Williams (2006): the log marginal likelihood (GPML eqs. 2.30, 5.8), its
gradient (GPML eq. 5.9), and the predictive (Algorithm 2.1). The type-II ML objective is the
closed form with analytic gradients, minimised by SciPy's L-BFGS-B from several starts. The
same objective built by PyTensor from the ``pm.gp.Marginal`` model (:func:`pytensor_objective`)
gives the same values and gradients but is slower (compile time; see
``benchmarks/bench_predictive.py``), so it is offered as ``backend="pytensor"`` only.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from scipy import linalg

from sparsebayes.models import ConvergenceWarning, NumericalWarning
from sparsebayes.models.gp import GPRegression, se_ard_covariance

from .. import samplers
from ..contract import refit_options
from ..numerics import (
    LOG_2PI,
    check_positive_int,
    check_rows_out,
    cholesky_inverse,
    gaussian_draws,
    one_blas_thread,
    show_progress,
    warn_user,
)
from ..predictive.regression import (
    MixturePredictive,
    Predictive,
    check_new_inputs,
    draw_index,
)
from ..results import datatree, gaussian_log_likelihood, is_result_of, pointwise_budget_ok
from . import type2
from .sparse import VFEBound, VFEPosterior
from .type2 import FTOL, GTOL

__all__ = [
    "log_marginal_likelihood",
    "gp_moments",
    "fit_evidence",
    "optimise",
    "fit_nuts",
    "predict_gp",
    "sparse_posterior",
    "pytensor_objective",
    "GPRefits",
]

# bounds of the hyperparameters, relative to the sd of each input / of the targets
LS_BOUNDS = (1e-3, 1e5)
SIGNAL_BOUNDS = (1e-3, 1e3)
NOISE_BOUNDS = (1e-4, 1e2)
POINT_DRAWS = 1000  # latent draws behind the log_likelihood of point hyperparameters
#: learned inducing inputs: type-II ML stops once ``INDUCING_STALL[0]`` L-BFGS-B iterations
#: raised the bound by less than ``INDUCING_STALL[1]`` nats per training point in all (over
#: the M x d more parameters the bound keeps rising slowly for hundreds of iterations)
INDUCING_STALL = (10, 1e-2)
INDUCING_MEMORY = 100  # L-BFGS-B's correction pairs over those parameters (SciPy's default 10)
INDUCING_EVALUATIONS = 70  # objective evaluations of one such start, typically


def _split(theta: np.ndarray, d: int) -> tuple[np.ndarray, float, float]:
    return np.exp(theta[:d]), float(np.exp(theta[d])), float(np.exp(theta[d + 1]))


def _lml_and_grad(theta: np.ndarray, Xc: np.ndarray, t: np.ndarray, grad: bool = True):
    """Log marginal likelihood (GPML eq. 5.8) at ``theta = (ln length_scale, ln signal_sd,
    ln noise_sd)`` and its gradient (GPML eq. 5.9: ``1/2 tr((a a^T - K^-1) dK/dtheta)``).

    ``Xc`` are the (centred) inputs; the length scales' and signal sd's terms by
    :func:`~.type2.se_ard_gradient` with ``W = a a^T - K^-1``.
    Raises ``LinAlgError`` if K is not numerically positive definite.
    """
    n, d = Xc.shape
    ls, sf, sn = _split(theta, d)
    Z = Xc / ls
    Kf = se_ard_covariance(Z, None, 1.0, sf)
    K = Kf.copy()
    K[np.diag_indices(n)] += sn**2
    L = linalg.cholesky(K, lower=True, check_finite=False)
    a = linalg.cho_solve((L, True), t, check_finite=False)
    lml = -0.5 * (t @ a) - np.sum(np.log(np.diag(L))) - 0.5 * n * LOG_2PI
    if not grad:
        return lml
    W = np.outer(a, a) - cholesky_inverse(L)
    g_ls, g_sf = type2.se_ard_gradient(W * Kf, Z)
    g_sn = sn**2 * np.trace(W)
    return lml, np.concatenate([g_ls, [g_sf, g_sn]])


def log_marginal_likelihood(X, t, length_scale, signal_sd: float, noise_sd: float) -> float:
    """``ln N(t | 0, K_f + noise_sd^2 I)`` with the SE-ARD ``K_f`` (GPML eq. 2.30)."""
    X = np.asarray(X, dtype=float)
    ls = np.broadcast_to(np.asarray(length_scale, dtype=float), (X.shape[1],))
    theta = np.log(np.concatenate([ls, [signal_sd, noise_sd]]))
    return float(_lml_and_grad(theta, X - X.mean(axis=0), np.asarray(t, float), grad=False))


def gp_moments(X, t, X_new, length_scale, signal_sd: float, noise_sd: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and variance of a noisy target ``y_*`` (R&W Algorithm 2.1):
    ``m = k_*^T K^-1 t``, ``v = k(x_*, x_*) - k_*^T K^-1 k_* + noise_sd^2``."""
    X, X_new = np.asarray(X, float), np.asarray(X_new, float)
    K = se_ard_covariance(X, None, length_scale, signal_sd)
    K[np.diag_indices_from(K)] += noise_sd**2
    L = linalg.cholesky(K, lower=True, check_finite=False)
    a = linalg.cho_solve((L, True), np.asarray(t, float), check_finite=False)
    Ks = se_ard_covariance(X, X_new, length_scale, signal_sd)
    V = linalg.solve_triangular(L, Ks, lower=True, check_finite=False)
    mean = Ks.T @ a
    var = signal_sd**2 - np.einsum("ij,ij->j", V, V) + noise_sd**2
    return mean, np.maximum(var, noise_sd**2)


def latent_draws(X, t, X_new, length_scale, signal_sd, noise_sd, per: int,
                 rng: np.random.Generator) -> np.ndarray:
    """``per`` joint draws of the latent ``f`` at ``X_new`` for each hyperparameter draw
    ``s`` (``length_scale`` (S, d), ``signal_sd`` and ``noise_sd`` (S,)), shape (S, per, m):
    ``f ~ N(K*^T (K + s^2 I)^-1 t, K** - K*^T (K + s^2 I)^-1 K*)`` (R&W eqs. 2.23-2.24)."""
    out = np.empty((length_scale.shape[0], per, X_new.shape[0]))
    for s in range(length_scale.shape[0]):
        K = se_ard_covariance(X, None, length_scale[s], signal_sd[s])
        K[np.diag_indices_from(K)] += noise_sd[s] ** 2
        L = linalg.cholesky(K, lower=True, check_finite=False)
        Ks = se_ard_covariance(X, X_new, length_scale[s], signal_sd[s])
        V = linalg.solve_triangular(L, Ks, lower=True, check_finite=False)
        mean = Ks.T @ linalg.cho_solve((L, True), t, check_finite=False)
        cov = se_ard_covariance(X_new, None, length_scale[s], signal_sd[s]) - V.T @ V
        out[s] = gaussian_draws(mean, cov, per, rng)
    return out


def hyperparameter_draws(post: xr.DataTree):
    """(length_scale (S, d), signal_sd (S,), noise_sd (S,)) of a GP regression result; S = 1
    for point hyperparameters (type-II ML), whatever the latent draws they condition."""
    ds = post["posterior"]
    d = post["constant_data"]["X"].shape[1]
    S = 1 if post.attrs.get("hyperparameters") == "point" else None
    return (ds["length_scale"].values.reshape(-1, d)[:S],
            ds["signal_sd"].values.reshape(-1)[:S], ds["noise_sd"].values.reshape(-1)[:S])


def sparse_posterior(post: xr.DataTree) -> VFEPosterior | None:
    """The sparse GP's posterior of a result fitted with inducing inputs (constant_data
    ``Z``), None for the exact GP."""
    if "Z" not in post["constant_data"]:
        return None
    ls, sf, sn = hyperparameter_draws(post)
    return VFEPosterior(post["constant_data"]["X"].values, post["observed_data"]["t"].values,
                        post["constant_data"]["Z"].values, ls[0], sf[0], sn[0])


def target_replicates(post: xr.DataTree, X_new: np.ndarray, rng: np.random.Generator,
                      draws: int = 1000) -> np.ndarray:
    """One joint draw of the noisy targets at ``X_new`` per hyperparameter draw, (chain, draw,
    n): :func:`latent_draws` (the sparse GP's :meth:`VFEPosterior.latent_draws`) plus noise.
    Point hyperparameters (type-II ML) give ``draws`` replicates, split over the posterior's
    chains."""
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    ls, sf, sn = hyperparameter_draws(post)
    per = draws if ls.shape[0] == 1 else 1
    sparse = sparse_posterior(post)
    f = (sparse.latent_draws(X_new, per, rng)[None] if sparse is not None
         else latent_draws(X, t, X_new, ls, sf, sn, per, rng))
    out = f + sn[:, None, None] * rng.standard_normal(f.shape)
    return out.reshape(post["posterior"].sizes["chain"], -1, X_new.shape[0])


# --------------------------------------------------------------------------------------------
# Type-II maximum likelihood
# --------------------------------------------------------------------------------------------


def _bounds(X: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bounds of the full log-parameter vector and the log data scales (input sds, sd(t)
    twice) they are relative to."""
    d = X.shape[1]
    sx = X.std(axis=0)
    st = float(np.std(t))
    scale = np.concatenate([np.where(sx > 0, sx, 1.0), [st, st]])
    lo = np.log(scale * np.array([LS_BOUNDS[0]] * d + [SIGNAL_BOUNDS[0], NOISE_BOUNDS[0]]))
    hi = np.log(scale * np.array([LS_BOUNDS[1]] * d + [SIGNAL_BOUNDS[1], NOISE_BOUNDS[1]]))
    return lo, hi, np.log(scale)


def _layout(problem: GPRegression):
    """Fixed values (NaN = free) of the full log-parameter vector, and the bounds."""
    d = problem.n_features
    fixed = np.full(d + 2, np.nan)
    if problem.length_scale is not None:
        fixed[:d] = np.log(problem.length_scale)
    if problem.signal_sd is not None:
        fixed[d] = np.log(problem.signal_sd)
    if problem.noise_sd is not None:
        fixed[d + 1] = np.log(problem.noise_sd)
    return (fixed, *_bounds(problem.X, problem.t))


def _starts(problem: GPRegression, restarts: int, rng: np.random.Generator) -> np.ndarray:
    """First start: length-scales = input sds, signal and noise sd = sd(t) (scikit-learn's
    default start on standardised data);
    the others log-uniform around it (length-scales 0.3-10 x, signal 0.3-3 x, noise
    0.03-1 x the data scales)."""
    d = problem.n_features
    _, _, _, log_scale = _layout(problem)
    first = log_scale.copy()
    out = [first]
    for _ in range(restarts - 1):
        u = np.concatenate([rng.uniform(np.log(0.3), np.log(10.0), d),
                            rng.uniform(np.log(0.3), np.log(3.0), 1),
                            rng.uniform(np.log(0.03), np.log(1.0), 1)])
        out.append(log_scale + u)
    return np.array(out)


def pytensor_objective(problem: GPRegression):
    """``theta -> (lml, gradient)`` compiled by PyTensor from the ``pm.gp.Marginal`` model
    (:func:`~sparsebayes.models.gp.gp_model`, no jitter), on the same full log-parameter
    vector as the closed form. Only the observed term (the marginal likelihood) is used:
    the priors and Jacobians of the sampling model are left out."""
    import pytensor
    import pytensor.tensor as pt

    model, _ = problem.pymc_model(jitter=0.0)
    d = problem.n_features
    value_vars = {v.name: v for v in model.value_vars}
    logp = model.logp(vars=[model["t"]], jacobian=False, sum=True)
    theta = pt.dvector("theta")
    parts = {"length_scale_log__": theta[:d], "signal_sd_log__": theta[d],
             "noise_sd_log__": theta[d + 1]}
    replace = {value_vars[k]: (v if value_vars[k].ndim else v.reshape(()))
               for k, v in parts.items() if k in value_vars}
    lml = pytensor.graph.graph_replace(logp, replace)
    fn = pytensor.function([theta], [lml, pt.grad(lml, theta, disconnected_inputs="ignore")],
                           on_unused_input="ignore")

    def f(theta_value):
        try:
            value, g = fn(np.asarray(theta_value, dtype=float))
        except Exception as err:  # Cholesky failure inside the graph
            raise linalg.LinAlgError(str(err)) from err
        if not np.isfinite(value):
            raise linalg.LinAlgError("the GP covariance is not positive definite")
        return float(value), np.asarray(g, dtype=float)

    return f


def optimise(problem: GPRegression, *, seed, restarts: int, max_iter: int,
             backend: str = "numpy"):
    """Type-II ML's best log hyperparameters ``(ln length_scale, ln signal_sd, ln noise_sd)``
    and every start's run (:func:`~.type2.maximise`): the log marginal likelihood (GPML eq.
    5.8), or Titsias's (2009) bound (eq. 9) with inducing inputs; learned inducing inputs
    (shifted by the inputs' mean, as the objective takes them) follow in ``theta``."""
    from ..progress import Evaluations, describe

    fixed, lo, hi, _ = _layout(problem)
    starts = _starts(problem, restarts, np.random.default_rng(seed))
    stall, memory = None, {}
    expected = type2.TYPICAL_EVALUATIONS + int(np.isnan(fixed).sum())
    if problem.inducing is not None:
        shift = problem.X.mean(axis=0)
        Xc, Zc = problem.X - shift, problem.inducing - shift
        objective = VFEBound(Xc, problem.t, Zc, learn_inducing=problem.learn_inducing)
        if problem.learn_inducing:  # the shifted inducing inputs follow, unbounded
            m = Zc.size
            fixed = np.r_[fixed, np.full(m, np.nan)]
            lo, hi = np.r_[lo, np.full(m, -np.inf)], np.r_[hi, np.full(m, np.inf)]
            starts = np.hstack([starts, np.tile(Zc.ravel(), (starts.shape[0], 1))])
            stall = (INDUCING_STALL[0], INDUCING_STALL[1] * problem.t.size)
            memory, expected = {"maxcor": INDUCING_MEMORY}, INDUCING_EVALUATIONS
    elif backend == "numpy":
        Xc = problem.X - problem.X.mean(axis=0)
        objective = lambda theta: _lml_and_grad(theta, Xc, problem.t)
    else:
        objective = pytensor_objective(problem)
    progress = Evaluations(f"type-II ML of {describe(problem)}", expected * restarts)

    def reported(theta):
        value, g = objective(theta)
        progress.update(value)
        return value, g

    return type2.maximise(lambda: reported, fixed, lo, hi, starts, max_iter=max_iter,
                          stall=stall, **memory)


def _gp_datatree(problem: GPRegression, posterior: dict, attrs: dict,
                 sample_stats: dict | None = None, seed: int | None = None,
                 inducing: np.ndarray | None = None) -> xr.DataTree:
    """The result layout. ``log_likelihood``: ``log N(t_n | f_n, noise_sd^2)`` for draws of
    the latent ``f`` at the training inputs (:func:`latent_draws`; PSIS-LOO on it estimates
    the GP's exact leave-one-out predictive, R&W eqs. 5.10-5.12), ``POINT_DRAWS`` of them for
    point hyperparameters (kept in ``posterior`` as ``f``), one per hyperparameter draw
    otherwise. ``inducing``: a sparse GP's fitted inducing inputs (the problem's by
    default; learned ones keep the problem's as ``Z_start``)."""
    if inducing is None:
        inducing = problem.inducing
    n, d = problem.X.shape
    ls = posterior["length_scale"].reshape(-1, d)
    sf, sn = posterior["signal_sd"].reshape(-1), posterior["noise_sd"].reshape(-1)
    per = POINT_DRAWS if ls.shape[0] == 1 else 1
    # point hyperparameters: two chains of latent draws, so R-hat is defined
    shape = (2, per // 2, n) if per > 1 else (*posterior["signal_sd"].shape, n)
    groups = {"posterior": posterior}
    fixed = [k for k in ("length_scale", "signal_sd", "noise_sd")
             if getattr(problem, k) is not None]
    attrs = {
        "problem_kind": GPRegression.kind,
        "covariance": "se_ard",
        "fixed": " ".join(fixed),
        **attrs,
    }
    if inducing is not None:
        attrs.update(inducing=inducing.shape[0], approximation="vfe")
    if pointwise_budget_ok(shape[0], shape[1], n):
        rng = np.random.default_rng(seed)
        f = (VFEPosterior(problem.X, problem.t, inducing, ls[0], sf[0], sn[0])
             .latent_draws(problem.X, per, rng)[None] if inducing is not None
             else latent_draws(problem.X, problem.t, problem.X, ls, sf, sn, per, rng))
        groups["log_likelihood"] = {
            "t": gaussian_log_likelihood(problem.t, f, 1.0 / sn[:, None] ** 2).reshape(shape)}
        if per > 1:  # point hyperparameters: the latent draws they condition, as a GP
            # classifier's (their values repeated over the draws, stated as point values)
            groups["posterior"] = {"f": f.reshape(shape), **{
                k: np.broadcast_to(v, (*shape[:2], *v.shape[2:])).copy()
                for k, v in posterior.items()}}
    else:
        attrs["log_likelihood_omitted"] = "size"  # more values than POINTWISE_MAX
    groups["observed_data"] = {"t": problem.t}
    groups["constant_data"] = {"X": problem.X}
    coords = {"feature": np.arange(d), "obs": np.arange(n)}
    if inducing is not None:
        groups["constant_data"]["Z"] = inducing
        coords["inducing"] = np.arange(inducing.shape[0])
    if problem.learn_inducing:
        groups["constant_data"]["Z_start"] = problem.inducing
    if sample_stats:
        groups["sample_stats"] = sample_stats
    return datatree(groups, coords=coords,
                    dims={"length_scale": ["feature"], "f": ["obs"], "X": ["obs", "feature"],
                          "Z": ["inducing", "feature"], "Z_start": ["inducing", "feature"],
                          "t": ["obs"]},
                    attrs=attrs)


def fit_evidence(problem: GPRegression, *, seed: int | None = None, restarts: int = 3,
                 max_iter: int = 1000, backend: str = "numpy") -> xr.DataTree:
    """Type-II ML: maximise the log marginal likelihood (GPML eq. 5.8) over the free
    hyperparameters in log space by L-BFGS-B with analytic gradients (GPML eq. 5.9), from
    ``restarts`` starting points (the first from the data scales, the others drawn with
    ``seed``); the best optimum is kept. With inducing inputs, Titsias's (2009) bound (eq.
    9, :func:`~.sparse.vfe_bound_and_grad`) in its place: attrs ``log_evidence`` is then the
    bound, below the log marginal likelihood.

    ``backend``: "numpy" (closed form, default) or "pytensor" (the gradient of the
    ``pm.gp.Marginal`` model, :func:`pytensor_objective`).
    The posterior group holds the point estimates as one chain of one draw.
    """
    if not isinstance(problem, GPRegression):
        raise TypeError(f"expected a GPRegression, got {type(problem).__name__}")
    restarts = check_positive_int("restarts", restarts)
    max_iter = check_positive_int("max_iter", max_iter)
    if backend not in ("numpy", "pytensor"):
        raise ValueError(f"backend must be 'numpy' or 'pytensor', got {backend!r}")
    start = time.perf_counter()
    with one_blas_thread():
        theta, runs = optimise(problem, seed=seed, restarts=restarts, max_iter=max_iter,
                                backend=backend)
    lmls = np.array([r[1] for r in runs])
    if not np.isfinite(lmls).any() or np.max(lmls) <= -type2.FAILED / 2:
        raise linalg.LinAlgError("the GP covariance was not positive definite at any start")
    converged = any(r[2] for r in runs)
    if not converged:
        warn_user(f"type-II ML did not converge from any of {len(runs)} starts in "
                  f"max_iter={max_iter} L-BFGS-B iterations; the best iterate is kept "
                  "(converged=False)", ConvergenceWarning)
    d = problem.n_features
    ls, sf, sn = _split(theta, d)
    fixed, lo, hi, _ = _layout(problem)
    at_bound = np.isnan(fixed) & ((theta[:d + 2] <= lo + 1e-6) | (theta[:d + 2] >= hi - 1e-6))
    if at_bound[d + 1]:
        warn_user(f"the noise sd ({sn:.3g}) reached a bound of its range "
                  f"{NOISE_BOUNDS} x sd(t)", NumericalWarning)
    post = {
        "length_scale": ls[None, None, :],
        "signal_sd": np.full((1, 1), sf),
        "noise_sd": np.full((1, 1), sn),
    }
    attrs = {
        "log_evidence": float(np.max(lmls)),  # GPML eq. 5.8, every evidence result's name
        **({} if problem.inducing is not None else
           {"log_marginal_likelihood": float(np.max(lmls))}),
        "restart_log_marginal_likelihood": lmls,
        "converged": int(converged),
        "n_iter": int(sum(r[3] for r in runs)),
        "restarts": len(runs),
        "backend": backend,
        "optimise_seconds": time.perf_counter() - start,
        "hyperparameters": "point",
    }
    inducing = problem.inducing
    if problem.learn_inducing:
        inducing = theta[d + 2:].reshape(inducing.shape) + problem.X.mean(axis=0)
        attrs["learn_inducing"] = 1
    return _gp_datatree(problem, post, attrs, seed=seed, inducing=inducing)


def fit_nuts(problem: GPRegression, *, seed: int | None = None, sampler: str = "nutpie",
             draws: int = 1000, tune: int = 1000, chains: int = 2, cores: int | None = None,
             target_accept: float = 0.9, warn: bool = True,
             progressbar: bool | None = None) -> xr.DataTree:
    """Posterior of the hyperparameters by NUTS on the ``pm.gp.Marginal`` model
    (:func:`~sparsebayes.models.gp.gp_model`, proper data-scaled priors); predictions then
    average the GP predictive over the draws (:func:`predict_gp`). ``progressbar`` as in
    :func:`~sparsebayes.inference.rvm.pymc.fit_nuts`."""

    if not isinstance(problem, GPRegression):
        raise TypeError(f"expected a GPRegression, got {type(problem).__name__}")
    draws = check_positive_int("draws", draws)
    chains = check_positive_int("chains", chains)
    if sampler not in samplers.SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {samplers.SAMPLERS}")
    tune = samplers.check_tune(tune, sampler)
    if not (isinstance(target_accept, float | int) and 0 < target_accept < 1):
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
    cores = min(chains, 2) if cores is None else check_positive_int("cores", cores)
    if problem.inducing is not None:
        raise ValueError("method 'nuts' samples the exact GP (pm.gp.Marginal, O(N^3) per "
                         "step); a sparse GP (inducing=...) is fitted by 'evidence'")
    free = [k for k in ("length_scale", "signal_sd", "noise_sd") if getattr(problem, k) is None]
    if not free:
        raise ValueError("every hyperparameter is fixed: there is nothing to sample")
    model, _ = problem.pymc_model(jitter=0.0)
    key = ("gp", *problem.X.shape, *free)
    seed_int = int(np.random.default_rng(seed).integers(2**31 - 1))
    with one_blas_thread():
        post_ds, stats, t_compile, t_sample = samplers.run_sampler(
            model, sampler, draws=draws, tune=tune, chains=chains, cores=cores,
            seed=seed_int, target_accept=float(target_accept), key=key,
            progressbar=show_progress(progressbar))
    shape = (chains, draws)
    d = problem.n_features
    post = {}
    for k in ("length_scale", "signal_sd", "noise_sd"):
        if k in free:
            post[k] = post_ds[k].values
        else:
            value = np.asarray(getattr(problem, k), dtype=float)
            post[k] = np.broadcast_to(value, (*shape, d) if k == "length_scale" else shape
                                      ).copy()
    attrs = {
        "sampler": sampler, "draws": draws, "tune": tune, "chains": chains,
        "target_accept": float(target_accept), "compile_time": t_compile,
        "sampling_time": t_sample,
        "hyperparameters": "sampled",
    }
    dt = _gp_datatree(problem, post, attrs, sample_stats=stats, seed=seed)
    diag = samplers.diagnose(dt, tuple(free), warn=warn)
    dt.attrs.update(n_divergent=diag["n_divergent"], max_rhat=diag["max_rhat"],
                    min_ess_bulk=diag["min_ess_bulk"], min_ess_tail=diag["min_ess_tail"],
                    converged=int(diag["ok"]))
    return dt


# --------------------------------------------------------------------------------------------
# Predictive
# --------------------------------------------------------------------------------------------


def predict_gp(post: xr.DataTree, X_new, max_draws: int | None = 500
               ) -> Predictive | MixturePredictive:
    """GP predictive of noisy targets at ``X_new`` (R&W Algorithm 2.1). Point
    hyperparameters (type-II ML) give a :class:`Predictive`; hyperparameter draws (NUTS)
    give the mixture of the per-draw predictives over at most ``max_draws`` draws."""
    if post.attrs.get("problem_kind") != GPRegression.kind:
        raise ValueError(f"kind='gp' needs a GP posterior, got a "
                         f"{post.attrs.get('problem_kind')} posterior")
    X_new = check_new_inputs(post, X_new)
    sparse = sparse_posterior(post)
    if sparse is not None:  # Titsias (2009) eq. 6 plus the noise
        mean, var = sparse.moments(X_new)
        return Predictive(mean=mean, var=var, kind="gp")
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    ls, sf, sn = hyperparameter_draws(post)
    if ls.shape[0] == 1:
        mean, var = gp_moments(X, t, X_new, ls[0], sf[0], sn[0])
        return Predictive(mean=mean, var=var, kind="gp")
    keep = draw_index(ls.shape[0], max_draws)
    moments = [gp_moments(X, t, X_new, ls[s], sf[s], sn[s]) for s in keep]
    return MixturePredictive(np.array([m for m, _ in moments]),
                             np.array([v for _, v in moments]), kind="gp")


# --------------------------------------------------------------------------------------------
# Refits without some rows (exact leave-one-out, K-fold)
# --------------------------------------------------------------------------------------------


class GPRefits:
    """Warm-started type-II ML refits of a GP regression ``evidence`` result without some
    rows (Rasmussen & Williams 2006, §5.4.1), for exact leave-one-out and K-fold
    cross-validation.

    A refit maximises the other rows' log marginal likelihood (GPML eq. 5.8, gradient eq.
    5.9) from the full-data optimum, within the bounds a fit of those rows would use (they
    are relative to its data scales); fixed hyperparameters stay fixed. The search is
    projected Newton with the full-data Hessian (central differences of eq. 5.9, computed
    once, scaled to the other rows' count, then BFGS-updated): a row moves the optimum by
    O(1/N), which a step with that Hessian leaves O(1/N^2) from it, so a refit takes a few
    factorisations, several times fewer than L-BFGS-B from the same start. It stops by the
    fit's rules (:func:`fit_evidence`'s L-BFGS-B ``gtol`` on the projected gradient, or
    ``ftol`` on the relative gain of the next step), and falls back to one L-BFGS-B run
    from its best point if a step fails to ascend. The predictive at a left-out row is the
    fit's (GPML eqs. 2.25-2.26 plus the noise, :func:`gp_moments`).

    ``max_iter``: L-BFGS-B iterations of a fallback run; default, the fit's (as passed to
    it, else :func:`fit_evidence`'s default).
    """

    NEWTON_STEPS = 20
    NEWTON_STEP_MAX = 1.0  # the largest quasi-Newton step in any log hyperparameter
    NEWTON_HALVINGS = 4  # a step that lowers the objective is halved this often
    FD_STEP = 1e-4  # central-difference step of the Hessian, in log hyperparameters

    def __init__(self, post: xr.DataTree, *, max_iter: int | None = None) -> None:
        if not is_result_of(post, GPRegression, "evidence"):
            raise TypeError("post must be a GPRegression 'evidence' result of "
                            "sparsebayes.inference.fit")
        self.max_iter = check_positive_int(
            "max_iter", refit_options(post, fit_evidence, max_iter=max_iter)["max_iter"])
        self.X = np.asarray(post["constant_data"]["X"].values, dtype=float)
        self.t = np.asarray(post["observed_data"]["t"].values, dtype=float)
        ls, sf, sn = hyperparameter_draws(post)
        self.theta0 = np.log(np.concatenate([ls[0], [sf[0], sn[0]]]))
        d = self.X.shape[1]
        names = post.attrs.get("fixed", "").split()
        self.free = np.array([name not in names for name in ("length_scale",) * d
                              + ("signal_sd", "noise_sd")])
        self.fixed = np.where(self.free, np.nan, self.theta0)
        self.hessian = self._hessian()

    def _hessian(self) -> np.ndarray | None:
        """The full-data Hessian of GPML eq. 5.8 over the free entries at the optimum, by
        central differences of eq. 5.9; None if it is not negative definite there."""
        idx = np.flatnonzero(self.free)
        if idx.size == 0:
            return None
        Xc = self.X - self.X.mean(axis=0)
        H = np.empty((idx.size, idx.size))
        try:
            with one_blas_thread():
                for j, i in enumerate(idx):
                    e = np.zeros_like(self.theta0)
                    e[i] = self.FD_STEP
                    H[:, j] = (_lml_and_grad(self.theta0 + e, Xc, self.t)[1][idx]
                               - _lml_and_grad(self.theta0 - e, Xc, self.t)[1][idx])
            H = 0.5 * (H + H.T) / (2 * self.FD_STEP)
            linalg.cholesky(-H)
        except linalg.LinAlgError:
            return None
        return H

    def _newton(self, objective, theta: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                H: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Projected quasi-Newton ascent from ``theta`` with ``H`` (free entries) as the
        first Hessian and BFGS updates (Nocedal & Wright 2006, eq. 6.19), each step at most
        ``NEWTON_STEP_MAX`` in every entry (along a nearly flat length scale the Newton step
        is huge) and halved up to ``NEWTON_HALVINGS`` times while it descends:
        ``(theta, lml, converged)``; converged False, at the best point, when no step
        ascended."""
        idx = np.flatnonzero(self.free)
        best, best_f, best_g = theta, -np.inf, None
        step, halvings = None, 0
        for _ in range(self.NEWTON_STEPS):
            try:
                f, g = objective(theta)
            except linalg.LinAlgError:
                f, g = -np.inf, None
            if not f > best_f - FTOL * max(abs(best_f), 1.0):
                if step is None or halvings == self.NEWTON_HALVINGS:
                    break
                step, halvings = 0.5 * step, halvings + 1
                theta = best.copy()
                theta[idx] = np.clip(best[idx] + step, lo[idx], hi[idx])
                continue
            g = g[idx]
            tol = FTOL * max(abs(f), 1.0)
            halvings = 0
            if best_g is not None:  # BFGS update of -H from the secant pair
                s_, y_ = theta[idx] - best[idx], best_g - g
                Bs = -H @ s_
                if s_ @ y_ > 1e-10 * np.linalg.norm(s_) * np.linalg.norm(y_):
                    H = H - np.outer(y_, y_) / (s_ @ y_) + np.outer(Bs, Bs) / (s_ @ Bs)
            gain, best, best_f, best_g = f - best_f, theta, f, g
            if gain <= tol:
                return best, best_f, True  # L-BFGS-B's relative-reduction test
            th = theta[idx]
            if np.max(np.abs(np.clip(th + g, lo[idx], hi[idx]) - th)) <= GTOL:
                return best, best_f, True  # L-BFGS-B's projected-gradient test
            # entries at a bound with the gradient pointing out stay there
            move = ~(((th <= lo[idx]) & (g < 0)) | ((th >= hi[idx]) & (g > 0)))
            step = np.zeros_like(g)
            step[move] = -np.linalg.solve(H[np.ix_(move, move)], g[move])
            if 0.5 * g @ step <= tol:
                return best, best_f, True  # the next step would gain less than ftol
            step *= min(1.0, self.NEWTON_STEP_MAX / np.max(np.abs(step)))
            theta = theta.copy()
            theta[idx] = np.clip(th + step, lo[idx], hi[idx])
        return best, best_f, False

    def optimum(self, out: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """``(theta, lml, converged)`` of the refit without rows ``out``: the log
        hyperparameters ``(ln length_scale, ln signal_sd, ln noise_sd)`` and the other rows'
        log marginal likelihood there."""
        out = check_rows_out(out, self.t.size, min_kept=2)
        keep = np.ones(self.t.size, dtype=bool)
        keep[out] = False
        X, t = self.X[keep], self.t[keep]
        Xc = X - X.mean(axis=0)
        lo, hi, _ = _bounds(X, t)
        objective = lambda th: _lml_and_grad(th, Xc, t)
        theta = np.where(self.free, np.clip(self.theta0, lo, hi), self.theta0)
        with one_blas_thread():
            if self.hessian is not None:
                theta, lml, ok = self._newton(objective, theta, lo, hi,
                                              self.hessian * (t.size / self.t.size))
                if ok:
                    return theta, lml, True
            theta, runs = type2.maximise(lambda: objective, self.fixed, lo, hi, theta[None],
                                         max_iter=self.max_iter)
        return theta, runs[0][1], runs[0][2]

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """``(log p(t_out | refit), converged)``: the refit's predictive (GPML eqs.
        2.25-2.26 plus the noise) at the left-out rows."""
        theta, _, converged = self.optimum(out)
        out = np.asarray(out)
        keep = np.ones(self.t.size, dtype=bool)
        keep[out] = False
        ls, sf, sn = _split(theta, self.X.shape[1])
        with one_blas_thread():
            mean, var = gp_moments(self.X[keep], self.t[keep], self.X[out], ls, sf, sn)
        return Predictive(mean=mean, var=var, kind="gp").logpdf(self.t[out]), bool(converged)
