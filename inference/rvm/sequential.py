"""Tipping & Faul's (2003) fast sequential type-II ML algorithm: ONE add / re-estimate /
delete rule, used by regression (on the design or on its sufficient statistics) and by the
Laplace surrogate of classification (binary and softmax), whose safeguards are a
:class:`Policy` handed to it.

The algorithm needs the data only through products with the per-point precisions ``B``:
``Phi^T B t``, ``phi_m^T B phi_m`` and ``Phi^T B phi_i`` for a basis ``i`` entering the
model. Three :class:`Products` supply them:

* :class:`DenseProducts` — a design ``Phi`` (N, M) in memory, diagonal ``B``;
* :class:`GramProducts` — regression's sufficient statistics ``G = Phi^T Phi``, ``Phi^T t``,
  ``t^T t``, ``N`` (``B = beta I``): O(M^2) memory whatever N;
* :class:`BlockProducts` — the softmax surrogate, one K x K precision block per point
  (T01 eq. 28; ``B_n = diag(y_n) - y_n y_n^T``), over the (basis, class) pairs, without the
  N(K-1) x KM whitened design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import linalg

from ..numerics import LOG_2PI, cholesky, cholesky_inverse
from . import compiled

__all__ = [
    "SequentialSparseBayes",
    "Policy",
    "Noise",
    "ALIGNMENT_MAX",
    "ALIGNMENT_SKIP",
    "DenseProducts",
    "GramProducts",
    "BlockProducts",
    "basis_objective",
    "optimal_alpha",
    "duplicates_note",
]

ALIGNMENT_MAX = 1 - 1e-9  # candidates this collinear with a basis in the model are skipped
# ... and, in regression, from this cosine on (SparseBayes v2's AlignmentMax): a candidate this
# close to a basis in the model would only move its centre by a hop (add, trade the weight,
# delete), and on dense inputs the hops are many and tiny
ALIGNMENT_SKIP = 1 - 1e-3
EXACT_BUDGET = 2e5  # recompute S, Q exactly every step while M * M_t^2 is below this
RECOMPUTE_EVERY = 50  # otherwise rank-one updates (TF03 App. A), rebuilt this often
DAMP_MIN = 1.0 / 64  # smallest damping factor of a re-estimate's log step
POLISH_ALPHA_MAX = 1e8  # Newton steps keep alpha_i below this times phi_i^T B phi_i


def duplicates_note(n_skipped: int, kernel=None) -> str:
    """The note of a fit that skipped ``n_skipped`` candidates as numerical duplicates of
    bases in the model, with the causes ``kernel`` can have (a width far too large only for a
    kernel that has a width)."""
    cause = "" if kernel is None else ": duplicate inputs or a kernel width far too large" \
        if "width" in kernel.parameters else (
            ": duplicate inputs, or kernel columns (nearly) combinations of others, as "
            "neighbouring columns of a smooth kernel on dense noise-free data are")
    return (f"{n_skipped} candidate basis functions were skipped as numerical duplicates of "
            f"basis functions in the model (cosine > {ALIGNMENT_MAX} or in their span){cause}")


# --------------------------------------------------------------------------------------------
# The decision rule for one basis (TF03 eqs. 18-21, T01 App. A hyperpriors)
# --------------------------------------------------------------------------------------------


def basis_objective(alpha, s, q, a: float = 0.0, b=0.0):
    """Contribution of one basis to the objective (TF03 eq. 18) plus its hyperprior on
    ``ln alpha`` (T01 App. A): ``l(alpha) + a ln alpha - b alpha``.

    ``l(inf) = 0`` with Tipping's flat prior (``b = 0``): an excluded basis contributes
    nothing. With a rate ``b > 0`` the hyperprior term ``-b alpha`` tends to ``-inf`` as
    ``alpha -> inf``, so exclusion is never optimal (T01 App. A: "the alphas stay large but
    finite"): ``l(inf) = -inf``, every basis enters the model, and sparsity is read from
    ``gamma_i`` instead. (Counting an excluded basis as 0 compared a log density without its
    normaliser with nothing: the decision then depended on the units of ``alpha``, and a
    strong prior excluded every basis — Ripley-100 with ``a = 2`` kept only the bias, at a
    log evidence 20 nats below MacKay's.)
    """
    alpha, s, q, b = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (alpha, s, q, b)))
    flat = [np.ascontiguousarray(v).ravel() for v in (alpha, s, q, b)]
    return compiled.objective_array(*flat[:3], float(a), flat[3]).reshape(alpha.shape)


def optimal_alpha(s: np.ndarray, q: np.ndarray, a: float = 0.0, b=0.0) -> np.ndarray:
    """Maximiser of :func:`basis_objective` over ``alpha`` (``inf``: exclude the basis).

    Flat prior: TF03 eqs. (20)-(21), ``alpha = s^2 / (q^2 - s)`` if ``q^2 > s``. With a Gamma
    prior the stationary points solve ``-2b x^3 + (2a - 4bs) x^2 + (s - q^2 + 4as - 2bs^2) x
    + (1 + 2a) s^2 = 0``; the best positive root is taken if it beats exclusion.
    """
    s = np.asarray(s, dtype=float)
    q = np.asarray(q, dtype=float)
    b = np.broadcast_to(np.asarray(b, dtype=float), s.shape)
    if a == 0 and not b.any():
        return compiled.flat_alpha_array(np.ascontiguousarray(s).ravel(),
                                         np.ascontiguousarray(q).ravel()).reshape(s.shape)
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
    keep = vals[np.arange(s.size), best] > basis_objective(np.inf, s, q, a, b)  # vs exclusion
    return np.where(keep & np.isfinite(alpha), alpha, np.inf)


@dataclass
class Policy:
    """Safeguards a caller hands to the algorithm (the Laplace loop's; the default is none):

    * ``alpha >= alpha_min``: proposals below the floor go to the floor (so a basis at the
      floor is converged), which bounds the weights on separable data;
    * candidates in ``tabu`` may not be added or deleted (they may be re-estimated);
    * candidates in ``frozen`` take no action at all (the caller's verdict that their step
      does not help; their proposals do not hold up convergence);
    * damped re-estimates: the log step of a basis whose last re-estimate went the other
      way is scaled by ``lam`` in ``damp`` (halved at every reversal, doubled back towards 1
      otherwise, at least ``DAMP_MIN``)."""

    alpha_min: float = 0.0
    tabu: set = field(default_factory=set)
    frozen: set = field(default_factory=set)
    damp: dict = field(default_factory=dict)  # basis -> (lam, sign of its last log step)
    damped: bool = False
    _lam: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def adjust(self, idx: np.ndarray, new: np.ndarray, cur: np.ndarray) -> np.ndarray:
        """The proposed alphas of candidates ``idx`` after the floor and the damping."""
        lam = np.array([self.damp.get(int(i), (1.0,))[0] for i in idx])
        return compiled.adjust_array(np.asarray(new, dtype=float), np.asarray(cur, dtype=float),
                                     float(self.alpha_min), lam)

    def arrays(self, M: int) -> tuple[np.ndarray, np.ndarray]:
        """The damping factors ``lam`` (M,) and the tabu mask (M,) for the compiled step
        (``lam`` is kept and updated by :meth:`reestimated`; read-only for the caller)."""
        if self._lam is None or self._lam.size != M:
            self._lam = np.ones(M)
            for i, (v, _) in self.damp.items():
                self._lam[i] = v
        tabu = np.zeros(M, dtype=bool)
        if self.tabu:
            tabu[list(self.tabu)] = True
        return self._lam, tabu

    def forbid(self, new: np.ndarray, gain: np.ndarray, cur: np.ndarray) -> None:
        """No add or delete of a tabu candidate (in place on ``gain``)."""
        if self.tabu:
            idx = np.fromiter(self.tabu, dtype=int)
            switch = np.isfinite(new[idx]) != np.isfinite(cur[idx])
            gain[idx[switch]] = -np.inf

    def reestimated(self, i: int, old: float, new: float) -> None:
        """Record the direction of a re-estimate of basis ``i`` (damped policies only)."""
        if not self.damped:
            return
        ratio = float(new / old)
        direction = float((ratio > 1) - (ratio < 1))  # sign(ln(new / old))
        lam, last = self.damp.get(i, (1.0, 0.0))
        lam = max(lam / 2, DAMP_MIN) if direction == -last else min(1.0, 2 * lam)
        self.damp[i] = (lam, direction)
        if self._lam is not None:
            self._lam[i] = lam


# --------------------------------------------------------------------------------------------
# What the algorithm needs of the data: products with the per-point precisions B
# --------------------------------------------------------------------------------------------


class DenseProducts:
    """A design ``Phi`` (N, M), targets ``t`` and diagonal precisions ``b`` (N,).

    ``symmetric_block = (lo, hi)`` declares the square block ``Phi[lo:hi, lo:hi]`` symmetric
    with ``hi - lo = N`` (kernel columns centred on the training inputs, ``k(x, c) =
    k(c, x)``): products ``Phi^T v`` then read only its lower triangle (BLAS ``symv``), half
    the memory traffic of the one pass over ``Phi`` that each add needs. ``Phi2`` (``Phi**2``,
    optional) makes ``diag`` one product with ``b``; ``diag`` and ``PhiBt``, if known, are
    taken as given."""

    def __init__(self, Phi: np.ndarray, t: np.ndarray, b: np.ndarray,
                 symmetric_block: tuple[int, int] | None = None, diag: np.ndarray | None = None,
                 Phi2: np.ndarray | None = None, PhiBt: np.ndarray | None = None) -> None:
        self.Phi, self.t = Phi, t
        self._PhiBt = PhiBt
        self.b = np.asarray(b, dtype=float)
        self.n = Phi.shape[0]
        self.symmetric_block = symmetric_block
        if symmetric_block is not None:
            lo, hi = symmetric_block
            K = Phi[:, lo:hi]
            if (hi - lo != Phi.shape[0] or not K.flags.f_contiguous
                    or not np.allclose(K[0], K[:, 0], rtol=1e-6, atol=1e-12)):
                raise ValueError("symmetric_block must be a symmetric, Fortran-ordered N x N "
                                 "block of Phi")
        if diag is not None:
            self._diag = np.array(diag, dtype=float)
        elif Phi2 is not None:
            self._diag = self.b @ Phi2
        else:
            self._diag = np.einsum("nm,nm,n->m", Phi, Phi, self.b)

    def T_dot(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
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

    def diag(self) -> np.ndarray:
        """``phi_m^T B phi_m`` for every candidate."""
        return self._diag.copy()

    def PhiBt(self) -> np.ndarray:
        if self._PhiBt is not None:
            return self._PhiBt.copy()
        return self.T_dot(self.b * self.t)

    def column(self, i: int, out: np.ndarray) -> np.ndarray:
        """``Phi^T B phi_i`` into ``out``."""
        return self.T_dot(self.b * self.Phi[:, i], out=out)

    def columns(self, idx, out: np.ndarray) -> None:
        """``Phi^T B Phi[:, idx]`` into ``out`` (M, len(idx))."""
        if self.symmetric_block is None:
            compiled.weighted_cross(self.Phi, self.b, np.asarray(idx, dtype=np.int64), out)
        else:
            for k, i in enumerate(idx):
                self.column(i, out[:, k])

    def rss(self, act, mu: np.ndarray) -> float:
        """``||t - Phi_act mu||^2``."""
        r = self.t - self.Phi[:, act] @ mu
        return float(r @ r)

    def weighted_rss(self, act, mu: np.ndarray) -> float:
        r = self.t - self.Phi[:, act] @ mu
        return float(r @ (self.b * r))

    def logdet_b(self) -> float:
        return float(np.sum(np.log(self.b)))

    def rescale(self, factor: float) -> None:
        self.b = self.b * factor
        self._diag = self._diag * factor
        if self._PhiBt is not None:
            self._PhiBt = self._PhiBt * factor


class GramProducts:
    """Regression's sufficient statistics (``B = beta I``): ``G = Phi^T Phi`` (M, M),
    ``Phit = Phi^T t``, ``tt = t^T t`` and ``n``; see
    :func:`sparsebayes.inference.rvm.statistics.gram_statistics`. O(M^2) memory, whatever N."""

    def __init__(self, G: np.ndarray, Phit: np.ndarray, tt: float, n: int, beta: float) -> None:
        self.G, self.Phit, self.tt, self.n = G, Phit, float(tt), int(n)
        self.beta = float(beta)

    def diag(self) -> np.ndarray:
        return self.beta * np.diag(self.G)

    def PhiBt(self) -> np.ndarray:
        return self.beta * self.Phit

    def column(self, i: int, out: np.ndarray) -> np.ndarray:
        np.multiply(self.G[:, i], self.beta, out=out)
        return out

    def columns(self, idx, out: np.ndarray) -> None:
        out[...] = self.beta * self.G[:, idx]

    def rss(self, act, mu: np.ndarray) -> float:
        """``tt - 2 mu^T Phi_act^T t + mu^T G_act mu`` (>= 0)."""
        act = np.asarray(act)
        return max(float(self.tt - 2 * mu @ self.Phit[act]
                         + mu @ self.G[np.ix_(act, act)] @ mu), 0.0)

    def weighted_rss(self, act, mu: np.ndarray) -> float:
        return self.beta * self.rss(act, mu)

    def logdet_b(self) -> float:
        return self.n * np.log(self.beta)

    def rescale(self, factor: float) -> None:
        self.beta *= factor


class BlockProducts:
    """The softmax Laplace surrogate (T01 eq. 28; TF03 §2.2 with a block ``B``): per point a
    K x K precision ``B_n = diag(y_n) - y_n y_n^T`` (rank K-1) and linearised targets
    ``t_hat_n = f_n + B_n^+ (t_n - y_n)``, over the candidate pairs ``p = k M + m`` (basis
    column ``m`` of ``Phi`` (N, M) for class ``k``). Only ``Phi`` and ``B`` are held:
    memory O(NM + NK^2), not the N(K-1) x KM whitened design.

    ``Phi^T B t_hat`` needs no pseudo-inverse: ``B_n B_n^+ (t_n - y_n) = t_n - y_n`` since
    ``t_n - y_n`` sums to zero (is orthogonal to the null vector of ``B_n``)."""

    def __init__(self, Phi: np.ndarray, B: np.ndarray, F: np.ndarray, G: np.ndarray,
                 Phi2: np.ndarray | None = None) -> None:
        self.Phi, self.B, self.F, self.Gr = Phi, B, F, G
        self.n, self.M = Phi.shape
        self.K = B.shape[1]
        self.Phi2 = Phi * Phi if Phi2 is None else Phi2

    def diag(self) -> np.ndarray:
        Bkk = np.einsum("nkk->nk", self.B)
        return (self.Phi2.T @ Bkk).T.ravel()

    def PhiBt(self) -> np.ndarray:
        V = np.einsum("nkl,nl->nk", self.B, self.F) + self.Gr
        return (self.Phi.T @ V).T.ravel()

    def column(self, p: int, out: np.ndarray) -> np.ndarray:
        m, cls = p % self.M, p // self.M
        V = self.B[:, :, cls] * self.Phi[:, m][:, None]  # (N, K): B_n e_cls phi_m(x_n)
        out[...] = (self.Phi.T @ V).T.ravel()
        return out

    def columns(self, idx, out: np.ndarray) -> None:
        """All of them in one wide product ``Phi^T V`` with ``V`` (N, K len(idx))."""
        idx = np.asarray(idx, dtype=int)
        if idx.size == 0:
            return
        m, cls = idx % self.M, idx // self.M
        V = self.B[:, :, cls] * self.Phi[:, m][:, None, :]  # (N, K, P)
        R = self.Phi.T @ V.reshape(self.n, -1)  # (M, K P)
        out[...] = R.reshape(self.M, self.K, idx.size).transpose(1, 0, 2).reshape(-1, idx.size)

    def rss(self, act, mu):  # pragma: no cover - regression only
        raise NotImplementedError("the softmax surrogate has no noise to re-estimate")

    weighted_rss = rss

    def logdet_b(self):  # pragma: no cover - B_n is singular
        raise NotImplementedError("the softmax precision blocks are singular")

    def rescale(self, factor):  # pragma: no cover
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# The sequential algorithm (Tipping & Faul 2003)
# --------------------------------------------------------------------------------------------


@dataclass
class Noise:
    """Regression's noise precision ``beta`` (``B = beta I``) as
    :meth:`SequentialSparseBayes.polish` moves it: ``n`` data, the ``Gamma(c, d)`` prior on
    ``beta`` (T01 App. A) and its cap ``beta_max``."""

    n: int
    beta: float
    c: float = 0.0
    d: float = 0.0
    beta_max: float = math.inf


@dataclass(frozen=True)
class Snapshot:
    """What a step of :class:`SequentialSparseBayes` changes: the model, its posterior
    (TF03 eqs. 24-25), ``S``, ``Q`` and the candidates' state."""

    active: list[int]
    alpha: np.ndarray
    Sigma: np.ndarray
    mu: np.ndarray
    S: np.ndarray
    Q: np.ndarray
    cross: np.ndarray
    excluded: np.ndarray
    aligned: dict[int, int]


class FlatArgs(NamedTuple):
    """The state and policy as :func:`compiled.flat_proposals` takes them (positionally)."""

    S: np.ndarray
    Q: np.ndarray
    diag: np.ndarray
    excluded: np.ndarray
    active: np.ndarray
    alpha: np.ndarray
    Sigma: np.ndarray
    mu: np.ndarray
    alpha_min: float
    lam: np.ndarray
    blocked: np.ndarray
    tabu: np.ndarray


def in_model_sq(mu: np.ndarray, sigma_diag: np.ndarray, alpha: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """TF03 eq. (23) for the bases in the model, with the factors of each basis left out:
    ``s_j = 1 / Sigma_jj - alpha_j``, ``q_j = mu_j / Sigma_jj`` (from ``S_j = alpha_j
    gamma_j``, ``Q_j = alpha_j mu_j``); ``mu``, ``sigma_diag = diag(Sigma)`` computed with
    ``alpha``."""
    return 1.0 / sigma_diag - alpha, mu / sigma_diag


@dataclass
class SequentialSparseBayes:
    """State of Tipping & Faul's algorithm on ``products`` (a :class:`DenseProducts`,
    :class:`GramProducts` or :class:`BlockProducts`; or, for a design, ``Phi``, ``t``,
    ``b`` and optionally ``symmetric_block`` and ``diag`` to build a :class:`DenseProducts`).

    Maintains for every candidate ``m`` the factors ``S_m``, ``Q_m`` (TF03 eq. 22, computed
    by eqs. 24-25) and for the bases in the model ``alpha``, ``Sigma``, ``mu`` (T01 eq. 6),
    with the rank-one updates of TF03 App. A for add / re-estimate / delete. ``cross =
    Phi^T B Phi_in`` (M, M_t) is a view of a preallocated Fortran buffer, so an add writes
    one column. ``policy`` holds the caller's safeguards (:class:`Policy`).

    ``refresh_after_step``: rebuild ``S``, ``Q`` exactly after a step when the rank-one
    updates may have drifted (a caller that moves the state to a new surrogate after every
    step anyway, like the Laplace loop, turns it off).

    ``priority``: 0, the action with the largest gain; 1, a deletion that raises the
    objective goes first (SparseBayes v2's default); 2, an add or a deletion that raises it
    goes before any re-estimate.

    ``alignment_max``: a candidate whose cosine with a basis in the model exceeds it is
    not added (TF03's alignment test; it is reconsidered if that basis leaves);
    ``batch_skips``: all such candidates are set aside in one step, not one per step.
    """

    Phi: np.ndarray | None = None
    t: np.ndarray | None = None
    b: np.ndarray | None = None
    a_prior: float = 0.0
    b_prior: float | np.ndarray = 0.0
    active: list[int] = field(default_factory=list)
    alpha: np.ndarray = field(default_factory=lambda: np.empty(0))
    diag: np.ndarray | None = field(default=None, repr=False)  # phi_m^T B phi_m, if known
    symmetric_block: tuple[int, int] | None = None
    products: object | None = field(default=None, repr=False)
    policy: Policy = field(default_factory=Policy)
    refresh_after_step: bool = True
    priority: int = 0
    alignment_max: float = ALIGNMENT_MAX
    batch_skips: bool = False

    def __post_init__(self) -> None:
        self.logdet_Sigma: float | None = None  # ln|Sigma| of the last recompute (None:
        # Sigma changed since, by a rank-one update or a restore)
        if self.products is None:
            self.products = DenseProducts(self.Phi, self.t, self.b, self.symmetric_block,
                                          self.diag)
        self.diag = self.products.diag()
        self.PhiBt = self.products.PhiBt()
        if not self.active:
            self._initialise()
        self.active = [int(i) for i in self.active]
        self.alpha = np.array(self.alpha, dtype=float)
        self.flat = self.a_prior == 0 and not np.any(self.b_prior)
        M, Mt = self.diag.size, len(self.active)
        self._b_prior = np.broadcast_to(np.asarray(self.b_prior, dtype=float), (M,))
        self._buf = np.empty((M, max(2 * Mt, 16)), order="F")
        self.products.columns(self.active, self._buf[:, :Mt])
        self.cross = self._buf[:, :Mt]
        self.excluded = np.ones(M, dtype=bool)  # candidates not in the model
        self.excluded[self.active] = False
        self.aligned: dict[int, int] = {}
        self._newton_small = False  # the last Newton step was below tol
        self.recompute()

    def _initialise(self) -> None:
        """Start from the single basis with the largest projection (TF03 §4, eq. 26)."""
        proj = self.PhiBt**2 / np.where(self.diag > 0, self.diag, np.inf)
        i = int(np.argmax(proj))
        # eq. (26) = (20) for the empty model, where S_i = diag_i and Q_i = PhiBt_i
        theta = self.PhiBt[i] ** 2 - self.diag[i]
        alpha = self.diag[i] ** 2 / theta if theta > 0 else self.diag[i] * 1e3
        self.active = [i]
        self.alpha = np.array([alpha])

    def move_to(self, products) -> None:
        """Move the state to new data products (a new Laplace surrogate) keeping the model
        (``active``, ``alpha``), the skipped duplicates and the policy: what a state built on
        them would hold, then the exact :meth:`recompute`."""
        self.products = products
        self.diag = products.diag()
        self.PhiBt = products.PhiBt()
        Mt = len(self.active)
        products.columns(self.active, self._buf[:, :Mt])
        self.cross = self._buf[:, :Mt]
        self.recompute()

    def snapshot(self) -> Snapshot:
        """Everything a step changes, to :meth:`restore` a rejected run of steps."""
        return Snapshot(list(self.active), self.alpha.copy(), self.Sigma.copy(), self.mu.copy(),
                        self.S.copy(), self.Q.copy(), self.cross.copy(order="F"),
                        self.excluded.copy(), dict(self.aligned))

    def restore(self, snap: Snapshot) -> None:
        """Back to a :meth:`snapshot` taken on the same products."""
        self.active = list(snap.active)
        self.alpha, self.Sigma, self.mu = snap.alpha, snap.Sigma, snap.mu
        self.logdet_Sigma = None
        self.S, self.Q, self.excluded, self.aligned = snap.S, snap.Q, snap.excluded, snap.aligned
        Mt = len(self.active)
        if self._buf.shape[1] < Mt:
            self._buf = np.empty((self._buf.shape[0], 2 * Mt), order="F")
        self._buf[:, :Mt] = snap.cross
        self.cross = self._buf[:, :Mt]

    # ---- exact recomputation -------------------------------------------------------------
    def recompute(self) -> None:
        """Sigma, mu, S, Q from scratch (TF03 eqs. 24-25, T01 eq. 6) through the Cholesky
        factor L of ``H = A + Phi_in^T B Phi_in``: ``S_m = diag_m - ||L^-1 c_m||^2`` with
        ``c_m`` the row of ``cross`` — a sum of squares, far more accurate than
        ``c_m^T Sigma c_m`` when H is ill-conditioned."""
        act = np.asarray(self.active, dtype=np.int64)
        if act.size <= compiled.SMALL:
            new = compiled.recompute(self.cross, act, self.alpha, self.diag, self.PhiBt)
            if new.ok:
                self.mu, self.Sigma, self.S, self.Q = new.mu, new.Sigma, new.S, new.Q
                self.logdet_Sigma = new.logdet_Sigma
                self.steps_since_recompute = 0
                return
        H = self.cross[act, :]
        H = 0.5 * (H + H.T)
        H.flat[:: act.size + 1] += self.alpha
        L = cholesky(H)  # lower, upper triangle zero
        ZT = linalg.blas.dtrsm(1.0, L, self.cross, side=1, lower=1, trans_a=1)  # cross L^-T
        y = linalg.lapack.dtrtrs(L, self.PhiBt[act], lower=1)[0]
        self.mu = linalg.lapack.dtrtrs(L, y, lower=1, trans=1)[0]
        self.Sigma = cholesky_inverse(L)
        self.logdet_Sigma = -2.0 * float(np.sum(np.log(np.diag(L))))
        self.S = self.diag - np.einsum("ij,ij->i", ZT, ZT)
        self.Q = self.PhiBt - ZT @ y
        self.steps_since_recompute = 0

    def rescale(self, factor: float) -> None:
        """Multiply every precision in ``B`` by ``factor`` (a noise update in regression)."""
        self._scale(factor)
        self.recompute()

    def _scale(self, factor: float) -> None:
        """``B -> factor B`` in the products and the cached ``phi^T B`` terms only."""
        self.products.rescale(factor)
        self.diag *= factor
        self.PhiBt *= factor
        self.cross *= factor

    # ---- the decision rule ---------------------------------------------------------------
    def sq(self) -> tuple[np.ndarray, np.ndarray]:
        """``s_m``, ``q_m`` (TF03 eq. 23). For a basis in the model, ``S_j = alpha_j gamma_j``
        and ``Q_j = alpha_j mu_j`` (from ``Phi^T C^-1 Phi = A - A Sigma A``), so eq. (23)
        becomes ``s_j = 1 / Sigma_jj - alpha_j`` and ``q_j = mu_j / Sigma_jj``: no
        cancellation between the nearly equal ``alpha_j`` and ``S_j`` of a well-determined
        weight."""
        s, q = self.S.copy(), self.Q.copy()
        act = np.asarray(self.active)
        s[act], q[act] = in_model_sq(self.mu, np.diag(self.Sigma), self.alpha)
        return s, q

    def proposals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every candidate: its proposed alpha (TF03 eqs. 20-21, or the Gamma-prior
        optimum of :func:`optimal_alpha`; then the policy's floor and damping), the gain
        ``Delta L`` of moving to it (add, re-estimate or delete; TF03 eq. 18 and App. A) and
        the current alpha (inf if excluded). Only the candidates that can move are
        evaluated: with the flat prior an excluded candidate needs ``Q^2 > S``."""
        S, Q = self.S, self.Q
        M = S.size
        if self.flat:
            return compiled.flat_proposals(*self._flat_args())
        new = np.full(M, np.inf)
        gain = np.full(M, -np.inf)
        cur = np.full(M, np.inf)
        act = np.asarray(self.active)
        cur[act] = self.alpha
        # S_m <= 0 (exactly > 0 in theory): phi_m lies numerically in the span of the model
        addable = self.excluded & (S > compiled.SPAN_TOL * self.diag)
        if self.flat:
            addable &= Q * Q > S
        cand = np.flatnonzero(addable)
        d = np.diag(self.Sigma)
        idx = np.concatenate([cand, act])
        s = np.concatenate([S[cand], 1.0 / d - self.alpha])
        q = np.concatenate([Q[cand], self.mu / d])
        b = self._b_prior[idx]
        prop = self.policy.adjust(idx, optimal_alpha(s, q, self.a_prior, b), cur[idx])
        g = (basis_objective(prop, s, q, self.a_prior, b)
             - basis_objective(cur[idx], s, q, self.a_prior, b))
        g[np.isinf(prop) & np.isinf(cur[idx])] = -np.inf  # nothing to do
        new[idx], gain[idx] = prop, g
        # in the model and numerically in the span of the rest (Sigma_jj = 1 / alpha_j to
        # rounding, so A.3's update would divide by zero): no action, no say in convergence
        span = act[~(s[cand.size:] > compiled.SPAN_TOL * self.diag[act])]
        gain[span], new[span] = -np.inf, cur[span]
        if self.aligned or self.policy.frozen:
            blocked = [*self.aligned, *self.policy.frozen]
            gain[blocked], new[blocked] = -np.inf, cur[blocked]
        if act.size == 1 and np.isinf(new[act[0]]):  # never empty the model
            gain[act[0]] = -np.inf
        self.policy.forbid(new, gain, cur)
        return new, gain, cur

    def _flat_args(self) -> FlatArgs:
        """The state and policy as :func:`compiled.flat_proposals` takes them."""
        M = self.S.size
        lam, tabu = self.policy.arrays(M)
        blocked = np.zeros(M, dtype=bool)
        if self.aligned or self.policy.frozen:
            blocked[[*self.aligned, *self.policy.frozen]] = True
        return FlatArgs(self.S, self.Q, self.diag, self.excluded,
                        np.asarray(self.active, dtype=np.int64), self.alpha, self.Sigma, self.mu,
                        float(self.policy.alpha_min), lam, blocked, tabu)

    def choose(self, tol: float) -> tuple[int, float, float] | None:
        """``decide(*proposals(), tol)``; with the flat prior in one compiled call."""
        if not self.flat:
            return self.decide(*self.proposals(), tol, self.priority)
        i, new_i, gain_i = compiled.flat_choice(*self._flat_args(), float(tol),
                                                int(self.priority))
        return None if i < 0 else (i, new_i, gain_i)

    @staticmethod
    def decide(new: np.ndarray, gain: np.ndarray, cur: np.ndarray, tol: float,
               priority: int = 0) -> tuple[int, float, float] | None:
        """The action with the largest gain (or as ``priority`` says, see the class):
        (candidate, its new alpha, gain), or None when converged: no add or delete pending
        and every re-estimate changes ``ln alpha`` by less than ``tol`` (TF03 §4.4)."""
        i = int(compiled.decide(new, gain, cur, float(tol), int(priority)))
        if i < 0:
            return None
        return i, float(new[i]), float(gain[i])

    # ---- TF03 App. A rank-one updates ----------------------------------------------------
    def add(self, i: int, alpha_i: float) -> None:
        """A.2: add basis ``i`` with precision ``alpha_i``."""
        Mt = len(self.active)
        if Mt == self._buf.shape[1]:  # grow the buffer of cross
            buf = np.empty((self._buf.shape[0], 2 * Mt), order="F")
            buf[:, :Mt] = self.cross
            self._buf = buf
        c = self.products.column(i, self._buf[:, Mt])  # Phi^T B phi_i
        self.logdet_Sigma = None
        self.Sigma, self.mu = compiled.add_update(
            self.Sigma, self.mu, self.S, self.Q, self.cross, c,
            np.asarray(self.active, dtype=np.int64), i, float(alpha_i))
        self.cross = self._buf[:, : Mt + 1]
        self.active.append(int(i))
        self.excluded[i] = False
        self.alpha = np.append(self.alpha, alpha_i)

    def reestimate(self, i: int, alpha_new: float) -> None:
        """A.3: change the precision of basis ``i`` (in the model)."""
        j = self.active.index(i)
        self.policy.reestimated(i, self.alpha[j], alpha_new)
        self.logdet_Sigma = None
        compiled.reestimate_update(self.Sigma, self.mu, self.S, self.Q, self.cross, j,
                                   1.0 / (alpha_new - self.alpha[j]))
        self.alpha[j] = alpha_new

    def delete(self, i: int) -> None:
        """A.4: remove basis ``i`` (alpha -> inf)."""
        j = self.active.index(i)
        self.logdet_Sigma = None
        self.Sigma, self.mu = compiled.delete_update(self.Sigma, self.mu, self.S, self.Q,
                                                     self.cross, j)
        keep = np.arange(len(self.active)) != j
        Mt = len(self.active)
        self._buf[:, j : Mt - 1] = self._buf[:, j + 1 : Mt]
        self.cross = self._buf[:, : Mt - 1]
        self.alpha = self.alpha[keep]
        del self.active[j]
        self.excluded[i] = True
        self.aligned = {k: p for k, p in self.aligned.items() if p != i}

    def n_degenerate(self) -> int:
        """Candidates skipped as duplicates: aligned beyond ``ALIGNMENT_MAX`` (whatever
        ``alignment_max``), or numerically in the model's span."""
        out = np.ones(self.S.size, bool)
        out[self.active] = False
        dup = sum(self._cosine(i, p) > ALIGNMENT_MAX for i, p in self.aligned.items())
        return dup + int(np.sum(out & (self.S <= compiled.SPAN_TOL * self.diag)))

    def _cosine(self, i: int, p: int) -> float:
        """Cosine (in the ``B`` inner product) of candidate ``i`` with basis ``p`` in the model."""
        c = self.cross[i, self.active.index(p)]
        return float(c / math.sqrt(max(self.diag[i] * self.diag[p], 1e-300)))

    def is_aligned(self, i: int) -> int | None:
        """An in-model basis that candidate ``i`` nearly duplicates (TF03's alignment test);
        ``phi_i^T B phi_j`` is row ``i`` of ``cross``."""
        act = np.asarray(self.active)
        cos = self.cross[i] / np.sqrt(np.maximum(self.diag[i] * self.diag[act], 1e-300))
        j = int(np.argmax(cos))
        return int(act[j]) if cos[j] > self.alignment_max else None

    # ---- one step ------------------------------------------------------------------------
    def _choose(self, tol: float) -> tuple[int, float, float] | None:
        """:meth:`choose`; with ``batch_skips``, every candidate aligned with the model is
        set aside at once, and the choice made among the others (no step per skip)."""
        choice = self.choose(tol)
        while (self.batch_skips and choice is not None and self.excluded[choice[0]]
               and self.is_aligned(choice[0]) is not None):
            act = np.asarray(self.active)
            cos = self.cross / np.sqrt(np.maximum(np.outer(self.diag, self.diag[act]), 1e-300))
            j = np.argmax(cos, axis=1)
            for i in np.flatnonzero(self.excluded & (cos[np.arange(j.size), j]
                                                     > self.alignment_max)):
                self.aligned.setdefault(int(i), int(act[j[i]]))
            choice = self.choose(tol)
        return choice

    def step(self, tol: float = 1e-6, newton: float = 0.0, noise: Noise | None = None
             ) -> tuple[str, float, bool]:
        """Take the action with the largest gain (or as ``priority`` says). Returns
        (action, gain, converged) where converged means: no basis to add or delete and
        every re-estimate changes ``ln alpha`` by less than ``tol`` (TF03 §4.4).

        ``newton`` (flat prior): where the rule picks a re-estimate that gains less than
        ``newton`` (``inf``: any), one :meth:`newton_step` on every ``ln alpha`` (and
        ``ln beta`` with ``noise``) replaces it (the single re-estimate is taken if the
        Newton step fails); once a Newton step is below ``tol``, a gaining add or deletion
        goes first; converged then means no add or delete is pending."""
        choice = self._choose(tol)
        if choice is None:
            return "none", 0.0, True
        i, new_i, gain_i = choice
        reestimate = not self.excluded[i] and math.isfinite(new_i)
        if newton and reestimate and self._newton_small:
            priority, self.priority = self.priority, 2  # the model's alphas are settled
            choice = self._choose(tol)
            self.priority = priority
            if choice is None:
                return "none", 0.0, True
            i, new_i, gain_i = choice
            reestimate = not self.excluded[i] and math.isfinite(new_i)
        if newton and reestimate and gain_i < newton:
            accepted, small, change = self.newton_step(tol, noise)
            if accepted:
                self._newton_small = small
                return "newton", change, small and not self.switch_pending()
        self._newton_small = False
        if self.excluded[i]:
            partner = self.is_aligned(i)
            if partner is not None:
                self.aligned[i] = partner
                return "skip", 0.0, False
            if math.isinf(gain_i):  # forced by a proper prior: report its own contribution
                gain_i = float(basis_objective(new_i, self.S[i], self.Q[i], self.a_prior,
                                               self._b_prior[i]))
            self.add(i, new_i)
            action = "add"
        elif math.isinf(new_i):
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

    def switch_pending(self) -> bool:
        """Whether any candidate would be added or deleted (flat prior, TF03 eqs. 20-21)."""
        new, gain, cur = compiled.flat_proposals(*self._flat_args())
        return bool(np.any((np.isfinite(new) != np.isfinite(cur)) & (gain > 0)))

    def polish(self, tol: float, max_steps: int = 20, noise: Noise | None = None) -> bool:
        """Up to ``max_steps`` :meth:`newton_step` s; True when the last one was below
        ``tol`` in every coordinate."""
        for _ in range(max_steps):
            accepted, small, _ = self.newton_step(tol, noise)
            if not accepted:
                return False
            if small:
                return True
        return False

    def newton_step(self, tol: float, noise: Noise | None = None
                    ) -> tuple[bool, bool, float]:
        """One Newton step on ``ln alpha`` of the bases in the model (and on ``ln beta``
        when ``noise`` is given: regression, ``B = beta I``), with the set fixed: the
        gradient of T01 eq. 15 is ``(1 - alpha_i (Sigma_ii + mu_i^2)) / 2`` and its Hessian
        ``alpha_i alpha_j (Sigma_ij^2 + 2 mu_i mu_j Sigma_ij) / 2 - delta_ij alpha_i
        (Sigma_ii + mu_i^2) / 2`` (from ``dSigma / d alpha_j = -Sigma e_j e_j^T Sigma``,
        ``d mu / d alpha_j = -Sigma e_j mu_j``); the noise terms are
        :meth:`noise_derivatives`. It replaces the one-basis-at-a-time re-estimates' linear
        convergence (slow when bases overlap: thousands of tiny alternating steps) by
        quadratic convergence. The Hessian's eigenvalues enter by their absolute values
        (saddle-free Newton), and the step is halved until it does not lower the objective;
        ``alpha_i`` stays below ``POLISH_ALPHA_MAX phi_i^T B phi_i`` and
        ``beta`` below ``noise.beta_max`` (``noise.beta`` is updated). Returns (accepted,
        below ``tol`` in every coordinate, the change in T01 eq. 15); not accepted: the state
        is unchanged.
        """
        evidence = self.log_evidence()
        before = evidence + self._noise_prior(noise)
        a, Sg, mu = self.alpha, self.Sigma, self.mu
        m2 = np.diag(Sg) + mu * mu
        grad = 0.5 * (1.0 - a * m2)
        H = 0.5 * np.outer(a, a) * (Sg * Sg + 2.0 * np.outer(mu, mu) * Sg)
        H.flat[:: a.size + 1] -= 0.5 * a * m2
        with_noise = noise is not None
        if with_noise:
            g_b, h_b, h_bb = self.noise_derivatives(noise)
            with_noise = noise.beta < noise.beta_max or g_b < 0  # not pushing past the cap
            if with_noise:
                grad = np.append(grad, g_b)
                H = np.block([[H, h_b[:, None]], [h_b[None, :], np.array([[h_bb]])]])
        snap = self.snapshot()
        beta0 = noise.beta if noise is not None else None
        # a basis pushed this far out contributes nothing; the rule then deletes it
        ceiling = POLISH_ALPHA_MAX * self.diag[np.asarray(self.active)]
        # saddle-free Newton: -H's eigenvalues by their absolute values (floored), so along
        # a direction of positive curvature (two overlapping bases trading weight) the step
        # goes uphill as far as the curvature allows, not a damped crawl
        lam, V = np.linalg.eigh(-H)
        lam = np.maximum(np.abs(lam), 1e-10 * max(float(np.max(np.abs(lam))), 1e-300))
        full = V @ ((V.T @ grad) / lam)
        full *= min(1.0, 2.0 / max(float(np.max(np.abs(full))), 1e-300))  # |step| <= 2
        for halving in range(12):  # backtracking until the objective does not drop
            step = full * 0.5**halving
            self.alpha = np.minimum(a * np.exp(step[: a.size]), ceiling)
            if with_noise:
                noise.beta = min(beta0 * math.exp(step[-1]), noise.beta_max)
                self._scale(noise.beta / beta0)
            self.recompute()
            change = self.log_evidence() - evidence
            after = evidence + change + self._noise_prior(noise)
            if np.isfinite(after) and after >= before - 1e-12 * abs(before):
                return True, bool(np.max(np.abs(step)) < tol), change
            if with_noise:  # B back first: the snapshot holds cross at the old B
                self._scale(beta0 / noise.beta)
                noise.beta = beta0
            self.restore(snap)
        return False, False, 0.0

    def noise_derivatives(self, noise: Noise) -> tuple[float, np.ndarray, float]:
        """Regression (``B = beta I``): the derivative of T01 eq. 15 plus the noise prior
        ``c ln beta - d beta`` (T01 App. A) in ``ln beta``, ``g = (N - beta ||t - Phi mu||^2
        - sum gamma) / 2 + c - d beta`` (zero at T01 eq. 46), and its second derivatives in
        ``ln alpha_j`` and ``ln beta``. With ``d mu / d ln beta = Sigma A mu``, ``d Sigma / d
        ln beta = -beta Sigma G Sigma`` (``G = Phi^T Phi``), the weight optimum ``beta
        Phi^T (t - Phi mu) = A mu`` and ``beta Sigma G = I - Sigma A`` they need no ``G``:
        ``d g / d ln alpha_j = alpha_j [(Sigma - Sigma A Sigma)_jj - 2 mu_j (Sigma A mu)_j]
        / 2`` and ``d g / d ln beta = [-beta ||t - Phi mu||^2 - sum gamma + 2 mu^T A Sigma A
        mu + tr((I - Sigma A)^2)] / 2 - d beta``."""
        a, Sg, mu, beta = self.alpha, self.Sigma, self.mu, noise.beta
        r = self.rss()
        gamma_sum = a.size - float(a @ np.diag(Sg))
        v = Sg @ (a * mu)  # Sigma A mu
        g = 0.5 * (noise.n - beta * r - gamma_sum) + noise.c - noise.d * beta
        h_b = 0.5 * a * (np.diag(Sg) - (Sg * Sg) @ a - 2.0 * mu * v)
        R = np.eye(a.size) - Sg * a  # I - Sigma A
        h_bb = 0.5 * (-beta * r - gamma_sum + 2.0 * (a * mu) @ v + np.sum(R * R.T)) \
            - noise.d * beta
        return float(g), h_b, float(h_bb)

    @staticmethod
    def _noise_prior(noise: Noise | None) -> float:
        """The noise prior's ``c ln beta - d beta`` (0 without a noise re-estimate)."""
        return 0.0 if noise is None else noise.c * math.log(noise.beta) - noise.d * noise.beta

    def log_evidence(self) -> float:
        """ln N(t | 0, B^-1 + Phi A^-1 Phi^T) at the current state (T01 eqs. 36-41 with B)."""
        p = self.products
        return 0.5 * (
            p.logdet_b()
            + np.sum(np.log(self.alpha))
            + (self.logdet_Sigma if self.logdet_Sigma is not None
               else np.linalg.slogdet(self.Sigma)[1])
            - p.weighted_rss(self.active, self.mu)
            - self.mu @ (self.alpha * self.mu)
            - p.n * LOG_2PI
        )

    def rss(self) -> float:
        """``||t - Phi_in mu||^2`` (regression's noise update)."""
        return self.products.rss(self.active, self.mu)

    def gamma(self) -> np.ndarray:
        """Well-determinedness ``gamma_i = 1 - alpha_i Sigma_ii`` (T01 eq. 17)."""
        return 1.0 - self.alpha * np.diag(self.Sigma)
