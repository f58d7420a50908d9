"""The collapsed RVM regression likelihood ``ln N(t | 0, beta^-1 I + Phi A^-1 Phi^T)`` (T01
eq. 15) as one PyTensor ``Op`` whose gradient is written out (T01 App. A), so a single Cholesky
of the M x M matrix ``H = A + beta Phi^T Phi`` serves the value and the gradient.

The Op returns ``(logp, d logp / d alpha, d logp / d beta)``; its ``pullback`` returns the last two
times the incoming gradient, so ``pytensor.grad`` (and PyMC's rewrites, which do not look
inside it) never differentiates a Cholesky. Implemented twice: NumPy/SciPy (``perform``) and
numba (for nutpie's numba backend: numba's own Cholesky, triangular substitution written out),
both from the factor by triangular solves only, never a general inverse. Imported lazily:
importing it imports PyTensor and numba's dispatch, not PyMC.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented, grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch import basic as numba_basic
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from scipy import linalg

__all__ = ["CollapsedWoodbury", "collapsed_woodbury"]

LOG_2PI = float(np.log(2 * np.pi))


def _terms(tt, n, alpha, beta, L, Linv, u, mu):
    """Value and gradient from the Cholesky factor ``L`` of ``H``, ``L^-1``, ``u = L^-1 beta
    Phi^T t`` and ``mu = L^-T u = beta Sigma Phi^T t`` (T01 eq. 13), each by triangular
    substitution; ``Sigma_ii = sum_k (L^-1)_ki^2``;
    ``t^T C^-1 t = beta t^T t - ||u||^2``, ``ln|C| = ln|H| - N ln beta - sum ln alpha``
    (T01 App. A eqs. 36-41); ``d/d alpha_i = -(mu_i^2 + Sigma_ii - 1/alpha_i) / 2``,
    ``d/d beta = -(||t - Phi mu||^2 + (M - sum alpha_i Sigma_ii) / beta - N / beta) / 2``
    with ``beta ||t - Phi mu||^2 = t^T C^-1 t - sum alpha_i mu_i^2`` (the quadratic at its
    minimum, T01 eq. 39), not ``t^T t - 2 mu^T Phi^T t + mu^T G mu``: where ``H`` is nearly
    singular that difference of large terms is noise, and NUTS's step size collapses."""
    quad = beta * tt - u @ u
    logdet_C = 2.0 * np.sum(np.log(np.diag(L))) - n * np.log(beta) - np.sum(np.log(alpha))
    logp = -0.5 * (quad + logdet_C + n * LOG_2PI)
    sigma_diag = np.sum(Linv * Linv, axis=0)
    d_alpha = -0.5 * (mu * mu + sigma_diag - 1.0 / alpha)
    d_beta = -0.5 * (quad - alpha @ (mu * mu) + len(alpha) - alpha @ sigma_diag - n) / beta
    return logp, d_alpha, d_beta


def _lower_solve(L, b):
    """``L^-1 b`` for lower-triangular ``L`` by forward substitution (for numba, which has no
    LAPACK triangular solve; explicit loops, no temporaries). With
    :func:`_lower_transpose_solve` the same loops as the Laplace step's ``_chol_solve`` in
    ``inference/rvm/compiled.py``, kept apart: each module's numba cache follows its own
    source (``IMPLEMENTATION_VERSION`` hashes this file)."""
    M = L.shape[0]
    x = np.empty(M)
    for i in range(M):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    return x


def _lower_transpose_solve(L, b):
    """``L^-T b`` for lower-triangular ``L`` by back substitution."""
    M = L.shape[0]
    x = np.empty(M)
    for i in range(M - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, M):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]
    return x


def _lower_inverse(L):
    """``L^-1`` (lower triangular) by forward substitution on whole rows (row ``i`` is
    ``(e_i - sum_k<i L_ik (L^-1)_k) / L_ii``: axpy loops, which numba vectorises): accurate
    where a general (LU) inverse is not, as in ``Sigma_ii`` when ``H`` is nearly singular."""
    M = L.shape[0]
    Linv = np.zeros((M, M))
    for i in range(M):
        Linv[i, i] = 1.0
        for k in range(i):
            lik = L[i, k]
            for j in range(k + 1):
                Linv[i, j] -= lik * Linv[k, j]
        for j in range(i + 1):
            Linv[i, j] /= L[i, i]
    return Linv


class CollapsedWoodbury(Op):
    """``(b = Phi^T t, t^T t, N, alpha, beta, G = Phi^T Phi) -> (logp, dlogp/dalpha,
    dlogp/dbeta)`` of T01 eq. 15 by the Woodbury identity (T01 App. A). A ``H`` that is not
    positive definite, or a precision that underflowed to 0, gives ``logp = -inf`` and zero
    gradients (a rejected step for NUTS)."""

    __props__ = ()

    def make_node(self, b, tt, n, alpha, beta, G):
        inputs = [pt.as_tensor_variable(x).astype("float64") for x in (b, tt, n, alpha, beta, G)]
        ndims = tuple(x.type.ndim for x in inputs)
        if ndims != (1, 0, 0, 1, 0, 2):
            raise TypeError(f"CollapsedWoodbury needs (b, tt, n, alpha, beta, G) of ranks "
                            f"(1, 0, 0, 1, 0, 2), got {ndims}")
        outputs = [pt.dscalar(), pt.dvector(), pt.dscalar()]
        return Apply(self, inputs, outputs)

    def perform(self, node, inputs, output_storage):
        b, tt, n, alpha, beta, G = inputs
        try:
            if not (beta > 0 and np.all(alpha > 0)):  # precisions underflowed to 0
                raise linalg.LinAlgError("a precision is not positive")
            L = linalg.cholesky(beta * G + np.diag(alpha), lower=True, check_finite=False)
            Linv = linalg.solve_triangular(L, np.eye(len(alpha)), lower=True,
                                           check_finite=False)
            u = linalg.solve_triangular(L, beta * b, lower=True, check_finite=False)
            mu = linalg.solve_triangular(L, u, lower=True, trans=1, check_finite=False)
            logp, d_alpha, d_beta = _terms(tt, n, alpha, beta, L, Linv, u, mu)
        except linalg.LinAlgError:
            logp, d_alpha, d_beta = -np.inf, np.zeros_like(alpha), 0.0
        output_storage[0][0] = np.asarray(logp, dtype="float64")
        output_storage[1][0] = np.asarray(d_alpha, dtype="float64")
        output_storage[2][0] = np.asarray(d_beta, dtype="float64")

    def infer_shape(self, node, shapes):
        return [(), shapes[3], ()]

    def pullback(self, inputs, outputs, cotangents):
        g_logp, g_alpha, g_beta = cotangents
        data = [grad_undefined(self, i, x, "the data b, tt, n, G are not differentiated")
                for i, x in zip((0, 1, 2), inputs[:3], strict=True)]
        data_G = grad_undefined(self, 5, inputs[5], "the data G is not differentiated")
        if not (isinstance(g_alpha.type, DisconnectedType)
                and isinstance(g_beta.type, DisconnectedType)):
            return [*data, grad_not_implemented(self, 3, inputs[3],
                                                "second derivatives of the collapsed logp"),
                    grad_not_implemented(self, 4, inputs[4],
                                         "second derivatives of the collapsed logp"), data_G]
        return [*data, g_logp * outputs[1], g_logp * outputs[2], data_G]


collapsed_woodbury = CollapsedWoodbury()


def _implementation_version() -> int:
    """A number that changes with this module's source: PyTensor keys its on-disk numba
    cache on the Op's type and props plus this number, so a changed implementation is
    compiled again instead of loaded from an older version's cache."""
    return int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:15], 16)


@register_funcify_default_op_cache_key(CollapsedWoodbury)
def numba_funcify_CollapsedWoodbury(op, node=None, **kwargs):
    """The numba form of :meth:`CollapsedWoodbury.perform` (nutpie's backend)."""
    terms = numba_basic.numba_njit(_terms)
    lower_solve = numba_basic.numba_njit(_lower_solve)
    lower_transpose_solve = numba_basic.numba_njit(_lower_transpose_solve)
    lower_inverse = numba_basic.numba_njit(_lower_inverse)

    @numba_basic.numba_njit
    def collapsed_woodbury_numba(b, tt, n, alpha, beta, G):
        beta_ = beta[()]
        M = alpha.shape[0]
        if not (beta_ > 0.0 and np.all(alpha > 0.0)):  # underflowed precisions, as in perform
            return (np.array(-np.inf), np.zeros(M), np.array(0.0))
        H = beta_ * G
        for i in range(M):
            H[i, i] += alpha[i]
        try:
            L = np.linalg.cholesky(H)
        except Exception:  # not positive definite: a rejected step, as in perform
            return (np.array(-np.inf), np.zeros(M), np.array(0.0))
        u = lower_solve(L, beta_ * b)
        mu = lower_transpose_solve(L, u)
        logp, d_alpha, d_beta = terms(tt[()], n[()], alpha, beta_, L, lower_inverse(L), u, mu)
        return (np.array(logp), d_alpha, np.array(d_beta))

    return collapsed_woodbury_numba, IMPLEMENTATION_VERSION


IMPLEMENTATION_VERSION = _implementation_version()
