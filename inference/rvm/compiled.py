"""Compiled (numba, ``cache=True``) inner loops of the sequential algorithm and the Laplace
mode: the per-candidate formulas of TF03 eqs. (18)-(21) live here ONCE, as scalar functions
that :mod:`sparsebayes.inference.rvm.sequential` calls both from numpy (``basis_objective``,
``optimal_alpha``) and from the per-step kernel :func:`flat_proposals`.

At the sizes of a sparse model (a hundred candidates, a handful in the model) a step of the
algorithm is a few dozen numpy calls on tiny arrays, whose call overhead dominates; so each
hot piece is one compiled call here.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

SPAN_TOL = 1e-12  # a basis with S (or s_j) <= SPAN_TOL phi^T B phi lies numerically in the
# span of the model: it takes no action
SMALL = 48  # models up to this many weights use the compiled factorisations (plain loops);
# larger ones keep LAPACK / BLAS, whose blocking wins there

__all__ = ["SMALL", "SPAN_TOL", "objective", "flat_alpha", "adjust", "objective_array",
           "flat_alpha_array", "adjust_array", "flat_proposals", "decide", "reestimate_update",
           "bernoulli_mode", "recompute", "bernoulli_surrogate", "laplace_log_evidence",
           "weighted_cross", "flat_choice", "add_update", "delete_update", "BernoulliMode",
           "Recomputed"]


class BernoulliMode(NamedTuple):
    """:func:`bernoulli_mode`'s result: the mode ``theta`` of T01 eq. 24, the logits ``f``,
    ``ln p(t|theta)``, the Laplace log evidence, the gradient of Psi, the lower Cholesky
    factor ``L`` of ``H`` (T01 eq. 25), the iterations, ``converged``, and ``ok`` (False:
    ``H`` was not positive definite at an iterate). A NamedTuple: numba builds it in
    nopython mode."""

    theta: np.ndarray
    f: np.ndarray
    loglik: float
    log_evidence: float
    gradient: np.ndarray
    L: np.ndarray
    n_iter: int
    converged: bool
    ok: bool


class Recomputed(NamedTuple):
    """:func:`recompute`'s result: ``ok`` (False: ``H`` not positive definite, the other
    fields unset), ``mu``, ``Sigma`` (T01 eq. 6), ``S``, ``Q`` (TF03 eqs. 24-25) and
    ``logdet_Sigma`` (``-2 sum ln L_ii``)."""

    ok: bool
    mu: np.ndarray
    Sigma: np.ndarray
    S: np.ndarray
    Q: np.ndarray
    logdet_Sigma: float


# ---- one basis (TF03 eqs. 18-21, T01 App. A hyperpriors) ------------------------------------


@njit(cache=True)
def objective(alpha, s, q, a, b):
    """``l(alpha) + a ln alpha - b alpha`` (TF03 eq. 18). For ``alpha = inf`` (excluded): 0
    with the flat prior, ``-inf`` with a rate ``b > 0`` (see ``sequential.basis_objective``)."""
    if not math.isfinite(alpha):
        return -np.inf if b > 0 else 0.0
    return (0.5 * (math.log(alpha / (alpha + s)) + q * q / (alpha + s)) + a * math.log(alpha)
            - b * alpha)


@njit(cache=True)
def flat_alpha(s, q):
    """TF03 eqs. (20)-(21): ``s^2 / (q^2 - s)`` if ``q^2 > s``, else inf."""
    theta = q * q - s
    return s * s / theta if theta > 0 else np.inf


@njit(cache=True)
def adjust(new, cur, alpha_min, lam):
    """The Laplace policy on one proposal: the floor ``alpha_min``, then the damped log step
    ``cur (new / cur)^lam`` (``lam < 1``) between finite values."""
    if alpha_min > 0 and math.isfinite(new) and new < alpha_min:
        new = alpha_min
    if lam < 1 and math.isfinite(new) and math.isfinite(cur):
        new = cur * (new / cur) ** lam
    return new


@njit(cache=True)
def objective_array(alpha, s, q, a, b):
    out = np.empty(alpha.size)
    for k in range(alpha.size):
        out[k] = objective(alpha[k], s[k], q[k], a, b[k])
    return out


@njit(cache=True)
def flat_alpha_array(s, q):
    out = np.empty(s.size)
    for k in range(s.size):
        out[k] = flat_alpha(s[k], q[k])
    return out


@njit(cache=True)
def adjust_array(new, cur, alpha_min, lam):
    out = np.empty(new.size)
    for k in range(new.size):
        out[k] = adjust(new[k], cur[k], alpha_min, lam[k])
    return out


# ---- one step of the sequential algorithm ---------------------------------------------------


@njit(cache=True)
def flat_proposals(S, Q, diag, excluded, active, alpha, Sigma, mu, alpha_min, lam, blocked,
                   tabu):
    """Flat prior: for every candidate its proposed alpha (eqs. 20-21 then :func:`adjust`),
    the gain of moving to it (eq. 18 difference) and the current alpha. Excluded
    candidates need ``S > SPAN_TOL diag`` and ``Q^2 > S``; in-model ``s_j = 1 / Sigma_jj -
    alpha_j``, ``q_j = mu_j / Sigma_jj`` (see ``SequentialSparseBayes.sq``), and an in-model
    basis with ``s_j <= SPAN_TOL diag`` (numerically in the span of the others: ``Sigma_jj`` is
    ``1 / alpha_j`` to rounding, and A.3's update would divide by zero) takes no action.
    ``blocked`` (aligned duplicates, frozen candidates) take no action; ``tabu`` may not
    switch in or out; the last basis is never deleted."""
    M = S.size
    new = np.full(M, np.inf)
    gain = np.full(M, -np.inf)
    cur = np.full(M, np.inf)
    for m in range(M):
        if excluded[m] and S[m] > SPAN_TOL * diag[m] and Q[m] * Q[m] > S[m]:
            s, q = S[m], Q[m]
            p = adjust(flat_alpha(s, q), np.inf, alpha_min, lam[m])
            new[m] = p
            if math.isfinite(p):
                gain[m] = objective(p, s, q, 0.0, 0.0)
    for j in range(active.size):
        m = active[j]
        cur[m] = alpha[j]
        d = Sigma[j, j]
        s = 1.0 / d - alpha[j]
        if not s > SPAN_TOL * diag[m]:
            new[m] = alpha[j]  # no action, and no say in convergence
            continue
        q = mu[j] / d
        p = adjust(flat_alpha(s, q), alpha[j], alpha_min, lam[m])
        new[m] = p
        gain[m] = objective(p, s, q, 0.0, 0.0) - objective(alpha[j], s, q, 0.0, 0.0)
    for m in range(M):
        if blocked[m]:
            gain[m] = -np.inf
            new[m] = cur[m]  # no action, and no say in convergence
    if active.size == 1 and not math.isfinite(new[active[0]]):
        gain[active[0]] = -np.inf
    for m in range(M):
        if tabu[m] and math.isfinite(new[m]) != math.isfinite(cur[m]):
            gain[m] = -np.inf
    return new, gain, cur


@njit(cache=True)
def decide(new, gain, cur, tol, priority):
    """The candidate with the largest gain, or -1 when converged (no add or delete pending,
    every re-estimate changes ``ln alpha`` by less than ``tol``; TF03 §4.4) or nothing
    gains. ``priority`` 1: a deletion that gains goes before any other action (SparseBayes
    v2's default); 2: an add or a deletion that gains goes before any re-estimate."""
    pending = False
    dmax = 0.0
    best = 0
    best_switch = -1
    for m in range(new.size):
        fin_new = math.isfinite(new[m])
        in_model = math.isfinite(cur[m])
        if fin_new != in_model and gain[m] > -np.inf:  # +inf: an add a proper prior demands
            pending = True
            if gain[m] > 0 and (priority == 2 or (priority == 1 and in_model)) and (
                    best_switch < 0 or gain[m] > gain[best_switch]):
                best_switch = m
        if in_model and fin_new:
            dmax = max(dmax, abs(math.log(new[m] / cur[m])))
        if gain[m] > gain[best]:
            best = m
    if not pending and dmax < tol:
        return -1
    if best_switch >= 0:
        return best_switch
    if not gain[best] > 0:
        return -1
    return best


@njit(cache=True)
def flat_choice(S, Q, diag, excluded, active, alpha, Sigma, mu, alpha_min, lam, blocked, tabu,
                tol, priority):
    """:func:`decide` on :func:`flat_proposals` in one call: (candidate, its new alpha, gain),
    candidate -1 when converged."""
    new, gain, cur = flat_proposals(S, Q, diag, excluded, active, alpha, Sigma, mu, alpha_min,
                                    lam, blocked, tabu)
    i = decide(new, gain, cur, tol, priority)
    if i < 0:
        return i, np.nan, np.nan
    return i, new[i], gain[i]


@njit(cache=True)
def add_update(Sigma, mu, S, Q, cross, c, active, i, alpha_i):
    """TF03 App. A.2: basis ``i`` enters with precision ``alpha_i``; ``c = Phi^T B phi_i``,
    ``cross = Phi^T B Phi_in``. ``S``, ``Q`` in place; returns the grown Sigma and mu."""
    P = active.size
    u = np.zeros(P)
    z = c.copy()
    if P > 0:
        u = Sigma @ c[active]
        z = c - cross @ u  # phi_m^T B e_i
    sii = 1.0 / (alpha_i + S[i])
    mui = sii * Q[i]
    Sig = np.empty((P + 1, P + 1))
    m = np.empty(P + 1)
    for a in range(P):
        for b in range(P):
            Sig[a, b] = Sigma[a, b] + sii * (u[a] * u[b])
        Sig[a, P] = Sig[P, a] = -sii * u[a]
        m[a] = mu[a] - mui * u[a]
    Sig[P, P] = sii
    m[P] = mui
    for k in range(S.size):
        S[k] -= sii * (z[k] * z[k])
        Q[k] -= mui * z[k]
    return Sig, m


@njit(cache=True)
def reestimate_update(Sigma, mu, S, Q, cross, j, delta):
    """TF03 App. A.3 in place: ``alpha_j`` changed with ``delta = 1 / (new - old)``."""
    kappa = 1.0 / (Sigma[j, j] + delta)
    Sj = Sigma[:, j].copy()
    muj = mu[j]
    v = cross @ Sj
    n = Sj.size
    for a in range(n):
        for b in range(n):
            Sigma[a, b] -= kappa * Sj[a] * Sj[b]
        mu[a] -= kappa * muj * Sj[a]
    for m in range(S.size):
        Q[m] += kappa * muj * v[m]
        S[m] += kappa * v[m] * v[m]


# ---- the Laplace mode of a Bernoulli model (T01 eq. 24) -------------------------------------


@njit(cache=True)
def _log_expit(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


@njit(cache=True)
def _expit_pair(x):
    """``(sigma(x), sigma(-x))`` from one ``exp`` of ``-|x|`` (no overflow, no cancellation in
    ``1 - sigma(x)``)."""
    if x >= 0:
        e = math.exp(-x)
        return 1.0 / (1.0 + e), e / (1.0 + e)
    e = math.exp(x)
    return e / (1.0 + e), 1.0 / (1.0 + e)


@njit(cache=True)
def _psi(Phi, sign, alpha, theta, f):
    """``f = Phi theta`` (in place) and ``sum ln sigma(sign f) - 1/2 theta^T A theta``."""
    f[:] = Phi @ theta
    ll = 0.0
    for n in range(f.size):
        ll += _log_expit(sign[n] * f[n])
    return ll, ll - 0.5 * np.sum(alpha * theta * theta)


@njit(cache=True)
def _terms(Phi, t, alpha, theta, f):
    """The log-likelihood gradient ``Phi^T (t - y)``, the gradient of Psi and the lower
    Cholesky factor of ``Phi^T B Phi + A`` (T01 eq. 25); the factor is None-like (info > 0)
    when not positive definite."""
    N, P = Phi.shape
    r = np.empty(N)
    WPhi = np.empty((N, P))
    for n in range(N):
        y, y_neg = _expit_pair(f[n])
        r[n] = t[n] - y
        b = y * y_neg
        for k in range(P):
            WPhi[n, k] = b * Phi[n, k]
    gl = Phi.T @ r
    H = Phi.T @ WPhi
    for k in range(P):
        H[k, k] += alpha[k]
    return gl, gl - alpha * theta, H


@njit(cache=True)
def _cholesky_lower(H):
    """Lower Cholesky factor (zero upper triangle), ok flag."""
    P = H.shape[0]
    L = np.zeros((P, P))
    for j in range(P):
        d = H[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0:
            return L, False
        L[j, j] = math.sqrt(d)
        for i in range(j + 1, P):
            v = H[i, j]
            for k in range(j):
                v -= L[i, k] * L[j, k]
            L[i, j] = v / L[j, j]
    return L, True


# the forward and back substitution of models/woodbury_op.py (_lower_solve and
# _lower_transpose_solve), kept apart on purpose: numba's on-disk cache is keyed on the
# caching function's own file, so a callee shared from another file could change under a
# stale cache (and the Op's module imports PyTensor, which the evidence path must not)
@njit(cache=True)
def _chol_solve(L, g):
    P = g.size
    z = np.empty(P)
    for i in range(P):
        v = g[i]
        for k in range(i):
            v -= L[i, k] * z[k]
        z[i] = v / L[i, i]
    x = np.empty(P)
    for i in range(P - 1, -1, -1):
        v = z[i]
        for k in range(i + 1, P):
            v -= L[k, i] * x[k]
        x[i] = v / L[i, i]
    return x


@njit(cache=True)
def laplace_log_evidence(loglik, alpha, theta, L):
    """The Laplace log evidence (PRML 7.114, T01 §3) ``ln p(t|w*) + 1/2 sum ln alpha -
    1/2 w*^T A w* - 1/2 ln|H|`` with ``L`` the lower Cholesky factor of ``H``."""
    v = loglik
    for k in range(alpha.size):
        v += 0.5 * math.log(alpha[k]) - 0.5 * alpha[k] * theta[k] * theta[k] - math.log(L[k, k])
    return v


@njit(cache=True)
def bernoulli_mode(Phi, t, alpha, theta0, gtol, max_iter):
    """Newton / IRLS with step halving for ``P(t=1) = sigma(Phi theta)`` (T01 eq. 24; the
    loop of ``laplace._mode``, compiled), as a :class:`BernoulliMode` (``ok`` False: the
    caller re-runs the numpy loop with its jittered Cholesky)."""
    N, P = Phi.shape
    sign = 2.0 * t - 1.0
    theta = theta0.copy()
    f = np.empty(N)
    ll, psi = _psi(Phi, sign, alpha, theta, f)
    f_new = np.empty(N)
    converged = fresh = False
    it = 0
    gl = g = np.zeros(P)
    L = np.zeros((P, P))
    for it in range(1, max_iter + 1):
        gl, g, H = _terms(Phi, t, alpha, theta, f)
        L, ok = _cholesky_lower(H)
        if not ok:
            return BernoulliMode(theta, f, ll, 0.0, g, L, it, False, False)
        if np.abs(g).max() <= gtol * max(1.0, np.abs(gl).max()):
            converged = fresh = True
            break
        delta = _chol_solve(L, g)
        step = 1.0
        ll_new = psi_new = 0.0
        new = theta
        while True:
            new = theta + step * delta
            ll_new, psi_new = _psi(Phi, sign, alpha, new, f_new)
            if psi_new >= psi - 1e-13 * abs(psi) or step < 1e-12:
                break
            step *= 0.5
        if step < 1e-12:
            converged = np.abs(g).max() <= 1e-6 * max(1.0, np.abs(gl).max())
            fresh = True
            break
        theta, ll, psi = new, ll_new, psi_new
        f, f_new = f_new, f
    if not fresh:
        gl, g, H = _terms(Phi, t, alpha, theta, f)
        L, ok = _cholesky_lower(H)
        if not ok:
            return BernoulliMode(theta, f, ll, 0.0, g, L, it, False, False)
    return BernoulliMode(theta, f, ll, laplace_log_evidence(ll, alpha, theta, L), g, L, it,
                         converged, True)


@njit(cache=True)
def recompute(cross, active, alpha, diag, PhiBt):
    """``SequentialSparseBayes.recompute`` compiled: Sigma, mu, S, Q from the Cholesky
    factor L of ``H = A + Phi_in^T B Phi_in`` (TF03 eqs. 24-25, T01 eq. 6), ``S_m = diag_m -
    ||L^-1 c_m||^2``, as :class:`Recomputed` (``ok`` False: H not positive definite, the
    caller's numpy path adds jitter)."""
    M, P = cross.shape
    H = np.empty((P, P))
    for a in range(P):
        for b in range(P):
            H[a, b] = 0.5 * (cross[active[a], b] + cross[active[b], a])
        H[a, a] += alpha[a]
    L, ok = _cholesky_lower(H)
    mu = np.empty(P)
    Sigma = np.empty((P, P))
    S = np.empty(M)
    Q = np.empty(M)
    if not ok:
        return Recomputed(ok, mu, Sigma, S, Q, 0.0)
    y = np.empty(P)  # L^-1 PhiBt_act
    for i in range(P):
        v = PhiBt[active[i]]
        for k in range(i):
            v -= L[i, k] * y[k]
        y[i] = v / L[i, i]
    for i in range(P - 1, -1, -1):  # L^-T y
        v = y[i]
        for k in range(i + 1, P):
            v -= L[k, i] * mu[k]
        mu[i] = v / L[i, i]
    Linv = np.zeros((P, P))
    for j in range(P):
        Linv[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, P):
            v = 0.0
            for k in range(j, i):
                v -= L[i, k] * Linv[k, j]
            Linv[i, j] = v / L[i, i]
    for a in range(P):
        for b in range(a, P):
            v = 0.0
            for k in range(b, P):
                v += Linv[k, a] * Linv[k, b]
            Sigma[a, b] = v
            Sigma[b, a] = v
    z = np.empty(P)
    for m in range(M):  # z = L^-1 c_m
        ss = 0.0
        qq = 0.0
        for i in range(P):
            v = cross[m, i]
            for k in range(i):
                v -= L[i, k] * z[k]
            z[i] = v / L[i, i]
            ss += z[i] * z[i]
            qq += z[i] * y[i]
        S[m] = diag[m] - ss
        Q[m] = PhiBt[m] - qq
    logdet = 0.0
    for i in range(P):
        logdet -= 2.0 * math.log(L[i, i])
    return Recomputed(ok, mu, Sigma, S, Q, logdet)


@njit(cache=True)
def bernoulli_surrogate(f, t, b_floor, Phi, Phi2):
    """The linearised Bernoulli problem at logits ``f`` (TF03 eq. 14): precisions ``b =
    max(y (1 - y), b_floor)`` and targets ``t_hat = f + (t - y) / b``; and what the
    sequential algorithm needs of it (TF03 eq. 24): ``diag_m = phi_m^T B phi_m`` (from
    ``Phi2 = Phi**2``, or from ``Phi`` when Phi2 is None) and ``PhiBt = Phi^T B t_hat``."""
    b = np.empty(f.size)
    t_hat = np.empty(f.size)
    bt = np.empty(f.size)
    for n in range(f.size):
        y, y_neg = _expit_pair(f[n])
        b[n] = max(y * y_neg, b_floor)
        t_hat[n] = f[n] + (t[n] - y) / b[n]
        bt[n] = b[n] * t_hat[n]
    if Phi2 is None:
        diag = np.zeros(Phi.shape[1])
        for m in range(Phi.shape[1]):
            for n in range(f.size):
                diag[m] += Phi[n, m] * Phi[n, m] * b[n]
    else:
        diag = b @ Phi2
    return t_hat, b, diag, Phi.T @ bt


@njit(cache=True)
def weighted_cross(Phi, b, idx, out):
    """``out = Phi^T B Phi[:, idx]`` (``B = diag(b)``; TF03 eq. 24's ``Phi^T B phi_i`` for the
    bases ``idx`` in the model)."""
    N = Phi.shape[0]
    W = np.empty((N, idx.size))
    for n in range(N):
        for k in range(idx.size):
            W[n, k] = b[n] * Phi[n, idx[k]]
    out[:, :] = Phi.T @ W


@njit(cache=True)
def delete_update(Sigma, mu, S, Q, cross, j):
    """TF03 App. A.4: the basis at position ``j`` of the model leaves (alpha -> inf). ``S``,
    ``Q`` in place; returns Sigma and mu without it."""
    Sj = Sigma[:, j].copy()
    sjj, muj = Sj[j], mu[j]
    v = cross @ Sj
    P = mu.size
    Sig = np.empty((P - 1, P - 1))
    m = np.empty(P - 1)
    ra = 0
    for a in range(P):
        if a == j:
            continue
        rb = 0
        for b in range(P):
            if b != j:
                Sig[ra, rb] = Sigma[a, b] - (Sj[a] * Sj[b]) / sjj
                rb += 1
        m[ra] = mu[a] - (muj / sjj) * Sj[a]
        ra += 1
    for k in range(S.size):
        Q[k] += (muj / sjj) * v[k]
        S[k] += (v[k] * v[k]) / sjj
    return Sig, m
