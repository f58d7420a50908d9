"""Type-II maximum likelihood (evidence) for RVM regression.

* ``fit_fast`` — Tipping & Faul (2003): the sequential add / delete / re-estimate algorithm,
  choosing at each step the action with the largest gain in log marginal likelihood.
* ``fit_mackay`` — Tipping (2001): MacKay re-estimation (T01 eqs. 16-18; with Gamma hyperpriors
  the App. A updates (44), (46)) with pruning of diverging ``alpha``.

Both optionally maximise the evidence over Gaussian kernel widths (§4.3, App. C).
The algorithm itself lives in :mod:`.sequential` (one decision rule, shared with the Laplace
loop of classification). With the classic basis (a kernel at every training input) it runs on
the design; with a dictionary (``centres=``) on the sufficient statistics
``Phi^T Phi, Phi^T t, t^T t, N`` (:mod:`.statistics`), so memory is O(M^2) whatever N.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import xarray as xr
from scipy import optimize

from sparsebayes.models import ConvergenceWarning, GammaPrior, NumericalWarning, RVMRegression
from sparsebayes.models.basis import Basis

from ..contract import refit_options
from ..numerics import (
    check_iterations,
    evidence_from_factor,
    gaussian_draws,
    gram_log_evidence,
    gram_weight_posterior,
    log_evidence,
    one_blas_thread,
    warn_user,
    weight_posterior,
)
from ..predictive.regression import gaussian_predictive
from ..results import (
    basis_from_posterior,
    gaussian_draws_log_likelihood,
    make_datatree,
    pointwise_budget_ok,
    prior_from_posterior,
)
from .mackay import reestimate
from .sequential import (
    ALIGNMENT_MAX,
    ALIGNMENT_SKIP,
    DenseProducts,
    Noise,
    Policy,
    SequentialSparseBayes,
    basis_objective,
    duplicates_note,
    optimal_alpha,
)
from .statistics import GramStatistics, check_memory, chunk_rows, gram_statistics
from .widths import (
    GPWidths,
    default_width_bounds,
    gp_widths,
    with_log_width,
)

__all__ = [
    "SequentialSparseBayes",
    "log_evidence",
    "weight_posterior",
    "optimal_alpha",
    "basis_objective",
    "fit_fast",
    "fit_mackay",
    "default_width_bounds",
    "EvidenceRefits",
]


NOISE_WAIT = 50  # iterations at the initial noise: re-estimating it while the model holds a
# basis or two lets the noise explain the signal, a poor local optimum (linear-spline sinc)
NOISE_EVERY = 10  # then re-estimated at every NOISE_EVERY-th iteration (every M / NOISE_SHARE-th
NOISE_SHARE = 10  # with M > 200 bases in the model: a change taken costs M alpha steps)
NOISE_STEP = 1e-3  # and taken when ln beta moved more than this (to tol at convergence)
NEWTON_GAIN = 1e-3  # nats: a re-estimate gaining less gives way to a Newton step on them all
REFIT_SEARCH_MAX_ITER = 200  # a LOO refit's local-search runs stop here (not kept then)
# fit_fast's default local search: bases of up to this many columns whose first optimum keeps
# up to this many (it re-converges twice per basis kept, so its cost grows with the model)
LOCAL_SEARCH_MAX_COLUMNS, LOCAL_SEARCH_MAX_KEPT = 300, 40
START_CONDITION = 1e-10  # MacKay's start: alpha_i ||phi_i||^2 >= 1e-10 beta
BETA_MAX_FACTOR = 1e6  # beta <= BETA_MAX_FACTOR / var(t): noise sd >= 1e-3 sd(t)
# learned widths: rounds of sparse fit and width step (_solve)
WIDTH_MAX_ROUNDS = 50  # at most this many sparse fits
WIDTH_ROUND_GAIN = 1e-6  # nats: a round raising the log evidence less than this ends them,
WIDTH_ROUND_RTOL = 1e-8  # or less than this times |log evidence| (large N: the tail of rounds
#                          gaining 1e-5 nats of ~2500 ends)
WIDTH_ROUND_WARN = 0.05  # nats: still gaining more than this after max_rounds warns
WIDTH_STEP_MAX_ITER = 50  # L-BFGS-B iterations of one joint step (widths, alpha, noise)
WIDTH_STEP_MAX_ITER_TALL = 20  # the same with 4x more rows than candidate columns: each
#                                evaluation is a pass over the rows, the sparse fit is not
WIDTH_STEP_LOG_BOX = 5.0  # a joint step moves no ln alpha further than this
WIDTH_ROUND_MAX_ITER = 1000  # sparse-fit iterations of one round (rounds end after a converged one)


# --------------------------------------------------------------------------------------------
# Regression front ends
# --------------------------------------------------------------------------------------------


@dataclass
class _Solution:
    basis: Basis
    active: np.ndarray
    alpha: np.ndarray
    beta: float
    mu: np.ndarray
    Sigma: np.ndarray
    log_evidence: float
    trace: list[float]
    converged: bool
    n_iter: int
    notes: list[str] = field(default_factory=list)
    var_t: float = 1.0
    search_runs: int = 0
    width_rounds: int = 0
    width_on_bounds: tuple[int, int] = (0, 0)  # learned widths on their lower, upper bounds
    gp_route: GPWidths | None = None  # the GP whose widths were taken (widths_from_gp)


@dataclass(frozen=True)
class _Run:
    """One run of the fast (TF03) or MacKay (T01 eqs. 44, 46) loop: the bases in the model,
    their hyperparameters and weight posterior (T01 eqs. 12-13), the log-evidence trace."""

    active: np.ndarray
    alpha: np.ndarray
    beta: float
    mu: np.ndarray
    Sigma: np.ndarray
    trace: list[float]
    converged: bool
    n_iter: int
    n_aligned: int = 0  # candidates set aside as duplicates of bases in the model (fast)


def _prior(problem) -> GammaPrior:
    return problem.prior if problem.prior is not None else GammaPrior()


class _Design:
    """The regression data as the design in memory (the classic RVM: a kernel at every
    training input), with the same interface as
    :class:`~sparsebayes.inference.rvm.statistics.GramStatistics`."""

    def __init__(self, basis: Basis, X: np.ndarray, t: np.ndarray) -> None:
        check_memory(8.0 * X.shape[0] * basis.n_columns,
                     f"the {X.shape[0]} x {basis.n_columns} design matrix")
        self.Phi = basis.design(X)
        self.t, self.n = t, t.size
        self.Phit = self.Phi.T @ t
        self.var_t = float(np.var(t))
        self.symmetric_block = _symmetric_block(basis, X)
        self._G = None
        self._sq = np.einsum("nm,nm->m", self.Phi, self.Phi)

    def products(self, beta: float) -> DenseProducts:
        return DenseProducts(self.Phi, self.t, np.full(self.n, beta), self.symmetric_block,
                             diag=beta * self._sq)

    def column_sq_norms(self) -> np.ndarray:
        return self._sq.copy()

    def gram(self, active) -> np.ndarray:
        if self.Phi.shape[1] > 5000:  # MacKay's full Gram matrix would be too large
            return self.Phi[:, active].T @ self.Phi[:, active]
        if self._G is None:
            self._G = self.Phi.T @ self.Phi
        return self._G[np.ix_(active, active)]

    def rss(self, active, mu: np.ndarray) -> float:
        r = self.t - self.Phi[:, active] @ mu
        return float(r @ r)


class _MaskedProducts(DenseProducts):
    """:class:`DenseProducts` of a design with some rows left out: their precisions are zero
    (``B = beta diag(keep)``), so every product with ``B`` drops them without a copy of the
    design. ``cached = (columns, Phi^T B Phi[:, columns])`` of the rows kept, known in
    advance (the state's first columns, downdated from the full data's)."""

    def __init__(self, Phi, t, keep, beta, symmetric_block, diag, PhiBt, cached) -> None:
        super().__init__(Phi, t, beta * keep, symmetric_block, diag=diag, PhiBt=PhiBt)
        self.keep = keep
        self.n = int(keep.sum())
        self._cached = cached
        self._kept = int(np.argmax(keep > 0))  # b there is the current beta

    def columns(self, idx, out: np.ndarray) -> None:
        cols, cross = self._cached
        if len(idx) == len(cols) and np.array_equal(idx, cols):
            out[...] = cross
        else:
            super().columns(idx, out)

    def rss(self, act, mu: np.ndarray) -> float:
        r = self.t - self.Phi[:, act] @ mu
        return float(r @ (self.keep * r))

    def logdet_b(self) -> float:
        return self.n * float(np.log(self.b[self._kept]))


class _DesignWithout:
    """The classic design (:class:`_Design`) without the rows ``out``: the sufficient
    statistics downdated by them (``Phi^T t - Phi_out^T t_out``, column norms, Gram blocks)
    and products that weight them by zero; for leave-one-out and K-fold refits."""

    def __init__(self, full: _Design, out: np.ndarray, active: np.ndarray,
                 full_cross: np.ndarray) -> None:
        self.full, self.Phi, self.t = full, full.Phi, full.t
        self.keep = np.ones(full.n)
        self.keep[out] = 0.0
        self.n = int(full.n - len(out))
        self._out = full.Phi[out]
        self.Phit = full.Phit - self._out.T @ full.t[out]
        self._sq = full.column_sq_norms() - np.einsum("rm,rm->m", self._out, self._out)
        kept = full.t[self.keep > 0]
        self.var_t, self.tt = float(np.var(kept)), float(kept @ kept)
        self.symmetric_block = full.symmetric_block
        self._active = active
        self._cross = full_cross - self._out.T @ self._out[:, active]

    def products(self, beta: float) -> DenseProducts:
        return _MaskedProducts(self.Phi, self.t, self.keep, beta, self.symmetric_block,
                               beta * self._sq, beta * self.Phit,
                               (self._active, beta * self._cross))

    def column_sq_norms(self) -> np.ndarray:
        return self._sq.copy()

    def gram(self, active) -> np.ndarray:
        P = self._out[:, active]
        return self.full.gram(active) - P.T @ P

    def rss(self, active, mu: np.ndarray) -> float:
        r = self.t - self.Phi[:, active] @ mu
        return float(r @ (self.keep * r))


def _data(problem, basis: Basis):
    """The data as the design (``centres=None``) or as its sufficient statistics (a
    dictionary: O(M^2) memory, chunked or a Dask map-reduce)."""
    if problem.centres is None:
        return _Design(basis, problem.X, problem.t)
    check_memory(8.0 * (2 * basis.n_columns**2 + 2 * chunk_rows(basis.n_columns)
                        * basis.n_columns), f"the statistics of {basis.n_columns} columns")
    stats = gram_statistics(basis, problem.X, problem.t)
    if not stats.var_t > 0:
        raise ValueError("t is constant: there is nothing to regress")
    return stats


def _noise_update(n: int, rss: float, gamma: np.ndarray, prior: GammaPrior, beta_max: float
                  ) -> float:
    """T01 eq. (46): ``sigma^2 = (||t - Phi mu||^2 + 2d) / (N - sum(gamma) + 2c)``."""
    beta = (n - gamma.sum() + 2 * prior.c) / (rss + 2 * prior.d)
    return float(min(max(beta, 1e-300), beta_max))


def _run_fast(data, prior, beta, estimate_noise, beta_max, max_iter, tol, warm=None,
              policy=None):
    """Tipping & Faul's loop for regression on ``data`` (the design or its statistics).

    The design is used as it is (no column scaling: the flat-prior evidence, the Cholesky
    accuracy and the relative thresholds are all invariant to it, and a symmetric kernel
    block stays symmetric for :class:`DenseProducts`' ``symmetric_block``).
    Each iteration takes the action with the largest gain (TF03 §4.1's greedy choice). With
    the flat prior, a re-estimate that gains less than ``NEWTON_GAIN`` is replaced by one
    Newton step on every ``ln alpha`` and ``ln beta`` of the model
    (:meth:`SequentialSparseBayes.newton_step`): re-estimating overlapping bases one at a
    time converges linearly at a rate near 1 (thousands of tiny alternating steps on a
    dense 1-D sinc). Converged when that step is below ``tol`` and nothing is to be added
    or deleted: a stationary point of the evidence in ``alpha`` and the noise. (Other
    priors: converged when nothing is to be added or deleted and every re-estimate changes
    ``ln alpha`` by less than ``tol``, the noise settled.) The noise is held at its initial
    value for ``NOISE_WAIT`` iterations (or until the alphas converge), then re-estimated
    (T01 eq. 46) at every ``NOISE_EVERY``-th iteration (every ``M / NOISE_SHARE``-th with
    ``M`` bases in the model, if more: each change taken is an exact O(N M^2) recompute, the
    cost of ~M alpha steps, so its share of the time stays bounded), taken when ``ln beta``
    moved more than ``NOISE_STEP``, and at convergence (a change above ``tol`` in ``ln beta``
    cancels it); and in every Newton step.
    Candidates nearly collinear with a basis in the model (cosine above ``ALIGNMENT_SKIP``,
    SparseBayes v2's alignment test) are set aside: on dense inputs they would only move a
    centre by a tiny hop each (add, trade the weight, delete) — hundreds of iterations that
    grow with N. For at most ``LOCAL_SEARCH_MAX_COLUMNS`` candidates they come back once
    the rest has converged, so the result is also stationary with respect to them.
    """
    start = {}
    if warm is not None:
        start = {"active": list(warm[0]), "alpha": np.array(warm[1], dtype=float)}
        if len(warm) > 2:  # the noise level the warm state was converged at
            beta = warm[2]
    if policy is not None:
        start["policy"] = policy
    state = SequentialSparseBayes(a_prior=prior.a, b_prior=prior.b,
                                  products=data.products(beta), alignment_max=ALIGNMENT_SKIP,
                                  batch_skips=True, **start)
    newton = NEWTON_GAIN if state.flat else 0.0
    refine = state.diag.size <= LOCAL_SEARCH_MAX_COLUMNS
    noise = Noise(data.n, beta, prior.c, prior.d, beta_max) if estimate_noise else None
    noise_from = NOISE_WAIT + 1
    trace = [state.log_evidence()]
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        hold = estimate_noise and it < noise_from
        action, gain, done = state.step(tol, newton, None if hold else noise)
        if action == "newton" and noise is not None:
            beta = noise.beta
        if gain:
            trace.append(trace[-1] + gain)
        if done and hold:  # converged at the initial noise: its turn now
            noise_from, hold = it, False
        if estimate_noise and not hold and action != "newton" and (
                it == noise_from or done
                or it % max(NOISE_EVERY, len(state.active) // NOISE_SHARE) == 0):
            new_beta = _noise_update(data.n, state.rss(), state.gamma(), prior, beta_max)
            if abs(np.log(new_beta / beta)) > (tol if done else NOISE_STEP):
                state.rescale(new_beta / beta)
                beta = noise.beta = new_beta
                trace.append(state.log_evidence())
                done = False
        if done and state.alignment_max < ALIGNMENT_MAX and refine:  # set-aside ones back
            state.alignment_max = ALIGNMENT_MAX
            state.aligned = {i: p for i, p in state.aligned.items()
                             if state.is_aligned(i) is not None}
            done = not state.switch_pending()
        if done:
            state.recompute()
            converged = True
            break
    trace.append(state.log_evidence())
    act = np.asarray(state.active)
    return _Run(act, state.alpha.copy(), beta, state.mu, state.Sigma, trace, converged, it,
                state.n_degenerate())


def _escape_local_optima(run, fitted, max_rounds: int = 3):
    """Local search over the fast algorithm's optima (it stops at the first model no single
    add, delete or re-estimate improves, TF03 §4, which depends on the order the bases came
    in): for each basis in the model, converge again without it (``Policy.tabu``), then with
    it allowed back, and keep the result if its evidence is higher; repeat while that
    helps (at most ``max_rounds`` improvements; a run that did not converge is not kept).
    ``run(warm, tabu)`` runs the algorithm and
    returns :func:`_run_fast`'s :class:`_Run`. Returns the best run (its iteration count the
    total of every run) and the number of runs."""
    best, runs, iters = fitted, 0, fitted.n_iter
    for _ in range(max_rounds):
        act, alpha, beta = best.active, best.alpha, best.beta
        for i in act:
            keep = act != i
            without = run((act[keep], alpha[keep], beta), {int(i)})
            back = run((without.active, without.alpha, without.beta), set())
            runs += 2
            iters += without.n_iter + back.n_iter
            top = best.trace[-1]
            if back.converged and back.trace[-1] > top + 1e-8 * max(1.0, abs(top)):
                best = back
                break
        else:
            break
    return replace(best, n_iter=iters), runs


def _converge_fast(data, prior, beta, estimate_noise, beta_max, max_iter, tol, warm,
                   local_search, n_columns: int, learn_width: bool = False,
                   search_max_iter: int | None = None):
    """:func:`_run_fast`, then :func:`_escape_local_optima` when ``local_search`` says so
    (None: for bases of at most ``LOCAL_SEARCH_MAX_COLUMNS`` columns whose first optimum
    keeps at most ``LOCAL_SEARCH_MAX_KEPT``), its runs stopped at ``search_max_iter``
    iterations (default ``max_iter``). Returns the fitted :class:`_Run` and the search's
    runs."""
    fitted = _run_fast(data, prior, beta, estimate_noise, beta_max, max_iter, tol, warm)
    # a proper prior on alpha keeps every basis (T01 App. A): nothing to search
    search = local_search if local_search is not None else (
        n_columns <= LOCAL_SEARCH_MAX_COLUMNS and fitted.active.size <= LOCAL_SEARCH_MAX_KEPT)
    if not search or learn_width or prior.a != 0 or np.any(prior.b):
        return fitted, 0

    def run(start, tabu):
        return _run_fast(data, prior, start[2], estimate_noise, beta_max,
                         search_max_iter or max_iter, tol, start, Policy(tabu=tabu))

    return _escape_local_optima(run, fitted)


def _width_gradient(b: Basis, X, t, cols, mu, Sigma, beta: float) -> np.ndarray:
    """``dL/d ln r`` over the kernel widths of the columns ``cols`` of basis ``b`` at weight
    posterior (``mu``, ``Sigma``): T01 App. C eqs. (53)-(57), ``dL/dPhi = D = beta [(t - Phi
    mu) mu^T - Phi Sigma]`` (kernel columns only) through the kernel's own
    ``log_width_gradient``, in row chunks so the N x M_t design is never held."""
    kidx = b.kernel_index()[cols]
    kern = np.flatnonzero(kidx >= 0)
    grad = np.zeros(np.size(b.kernel.width))
    if not kern.size:
        return grad
    C = b.centres[kidx[kern]]
    step = chunk_rows(cols.size * (X.shape[1] + 2))
    for lo in range(0, X.shape[0], step):
        Xc, tc = X[lo : lo + step], t[lo : lo + step]
        Phi = b.design(Xc, columns=cols)
        D = beta * (np.outer(tc - Phi @ mu, mu[kern]) - Phi @ Sigma[:, kern])
        grad += b.kernel.log_width_gradient(Xc, C, Phi[:, kern], D)
    return grad


def _joint_objective(p, basis, X, t, cols, n_width: int, beta_fixed: float | None):
    """Minus the log evidence (T01 eq. 15) of the columns ``cols`` and its gradient in
    ``p = [ln r (n_width), ln alpha (cols.size), ln beta (unless beta_fixed)]``: the widths
    by T01 App. C (:func:`_width_gradient`), ``dL/d ln alpha_i = 1/2 (1 - alpha_i (mu_i^2 +
    Sigma_ii))`` and ``dL/d ln beta = 1/2 [N - beta (||t - Phi mu||^2 + tr(Sigma Phi^T
    Phi))]`` (App. A, eqs. 42 and 45). Two passes over row chunks: the statistics of the
    columns, then the widths' gradient."""
    alpha = np.exp(p[n_width:n_width + cols.size])
    beta = beta_fixed if beta_fixed is not None else float(np.exp(p[-1]))
    b = with_log_width(basis, p[:n_width])
    stats = gram_statistics(b, X, t, columns=cols)
    mu, Sigma, L = gram_weight_posterior(stats.G, stats.Phit, alpha, beta)
    rss = stats.rss(np.arange(cols.size), mu)
    value = evidence_from_factor(stats.n, beta, alpha, L, rss, mu)
    grad = [_width_gradient(b, X, t, cols, mu, Sigma, beta),
            0.5 * (1.0 - alpha * (mu**2 + np.diag(Sigma)))]
    if beta_fixed is None:
        grad.append([0.5 * (stats.n - beta * (rss + np.sum(Sigma * stats.G)))])
    return -value, -np.concatenate(grad)


def _joint_width_step(basis: Basis, X, t, active, alpha, beta: float, learn_noise: bool,
                      log_bounds, beta_max: float) -> tuple[Basis, np.ndarray, float, float]:
    """One L-BFGS-B step of :func:`_joint_objective` from the round's optimum: the log widths
    within ``log_bounds``, the log alpha of the bases ``active`` within
    ``WIDTH_STEP_LOG_BOX`` of their values and, with ``learn_noise``, the log noise
    precision up to ``ln beta_max`` (else ``beta`` is held); at most ``WIDTH_STEP_MAX_ITER``
    iterations (``WIDTH_STEP_MAX_ITER_TALL`` with 4x more rows than candidate columns: each
    evaluation is a pass over the rows). Returns the basis at the new widths, alpha, beta
    and the log evidence there."""
    log_width = np.log(np.atleast_1d(np.asarray(basis.kernel.width, float)))
    n_width, log_alpha = log_width.size, np.log(alpha)
    res = optimize.minimize(
        _joint_objective,
        np.concatenate([log_width, log_alpha, [np.log(beta)] if learn_noise else []]),
        jac=True, method="L-BFGS-B",
        args=(basis, X, t, active, n_width, None if learn_noise else beta),
        bounds=(list(log_bounds) + [(v - WIDTH_STEP_LOG_BOX, v + WIDTH_STEP_LOG_BOX)
                                    for v in log_alpha]
                + ([(None, np.log(beta_max))] if learn_noise else [])),
        options={"maxiter": WIDTH_STEP_MAX_ITER_TALL if X.shape[0] > 4 * basis.n_columns
                 else WIDTH_STEP_MAX_ITER, "ftol": 1e-15, "gtol": 1e-9})
    alpha = np.exp(res.x[n_width:n_width + active.size])
    if learn_noise:
        beta = min(float(np.exp(res.x[-1])), beta_max)
    return with_log_width(basis, res.x[:n_width]), alpha, beta, -float(res.fun)


def widths_on_bounds(width, log_bounds) -> tuple[int, int]:
    """How many widths lie on the lower and on the upper of their ``log_bounds`` (within
    1e-6 relative)."""
    lw = np.log(np.atleast_1d(np.asarray(width, dtype=float)))
    lo, hi = np.array(log_bounds, dtype=float).reshape(-1, 2).T
    return int(np.sum(lw <= lo + 1e-6)), int(np.sum(lw >= hi - 1e-6))


# --------------------------------------------------------------------------------------------
# Where the ARD widths start: the tied-alpha model, isotropic first
# --------------------------------------------------------------------------------------------

TIED_MAX_KERNEL_COLUMNS = 300  # kernel columns of the tied model (evenly spaced if more)
TIED_GRID = 2.0 ** np.arange(-2.0, 2.01)  # isotropic starts, in units of sqrt(d) sd_k
TIED_STEP = 1.0  # largest change of a log parameter in one L-BFGS-B run (_boxed_lbfgs)
TIED_MAX_BOXES = 30


def _tied_columns(basis: Basis) -> np.ndarray:
    """Columns of the tied model: every non-kernel column and at most
    ``TIED_MAX_KERNEL_COLUMNS`` kernel columns, evenly spaced (deterministic)."""
    kidx = basis.kernel_index()
    kern = np.flatnonzero(kidx >= 0)
    take = np.unique(np.linspace(0, kern.size - 1, min(kern.size, TIED_MAX_KERNEL_COLUMNS))
                     .round().astype(int)) if kern.size else np.empty(0, int)
    return np.sort(np.concatenate([np.flatnonzero(kidx < 0), kern[take]]))


def _tied_objective(p, kernel, basis, X, t, cols, scale=None, width_grad=True):
    """Minus the log evidence per data point, and its gradient, of the model with every
    column in ``cols`` and one shared precision for the kernel columns (``alpha_k``) and
    one for the others (``alpha_o``): T01 eq. (15) with ``A`` of two values, a Gaussian
    process with covariance ``Phi A^-1 Phi^T`` (no sparsity, so no sparse local optima).

    ``p = [ln r (one per input), ln lambda_k, ln lambda_o, ln beta]`` with the precisions
    relative to the noise, ``alpha_g = beta lambda_g`` (``H = beta (Phi^T Phi + Lambda)``:
    bounding ``lambda`` bounds its condition number); or, with ``scale`` (one value per
    input), ``p[0] = ln c`` for the isotropic widths ``r = c scale`` (``width_grad=False``:
    the widths' gradient is left at 0, for a search at fixed widths). Gradients: widths by
    T01 App. C (:func:`_width_gradient`); by App. A eqs. (42) and (45) summed over each
    group, ``dL/d ln alpha_g = 1/2 sum_g e_i`` with ``e_i = 1 - alpha_i (mu_i^2 +
    Sigma_ii)`` and ``dL/d ln beta = 1/2 [N - beta (||t - Phi mu||^2 + tr(Sigma Phi^T
    Phi))]``, so ``dL/d ln lambda_g = dL/d ln alpha_g`` and ``dL/d ln beta`` at fixed
    ``lambda`` adds ``1/2 sum_i e_i``."""
    nw = 1 if scale is not None else X.shape[1]
    log_width = p[0] + np.log(scale) if scale is not None else p[:nw]
    lam_k, lam_o, beta = np.exp(p[nw:])
    b = basis.with_kernel(kernel.with_width(np.exp(log_width)))
    stats = gram_statistics(b, X, t, columns=cols)
    is_k = b.kernel_index()[cols] >= 0
    alpha = beta * np.where(is_k, lam_k, lam_o)
    mu, Sigma, L = gram_weight_posterior(stats.G, stats.Phit, alpha, beta)
    rss = stats.rss(np.arange(cols.size), mu)
    value = evidence_from_factor(stats.n, beta, alpha, L, rss, mu)
    g_w = np.zeros(X.shape[1])
    if width_grad:
        g_w = _width_gradient(b, X, t, cols, mu, Sigma, beta)
    e = 1.0 - alpha * (mu**2 + np.diag(Sigma))
    g_beta = 0.5 * (stats.n - beta * (rss + np.sum(Sigma * stats.G)) + e.sum())
    grad = np.concatenate([[g_w.sum()] if scale is not None else g_w,
                           [0.5 * e[is_k].sum(), 0.5 * e[~is_k].sum(), g_beta]])
    return -value / stats.n, -grad / stats.n


def _boxed_lbfgs(fun, p, bounds, args):
    """L-BFGS-B run in boxes of ``TIED_STEP`` around its start, each from where the last
    stopped, until the optimum lies inside one: a trust-region continuation. A single run
    takes ``p - grad`` as its first trial point, which jumped past barriers (an input
    switched off for good, a noise-free interpolating model)."""
    lo, hi = np.array(bounds, dtype=float).T
    for _ in range(TIED_MAX_BOXES):
        box = list(zip(np.maximum(lo, p - TIED_STEP), np.minimum(hi, p + TIED_STEP)))
        res = optimize.minimize(fun, p, jac=True, method="L-BFGS-B", args=args, bounds=box)
        edge = (np.abs(res.x - p) > TIED_STEP * (1 - 1e-6))
        p = res.x
        if not edge.any():
            break
    return res


def _tied_start(problem, basis: Basis, log_bounds, beta0: float):
    """The start of the sparse fit with ARD widths, whatever widths the problem holds: the
    maximum of the tied model's evidence (:func:`_tied_objective`), reached by continuation
    from one width shared by all inputs. Returns the log widths, the tied model's columns,
    their precisions and the noise precision: the sparse fit starts from this dense model
    (every column in, as Tipping's re-estimation does) and prunes it.

    1. Isotropic in standardised units, ``r_k = c sd_k``: the best ``c`` of ``TIED_GRID x
       sqrt(d)`` (``E||x - x'||^2 = 2 d`` there), the precisions and noise maximised at
       each, then ``c`` refined (a one-dimensional search, so the grid makes it global).
    2. From there every width free (L-BFGS-B within ``log_bounds``).

    Started at separate widths, the sparse fit (or this model) can drop a relevant input
    for good: a wide width makes an input's effect invisible (the gradient on ``ln r``
    vanishes like ``r^-2``) and an intermediate one is worse than none (a barrier; seen on
    Friedman #1's quadratic input). From a shared width the inputs separate smoothly.

    The searches probe extreme precisions (nearly collinear wide columns with tiny alpha),
    where the factorisation needs jitter: its warning is dropped here, as this model is only
    the start; the sparse fit warns about its own.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "the posterior precision", NumericalWarning)
        return _tied_search(problem, basis, log_bounds, beta0)


def _tied_search(problem, basis: Basis, log_bounds, beta0: float):
    """:func:`_tied_start` without its warning filter."""
    X, t = problem.X, problem.t
    d = X.shape[1]
    kernel = basis.kernel
    cols = _tied_columns(basis)
    sd = np.std(X, axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    lo, hi = np.array(log_bounds).T
    # lambda = alpha / beta within 1e-9 and 1e9 times the largest possible diagonal of
    # Phi^T Phi (kernel columns are at most 1): cond(H) stays below ~1e9 M; the noise
    # between sd(t) / 10 (as in _solve) and the floor of _solve, 1e-3 sd(t)
    extra = basis.design(X, columns=np.flatnonzero(basis.kernel_index() < 0))
    scale_g = np.log(X.shape[0] * max(1.0, float(np.max(extra**2, initial=0.0))))
    lam = (scale_g - 9 * np.log(10), scale_g + 9 * np.log(10))
    var_t = float(np.var(t))
    lb = np.log(beta0)
    noise = (lb, lb) if problem.noise_sd is not None else (
        np.log(1.0 / var_t), np.log(BETA_MAX_FACTOR / var_t))
    # the bias and extra columns (the mean function) at the weakest prior, as a GP's mean:
    # with their precision free, wide kernels could carry the mean of t instead
    tail = [lam, (lam[0], lam[0]), noise]
    p_tail = np.array([scale_g - 3 * np.log(10), lam[0], float(np.clip(lb, *noise))])
    c_lo, c_hi = np.max(lo - np.log(sd)), np.min(hi - np.log(sd))  # c with r in bounds
    if c_lo > c_hi:
        c_lo = c_hi = float(np.log(np.sqrt(d)))
    args = (kernel, basis, X, t, cols)
    best = None
    for c in np.clip(np.log(np.sqrt(d) * TIED_GRID), c_lo, c_hi):
        res = _boxed_lbfgs(_tied_objective, np.r_[c, p_tail], [(c, c)] + tail,
                           args + (sd, False))
        if best is None or res.fun < best.fun:
            best = res
    iso = _boxed_lbfgs(_tied_objective, best.x, [(c_lo, c_hi)] + tail, args + (sd,))
    p = np.r_[np.clip(iso.x[0] + np.log(sd), lo, hi), iso.x[1:]]
    p = _boxed_lbfgs(_tied_objective, p, list(zip(lo, hi)) + tail, args).x
    lam_k, lam_o, beta = np.exp(p[d:])
    alpha = beta * np.where(basis.kernel_index()[cols] >= 0, lam_k, lam_o)
    return p[:d], cols, alpha, float(beta)


def check_basis(problem) -> None:
    """Warn about a cause of a singular design: duplicate inputs (identical kernel columns).
    With a dictionary the centres are checked (the inputs may be a Dask array). The other
    cause, a Gaussian width far beyond the input range, is :func:`check_width`'s (every
    method's, called by ``fit``)."""
    X = problem.X if problem.centres is None else problem.centres
    what = "X" if problem.centres is None else "centres"
    n_dup = X.shape[0] - np.unique(X, axis=0).shape[0]
    if n_dup:
        warn_user(f"{what} has {n_dup} duplicate rows: their kernel columns are identical, "
                  "so at most one of each can become a relevance vector", NumericalWarning)


def _symmetric_block(basis: Basis, X: np.ndarray) -> tuple[int, int] | None:
    """Columns of the design whose N x N block is symmetric: a symmetric kernel
    (``k(x, c) = k(c, x)``) centred on exactly the training inputs."""
    C = basis.centres
    if (C.shape != X.shape or not basis.kernel.symmetric
            or not (C is X or np.array_equal(C, X))):
        return None
    return basis.kernel_offset, basis.kernel_offset + basis.n_kernel


def _log_width_bounds(width_bounds, X: np.ndarray, x0: np.ndarray) -> list[tuple[float, float]]:
    """L-BFGS-B bounds on the log widths; they always contain the start ``x0``."""
    wb = None
    if isinstance(width_bounds, str):  # "data"
        wb = default_width_bounds(X, ard=x0.size > 1)
    elif width_bounds is not None:
        wb = np.broadcast_to(np.asarray(width_bounds, dtype=float), (x0.size, 2))
    if wb is None:  # a factor e^7 either way from the start
        return [(x - 7.0, x + 7.0) for x in x0]
    lo = np.minimum(np.log(wb[:, 0]), x0)
    hi = np.maximum(np.log(wb[:, 1]), x0)
    return list(zip(lo.tolist(), hi.tolist()))


def _ard_log_bounds(width_bounds, X: np.ndarray) -> list[tuple[float, float]]:
    """L-BFGS-B bounds on the log ARD widths, independent of the start: ``width_bounds``,
    or (None, "data") :func:`default_width_bounds`; a factor ``e^7`` either way from
    ``sqrt(d) sd_k`` if an input has a single value."""
    d = X.shape[1]
    if width_bounds is None or isinstance(width_bounds, str):
        wb = default_width_bounds(X, ard=True)
    else:
        wb = np.asarray(width_bounds, dtype=float).reshape(-1, 2)
        if wb.shape[0] not in (1, d):
            raise ValueError(f"width_bounds has {wb.shape[0]} (low, high) pairs but X has {d} "
                             "inputs: give one pair, or one per input")
        wb = np.broadcast_to(wb, (d, 2))
    if wb is None:
        sd = np.std(X, axis=0)
        mid = np.log(np.sqrt(d) * np.where(sd > 0, sd, 1.0))
        return [(m - 7.0, m + 7.0) for m in mid]
    return list(zip(np.log(wb[:, 0]).tolist(), np.log(wb[:, 1]).tolist()))


def check_width_bounds(width_bounds) -> None:
    if width_bounds is None or (isinstance(width_bounds, str) and width_bounds == "data"):
        return
    wb = np.asarray(width_bounds, dtype=float) if not isinstance(width_bounds, str) else None
    if (wb is None or wb.shape[-1:] != (2,) or wb.ndim > 2 or not np.all(np.isfinite(wb))
            or np.any(wb[..., 0] <= 0) or np.any(wb[..., 0] >= wb[..., 1])):
        raise ValueError("width_bounds must be None, 'data' or (low, high) with 0 < low < "
                         f"high (or one such pair per input dimension), got {width_bounds!r}")


def _solve(problem, *, algorithm: str, max_iter: int, tol: float,
           max_rounds: int | None = None, width_bounds=None,
           local_search: bool | None = False, widths_from_gp: bool = False) -> _Solution:
    """Run ``algorithm`` ("fast" or "mackay"). With ``learn_width`` and ``widths_from_gp``
    (one width per input): the widths of a GP's type-II ML (:func:`~.widths.gp_widths`), its
    noise the start of the RVM's, then one sparse fit at those widths held fixed. Else,
    rounds of: the sparse fit
    (warm from the last round's bases, alpha and noise; the fast algorithm for at most
    ``WIDTH_ROUND_MAX_ITER`` iterations), then one joint L-BFGS-B step (at most
    ``WIDTH_STEP_MAX_ITER`` iterations, ``WIDTH_STEP_MAX_ITER_TALL`` when the rows outnumber
    the candidate columns 4 to 1) on the log widths,
    the log alpha of the bases in the model and the log noise precision
    (:func:`_joint_objective`; Tipping §4.3 interleaves the widths with the sparse fit in
    the same way), the widths within ``width_bounds`` (see :func:`fit_fast`); until a
    converged sparse fit raises the log evidence by less than ``WIDTH_ROUND_GAIN`` nats or
    ``WIDTH_ROUND_RTOL`` times its magnitude, whichever is larger (so
    the result is a fixed point of the sparse fit at the widths returned), or
    after ``max_rounds`` (default ``WIDTH_MAX_ROUNDS``) sparse fits (a NumericalWarning then,
    when the last round still gained more than ``WIDTH_ROUND_WARN`` nats). One
    width per input (ARD): the rounds start from :func:`_tied_start`, not from the problem's
    widths, so the result does not depend on them."""
    max_rounds = WIDTH_MAX_ROUNDS if max_rounds is None else max_rounds
    prior = _prior(problem)
    X, t = problem.X, problem.t
    estimate_noise = problem.noise_sd is None
    basis = problem.basis
    warm = None
    trace: list[float] = []
    notes: list[str] = []
    total_iter = 0
    search_runs = 0
    log_bounds = None
    beta = var_t = None
    route = None
    if problem.learn_width and basis.kernel.is_ard:
        log_bounds = _ard_log_bounds(width_bounds, X)
        route = gp_widths(problem, log_bounds) if widths_from_gp else None
        if route is not None:
            log_width, beta = route.log_width, 1.0 / route.noise_sd**2
        else:
            beta = 1.0 / (problem.noise_sd**2 if not estimate_noise else 0.1 * np.var(t))
            log_width, cols, alpha, beta = _tied_start(problem, basis, log_bounds, beta)
            warm = (cols, alpha, beta)
        basis = with_log_width(basis, log_width)
    elif problem.learn_width:  # they contain the user's start
        log_bounds = _log_width_bounds(width_bounds, X, np.log(np.atleast_1d(
            np.asarray(basis.kernel.width, dtype=float))))
    width_rounds = problem.learn_width and route is None  # rounds of fit and width step
    rounds, width_converged, last, gain = 0, not width_rounds, -np.inf, np.inf
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (it is reported)
        data = _data(problem, basis)
        if var_t is None:
            var_t = data.var_t
            beta_max = BETA_MAX_FACTOR / var_t
            if beta is None:
                beta = 1.0 / problem.noise_sd**2 if not estimate_noise else 1.0 / (0.1 * var_t)
            beta = min(beta, beta_max)
        if algorithm == "fast":
            # with learned widths a round's sparse fit stops after WIDTH_ROUND_MAX_ITER
            # iterations (the joint step and the next round go on from there)
            fitted, runs = _converge_fast(data, prior, beta, estimate_noise, beta_max,
                                          min(max_iter, WIDTH_ROUND_MAX_ITER)
                                          if width_rounds else max_iter,
                                          tol, warm, local_search,
                                          problem.basis.n_columns, width_rounds)
            search_runs += runs
            if fitted.n_aligned:
                notes.append(duplicates_note(fitted.n_aligned, problem.basis.kernel))
        else:
            fitted = _run_mackay(data, prior, beta, estimate_noise, beta_max, max_iter, tol,
                                 warm)
        del data
        active, alpha, beta = fitted.active, fitted.alpha, fitted.beta
        trace += fitted.trace
        total_iter += fitted.n_iter
        if not width_rounds:
            break
        gain, last = fitted.trace[-1] - last, fitted.trace[-1]
        if gain < max(WIDTH_ROUND_GAIN, WIDTH_ROUND_RTOL * abs(last)) and fitted.converged:
            width_converged = True
            break
        if rounds == max_rounds:
            break
        basis, alpha, beta, step_evidence = _joint_width_step(
            basis, X, t, active, alpha, beta, estimate_noise, log_bounds, beta_max)
        trace.append(step_evidence)
        warm = (active, alpha, beta)
    if not width_converged and gain > WIDTH_ROUND_WARN:
        notes.append(f"the kernel widths were still moving after max_rounds={max_rounds} "
                     f"rounds of sparse fit and width step (the last raised the log evidence "
                     f"by {gain:.3g} nats)")
    on_bounds = (0, 0)
    if problem.learn_width:
        on_bounds = widths_on_bounds(basis.kernel.width, log_bounds)
    if problem.centres is None:
        Phi_act = basis.design(X, columns=active)
        mu, Sigma, _ = weight_posterior(Phi_act, t, alpha, beta)
        logev = log_evidence(Phi_act, t, alpha, beta)
    else:
        stats = gram_statistics(basis, X, t, columns=active)
        mu, Sigma, _ = gram_weight_posterior(stats.G, stats.Phit, alpha, beta)
        logev = gram_log_evidence(stats.G, stats.Phit, stats.tt, stats.n, alpha, beta)
    return _Solution(basis, active, alpha, beta, mu, Sigma, logev, trace, fitted.converged,
                     total_iter, notes, var_t, search_runs, rounds if width_rounds else 0,
                     on_bounds, route)


class EvidenceRefits:
    """Warm-started refits of an ``evidence`` or ``evidence-mackay`` regression result
    without some rows, for exact leave-one-out and K-fold cross-validation.

    Each refit runs the fit's algorithm (Tipping & Faul 2003, or T01 eqs. 16-18
    re-estimation) on the data without the rows ``out``, started from the full-data optimum
    (its basis functions, ``alpha`` and noise); the fast algorithm's local search runs
    where the fit's does (``local_search`` as in :func:`fit_fast`). The data enter through
    statistics downdated by the rows left out (``Phi^T t - Phi_out^T t_out``, ``Phi^T Phi -
    Phi_out^T Phi_out``, ``t^T t - t_out^T t_out``): the classic design is never copied, and
    a dictionary's ``G`` costs O(M^2) per refit. The candidate basis is the fit's (LOO
    leaves out a target, not a column). :meth:`fold` returns the refit's predictive log
    density (T01 eqs. 21-22) at the rows left out. Widths learned by the evidence are not
    re-learned here (see ``warm_refits_supported``). ``max_iter``, ``tol``,
    ``local_search``: default, the fit's (as passed to it, else the method's defaults)."""

    def __init__(self, post: xr.DataTree, *, max_iter: int | None = None,
                 tol: float | None = None, local_search: bool | None = None) -> None:
        if int(post.attrs.get("learn_width", 0)):
            raise ValueError("warm refits hold the basis fixed; a result with learned widths "
                             "is refitted cold")
        self.fast = post.attrs["method"] == "evidence"
        options = refit_options(post, fit_fast, max_iter=max_iter, tol=tol,
                                local_search=local_search) if self.fast else \
            refit_options(post, fit_mackay, max_iter=max_iter, tol=tol)
        check_iterations(options["max_iter"], options["tol"])
        self.max_iter, self.tol = int(options["max_iter"]), float(options["tol"])
        self.local_search = options.get("local_search")
        const = post["constant_data"]
        self.X = const["X"].values
        self.t = post["observed_data"]["t"].values
        self.basis, self.active = basis_from_posterior(post)
        g = post["gaussian_posterior"]
        self.alpha, self.beta = g["alpha"].values.copy(), float(g["beta"])
        self.prior = prior_from_posterior(post, GammaPrior())
        self.estimate_noise = not int(post.attrs.get("noise_fixed", 0))
        self.dictionary = "dictionary" in const
        if self.dictionary:
            self.stats = gram_statistics(self.basis, self.X, self.t)
        else:
            self.design = _Design(self.basis, self.X, self.t)
            self.cross = self.design.Phi.T @ self.design.Phi[:, self.active]

    def _without(self, out: np.ndarray):
        if self.dictionary:
            P = self.basis.design(self.X[out])
            s, to = self.stats, self.t[out]
            return GramStatistics(s.G - P.T @ P, s.Phit - P.T @ to, s.tt - float(to @ to),
                                  s.tsum - float(to.sum()), s.n - len(out)), P
        return (_DesignWithout(self.design, out, self.active, self.cross),
                self.design.Phi[out])

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """``log p(t_out | t_rest)`` under the method refitted without rows ``out``, and
        whether the refit converged."""
        out = np.asarray(out, dtype=int)
        data, P = self._without(out)
        beta_max = BETA_MAX_FACTOR / data.var_t
        beta = min(self.beta, beta_max)
        warm = (self.active, self.alpha, beta)
        with one_blas_thread():
            if self.fast:
                fitted, _ = _converge_fast(data, self.prior, beta, self.estimate_noise,
                                           beta_max, self.max_iter, self.tol, warm,
                                           self.local_search, self.basis.n_columns,
                                           search_max_iter=REFIT_SEARCH_MAX_ITER)
            else:  # every candidate back in, the pruned ones at MacKay's start
                alpha = np.maximum(1.0 / np.maximum(data.column_sq_norms(), 1e-300),
                                   START_CONDITION * beta)
                alpha[self.active] = self.alpha
                fitted = _run_mackay(data, self.prior, beta, self.estimate_noise, beta_max,
                                     self.max_iter, self.tol,
                                     (np.arange(alpha.size), alpha))
            active = fitted.active
            self.n_iter = int(fitted.n_iter)
            self.log_evidence = float(fitted.trace[-1]) if self.fast else gram_log_evidence(
                data.gram(active), data.Phit[active], data.tt, data.n, fitted.alpha,
                fitted.beta)
        pred = gaussian_predictive(P[:, active], fitted.mu, fitted.Sigma, fitted.beta)
        return pred.logpdf(self.t[out]), bool(fitted.converged)


class _GaussianPosterior:
    """The weight posterior of the Gaussian likelihood for :func:`~.mackay.reestimate`: T01
    eqs. (12)-(13) and the log evidence (eq. 7) in closed form, on the columns ``active``
    scaled to unit norm (``d`` their norms), the noise re-estimated by eq. (46) when
    ``estimate_noise``."""

    def __init__(self, data, active, d, beta, prior, estimate_noise, beta_max) -> None:
        self.data, self.active, self.d, self.beta = data, active, d, beta
        self.Phit = data.Phit / d
        self.prior, self.estimate_noise, self.beta_max = prior, estimate_noise, beta_max
        self.rss = np.nan

    def factors(self, alpha):
        da = self.d[self.active]
        return da, gram_weight_posterior(self.data.gram(self.active) / np.outer(da, da),
                                         self.Phit[self.active], alpha, self.beta)

    def at(self, alpha):
        da, (mu, Sigma, L) = self.factors(alpha)
        self.rss = self.data.rss(self.active, mu / da)
        return mu, np.diag(Sigma), evidence_from_factor(self.data.n, self.beta, alpha, L,
                                                        self.rss, mu)

    def reestimate(self, gamma) -> float:
        if not self.estimate_noise:
            return 0.0
        beta = _noise_update(self.data.n, self.rss, gamma, self.prior, self.beta_max)
        change, self.beta = abs(np.log(beta / self.beta)), beta
        return change

    def keep(self, keep) -> None:
        self.active = self.active[keep]


def _run_mackay(data, prior, beta, estimate_noise, beta_max, max_iter, tol, warm=None,
                prune_alpha=1e12):
    """Tipping (2001) re-estimation (:func:`~.mackay.reestimate`): alpha by (44) (= (16) for
    a = b = 0), noise by (46) (= (18)); a basis is pruned when its alpha exceeds
    ``prune_alpha`` (App. B.1), and when every one is, the model is empty (``t ~ N(0, 1/beta
    I)``, pure noise). Starts like scikit-learn's ARDRegression: alpha = 1, beta = 1 /
    var(t). The iteration runs on the columns scaled to unit norm (``alpha_i`` becomes
    ``alpha_i / ||phi_i||^2``): eqs. (12)-(18) and the evidence are invariant to the scaling,
    which keeps ``beta Phi^T Phi + A`` as well conditioned as the columns' angles allow (a
    cubic polynomial kernel on inputs near 100 has column norms ~1e13), and no starting
    alpha is below ``START_CONDITION * beta`` in those units (the first ``beta Phi^T Phi +
    A`` has a condition number below ~M / START_CONDITION)."""
    M = data.Phit.size
    d = np.sqrt(np.maximum(data.column_sq_norms(), 1e-300))
    if warm is None:
        if estimate_noise:
            beta = 1.0 / data.var_t
        active, alpha = np.arange(M), np.maximum(1.0 / d**2, START_CONDITION * beta)
    else:
        active = np.asarray(warm[0])
        alpha = np.asarray(warm[1], dtype=float) / d[active] ** 2
    posterior = _GaussianPosterior(data, active, d, beta, prior, estimate_noise, beta_max)
    da = d[active]
    res = reestimate(posterior, alpha, a=prior.a,
                     b=np.broadcast_to(prior.b, (M,))[active] * da**2, prune_at=prune_alpha,
                     scale=da**2, max_iter=max_iter, tol=tol)
    da, (mu, Sigma, _) = posterior.factors(res.alpha)
    return _Run(posterior.active, res.alpha * da**2, posterior.beta, mu / da,
                Sigma / np.outer(da, da), res.trace, res.converged, res.n_iter)


def _to_datatree(problem, sol: _Solution, *, method: str, seed, draws: int, chains: int,
                 optimise_seconds: float) -> xr.DataTree:
    """Evidence result: ``w`` holds independent draws from N(mu, Sigma) at the optimum;
    ``alpha``, ``beta`` are the type-II ML point values, constant across draws.
    ``optimise_seconds``: the time of the type-II ML optimisation alone (the result's draws
    and DataTree excluded)."""
    if not isinstance(draws, int | np.integer) or draws <= 0:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    if not isinstance(chains, int | np.integer) or chains <= 0:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    rng = np.random.default_rng(seed)
    w = gaussian_draws(sol.mu, sol.Sigma, (chains, draws), rng)
    loglik = None
    if pointwise_budget_ok(chains, draws, problem.t.shape[0]):
        Phi_act = sol.basis.design(np.asarray(problem.X), columns=sol.active)
        loglik = gaussian_draws_log_likelihood(np.asarray(problem.t), w, Phi_act, sol.beta)
    Mt = sol.active.size
    const = np.ones((chains, draws))
    posterior = {
        "w": w,
        "alpha": np.broadcast_to(sol.alpha, (chains, draws, Mt)).copy(),
        "beta": sol.beta * const,
        "noise_sd": const / np.sqrt(sol.beta),
    }
    kernel = sol.basis.kernel
    attrs = {
        "log_evidence": float(sol.log_evidence),
        "converged": int(sol.converged),
        "n_iter": int(sol.n_iter),
        "noise_fixed": int(problem.noise_sd is not None),
        "learn_width": int(problem.learn_width),
        "local_search_runs": int(sol.search_runs),
        "optimise_seconds": float(optimise_seconds),
        "hyperparameters": "point",  # w drawn from its Gaussian posterior N(mu, Sigma)
    }
    if loglik is None:
        attrs["log_likelihood_omitted"] = "size"  # more values than POINTWISE_MAX
    if "width" in kernel.parameters:
        attrs["width"] = np.atleast_1d(np.asarray(kernel.width, dtype=float))
    if problem.learn_width:
        attrs["width_rounds"] = int(sol.width_rounds)
        attrs["width_at_bound"], attrs["width_at_upper_bound"] = sol.width_on_bounds
        route = sol.gp_route
        attrs["width_route"] = "evidence" if route is None else route.route
        if route is not None:
            attrs["width_route_log_evidence"] = route.log_evidence
            attrs["width_route_seconds"] = route.seconds
            attrs["width_route_inducing"] = route.inducing
    return make_datatree(
        problem,
        basis=sol.basis,
        columns=sol.active,
        posterior=posterior,
        log_likelihood=loglik,
        sample_stats={"log_evidence": (("iteration",), np.asarray(sol.trace))},
        gaussian={"mu": sol.mu, "Sigma": sol.Sigma, "alpha": sol.alpha, "beta": sol.beta},
        attrs=attrs,
    )


def _widths_from_gp(problem, widths_from_gp: bool | None) -> bool:
    """``widths_from_gp`` checked, None resolved: True for learned widths, one per input, of
    a kernel that maps a GP's length scales to its widths."""
    kernel = problem.basis.kernel
    gp_ok = bool(problem.learn_width) and kernel.is_ard and kernel.has_gp_widths
    if widths_from_gp is None:
        return gp_ok
    if not isinstance(widths_from_gp, bool | np.bool_):
        raise TypeError(f"widths_from_gp must be None, True or False, got {widths_from_gp!r}")
    if widths_from_gp and problem.learn_width and not gp_ok:
        raise ValueError(
            "widths_from_gp=True takes one width per input from a GP's length scales: it "
            "needs a kernel with one width per input (ARD) that declares "
            f"width_from_length_scale, got {kernel.name!r} with width {kernel.width!r}; "
            "pass widths_from_gp=False")
    return bool(widths_from_gp)


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, width_bounds,
         local_search=False, widths_from_gp=None):
    if not isinstance(problem, RVMRegression):
        raise TypeError(f"{method!r} here is for RVMRegression, got {type(problem).__name__}")
    check_iterations(max_iter, tol)
    check_width_bounds(width_bounds)
    if problem.learn_width and not isinstance(problem.X, np.ndarray):
        raise ValueError("learn_width=True needs NumPy inputs (its gradient takes a second "
                         "pass over the data); compute the Dask arrays first")
    check_basis(problem)
    widths_from_gp = _widths_from_gp(problem, widths_from_gp)
    # The fast algorithm's products are mid-sized (N x M_t, one pass over Phi per add):
    # one BLAS thread (on busy cores more threads slow it down, see one_blas_thread).
    with one_blas_thread() if algorithm == "fast" else contextlib.nullcontext():
        start = time.perf_counter()
        sol = _solve(problem, algorithm=algorithm, max_iter=int(max_iter), tol=float(tol),
                     width_bounds=width_bounds, local_search=local_search,
                     widths_from_gp=widths_from_gp)
        post = _to_datatree(problem, sol, method=method, seed=seed, draws=draws,
                            chains=chains, optimise_seconds=time.perf_counter() - start)
    for note in sol.notes:
        warn_user(note, NumericalWarning)
    if sol.beta >= BETA_MAX_FACTOR / sol.var_t * (1 - 1e-12):
        warn_user(
            "the noise estimate hit its floor (noise sd = 1e-3 sd(t)): the basis interpolates "
            "the targets; fix noise_sd if the data are noise-free",
            NumericalWarning)
    if not sol.converged:
        warn_user(
            f"{method} did not converge in max_iter={max_iter} iterations; the result is "
            "the last iterate (converged=False)", ConvergenceWarning)
    # bounds given: the caller's floor; a GP's widths below it are raised to it (attrs)
    if sol.width_on_bounds[0] and width_bounds is None and sol.gp_route is None:
        warn_user(
            f"{sol.width_on_bounds[0]} learned kernel width(s) ended on their lower bound "
            f"(widths {np.round(post.attrs['width'], 4).tolist()}): the evidence rises towards "
            "narrower bases that each fit one point, which the bound stops "
            "(attrs['width_at_bound']); pass width_bounds to move it", NumericalWarning)
    return post


def fit_fast(problem, *, seed=None, max_iter: int = 10000, tol: float = 1e-6,
             draws: int = 500, chains: int = 2, width_bounds=None,
             local_search: bool | None = None, widths_from_gp: bool | None = None
             ) -> xr.DataTree:
    """Type-II ML by Tipping & Faul's (2003) fast sequential algorithm.

    Stops when no basis can be added or deleted and every re-estimate changes ``ln alpha``
    by less than ``tol`` (T&F §4.4), with the noise re-estimated by T01 eq. (46).
    ``width_bounds`` (with ``learn_width``): ``(low, high)`` for the Gaussian width (or one
    pair per input dimension), ``"data"`` for :func:`default_width_bounds`, or None (default)
    for a factor ``e^7`` either way from the start width, which is always inside the bounds.
    With one width per input (ARD) the search does not start from the problem's widths but
    from the tied-alpha model's optimum (:func:`_tied_start`), so the result does not depend
    on them; None then means :func:`default_width_bounds` (a floor in the joint input space,
    :func:`~.widths.estimator_ard_bounds`, as ``RVR``'s). The widths are learned in at most
    ``WIDTH_MAX_ROUNDS`` rounds of sparse fit and L-BFGS-B step on the widths
    (:func:`_solve`); attrs ``width_rounds``, ``width_at_bound`` (widths on the
    lower bound; a NumericalWarning with the default bounds) and ``width_at_upper_bound``.
    ``widths_from_gp`` (with ``learn_width``): True (the default for one width per input)
    takes the widths from a GP's type-II ML on the same data (exact, or Titsias's sparse GP
    above :data:`~.widths.GP_EXACT_MAX` points; :func:`~.widths.gp_widths`) and fits the
    RVM once at them; False (the default for one width) learns them by the RVM's own
    evidence in the rounds above (T01 §4.3, App. C). attrs ``width_route`` ("gp",
    "sparse-gp" or "evidence"); with a GP, ``width_route_log_evidence`` (its log marginal
    likelihood or bound), ``width_route_seconds`` and ``width_route_inducing``.
    ``local_search``: after convergence, try converging again without each basis in the
    model and keep a higher evidence (:func:`_escape_local_optima`); default (None): on for
    bases of at most ``LOCAL_SEARCH_MAX_COLUMNS`` columns whose first optimum keeps at most
    ``LOCAL_SEARCH_MAX_KEPT`` (the number of extra runs is the result's
    ``local_search_runs``). Not with ``learn_width`` or
    a proper prior on ``alpha`` (which keeps every basis).
    """
    return _fit(problem, "fast", "evidence", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, width_bounds=width_bounds,
                local_search=None if local_search is None else bool(local_search),
                widths_from_gp=widths_from_gp)


def fit_mackay(problem, *, seed=None, max_iter: int = 5000, tol: float = 1e-6,
               draws: int = 500, chains: int = 2, width_bounds=None,
               widths_from_gp: bool | None = None) -> xr.DataTree:
    """Type-II ML by MacKay re-estimation, T01 eqs. (16)-(18) / (44), (46).
    ``width_bounds`` and ``widths_from_gp`` as in :func:`fit_fast`."""
    return _fit(problem, "mackay", "evidence-mackay", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, width_bounds=width_bounds,
                widths_from_gp=widths_from_gp)
