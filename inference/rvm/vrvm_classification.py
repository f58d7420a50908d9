"""The variational RVM for classification (Bishop & Tipping 2000 §4; summary §5):
``q(w) q(alpha)`` with a quadratic lower bound on the log likelihood and closed-form updates
of its variational parameters.

* Two classes: the Jaakkola & Jordan (1997) bound
  ``ln sigma(z) >= ln sigma(xi) + (z - xi)/2 - lambda(xi) (z^2 - xi^2)``,
  ``lambda(xi) = tanh(xi/2) / (4 xi)``, one ``xi_n`` per point, updated to
  ``xi_n^2 = E[(phi_n^T w)^2]`` (PRML 10.163).
* K > 2 classes: Böhning's (1992) bound on the log-sum-exp, a second-order expansion around
  ``psi_n`` with the fixed curvature ``A = (I - 1 1^T / K) / 2 >= diag(p) - p p^T``;
  ``psi_n = E[f_n]`` is its optimum (Murphy 2012 §21.8.1.2). Chosen over Bouchard's (2007)
  bound (``softmax_bound="bouchard"``, kept for comparison) because it touches the softmax
  at ``psi_n`` (value and gradient) for every K, where Bouchard's sum of K logistic terms
  is not tight when several logits are comparable; it keeps one K-vector of variational
  parameters per point (Bouchard's K + 1); and its curvature does not change between
  updates (the comparison of the two bounds is in ``benchmarks/results``). Its cost: the
  curvature is the worst case, so confidently classified points are penalised more than by
  the softmax.

For fixed variational parameters either bound is a Gaussian likelihood in ``w`` (targets
``z``, precisions ``b``), so the bound maximised over ``q(w)`` and over the rate of
``q(alpha_i) = Gamma(1/2, 1 / (2 alpha_i))`` (Tipping's flat prior, shape ``a + 1/2``) is
that Gaussian's evidence at ``alpha`` plus constants (derivation in the docstring of
:func:`vrvm_classification`). We maximise it by Tipping & Faul's (2003) sequential
add / delete / re-estimate steps — each a closed-form maximisation of the bound over one
``q(alpha_i)`` (and ``q(w)``) — alternating with the closed-form update of ``xi`` (or
``psi``). Every step increases the bound, bases are pruned exactly (``<alpha_i> = inf``),
and the bound is recorded after every update of the variational parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import log_expit, logsumexp, softmax

from sparsebayes.models import GammaPrior, NumericalWarning, RVMClassification
from sparsebayes.models.likelihoods import likelihood_for, pair_logits
from sparsebayes.models.priors import resolve_prior

from ..contract import refit_options
from ..numerics import (
    LOG_2PI,
    check_iterations,
    check_positive_int,
    check_rows_out,
    cholesky,
    cholesky_inverse,
    one_blas_thread,
    warn_user,
)
from ..predictive.classification import logit_moments, moderated_from_moments, pair_logit_moments
from ..predictive.regression import design
from ..results import (
    basis_from_posterior,
    classification_datatree,
    is_result_of,
    prior_from_posterior,
    relevance_counts,
)
from .diagnostics import vrvm_classification_khat
from .laplace import ALPHA_MIN, check_classes, posterior_pairs, warn_fit
from .sequential import DenseProducts, Policy, SequentialSparseBayes
from .vrvm import weight_bound_terms

__all__ = ["jj_lambda", "jj_posterior", "vrvm_classification",
           "vrvm_classification_coordinate", "fit_vrvm_classification", "VRVMClassState",
           "VRVMClassificationRefits"]

# The limit of one weight's terms in the bound (flat prior) as <alpha_i> -> inf: what a
# pruned weight contributes, so pruning keeps the bound continuous.
PRUNED_TERM = 0.5 * (1 + LOG_2PI)
XI_EVERY = 3  # sequential actions between two updates of the variational parameters
OMEGA_MAX = 64.0  # largest over-relaxation factor of the xi updates


def jj_lambda(xi: np.ndarray) -> np.ndarray:
    """``lambda(xi) = tanh(xi/2) / (4 xi)`` (JJ97; PRML 10.150), ``1/8 - xi^2/96`` near 0."""
    xi = np.abs(np.asarray(xi, dtype=float))
    small = xi < 1e-4
    safe = np.where(small, 1.0, xi)
    return np.where(small, 0.125 - xi**2 / 96, np.tanh(safe / 2) / (4 * safe))


class _JaakkolaJordan:
    """Two classes: the JJ bound as a Gaussian likelihood, ``ln p(t|w) >= c0 + 1/2 sum b z^2
    - 1/2 sum b (z - f)^2`` with ``b = 2 lambda(xi)``, ``z = (t - 1/2) / b``."""

    n_out = 1

    def __init__(self, t: np.ndarray) -> None:
        self.r = np.asarray(t, dtype=float) - 0.5

    def design(self, Phi: np.ndarray) -> np.ndarray:
        return Phi

    def start(self, N: int) -> np.ndarray:
        return np.zeros(N)

    def update(self, F, m_rows, v_rows, params) -> np.ndarray:
        """``xi_n = sqrt(E[f_n^2])`` (PRML 10.163)."""
        return np.sqrt(m_rows**2 + v_rows)

    def surrogate(self, xi: np.ndarray):
        """Targets ``z``, precisions ``b`` and the constant ``c0``."""
        xi = np.abs(xi)
        lam = jj_lambda(xi)
        b = 2 * lam
        c0 = float(np.sum(log_expit(xi) - xi / 2 + lam * xi**2))
        return self.r / b, b, c0


class _Bohning:
    """K classes: Böhning's bound ``ln softmax_t(f) >= f_t - lse(psi) - (f - psi)^T g
    - 1/2 (f - psi)^T A (f - psi)``, ``g = softmax(psi)``, ``A = (I - 1 1^T / K) / 2``,
    whitened to K - 1 unit-precision rows per point: ``A = L L^T``, ``L = V / sqrt(2)``
    (V: an orthonormal basis orthogonal to the ones), rows ``L^T (e_k x phi_n)`` and
    targets ``z_n = sqrt(2) V^T (y_n - g_n + A psi_n)``."""

    def __init__(self, t: np.ndarray, K: int) -> None:
        self.n_out = K
        self.Y = np.eye(K)[np.asarray(t, dtype=int)]
        self.A = 0.5 * (np.eye(K) - 1.0 / K)
        _, V = np.linalg.eigh(self.A)
        self.V = V[:, 1:]  # eigenvalue 0 (the ones) first, then K - 1 halves
        self.L = self.V * np.sqrt(0.5)

    def design(self, Phi: np.ndarray) -> np.ndarray:
        N, M = Phi.shape
        K = self.n_out
        return np.einsum("kr,nm->nrkm", self.L, Phi).reshape(N * (K - 1), K * M)

    def start(self, N: int) -> np.ndarray:
        return np.zeros((N, self.n_out))

    def update(self, F, m_rows, v_rows, params) -> np.ndarray:
        """``psi_n = E[f_n]``, the bound's optimum."""
        return F.copy()

    def surrogate(self, psi: np.ndarray):
        g = softmax(psi, axis=1)
        Apsi = psi @ self.A
        bvec = self.Y - g + Apsi
        z = np.sqrt(2.0) * (bvec @ self.V)
        c0 = float(np.sum(-logsumexp(psi, axis=1) + np.sum(psi * g, axis=1)
                          - 0.5 * np.sum(psi * Apsi, axis=1)))
        return z.reshape(-1), np.ones(z.size), c0


class _Bouchard:
    """K classes: Bouchard's (2007) bound ``lse(f) <= a + sum_k ln(1 + exp(f_k - a))`` with
    the JJ bound on every term: per point ``a_n`` and ``xi_nk`` (stored as columns
    ``[a, xi_1..xi_K]``), rows ``e_k x phi_n`` with precisions ``2 lambda(xi_nk)`` and
    targets ``(y_nk - 1/2 + 2 lambda_nk a_n) / (2 lambda_nk)``."""

    def __init__(self, t: np.ndarray, K: int) -> None:
        self.n_out = K
        self.Y = np.eye(K)[np.asarray(t, dtype=int)]

    def design(self, Phi: np.ndarray) -> np.ndarray:
        N, M = Phi.shape
        K = self.n_out
        return np.einsum("kj,nm->nkjm", np.eye(K), Phi).reshape(N * K, K * M)

    def start(self, N: int) -> np.ndarray:
        return np.zeros((N, self.n_out + 1))

    def update(self, F, m_rows, v_rows, params) -> np.ndarray:
        """``a_n = (K/2 - 1 + 2 sum_k lambda_nk m_nk) / (2 sum_k lambda_nk)``, then
        ``xi_nk^2 = E[(f_nk - a_n)^2]`` (each the bound's optimum given the rest)."""
        K = self.n_out
        m, v = m_rows.reshape(-1, K), v_rows.reshape(-1, K)
        lam = jj_lambda(params[:, 1:])
        a = (K / 2 - 1 + 2 * np.sum(lam * m, axis=1)) / (2 * np.sum(lam, axis=1))
        xi = np.sqrt((m - a[:, None]) ** 2 + v)
        return np.column_stack([a, xi])

    def surrogate(self, params: np.ndarray):
        a, xi = params[:, :1], np.abs(params[:, 1:])
        lam = jj_lambda(xi)
        b = 2 * lam
        z = (self.Y - 0.5 + b * a) / b
        c0 = float(np.sum(-a[:, 0]) + np.sum(a / 2 - xi / 2 + log_expit(xi)
                                               - lam * (a**2 - xi**2)))
        return z.reshape(-1), b.reshape(-1), c0


SOFTMAX_BOUNDS = {"bohning": _Bohning, "bouchard": _Bouchard}


def _bound_model(t: np.ndarray, n_classes: int, softmax_bound: str = "bohning"):
    if n_classes == 2:
        return _JaakkolaJordan(t)
    return SOFTMAX_BOUNDS[softmax_bound](t, n_classes)


def expected_quadratic(z, b, c0, m_rows, v_rows) -> float:
    """``E_q[c0 + 1/2 sum b z^2 - 1/2 sum b (z - f)^2]`` for rows ``f`` with means
    ``m_rows`` and variances ``v_rows`` under ``q(w)``: the expected likelihood bound."""
    return float(c0 + 0.5 * np.sum(b * z**2) - 0.5 * np.sum(b * ((z - m_rows) ** 2 + v_rows)))


def surrogate_log_evidence(z, b, c0, core_log_evidence: float) -> float:
    """``ln int exp(quadratic bound) N(w | 0, A^-1) dw``: ``c0 + 1/2 sum b z^2 + 1/2 sum
    ln(2 pi / b) + ln N(z | 0, B^-1 + Phi A^-1 Phi^T)``."""
    return float(c0 + 0.5 * np.sum(b * z**2) + 0.5 * np.sum(np.log(2 * np.pi / b))
                 + core_log_evidence)


def _row_moments(Phi_act: np.ndarray, mu: np.ndarray, Sigma: np.ndarray):
    return Phi_act @ mu, np.einsum("ij,ij->i", Phi_act @ Sigma, Phi_act)


def jj_posterior(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, *, max_iter: int = 500,
                 tol: float = 1e-12):
    """``q(w) = N(m, S)`` of the JJ bound at fixed ``alpha`` (PRML 10.156-10.163, ARD):
    ``S^-1 = A + 2 Phi^T Lambda(xi) Phi``, ``m = S Phi^T (t - 1/2)``, ``xi_n^2 =
    phi_n^T (S + m m^T) phi_n``, iterated to convergence. Returns ``(m, S, xi, bound)``
    (``m``, ``S`` for that ``xi``) with ``bound`` the JJ lower bound on ``ln p(t | alpha)``
    (PRML 10.164)."""
    Phi = np.asarray(Phi, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    model = _JaakkolaJordan(t)
    xi = model.start(Phi.shape[0])
    prev = -np.inf
    for _ in range(max_iter):
        z, b, c0 = model.surrogate(xi)
        H = Phi.T @ (b[:, None] * Phi) + np.diag(alpha)
        S = np.linalg.inv(H)
        m = S @ (Phi.T @ (b * z))
        mr, vr = _row_moments(Phi, m, S)
        bound = (expected_quadratic(z, b, c0, mr, vr) - 0.5 * m @ (alpha * m)
                 - 0.5 * np.sum(alpha * np.diag(S)) + 0.5 * np.sum(np.log(alpha))
                 + 0.5 * np.linalg.slogdet(S)[1] + 0.5 * alpha.size)
        if abs(bound - prev) < tol * (1 + abs(bound)):
            break
        prev = bound
        xi = model.update(None, mr, vr, xi)
    return m, S, xi, float(bound)


@dataclass
class VRVMClassState:
    """The factors at convergence over the (basis column, class) pairs ``cols``, ``cls``
    (class-major; binary: one class): ``q(w) = N(mu, Sigma)``, ``q(alpha_i) =
    Gamma(k, k / alpha_i)`` (``k = a + 1/2``); ``bound`` after every update of ``xi`` /
    ``psi``."""

    cols: np.ndarray
    cls: np.ndarray
    alpha: np.ndarray
    mu: np.ndarray
    H: np.ndarray  # Sigma^-1
    xi: np.ndarray  # JJ xi (N,) or Böhning psi (N, K)
    bound: np.ndarray
    collapsed: np.ndarray  # the same bound from the surrogate's evidence (a check)
    converged: bool
    n_iter: int
    at_floor: int
    notes: list
    q_alpha_shape: float = 0.5  # q(alpha_i) = Gamma(shape, shape / <alpha_i>)


def vrvm_classification(Phi: np.ndarray, t: np.ndarray, n_classes: int, *,
                        alpha_min: float = ALPHA_MIN, max_iter: int = 10000,
                        tol: float = 1e-3, bound_rtol: float = 1e-9,
                        check: bool = False, softmax_bound: str = "bohning") -> VRVMClassState:
    """Maximise the variational bound of RVM classification (Tipping's flat prior).

    For fixed ``xi`` the likelihood bound is ``c0 + 1/2 sum b z^2 - 1/2 sum b (z - f)^2``;
    maximising over ``q(w)`` gives ``ln int exp(bound) N(w | 0, <A>^-1) dw +
    1/2 sum (<ln alpha_i> - ln <alpha_i>)``, and with ``q(alpha_i) = Gamma(k, r_i)`` each
    weight adds ``E ln p(alpha_i) + H[q(alpha_i)]``. For the flat prior and ``k = 1/2`` (the
    optimal shape, BT00 / summary §2) these sum, for every ``r_i``, to the surrogate's
    Gaussian evidence at ``alpha = <alpha>`` plus ``(1 + ln 2 pi) / 2`` per weight (the
    digamma and ``ln r`` terms cancel). So Tipping & Faul's gains are exact bound gains;
    a pruned weight (``<alpha_i> -> inf``) keeps its constant, the limit of its terms.
    Columns are scaled to unit norm (the bound is invariant), ``<alpha> >= alpha_min`` as in
    the Laplace fit (bounds the weights on separable data).

    Two phases alternate, each taking ``XI_EVERY`` sequential actions between updates of
    the variational parameters: over every candidate until an update round adds or deletes
    no basis; then over the bases in the model only (the slow part, the coupled linear
    convergence of ``xi`` and ``alpha``, at O(N M_t^2) per update instead of O(N M M_t))
    until the sequential loop has nothing to change on a fresh surrogate (``tol`` on
    ``ln alpha``, T&F §4.4) and the update raised the bound by less than
    ``bound_rtol (1 + |L|)``; there each ``xi`` update is also tried over-relaxed,
    ``xi + omega (xi_new - xi)`` (``omega`` doubling up to ``OMEGA_MAX`` while it wins, reset
    to 2 when it loses), and kept only if its bound is the higher (485 -> 110 updates on
    breast cancer). Converged when the next round over every candidate adds and deletes
    nothing. ``check``: also record the bound by the collapsed formula.
    """
    Phi = np.asarray(Phi, dtype=float)
    norms = np.sqrt(np.einsum("nm,nm->m", Phi, Phi))
    norms[norms == 0] = 1.0
    Phi_n = Phi / norms
    model = _bound_model(t, n_classes, softmax_bound)
    return _sequential(Phi_n, model.design(Phi_n), norms, model, alpha_min=alpha_min,
                       max_iter=max_iter, tol=tol, bound_rtol=bound_rtol, check=check)


def _sequential(Phi_n, Phi_s, norms, model, *, alpha_min, max_iter, tol, bound_rtol, check,
                start=None) -> VRVMClassState:
    """The iterations of :func:`vrvm_classification` on unit-norm columns ``Phi_n`` (norms
    ``norms``) and the bound's design ``Phi_s``; ``start``: (pairs in the model, their alpha
    on unit-norm columns, variational parameters) to start from (else the empty model at
    ``model.start``)."""
    N, M = Phi_n.shape
    K = model.n_out
    run = _Ascent(model, Phi_n, np.tile(np.arange(M), K), np.repeat(np.arange(K), M), M * K,
                  tol, bound_rtol, max_iter, check)
    if start is None:
        z, b, _ = model.surrogate(model.start(N))
        state = _state(Phi_s, z, b, alpha_min)
    else:
        pairs, alpha, run.xi = start
        z, b, _ = model.surrogate(run.xi)
        state = _state(Phi_s, z, b, alpha_min, active=[int(p) for p in pairs], alpha=alpha)
    converged = False
    aligned = 0
    settled = False  # the last pass over the bases in the model converged
    while True:
        quiet_first = run(state, np.arange(M * K), "quiet")
        aligned = max(aligned, len(state.aligned))
        if (quiet_first and settled) or run.it >= max_iter:
            converged = quiet_first and settled
            break
        pairs = np.asarray(state.active)
        small = _state(Phi_s[:, pairs], state.products.t, state.products.b, alpha_min,
                       active=list(range(pairs.size)), alpha=state.alpha)
        settled = run(small, pairs, "bound")
        state = _state(Phi_s, small.products.t, small.products.b, alpha_min,
                       active=list(pairs[small.active]), alpha=small.alpha)
    act = np.asarray(state.active)
    order = np.lexsort((run.pair_col[act], run.pair_cls[act]))
    act = act[order]
    cols, cls = run.pair_col[act], run.pair_cls[act]
    scale = norms[cols]
    H_n = state.cross[np.asarray(state.active)][:, order][order]
    H_n = 0.5 * (H_n + H_n.T)
    H_n[np.diag_indices_from(H_n)] += state.alpha[order]
    alpha = state.alpha[order] * scale**2
    notes = []
    if aligned:
        notes.append(f"{aligned} candidate basis functions were skipped as numerical "
                     "duplicates of basis functions in the model")
    return VRVMClassState(
        cols=cols, cls=cls, alpha=alpha, mu=state.mu[order] / scale,
        H=H_n * np.outer(scale, scale), xi=run.xi, bound=np.asarray(run.bounds),
        collapsed=np.asarray(run.collapsed), converged=converged, n_iter=run.it,
        at_floor=int(np.sum(state.alpha <= alpha_min * (1 + 1e-9))), notes=notes)


def _state(Phi_s, z, b, alpha_min, **start) -> SequentialSparseBayes:
    """The sequential algorithm on the surrogate ``(Phi_s, z, b)`` with the Laplace loop's
    policy (alpha floor, damped re-estimates)."""
    return SequentialSparseBayes(Phi_s, z, b, policy=Policy(alpha_min=alpha_min, damped=True),
                                 refresh_after_step=False, **start)


class _Ascent:
    """The iterations of :func:`vrvm_classification` on a sequential state whose candidate
    ``j`` is the (column, class) pair ``pairs[j]``; keeps the bound trace and ``xi``."""

    def __init__(self, model, Phi_n, pair_col, pair_cls, n_pairs, tol, bound_rtol, max_iter,
                 check):
        self.model, self.Phi_n = model, Phi_n
        self.pair_col, self.pair_cls, self.n_pairs = pair_col, pair_cls, n_pairs
        self.tol, self.bound_rtol, self.max_iter, self.check = tol, bound_rtol, max_iter, check
        self.bounds: list[float] = []
        self.collapsed: list[float] = []
        self.xi = model.start(Phi_n.shape[0])
        self.it = 0
        self.omega = 2.0

    def __call__(self, state, pairs: np.ndarray, stop: str) -> bool:
        """Iterate until an iteration adds or deletes no basis (``stop="quiet"``; returns
        whether the first one did not), or until one takes no sequential action and raises
        the bound by less than ``bound_rtol`` (``stop="bound"``; returns whether that
        happened before max_iter)."""
        model = self.model
        first = True
        while self.it < self.max_iter:
            self.it += 1
            n_actions = 0
            done = switched = False
            while n_actions < XI_EVERY:
                action, _gain, done = state.step(self.tol)
                if done:
                    break
                n_actions += 1
                switched |= action in ("add", "delete")
            act = np.asarray(state.active)
            m_rows, v_rows = _row_moments(state.products.Phi[:, act], state.mu, state.Sigma)
            p = pairs[act]
            F = pair_logits(self.Phi_n[:, self.pair_col[p]], self.pair_cls[p], state.mu,
                        model.n_out)
            xi = model.update(F, m_rows, v_rows, self.xi)
            bound, sur = self._move(state, xi)
            if stop == "bound":  # over-relaxed step, kept if it gains more
                ext = self.xi + self.omega * (xi - self.xi)
                bound_ext, sur_ext = self._move(state, ext)
                if bound_ext >= bound:
                    xi, bound, sur = ext, bound_ext, sur_ext
                    self.omega = min(2 * self.omega, OMEGA_MAX)
                else:
                    self.omega = 2.0
                    self._move(state, xi)
            self.xi = xi
            self.bounds.append(bound)
            if self.check:
                self.collapsed.append(surrogate_log_evidence(*sur, state.log_evidence())
                                      + self.n_pairs * PRUNED_TERM)
            if stop == "quiet" and not switched:
                return first
            quiet = done and n_actions == 0
            if (stop == "bound" and quiet and len(self.bounds) > 1 and self.bounds[-1]
                    - self.bounds[-2] < self.bound_rtol * (1 + abs(self.bounds[-1]))):
                return True
            first = False
        return False


    def _move(self, state, xi):
        """The surrogate at ``xi``, ``q(w)`` for it, and the bound there."""
        z, b, c0 = self.model.surrogate(xi)
        state.move_to(DenseProducts(state.products.Phi, z, b))
        return _bound(state, z, b, c0, self.n_pairs), (z, b, c0)


def vrvm_classification_coordinate(Phi: np.ndarray, t: np.ndarray, n_classes: int,
                                   prior: GammaPrior, *, max_iter: int = 5000,
                                   tol: float = 1e-7,
                                   softmax_bound: str = "bohning") -> VRVMClassState:
    """Mean-field coordinate ascent for a proper Gamma prior (summary §§2, 5), every weight
    kept: ``q(w)``: ``S^-1 = <A> + Phi_s^T B(xi) Phi_s``, ``m = S Phi_s^T B z``;
    ``q(alpha_i) = Gamma(a + 1/2, b + <w_i^2> / 2)``; then ``xi`` (``psi``). The bound
    (summary §3 with the likelihood bound) is recorded after every sweep; stops when it
    changes by less than ``tol (1 + |L|)``. O(N M^2 + M^3) per sweep (M: every pair)."""
    Phi = np.asarray(Phi, dtype=float)
    model = _bound_model(t, n_classes, softmax_bound)
    return _coordinate(Phi, model.design(Phi), model, prior, max_iter=max_iter, tol=tol)


def _coordinate(Phi, Phi_s, model, prior, *, max_iter, tol, start=None) -> VRVMClassState:
    """The sweeps of :func:`vrvm_classification_coordinate` on the design ``Phi`` and the
    bound's design ``Phi_s``; ``start``: (``<alpha>`` of every pair, variational parameters)
    to start from (else ones and ``model.start``)."""
    N, M = Phi.shape
    K = model.n_out
    P = Phi_s.shape[1]
    cols, cls = np.tile(np.arange(M), K), np.repeat(np.arange(K), M)
    a_t = prior.a + 0.5
    alpha, xi = (np.ones(P), model.start(N)) if start is None else start
    bounds: list[float] = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (returned)
        z, b, c0 = model.surrogate(xi)
        mu, Sigma, H = _gaussian(Phi_s, z, b, alpha)
        w2 = mu**2 + np.diag(Sigma)
        b_t = prior.b + 0.5 * w2
        alpha = a_t / b_t
        m_rows, v_rows = _row_moments(Phi_s, mu, Sigma)
        bounds.append(expected_quadratic(z, b, c0, m_rows, v_rows)
                      + weight_bound_terms(prior, w2=w2, logdet_Sigma=np.linalg.slogdet(Sigma)[1],
                                           a_t=a_t, b_t=b_t))
        xi = model.update(pair_logits(Phi[:, cols], cls, mu, K), m_rows, v_rows, xi)
        if it > 1 and abs(bounds[-1] - bounds[-2]) < tol * (1 + abs(bounds[-1])):
            converged = True
            break
    z, b, _ = model.surrogate(xi)
    mu, _, H = _gaussian(Phi_s, z, b, alpha)
    return VRVMClassState(cols=cols, cls=cls, alpha=alpha, mu=mu, H=H, xi=xi,
                          bound=np.asarray(bounds), collapsed=np.empty(0), converged=converged,
                          n_iter=it, at_floor=0, notes=[], q_alpha_shape=a_t)


def _gaussian(Phi_s, z, b, alpha):
    """``q(w)`` for the surrogate: ``Sigma = (A + Phi_s^T B Phi_s)^-1``, ``mu = Sigma
    Phi_s^T B z`` and ``H = Sigma^-1``."""
    H = Phi_s.T @ (b[:, None] * Phi_s)
    H[np.diag_indices_from(H)] += alpha
    Sigma = cholesky_inverse(cholesky(H))
    return Sigma @ (Phi_s.T @ (b * z)), Sigma, H


def _bound(state, z, b, c0, n_pairs: int) -> float:
    """The bound (summary §3 with the likelihood bound for the data term) at ``q(w)`` of the
    state and ``q(alpha_i) = Gamma(1/2, 1 / (2 <alpha_i>))``; pruned weights add their
    limit ``PRUNED_TERM`` each."""
    act = np.asarray(state.active)
    m_rows, v_rows = _row_moments(state.products.Phi[:, act], state.mu, state.Sigma)
    w2 = state.mu**2 + np.diag(state.Sigma)
    logdet = np.linalg.slogdet(state.Sigma)[1]
    return (expected_quadratic(z, b, c0, m_rows, v_rows)
            + weight_bound_terms(GammaPrior(), w2=w2, logdet_Sigma=logdet, a_t=0.5,
                                 b_t=0.5 / state.alpha)
            + (n_pairs - act.size) * PRUNED_TERM)


def fit_vrvm_classification(problem, *, seed: int | None = None, prior: GammaPrior | None = None,
                            max_iter: int = 10000, tol: float | None = None, draws: int = 500,
                            chains: int = 2, alpha_min: float = ALPHA_MIN,
                            relevance: float = 1e-2,
                            softmax_bound: str = "bohning") -> xr.DataTree:
    """Variational RVM posterior of an :class:`RVMClassification` (BT00 §4). Two classes:
    JJ bound; K > 2: Böhning's bound on the softmax (module docstring).

    ``prior``: default ``problem.prior``, else Tipping's flat prior (as for regression),
    fitted by :func:`vrvm_classification` (sequential, exact pruning; ``tol`` on
    ``ln alpha``, default 1e-3; ``n_relevant``: the columns kept for any class). A Gamma
    prior with rate ``b > 0`` is fitted by :func:`vrvm_classification_coordinate` (every
    weight kept; ``tol`` on the bound, default 1e-7; ``n_relevant``: the columns with
    ``gamma_i = 1 - <alpha_i> Sigma_ii > relevance`` for some class, as for regression).

    The result has the layout of the Laplace fit (``w``, ``alpha`` on ``basis``, plus
    ``class`` for K > 2; ``gaussian_posterior`` with ``mu``, ``Sigma`` = ``q(w)``, so
    ``predict(post, X).proba`` is the same moderated output): ``w ~ q(w)``, ``alpha ~
    q(alpha)`` (pruned pairs: ``ALPHA_PRUNED``, as in the Laplace layout);
    ``sample_stats.elbo`` is the bound after every ``xi`` update, ``attrs["elbo"]`` its
    final value (up to the prior's normalisers when it is improper).
    """
    if not isinstance(problem, RVMClassification):
        raise TypeError(f"vrvm here is for RVMClassification, got {type(problem).__name__}")
    check_iterations(max_iter, tol, alpha_min, tol_optional=True)
    for name, v in (("draws", draws), ("chains", chains)):
        check_positive_int(name, v)
    if not (np.isscalar(relevance) and 0 < relevance < 1):
        raise ValueError(f"relevance must be a number in (0, 1), got {relevance!r}")
    if softmax_bound not in SOFTMAX_BOUNDS:
        raise ValueError(f"softmax_bound must be one of {sorted(SOFTMAX_BOUNDS)}, got "
                         f"{softmax_bound!r}")
    prior = resolve_prior(problem, GammaPrior() if prior is None and problem.prior is None
                          else prior)  # Tipping's flat prior by default
    if problem.learn_width:
        raise NotImplementedError("vrvm classification does not learn the kernel width: "
                                  "use learn_width=False (or the evidence method)")
    check_classes(problem)
    basis = problem.basis
    Phi = basis.design(problem.X)
    K = problem.n_classes
    flat = prior.a == 0 and prior.b == 0
    with one_blas_thread():
        if flat:
            st = vrvm_classification(Phi, problem.t, K, alpha_min=float(alpha_min),
                                     max_iter=int(max_iter), tol=tol or 1e-3,
                                     softmax_bound=softmax_bound)
        else:
            st = vrvm_classification_coordinate(Phi, problem.t, K, prior,
                                                max_iter=int(max_iter), tol=tol or 1e-7,
                                                softmax_bound=softmax_bound)
    _check_bound(st.bound)
    warn_fit(st.notes, st.at_floor, alpha_min, st.converged, "vrvm", max_iter)
    softmax_model = K > 2
    attrs = {
        "elbo": float(st.bound[-1]),
        "converged": int(st.converged),
        "n_iter": int(st.n_iter),
        "alpha_shared": 0,
        "n_at_alpha_floor": int(st.at_floor),
        "bound_up_to_constant": int(not (prior.a > 0 and prior.b > 0)),
        "prior": prior.as_array(),
        "likelihood_bound": softmax_bound if softmax_model else "jaakkola-jordan",
        "hyperparameters": "variational",  # independent draws from q(w) q(alpha)
        "psis_khat": vrvm_classification_khat(
            Phi, likelihood_for(problem.t, K, softmax_model), prior, st, seed=seed),
    }
    Sigma = cholesky_inverse(cholesky(st.H))
    # q(alpha_i) = Gamma(k, rate k / <alpha_i>): alpha drawn from it
    dt = classification_datatree(
        problem, basis, likelihood_for(problem.t, K, softmax_model), theta=st.mu,
        Sigma=Sigma, alpha=st.alpha, cols=st.cols, cls=st.cls,
        sample_stats={"elbo": (("iteration",), np.asarray(st.bound))}, attrs=attrs,
        seed=seed, draws=draws, chains=chains, q_alpha_shape=st.q_alpha_shape)
    if not flat:  # every weight kept: count the well-determined ones
        gamma = 1.0 - st.alpha * np.diag(Sigma)
        dt.attrs.update(relevance_counts(basis, np.unique(st.cols[gamma > relevance])))
    return dt


def _check_bound(bound: np.ndarray) -> None:
    """Warn if the bound ever decreased beyond round-off (every update should raise it)."""
    if bound.size < 2:
        return
    drop = -np.diff(bound)
    tol = 1e-9 * max(1.0, float(np.max(np.abs(bound))))
    if np.any(drop > tol):
        i = int(np.argmax(drop))
        warn_user(f"the variational bound decreased by {drop[i]:.3g} at iteration {i + 2} "
                  "(more than round-off): the result may not be a local optimum",
                  NumericalWarning)


class _LeftOut:
    """A bound model of the points ``rows`` of an N-point design (leave-out refits): the
    surrogate rows of the other points get precision 0, so they drop out of every product of
    the sequential algorithm and of the bound, and add no constant; the variational
    parameters are the kept points' only."""

    def __init__(self, model, rows: np.ndarray, N: int, per_point: int) -> None:
        self.model, self.n_out, self.rows = model, model.n_out, rows
        self.srows = (rows[:, None] * per_point + np.arange(per_point)).ravel()
        self.size = N * per_point

    def start(self, N: int) -> np.ndarray:
        return self.model.start(self.rows.size)

    def update(self, F, m_rows, v_rows, params) -> np.ndarray:
        return self.model.update(F[self.rows], m_rows[self.srows], v_rows[self.srows], params)

    def surrogate(self, xi):
        z, b, c0 = self.model.surrogate(xi)
        Z, B = np.zeros(self.size), np.zeros(self.size)
        Z[self.srows], B[self.srows] = z, b
        return Z, B, c0


class VRVMClassificationRefits:
    """Warm-started refits of a variational RVM classification result (``vrvm``: Bishop &
    Tipping 2000 with the Jaakkola-Jordan bound for two classes, Böhning's (or Bouchard's)
    for K) without some rows.

    A fold runs the fit's own iterations (:func:`vrvm_classification` for Tipping's flat
    prior, :func:`vrvm_classification_coordinate` for a proper one), to its tolerance, on
    the other rows, starting from the full-data ``q(alpha)`` (the pairs in the model and
    their ``<alpha>``) and the kept points' variational parameters (at convergence functions
    of ``q(w)``: ``xi_n^2 = E[f_n^2]``, PRML 10.163; ``psi_n = E[f_n]``), and returns the
    moderated predictive of the observed class at the left-out rows under the refit's
    ``q(w)`` (what ``predict(post, X).proba`` gives for such a result). The left-out rows stay
    in the design (the basis is the fit's) with zero precision in the bound's Gaussian
    surrogate: no copy of the design per fold. Columns are scaled to unit norm over all N
    rows once (the bound is invariant to the scale; only a weight at the floor ``alpha_min``
    can differ from a fit of the kept rows, which scales them over those).

    ``max_iter``, ``tol``, ``alpha_min``: default, the fit's (as passed to it, else the
    method's defaults)."""

    def __init__(self, post: xr.DataTree, *, max_iter: int | None = None,
                 tol: float | None = None, alpha_min: float | None = None) -> None:
        if not is_result_of(post, RVMClassification):
            raise TypeError("post must be an RVMClassification result of fit")
        if post.attrs.get("method") != "vrvm":
            raise ValueError(f"VRVMClassificationRefits refits 'vrvm' results, got "
                             f"{post.attrs.get('method')!r}")
        options = refit_options(post, fit_vrvm_classification, max_iter=max_iter, tol=tol,
                                alpha_min=alpha_min)
        max_iter, tol, alpha_min = options["max_iter"], options["tol"], options["alpha_min"]
        check_iterations(max_iter, tol, alpha_min, tol_optional=True)
        self.prior = prior_from_posterior(post, GammaPrior())
        self.flat = self.prior.a == 0 and self.prior.b == 0
        self.max_iter, self.alpha_min = int(max_iter), float(alpha_min)
        self.tol = tol or (1e-3 if self.flat else 1e-7)
        self.t = post["observed_data"]["t"].values.astype(int)
        self.K = len(post.attrs["classes"])
        bound = post.attrs.get("likelihood_bound", "jaakkola-jordan")
        self.softmax_bound = "bohning" if bound == "jaakkola-jordan" else bound
        basis, _ = basis_from_posterior(post)
        X = post["constant_data"]["X"].values
        Phi = basis.design(X)
        N, M = Phi.shape
        cols, cls, alpha, _ = posterior_pairs(post)
        g = post["gaussian_posterior"]
        # the logits' moments under the full-data q(w), rows (point, logit): the start of
        # the variational parameters
        m, V = logit_moments(design(post, X), g["mu"].values, g["Sigma"].values)
        self.moments = (m, m.ravel(), np.einsum("nkk->nk", V).ravel())
        probe = _bound_model(self.t, self.K, self.softmax_bound)
        self.norms = np.ones(M)
        if self.flat:
            self.norms = np.sqrt(np.einsum("nm,nm->m", Phi, Phi))
            self.norms[self.norms == 0] = 1.0
            Phi /= self.norms
            self.start = (cls * M + cols, alpha / self.norms[cols] ** 2)
        else:
            self.start = (None, alpha)  # every pair, class-major: the coordinate fit's order
        self.Phi = Phi
        self.Phi_s = probe.design(Phi)
        self.per_point = self.Phi_s.shape[0] // N

    def _xi(self, model: _LeftOut) -> np.ndarray:
        """The kept points' variational parameters at the full-data ``q(w)``: the bound's
        optimum given it (Bouchard's pair (a, xi) by alternating its two updates). Böhning's
        update reads the logits' means only."""
        xi = model.start(0)
        for _ in range(50 if isinstance(model.model, _Bouchard) else 1):
            xi = model.update(*self.moments, xi)
        return xi

    def refit(self, out: np.ndarray) -> VRVMClassState:
        """The fit without the rows ``out`` (its ``mu``, ``H`` on the fit's columns)."""
        N = self.t.size
        out = check_rows_out(out, N)
        rows = np.setdiff1d(np.arange(N), out)
        model = _LeftOut(_bound_model(self.t[rows], self.K, self.softmax_bound), rows, N,
                         self.per_point)
        xi = self._xi(model)
        with one_blas_thread():
            if self.flat:
                pairs, alpha = self.start
                return _sequential(self.Phi, self.Phi_s, self.norms, model,
                                   alpha_min=self.alpha_min, max_iter=self.max_iter,
                                   tol=self.tol, bound_rtol=1e-9, check=False,
                                   start=(pairs, alpha, xi))
            return _coordinate(self.Phi, self.Phi_s, model, self.prior, max_iter=self.max_iter,
                               tol=self.tol, start=(self.start[1].copy(), xi))

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]:
        """``ln p(t_n | t_kept)`` (len(out),) of the observed classes at the rows ``out``
        under the refit's moderated predictive (MacKay 1992; the pairwise form for the
        softmax) with ``q(w)`` as the weight posterior, and whether the refit converged."""
        st = self.refit(out)
        out = np.asarray(out, dtype=int)
        Phi_out = self.Phi[np.ix_(out, st.cols)] * self.norms[st.cols]
        Sigma = cholesky_inverse(cholesky(st.H))
        logp = moderated_from_moments(*pair_logit_moments(Phi_out, st.cls, st.mu, Sigma,
                                                          1 if self.K == 2 else self.K))
        codes = self.t[out]
        return logp[np.arange(codes.size), codes], bool(st.converged)
