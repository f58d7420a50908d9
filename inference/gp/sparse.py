"""The sparse GP regression of Titsias (2009), "Variational learning of inducing variables in
sparse Gaussian processes": ``M`` inducing inputs ``Z`` and the collapsed variational bound

    F = ln N(t | 0, Q + s^2 I) - tr(K_ff - Q) / (2 * s^2),   Q = K_fu K_uu^-1 K_uf

(Titsias 2009, eq. 9) on the log marginal likelihood, maximised over the SE-ARD
hyperparameters at fixed ``Z`` in O(N M^2). Its predictive is eq. (6) with the optimal
``q(u)`` of eq. (10). With ``Z = X`` the bound is the exact log marginal likelihood (GPML eq.
5.8) and the predictive the exact GP's. PyMC's ``pm.gp.MarginalApprox(approx="VFE")`` has
the same bound.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from sparsebayes.models.gp import se_ard_covariance
from sparsebayes.models.kernels import GaussianKernel, weighted_sq_differences

from ..numerics import LOG_2PI, cholesky_inverse

__all__ = ["JITTER", "VFEBound", "vfe_bound_and_grad", "VFEPosterior"]

JITTER = 1e-6  # added to K_uu's diagonal, relative to signal_sd^2 (pm.gp's default is 1e-6)


class Factors(NamedTuple):
    """``K_uu`` (with jitter) and ``K_uf``, ``L_uu``, ``V = L_uu^-1 K_uf``, ``B = I + V V^T /
    s^2`` and its Cholesky factor ``L_B``."""

    Kuu: np.ndarray
    Kuf: np.ndarray
    Luu: np.ndarray
    V: np.ndarray
    B: np.ndarray
    LB: np.ndarray


def _work_arrays(m: int, n: int, k: int) -> tuple[np.ndarray, ...]:
    """``k`` Fortran-ordered (M, N) arrays, for :func:`_factors` and a gradient."""
    return tuple(np.empty((m, n), order="F") for _ in range(k))


def _factors(Xc, Zc, ls, sf, sn, work: tuple[np.ndarray, np.ndarray] | None = None
             ) -> Factors:
    """The :class:`Factors` at these hyperparameters; ``K_uf`` and ``V`` are built in
    ``work``, two arrays of :func:`_work_arrays` (fresh ones when not given): the triangular
    solve runs in place, and a caller that reuses them pays once for touching new memory."""
    Kuu = se_ard_covariance(Zc, None, ls, sf)
    Kuu[np.diag_indices_from(Kuu)] += JITTER * sf**2
    Kuf, V = work if work is not None else _work_arrays(Zc.shape[0], Xc.shape[0], 2)
    # k(x_n, z_m) in an (N, M) C-ordered array is K_uf in Fortran order
    GaussianKernel(np.sqrt(2.0) * ls)(Xc, Zc, out=Kuf.T)
    Kuf *= sf**2
    Luu = linalg.cholesky(Kuu, lower=True, check_finite=False)
    # V = L_uu^-1 K_uf as a product with the triangular inverse (nonsingular: a Cholesky
    # factor's diagonal is positive), in place; BLAS runs it at about twice a solve's speed
    Luu_inv = lapack.dtrtri(Luu, lower=1)[0]
    np.copyto(V, Kuf)
    V = blas.dtrmm(1.0, Luu_inv, V, lower=1, overwrite_b=1)
    B = V @ V.T
    B /= sn**2
    B[np.diag_indices_from(B)] += 1.0
    LB = linalg.cholesky(B, lower=True, check_finite=False)
    return Factors(Kuu, Kuf, Luu, V, B, LB)


def _alpha(t, V, LB, c, s2: float) -> np.ndarray:
    """``alpha = (Q + s^2 I)^-1 t = t / s^2 - V^T B^-1 V t / s^4``, with ``B^-1 V t / s^2 =
    L_B^-T c``."""
    return (t - V.T @ linalg.solve_triangular(LB, c, lower=True, trans="T",
                                              check_finite=False)) / s2


class VFEBound:
    """Titsias's bound (eq. 9) and its gradient as a function of ``theta = (ln length_scale,
    ln signal_sd, ln noise_sd)``, for inputs ``Xc`` and inducing inputs ``Zc`` shifted alike.
    Its three (M, N) work arrays are allocated once and reused by every call.

    With ``A = Q + s^2 I``, ``alpha = A^-1 t`` and ``P = K_uu^-1 K_uf``, the bound's
    derivative in ``Q`` is ``G = (alpha alpha^T - A^-1) / 2 + I / (2 * s^2)`` (GPML eq. 5.9
    plus the trace term), so ``dF/dK_uf = 2 P G`` and ``dF/dK_uu = -P G P^T``. By Woodbury
    and ``V V^T = s^2 (B - I)``, ``2 P G = (P alpha) alpha^T + R V / s^2`` with ``R = L_uu^-T
    (I - B^-1)``, and ``P G P^T = (P alpha)(P alpha)^T / 2 + R (B - I) L_uu^-1 / 2``: three
    O(N M^2) products in all. The SE-ARD kernel's derivatives then give the length scales'
    and the signal's terms."""

    def __init__(self, Xc: np.ndarray, t: np.ndarray, Zc: np.ndarray,
                 learn_inducing: bool = False) -> None:
        self.Xc, self.t, self.Zc, self.learn_inducing = Xc, t, Zc, learn_inducing
        self._work = _work_arrays(Zc.shape[0], Xc.shape[0], 3)

    def __call__(self, theta: np.ndarray, grad: bool = True):
        Xc, t = self.Xc, self.t
        n, d = Xc.shape
        m = self.Zc.shape[0]
        Zc = theta[d + 2:].reshape(m, d) if self.learn_inducing else self.Zc
        ls, sf, sn = np.exp(theta[:d]), float(np.exp(theta[d])), float(np.exp(theta[d + 1]))
        s2 = sn**2
        Kuu, Kuf, Luu, V, B, LB = _factors(Xc, Zc, ls, sf, sn, self._work[:2])
        c = linalg.solve_triangular(LB, V @ t, lower=True, check_finite=False) / s2
        sum_v2 = float(np.einsum("ij,ij->", V, V))
        bound = (-0.5 * n * (LOG_2PI + np.log(s2)) - np.sum(np.log(np.diag(LB)))
                 - 0.5 * (t @ t) / s2 + 0.5 * (c @ c) - 0.5 * (n * sf**2 - sum_v2) / s2)
        if not grad:
            return bound
        alpha = _alpha(t, V, LB, c, s2)
        Bi = cholesky_inverse(LB)
        # P V^T B^-1 = L_uu^-T V V^T B^-1 = s2 L_uu^-T (I - B^-1), as V V^T = s2 (B - I): O(M^3)
        R = linalg.solve_triangular(Luu, np.eye(m) - Bi, lower=True, trans="T",
                                    check_finite=False)
        R /= s2
        Pa = linalg.solve_triangular(Luu, V @ alpha, lower=True, trans="T", check_finite=False)
        W_uf = np.matmul(R, V, out=self._work[2])
        blas.dger(1.0, Pa, alpha, a=W_uf, overwrite_a=1)  # W_uf += Pa alpha^T, in place
        W_uf *= Kuf
        # P V^T B^-1 V P^T / s2^2 = L_uu^-T (I - B^-1) (B - I) L_uu^-1, and (I - B^-1) (B - I)
        # = B - 2 I + B^-1: two O(M^3) solves
        H = B + Bi
        H[np.diag_indices_from(H)] -= 2.0
        H = linalg.solve_triangular(Luu, H, lower=True, trans="T", check_finite=False)
        g_uu = -0.5 * np.outer(Pa, Pa) \
            - 0.5 * linalg.solve_triangular(Luu, H.T, lower=True, trans="T",
                                            check_finite=False).T
        W_uu = g_uu * Kuu
        g_ls = (weighted_sq_differences(W_uf.T, Xc / ls, Zc / ls)
                + weighted_sq_differences(W_uu, Zc / ls, Zc / ls))
        g_sf = 2.0 * (W_uf.sum() + W_uu.sum()) - n * sf**2 / s2
        tr_Ainv = (n - m + np.trace(Bi)) / s2
        g_s2 = 0.5 * (alpha @ alpha - tr_Ainv) + 0.5 * (n * sf**2 - sum_v2) / s2**2
        g = [g_ls, [g_sf, 2.0 * s2 * g_s2]]
        if self.learn_inducing:  # dK_mn / dz_md = K_mn (x_nd - z_md) / l_d^2
            g_Z = (W_uf @ Xc - Zc * W_uf.sum(axis=1)[:, None]
                   + 2.0 * (W_uu @ Zc - Zc * W_uu.sum(axis=1)[:, None])) / ls**2
            g.append(g_Z.ravel())
        return bound, np.concatenate(g)


def vfe_bound_and_grad(theta: np.ndarray, Xc: np.ndarray, t: np.ndarray, Zc: np.ndarray,
                       grad: bool = True):
    """:class:`VFEBound` at one ``theta``."""
    return VFEBound(Xc, t, Zc)(theta, grad)


class VFEPosterior:
    """The sparse GP's posterior at point hyperparameters: ``q(u) = N(m_u, S_u)`` of Titsias
    (2009) eq. (10) and ``q(f_*) = int p(f_* | u) q(u) du`` (eq. 6).

    In the whitened form ``u = L_uu v``: ``v = L_B^-T (c + e)``, ``e ~ N(0, I)``, with ``c =
    L_B^-1 V t / s^2``; so ``f_* = V_*^T v`` plus the part of ``f_*`` that ``u`` does not
    explain, ``k_** - Q_**``."""

    def __init__(self, X, t, Z, length_scale, signal_sd: float, noise_sd: float) -> None:
        self.shift = X.mean(axis=0)
        self.Zc = Z - self.shift
        self.ls, self.sf, self.sn = np.asarray(length_scale, float), float(signal_sd), \
            float(noise_sd)
        _, _, self.Luu, V, _, self.LB = _factors(X - self.shift, self.Zc, self.ls, self.sf,
                                              self.sn)
        self.c = linalg.solve_triangular(self.LB, V @ t, lower=True, check_finite=False) \
            / self.sn**2
        self._V, self._t = V, t

    def _whitened(self, X_new):
        """``V_* = L_uu^-1 K_u*`` and ``W_* = L_B^-1 V_*``."""
        Kus = se_ard_covariance(self.Zc, X_new - self.shift, self.ls, self.sf)
        Vs = linalg.solve_triangular(self.Luu, Kus, lower=True, check_finite=False)
        return Vs, linalg.solve_triangular(self.LB, Vs, lower=True, check_finite=False)

    def latent_moments(self, X_new) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of ``q(f_*)`` (Titsias 2009 eq. 6): ``K_*u Sigma K_uf t / s^2``
        and ``k_** - Q_** + K_*u Sigma K_u*``, ``Sigma = (K_uu + K_uf K_fu / s^2)^-1``."""
        Vs, Ws = self._whitened(np.asarray(X_new, float))
        var = self.sf**2 - np.einsum("ij,ij->j", Vs, Vs) + np.einsum("ij,ij->j", Ws, Ws)
        return Ws.T @ self.c, np.maximum(var, 0.0)

    def moments(self, X_new) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of a noisy target (the latent's plus ``s^2``)."""
        mean, var = self.latent_moments(X_new)
        return mean, var + self.sn**2

    def latent_draws(self, X_new, per: int, rng: np.random.Generator) -> np.ndarray:
        """``per`` draws of ``f`` at ``X_new`` (per, m): joint through ``u``, independent in
        the part ``k_** - Q_**`` that ``u`` leaves (its diagonal: the draws' marginals are
        eq. 6's exactly)."""
        Vs, _ = self._whitened(np.asarray(X_new, float))
        e = rng.standard_normal((per, self.c.size))
        v = linalg.solve_triangular(self.LB, (self.c + e).T, lower=True, trans="T",
                                    check_finite=False)
        rest = np.sqrt(np.maximum(self.sf**2 - np.einsum("ij,ij->j", Vs, Vs), 0.0))
        return (Vs.T @ v).T + rest * rng.standard_normal((per, Vs.shape[1]))

    def loo_logpdf(self) -> np.ndarray:
        """``ln p(t_n | t_-n)`` under the model ``t ~ N(0, Q + s^2 I)`` at these
        hyperparameters (GPML eqs. 5.10-5.12 with ``C = Q + s^2 I``, whose inverse is
        ``I / s^2 - V^T B^-1 V / s^4``): the sparse GP's cheap leave-one-out approximation."""
        s2 = self.sn**2
        W = linalg.solve_triangular(self.LB, self._V, lower=True, check_finite=False)
        diag = 1.0 / s2 - np.einsum("ij,ij->j", W, W) / s2**2
        alpha = _alpha(self._t, self._V, self.LB, self.c, s2)
        return 0.5 * (np.log(diag) - LOG_2PI) - 0.5 * alpha**2 / diag
