"""Type-II ML (evidence) for RVM classification through the Laplace approximation.

T01 §3 eqs. (23)-(28), PRML §7.2.3, Tipping & Faul (2003) §2.2:

* the posterior mode of the weights by Newton / IRLS with step halving (T01 eq. 24), the
  Hessian ``H = Phi^T B Phi + A`` and ``Sigma = H^-1`` (T01 eqs. 25-26);
* the Laplace log evidence (PRML 7.114)
  ``ln p(t|alpha) ~ ln p(t|w*) + 1/2 sum ln alpha - 1/2 w*^T A w* - 1/2 ln|H|``;
* ``method="evidence"``: Tipping & Faul's sequential add / delete / re-estimate algorithm
  (:class:`~sparsebayes.inference.rvm.sequential.SequentialSparseBayes`) run on the
  linearised targets ``t_hat = Phi w* + B^-1 (t - y)`` (T&F eq. 14; PRML 7.117 — Tipping's
  T01 eq. 27 as printed uses ``t``) with per-point precisions ``B``; runs of actions on one
  surrogate, each kept only if the Laplace evidence did not fall (:func:`_run_fast`);
* ``method="evidence-mackay"``: MacKay re-estimation ``alpha = gamma / w*^2`` (T01 eq. 16) with
  pruning at ``alpha > 1e12`` (App. B.1);
* multiclass: the softmax likelihood of T01 eq. (28), one weight vector per class and ONE joint
  Laplace approximation over all of them (block Hessian ``B_n = diag(y_n) - y_n y_n^T``),
  with per-class (default) or shared ``alpha``;
* leave-one-out: :class:`LaplaceRefits` (both loops warm-started without the rows left
  out) and :func:`laplace_cavity_logpdf` (Vehtari et al. 2016's Laplace cavity at the fitted
  alpha).

Parameters are held as *pairs* (basis column, class): a binary (Bernoulli) model has one
output (class 0 of the pair is the logit of ``classes[1]``); a softmax model has one logit
per class. For the fast algorithm the softmax surrogate ``t_hat, B`` (B is a K x K block of
rank K-1 per point) is handed to the one sequential algorithm as per-point blocks
(:class:`~sparsebayes.inference.rvm.sequential.BlockProducts`) over the ``M K`` candidate pairs:
memory O(NM + NK^2), no (NK)-sized matrix. Its safeguards (alpha floor, tabu list, damped
re-estimates) are the algorithm's :class:`~sparsebayes.inference.rvm.sequential.Policy`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from scipy import linalg, optimize

from sparsebayes.models import ConvergenceWarning, GammaPrior, NumericalWarning, RVMClassification
from sparsebayes.models.basis import Basis
from sparsebayes.models.likelihoods import (
    Bernoulli,
    Likelihood,
    likelihood_for,
    likelihood_of,
    pair_gradient,
    pair_logits,
)

from ..contract import refit_options
from ..numerics import (
    check_iterations,
    check_rows_out,
    cholesky,
    cholesky_inverse,
    one_blas_thread,
    warn_user,
)
from ..predictive.classification import cavity_logpdf, moderated_from_moments, pair_logit_moments
from ..predictive.regression import design
from ..progress import Evaluations, describe
from ..results import basis_from_posterior, classification_datatree, prior_from_posterior
from . import compiled
from .mackay import reestimate
from .sequential import (
    BlockProducts,
    DenseProducts,
    Policy,
    SequentialSparseBayes,
    duplicates_note,
)
from .statistics import check_memory
from .widths import with_log_width

__all__ = [
    "Laplace",
    "laplace_posterior",
    "laplace_width_gradient",
    "fit_fast",
    "fit_mackay",
    "fit_laplace",
    "posterior_pairs",
    "LaplaceRefits",
    "laplace_cavity_logpdf",
]

PRUNE_ALPHA = 1e12  # MacKay pruning threshold for classification (Tipping App. B.1)
ALPHA_MIN = 1e-6  # floor on alpha (unit-norm columns): bounds w on separable data
B_FLOOR = 1e-300  # B underflows to 0 only for |logit| > 745
# Most actions on one surrogate before the Laplace evidence is checked. Measured on USPS
# (7291 digits, 500 centres, K = 10): 64 took > 2x longer than 256 (each kept run rebuilds
# the surrogate, ~0.5 s here); 1024 stopped at max_iter, its long runs wandering on a stale
# surrogate, below the evidence 256 converged to.
MAX_RUN = 256
# Converged also when STALL mode searches in a row raised the objective by less than
# STALL_GAIN nats in all (a Bayes factor of 1.01): on USPS the outer iteration's last 0.6
# nats took two thirds of the re-linearisations, moving no prediction.
STALL, STALL_GAIN = 10, 0.01
THAW_GAIN = 1.0  # a frozen action is tried again once the evidence has risen this much (nats)
# whole solves a profile search typically takes, with one and with two parameters (the
# estimate of its first progress line)
PROFILE_SOLVES = (15, 60)
PHI2_MAX = 4_000_000  # the fast loop keeps Phi**2 (for phi_m^T B phi_m) up to this size
_NO_COLS = np.empty(0, int)  # Laplace.cols until the caller sets them


# --------------------------------------------------------------------------------------------
# Laplace approximation for fixed alpha
# --------------------------------------------------------------------------------------------


@dataclass
class Laplace:
    """Gaussian (Laplace) approximation ``N(theta, H^-1)`` of the weight posterior at fixed
    ``alpha``, over the pairs (``cols``, ``cls``) in the model."""

    theta: np.ndarray
    alpha: np.ndarray
    cols: np.ndarray
    cls: np.ndarray
    F: np.ndarray
    L: np.ndarray  # lower Cholesky factor of H
    loglik: float
    log_evidence: float
    gradient: np.ndarray  # Phi^T (t - y) - A theta at the mode
    n_iter: int
    converged: bool

    @property
    def Sigma(self) -> np.ndarray:
        """Eq. (26): ``Sigma = (Phi^T B Phi + A)^-1``."""
        return cholesky_inverse(self.L)


def _mode(Phi_act: np.ndarray, cls: np.ndarray, lik, alpha: np.ndarray,
          theta0: np.ndarray | None = None, gtol: float = 1e-10, max_iter: int = 100) -> Laplace:
    """Posterior mode by Newton / IRLS with step halving (T01 eq. 24; PRML 7.110-7.111).

    Maximises ``Psi(w) = sum_n ln p(t_n | f_n) - 1/2 w^T A w``; the gradient is
    ``J^T (t - y) - A w`` and the negative Hessian ``J^T B J + A`` (T01 eq. 25). The step is
    halved until ``Psi`` does not decrease, so the iteration also converges on separable
    data, where only the prior bounds ``w``. Stops when the gradient is below ``gtol``
    (relative to ``max(s, |J^T (t - y)|)``, ``s`` the likelihood's ``grad_scale``: 1 for
    the classifier) or no step improves ``Psi``.
    """
    theta = np.zeros(cls.size) if theta0 is None else np.array(theta0, dtype=float)
    if isinstance(lik, Bernoulli) and 0 < cls.size <= compiled.SMALL:  # the loop, compiled
        mode = compiled.bernoulli_mode(Phi_act, lik.t, alpha, theta, gtol, max_iter)
        if mode.ok:  # else H lost definiteness at an iterate: the loop below, with jitter
            return Laplace(mode.theta, alpha, _NO_COLS, cls, mode.f[:, None], mode.L,
                           mode.loglik, mode.log_evidence, mode.gradient, mode.n_iter,
                           mode.converged)
    F = lik.logits(Phi_act, cls, theta)
    ll = lik.loglik(F)
    psi = ll.sum() - 0.5 * theta @ (alpha * theta)
    if theta0 is not None and not np.isfinite(psi):  # a start far off: from w = 0 instead
        theta = np.zeros(cls.size)
        F = lik.logits(Phi_act, cls, theta)
        ll = lik.loglik(F)
        psi = ll.sum()
    diag = np.arange(cls.size) * (cls.size + 1)
    converged = fresh = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (returned)
        gl, H = lik.newton_terms(Phi_act, cls, F)
        g = gl - alpha * theta
        H.flat[diag] += alpha
        L, exact = _step_factor(H, Phi_act, cls, lik, F, alpha, diag)
        if np.abs(g).max(initial=0.0) <= gtol * max(lik.grad_scale, np.abs(gl).max(initial=0.0)):
            converged, fresh = exact, True  # not a maximum where H is not positive definite
            break
        delta = linalg.lapack.dpotrs(L, g, lower=1)[0]
        step = 1.0
        while True:
            new = theta + step * delta
            F_new = lik.logits(Phi_act, cls, new)
            ll_new = lik.loglik(F_new)
            psi_new = ll_new.sum() - 0.5 * new @ (alpha * new)
            if psi_new >= psi - 1e-13 * abs(psi) or step < 1e-12:
                break
            step *= 0.5
        if step < 1e-12:  # no ascent direction left at machine precision
            converged = exact and np.abs(g).max() <= 1e-6 * max(lik.grad_scale,
                                                                np.abs(gl).max())
            fresh = True
            break
        theta, F, ll, psi = new, F_new, ll_new, psi_new
    if not fresh:  # max_iter ran out: g, H, L of the last iterate
        gl, H = lik.newton_terms(Phi_act, cls, F)
        g = gl - alpha * theta
        H.flat[diag] += alpha
        L = _step_factor(H, Phi_act, cls, lik, F, alpha, diag)[0]
    loglik = float(ll.sum())
    log_ev = compiled.laplace_log_evidence(loglik, alpha, theta, L)
    return Laplace(theta, alpha, _NO_COLS, cls, F, L, loglik, log_ev, g, it, bool(converged))


def _step_factor(H, Phi_act, cls, lik, F, alpha, diag) -> tuple[np.ndarray, bool]:
    """The Cholesky factor of the Newton step's matrix and whether it is ``H``'s: ``H``
    itself where it is positive definite (always for a log-concave likelihood); else, for a
    likelihood that is not log-concave (a Student-t outlier has ``B < 0``), ``A + Phi^T B+
    Phi`` with the likelihood's positive surrogate precisions ``B+``: an ascent direction,
    the step halving keeping every step uphill, until the iterates reach the concave
    neighbourhood of a mode (a point where ``H`` is not positive definite is no mode)."""
    if lik.log_concave:
        return cholesky(H), True
    L, info = linalg.lapack.dpotrf(H, lower=1, clean=1)
    if info == 0:
        return L, True
    H = lik.newton_terms(Phi_act, cls, F, positive=True)[1]
    H.flat[diag] += alpha
    return cholesky(H), False


def _pairs_from_alpha(alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cols, cls, alpha of the pairs) for the finite entries of alpha (M,) or (M, K)."""
    alpha = np.asarray(alpha, dtype=float)
    A2 = alpha[:, None] if alpha.ndim == 1 else alpha
    cls_grid, col_grid = np.meshgrid(np.arange(A2.shape[1]), np.arange(A2.shape[0]))
    order = np.argsort(cls_grid.T.ravel(), kind="stable")  # class-major
    cols = col_grid.T.ravel()[order]
    cls = cls_grid.T.ravel()[order]
    a = A2[cols, cls]
    keep = np.isfinite(a)
    return cols[keep], cls[keep], a[keep]


def laplace_posterior(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, *,
                      n_classes: int = 2, softmax_model: bool | None = None,
                      w0: np.ndarray | None = None, gtol: float = 1e-10,
                      max_iter: int = 100, lik=None) -> Laplace:
    """Laplace approximation of the weight posterior at fixed ``alpha`` (T01 eqs. 24-26).

    Parameters
    ----------
    Phi : design matrix (N, M).
    t : integer class codes 0..K-1 (N,).
    alpha : (M,) for the Bernoulli model, (M, K) for the softmax; ``inf`` excludes a weight.
    softmax_model : use T01 eq. (28) (default: when ``alpha`` is 2-D).
    w0 : starting weights for the pairs (finite entries of ``alpha``, class-major).
    lik : another likelihood on ``f = Phi w`` (e.g.
        :class:`~sparsebayes.models.likelihoods.Poisson`; ``t`` and ``n_classes`` are then
        unused).
    """
    alpha = np.asarray(alpha, dtype=float)
    if softmax_model is None:
        softmax_model = alpha.ndim == 2
    if lik is None:
        lik = likelihood_for(t, n_classes, softmax_model)
    cols, cls, a = _pairs_from_alpha(alpha)
    lap = _mode(np.asarray(Phi, dtype=float)[:, cols], cls, lik, a, w0, gtol, max_iter)
    lap.cols = cols
    return lap


# --------------------------------------------------------------------------------------------
# Evidence gradient with respect to Gaussian kernel input scales
# --------------------------------------------------------------------------------------------


def _evidence_dPhi(Phi_act: np.ndarray, cls: np.ndarray, lik, lap: Laplace) -> np.ndarray:
    """``E`` (N, P) with ``d ln p(t|alpha) = sum_nj E_nj dPhi[n, col_j]`` for the Laplace
    evidence, the mode moving with Phi (implicit function theorem) and B with the mode:

    ``E = g theta^T - (B J Sigma) - [c theta^T + g v^T - (B J v) theta^T]`` restricted to the
    pair's class, with ``g = t - y``, ``c_n = 1/2 tr(P_n dB_n/df_n)``, ``P_n = J_n Sigma
    J_n^T`` and ``v = Sigma J^T c``. (The analogue of T01 App. C eqs. 53-55.)
    """
    K = lik.n_out
    F, theta = lap.F, lap.theta
    Sigma = lap.Sigma
    G = lik.grad(F)
    B = lik.hess(F)
    N, P = Phi_act.shape
    # J Sigma as (N, K, P)
    JS = np.zeros((N, K, P))
    for k in range(K):
        sel = cls == k
        if sel.any():
            JS[:, k, :] = Phi_act[:, sel] @ Sigma[sel, :]
    BJS = np.einsum("nkl,nlp->nkp", B, JS)
    Pn = np.zeros((N, K, K))
    for k in range(K):
        sel = cls == k
        if sel.any():
            Pn[:, :, k] = np.einsum("nkj,nj->nk", JS[:, :, sel], Phi_act[:, sel])
    c = lik.third(F, Pn)
    v = Sigma @ pair_gradient(Phi_act, cls, c)
    BJv = np.einsum("nkl,nl->nk", B, pair_logits(Phi_act, cls, v, K))
    rows = np.arange(P)
    E = (G[:, cls] * theta - BJS[:, cls, rows]
         - (c[:, cls] * theta + G[:, cls] * v - BJv[:, cls] * theta))
    return E


def laplace_width_gradient(kernel, Phi_act: np.ndarray, centres: np.ndarray, X: np.ndarray,
                           is_kernel: np.ndarray, cls: np.ndarray, lik, lap: Laplace
                           ) -> np.ndarray:
    """``d ln p(t|alpha) / d ln width`` of ``kernel``'s columns (T01 eqs. 56-57 with the
    Laplace ``E = dL/dPhi`` of :func:`_evidence_dPhi`, through the kernel's own
    ``log_width_gradient``); ``centres`` are the centres of the kernel pairs (rows where
    ``is_kernel``)."""
    E = _evidence_dPhi(Phi_act, cls, lik, lap)
    return kernel.log_width_gradient(X, centres, Phi_act[:, is_kernel], E[:, is_kernel])


# --------------------------------------------------------------------------------------------
# The two type-II ML loops (on unit-norm columns)
# --------------------------------------------------------------------------------------------


def _surrogate(Phi: np.ndarray, lik, F: np.ndarray, Phi2: np.ndarray | None = None,
               rows: np.ndarray | None = None):
    """The linearised Gaussian problem at logits F (TF03 eq. 14, PRML 7.117) as the
    sequential algorithm's products. Bernoulli: design ``Phi``, targets
    ``t_hat = F + (t - y) / B``, precisions ``B = y (1 - y)``. Softmax: per point the K x K
    block ``B_n`` over the (basis, class) pairs (:class:`BlockProducts`; no N(K-1) x KM
    design). ``Phi2 = Phi**2`` (if kept) makes ``phi_m^T B phi_m`` one product.

    ``rows``: the problem is the rows ``rows`` of ``Phi`` (``lik`` and ``F`` hold those
    rows only); the other rows get ``B = 0``, so they drop out of every product without
    a copy of ``Phi`` (leave-out refits)."""
    if rows is not None:
        N, K = Phi.shape[0], lik.n_out
        Ff = np.zeros((N, K))
        Ff[rows] = F
        if K > 1:
            B, G = np.zeros((N, K, K)), np.zeros((N, K))
            B[rows], G[rows] = lik.hess(F), lik.grad(F)
            return BlockProducts(Phi, B, Ff, G, Phi2)
        b, t_hat = np.zeros(N), np.zeros(N)
        b[rows], t_hat[rows] = _one_output_surrogate(lik, F)
        diag = b @ Phi2 if Phi2 is not None else np.einsum("nm,nm,n->m", Phi, Phi, b)
        return DenseProducts(Phi, t_hat, b, diag=diag, PhiBt=Phi.T @ (b * t_hat))
    if isinstance(lik, Bernoulli):
        t_hat, b, diag, PhiBt = compiled.bernoulli_surrogate(np.ascontiguousarray(F[:, 0]),
                                                             lik.t, B_FLOOR, Phi, Phi2)
        return DenseProducts(Phi, t_hat, b, diag=diag, PhiBt=PhiBt)
    if lik.n_out == 1:
        b, t_hat = _one_output_surrogate(lik, F)
        diag = b @ Phi2 if Phi2 is not None else np.einsum("nm,nm,n->m", Phi, Phi, b)
        return DenseProducts(Phi, t_hat, b, diag=diag, PhiBt=Phi.T @ (b * t_hat))
    return BlockProducts(Phi, lik.hess(F), F, lik.grad(F), Phi2)


def _one_output_surrogate(lik, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precisions ``b = max(B, B_FLOOR)`` (the likelihood's surrogate precisions: minus its
    second derivative where it is log-concave) and targets ``t_hat = f + g / b`` (``g`` its
    gradient) of a one-output likelihood at ``F`` (N, 1): TF03 eq. 14, PRML 7.117."""
    b = np.maximum(lik.surrogate_precision(F[:, 0]), B_FLOOR)
    return b, F[:, 0] + lik.grad(F)[:, 0] / b


@dataclass
class ClassFit:
    cols: np.ndarray
    cls: np.ndarray
    alpha: np.ndarray
    lap: Laplace
    trace: list[float]
    converged: bool
    n_iter: int
    at_floor: int
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Solution:
    """:func:`_solve`'s result: the basis at the final widths, the likelihood, the Laplace
    approximation at the mode (T01 eqs. 24-26), the last alpha run, the total iterations,
    notes for warnings and the log-evidence trace (alpha runs, then width steps)."""

    basis: Basis
    lik: Likelihood
    lap: Laplace
    run: ClassFit
    n_iter: int
    notes: list[str]
    trace: list[float]


def _rows_of(Phi: np.ndarray, cols: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``Phi[rows][:, cols]`` (``Phi[:, cols]`` for ``rows=None``), Fortran-ordered as
    ``Phi[:, cols]`` is (the compiled mode's layout)."""
    return Phi[:, cols] if rows is None else np.asfortranarray(Phi[np.ix_(rows, cols)])


def _run_fast(Phi, lik, prior_a, prior_b, alpha_min, max_iter, tol, warm=None, Phi2=None,
              rows=None, kernel=None) -> ClassFit:
    """Tipping & Faul's loop on the Laplace surrogate (TF03 §4 with step 10's re-linearisation)
    with the exact Laplace evidence as the acceptance test. A *run* of up to ``run`` actions
    (add / delete / re-estimate, each the largest gain in the surrogate evidence, PRML 7.118,
    with the surrogate's exact rank-one updates) is taken on one surrogate; then the mode is
    re-found by IRLS from the surrogate posterior mean. The run is kept if the Laplace
    evidence (PRML 7.114; plus the hyperprior's log density, T01 App. A) did not fall, and
    the surrogate is rebuilt at the new mode (the costly part: ``Phi^T B Phi_in`` for every
    candidate); else the state goes back and the run is shortened to a quarter. A single
    action that lowers the evidence freezes its basis until the evidence has risen by
    ``THAW_GAIN``. The run length doubles after every kept run (up to ``MAX_RUN``), so the
    re-linearisations fall from one per add or delete to a few per doubling. The optimum is
    the Laplace evidence's: it rises with every kept run, and convergence is declared on a
    fresh surrogate with nothing left to do, or when ``STALL`` mode searches in a row
    raised it by less than ``STALL_GAIN`` nats in all.

    ``warm``: start from the model (cols, cls, alpha, weights). ``rows``: fit the rows
    ``rows`` of ``Phi`` only (``lik`` holds their targets; :func:`_surrogate`). ``Phi2``:
    ``Phi**2`` if the caller keeps it (else made here when small enough). ``kernel``: the
    basis's kernel, for the causes a note on skipped duplicate candidates names."""
    M = Phi.shape[1]
    K = lik.n_out
    cand_col = np.tile(np.arange(M), K)
    cand_cls = np.repeat(np.arange(K), M)
    b_prior = np.tile(np.broadcast_to(prior_b, (M,)), K)

    def hyperprior(act, alpha):  # the Gamma hyperprior's log density on ln alpha (T01 App. A)
        return float(np.sum(prior_a * np.log(alpha) - b_prior[act] * alpha)) if gamma else 0.0

    gamma = prior_a != 0 or np.any(b_prior)
    proper = bool(np.any(b_prior > 0))
    # the objective the runs must raise: Laplace log evidence + hyperprior; the first run is
    # kept (the empty start is no model to compare with)
    log_ev = -np.inf
    if warm is None:  # the first surrogate at the likelihood's start (zero logits: Bernoulli)
        F = lik.initial_logits()
        start: dict = {}
    else:
        w_cols, w_cls, w_alpha, w_theta = warm
        lap = _mode(_rows_of(Phi, w_cols, rows), w_cls, lik, w_alpha, w_theta)
        F, log_ev = lap.F, lap.log_evidence + hyperprior(w_cls * M + w_cols, lap.alpha)
        start = {"active": list(w_cls * M + w_cols), "alpha": np.array(w_alpha)}
    if Phi2 is None and Phi.size <= PHI2_MAX:
        Phi2 = Phi * Phi
    policy = Policy(alpha_min=alpha_min, damped=True)
    state = SequentialSparseBayes(a_prior=prior_a, b_prior=b_prior,
                                  products=_surrogate(Phi, lik, F, Phi2, rows), policy=policy,
                                  refresh_after_step=False, **start)
    trace: list[float] = []
    converged = False
    steps = 0
    run = 1
    frozen_at: dict[int, float] = {}  # frozen candidate -> the evidence when it was frozen
    best: list[float] = []  # the objective after every mode search
    while steps < max_iter:
        snap = state.snapshot()
        moved = []
        done = False
        while len(moved) < run and steps < max_iter:
            action, _gain, done = state.step(tol)
            if done:
                break
            steps += 1
            if action != "skip":
                moved.append(action)
        if not moved:
            converged = done  # on a fresh surrogate: nothing to add, delete or re-estimate
            break
        act = np.asarray(state.active)
        by_class = np.argsort(cand_cls[act], kind="stable")
        new_lap = _mode(_rows_of(Phi, cand_col[act[by_class]], rows), cand_cls[act[by_class]],
                        lik, state.alpha[by_class], state.mu[by_class])
        new_ev = new_lap.log_evidence + hyperprior(act, state.alpha)
        # (a proper prior, b > 0, puts exclusion at -inf: every add raises the objective)
        kept = new_ev >= log_ev - 1e-10 * max(1.0, abs(log_ev)) or (proper and "add" in moved)
        if kept:
            log_ev = new_ev
            trace.append(new_lap.log_evidence)
            state.move_to(_surrogate(Phi, lik, new_lap.F, Phi2, rows))
            frozen_at = {i: e for i, e in frozen_at.items() if log_ev < e + THAW_GAIN}
            run = min(2 * run, MAX_RUN)
        else:
            if len(moved) == 1:  # this action lowers the Laplace evidence: freeze its basis
                changed = set(state.active) ^ set(snap.active)  # an add or a delete
                if not changed:  # a re-estimate
                    changed = {state.active[int(np.argmax(np.abs(state.alpha - snap.alpha)))]}
                frozen_at.update(dict.fromkeys(changed, log_ev))
            state.restore(snap)
            run = max(1, len(moved) // 4)
        policy.frozen = set(frozen_at)
        best.append(log_ev)
        if len(best) > STALL and best[-1] - best[-1 - STALL] < STALL_GAIN:
            converged = True  # the outer iteration has stalled: see STALL_GAIN
            break
    act = np.asarray(state.active)
    cols, cls, alpha = cand_col[act], cand_cls[act], state.alpha.copy()
    order = np.lexsort((cols, cls))
    cols, cls, alpha = cols[order], cls[order], alpha[order]
    lap = _mode(_rows_of(Phi, cols, rows), cls, lik, alpha, state.mu[order], gtol=1e-12)
    lap.cols = cols
    trace.append(lap.log_evidence)
    notes = []
    if state.aligned:
        notes.append(duplicates_note(len(state.aligned), kernel))
    return ClassFit(cols, cls, alpha, lap, trace, converged, steps,
                int(np.sum(alpha <= alpha_min * (1 + 1e-9))), notes)


class _LaplacePosterior:
    """The Laplace approximation at the mode (T01 eqs. 24-26) for
    :func:`~.mackay.reestimate`, over the pairs (``cols``, ``cls``) in the model, each mode
    search started at the last one's weights ``theta``."""

    def __init__(self, Phi, lik, cols, cls, theta, rows) -> None:
        self.Phi, self.lik, self.rows = Phi, lik, rows
        self.cols, self.cls, self.theta = cols, cls, theta

    def mode(self, alpha, gtol: float = 1e-10) -> Laplace:
        return _mode(_rows_of(self.Phi, self.cols, self.rows), self.cls, self.lik, alpha,
                     self.theta, gtol=gtol)

    def at(self, alpha):
        lap = self.mode(alpha)
        self.theta = lap.theta
        return lap.theta, np.diag(lap.Sigma), lap.log_evidence

    def reestimate(self, gamma) -> float:
        return 0.0  # its own parameters, if any, are the profile search's (learned_likelihood)

    def keep(self, keep) -> None:
        self.cols, self.cls, self.theta = self.cols[keep], self.cls[keep], self.theta[keep]


def _run_mackay(Phi, lik, prior_a, prior_b, alpha_min, max_iter, tol, shared,
                warm=None, alpha0: float = 1.0, rows=None, scale=None) -> ClassFit:
    """Tipping (2001) §3 (:func:`~.mackay.reestimate`): IRLS mode, then ``alpha_i = (gamma_i +
    2a) / (w_i^2 + 2b)`` (T01 eq. 16 / 44) with ``gamma_i = 1 - alpha_i Sigma_ii`` (T01 eq.
    17); with ``shared`` one alpha per basis column over its K class weights, ``(sum_k gamma
    + 2a) / (sum_k w^2 + 2b)``. Weights whose alpha exceeds 1e12 are pruned (App. B.1).
    ``warm``: start from the model (cols, cls, alpha, weights); ``rows``: fit those rows of
    ``Phi`` only (``lik`` holds their targets); ``scale`` (M,): the factor taking the alpha of
    each column to the units of unit-norm columns over those rows, where the pruning
    threshold and the floor ``alpha_min`` hold (default 1: ``Phi`` has unit-norm columns over
    them)."""
    M = Phi.shape[1]
    K = lik.n_out
    if warm is None:
        cols = np.tile(np.arange(M), K)
        cls = np.repeat(np.arange(K), M)
        alpha = np.full(cols.size, float(alpha0))
        theta = None
    else:
        cols, cls, alpha, theta = (np.asarray(v) for v in warm)
        alpha = alpha.astype(float)
    pool = None
    if shared and K > 1:  # one alpha per column: its pairs' gamma and w^2 summed
        def pool(index, v):
            return np.bincount(cols[index], weights=v, minlength=M)[cols[index]]
    posterior = _LaplacePosterior(Phi, lik, cols, cls, theta, rows)
    pair_scale = np.ones(cols.size) if scale is None else scale[cols]
    res = reestimate(posterior, alpha, a=prior_a, b=np.broadcast_to(prior_b, (M,))[cols],
                     prune_at=PRUNE_ALPHA, scale=pair_scale, floor=alpha_min, pool=pool,
                     max_iter=max_iter, tol=tol)  # none kept: the empty model, every logit 0
    lap = posterior.mode(res.alpha, gtol=1e-12)
    lap.cols = posterior.cols
    at_floor = res.alpha * pair_scale[res.index] <= alpha_min * (1 + 1e-9)
    return ClassFit(posterior.cols, posterior.cls, res.alpha, lap, res.trace, res.converged,
                    res.n_iter, int(np.sum(at_floor)))


# --------------------------------------------------------------------------------------------
# Front end: normalisation, kernel widths, DataTree
# --------------------------------------------------------------------------------------------


def _solve(problem, *, algorithm: str, softmax_model: bool, shared: bool, max_iter: int,
           tol: float, alpha_min: float, max_outer: int = 30, width_rtol: float = 1e-4,
           width_step: float = 1e-3, warm=None, lik=None):
    """Run ``algorithm`` on unit-norm columns (the flat prior makes the evidence invariant to
    column scale; a Gamma rate b becomes ``b ||phi||^2``). With ``learn_width`` alternate it
    with L-BFGS steps on the log widths at fixed alpha, the Laplace evidence and its exact
    gradient (:func:`laplace_width_gradient`) re-solving the mode at every width.

    The alternation climbs a ridge (alpha and the width move together) in small steps, so it
    stops when a round (alpha run + width step) gains less than ``width_rtol * max(1, |L|)``
    in log evidence, when no log width moves by more than ``width_step``, or after
    ``max_outer`` rounds (without the gain rule the width creeps along the ridge to the
    round cap). ``warm``: the first round starts from this model
    (cols, cls, alpha, weights on the columns as ``problem.basis`` makes them). ``lik``: the
    likelihood (default: the problem's, :func:`~sparsebayes.models.likelihoods.likelihood_of`)."""
    prior = problem.prior if problem.prior is not None else GammaPrior()
    if lik is None:
        lik = likelihood_of(problem, softmax_model)
    X = problem.X
    basis = problem.basis
    total = 0
    notes: list[str] = []
    width_trace: list[float] = []
    plain: list[np.ndarray] = []  # log widths of consecutive plain rounds
    fallback = None  # (log width, evidence, warm) to return to if an extrapolation fails
    for _outer in range(max_outer):
        # the design and Phi**2 (for phi^T B phi), and a copy of each in the surrogate
        check_memory(4 * 8.0 * X.shape[0] * basis.n_columns,
                     f"the {X.shape[0]} x {basis.n_columns} design")
        Phi = basis.design(X)
        norms = np.sqrt(np.einsum("nm,nm->m", Phi, Phi))
        norms[norms == 0] = 1.0
        Phi /= norms
        b_n = prior.b * norms**2
        warm_n = None
        if warm is not None:
            w_cols, w_cls, w_alpha, w_theta = warm
            warm_n = (w_cols, w_cls, w_alpha / norms[w_cols] ** 2, w_theta * norms[w_cols])
        if algorithm == "fast":
            res = _run_fast(Phi, lik, prior.a, b_n, alpha_min, max_iter, tol, warm_n,
                            kernel=basis.kernel)
        else:
            res = _run_mackay(Phi, lik, prior.a, b_n, alpha_min, max_iter, tol, shared, warm_n)
        total += res.n_iter
        notes += res.notes
        scale = norms[res.cols]
        alpha = res.alpha * scale**2
        theta = res.lap.theta / scale
        del Phi
        if not problem.learn_width:
            break
        kernel = basis.kernel
        x0 = np.log(np.atleast_1d(np.asarray(kernel.width, dtype=float)))
        if fallback is not None:
            if res.lap.log_evidence < fallback[1]:  # the extrapolation lost: plain round
                x0, _, warm = fallback
                basis = with_log_width(basis, x0)
                fallback, plain = None, []
                continue
            fallback, plain = None, []
        cache = {"theta": theta}
        opt = optimize.minimize(
            _width_objective, x0, jac=True, method="L-BFGS-B",
            args=(basis, X, lik, res.cols, res.cls, alpha, cache),
            bounds=[(x - 5.0, x + 5.0) for x in x0], options={"maxiter": 20},
        )
        x_next = opt.x
        width_trace.append(-float(opt.fun))
        warm = (res.cols, res.cls, alpha, cache["theta"])
        if np.max(np.abs(opt.x - x0)) < width_step:
            basis = with_log_width(basis, x_next)
            break
        if (len(width_trace) > 1 and width_trace[-1] - width_trace[-2]
                < width_rtol * max(1.0, abs(width_trace[-1]))):
            basis = with_log_width(basis, x_next)
            break
        plain = [*(plain or [x0]), x_next][-3:]
        if len(plain) == 3:
            x_ext = _squarem_step(*plain)
            if x_ext is not None:
                fallback = (x_next, width_trace[-1], warm)
                x_next = x_ext
        basis = with_log_width(basis, x_next)
    Phi_act = basis.design(X, columns=res.cols)
    lap = _mode(Phi_act, res.cls, lik, alpha, theta, gtol=1e-12)
    lap.cols = res.cols
    return Solution(basis, lik, lap, res, total, notes, res.trace + width_trace)


def _squarem_step(x0, x1, x2, max_jump: float = 0.25):
    """Extrapolated limit of the slowly converging sequence x0, x1, x2 of log widths (the
    alternation of alpha runs and width steps creeps along the ridge where the two move
    together): SQUAREM's step (Varadhan & Roland 2008, scheme S3) ``x0 - 2 a r + a^2 v``
    with ``r = x1 - x0``, ``v = x2 - 2 x1 + x0``, ``a = -|r| / |v|`` (at most -1); None
    when the steps do not shrink. At most ``max_jump`` in ln r beyond x2."""
    r = x1 - x0
    v = x2 - 2 * x1 + x0
    if not np.dot(r, v) < 0:
        return None
    a = min(-np.linalg.norm(r) / np.linalg.norm(v), -1.0)
    x = x0 - 2 * a * r + a * a * v
    jump = np.max(np.abs(x - x2))
    return x2 + (x - x2) * min(1.0, max_jump / jump) if jump > 0 else None


def _width_objective(log_width, basis, X, lik, cols, cls, alpha, cache):
    """Minus the Laplace evidence over log Gaussian widths at fixed alpha, and its gradient
    (:func:`laplace_width_gradient`)."""
    b = with_log_width(basis, log_width)
    Phi_act = b.design(X, columns=cols)
    lap = _mode(Phi_act, cls, lik, alpha, cache["theta"], gtol=1e-11)
    cache["theta"] = lap.theta
    cidx = b.kernel_index()[cols]
    is_kernel = cidx >= 0
    grad = laplace_width_gradient(b.kernel, Phi_act, b.centres[cidx[is_kernel]], X, is_kernel,
                                  cls, lik, lap)
    return -lap.log_evidence, -grad


def check_classes(problem) -> None:
    counts = np.bincount(problem.t, minlength=problem.n_classes)
    single = problem.classes[counts == 1]
    if single.size:
        warn_user(f"class(es) {single.tolist()} have a single training example: their "
                  "weights and probabilities rest on one point", NumericalWarning)


def laplace_datatree(problem, basis, lik, lap: Laplace, res: ClassFit, *, shared, seed, draws,
                     chains, n_iter, trace, optimise_seconds: float) -> xr.DataTree:
    """The result of a Laplace fit (:func:`~..results.classification_datatree`): ``w`` drawn
    from the Laplace Gaussian ``N(theta, H^-1)`` (T01 eq. 26), ``alpha`` the type-II ML point
    values, the evidence trace in ``sample_stats.log_evidence``; ``optimise_seconds`` (attrs)
    the time of the optimisation alone, draws and DataTree excluded."""
    attrs = {
        "log_evidence": float(lap.log_evidence),
        "converged": int(res.converged and lap.converged),
        "n_iter": int(n_iter),
        "alpha_shared": int(shared),
        "n_at_alpha_floor": int(res.at_floor),
        "optimise_seconds": float(optimise_seconds),
        "learn_width": int(bool(problem.learn_width)),
        "hyperparameters": "point",  # w drawn from the Laplace Gaussian N(mu, Sigma)
    }
    return classification_datatree(
        problem, basis, lik, theta=lap.theta, Sigma=lap.Sigma, alpha=lap.alpha, cols=lap.cols,
        cls=lap.cls, sample_stats={"log_evidence": (("iteration",), np.asarray(trace))},
        attrs=attrs, seed=seed, draws=draws, chains=chains)


# why weights reach the alpha floor, by likelihood (the warning of warn_fit)
FLOOR_REASONS = {
    "classes": "the classes are (nearly) separable and only the bound keeps the weights "
               "finite; the probabilities are very confident",
    "counts": "the counts are very large or vary more than the likelihood allows (a "
              "Poisson's over-dispersed counts: try RVMNegativeBinomialRegression) and only "
              "the bound keeps the weights finite; the fitted rates follow the counts "
              "closely",
}


def warn_fit(notes, at_floor: int, alpha_min: float, converged: bool, method: str,
             max_iter, floor_reason: str = "classes") -> None:
    """The warnings of a Laplace or VRVM fit: its notes, weights at the alpha floor
    (:data:`FLOOR_REASONS`: separable classes, or large or over-dispersed counts; or the
    likelihood's own ``floor_reason`` text), no convergence."""
    for note in notes:
        warn_user(note, NumericalWarning)
    if at_floor:
        warn_user(
            f"{at_floor} weight precision(s) hit the floor alpha_min={alpha_min:g} (unit-"
            f"norm columns): {FLOOR_REASONS.get(floor_reason, floor_reason)}", NumericalWarning)
    if not converged:
        warn_user(f"{method} did not converge in max_iter={max_iter} iterations; the "
                  "result is the last iterate (converged=False)", ConvergenceWarning)


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, likelihood,
         alpha, alpha_min):
    if not isinstance(problem, RVMClassification):
        raise TypeError(f"{method!r} here is for RVMClassification, got "
                        f"{type(problem).__name__}")
    check_iterations(max_iter, tol, alpha_min)
    if likelihood not in (None, "bernoulli", "softmax"):
        raise ValueError(f"likelihood must be None, 'bernoulli' or 'softmax', got {likelihood!r}")
    if alpha not in ("per-class", "shared"):
        raise ValueError(f"alpha must be 'per-class' or 'shared', got {alpha!r}")
    K = problem.n_classes
    if likelihood == "bernoulli" and K > 2:
        raise ValueError(f"likelihood='bernoulli' needs 2 classes, the problem has {K}")
    softmax_model = likelihood == "softmax" or K > 2
    shared = alpha == "shared" and softmax_model
    if shared and algorithm == "fast":
        raise ValueError("alpha='shared' (one alpha per basis over the classes) has no "
                         "closed-form sequential update: use method='evidence-mackay'")
    check_classes(problem)
    return fit_laplace(problem, likelihood_for(problem.t, K, softmax_model), algorithm,
                       method, seed=seed, max_iter=max_iter, tol=tol, draws=draws,
                       chains=chains, alpha_min=alpha_min, shared=shared)


def fit_laplace(problem, lik, algorithm: str, method: str, *, seed, max_iter: int, tol: float,
                draws: int, chains: int, alpha_min: float, shared: bool = False
                ) -> xr.DataTree:
    """Laplace type-II ML of an RVM with the non-Gaussian likelihood ``lik`` on its latent
    ``f = Phi w`` (any :class:`~sparsebayes.models.likelihoods.Likelihood`; checked
    options), its own parameters learned by :func:`learned_likelihood`: ``algorithm`` "fast"
    (TF03 on the Laplace surrogate, :func:`fit_fast`) or "mackay" (T01 eq. 16,
    :func:`fit_mackay`), the warnings of :func:`warn_fit` (``method`` names the fit in them)
    and the result of :func:`laplace_datatree`."""
    # one BLAS thread: thousands of calls on matrices of tens to hundreds of rows, where
    # OpenBLAS threads only add synchronisation
    start = time.perf_counter()

    def solve(lik, warm=None):
        return _solve(problem, algorithm=algorithm, softmax_model=lik.n_out > 1, shared=shared,
                      max_iter=int(max_iter), tol=float(tol), alpha_min=float(alpha_min),
                      lik=lik, warm=warm)

    with one_blas_thread():
        sol = learned_likelihood(lik, solve, problem) if lik.param_names else solve(lik)
    optimise_seconds = time.perf_counter() - start
    warn_fit(sol.notes, sol.run.at_floor, alpha_min, sol.run.converged and sol.lap.converged,
             method, max_iter, lik.floor_reason)
    return laplace_datatree(problem, sol.basis, sol.lik, sol.lap, sol.run, shared=shared,
                            seed=seed, draws=draws, chains=chains, n_iter=sol.n_iter,
                            trace=sol.trace, optimise_seconds=optimise_seconds)


def learned_likelihood(lik, solve, problem, xtol: float = 1e-2, polish: float = 0.05
                       ) -> Solution:
    """The solution at the likelihood's own parameters (``lik.param_names``, e.g. a negative
    binomial's dispersion) that maximise the Laplace evidence (PRML 7.114) over their logs
    within ``lik.log_bounds``: the profile evidence, each value a whole ``solve(lik, warm)``
    (alpha and the pruning re-fitted). One parameter: Brent's bounded search; more: the
    bounded Nelder-Mead simplex (a Student-t's scale and degrees of freedom trade off along a
    ridge, where Powell's line searches stall). ``xtol``: in the log parameters (and 1e-3
    nats in the evidence).

    Each solve is a local optimum of the sequential algorithm, and a warm start from a
    nearby model can reach a different one than a cold start. So the search runs twice: from
    the likelihood's start values with every solve warm-started from the model of the best
    solve so far (its pairs, alpha and mode), where a solve takes a few sequential steps
    instead of growing the model from nothing; then within ``polish`` (in the logs) of that
    optimum with cold solves. A point is solved once per stage; the best solution is
    returned. ``problem`` is named in the progress lines of a long search."""
    names = lik.param_names
    bounds = np.array([lik.log_bounds[k] for k in names])
    best: dict = {}  # the best solve so far ("sol") and its log parameters ("x")
    progress = Evaluations(f"the {lik.label} likelihood's {' and '.join(names)} by the "
                           f"profile evidence of {describe(problem)}",
                           PROFILE_SOLVES[min(len(names), 2) - 1])

    def stage(x0, box, warm: bool, simplex=None):
        seen: dict = {}

        def minus_evidence(x):
            key = tuple(np.atleast_1d(x).tolist())
            if key not in seen:
                values = np.exp(np.atleast_1d(x))
                start = best["sol"].lap if warm and best else None
                sol = solve(lik.with_params(**dict(zip(names, values, strict=True))),
                            warm=None if start is None else
                            (start.cols, start.cls, start.alpha, start.theta))
                seen[key] = -sol.lap.log_evidence
                progress.update(seen[key])
                if not best or sol.lap.log_evidence > best["sol"].lap.log_evidence:
                    best.update(x=np.atleast_1d(x).copy(), sol=sol)
            return seen[key]

        if len(names) == 1:
            optimize.minimize_scalar(minus_evidence, bounds=box[0], method="bounded",
                                     options={"xatol": xtol})
        else:
            optimize.minimize(minus_evidence, x0, method="Nelder-Mead", bounds=box,
                              options={"xatol": xtol, "fatol": 1e-3,
                                       "initial_simplex": simplex})

    stage(np.clip(np.log([lik.params[k] for k in names]), *bounds.T), bounds, warm=True)
    x = best["x"]
    box = np.column_stack([np.maximum(x - polish, bounds[:, 0]),
                           np.minimum(x + polish, bounds[:, 1])])
    stage(x, box, warm=False, simplex=np.clip(x + np.vstack([np.zeros(x.size),
                                                             0.5 * polish * np.eye(x.size)]),
                                              *box.T))
    return best["sol"]


def fit_fast(problem, *, seed=None, max_iter: int = 10000, tol: float = 1e-3,
             draws: int = 500, chains: int = 2, likelihood: str | None = None,
             alpha: str = "per-class", alpha_min: float = ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for RVM classification by Tipping & Faul's (2003) sequential algorithm
    on the Laplace surrogate (``t_hat``, ``B``; T&F §2.2).

    ``likelihood``: None (Bernoulli for 2 classes, softmax T01 eq. 28 for more) or "softmax" to
    force the softmax for 2 classes. ``alpha``: "per-class" (one per class weight; the only
    choice here, "shared" needs ``evidence-mackay``). ``alpha_min``: floor on alpha for
    unit-norm columns (bounds the weights on separable data; a warning says when it is hit).
    ``tol``: converged when no basis is to be added or deleted and every re-estimate changes
    ``ln alpha`` by less than ``tol`` (T&F §4.4); the default 1e-3 is SparseBayes's
    ``MinDeltaLogAlpha``.
    """
    return _fit(problem, "fast", "evidence", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, likelihood=likelihood, alpha=alpha,
                alpha_min=alpha_min)


def fit_mackay(problem, *, seed=None, max_iter: int = 5000, tol: float = 1e-6,
               draws: int = 500, chains: int = 2, likelihood: str | None = None,
               alpha: str = "per-class", alpha_min: float = ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for RVM classification by MacKay re-estimation (T01 §3 eq. 16)
    around the IRLS mode; ``alpha="shared"`` ties one alpha per basis over the K classes."""
    return _fit(problem, "mackay", "evidence-mackay", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, likelihood=likelihood, alpha=alpha,
                alpha_min=alpha_min)


# --------------------------------------------------------------------------------------------
# Leave-out refits, warm-started from the full-data fit
# --------------------------------------------------------------------------------------------


def posterior_pairs(post: xr.DataTree) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The (basis column, class) pairs in a classification result's Gaussian weight posterior
    (``gaussian_posterior``, Laplace or variational): their columns (indices into the fitted
    basis), classes (0 for the binary model), ``alpha`` and posterior means, class-major
    with the columns sorted within a class (the order the fits hold them in)."""
    _, columns = basis_from_posterior(post)
    g = post["gaussian_posterior"]
    mu, alpha = g["mu"].values, g["alpha"].values
    if mu.ndim == 1:
        order = np.argsort(columns, kind="stable")
        return columns[order], np.zeros(columns.size, int), alpha[order], mu[order]
    cls, pos = np.nonzero(np.isfinite(alpha).T)  # class-major; columns sorted on dim basis
    return columns[pos], cls, alpha[pos, cls], mu[pos, cls]


class LaplaceRefits:
    """Warm-started refits of a Laplace type-II ML classification result (``evidence``:
    Tipping & Faul 2003 on the Laplace surrogate, :func:`fit_fast`; ``evidence-mackay``: T01
    eq. 16, :func:`fit_mackay`; Bernoulli or softmax, T01 eqs. 23-28) without some rows.

    A fold runs the fit's own loop, to its tolerance, on the other rows, starting from the
    full-data model (pairs in the model, alpha, mode), and returns the moderated predictive
    of the observed class at the left-out rows (what ``predict(post, X).proba`` gives for
    such a result). The left-out rows stay in the design (the basis is the fit's: leave-one-out
    leaves out a target, not a column) with zero precision in the surrogate and no term in
    the likelihood: no copy of the N x M design per fold. The columns are scaled to unit norm
    over all N rows once, where a fit of the kept rows scales them over those: the evidence
    is invariant to the scale, so only a weight at the floor ``alpha_min`` (per unit-norm
    column) can differ. With a learned Gaussian width (``learn_width``) a fold re-runs the
    width search from the fitted width and model on the kept rows, whose design it rebuilds
    (the width changes it). The refit keeps all K classes even if a class has no kept row.

    ``max_iter``, ``tol``, ``alpha_min``: default, the fit's (as passed to it, else the
    method's defaults).

    Another one-output likelihood's family subclasses it with its ``problem_type``, ``fits``,
    :meth:`likelihood`, :meth:`problem_on` and :meth:`fold_logpdf`."""

    problem_type = RVMClassification
    fits = {"evidence": fit_fast, "evidence-mackay": fit_mackay}  # the fits it refits

    def __init__(self, post: xr.DataTree, *, max_iter: int | None = None,
                 tol: float | None = None, alpha_min: float | None = None) -> None:
        if not isinstance(post, xr.DataTree) or \
                post.attrs.get("problem_kind") != self.problem_type.kind:
            raise TypeError(f"post must be an {self.problem_type.__name__} result of fit")
        method = post.attrs.get("method")
        if method not in self.fits:
            raise ValueError(f"{type(self).__name__} refits {' and '.join(map(repr, self.fits))}"
                             f" results, got {method!r}")
        fast = method == "evidence"
        self.algorithm = "fast" if fast else "mackay"
        options = refit_options(post, self.fits[method], max_iter=max_iter, tol=tol,
                                alpha_min=alpha_min)
        max_iter, tol, alpha_min = options["max_iter"], options["tol"], options["alpha_min"]
        check_iterations(max_iter, tol, alpha_min)
        self.max_iter, self.tol = max_iter, tol
        self.alpha_min = float(alpha_min)
        self.basis, _ = basis_from_posterior(post)
        self.X = post["constant_data"]["X"].values
        self.t = post["observed_data"]["t"].values.astype(int)
        self.classes = np.asarray(post.attrs.get("classes", ()))
        self.softmax_model = post.attrs["likelihood"] == "softmax"
        self.shared = bool(int(post.attrs.get("alpha_shared", 0)))
        self.prior = prior_from_posterior(post, GammaPrior())
        self.learn_width = bool(int(post.attrs.get("learn_width", 0)))
        cols, cls, alpha, theta = posterior_pairs(post)
        self.warm = (cols, cls, alpha, theta)
        if self.learn_width:
            return
        Phi = self.basis.design(self.X)
        norms = np.sqrt(np.einsum("nm,nm->m", Phi, Phi))
        norms[norms == 0] = 1.0
        Phi /= norms
        self.Phi = Phi
        self.Phi2 = Phi * Phi if fast and Phi.size <= PHI2_MAX else None
        self.b_n = self.prior.b * norms**2
        self.warm = (cols, cls, alpha / norms[cols] ** 2, theta * norms[cols])

    def refit(self, out: np.ndarray) -> tuple[ClassFit, np.ndarray]:
        """The fit without the rows ``out``, and the design rows ``out`` of its pairs (on the
        scale of its ``lap``)."""
        N = self.t.size
        out = check_rows_out(out, N)
        rows = np.setdiff1d(np.arange(N), out)
        with one_blas_thread():
            if self.learn_width:
                return self._refit_width(rows, out)
            lik = self.likelihood(rows)
            args = (self.Phi, lik, self.prior.a, self.b_n, self.alpha_min, self.max_iter,
                    self.tol)
            if self.algorithm == "fast":
                res = _run_fast(*args, warm=self.warm, Phi2=self.Phi2, rows=rows)
            else:  # the pruning threshold and the floor in the kept rows' unit norms
                kept2 = 1.0 - np.einsum("nm,nm->m", self.Phi[out], self.Phi[out])
                res = _run_mackay(*args, self.shared, warm=self.warm, rows=rows,
                                  scale=1.0 / np.maximum(kept2, np.finfo(float).tiny))
        return res, self.Phi[np.ix_(out, res.cols)]

    def likelihood(self, rows: np.ndarray):
        """The likelihood of the targets at ``rows`` (Bernoulli or softmax, T01 eqs. 23, 28)."""
        return likelihood_for(self.t[rows], self.classes.size, self.softmax_model)

    def problem_on(self, rows: np.ndarray):
        """The problem on the training ``rows`` with the fitted basis, learning the width."""
        b = self.basis
        return RVMClassification(self.X[rows], self.classes[self.t[rows]], kernel=b.kernel,
                                 bias=b.bias, extra_columns=b.extra, prior=self.prior,
                                 learn_width=True, centres=b.centres)

    def _refit_width(self, rows, out):
        sol = _solve(
            self.problem_on(rows), algorithm=self.algorithm, softmax_model=self.softmax_model,
            shared=self.shared, max_iter=int(self.max_iter), tol=float(self.tol),
            alpha_min=self.alpha_min, warm=self.warm)
        lap = sol.lap
        fit = ClassFit(lap.cols, lap.cls, lap.alpha, lap, sol.trace, sol.run.converged,
                       sol.n_iter, sol.run.at_floor, sol.notes)
        return fit, sol.basis.design(self.X[out], columns=lap.cols)

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """``ln p(t_n | t_kept)`` (len(out),) of the observed classes at the rows ``out``
        under the refit's moderated predictive (MacKay 1992; PRML 4.153-4.155; the pairwise
        form for the softmax, :func:`~..predictive.classification.moderated_softmax`), and
        whether the refit converged."""
        res, Phi_out = self.refit(out)
        lap = res.lap
        n_out = self.classes.size if self.softmax_model else 1
        moments = pair_logit_moments(Phi_out, lap.cls, lap.theta, lap.Sigma, n_out)
        return (self.fold_logpdf(*moments, self.t[np.asarray(out, dtype=int)]),
                bool(res.converged and lap.converged))

    def fold_logpdf(self, m: np.ndarray, V: np.ndarray, t_out: np.ndarray) -> np.ndarray:
        """The log predictive of the targets ``t_out`` left out, given the mean (n, K) and
        covariance (n, K, K) of their logits under the refit: the moderated class
        probabilities."""
        logp = moderated_from_moments(m, V)
        return logp[np.arange(t_out.size), t_out]


def laplace_cavity_logpdf(post: xr.DataTree, *, n_points: int | None = None) -> np.ndarray:
    """``ln p(t_n | t_-n)`` (N,) of an RVM classification result by the Laplace leave-one-out
    of Vehtari, Mononen, Tolvanen, Sivula & Winther (2016, LA-LOO) at the fitted alpha: each
    point's site taken out of the Gaussian weight posterior and the likelihood integrated over
    the cavity (:func:`~..predictive.classification.cavity_logpdf`). ``evidence`` /
    ``evidence-mackay``: the Laplace sites at the mode (T01 eqs. 24-26); ``vrvm``: the same
    with the sites of its bound (Jaakkola-Jordan / Böhning, Bishop & Tipping 2000), the
    variational analogue. Optimistic: alpha and the pruning are those fitted to all points
    (the exact estimator refits them: :class:`LaplaceRefits`)."""
    if not isinstance(post, xr.DataTree) or \
            post.attrs.get("problem_kind") != RVMClassification.kind:
        raise TypeError("post must be an RVMClassification result of fit")
    method = post.attrs.get("method")
    if post.attrs.get("likelihood_bound") in ("jaakkola-jordan", "bohning"):
        sites = "bound"  # the variational bound's sites (vrvm)
    elif post.attrs.get("hyperparameters") == "point":
        sites = "laplace"
    else:
        raise ValueError(f"no Gaussian sites in a {method!r} result (bound "
                         f"{post.attrs.get('likelihood_bound')!r}): the cavity LOO is for the "
                         "evidence methods and the Jaakkola-Jordan / Böhning vrvm")
    X = post["constant_data"]["X"].values
    g = post["gaussian_posterior"]
    with one_blas_thread():
        return cavity_logpdf(design(post, X), post["observed_data"]["t"].values,
                             g["mu"].values, g["Sigma"].values, sites=sites, n_points=n_points)
