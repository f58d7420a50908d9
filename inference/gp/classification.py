"""GP classification by the Laplace approximation (Rasmussen & Williams, GPML).

Two classes:

* the posterior mode of the latent ``f`` by Newton's method (GPML Algorithm 3.1) with the
  logistic likelihood, ``B = I + W^1/2 K W^1/2``, ``W = pi (1 - pi)``;
* the approximate log marginal likelihood (GPML eq. 3.32) and its gradient in the log
  hyperparameters (GPML Algorithm 5.1, including the implicit dependence of the mode);
* type-II ML of the log length scales and log signal sd by L-BFGS-B from several starts;
* the averaged predictive probability (GPML eq. 3.25, Algorithm 3.2): the logistic averaged
  over ``N(f* | mean, var)`` by Gauss-Hermite quadrature (exact to 1e-10 here).

K > 2 classes (GPML §3.5): the softmax likelihood of K independent latent GPs ``f_c`` that
share one SE-ARD covariance ``K`` (the same length scales and signal sd for every class:
D + 1 hyperparameters, as in the binary case).

* the posterior mode of the latent ``F`` (n, K) by Newton's method with the block structure
  of GPML Algorithm 3.3: per class the Cholesky factor of ``I + D_c^1/2 K D_c^1/2``
  (``D_c = diag(pi_c)``), ``E_c = D_c^1/2 B_c^-1 D_c^1/2`` and one Cholesky factor ``M`` of
  ``sum_c E_c``; never an (nK) x (nK) factorisation, O(K n^3). A step that lowers the
  objective ``Psi`` (GPML eq. 3.41) is halved;
* the approximate log marginal likelihood GPML eq. 3.44, with
  ``log|I + W^1/2 K W^1/2| = sum_c log|B_c| + log|sum_c E_c|`` (the determinant lemma with
  ``W = D - Pi Pi^T`` and ``sum_c pi_c = 1``);
* type-II ML of the D + 1 log hyperparameters by L-BFGS-B from several starts with the
  analytic gradient (the softmax form of GPML Algorithm 5.1, including the implicit
  dependence of the mode; checked against finite differences in the tests);
* the latent predictive mean and K x K covariance per test point (GPML eqs. 3.42-3.43 by
  Algorithm 3.4's block formulas) and the averaged softmax over ``f* ~ N(mu*, Sigma*)`` by
  randomised quasi-Monte Carlo (:data:`MC_SAMPLES` = 2048 scrambled Sobol points from a
  fixed seed): its error is far below the plain Monte Carlo standard error
  ``sd / sqrt(2048) <= 0.011`` per probability (checked against Gauss-Hermite quadrature in
  the tests).

Leave-one-out (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016, JMLR 17(103)): the
Laplace cavity at the fitted hyperparameters (LA-LOO, :func:`gp_laplace_cavity_logpdf`), or
exact refits of the type-II ML fit warm-started from it (:class:`GPClassificationRefits`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy import linalg
from scipy.special import expit, log_expit, log_softmax, logsumexp, softmax

from sparsebayes.models import ConvergenceWarning, GPClassification, NumericalWarning
from sparsebayes.models.gp import se_ard_covariance

from .. import samplers
from ..numerics import (
    check_positive_int,
    cholesky_inverse,
    covariance_root,
    gaussian_draws,
    one_blas_thread,
    show_progress,
    warn_user,
)
from ..predictive.classification import ClassPredictive
from ..predictive.regression import check_new_inputs
from ..results import classes_attr, datatree, is_result_of
from . import type2

__all__ = ["laplace_mode", "log_marginal_likelihood", "fit_evidence", "predict_laplace",
           "laplace_cavity", "gp_laplace_cavity_logpdf", "GPClassificationRefits"]

# search ranges, multiples of the data scales (an irrelevant input's length scale runs off
# towards infinity: its upper bound is far out, like scikit-learn's 1e5)
LS_BOUNDS = (1e-2, 1e5)
SIGNAL_BOUNDS = (1e-2, 1e3)
GH_NODES = 64
MODE_TOL = 1e-10  # the Laplace modes' relative tolerance on Psi (GPML eq. 3.12)
# L-BFGS-B's relative-decrease stop: scipy's default (2.2e-9) stops on the flat ridges of
# nearly separable data short of the optimum (the GP guide has the numbers); below MODE_TOL
# the line search meets the modes' noise
FTOL = MODE_TOL
# A type-II ML result has no log_likelihood group (attrs log_likelihood_omitted="latent"):
# PSIS-LOO over draws of the Laplace Gaussian q(f) would divide q by p(t_n | f_n), but q
# holds a Gaussian site for point n, not its likelihood; where the fit saturates (W_n ~ 0)
# q(f_n) is about the cavity and 1 / E_q[1 / p(t_n | f_n)] is the harmonic, not the
# arithmetic, mean of the likelihood over it. Its leave-one-out: the Laplace cavity
# (gp_laplace_cavity_logpdf) or exact refits (GPClassificationRefits).


@dataclass(frozen=True)
class LaplaceMode:
    """GPML Algorithm 3.1's result: ``log Z`` (GPML eq. 3.32), the mode ``f``, ``pi =
    sigma(f)``, ``sW = W^1/2``, the lower Cholesky factor ``L`` of ``B = I + W^1/2 K W^1/2``
    and ``a = t - pi`` (``= K^-1 f`` at the mode)."""

    log_z: float
    f: np.ndarray
    pi: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    a: np.ndarray


@dataclass(frozen=True)
class SoftmaxLaplaceMode:
    """GPML Algorithm 3.3's result: ``log Z`` (GPML eq. 3.44), the mode ``F`` (n, K), the
    softmax ``P`` at the mode, the blocks ``E``, ``M`` of :func:`_blocks` and ``a = K^-1 F =
    Y - P`` (GPML eq. 3.40)."""

    log_z: float
    F: np.ndarray
    P: np.ndarray
    E: np.ndarray
    M: np.ndarray
    a: np.ndarray


@dataclass(frozen=True)
class LaplaceFit:
    """What a Laplace result's predictive needs: the centred training inputs ``X`` and new
    inputs ``X_new``, the targets ``t``, the type-II ML length scales and signal sd, and the
    latent mode ``f_mode`` ((n,), or (n, K) for the softmax)."""

    X: np.ndarray
    X_new: np.ndarray
    t: np.ndarray
    length_scale: np.ndarray
    signal_sd: float
    f_mode: np.ndarray


def laplace_mode(K: np.ndarray, t: np.ndarray, f0: np.ndarray | None = None,
                 tol: float = MODE_TOL, max_iter: int = 100) -> LaplaceMode:
    """GPML Algorithm 3.1: the mode ``f`` of ``p(f | y)`` for the logistic likelihood
    (``t`` in {0, 1}), as a :class:`LaplaceMode` (``log Z`` GPML eq. 3.32).
    A Newton step that lowers ``Psi`` (GPML eq. 3.12, concave in ``f = K a``) is halved in
    ``a``; a warm start ``f0`` whose first step ends below ``Psi(0) = -n log 2`` is dropped
    for ``f = 0`` (far from the mode, saturated ``W ~ 0`` stall the undamped steps)."""
    n = t.size
    sign = 2 * t - 1
    psi0 = -n * np.log(2.0)
    if f0 is None:
        f, a_old, psi = np.zeros(n), np.zeros(n), psi0
    else:
        f, a_old, psi = np.array(f0, dtype=float), None, -np.inf
    for _ in range(max_iter):
        pi = expit(f)
        W = pi * (1 - pi)
        sW = np.sqrt(W)
        L = linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :], lower=True)
        b = W * f + (t - pi)
        c = linalg.cho_solve((L, True), sW * (K @ b))
        a = b - sW * c
        f_new = K @ a
        psi_new = -0.5 * a @ f_new + np.sum(log_expit(sign * f_new))
        if a_old is None and psi_new < psi0:
            f, a_old, psi = np.zeros(n), np.zeros(n), psi0
            continue
        for _ in range(30):
            if a_old is None or psi_new >= psi - 1e-12 * abs(psi):
                break
            a = 0.5 * (a + a_old)
            f_new = K @ a
            psi_new = -0.5 * a @ f_new + np.sum(log_expit(sign * f_new))
        f, a_old = f_new, a
        if abs(psi_new - psi) < tol * max(1.0, abs(psi_new)):
            psi = psi_new
            break
        psi = psi_new
    pi = expit(f)
    W = pi * (1 - pi)
    sW = np.sqrt(W)
    L = linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :], lower=True)
    a = t - pi  # at the mode K^-1 f = grad log p(y|f)
    log_z = -0.5 * a @ f + np.sum(log_expit(sign * f)) - np.sum(np.log(np.diag(L)))
    return LaplaceMode(float(log_z), f, pi, sW, L, a)


def _lml_and_grad(theta: np.ndarray, X: np.ndarray, t: np.ndarray, f0=None):
    """``log Z`` (GPML eq. 3.32) and its gradient in ``theta = (log length scales, log
    signal sd)`` by GPML Algorithm 5.1."""
    d = X.shape[1]
    ls, sf = np.exp(theta[:d]), float(np.exp(theta[d]))
    K = se_ard_covariance(X, None, ls, sf)
    mode = laplace_mode(K, t, f0)
    pi, sW, L, a = mode.pi, mode.sW, mode.L, mode.a
    R = sW[:, None] * cholesky_inverse(L) * sW  # W^1/2 B^-1 W^1/2
    C = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
    # GPML eq. 5.23: d log|B| / d f_hat_i = -(K^-1 + W)^-1_ii dW_ii/df_i with
    # dW/df = pi (1 - pi)(1 - 2 pi) (= -d^3 log p / df^3)
    dW = pi * (1 - pi) * (1 - 2 * pi)
    s2 = -0.5 * (np.diag(K) - np.einsum("ij,ij->j", C, C)) * dW
    # for each dK_j: s1 = (a^T dK_j a - tr(R dK_j)) / 2 and s2^T (I - K R) dK_j a = u^T dK_j a
    # with u = (I - R K) s2, so the gradient is 1/2 sum_ij W_ij dK_j,ij with
    # W = a a^T - R + u a^T + a u^T
    u = s2 - R @ (K @ s2)
    W = np.outer(a, a) - R + np.outer(u, a)
    W += np.outer(a, u)
    g_ls, g_sf = type2.se_ard_gradient(W * K, X / ls)
    return mode.log_z, np.append(g_ls, g_sf), mode.f


def log_marginal_likelihood(X, y, length_scale, signal_sd: float) -> float:
    """The Laplace log marginal likelihood (GPML eq. 3.32; eq. 3.44 for K > 2 classes) at
    fixed hyperparameters."""
    problem = GPClassification(X, y)
    K = se_ard_covariance(problem.X, None, np.broadcast_to(length_scale, (problem.n_features,)),
                          signal_sd)
    if problem.n_classes > 2:

        return softmax_laplace_mode(K, problem.t, problem.n_classes).log_z
    return laplace_mode(K, problem.t.astype(float)).log_z


def _layout(problem: GPClassification):
    return _layout_of(problem.X, problem.length_scale, problem.signal_sd)


def _layout_of(X: np.ndarray, length_scale, signal_sd):
    """The fixed log hyperparameters (NaN where free), the search bounds and the data scales
    of inputs ``X`` with ``length_scale``, ``signal_sd`` fixed (or None)."""
    d = X.shape[1]
    sx = X.std(axis=0)
    log_scale = np.log(np.concatenate([np.where(sx > 0, sx, 1.0), [1.0]]))
    fixed = np.full(d + 1, np.nan)
    if length_scale is not None:
        fixed[:d] = np.log(length_scale)
    if signal_sd is not None:
        fixed[d] = np.log(signal_sd)
    lo = log_scale + np.log([LS_BOUNDS[0]] * d + [SIGNAL_BOUNDS[0]])
    hi = log_scale + np.log([LS_BOUNDS[1]] * d + [SIGNAL_BOUNDS[1]])
    return fixed, lo, hi, log_scale


def _starts(problem, restarts: int, rng) -> np.ndarray:
    """The data scales (length scales = input sds, signal sd 1), then log-uniform
    0.3-10 x length scales and 0.3-10 x signal sd."""
    return _starts_of(_layout(problem)[3], restarts, rng)


def _starts_of(log_scale: np.ndarray, restarts: int, rng) -> np.ndarray:
    out = [log_scale]
    for _ in range(restarts - 1):
        out.append(log_scale + rng.uniform(np.log(0.3), np.log(10.0), log_scale.size))
    return np.array(out)


# K > 2 classes and STALL_MIN_N points or more (K Cholesky factors and inverses of n x n
# matrices per Newton step of every evaluation): a start ends once STALL iterations raised
# log Z by less than STALL_GAIN nats per free hyperparameter in all (1000 digits, 65
# hyperparameters: the last 0.2 nats took 100 of 180 evaluations, 6 of 12 min). Not below:
# on a flat direction (an irrelevant input's length scale running off) where the start
# stops decides where its leave-one-out refits start, and small fits are cheap to finish
STALL, STALL_GAIN, STALL_MIN_N = 10, 1e-3, 500


def _stall(problem: GPClassification, n_free: int) -> tuple[int, float] | None:
    """The stall rule of :func:`~.type2.maximise` for ``problem`` with ``n_free`` free
    hyperparameters (see ``STALL``), or None."""
    if problem.n_classes == 2 or problem.t.size < STALL_MIN_N:
        return None
    return STALL, STALL_GAIN * n_free


def type2_ml(problem: GPClassification, lml_and_grad, restarts: int, max_iter: int,
             rng: np.random.Generator):
    """Type-II ML over the free log hyperparameters (``_layout``) by
    :func:`~.type2.maximise` from each of :func:`_starts`. ``lml_and_grad(theta, mode)``
    returns the Laplace log marginal likelihood, its gradient and the mode it found, and is
    warm-started from the previous mode of the same start. Returns the best ``theta``, every
    start's ``(theta, lml, success, n_iter)`` and whether any start converged (a
    ``ConvergenceWarning`` if none did). For K > 2 classes and ``STALL_MIN_N`` points or
    more a start also ends on a stall (``STALL``, ``STALL_GAIN``)."""
    from ..progress import Evaluations, describe

    fixed, lo, hi, _ = _layout(problem)
    n_free = int(np.isnan(fixed).sum())
    progress = Evaluations(f"type-II ML of {describe(problem)}, {problem.n_classes} classes",
                           (type2.TYPICAL_EVALUATIONS + n_free) * restarts)

    def warm_started():
        mode = None

        def objective(theta):
            nonlocal mode
            value, g, mode = lml_and_grad(theta, mode)
            progress.update(value)
            return value, g

        return objective

    with one_blas_thread():
        theta, runs = type2.maximise(warm_started, fixed, lo, hi,
                                     _starts(problem, restarts, rng), max_iter=max_iter,
                                     ftol=FTOL, stall=_stall(problem, n_free))
    converged = any(r[2] for r in runs)
    if not converged:
        warn_user(f"type-II ML did not converge from any of {len(runs)} starts in "
                  f"max_iter={max_iter} iterations; the best iterate is kept "
                  "(converged=False)", ConvergenceWarning)
    return theta, runs, converged


def fit_evidence(problem: GPClassification, *, seed: int | None = None, restarts: int = 3,
                 max_iter: int = 200, draws: int = 500, chains: int = 2) -> xr.DataTree:
    """Type-II ML of the Laplace log marginal likelihood over the free log hyperparameters
    by L-BFGS-B from ``restarts`` starts; the best optimum is kept. Two classes: GPML eq.
    3.32, gradient by Algorithm 5.1; K > 2: the softmax's eq. 3.44, mode by Algorithm 3.3,
    its analytic gradient (:func:`_softmax_lml_and_grad`), length scales and signal sd
    shared by the classes. The posterior group holds ``chains`` x ``draws`` independent draws
    of the latent ``f`` (obs[, class]) at the training inputs from the Laplace Gaussian
    ``N(f_hat, (K^-1 + W)^-1)``, and the hyperparameters they condition on as point values.
    There is no ``log_likelihood`` group (attrs ``log_likelihood_omitted`` says why):
    leave-one-out is :func:`gp_laplace_cavity_logpdf` or :class:`GPClassificationRefits`."""
    if not isinstance(problem, GPClassification):
        raise TypeError(f"expected a GPClassification, got {type(problem).__name__}")
    restarts = check_positive_int("restarts", restarts)
    max_iter = check_positive_int("max_iter", max_iter)
    per_chain, chains = check_positive_int("draws", draws), check_positive_int("chains", chains)
    draws = per_chain * chains
    X, codes, C = problem.X - problem.X.mean(axis=0), problem.t, problem.n_classes
    t = codes.astype(float)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    if C > 2:
        lml = lambda theta, F0: _softmax_lml_and_grad(theta, X, codes, C, F0)
    else:
        lml = lambda theta, f0: _lml_and_grad(theta, X, t, f0)
    theta, runs, converged = type2_ml(problem, lml, restarts, max_iter, rng)
    d, n = problem.n_features, codes.size
    ls, sf = np.exp(theta[:d]), float(np.exp(theta[d]))
    K = se_ard_covariance(X, None, ls, sf)
    coords = {"feature": np.arange(d), "obs": np.arange(n)}
    attrs = {}
    if C > 2:
        mode = softmax_laplace_mode(K, codes, C)
        log_z, f_mode = mode.log_z, mode.F
        f = softmax_laplace_draws(K, mode, draws, rng)
        f_dims = ["obs", "class"]
        coords["class"] = np.asarray(problem.classes).astype(str)
        attrs["likelihood"] = "softmax"  # K latent GPs sharing one covariance (GPML §3.5)
    else:
        mode = laplace_mode(K, t)
        log_z, f_mode = mode.log_z, mode.f
        # Laplace covariance (K^-1 + W)^-1 = K - K W^1/2 B^-1 W^1/2 K (GPML eq. 3.27)
        V = linalg.solve_triangular(mode.L, mode.sW[:, None] * K, lower=True)
        f = gaussian_draws(f_mode, K - V.T @ V, draws, rng)
        f_dims = ["obs"]
    return datatree(
        {"posterior": {"length_scale": np.broadcast_to(ls, (chains, per_chain, d)).copy(),
                       "signal_sd": np.full((chains, per_chain), sf),
                       "f": f.reshape(chains, per_chain, *f.shape[1:])},
         "observed_data": {"t": codes},
         "constant_data": {"X": problem.X, "f_mode": f_mode}},
        coords=coords,
        dims={"length_scale": ["feature"], "f": f_dims, "t": ["obs"],
              "X": ["obs", "feature"], "f_mode": f_dims},
        attrs={
            "problem_kind": GPClassification.kind,
            "classes": classes_attr(problem.classes),
            **attrs,
            "covariance": "se_ard",
            # the Laplace log marginal likelihood (GPML eq. 3.32; K > 2: eq. 3.44) at the
            # type-II ML optimum, under the name every evidence result uses
            "log_evidence": float(log_z),
            "log_marginal_likelihood": float(log_z),
            "restart_log_marginal_likelihood": np.array([r[1] for r in runs]),
            "converged": int(converged),
            "n_iter": int(sum(r[3] for r in runs)),
            "restarts": len(runs),
                "optimise_seconds": time.perf_counter() - start,
            "hyperparameters": "point",
            "fixed": " ".join(k for k in ("length_scale", "signal_sd")
                              if getattr(problem, k) is not None),
            "max_iter": max_iter,
            "log_likelihood_omitted": "latent",
        })


def _laplace_fit(post: xr.DataTree, X_new) -> LaplaceFit:
    """The :class:`LaplaceFit` of a Laplace result ``post`` at ``X_new``."""
    X_new = check_new_inputs(post, X_new)
    X = post["constant_data"]["X"].values
    centre = X.mean(axis=0)
    return LaplaceFit(X - centre, X_new - centre, post["observed_data"]["t"].values,
                      post["posterior"]["length_scale"].values[0, 0],
                      float(post["posterior"]["signal_sd"].values[0, 0]),
                      post["constant_data"]["f_mode"].values)


def latent_moments(post: xr.DataTree, X_new) -> tuple[np.ndarray, np.ndarray]:
    """GPML Algorithm 3.2: mean ``k*^T (t - pi)`` and variance ``k** - v^T v`` of the latent
    ``f*`` at ``X_new``, ``v = L^-1 W^1/2 k*``."""
    fit = _laplace_fit(post, X_new)
    Xc, Xn, ls, sf, f_hat = fit.X, fit.X_new, fit.length_scale, fit.signal_sd, fit.f_mode
    t = fit.t.astype(float)
    pi = expit(f_hat)
    sW = np.sqrt(pi * (1 - pi))
    K = se_ard_covariance(Xc, None, ls, sf)
    L = linalg.cholesky(np.eye(t.size) + sW[:, None] * K * sW[None, :], lower=True)
    return _binary_latent(se_ard_covariance(Xc, Xn, ls, sf), sf, t - pi, sW, L)


def _binary_latent(Ks, sf: float, a, sW, L) -> tuple[np.ndarray, np.ndarray]:
    """GPML Algorithm 3.2 lines 4-6 from the mode's ``a = t - pi``, ``W^1/2`` and ``L``."""
    v = linalg.solve_triangular(L, sW[:, None] * Ks, lower=True)
    return Ks.T @ a, np.maximum(sf**2 - np.einsum("ij,ij->j", v, v), 0.0)


def class_replicates(post: xr.DataTree, X_new: np.ndarray | None, rng: np.random.Generator
                     ) -> np.ndarray:
    """A class code per posterior draw of the latent ``f`` (chain, draw, n), drawn from
    ``sigma(f)`` (GPML eq. 3.1). ``X_new=None``: the training inputs (the stored draws of
    ``f``); otherwise the Laplace result's latent predictive ``N(mean, var)`` per input
    (GPML Alg. 3.2, marginal per input) or, for NUTS, each draw's ``f* | f, theta``."""
    ds = post["posterior"]
    shape = (ds.sizes["chain"], ds.sizes["draw"])
    multiclass = "class" in ds["f"].dims
    if X_new is None:  # the stored draws of f
        f = ds["f"].values
        p = softmax(f, axis=-1) if multiclass else expit(f)
    elif post.attrs["hyperparameters"] == "sampled":  # NUTS: each draw's f* | f, theta
        p = nuts_probability_draws(post, X_new, max_draws=shape[0] * shape[1])
        p = p.reshape(*shape, *p.shape[1:])
    elif multiclass:  # GPML Alg. 3.4's latent Gaussian, marginal per input

        mean, cov = latent_moments_multiclass(post, X_new)
        root = covariance_root(cov)
        p = softmax(mean + np.einsum("mab,cdmb->cdma", root,
                                     rng.standard_normal((*shape, *mean.shape))), axis=-1)
    else:
        mean, var = latent_moments(post, X_new)
        p = expit(mean + np.sqrt(var) * rng.standard_normal((*shape, mean.size)))
    if multiclass:  # a class code from the softmax (GPML eq. 3.34)
        u = rng.random(p.shape[:-1])[..., None]
        return np.minimum((np.cumsum(p, axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)
    return (rng.random(p.shape) < p).astype(np.int64)


def averaged_probability(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """GPML eq. 3.25: ``int sigma(f) N(f | mean, var) df`` by Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite.hermgauss(GH_NODES)
    f = mean[:, None] + np.sqrt(2 * var)[:, None] * x[None, :]
    return expit(f) @ w / np.sqrt(np.pi)


def predict_laplace(post: xr.DataTree, X_new) -> ClassPredictive:
    """Class probabilities at ``X_new`` (GPML eq. 3.25 with Algorithm 3.2's moments; for
    K > 2 classes Algorithm 3.4, :func:`predict_laplace_multiclass`)."""

    if len(post.attrs["classes"]) > 2:

        return predict_laplace_multiclass(post, X_new)
    return class_predictive(post, averaged_probability(*latent_moments(post, X_new)),
                            "laplace")


def class_predictive(post: xr.DataTree, p: np.ndarray, kind: str) -> ClassPredictive:
    """The :class:`ClassPredictive` of probabilities ``p``: ``P(classes[1])`` (n,) for two
    classes, or (n, K) rows (clipped away from 0 and renormalised)."""

    classes = np.asarray(post.attrs["classes"])
    return ClassPredictive(log_proba=_log_proba(p), classes=classes, kind=kind)


def _log_proba(p: np.ndarray) -> np.ndarray:
    """(n, K) log probabilities of ``P(classes[1])`` (n,) or of (n, K) rows, clipped away
    from 0 (and 1) and renormalised."""
    if p.ndim == 2:
        p = np.clip(p, 1e-300, None)
        return np.log(p / p.sum(axis=1, keepdims=True))
    p1 = np.clip(p, 1e-300, 1 - 1e-16)
    return np.stack([np.log1p(-p1), np.log(p1)], axis=1)


def predict_plugin(post: xr.DataTree, X_new) -> ClassPredictive:
    """``sigma`` (softmax for K > 2) of the latent predictive mean of a Laplace fit (GPML
    Algorithm 3.2 / 3.4 line 6), ignoring its variance: the MAP class of GPML eq. 3.26 and
    scikit-learn's ``predict``. Robust where the averaged probabilities are not: at a very
    large signal sd the Laplace variance of saturated classes reverts to the prior's and
    the average favours the class of largest variance."""

    if "f_mode" not in post["constant_data"]:
        raise ValueError("predict(post, X, kind='plugin') needs an evidence (Laplace) fit; "
                         "this posterior has no f_mode")
    classes = np.asarray(post.attrs["classes"])
    if classes.size > 2:
        from scipy.special import log_softmax


        log_proba = log_softmax(latent_moments_multiclass(post, X_new)[0], axis=1)
    else:
        m = latent_moments(post, X_new)[0]
        log_proba = np.stack([log_expit(-m), log_expit(m)], axis=1)
    return ClassPredictive(log_proba=log_proba, classes=classes, kind="plugin")


def fit_nuts(problem: GPClassification, *, seed: int | None = None, draws: int = 500,
             tune: int = 500, chains: int = 2, target_accept: float = 0.9,
             warn: bool = True, progressbar: bool | None = None) -> xr.DataTree:
    """Joint posterior of the SE-ARD hyperparameters and the latent ``f`` by NUTS (nutpie) on
    a ``pm.gp.Latent`` prior (non-centred) with a Bernoulli-logit likelihood; for K > 2
    classes K latent GPs sharing the covariance (``n_outputs=K``) and the softmax likelihood
    (GPML §3.5, eq. 3.34), the model of :func:`fit_evidence`.
    Priors (inputs centred): ``length_scale_d ~ LogNormal(ln sd(x_d), 1)`` as for GP
    regression, and ``signal_sd ~ HalfNormal(2)`` (a logit sd of 2 spans probabilities
    0.02-0.98). ``f`` has dims (obs) for two classes, (obs, class) for more.
    ``progressbar`` as in :func:`~sparsebayes.inference.rvm.pymc.fit_nuts`."""
    if not isinstance(problem, GPClassification):
        raise TypeError(f"expected a GPClassification, got {type(problem).__name__}")
    import pymc as pm


    draws = check_positive_int("draws", draws)
    chains = check_positive_int("chains", chains)
    tune = samplers.check_tune(tune, "nutpie")
    progressbar = show_progress(progressbar)
    X, t = problem.X - problem.X.mean(axis=0), problem.t.astype(int)
    d, n_classes = problem.n_features, problem.n_classes
    _, _, _, log_scale = _layout(problem)
    # Data, targets and prior scales are pm.Data: the compiled sampler is reused for every
    # data set of the same shape (the study's splits) and must sample *this* data
    with pm.Model() as model:
        X_data = pm.Data("X", X)
        t_data = pm.Data("t_data", t)
        ls_mu = pm.Data("ls_prior_mu", log_scale[:d])
        ls = pm.LogNormal("length_scale", mu=ls_mu, sigma=1.0, shape=d)
        sf = pm.HalfNormal("signal_sd", sigma=2.0)
        gp = pm.gp.Latent(cov_func=sf**2 * pm.gp.cov.ExpQuad(d, ls=ls))
        if n_classes == 2:
            pm.Bernoulli("t", logit_p=gp.prior("f", X=X_data), observed=t_data)
        else:  # f: (class, obs)
            pm.Categorical("t", logit_p=gp.prior("f", X=X_data, n_outputs=n_classes).T,
                           observed=t_data)
    seed_int = int(np.random.default_rng(seed).integers(2**31 - 1))
    with one_blas_thread():
        post_ds, stats, t_compile, t_sample = samplers.run_sampler(
            model, "nutpie", draws=draws, tune=tune, chains=chains, cores=min(chains, 2),
            seed=seed_int, target_accept=float(target_accept),
            key=("gp_classification", n_classes, *X.shape), progressbar=progressbar)
    n = t.size
    coords = {"feature": np.arange(d), "obs": np.arange(n)}
    if n_classes == 2:
        fs = post_ds["f"].values
        loglik, f_dims = log_expit((2 * t - 1) * fs), ["obs"]
    else:
        fs = np.swapaxes(post_ds["f"].values, 2, 3)  # (chain, draw, obs, class)
        loglik, f_dims = log_softmax(fs, axis=3)[:, :, np.arange(n), t], ["obs", "class"]
        coords["class"] = np.asarray(problem.classes).astype(str)
    dt = datatree(
        {"posterior": {"length_scale": post_ds["length_scale"].values,
                       "signal_sd": post_ds["signal_sd"].values, "f": fs},
         "log_likelihood": {"t": loglik},
         "sample_stats": stats,
         "observed_data": {"t": problem.t},
         "constant_data": {"X": problem.X}},
        coords=coords,
        dims={"length_scale": ["feature"], "f": f_dims, "t": ["obs"],
              "X": ["obs", "feature"]})
    dt.attrs.update({
        "problem_kind": GPClassification.kind, "classes": classes_attr(problem.classes),
        "covariance": "se_ard", "sampler": "nutpie",
        "draws": draws, "tune": tune, "chains": chains, "compile_time": t_compile,
        "sampling_time": t_sample, "hyperparameters": "sampled"})
    diag = samplers.diagnose(dt, ("length_scale", "signal_sd"), warn=warn)
    dt.attrs.update(n_divergent=diag["n_divergent"], max_rhat=diag["max_rhat"],
                    converged=int(diag["ok"]))
    return dt


def predict_nuts(post: xr.DataTree, X_new, max_draws: int = 200) -> ClassPredictive:
    """Class probabilities averaged over posterior draws: per draw, ``f* | f, theta`` is
    Gaussian (GPML eqs. 3.21-3.24 with K^-1 f in place of the Laplace mean; for K > 2 one
    such Gaussian per class, independent given ``theta``), its ``E[sigma(f*)]`` by eq. 3.25
    quadrature (K > 2: the averaged softmax, Algorithm 3.4 lines 12-16), then the mean over
    draws (the per-draw values, whose sd is the posterior spread of p, come from
    :func:`nuts_probability_draws`)."""
    return class_predictive(post, nuts_probability_draws(post, X_new, max_draws).mean(axis=0),
                            "nuts")


def nuts_probability_draws(post: xr.DataTree, X_new, max_draws: int = 200) -> np.ndarray:
    """Per-draw ``E[p(y* = 1) | f, theta]`` at ``X_new``, shape (draws, n_new); for K > 2
    classes the per-draw averaged softmax, (draws, n_new, K), from 256 quasi-Monte Carlo
    points per draw (the average over draws then has far more)."""

    X_new = check_new_inputs(post, X_new)
    X = post["constant_data"]["X"].values
    centre = X.mean(axis=0)
    Xc, Xn = X - centre, X_new - centre
    ds = post["posterior"]
    ls = ds["length_scale"].values.reshape(-1, X.shape[1])
    sf = ds["signal_sd"].values.reshape(-1)
    f = ds["f"].values.reshape(ls.shape[0], X.shape[0], -1)  # (draws, obs, 1 or K)
    keep = np.linspace(0, ls.shape[0] - 1, min(max_draws, ls.shape[0])).astype(int)
    out = []
    for s in keep:
        K = se_ard_covariance(Xc, None, ls[s], sf[s]) + 1e-6 * np.eye(X.shape[0])
        Ks = se_ard_covariance(Xc, Xn, ls[s], sf[s])
        c = linalg.cho_factor(K, lower=True)
        mean = Ks.T @ linalg.cho_solve(c, f[s])
        v = linalg.solve_triangular(c[0], Ks, lower=True)
        var = np.maximum(sf[s] ** 2 - np.einsum("ij,ij->j", v, v), 0.0)
        if f.shape[2] == 1:
            out.append(averaged_probability(mean[:, 0], var))
        else:
            cov = var[:, None, None] * np.eye(f.shape[2])
            out.append(averaged_softmax(mean, cov, samples=256, seed=int(s)))
    return np.array(out)


# --------------------------------------------------------------------------------------------
# K > 2 classes: the softmax likelihood (GPML §3.5)
# --------------------------------------------------------------------------------------------

MC_SAMPLES = 2048
MC_SEED = 20260101


def _blocks(K: np.ndarray, P: np.ndarray):
    """GPML Algorithm 3.3 lines 5-9: ``E`` (K, n, n), the Cholesky factor ``M`` of
    ``sum_c E_c`` and ``z = sum_c log|B_c| / 2``."""
    n, C = P.shape
    E = np.empty((C, n, n))
    z = 0.0
    for c in range(C):
        sd = np.sqrt(P[:, c])
        B = sd[:, None] * K * sd[None, :]
        B[np.diag_indices_from(B)] += 1.0
        L = linalg.cholesky(B, lower=True, overwrite_a=True, check_finite=False)
        z += np.sum(np.log(np.diag(L)))
        E[c] = cholesky_inverse(L)  # B_c^-1 by dpotri, then D_c^1/2 B_c^-1 D_c^1/2
        E[c] *= sd[:, None]
        E[c] *= sd[None, :]
    M = linalg.cholesky(E.sum(axis=0), lower=True, check_finite=False)
    return E, M, z


def _per_class(E: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``(E_c v_c)_c`` as an (n, K) array for ``V`` (n, K): one BLAS product per class."""
    return np.matmul(E, V.T[:, :, None])[:, :, 0].T


def _psi(a, F, Y) -> float:
    """GPML eq. 3.41 with ``K^-1 f = a``: ``-a^T f / 2 + y^T f - sum_i log sum_c exp f_i^c``."""
    return float(-0.5 * np.sum(a * F) + np.sum(Y * F) - np.sum(logsumexp(F, axis=1)))


def softmax_laplace_mode(K: np.ndarray, codes: np.ndarray, n_classes: int,
                         F0: np.ndarray | None = None, tol: float = MODE_TOL,
                         max_iter: int = 100) -> SoftmaxLaplaceMode:
    """GPML Algorithm 3.3: the mode ``F`` (n, K) of ``p(f | y)`` for the softmax likelihood
    (``codes`` in 0..K-1, one covariance ``K`` for every class), as a
    :class:`SoftmaxLaplaceMode` (``log Z`` GPML eq. 3.44). A warm start
    ``F0`` whose first step ends below ``Psi(0)`` is dropped for ``F = 0``."""
    n = codes.size
    Y = np.zeros((n, n_classes))
    Y[np.arange(n), codes] = 1.0
    psi0 = -n * np.log(n_classes)  # Psi at F = 0
    if F0 is None:
        F, a_old, psi = np.zeros((n, n_classes)), np.zeros((n, n_classes)), psi0
    else:
        F, a_old, psi = np.array(F0, dtype=float), None, -np.inf
    converged, step = False, np.inf
    for _ in range(max_iter):
        P = softmax(F, axis=1)
        E, M, _ = _blocks(K, P)
        b = P * F - P * np.sum(P * F, axis=1, keepdims=True) + Y - P  # W f + y - pi
        c = _per_class(E, K @ b)  # E K b
        s = linalg.cho_solve((M, True), c.sum(axis=1))  # M^T \ (M \ R^T c)
        a = b - c + (E @ s).T
        F_new = K @ a
        psi_new = _psi(a, F_new, Y)
        if a_old is None and psi_new < psi0:  # a warm start worse than F = 0: start there
            F, a_old, psi = np.zeros((n, n_classes)), np.zeros((n, n_classes)), psi0
            continue
        for _ in range(30):  # halve a step that lowers Psi (Psi is concave in f)
            if a_old is None or psi_new >= psi - 1e-12 * abs(psi):
                break
            a = 0.5 * (a + a_old)
            F_new = K @ a
            psi_new = _psi(a, F_new, Y)
        step = np.max(np.abs(F_new - F))
        scale = max(1.0, np.max(np.abs(F_new)))
        # a step below tol, or (at the round-off floor of a large signal sd) no gain in Psi
        stalled = psi_new - psi <= 1e-14 * abs(psi_new) and step < 1e-6 * scale
        F, a_old, psi = F_new, a, psi_new
        if step < tol * scale or stalled:
            converged = True
            break
    if not converged:
        warn_user(f"softmax Laplace mode (GPML Algorithm 3.3) did not converge in "
                  f"max_iter={max_iter} Newton steps (last step {step:.2e})",
                  ConvergenceWarning)
    P = softmax(F, axis=1)
    E, M, z = _blocks(K, P)
    a = Y - P  # at the mode K^-1 f = y - pi (GPML eq. 3.40)
    log_z = (-0.5 * np.sum(a * F) + np.sum(Y * F) - np.sum(logsumexp(F, axis=1)) - z
             - np.sum(np.log(np.diag(M))))
    return SoftmaxLaplaceMode(float(log_z), F, P, E, M, a)


def laplace_covariance(K: np.ndarray, E: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``(K^-1 + W)^-1 = K - K (K + W^-1)^-1 K`` (GPML eq. 3.45 with Algorithm 3.4's
    ``(K + W^-1)^-1 = E - E R (sum_c E_c)^-1 R^T E``), as an (n K) x (n K) matrix with
    ``f`` flattened in (obs, class) order."""
    C, n, _ = E.shape
    H = np.stack([linalg.solve_triangular(M, E[c] @ K, lower=True) for c in range(C)])
    S = np.einsum("aij,bik->jakb", H, H)  # K E_c M^-T M^-1 E_c' K
    for c in range(C):
        S[:, c, :, c] += K - K @ E[c] @ K
    return S.reshape(n * C, n * C)


def softmax_laplace_draws(K: np.ndarray, mode: SoftmaxLaplaceMode, draws: int,
                          rng: np.random.Generator) -> np.ndarray:
    """``draws`` draws (draws, n, K) of the softmax Laplace posterior ``N(F_hat, Sigma)``,
    ``Sigma = (K^-1 + W)^-1`` (GPML eq. 3.45), without the (nK) x (nK) ``Sigma``: see
    :func:`_softmax_posterior_map`, fed standard normals."""
    n, C = mode.F.shape
    z = rng.standard_normal((2, n, C, draws))
    return mode.F + np.moveaxis(_softmax_posterior_map(K, mode, z[0], z[1]), -1, 0)


def _softmax_posterior_map(K: np.ndarray, mode: SoftmaxLaplaceMode, z_prior: np.ndarray,
                           z_lik: np.ndarray) -> np.ndarray:
    """``f - F_hat`` (n, K, S) for inputs ``z_prior``, ``z_lik`` (n, K, S): with ``f0 = K^1/2
    z_prior`` per class (``N(0, K)``) and ``g_i = W_i^1/2 z_lik,i`` (``N(0, W)``; the root
    ``diag(sqrt(pi_i)) - pi_i sqrt(pi_i)^T`` of ``W_i = diag(pi_i) - pi_i pi_i^T``, as the pi
    sum to 1), ``Sigma (K^-1 f0 + g)`` has covariance ``Sigma (K^-1 + W) Sigma = Sigma``. By
    ``Sigma = K - K (K + W^-1)^-1 K`` it is ``f0 + K (g - (K + W^-1)^-1 (f0 + K g))``, with
    Algorithm 3.4's ``(K + W^-1)^-1`` from ``E`` and ``M``: O(K n^2) per draw."""
    P, E, M = mode.P, mode.E, mode.M
    root = covariance_root(K)
    f0 = np.tensordot(root, z_prior, axes=(1, 0))
    sp = np.sqrt(P)[:, :, None]
    g = sp * z_lik - P[:, :, None] * np.sum(sp * z_lik, axis=1, keepdims=True)
    h = f0 + np.tensordot(K, g, axes=(1, 0))
    Eh = np.matmul(E, np.moveaxis(h, 1, 0))  # (K, n, S): E_c h_c
    r = Eh - np.matmul(E, linalg.cho_solve((M, True), Eh.sum(axis=0)))
    return f0 + np.tensordot(K, g - np.moveaxis(r, 0, 1), axes=(1, 0))


def _softmax_lml_and_grad(theta, X, codes, C, F0=None):
    """``log Z`` (GPML eq. 3.44) and its gradient in ``theta = (log length scales, log
    signal sd)``: the softmax analogue of GPML Algorithm 5.1 (eqs. 5.21-5.24; Williams &
    Barber 1998), the explicit terms ``a^T K_j a / 2 - tr((K + W^-1)^-1 K_j) / 2`` plus the
    implicit one through the mode, ``d f_hat = (I + K W)^-1 K_j (y - pi)`` weighted by
    ``d(-log|I + K W| / 2) / d f_hat = -tr((K^-1 + W)^-1 dW/df) / 2``."""
    d = X.shape[1]
    ls, sf = np.exp(theta[:d]), float(np.exp(theta[d]))
    K = se_ard_covariance(X, None, ls, sf)
    mode = softmax_laplace_mode(K, codes, C, F0)
    F, P, E, M, a = mode.F, mode.P, mode.E, mode.M, mode.a
    G = np.stack([linalg.solve_triangular(M, E[c], lower=True) for c in range(C)])
    # (K + W^-1)^-1 = E - E R (sum_c E_c)^-1 R^T E: diagonal class blocks E_c - G_c^T G_c
    R_diag_sum = E.sum(axis=0) - sum(Gc.T @ Gc for Gc in G)

    def r_apply(V):
        EV = _per_class(E, V)
        return EV - (E @ linalg.cho_solve((M, True), EV.sum(axis=1))).T

    Sig = _marginal_blocks(K, E, G)
    dg = np.einsum("icc->ic", Sig)
    Sp = np.einsum("iab,ib->ia", Sig, P)
    # d W_i / d f_ik = diag(q) - q p^T - p q^T with q = p_ik (e_k - p_i)
    s2 = -0.5 * P * (dg - np.sum(dg * P, axis=1, keepdims=True)
                     - 2 * (Sp - np.sum(Sp * P, axis=1, keepdims=True)))
    # for each dK_j: (sum_c a_c^T dK_j a_c - sum_c tr(R_c dK_j)) / 2 explicitly and
    # <s2, (I - K R) dK_j a> = <U, dK_j a> through the mode, U = s2 - R K s2 (R symmetric),
    # so the gradient is 1/2 sum_ij W_ij dK_j,ij with W = a a^T - sum_c R_c + U a^T + a U^T
    U = s2 - r_apply(K @ s2)
    W = a @ a.T - R_diag_sum + U @ a.T
    W += a @ U.T
    g_ls, g_sf = type2.se_ard_gradient(W * K, X / ls)
    return mode.log_z, np.append(g_ls, g_sf), F


def _marginal_blocks(K: np.ndarray, E: np.ndarray, G: np.ndarray) -> np.ndarray:
    """The K x K block at every obs i (n, K, K) of ``Sigma = (K^-1 + W)^-1 = K - K (K +
    W^-1)^-1 K`` (GPML eq. 3.45 with Algorithm 3.4's ``(K + W^-1)^-1``), ``G_c = M^-1 E_c``."""
    H = G @ K
    Sig = np.einsum("aki,bki->iab", H, H)
    for c in range(E.shape[0]):
        Sig[:, c, c] += np.diag(K) - np.einsum("ij,ji->i", K @ E[c], K)
    return Sig


def latent_moments_multiclass(post: xr.DataTree, X_new) -> tuple[np.ndarray, np.ndarray]:
    """GPML Algorithm 3.4 / eqs. 3.42-3.43: the latent predictive mean (m, K),
    ``mu*_c = k*^T (y_c - pi_c)``, and covariance (m, K, K),
    ``Sigma*_cc' = delta_cc' (k** - k*^T E_c k*) + k*^T E_c (sum_c E_c)^-1 E_c' k*``."""
    fit = _laplace_fit(post, X_new)
    Xc, Xn, ls, sf, F_hat = fit.X, fit.X_new, fit.length_scale, fit.signal_sd, fit.f_mode
    codes = fit.t.astype(int)
    n, C = F_hat.shape
    P = softmax(F_hat, axis=1)
    Y = np.zeros((n, C))
    Y[np.arange(n), codes] = 1.0
    E, M, _ = _blocks(se_ard_covariance(Xc, None, ls, sf), P)
    return _multiclass_latent(se_ard_covariance(Xc, Xn, ls, sf), sf, E, M, Y - P)


def _multiclass_latent(Ks, sf: float, E, M, a) -> tuple[np.ndarray, np.ndarray]:
    """GPML Algorithm 3.4 lines 6-11 from the mode's ``a = y - pi``, ``E`` and ``M``."""
    C = E.shape[0]
    cov = np.zeros((Ks.shape[1], C, C))
    H = []
    for c in range(C):
        B = E[c] @ Ks
        cov[:, c, c] = sf**2 - np.einsum("ij,ij->j", Ks, B)
        H.append(linalg.solve_triangular(M, B, lower=True))
    H = np.stack(H)
    cov += np.einsum("aij,bij->jab", H, H)
    return Ks.T @ a, cov


def _normal_points(samples: int, dim: int, seed: int) -> np.ndarray:
    """``samples`` standard-normal points in ``dim`` dimensions: a scrambled Sobol sequence
    (randomised quasi-Monte Carlo, SciPy ``qmc.Sobol``) from a fixed seed, mapped by the
    normal quantile; a power of 2 keeps the sequence balanced."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(dim, scramble=True, seed=seed).random(samples)
    return norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))


def averaged_softmax(mean: np.ndarray, cov: np.ndarray, samples: int = MC_SAMPLES,
                     seed: int = MC_SEED, return_se: bool = False):
    """``E[softmax(f*)]`` under ``f* ~ N(mean, cov)`` per row (GPML Algorithm 3.4 lines
    12-16) by averaging over ``samples`` points of :func:`_normal_points` (shared by the
    rows). With ``return_se`` also ``sd / sqrt(samples)`` of the averaged values, the
    plain Monte Carlo standard error, which bounds the quasi-Monte Carlo error from above
    in practice (tests: the error against 40^3-point Gauss-Hermite is far below it)."""
    samples = check_positive_int("samples", samples)
    m, C = mean.shape
    z = _normal_points(samples, C, seed)
    root = covariance_root(cov)
    p, se = np.empty((m, C)), np.empty((m, C))
    chunk = max(1, 2**19 // (samples * C))
    for i in range(0, m, chunk):
        f = z @ np.swapaxes(root[i:i + chunk], 1, 2)  # (rows, samples, C)
        f += mean[i:i + chunk, None, :]
        s = softmax(f, axis=2)
        p[i:i + chunk] = s.mean(axis=1)
        if return_se:
            se[i:i + chunk] = s.std(axis=1) / np.sqrt(samples)
    return (p, se) if return_se else p


def predict_laplace_multiclass(post: xr.DataTree, X_new) -> ClassPredictive:
    """Class probabilities at ``X_new``: the softmax averaged over Algorithm 3.4's latent
    predictive Gaussian by :func:`averaged_softmax`."""
    mean, cov = latent_moments_multiclass(post, X_new)
    p = averaged_softmax(mean, cov)
    flips = np.argmax(p, axis=1) != np.argmax(mean, axis=1)
    if flips.sum() > max(1, 0.05 * flips.size):
        sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))[flips]
        sf = float(post["posterior"]["signal_sd"].values.flat[0])
        warn_user(
            f"the averaged probabilities pick another class than the latent mean at "
            f"{int(flips.sum())} of {flips.size} inputs: there the classes' latent predictive "
            f"sds (up to {sd.max():.3g}; signal sd {sf:.3g}) are unequal (by up to "
            f"{float(np.max(sd.max(1) / sd.min(1))):.2g}x) and large against the gaps between "
            "their means, so the average favours the widest class, not the likeliest. The "
            "Laplace approximation is poor here: compare kind='plugin', fix signal_sd, or use "
            "RVMClassification", NumericalWarning)
    return class_predictive(post, p, "laplace")


# --------------------------------------------------------------------------------------------
# Leave-one-out: the Laplace cavity and warm-started refits
# --------------------------------------------------------------------------------------------


def laplace_cavity(mean: np.ndarray, cov: np.ndarray, W: np.ndarray, grad: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The cavity ``N(mu_-n, S_-n)`` of each latent marginal ``N(m_n, S_n)`` of a Laplace
    posterior with point n's site removed (Vehtari et al. 2016, LA-LOO): the site is the
    Gaussian of precision ``W_n`` and natural mean ``W_n m_n + grad_n`` (at the mode
    ``(K^-1 + W) f_hat = W f_hat + grad``, GPML eq. 3.17), so ``S_-n = (S_n^-1 - W_n)^-1 =
    (I - S_n W_n)^-1 S_n`` and ``mu_-n = m_n - S_-n grad_n``. Two classes: ``mean``, ``cov``,
    ``W``, ``grad`` (n,); K > 2: ``mean``, ``grad`` (n, K), ``cov``, ``W`` (n, K, K). A
    cavity variance that is not positive (round-off) warns and is set to the marginal's."""
    if np.ndim(cov) == 1:
        shrink = 1.0 - W * cov
        bad = ~(shrink > 0)
        s2 = cov / np.where(bad, 1.0, shrink)
        out = mean - s2 * grad, s2
    else:
        C = cov.shape[-1]
        S = np.linalg.solve(np.eye(C) - cov @ W, cov)
        S = 0.5 * (S + np.swapaxes(S, 1, 2))
        bad = ~(np.linalg.eigvalsh(S)[:, 0] > 0)
        S[bad] = cov[bad]
        out = mean - np.einsum("nab,nb->na", S, grad), S
    if bad.any():
        warn_user(f"the Laplace cavity (LA-LOO) is not positive definite at {int(bad.sum())} "
                  "points (round-off in the marginal covariance): there the marginal is "
                  "used", NumericalWarning)
    return out


def gp_laplace_cavity_logpdf(post: xr.DataTree) -> np.ndarray:
    """Leave-one-out log predictive probability (N,) of each observed class of a Laplace
    (``"evidence"``) GP classifier at its fitted hyperparameters by the Laplace cavity
    (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016, JMLR 17(103), LA-LOO): the latent
    marginal at x_n (GPML eq. 3.27; K > 2: eq. 3.45) without point n's site
    (:func:`laplace_cavity`), and the likelihood averaged over that cavity (GPML eq. 3.25 by
    Gauss-Hermite; K > 2: :func:`averaged_softmax`). No refits: the hyperparameters stay
    those fitted to all N points."""
    if not isinstance(post, xr.DataTree) or "f_mode" not in post.get("constant_data", {}):
        raise TypeError("post must be a GP classification result of method 'evidence' "
                        "(a Laplace fit with constant_data f_mode)")
    fit = _laplace_fit(post, post["constant_data"]["X"].values)
    Xc, ls, sf, f_hat = fit.X, fit.length_scale, fit.signal_sd, fit.f_mode
    codes = fit.t.astype(int)
    K = se_ard_covariance(Xc, None, ls, sf)
    n = codes.size
    if f_hat.ndim == 2:
        P = softmax(f_hat, axis=1)
        E, M, _ = _blocks(K, P)
        G = np.stack([linalg.solve_triangular(M, E[c], lower=True) for c in range(E.shape[0])])
        W = np.einsum("ia,ab->iab", P, np.eye(P.shape[1])) - np.einsum("ia,ib->iab", P, P)
        grad = -P
        grad[np.arange(n), codes] += 1.0
        mu, S = laplace_cavity(f_hat, _marginal_blocks(K, E, G), W, grad)
        p = averaged_softmax(mu, S)
    else:
        pi = expit(f_hat)
        W = pi * (1 - pi)
        sW = np.sqrt(W)
        L = linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :], lower=True)
        V = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
        var = np.diag(K) - np.einsum("ij,ij->j", V, V)  # diag of GPML eq. 3.27
        p = averaged_probability(*laplace_cavity(f_hat, var, W, codes - pi))
    return _log_proba(p)[np.arange(n), codes]


class GPClassificationRefits:
    """Warm-started refits of a Laplace GP classifier (``"evidence"``: type-II ML of GPML eq.
    3.32 by Algorithm 5.1, mode by Algorithm 3.1; K > 2 classes eq. 3.44, mode by Algorithm
    3.3) without some rows, for exact leave-one-out and K-fold cross-validation.

    :meth:`fold` maximises the Laplace log marginal likelihood of the kept rows by the
    fit's L-BFGS-B search (:func:`~.type2.maximise`: the bounds a fit of the kept rows would
    have, the same tolerances and ``max_iter``), started from one Newton step away from the
    full-data hyperparameters (with the full data's curvature, :attr:`precision`, computed
    once from D + 2 gradients; the start is the full-data optimum if that step does not
    climb) and run in coordinates scaled by that curvature's diagonal, every mode
    warm-started (the first from the full-data mode at the kept rows). It returns the log of
    the fit's own predictive probability (GPML eq. 3.25 with Algorithm 3.2; K > 2
    Algorithm 3.4: the probabilities of :func:`predict`) of the observed class at the
    left-out rows. The classes stay those of the fit (a fold may leave a class without
    points). After a fold, ``theta`` (log length scales, log signal sd) and
    ``log_marginal_likelihood`` are the refit's.

    restarts : 1 (default) searches from the full-data optimum only, a local search: where
        the log marginal likelihood is multimodal, a cold fit's random starts can find a
        higher optimum without the left-out rows. ``restarts > 1`` adds the cold fit's
        random starts 2..``restarts`` (same seed), so the refit's optimum is at least as
        high as a cold fit's with that many restarts whose first start (the data scales)
        reaches no higher optimum than the full-data one; each added start costs about
        what one start of a cold fit costs.
    """

    def __init__(self, post: xr.DataTree, restarts: int = 1) -> None:

        if not is_result_of(post, GPClassification, "evidence"):
            raise TypeError("post must be a GP classification result of method 'evidence'")
        X = post["constant_data"]["X"].values
        self.X = X - X.mean(axis=0)
        self.codes = post["observed_data"]["t"].values.astype(int)
        self.n_classes = len(post.attrs["classes"])
        self.f_mode = post["constant_data"]["f_mode"].values
        ds = post["posterior"]
        self.theta0 = np.log(np.append(ds["length_scale"].values[0, 0],
                                       ds["signal_sd"].values[0, 0]))
        fixed = post.attrs.get("fixed", "").split()
        self.length_scale = ds["length_scale"].values[0, 0] if "length_scale" in fixed else None
        self.signal_sd = float(ds["signal_sd"].values[0, 0]) if "signal_sd" in fixed else None
        self.max_iter = int(post.attrs.get("max_iter", 200))
        self.restarts = check_positive_int("restarts", restarts)
        self.seed = int(post.attrs.get("seed", -1))
        self.theta, self.log_marginal_likelihood = self.theta0, np.nan
        self.precision = self._curvature()
        self.scale = np.sqrt(np.diag(self.precision))

    def _lml(self, theta, keep, mode):
        X, codes = self.X[keep], self.codes[keep]
        if self.n_classes > 2:
            return _softmax_lml_and_grad(theta, X, codes, self.n_classes, mode)
        return _lml_and_grad(theta, X, codes.astype(float), mode)

    def _curvature(self, h: float = 1e-4) -> np.ndarray:
        """``-d^2 log Z / d theta^2`` at the full-data optimum by forward differences of the
        analytic gradient (identity rows and columns for fixed entries), its eigenvalues
        raised to at least 1."""
        free = np.flatnonzero(np.isnan(_layout_of(self.X, self.length_scale,
                                                  self.signal_sd)[0]))
        keep = np.ones(self.codes.size, dtype=bool)
        H = np.eye(self.theta0.size)
        with one_blas_thread():
            g0 = self._lml(self.theta0, keep, self.f_mode)[1]
            for j in free:
                theta = self.theta0.copy()
                theta[j] += h
                H[free, j] = (g0 - self._lml(theta, keep, self.f_mode)[1])[free] / h
        vals, vecs = np.linalg.eigh(0.5 * (H + H.T))
        return (vecs * np.maximum(vals, 1.0)) @ vecs.T

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """Refit without the rows ``out`` (int array); ``(log p(t_out | rows kept),
        converged)``, the log probabilities of shape ``(len(out),)``."""
        n = self.codes.size
        out = np.asarray(out)
        if (out.ndim != 1 or out.size == 0 or out.dtype.kind not in "iu"
                or np.unique(out).size != out.size or out.min() < 0 or out.max() >= n
                or out.size > n - 2):
            raise ValueError(f"out must be distinct row indices in 0..{n - 1}, at least 2 rows "
                             f"kept, got {out!r}")
        keep = np.ones(n, dtype=bool)
        keep[out] = False
        X, codes, C = self.X[keep], self.codes[keep], self.n_classes
        t = codes.astype(float)
        d = X.shape[1]
        fixed, lo, hi, log_scale = _layout_of(X, self.length_scale, self.signal_sd)
        starts = _starts_of(log_scale, self.restarts,
                            np.random.default_rng(None if self.seed < 0 else self.seed))
        starts[0] = self.theta0
        runs_last = []  # each start's latest (z, log Z, mode); modes warm-started in turn
        theta0, scale, free = self.theta0, self.scale, np.isnan(fixed)
        lo_z, hi_z = (lo - theta0) * scale, (hi - theta0) * scale
        seen = {}  # the first start's values by z, so that L-BFGS-B reuses them

        def warm_started():  # in z = (theta - theta0) * scale
            first = not runs_last
            last = {"mode": self.f_mode[keep] if first else None}
            runs_last.append(last)

            def objective(z):
                key = z.tobytes()
                if first and key in seen:
                    value, g, last["mode"] = seen[key]
                else:
                    value, g, last["mode"] = self._lml(theta0 + z / scale, keep, last["mode"])
                    g = g / scale
                    if first:
                        seen[key] = value, g, last["mode"]
                last["z"], last["value"] = z.copy(), value
                return value, g

            return objective

        with one_blas_thread():
            # one Newton step with the full data's curvature from theta0 (z = 0); L-BFGS-B
            # starts from it if it is higher, else from theta0
            newton = warm_started()
            z0 = np.zeros_like(theta0)
            value0, g0 = newton(z0)
            z1 = z0.copy()
            P = self.precision[np.ix_(free, free)] / np.outer(scale[free], scale[free])
            z1[free] = np.clip(np.linalg.solve(P, g0[free]), lo_z[free], hi_z[free])
            z_start = z1 if newton(z1)[0] >= value0 else z0
            runs_last.clear()
            starts = (starts - theta0) * scale
            starts[0] = z_start
            z, runs = type2.maximise(warm_started, np.where(free, np.nan, 0.0), lo_z, hi_z,
                                     starts, max_iter=self.max_iter, ftol=FTOL)
            theta = theta0 + z / scale
            best = runs_last[int(np.argmax([r[1] for r in runs]))]
            exact = np.array_equal(best["z"], z)  # the search's last point: its mode is known
            ls, sf = np.exp(theta[:d]), float(np.exp(theta[d]))
            K = se_ard_covariance(X, None, ls, sf)
            Ks = se_ard_covariance(X, self.X[out], ls, sf)
            if C > 2:
                if exact:
                    log_z, P = best["value"], softmax(best["mode"], axis=1)
                    (E, M, _), a = _blocks(K, P), np.eye(C)[codes] - P
                else:
                    mode = softmax_laplace_mode(K, codes, C, best["mode"])
                    log_z, E, M, a = mode.log_z, mode.E, mode.M, mode.a
                p = averaged_softmax(*_multiclass_latent(Ks, sf, E, M, a))
            else:
                mode = laplace_mode(K, t, best["mode"], max_iter=0 if exact else 100)
                log_z = mode.log_z
                p = averaged_probability(*_binary_latent(Ks, sf, mode.a, mode.sW, mode.L))
        self.theta, self.log_marginal_likelihood = theta, log_z
        return (_log_proba(p)[np.arange(out.size), self.codes[out]],
                any(r[2] for r in runs))
