"""The variational RVM for regression (Bishop & Tipping 2000): the factorised posterior
``q(w) q(alpha) q(beta)`` by closed-form coordinate ascent on the lower bound of ``ln p(t)``.

Updates and bound of Bishop & Tipping (2000) §§2-3 (the ARD form of PRML eqs.
10.92-10.99); every update maximises the bound in one factor, so the bound never
decreases. NumPy/SciPy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import digamma, gammaln

from sparsebayes.models import ConvergenceWarning, GammaPrior, RVMRegression
from sparsebayes.models.priors import resolve_prior

from ..numerics import (
    LOG_2PI,
    check_iterations,
    check_positive_int,
    check_rows_out,
    gaussian_draws,
    gram_weight_posterior,
    lower_inverse,
    one_blas_thread,
    precision_factor,
    warn_user,
)
from ..predictive.regression import gaussian_predictive
from ..results import (
    basis_from_posterior,
    gaussian_draws_log_likelihood,
    is_result_of,
    make_datatree,
    pointwise_budget_ok,
    prior_from_posterior,
    relevance_counts,
)
from .compiled import flat_alpha_array
from .diagnostics import vrvm_regression_khat
from .evidence import check_basis
from .sequential import in_model_sq
from .statistics import GramStatistics, chunk_rows, gram_statistics

__all__ = ["VRVMState", "vrvm", "vrvm_bound", "weight_bound_terms", "fit_vrvm", "gamma_entropy",
           "VRVMRefits"]

PRUNE_RATIO = 1e12  # flat prior (b = 0): drop a basis once <alpha_i> / alpha_unit > this
SETTLED = 100.0  # ... or, once the bound changes by < SETTLED * tol, when its alpha diverges


def diverging(mu: np.ndarray, sigma_diag: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Bases in the model whose flat-prior update ``alpha_i <- 1 / (mu_i^2 + Sigma_ii)``,
    the others held, runs off to infinity: those whose fixed point ``s_i^2 / (q_i^2 - s_i)``
    (Tipping & Faul 2003, eq. 20; that of the VRVM update at ``a = b = 0``, Shutin et al.
    2011) is infinite, ``q_i^2 <= s_i``, with ``s``, ``q`` of the bases in the model
    (:func:`~.sequential.in_model_sq`). ``sigma_diag = diag(Sigma)`` and ``mu`` were
    computed with ``alpha``."""
    return np.isinf(flat_alpha_array(*in_model_sq(mu, sigma_diag, alpha)))


def regrowing(stats: GramStatistics, active: np.ndarray, mu: np.ndarray, Sigma: np.ndarray,
              beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Pruned columns whose fixed point (Tipping & Faul 2003, eq. 20) is finite against the
    current ``q(w)`` (computed with ``beta``), and those fixed points; ``s_j = beta G_jj -
    beta^2 G_ja Sigma G_aj``, ``q_j = beta (Phi^T t_j - G_ja mu)`` (eqs. 21-22)."""
    out = np.setdiff1d(np.arange(stats.Phit.size), active)
    Goa = stats.G[np.ix_(out, active)]
    s = beta * stats.G[out, out] - beta**2 * np.einsum("ij,jk,ik->i", Goa, Sigma, Goa)
    q = beta * (stats.Phit[out] - Goa @ mu)
    alpha = flat_alpha_array(s, q)
    grow = np.isfinite(alpha)
    return out[grow], alpha[grow]


def gamma_entropy(k, r):
    """Entropy of Gamma(shape k, rate r): ``k - ln r + ln Gamma(k) + (1 - k) psi(k)``."""
    k = np.asarray(k, dtype=float)
    return k - np.log(r) + gammaln(k) + (1 - k) * digamma(k)


def _log_norm(shape: float, rate: float) -> float:
    """``shape ln rate - ln Gamma(shape)``, the log normaliser of a Gamma prior; 0 for the
    improper flat prior (the bound is then defined up to this constant)."""
    if shape == 0 or rate == 0:
        return 0.0
    return shape * np.log(rate) - gammaln(shape)


def vrvm_bound(N: int, prior: GammaPrior, *, E_D: float, w2: np.ndarray, logdet_Sigma: float,
               a_t: float, b_t: np.ndarray, c_t: float | None, d_t: float | None,
               beta_fixed: float | None = None) -> float:
    """The lower bound ``E_q[ln p(t, w, alpha, beta)] - E_q[ln q]`` (summary §3) for
    ``q(w) = N(mu, Sigma)``, ``q(alpha_i) = Gamma(a_t, b_t_i)``, ``q(beta) = Gamma(c_t, d_t)``
    (``beta_fixed`` instead when the noise is known). ``E_D = E||t - Phi w||^2`` and
    ``w2 = E[w_i^2]`` are taken under ``q(w)``. Improper priors drop their normalisers."""
    c, d = prior.c, prior.d
    if beta_fixed is None:
        beta, ln_beta = c_t / d_t, digamma(c_t) - np.log(d_t)
    else:
        beta, ln_beta = beta_fixed, np.log(beta_fixed)
    bound = (0.5 * N * (ln_beta - LOG_2PI) - 0.5 * beta * E_D            # E ln p(t | w, beta)
             + weight_bound_terms(prior, w2=w2, logdet_Sigma=logdet_Sigma, a_t=a_t, b_t=b_t))
    if beta_fixed is None:
        bound += (_log_norm(c, d) + (c - 1) * ln_beta - d * beta          # E ln p(beta)
                  + gamma_entropy(c_t, d_t))                              # H[q(beta)]
    return float(bound)


def weight_bound_terms(prior: GammaPrior, *, w2: np.ndarray, logdet_Sigma: float, a_t,
                       b_t: np.ndarray) -> float:
    """The weight and ``alpha`` part of the bound (summary §3), shared by regression and
    classification: ``E ln p(w | alpha) + E ln p(alpha) + H[q(w)] + H[q(alpha)]`` for
    ``q(w) = N(mu, Sigma)`` with ``w2 = E[w_i^2]`` and ``q(alpha_i) = Gamma(a_t, b_t_i)``."""
    a, b = prior.a, prior.b
    M = w2.size
    alpha = a_t / b_t
    ln_alpha = digamma(a_t) - np.log(b_t)
    return float(np.sum(0.5 * ln_alpha - 0.5 * alpha * w2) - 0.5 * M * LOG_2PI  # E ln p(w|a)
                 + M * _log_norm(a, b) + np.sum((a - 1) * ln_alpha - b * alpha)  # E ln p(a)
                 + 0.5 * logdet_Sigma + 0.5 * M * (1 + LOG_2PI)               # H[q(w)]
                 + np.sum(gamma_entropy(a_t, b_t)))                           # H[q(alpha)]


@dataclass
class VRVMState:
    """The factors at convergence: ``q(w) = N(mu, Sigma)``, ``q(alpha_i) = Gamma(a_tilde,
    b_tilde_i)``, ``q(beta) = Gamma(c_tilde, d_tilde)`` (or ``beta`` fixed), over the
    basis columns ``active`` (all of them unless the flat prior pruned some); ``bound`` and
    ``n_active`` after every sweep."""

    active: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    a_tilde: float
    b_tilde: np.ndarray
    c_tilde: float | None
    d_tilde: float | None
    beta_fixed: float | None
    bound: np.ndarray
    n_active: np.ndarray
    converged: bool
    n_iter: int

    @property
    def alpha_mean(self) -> np.ndarray:
        return self.a_tilde / self.b_tilde

    @property
    def beta_mean(self) -> float:
        if self.beta_fixed is not None:
            return self.beta_fixed
        return self.c_tilde / self.d_tilde


def vrvm(Phi: np.ndarray, t: np.ndarray, prior: GammaPrior, *, noise_sd: float | None = None,
         alpha0: np.ndarray | float | None = None, beta0: float | None = None,
         max_iter: int = 5000, tol: float = 1e-7) -> VRVMState:
    """Coordinate ascent on the variational bound (Bishop & Tipping 2000; summary §2).

    One sweep: ``q(w)``: ``Sigma = (diag<alpha> + <beta> Phi^T Phi)^-1``,
    ``mu = <beta> Sigma Phi^T t``; ``q(alpha_i)``: ``a~ = a + 1/2``,
    ``b~_i = b + (mu_i^2 + Sigma_ii) / 2``; ``q(beta)``: ``c~ = c + N/2``,
    ``d~ = d + (||t - Phi mu||^2 + tr(Phi^T Phi Sigma)) / 2``. The bound (§3) is recorded
    after every sweep; iteration stops when it changes by less than ``tol (1 + |L|)``.
    With the flat prior (``b = 0``) ``<alpha_i>`` can grow without limit, by a step per sweep:
    such bases are pruned once ``<alpha_i>`` exceeds ``1e12`` times the data's
    weight-precision scale or, once the bound changes by less than ``SETTLED * tol``, when
    their update diverges (:func:`diverging`); at convergence a pruned basis whose update has
    a finite fixed point again comes back (:func:`regrowing`), so every pruned basis ends
    with its fixed point at infinity.
    """
    Phi, t = np.asarray(Phi, dtype=float), np.asarray(t, dtype=float)
    stats = GramStatistics(Phi.T @ Phi, Phi.T @ t, float(t @ t), float(t.sum()), t.size)
    return vrvm_statistics(stats, prior, noise_sd=noise_sd, alpha0=alpha0, beta0=beta0,
                           max_iter=max_iter, tol=tol)


def vrvm_statistics(stats: GramStatistics, prior: GammaPrior, *, noise_sd: float | None = None,
                    alpha0=None, beta0: float | None = None, max_iter: int = 5000,
                    tol: float = 1e-7) -> VRVMState:
    """:func:`vrvm` from the sufficient statistics ``G = Phi^T Phi``, ``Phi^T t``, ``t^T t``
    (every sweep is O(M^3), whatever N; a basis dictionary computes them in row chunks)."""
    with one_blas_thread():
        return _vrvm(stats, prior, noise_sd=noise_sd, alpha0=alpha0, beta0=beta0,
                     max_iter=max_iter, tol=tol)


def _vrvm(stats, prior, *, noise_sd, alpha0, beta0, max_iter, tol,
          alpha_unit: float | None = None) -> VRVMState:
    """``alpha_unit``: the pruning scale, when ``stats`` hold only some of the candidate
    columns (a warm start on the columns a fit kept, :class:`VRVMRefits`)."""
    G, Phit, tt, N = stats.G, stats.Phit, stats.tt, stats.n
    M = Phit.size
    a, b, c, d = prior.a, prior.b, prior.c, prior.d
    var_t = stats.var_t
    if alpha_unit is None:
        alpha_unit = float(np.trace(G)) / (N * M) / var_t  # mean(Phi^2) / var(t)
    fixed = noise_sd is not None
    beta_fixed = 1.0 / noise_sd**2 if fixed else None
    active = np.arange(M)
    alpha = np.broadcast_to(np.asarray(alpha_unit if alpha0 is None else alpha0, float),
                            (M,)).copy()
    beta = beta_fixed if fixed else (10.0 / var_t if beta0 is None else float(beta0))
    a_t = a + 0.5
    c_t = c + 0.5 * N
    bounds: list[float] = []
    sizes: list[int] = []
    converged = False
    it = 0
    b_t = np.full(M, np.nan)
    d_t = np.nan
    for it in range(1, max_iter + 1):  # noqa: B007 (it is returned)
        Ga = G[np.ix_(active, active)]
        # q(w) (T01 eqs. 12-13) by the triangular inverse of the Cholesky factor of
        # Sigma^-1 = A + beta G: only diag(Sigma) is needed, not Sigma
        alpha_used, beta_used = alpha, beta
        L = precision_factor(Ga, alpha, beta)
        Linv = lower_inverse(L)
        sigma_diag = np.einsum("ij,ij->j", Linv, Linv)
        mu = beta * (Linv.T @ (Linv @ Phit[active]))
        w2 = mu**2 + sigma_diag
        # q(alpha)
        b_t = b + 0.5 * w2
        alpha = a_t / b_t
        # q(beta); tr(G Sigma) = (M - sum alpha_i Sigma_ii) / beta since beta G Sigma = I - A Sigma
        E_D = (tt - 2 * mu @ Phit[active] + mu @ (Ga @ mu)
               + (active.size - alpha_used @ sigma_diag) / beta_used)
        E_D = max(E_D, 0.0)
        if not fixed:
            d_t = d + 0.5 * E_D
            beta = c_t / d_t
        bound = vrvm_bound(N, prior, E_D=E_D, w2=w2, logdet_Sigma=-2.0 * np.sum(np.log(
            np.diag(L))), a_t=a_t, b_t=b_t, c_t=None if fixed else c_t,
            d_t=None if fixed else d_t, beta_fixed=beta_fixed)
        bounds.append(float(bound))
        sizes.append(active.size)
        change = abs(bounds[-1] - bounds[-2]) / (1 + abs(bounds[-1])) if it > 1 else np.inf
        if b == 0:
            keep = alpha < PRUNE_RATIO * alpha_unit
            if change < SETTLED * tol:  # nearly converged: prune what diverges
                keep &= ~diverging(mu, sigma_diag, alpha_used)
            if not keep.any():
                keep[np.argmin(alpha)] = True
            if not keep.all():
                active, alpha, b_t = active[keep], alpha[keep], b_t[keep]
                continue
        if change < tol:
            if b == 0 and active.size < M:  # a pruned basis whose fixed point is finite again
                back, alpha_back = regrowing(stats, active, mu, Linv.T @ Linv, beta_used)
                if back.size:
                    active = np.concatenate([active, back])
                    alpha = np.concatenate([alpha, alpha_back])
                    b_t = np.concatenate([b_t, a_t / alpha_back])
                    continue
            converged = True
            break
    # q(w) for the final hyperparameter factors, so that mu, Sigma match <alpha>, <beta>
    Ga = G[np.ix_(active, active)]
    mu, Sigma, _ = gram_weight_posterior(Ga, Phit[active], alpha, beta)
    return VRVMState(active=active, mu=mu, Sigma=Sigma, a_tilde=a_t, b_tilde=b_t,
                     c_tilde=None if fixed else c_t, d_tilde=None if fixed else float(d_t),
                     beta_fixed=beta_fixed, bound=np.asarray(bounds), n_active=np.asarray(sizes),
                     converged=converged,
                     n_iter=it)


def fit_vrvm(problem, *, seed: int | None = None, prior: GammaPrior | None = None,
             max_iter: int = 5000, tol: float = 1e-7, draws: int = 500, chains: int = 2,
             relevance: float = 1e-2) -> xr.DataTree:
    """Variational RVM posterior of an :class:`RVMRegression` (Bishop & Tipping 2000).

    ``prior``: the Gamma hyperprior (default ``problem.prior``, else Tipping's flat prior,
    which is allowed here: the bound is then defined up to the prior normalisers).
    The result holds independent draws from the factors: ``w ~ q(w)``, ``alpha ~ q(alpha)``,
    ``beta ~ q(beta)``; ``gaussian_posterior`` holds ``mu``, ``Sigma``, ``<alpha>``,
    ``<beta>`` (so ``predict(kind="rvm")`` uses the Gaussian predictive at ``<beta>``) and
    the factor parameters; ``sample_stats.elbo`` is the bound after every sweep.
    ``n_relevant`` counts the weights with ``gamma_i = 1 - <alpha_i> Sigma_ii > relevance``.
    """
    if not isinstance(problem, RVMRegression):
        raise TypeError(f"vrvm is for RVMRegression, got {type(problem).__name__}")
    check_iterations(max_iter, tol)
    for name, v in (("draws", draws), ("chains", chains)):
        check_positive_int(name, v)
    prior = resolve_prior(problem, GammaPrior() if prior is None and problem.prior is None
                          else prior)  # Tipping's flat prior by default
    check_basis(problem)
    basis = problem.basis
    if problem.centres is None:
        Phi = basis.design(problem.X)
        t = problem.t
        stats = GramStatistics(Phi.T @ Phi, Phi.T @ t, float(t @ t), float(t.sum()), t.size)
        del Phi
    else:  # a dictionary: the statistics in row chunks (or a Dask map-reduce)
        stats = gram_statistics(basis, problem.X, problem.t)
    st = vrvm_statistics(stats, prior, noise_sd=problem.noise_sd, max_iter=int(max_iter),
                         tol=float(tol))
    if not st.converged:
        change = (f"bound change {abs(st.bound[-1] - st.bound[-2]):.3g}"
                  if len(st.bound) > 1 else "a single sweep")
        warn_user(f"vrvm did not converge in max_iter={max_iter} sweeps ({change}); the result "
                  "is the last iterate (converged=False)", ConvergenceWarning)
    rng = np.random.default_rng(seed)
    shape = (chains, draws)
    Mt = st.active.size
    w = gaussian_draws(st.mu, st.Sigma, shape, rng)
    alpha = rng.gamma(st.a_tilde, 1.0 / st.b_tilde, (*shape, Mt))
    if st.beta_fixed is not None:
        beta = np.full(shape, st.beta_fixed)
    else:
        beta = rng.gamma(st.c_tilde, 1.0 / st.d_tilde, shape)
    loglik = None
    if pointwise_budget_ok(chains, draws, problem.t.shape[0]):
        Phi_act = basis.design(np.asarray(problem.X), columns=st.active)
        loglik = gaussian_draws_log_likelihood(np.asarray(problem.t), w, Phi_act, beta)
    gamma = 1.0 - st.alpha_mean * np.diag(st.Sigma)
    gauss = {"mu": st.mu, "Sigma": st.Sigma, "alpha": st.alpha_mean, "beta": st.beta_mean,
             "q_alpha_shape": st.a_tilde, "q_alpha_rate": st.b_tilde}
    if st.beta_fixed is None:
        gauss.update(q_beta_shape=st.c_tilde, q_beta_rate=st.d_tilde)
    attrs = {
        "converged": int(st.converged),
        "n_iter": int(st.n_iter),
        "max_iter": int(max_iter),
        "tol": float(tol),
        "elbo": float(st.bound[-1]),
        "bound_up_to_constant": int(not prior.is_proper),
        "prior": prior.as_array(),
        "noise_fixed": int(problem.noise_sd is not None),
        "hyperparameters": "variational",  # independent draws from q(w) q(alpha) q(beta)
        "psis_khat": vrvm_regression_khat(stats, prior, st, seed=seed),
    }
    dt = make_datatree(
        problem, basis=basis, columns=st.active,
        posterior={"w": w, "alpha": alpha, "beta": beta, "noise_sd": 1.0 / np.sqrt(beta)},
        log_likelihood=loglik,
        sample_stats={"elbo": (("iteration",), st.bound)},
        gaussian=gauss, attrs=attrs,
    )
    dt.attrs.update(relevance_counts(basis, st.active, gamma > relevance))
    return dt



class VRVMRefits:
    """Warm-started refits of a VRVM regression result without some rows (Bishop & Tipping
    2000), for exact leave-one-out and K-fold cross-validation.

    The updates need the data only through ``G = Phi^T Phi``, ``Phi^T t``, ``t^T t`` and
    ``N``; a refit downdates them by the left-out rows (``G - Phi_out^T Phi_out``, ...) and
    runs the same coordinate ascent (:func:`vrvm`), to the same tolerance, from the
    full-data factors ``<alpha>``, ``<beta>``. The candidate basis is the fit's (a kernel at
    every fitted centre, the left-out rows' included). A column the flat prior pruned in
    the fit stays pruned: ``<alpha_i> = a~ / (b + <w_i^2> / 2)`` grows without limit once
    ``<w_i^2>`` shrinks, so an infinite ``<alpha_i>`` is a fixed point of the updates; the
    pruning threshold is the fit's rule on the other rows (all the candidate columns).
    The predictive at a left-out row is the fit's (T01 eqs. 21-22 at ``<beta>``).

    A refit equals a cold fit of the other rows where the bound has one maximum that the
    sweeps reach quickly (a proper hyperprior such as ``"weakly_informative"``). With
    Tipping's flat prior (the default) or a nearly flat one the bound has many local
    maxima (which of neighbouring kernels carries a weight) and the sweeps creep (the
    ``<alpha_i>`` of irrelevant columns grow without limit): a refit stays at the full
    fit's choice of relevance vectors, made with the left-out targets, and so is
    optimistic against a cold fit of the other rows.

    ``max_iter``, ``tol``: as in :func:`fit_vrvm`; None: the fit's own.
    """

    @staticmethod
    def cold_reason(post: xr.DataTree) -> str | None:
        """Why the refits of ``post`` start cold: a hyperprior on ``alpha`` of shape < 1
        (Tipping's flat prior, the nearly flat default), whose bound has many local maxima,
        so that a warm refit keeps the relevance vectors chosen with the left-out targets."""
        prior = prior_from_posterior(post)
        if prior is None or prior.a < 1:
            return "a VRVM hyperprior of shape < 1 (its bound has many local maxima)"
        return None

    def __init__(self, post: xr.DataTree, *, max_iter: int | None = None,
                 tol: float | None = None) -> None:
        if not is_result_of(post, RVMRegression, "vrvm"):
            raise TypeError("post must be a vrvm RVMRegression result of "
                            "sparsebayes.inference.fit")
        max_iter = int(post.attrs.get("max_iter", 5000)) if max_iter is None else max_iter
        tol = float(post.attrs.get("tol", 1e-7)) if tol is None else tol
        check_iterations(max_iter, tol)
        self.max_iter, self.tol = int(max_iter), float(tol)
        self.prior = prior_from_posterior(post, GammaPrior())
        self.noise_sd = (float(post["posterior"]["noise_sd"].values.reshape(-1)[0])
                         if int(post.attrs.get("noise_fixed", 0)) else None)
        g = post["gaussian_posterior"]
        self.alpha0, self.beta0 = g["alpha"].values.copy(), float(g["beta"])
        basis, columns = basis_from_posterior(post)
        X = post["constant_data"]["X"].values
        self.t = np.asarray(post["observed_data"]["t"].values, dtype=float)
        self.Phi = basis.design(X, columns=columns)  # the fit's columns at the training rows
        self.stats = GramStatistics(self.Phi.T @ self.Phi, self.Phi.T @ self.t,
                                    float(self.t @ self.t), float(self.t.sum()), self.t.size)
        # ||phi(x_n)||^2 over every candidate column: trace(G) of the pruning scale
        self.n_candidates = basis.n_columns
        self.row_sq = np.empty(self.t.size)
        step = chunk_rows(basis.n_columns)
        for lo in range(0, self.t.size, step):
            P = basis.design(X[lo:lo + step])
            self.row_sq[lo:lo + step] = np.einsum("nm,nm->n", P, P)

    def state(self, out: np.ndarray) -> VRVMState:
        """The converged factors of the refit without rows ``out`` (``active`` indexes the
        fit's columns)."""
        out = check_rows_out(out, self.t.size, min_kept=2)
        P, t_out = self.Phi[out], self.t[out]
        s = self.stats
        stats = GramStatistics(s.G - P.T @ P, s.Phit - P.T @ t_out, s.tt - float(t_out @ t_out),
                               s.tsum - float(t_out.sum()), s.n - out.size)
        alpha_unit = ((self.row_sq.sum() - self.row_sq[out].sum())
                      / (stats.n * self.n_candidates) / stats.var_t)
        with one_blas_thread():
            return _vrvm(stats, self.prior, noise_sd=self.noise_sd, alpha0=self.alpha0,
                         beta0=self.beta0, max_iter=self.max_iter, tol=self.tol,
                         alpha_unit=alpha_unit)

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """``(log p(t_out | refit), converged)``: the refit's predictive (T01 eqs. 21-22 at
        ``<beta>``) at the left-out rows."""
        st = self.state(out)
        out = np.asarray(out)
        pred = gaussian_predictive(self.Phi[np.ix_(out, st.active)], st.mu, st.Sigma,
                                   st.beta_mean)
        return pred.logpdf(self.t[out]), bool(st.converged)
