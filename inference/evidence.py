"""Type-II maximum likelihood (evidence) for RVM regression.

* ``fit_fast`` — Tipping & Faul (2003): the sequential add / delete / re-estimate algorithm,
  choosing at each step the action with the largest gain in log marginal likelihood.
* ``fit_mackay`` — Tipping (2001): MacKay re-estimation (eqs. 16-18; with Gamma hyperpriors
  the App. A updates (44), (46)) with pruning of diverging ``alpha``.

Both optionally maximise the evidence over Gaussian kernel widths (§4.3, App. C).
The core :class:`SequentialSparseBayes` works on any design matrix with per-point precisions
``b`` and targets ``t_hat``, so the Laplace approximation of classification reuses it
(Tipping & Faul 2003 §2.2: ``B`` and ``t_hat`` in eqs. 24-25).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import xarray as xr
from scipy import linalg, optimize

from sparsebayes.models import ConvergenceWarning, GammaPrior, NumericalWarning
from sparsebayes.models.basis import Basis, _symmetric
from sparsebayes.models.kernels import GaussianKernel, _sq_distances

from .predictive import one_blas_thread
from .results import draw_gaussian, gaussian_log_likelihood, make_datatree

__all__ = [
    "SequentialSparseBayes",
    "log_evidence",
    "weight_posterior",
    "optimal_alpha",
    "basis_objective",
    "fit_fast",
    "fit_mackay",
    "default_width_bounds",
]

LOG_2PI = np.log(2 * np.pi)
ALIGNMENT_MAX = 1 - 1e-9  # candidates this collinear with a basis in the model are skipped
EXACT_BUDGET = 2e5  # recompute S, Q exactly every step while M * M_t^2 is below this
RECOMPUTE_EVERY = 50  # otherwise rank-one updates (App. A), rebuilt this often
NOISE_WAIT = 50  # iterations at the initial noise before it is re-estimated every NOISE_EVERY
NOISE_EVERY = 10
BETA_MAX_FACTOR = 1e6  # beta <= BETA_MAX_FACTOR / var(t): noise sd >= 1e-3 sd(t)


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------


def _cholesky(H: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of the SPD matrix H, with jitter and a warning if needed.
    (LAPACK ``dpotrf`` first: at the sizes of a sparse model the SciPy wrapper's checks
    cost more than the factorisation.)"""
    L, info = linalg.lapack.dpotrf(H, lower=1, clean=1)
    if info == 0:
        return L
    scale = max(np.mean(np.abs(np.diag(H))), 1e-300)
    for power in range(-12, -3):
        jitter = scale * 10.0**power
        try:
            L = linalg.cholesky(H + jitter * np.eye(H.shape[0]), lower=True, check_finite=False)
        except linalg.LinAlgError:
            continue
        warnings.warn(
            f"the posterior precision A + Phi^T B Phi was not numerically positive definite "
            f"(ill-conditioned or duplicate basis columns); added jitter {jitter:.2g}",
            NumericalWarning,
            stacklevel=3,
        )
        return L
    raise linalg.LinAlgError("posterior precision is not positive definite even with jitter")


def weight_posterior(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, beta: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eqs. (12)-(13): ``Sigma = (beta Phi^T Phi + A)^-1``, ``mu = beta Sigma Phi^T t``.

    Returns ``mu``, ``Sigma`` and the Cholesky factor ``L`` of ``Sigma^-1``.
    """
    return gram_weight_posterior(Phi.T @ Phi, Phi.T @ t, alpha, beta)


def gram_weight_posterior(G: np.ndarray, Phit: np.ndarray, alpha: np.ndarray, beta: float
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eqs. (12)-(13) from the Gram matrix ``G = Phi^T Phi`` and ``Phit = Phi^T t``."""
    H = beta * G
    H[np.diag_indices_from(H)] += alpha
    L = _cholesky(H)
    Linv = linalg.solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False)
    Sigma = Linv.T @ Linv
    mu = beta * (Sigma @ Phit)
    return mu, Sigma, L


def log_evidence(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, beta: float) -> float:
    """``ln N(t | 0, beta^-1 I + Phi A^-1 Phi^T)`` (eq. 15) in the O(M^3) Cholesky form of
    App. A (eqs. 36-41), without forming the N x N covariance."""
    t = np.asarray(t, dtype=float)
    N = t.size
    alpha = np.asarray(alpha, dtype=float)
    if alpha.size == 0:
        return 0.5 * (N * np.log(beta) - beta * (t @ t) - N * LOG_2PI)
    mu, _, L = weight_posterior(Phi, t, alpha, beta)
    r = t - Phi @ mu
    return 0.5 * (
        N * np.log(beta)
        + np.sum(np.log(alpha))
        - 2 * np.sum(np.log(np.diag(L)))
        - beta * (r @ r)
        - mu @ (alpha * mu)
        - N * LOG_2PI
    )


def basis_objective(alpha, s, q, a: float = 0.0, b=0.0):
    """Contribution of one basis to the objective (Tipping & Faul eq. 18) plus its
    hyperprior on ``ln alpha`` (Tipping App. A): ``l(alpha) + a ln alpha - b alpha``.

    ``l(inf) = 0``: an excluded basis contributes nothing (its prior is not counted either).
    """
    alpha, s, q, b = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (alpha, s, q, b)))
    out = np.zeros(alpha.shape)
    f = np.isfinite(alpha)
    af, sf = alpha[f], s[f]
    out[f] = 0.5 * (np.log(af / (af + sf)) + q[f] ** 2 / (af + sf)) + a * np.log(af) - b[f] * af
    return out


def optimal_alpha(s: np.ndarray, q: np.ndarray, a: float = 0.0, b=0.0) -> np.ndarray:
    """Maximiser of :func:`basis_objective` over ``alpha`` (``inf``: exclude the basis).

    Flat prior: eqs. (20)-(21), ``alpha = s^2 / (q^2 - s)`` if ``q^2 > s``. With a Gamma prior
    the stationary points solve ``-2b x^3 + (2a - 4bs) x^2 + (s - q^2 + 4as - 2bs^2) x +
    (1 + 2a) s^2 = 0``; the best positive root is taken if it beats exclusion.
    """
    s = np.asarray(s, dtype=float)
    q = np.asarray(q, dtype=float)
    b = np.broadcast_to(np.asarray(b, dtype=float), s.shape)
    theta = q**2 - s
    if a == 0 and not b.any():
        with np.errstate(divide="ignore"):
            return np.where(theta > 0, s**2 / np.where(theta > 0, theta, 1.0), np.inf)
    coef = np.stack(
        [
            -2 * b,
            2 * a - 4 * b * s,
            s - q**2 + 4 * a * s - 2 * b * s**2,
            (1 + 2 * a) * s**2,
        ],
        axis=-1,
    )
    if not b.any():  # b = 0, a > 0: a quadratic
        A, B, C = coef[:, 1], coef[:, 2], coef[:, 3]
        disc = B**2 - 4 * A * C
        with np.errstate(invalid="ignore"):
            root = np.where(disc >= 0, (-B - np.sqrt(np.clip(disc, 0, None))) / (2 * A), np.nan)
        roots = root[:, None]
    else:
        comp = np.zeros((s.size, 3, 3))
        comp[:, 0, :] = -coef[:, 1:] / coef[:, :1]
        comp[:, 1, 0] = comp[:, 2, 1] = 1.0
        eig = np.linalg.eigvals(comp)
        roots = np.where((np.abs(eig.imag) <= 1e-9 * np.abs(eig.real)) & (eig.real > 0),
                         eig.real, np.nan)
    roots = np.where(roots > 0, roots, np.nan)
    vals = basis_objective(np.where(np.isnan(roots), 1.0, roots), s[:, None], q[:, None], a,
                           b[:, None])
    vals = np.where(np.isnan(roots), -np.inf, vals)
    best = np.argmax(vals, axis=1)
    alpha = roots[np.arange(s.size), best]
    keep = vals[np.arange(s.size), best] > 0
    return np.where(keep & np.isfinite(alpha), alpha, np.inf)


# --------------------------------------------------------------------------------------------
# The sequential algorithm (Tipping & Faul 2003)
# --------------------------------------------------------------------------------------------


@dataclass
class SequentialSparseBayes:
    """State of Tipping & Faul's algorithm for a design ``Phi`` (N, M), per-point precisions
    ``b`` (N,) and targets ``t`` (the linearised ``t_hat`` in classification).

    Maintains for every candidate ``m`` the factors ``S_m``, ``Q_m`` (eq. 22, computed by
    eqs. 24-25) and for the bases in the model ``alpha``, ``Sigma``, ``mu`` (eq. 6), with the
    rank-one updates of App. A for add / re-estimate / delete. ``cross = Phi^T B Phi_in``
    (M, M_t) is a view of a preallocated Fortran buffer, so an add writes one column.

    ``symmetric_block = (lo, hi)`` declares the square block ``Phi[lo:hi, lo:hi]`` symmetric
    with ``hi - lo = N`` (kernel columns centred on the training inputs, ``k(x, c) =
    k(c, x)``): products ``Phi^T v`` then read only its lower triangle (BLAS ``symv``), half
    the memory traffic of the one pass over ``Phi`` that each add needs.

    ``refresh_after_step``: rebuild ``S``, ``Q`` exactly after a step when the rank-one
    updates may have drifted (a caller that rebuilds the state after every step anyway,
    like the Laplace loop, turns it off).
    """

    refresh_after_step: ClassVar[bool] = True
    Phi: np.ndarray
    t: np.ndarray
    b: np.ndarray
    a_prior: float = 0.0
    b_prior: float | np.ndarray = 0.0
    active: list[int] = field(default_factory=list)
    alpha: np.ndarray = field(default_factory=lambda: np.empty(0))
    diag: np.ndarray | None = field(default=None, repr=False)  # phi_m^T B phi_m, if known
    symmetric_block: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.b = np.asarray(self.b, dtype=float)
        if self.diag is None:
            self.diag = np.einsum("nm,nm,n->m", self.Phi, self.Phi, self.b)
        else:
            self.diag = np.array(self.diag, dtype=float)
        if self.symmetric_block is not None:
            lo, hi = self.symmetric_block
            K = self.Phi[:, lo:hi]
            if (hi - lo != self.Phi.shape[0] or not K.flags.f_contiguous
                    or not np.allclose(K[0], K[:, 0], rtol=1e-6, atol=1e-12)):
                raise ValueError("symmetric_block must be a symmetric, Fortran-ordered N x N "
                                 "block of Phi")
        self.PhiBt = self.design_T_dot(self.b * self.t)
        if not self.active:
            self._initialise()
        self.active = [int(i) for i in self.active]
        self.alpha = np.array(self.alpha, dtype=float)
        self.flat = self.a_prior == 0 and not np.any(self.b_prior)
        M, Mt = self.diag.size, len(self.active)
        self._buf = np.empty((M, max(2 * Mt, 16)), order="F")
        if self.symmetric_block is None:
            self._buf[:, :Mt] = self.Phi.T @ (self.b[:, None] * self.Phi[:, self.active])
        else:
            for k, i in enumerate(self.active):
                self.design_T_dot(self.b * self.Phi[:, i], out=self._buf[:, k])
        self.cross = self._buf[:, :Mt]
        self.excluded = np.ones(M, dtype=bool)  # candidates not in the model
        self.excluded[self.active] = False
        self._work = np.empty(M)
        self.aligned: dict[int, int] = {}
        self.recompute()

    def _initialise(self) -> None:
        """Start from the single basis with the largest projection (T&F §4, eq. 26)."""
        proj = self.PhiBt**2 / np.where(self.diag > 0, self.diag, np.inf)
        i = int(np.argmax(proj))
        # eq. (26) = (20) for the empty model, where S_i = diag_i and Q_i = PhiBt_i
        theta = self.PhiBt[i] ** 2 - self.diag[i]
        alpha = self.diag[i] ** 2 / theta if theta > 0 else self.diag[i] * 1e3
        self.active = [i]
        self.alpha = np.array([alpha])

    def design_T_dot(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``Phi^T v``: one pass over ``Phi`` (half of the symmetric block, if declared)."""
        if out is None:
            out = np.empty(self.Phi.shape[1])
        if self.symmetric_block is None:
            return np.matmul(self.Phi.T, v, out=out)
        lo, hi = self.symmetric_block
        out[:lo] = self.Phi[:, :lo].T @ v
        out[hi:] = self.Phi[:, hi:].T @ v
        out[lo:hi] = linalg.blas.dsymv(1.0, self.Phi[:, lo:hi], v, lower=1)
        return out

    # ---- exact recomputation -------------------------------------------------------------
    def recompute(self) -> None:
        """Sigma, mu, S, Q from scratch (eqs. 6, 24-25) through the Cholesky factor L of
        ``H = A + Phi_in^T B Phi_in``: ``S_m = diag_m - ||L^-1 c_m||^2`` with ``c_m`` the row
        of ``cross`` — a sum of squares, far more accurate than ``c_m^T Sigma c_m`` when
        H is ill-conditioned."""
        act = np.asarray(self.active)
        H = self.cross[act, :]
        H = 0.5 * (H + H.T)
        H.flat[:: act.size + 1] += self.alpha
        L = _cholesky(H)  # lower, upper triangle zero
        ZT = linalg.blas.dtrsm(1.0, L, self.cross, side=1, lower=1, trans_a=1)  # cross L^-T
        y = linalg.lapack.dtrtrs(L, self.PhiBt[act], lower=1)[0]
        self.mu = linalg.lapack.dtrtrs(L, y, lower=1, trans=1)[0]
        Linv, info = linalg.lapack.dtrtri(L, lower=1)  # keeps the zero upper triangle
        if info != 0:
            raise linalg.LinAlgError("singular Cholesky factor of the posterior precision")
        self.Sigma = Linv.T @ Linv
        self.S = self.diag - np.einsum("ij,ij->i", ZT, ZT)
        self.Q = self.PhiBt - ZT @ y
        self.steps_since_recompute = 0

    def rescale(self, factor: float) -> None:
        """Multiply every precision in ``b`` by ``factor`` (a noise update in regression)."""
        self.b = self.b * factor
        self.diag *= factor
        self.PhiBt *= factor
        self.cross *= factor
        self.recompute()

    # ---- factors and gains ---------------------------------------------------------------
    def sq(self) -> tuple[np.ndarray, np.ndarray]:
        """``s_m``, ``q_m`` (eq. 23). For a basis in the model, ``S_j = alpha_j gamma_j`` and
        ``Q_j = alpha_j mu_j`` (from ``Phi^T C^-1 Phi = A - A Sigma A``), so eq. (23) becomes
        ``s_j = 1 / Sigma_jj - alpha_j`` and ``q_j = mu_j / Sigma_jj``: no cancellation
        between the nearly equal ``alpha_j`` and ``S_j`` of a well-determined weight."""
        s, q = self.S.copy(), self.Q.copy()
        act = np.asarray(self.active)
        d = np.diag(self.Sigma)
        s[act] = 1.0 / d - self.alpha
        q[act] = self.mu / d
        return s, q

    def proposals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every candidate: its optimal alpha, the gain ``Delta L`` of moving to it
        (add, re-estimate or delete; App. A), and the current alpha (inf if excluded)."""
        s, q = self.sq()
        new = optimal_alpha(s, q, self.a_prior, self.b_prior)
        cur = np.full(s.size, np.inf)
        act = np.asarray(self.active)
        cur[act] = self.alpha
        gain = basis_objective(new, s, q, self.a_prior, self.b_prior) - basis_objective(
            cur, s, q, self.a_prior, self.b_prior
        )
        gain[np.isinf(new) & np.isinf(cur)] = -np.inf  # nothing to do
        # S_m <= 0 (exactly > 0 in theory): phi_m lies numerically in the span of the model
        gain[np.isinf(cur) & (self.S <= 1e-12 * self.diag)] = -np.inf
        if self.aligned:
            gain[list(self.aligned)] = -np.inf
        if len(self.active) == 1:  # never empty the model
            gain[act[np.isinf(new[act])]] = -np.inf
        return new, gain, cur

    def _choose(self, tol: float) -> tuple[int, float, float] | None:
        """The action with the largest gain from :meth:`proposals`: (candidate, its new
        alpha, gain), or None when converged (T&F §4.4)."""
        return self._decide(*self.proposals(), tol)

    @staticmethod
    def _decide(new: np.ndarray, gain: np.ndarray, cur: np.ndarray, tol: float
                ) -> tuple[int, float, float] | None:
        """:meth:`_choose` given the proposals (new alpha, gain, current alpha)."""
        in_model = np.isfinite(cur)
        pending = (np.isfinite(new) != in_model) & np.isfinite(gain)  # an add or a delete
        reest = in_model & np.isfinite(new)
        dlog = np.abs(np.log(new[reest] / cur[reest]))
        small = dlog.size == 0 or dlog.max() < tol  # T&F §4.4: every re-estimate is small
        if not pending.any() and small:
            return None
        i = int(np.argmax(gain))
        if not np.isfinite(gain[i]) or gain[i] <= 0:
            return None
        return i, float(new[i]), float(gain[i])

    def _choose_flat(self, tol: float) -> tuple[int, float, float] | None:
        """:meth:`_choose` for the flat prior in closed form, touching each length-M array
        a few times only. An excluded candidate with ``x = Q^2 / S - 1 > 0`` is added at
        ``alpha = S / x`` (eq. 20) with gain ``(x - ln(1 + x)) / 2`` (T&F App. A.2), which
        increases with ``x``: the best add is the largest ``Q^2 / S``."""
        S = self.S
        ratio = np.multiply(self.Q, self.Q, out=self._work)
        ratio /= np.where(self.excluded & (S > 1e-12 * self.diag), S, np.inf)
        if self.aligned:
            ratio[list(self.aligned)] = 0.0
        k = int(np.argmax(ratio))
        x = ratio[k] - 1.0
        add_gain = 0.5 * (x - np.log1p(x)) if x > 0 else -np.inf
        # bases in the model: re-estimate (eq. 20) or delete (eq. 21), gains by eq. (18)
        d = np.diag(self.Sigma)
        alpha = self.alpha
        s = 1.0 / d - alpha
        q = self.mu / d
        theta = q * q - s
        keep = theta > 0
        new = np.full(alpha.size, np.inf)
        new[keep] = s[keep] ** 2 / theta[keep]
        l_cur = 0.5 * (np.log(alpha / (alpha + s)) + q * q / (alpha + s))
        l_new = np.zeros(alpha.size)
        nk, sk = new[keep], s[keep]
        l_new[keep] = 0.5 * (np.log(nk / (nk + sk)) + q[keep] ** 2 / (nk + sk))
        gain = l_new - l_cur
        if alpha.size == 1 and not keep[0]:  # never empty the model
            gain[0] = -np.inf
        small = not keep.any() or np.max(np.abs(np.log(nk / alpha[keep]))) < tol
        pending = x > 0 or np.any(~keep & np.isfinite(gain))
        if not pending and small:
            return None
        j = int(np.argmax(gain))
        best = max(add_gain, gain[j])
        if not np.isfinite(best) or best <= 0:
            return None
        if add_gain > gain[j]:
            return k, float(S[k] / x), float(add_gain)
        return self.active[j], float(new[j]), float(gain[j])

    # ---- App. A rank-one updates ---------------------------------------------------------
    def add(self, i: int, alpha_i: float) -> None:
        """A.2: add basis ``i`` with precision ``alpha_i``."""
        Mt = len(self.active)
        if Mt == self._buf.shape[1]:  # grow the buffer of cross
            buf = np.empty((self._buf.shape[0], 2 * Mt), order="F")
            buf[:, :Mt] = self.cross
            self._buf = buf
        c = self.design_T_dot(self.b * self.Phi[:, i], out=self._buf[:, Mt])  # Phi^T B phi_i
        act = np.asarray(self.active)
        u = self.Sigma @ c[act]
        sii = 1.0 / (alpha_i + self.S[i])
        mui = sii * self.Q[i]
        z = c - self.cross @ u  # phi_m^T B e_i
        Sigma = np.empty((Mt + 1, Mt + 1))
        Sigma[:Mt, :Mt] = self.Sigma + sii * np.outer(u, u)
        Sigma[:Mt, Mt] = Sigma[Mt, :Mt] = -sii * u
        Sigma[Mt, Mt] = sii
        self.Sigma = Sigma
        self.mu = np.append(self.mu - mui * u, mui)
        self.S -= sii * z**2
        self.Q -= mui * z
        self.cross = self._buf[:, : Mt + 1]
        self.active.append(int(i))
        self.excluded[i] = False
        self.alpha = np.append(self.alpha, alpha_i)

    def reestimate(self, i: int, alpha_new: float) -> None:
        """A.3: change the precision of basis ``i`` (in the model)."""
        j = self.active.index(i)
        delta = 1.0 / (alpha_new - self.alpha[j])
        kappa = 1.0 / (self.Sigma[j, j] + delta)
        Sj = self.Sigma[:, j].copy()
        muj = self.mu[j]
        v = self.cross @ Sj
        self.Sigma -= kappa * np.outer(Sj, Sj)
        self.mu -= kappa * muj * Sj
        self.Q += (kappa * muj) * v
        v *= v
        v *= kappa
        self.S += v
        self.alpha[j] = alpha_new

    def delete(self, i: int) -> None:
        """A.4: remove basis ``i`` (alpha -> inf)."""
        j = self.active.index(i)
        Sj = self.Sigma[:, j].copy()
        sjj, muj = Sj[j], self.mu[j]
        v = self.cross @ Sj
        self.Sigma -= np.outer(Sj, Sj) / sjj
        self.mu -= (muj / sjj) * Sj
        self.Q += (muj / sjj) * v
        v *= v
        v /= sjj
        self.S += v
        keep = np.arange(len(self.active)) != j
        self.Sigma = self.Sigma[np.ix_(keep, keep)]
        self.mu = self.mu[keep]
        Mt = len(self.active)
        self._buf[:, j : Mt - 1] = self._buf[:, j + 1 : Mt]
        self.cross = self._buf[:, : Mt - 1]
        self.alpha = self.alpha[keep]
        del self.active[j]
        self.excluded[i] = True
        self.aligned = {k: p for k, p in self.aligned.items() if p != i}

    def n_degenerate(self) -> int:
        """Candidates skipped as duplicates: aligned, or numerically in the model's span."""
        out = np.ones(self.S.size, bool)
        out[self.active] = False
        return len(self.aligned) + int(np.sum(out & (self.S <= 1e-12 * self.diag)))

    def is_aligned(self, i: int) -> int | None:
        """An in-model basis that candidate ``i`` nearly duplicates (T&F's alignment test);
        ``phi_i^T B phi_j`` is row ``i`` of ``cross``."""
        act = np.asarray(self.active)
        cos = self.cross[i] / np.sqrt(np.maximum(self.diag[i] * self.diag[act], 1e-300))
        j = int(np.argmax(cos))
        return int(act[j]) if cos[j] > ALIGNMENT_MAX else None

    # ---- one step ------------------------------------------------------------------------
    def step(self, tol: float = 1e-6) -> tuple[str, float, bool]:
        """Take the action with the largest gain. Returns (action, gain, converged) where
        converged means: no basis to add or delete and every re-estimate changes
        ``ln alpha`` by less than ``tol`` (T&F §4.4)."""
        if self.flat and type(self).proposals is SequentialSparseBayes.proposals:
            choice = self._choose_flat(tol)
        else:  # a Gamma prior, or a subclass that modifies the proposals
            choice = self._choose(tol)
        if choice is None:
            return "none", 0.0, True
        i, new_i, gain_i = choice
        if self.excluded[i]:
            partner = self.is_aligned(i)
            if partner is not None:
                self.aligned[i] = partner
                return "skip", 0.0, False
            self.add(i, new_i)
            action = "add"
        elif np.isinf(new_i):
            self.delete(i)
            action = "delete"
        else:
            self.reestimate(i, new_i)
            action = "reestimate"
        self.steps_since_recompute += 1
        if not self.refresh_after_step:
            return action, gain_i, False
        cheap = self.S.size * len(self.active) ** 2 <= EXACT_BUDGET
        trouble = not (np.min(np.diag(self.Sigma)) > 0 and np.min(self.S) >= 0
                       and np.isfinite(np.sum(self.S)))
        if cheap or trouble or self.steps_since_recompute >= RECOMPUTE_EVERY:
            self.recompute()  # rank-one drift: rebuild from scratch
        return action, gain_i, False

    def log_evidence(self) -> float:
        """ln N(t | 0, B^-1 + Phi A^-1 Phi^T) at the current state (eqs. 36-41 with B)."""
        act = np.asarray(self.active)
        r = self.t - self.Phi[:, act] @ self.mu
        return 0.5 * (
            np.sum(np.log(self.b))
            + np.sum(np.log(self.alpha))
            + np.linalg.slogdet(self.Sigma)[1]
            - r @ (self.b * r)
            - self.mu @ (self.alpha * self.mu)
            - self.t.size * LOG_2PI
        )

    def gamma(self) -> np.ndarray:
        """Well-determinedness ``gamma_i = 1 - alpha_i Sigma_ii`` (eq. 17)."""
        return 1.0 - self.alpha * np.diag(self.Sigma)


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


def _prior(problem) -> GammaPrior:
    return problem.prior if problem.prior is not None else GammaPrior()


def _noise_update(t, Phi_act, mu, gamma, prior: GammaPrior, beta_max: float) -> float:
    """Eq. (46): ``sigma^2 = (||t - Phi mu||^2 + 2d) / (N - sum(gamma) + 2c)``."""
    r = t - Phi_act @ mu
    beta = (t.size - gamma.sum() + 2 * prior.c) / (r @ r + 2 * prior.d)
    return float(min(max(beta, 1e-300), beta_max))


def _run_fast(Phi, t, prior, beta, estimate_noise, beta_max, max_iter, tol, warm=None,
              symmetric_block=None):
    """Tipping & Faul's loop for regression.

    ``Phi`` is used as it is (no column scaling: the flat-prior evidence, the Cholesky
    accuracy and the relative thresholds are all invariant to it, and a symmetric kernel
    block stays symmetric for :class:`SequentialSparseBayes`' ``symmetric_block``).
    The noise is held at its initial value for ``NOISE_WAIT`` iterations, then re-estimated
    every ``NOISE_EVERY``-th iteration and whenever the alphas have converged: re-estimating
    it while the model holds one or two bases lets the noise explain the whole signal, a
    poor local optimum (seen on Tipping's linear-spline sinc). A new noise level that changes
    ``ln beta`` by less than ``tol`` is not applied (it would cost an exact recompute and is
    below the convergence tolerance); convergence needs the alphas and the noise settled.
    """
    N = t.size
    start = {}
    if warm is not None:
        start = {"active": list(warm[0]), "alpha": np.array(warm[1], dtype=float)}
    state = SequentialSparseBayes(Phi, t, np.full(N, beta), prior.a, prior.b,
                                  diag=beta * np.einsum("nm,nm->m", Phi, Phi),
                                  symmetric_block=symmetric_block, **start)
    trace = [state.log_evidence()]
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        action, gain, done = state.step(tol)
        if gain:
            trace.append(trace[-1] + gain)
        update_noise = estimate_noise and (done or (it > NOISE_WAIT and it % NOISE_EVERY == 0))
        if update_noise:
            act = np.asarray(state.active)
            new_beta = _noise_update(t, Phi[:, act], state.mu, state.gamma(), prior, beta_max)
            changed = abs(np.log(new_beta / beta)) > tol
            if changed:
                state.rescale(new_beta / beta)
                beta = new_beta
                trace.append(state.log_evidence())
            done = done and not changed
        elif it % 100 == 0:
            state.recompute()
        if done:
            state.recompute()
            converged = True
            break
    trace.append(state.log_evidence())
    act = np.asarray(state.active)
    return (act, state.alpha.copy(), beta, state.mu, state.Sigma, trace, converged, it,
            state.n_degenerate())


def _width_objective(log_width, kernel, basis, X, t, cols, alpha, beta):
    """Minus the evidence over log Gaussian widths at fixed alpha, beta, and its gradient
    by App. C eqs. (53)-(57): ``dL/d eta_k = -sum_nm D_nm phi_nm (x_nk - c_mk)^2`` with
    ``D = beta [(t - Phi mu) mu^T - Phi Sigma]`` (kernel columns only)."""
    width = np.exp(log_width)
    k = kernel.with_width(width if kernel.is_ard else float(width[0]))
    b = basis.with_kernel(k)
    Phi = b.design(X, columns=cols)
    mu, Sigma, L = weight_posterior(Phi, t, alpha, beta)
    r = t - Phi @ mu
    L_val = 0.5 * (t.size * np.log(beta) + np.sum(np.log(alpha)) - 2 * np.sum(np.log(np.diag(L)))
                   - beta * r @ r - mu @ (alpha * mu) - t.size * LOG_2PI)
    kern = np.flatnonzero(b.centre_index()[cols] >= 0)
    grad_eta = np.zeros(X.shape[1])
    if kern.size:
        D = beta * (np.outer(r, mu[kern]) - Phi @ Sigma[:, kern])
        W = D * Phi[:, kern]
        C = b.centres[b.centre_index()[cols][kern]]
        for dim in range(X.shape[1]):
            sq = _sq_distances(X[:, dim : dim + 1], C[:, dim : dim + 1])
            grad_eta[dim] = -np.sum(W * sq)
    eta = np.asarray(k.eta, dtype=float) * np.ones(X.shape[1])
    grad_log_width = -2 * eta * grad_eta  # eta = width^-2
    if not kernel.is_ard:
        grad_log_width = np.array([grad_log_width.sum()])
    return -L_val, -grad_log_width


def check_basis(problem) -> None:
    """Warn about the two common causes of a singular design: duplicate inputs (identical
    kernel columns) and a Gaussian width far beyond the input range (near-constant columns)."""
    X = problem.X
    n_dup = X.shape[0] - np.unique(X, axis=0).shape[0]
    if n_dup:
        warnings.warn(f"X has {n_dup} duplicate rows: their kernel columns are identical, so "
                      "at most one of each can become a relevance vector", NumericalWarning,
                      stacklevel=4)
    kernel = problem.kernel
    if isinstance(kernel, GaussianKernel):
        extent = np.ptp(X, axis=0) * np.ones_like(np.atleast_1d(kernel.width))
        if np.all(np.asarray(kernel.width) > 100 * np.maximum(extent, 1e-300)):
            warnings.warn(f"kernel width {kernel.width} is far larger than the input range "
                          f"{np.ptp(X, axis=0)}: the kernel columns are nearly constant and "
                          "collinear", NumericalWarning, stacklevel=4)


def _symmetric_block(basis: Basis, X: np.ndarray) -> tuple[int, int] | None:
    """Columns of the design whose N x N block is symmetric: a symmetric kernel
    (``k(x, c) = k(c, x)``) centred on exactly the training inputs."""
    C = basis.centres
    if (C.shape != X.shape or not _symmetric(basis.kernel)
            or not (C is X or np.array_equal(C, X))):
        return None
    return basis.kernel_offset, basis.kernel_offset + basis.n_kernel


def default_width_bounds(X: np.ndarray, ard: bool = False) -> np.ndarray | None:
    """Default search interval of a learned Gaussian width, shape (n_widths, 2), or None if
    the inputs have fewer than two distinct points.

    From the median distance of an input to its nearest distinct neighbour (narrower bases
    each fit a single point: the degenerate limit of the evidence) to 100 times the extent
    of the inputs (wider bases are nearly constant; cf. :func:`check_basis`). Isotropic: the
    distances and the bounding-box diagonal in input space; ARD: per input dimension.
    """
    from scipy.spatial import cKDTree

    cols = [X[:, [k]] for k in range(X.shape[1])] if ard else [X]
    out = []
    for Z in cols:
        U = np.unique(Z, axis=0)
        extent = float(np.sqrt(np.sum(np.ptp(Z, axis=0) ** 2)))
        if U.shape[0] < 2 or not extent > 0:
            return None
        nn = cKDTree(U).query(U, k=2)[0][:, 1]
        out.append((float(np.median(nn)), 100.0 * extent))
    return np.array(out)


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


def _check_width_bounds(width_bounds) -> None:
    if width_bounds is None or (isinstance(width_bounds, str) and width_bounds == "data"):
        return
    wb = np.asarray(width_bounds, dtype=float) if not isinstance(width_bounds, str) else None
    if (wb is None or wb.shape[-1:] != (2,) or wb.ndim > 2 or not np.all(np.isfinite(wb))
            or np.any(wb[..., 0] <= 0) or np.any(wb[..., 0] >= wb[..., 1])):
        raise ValueError("width_bounds must be None, 'data' or (low, high) with 0 < low < "
                         f"high (or one such pair per input dimension), got {width_bounds!r}")


def _solve(problem, *, algorithm: str, max_iter: int, tol: float, max_outer: int = 50,
           width_bounds=None) -> _Solution:
    """Run ``algorithm`` ("fast" or "mackay"); with ``learn_width`` alternate it with
    L-BFGS steps on the log widths at fixed hyperparameters (coordinate ascent on the
    evidence; Tipping §4.3 interleaves the two in the same way), the widths kept within
    ``width_bounds`` (see :func:`fit_fast`)."""
    prior = _prior(problem)
    X, t = problem.X, problem.t
    var_t = float(np.var(t))
    beta_max = BETA_MAX_FACTOR / var_t
    estimate_noise = problem.noise_sd is None
    beta = 1.0 / problem.noise_sd**2 if not estimate_noise else 1.0 / (0.1 * var_t)
    basis = problem.basis
    warm = None
    trace: list[float] = []
    notes: list[str] = []
    total_iter = 0
    log_bounds = None
    for _outer in range(max_outer):
        Phi = basis.design(X)
        if algorithm == "fast":
            active, alpha, beta, mu, Sigma, tr, converged, n_iter, n_aligned = _run_fast(
                Phi, t, prior, beta, estimate_noise, beta_max, max_iter, tol, warm,
                _symmetric_block(basis, X))
            if n_aligned:
                notes.append(f"{n_aligned} candidate basis functions were skipped as "
                             "numerical duplicates of basis functions in the model (cosine > "
                             f"{ALIGNMENT_MAX} or in their span): duplicate inputs or a "
                             "kernel width far too large")
        else:
            active, alpha, beta, mu, Sigma, tr, converged, n_iter = _run_mackay(
                Phi, t, prior, beta, estimate_noise, beta_max, max_iter, tol, warm)
        del Phi
        trace += tr
        total_iter += n_iter
        if not problem.learn_width:
            break
        kernel = basis.kernel
        x0 = np.log(np.atleast_1d(np.asarray(kernel.width, dtype=float)))
        if log_bounds is None:  # fixed at the first round (they contain the user's start)
            log_bounds = _log_width_bounds(width_bounds, X, x0)
        res = optimize.minimize(
            _width_objective, x0, jac=True, method="L-BFGS-B",
            args=(kernel, basis, X, t, active, alpha, beta),
            bounds=log_bounds, options={"maxiter": 20},
        )
        width = np.exp(res.x)
        basis = basis.with_kernel(kernel.with_width(width if kernel.is_ard else float(width[0])))
        trace.append(-float(res.fun))
        warm = (active, alpha)
        if np.max(np.abs(res.x - x0)) < 1e-4:
            break
    Phi_act = basis.design(X, columns=active)
    mu, Sigma, _ = weight_posterior(Phi_act, t, alpha, beta)
    logev = log_evidence(Phi_act, t, alpha, beta)
    return _Solution(basis, active, alpha, beta, mu, Sigma, logev, trace, converged,
                     total_iter, notes)


def _run_mackay(Phi, t, prior, beta, estimate_noise, beta_max, max_iter, tol, warm=None,
                prune_alpha=1e12):
    """Tipping (2001) re-estimation: alpha by (44) (= (16) for a = b = 0), noise by (46)
    (= (18)); a basis is pruned when its alpha exceeds ``prune_alpha`` (App. B.1). Starts
    like scikit-learn's ARDRegression: alpha = 1, beta = 1 / var(t)."""
    N, M = Phi.shape
    if warm is None:
        active, alpha = np.arange(M), np.ones(M)
        if estimate_noise:
            beta = 1.0 / np.var(t)
    else:
        active, alpha = np.asarray(warm[0]), np.asarray(warm[1], dtype=float)
    G = Phi.T @ Phi if M <= 5000 else None
    Phit = Phi.T @ t
    trace = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is returned)
        Gs = G[np.ix_(active, active)] if G is not None else Phi[:, active].T @ Phi[:, active]
        mu, Sigma, L = gram_weight_posterior(Gs, Phit[active], alpha, beta)
        r = t - Phi[:, active] @ mu
        logdet_H = 2 * np.sum(np.log(np.diag(L)))
        trace.append(0.5 * (N * np.log(beta) + np.sum(np.log(alpha)) - logdet_H
                            - beta * r @ r - mu @ (alpha * mu) - N * LOG_2PI))
        gamma = 1.0 - alpha * np.diag(Sigma)
        alpha_new = (gamma + 2 * prior.a) / (mu**2 + 2 * prior.b)  # (44)
        alpha_new = np.where(alpha_new > 0, alpha_new, np.inf)
        beta_new = beta
        if estimate_noise:
            beta_new = float(min((N - gamma.sum() + 2 * prior.c) / (r @ r + 2 * prior.d),
                                 beta_max))  # (46)
        keep = alpha_new < prune_alpha
        if not keep.any():
            keep[np.argmin(alpha_new)] = True
        change = np.max(np.abs(np.log(alpha_new[keep] / alpha[keep])))
        change = max(change, abs(np.log(beta_new / beta)))
        pruned = not keep.all()
        active, alpha, beta = active[keep], alpha_new[keep], beta_new
        if change < tol and not pruned:
            converged = True
            break
    Phi_act = Phi[:, active]
    mu, Sigma, _ = weight_posterior(Phi_act, t, alpha, beta)
    return active, alpha, beta, mu, Sigma, trace, converged, it


def _to_datatree(problem, sol: _Solution, *, method: str, seed, draws: int, chains: int
                 ) -> xr.DataTree:
    """Evidence result: ``w`` holds independent draws from N(mu, Sigma) at the optimum;
    ``alpha``, ``beta`` are the type-II ML point values, constant across draws."""
    if not isinstance(draws, int | np.integer) or draws <= 0:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    if not isinstance(chains, int | np.integer) or chains <= 0:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    rng = np.random.default_rng(seed)
    w = draw_gaussian(sol.mu, sol.Sigma, (chains, draws), rng)
    Phi_act = sol.basis.design(problem.X, columns=sol.active)
    loglik = gaussian_log_likelihood(problem.t, w @ Phi_act.T, sol.beta)
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
        "hyperparameters": "point estimates (type-II ML): alpha and beta are constant across "
                           "draws; w is drawn from its Gaussian posterior N(mu, Sigma)",
        "default_predict_kind": "rvm",
    }
    if isinstance(kernel, GaussianKernel):
        attrs["width"] = np.atleast_1d(np.asarray(kernel.width, dtype=float))
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


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, width_bounds):
    if problem.kind != "regression":
        raise TypeError(f"{method!r} here is for RVMRegression, got {type(problem).__name__}")
    if not isinstance(max_iter, int | np.integer) or max_iter <= 0:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    _check_width_bounds(width_bounds)
    check_basis(problem)
    # The fast algorithm's products are mid-sized (N x M_t, one pass over Phi per add):
    # one BLAS thread; on busy cores the default threads made a whole fit 3-6x slower.
    with one_blas_thread() if algorithm == "fast" else contextlib.nullcontext():
        sol = _solve(problem, algorithm=algorithm, max_iter=int(max_iter), tol=float(tol),
                     width_bounds=width_bounds)
        post = _to_datatree(problem, sol, method=method, seed=seed, draws=draws,
                            chains=chains)
    for note in sol.notes:
        warnings.warn(note, NumericalWarning, stacklevel=3)
    if sol.beta >= BETA_MAX_FACTOR / np.var(problem.t) * (1 - 1e-12):
        warnings.warn(
            "the noise estimate hit its floor (noise sd = 1e-3 sd(t)): the basis interpolates "
            "the targets; fix noise_sd if the data are noise-free",
            NumericalWarning, stacklevel=3)
    if not sol.converged:
        warnings.warn(
            f"{method} did not converge in max_iter={max_iter} iterations; the result is "
            "the last iterate (converged=False)", ConvergenceWarning, stacklevel=3)
    return post


def fit_fast(problem, *, seed=None, max_iter: int = 10000, tol: float = 1e-6,
             draws: int = 500, chains: int = 2, width_bounds=None) -> xr.DataTree:
    """Type-II ML by Tipping & Faul's (2003) fast sequential algorithm.

    Stops when no basis can be added or deleted and every re-estimate changes ``ln alpha``
    by less than ``tol`` (T&F §4.4), with the noise re-estimated by eq. (46).
    ``width_bounds`` (with ``learn_width``): ``(low, high)`` for the Gaussian width (or one
    pair per input dimension), ``"data"`` for :func:`default_width_bounds`, or None (default)
    for a factor ``e^7`` either way from the start width, which is always inside the bounds.
    """
    return _fit(problem, "fast", "evidence", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, width_bounds=width_bounds)


def fit_mackay(problem, *, seed=None, max_iter: int = 5000, tol: float = 1e-6,
               draws: int = 500, chains: int = 2, width_bounds=None) -> xr.DataTree:
    """Type-II ML by MacKay re-estimation, Tipping (2001) eqs. (16)-(18) / (44), (46).
    ``width_bounds`` as in :func:`fit_fast`."""
    return _fit(problem, "mackay", "evidence-mackay", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, width_bounds=width_bounds)
