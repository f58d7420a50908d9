"""The non-Gaussian likelihoods of the RVM (Tipping 2001): Bernoulli with the logistic link
(eq. 23), softmax (eq. 28) and Poisson with the log link (count data, T01 §3's Laplace
scheme with PRML §7.2.3), per point their log probability and its first three
derivatives in the latent ``F``, and the products with the design of the (basis, class)
pairs in a model that the Laplace approximation's Newton iteration needs (eqs. 24-25)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, gammaln, log_expit, logsumexp, softmax

from sparsebayes.models import RVMPoissonRegression

LOGLIK_BLOCK = 2_000_000  # logits held at once when the pointwise log-likelihood is drawn

__all__ = ["Likelihood", "Bernoulli", "Softmax", "Poisson", "likelihood_for", "likelihood_of",
           "class_bounds", "pair_logits", "pair_gradient", "pair_hessian"]

LOG_RATE_MAX = 700.0  # exp(f) is taken at min(f, this): no overflow on a Newton trial step



class Likelihood:
    """What the Laplace approximation's Newton iteration needs from a likelihood with ``n_out``
    logits per point, for the (basis, class) pairs ``Phi_act``, ``cls`` in the model."""

    n_out: int
    name: str  # the result's attrs["likelihood"]
    grad_scale = 1.0  # the size of a point's gradient term (the mode's convergence test)

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """``F`` (N, n_out)."""
        return pair_logits(Phi_act, cls, theta, self.n_out)

    def initial_logits(self) -> np.ndarray:
        """``F`` (N, n_out) where the fast type-II ML loop linearises first (TF03 eq. 14),
        before any weight is in the model: zero logits (the classifier's ``y = 1/2``)."""
        return np.zeros((len(self.t), self.n_out))

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The likelihood's gradient ``J^T (t - y)`` in the pair weights and its negative
        Hessian ``J^T B J`` (T01 eq. 25)."""
        return (pair_gradient(Phi_act, cls, self.grad(F)),
                pair_hessian(Phi_act, cls, self.hess(F)))


    def draws_loglik(self, Phi_act: np.ndarray, cls: np.ndarray, theta_draws: np.ndarray
                     ) -> np.ndarray:
        """Pointwise ``ln p(t_n | w)`` (..., obs) for weight draws (..., P) of the pairs, a
        block of draws at a time (at most ``LOGLIK_BLOCK`` logits held at once): the logits
        of every draw at once would be K times the result, the softmax's temporaries more."""
        lead = theta_draws.shape[:-1]
        flat = theta_draws.reshape(int(np.prod(lead)), theta_draws.shape[-1])  # P may be 0
        N = Phi_act.shape[0]
        out = np.empty((flat.shape[0], N))
        step = max(1, LOGLIK_BLOCK // (N * self.n_out))
        for a in range(0, flat.shape[0], step):
            out[a : a + step] = self.loglik(pair_logits(Phi_act, cls, flat[a : a + step],
                                                        self.n_out))
        return out.reshape(*lead, N)


class Bernoulli(Likelihood):
    """Eq. (23): ``P(t=1) = sigma(f)``; one logit per point (``F`` is (N, 1))."""

    n_out = 1
    name = "bernoulli"

    def __init__(self, t: np.ndarray) -> None:
        self.t = np.asarray(t, dtype=float)
        self.sign = 2 * self.t - 1

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for logits ``F`` (..., N, 1)."""
        return log_expit(self.sign * F[..., 0])

    def grad(self, F: np.ndarray) -> np.ndarray:
        """``t - y`` (N, 1)."""
        return (self.t - expit(F[:, 0]))[:, None]

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = y_n (1 - y_n)`` as (N, 1, 1) (T01 eq. 25)."""
        f = F[:, 0]
        return (expit(f) * expit(-f))[:, None, None]

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        return (Phi_act @ theta)[:, None]

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The general terms written out for one logit (the fast loop's hot path)."""
        f = F[:, 0]
        y = expit(f)
        return Phi_act.T @ (self.t - y), Phi_act.T @ ((y * expit(-f))[:, None] * Phi_act)

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_n = 1/2 P_n dB_n/df_n`` with ``dB/df = B (1 - 2y)`` (for the width gradient)."""
        f = F[:, 0]
        y = expit(f)
        return (0.5 * P[:, 0, 0] * y * expit(-f) * (1 - 2 * y))[:, None]


class Softmax(Likelihood):
    """Eq. (28): ``P(t=k) = softmax(f)_k``; one logit per class (``F`` is (N, K))."""

    name = "softmax"

    def __init__(self, t: np.ndarray, n_classes: int) -> None:
        self.n_out = n_classes
        self.codes = np.asarray(t, dtype=int)
        self.T = np.eye(n_classes)[self.codes]

    def initial_logits(self) -> np.ndarray:
        return np.zeros(self.T.shape)

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for logits ``F`` (..., N, K)."""
        return F[..., np.arange(F.shape[-2]), self.codes] - logsumexp(F, axis=-1)

    def grad(self, F: np.ndarray) -> np.ndarray:
        return self.T - softmax(F, axis=1)

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """For pairs sorted by class (as every caller holds them): with ``B_n = diag(y_n) -
        y_n y_n^T``, ``J^T B J`` is ``Phi_k^T diag(y_k) Phi_k`` on each class's diagonal block
        minus ``U^T U``, ``U = [y_k Phi_k]_k``: one product over all pairs instead of
        K(K+1)/2 weighted blocks, every class a contiguous slice (the fast loop's hot path)."""
        bounds = class_bounds(cls, self.n_out)
        if bounds is None:
            return super().newton_terms(Phi_act, cls, F)
        Y = softmax(F, axis=1)
        G = self.T - Y
        U = np.empty_like(Phi_act)
        g = np.empty(cls.size)
        for k in range(self.n_out):
            a, b = bounds[k], bounds[k + 1]
            np.multiply(Phi_act[:, a:b], Y[:, k, None], out=U[:, a:b])
            g[a:b] = G[:, k] @ Phi_act[:, a:b]
        H = -(U.T @ U)
        for k in range(self.n_out):
            a, b = bounds[k], bounds[k + 1]
            H[a:b, a:b] += Phi_act[:, a:b].T @ U[:, a:b]
        return g, H

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = diag(y_n) - y_n y_n^T`` (N, K, K): singular, rows sum to 0."""
        Y = softmax(F, axis=1)
        B = -Y[:, :, None] * Y[:, None, :]
        idx = np.arange(self.n_out)
        B[:, idx, idx] += Y
        return B

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_nk = 1/2 tr(P_n dB_n/df_nk) = 1/2 [B_n (diag P_n - 2 P_n y_n)]_k``."""
        Y = softmax(F, axis=1)
        B = self.hess(F)
        u = np.einsum("nii->ni", P) - 2 * np.einsum("nij,nj->ni", P, Y)
        return 0.5 * np.einsum("nik,ni->nk", B, u)


class Poisson(Likelihood):
    """Counts ``t_n ~ Poisson(exp(f_n))`` with the log link (the RVM of Tipping 2001 §3 with
    a Poisson likelihood; PRML §7.2.3's Laplace scheme): ``ln p(t|f) = t f - e^f - ln t!``,
    gradient ``t - e^f``, negative Hessian ``B = e^f``. One latent value per point."""

    n_out = 1
    name = "poisson"

    def __init__(self, t: np.ndarray) -> None:
        self.t = np.asarray(t, dtype=float)
        self.log_factorial = gammaln(self.t + 1.0)
        self.grad_scale = max(1.0, float(self.t.max(initial=0.0)))  # |t - e^f| at the mode

    def initial_logits(self) -> np.ndarray:
        """``log(t + 1/2)``: the GLM's usual first linearisation (the working response of
        IRLS, McCullagh & Nelder 1989 §2.5), not the rate 1 of ``f = 0``, which is far off
        for large counts."""
        return np.log(self.t + 0.5)[:, None]

    @staticmethod
    def rate(f: np.ndarray) -> np.ndarray:
        """``exp(f)``, with ``f`` capped at :data:`LOG_RATE_MAX` (no overflow)."""
        return np.exp(np.minimum(f, LOG_RATE_MAX))

    @staticmethod
    def logpmf(t: np.ndarray, f: np.ndarray) -> np.ndarray:
        """``ln Poisson(t | exp(f)) = t f - exp(f) - ln t!`` elementwise (broadcast)."""
        return t * f - Poisson.rate(f) - gammaln(np.asarray(t, dtype=float) + 1.0)

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for ``F`` (..., N, 1)."""
        f = F[..., 0]
        return self.t * f - self.rate(f) - self.log_factorial

    def grad(self, F: np.ndarray) -> np.ndarray:
        """``t - exp(f)`` (N, 1)."""
        return (self.t - self.rate(F[:, 0]))[:, None]

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = exp(f_n)`` as (N, 1, 1)."""
        return self.rate(F[:, 0])[:, None, None]

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        return (Phi_act @ theta)[:, None]

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """``Phi^T (t - e^f)`` and ``Phi^T diag(e^f) Phi``."""
        lam = self.rate(F[:, 0])
        return Phi_act.T @ (self.t - lam), Phi_act.T @ (lam[:, None] * Phi_act)

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_n = 1/2 P_n dB_n/df_n`` with ``dB/df = e^f`` (for the width gradient)."""
        return (0.5 * P[:, 0, 0] * self.rate(F[:, 0]))[:, None]


def likelihood_for(t: np.ndarray, n_classes: int, softmax_model: bool):
    return Softmax(t, n_classes) if softmax_model else Bernoulli(t)


def likelihood_of(problem, softmax_model: bool = False) -> Likelihood:
    """The likelihood of a non-Gaussian RVM problem on its targets ``problem.t``: Poisson
    for :class:`~sparsebayes.models.RVMPoissonRegression`, else Bernoulli or (with
    ``softmax_model``) softmax on the class codes of an RVM classification."""
    if isinstance(problem, RVMPoissonRegression):
        return Poisson(problem.t)
    return likelihood_for(problem.t, problem.n_classes, softmax_model)


def class_bounds(cls: np.ndarray, K: int) -> np.ndarray | None:
    """Where each class's pairs start and end, ``bounds[k]:bounds[k + 1]``, when the pairs
    are sorted by class (their columns are then contiguous slices); None otherwise."""
    if np.any(np.diff(cls) < 0):
        return None
    return np.searchsorted(cls, np.arange(K + 1))


def pair_logits(Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray, K: int) -> np.ndarray:
    """``F[..., k] = Phi[:, pairs of class k] @ theta[..., pairs of class k]``: (N, K) for one
    weight vector ``theta`` (P,), (..., N, K) for a stack of them (..., P)."""
    if theta.ndim > 1:
        F = np.zeros((*theta.shape[:-1], Phi_act.shape[0], K))
        for k in range(K):
            sel = cls == k
            if sel.any():
                F[..., k] = theta[..., sel] @ Phi_act[:, sel].T
        return F
    if K == 1:
        return (Phi_act @ theta)[:, None]
    F = np.zeros((Phi_act.shape[0], K))
    bounds = class_bounds(cls, K)
    if bounds is not None:  # sorted by class: contiguous slices
        for k in range(K):
            F[:, k] = Phi_act[:, bounds[k] : bounds[k + 1]] @ theta[bounds[k] : bounds[k + 1]]
        return F
    for k in range(K):
        sel = cls == k
        if sel.any():
            F[:, k] = Phi_act[:, sel] @ theta[sel]
    return F


def pair_gradient(Phi_act: np.ndarray, cls: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``J^T g``: ``sum_n Phi[n, col_j] G[n, cls_j]`` for every pair j."""
    if G.shape[1] == 1:
        return Phi_act.T @ G[:, 0]
    return np.einsum("nj,nj->j", Phi_act, G[:, cls])


def pair_hessian(Phi_act: np.ndarray, cls: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``J^T B J`` (the data part of T01 eq. 25) from per-class blocks
    ``Phi_k^T diag(B[:, k, l]) Phi_l``: the pairs are grouped by class (one stable sort), each
    block is a product of contiguous column slices, and the result is permuted back. Memory
    O(N P + P^2) for P pairs in the model: no (NK)-sized object."""
    K = B.shape[1]
    if K == 1:
        return Phi_act.T @ (B[:, 0, 0, None] * Phi_act)
    order = np.argsort(cls, kind="stable")
    bounds = np.searchsorted(cls[order], np.arange(K + 1))
    Ps = Phi_act[:, order]
    Hs = np.empty((cls.size, cls.size))
    for k in range(K):
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            continue
        for j in range(k, K):
            c, d = bounds[j], bounds[j + 1]
            if c == d:
                continue
            block = Ps[:, a:b].T @ (B[:, k, j, None] * Ps[:, c:d])
            Hs[a:b, c:d] = block
            Hs[c:d, a:b] = block.T
    H = np.empty_like(Hs)
    H[np.ix_(order, order)] = Hs
    return H
