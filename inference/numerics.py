"""The linear algebra every method shares: Cholesky with jitter, the Gaussian weight posterior
(T01 eqs. 12-13), the log evidence (T01 eq. 15) from a design or from its sufficient
statistics, the BLAS-thread limit and small validators."""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import sys

import numpy as np
from scipy import linalg

from sparsebayes.models import NumericalWarning
from sparsebayes.models.exceptions import warn_user

__all__ = [
    "LOG_2PI",
    "cholesky",
    "weight_posterior",
    "gram_weight_posterior",
    "cholesky_inverse",
    "precision_factor",
    "lower_inverse",
    "log_evidence",
    "gram_log_evidence",
    "evidence_from_factor",
    "blas_threads",
    "one_blas_thread",
    "covariance_root",
    "gaussian_draws",
    "check_positive_int",
    "check_rows_out",
    "unknown_names",
    "warn_user",
    "show_progress",
    "loo_from_precision",
    "loo_from_covariance",
    "gaussian_loo_logpdf",
]

LOG_2PI = np.log(2 * np.pi)


def cholesky(H: np.ndarray) -> np.ndarray:
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
        warn_user(
            f"the posterior precision A + Phi^T B Phi was not numerically positive definite "
            f"(ill-conditioned or duplicate basis columns); added jitter {jitter:.2g}",
            NumericalWarning)
        return L
    raise linalg.LinAlgError("posterior precision is not positive definite even with jitter")


def lower_inverse(L: np.ndarray) -> np.ndarray:
    """``L^-1`` of a lower-triangular factor ``L`` (its upper triangle zero, as
    :func:`cholesky` returns it) or of a stack (..., M, M) of them: one matrix by LAPACK
    ``dtrtri``, a stack by SciPy's batched triangular solve against the identity. Products
    with ``L^-1`` are then matrix products, cheaper than a general solve per right-hand
    side."""
    if L.ndim > 2:
        return linalg.solve_triangular(L, np.broadcast_to(np.eye(L.shape[-1]), L.shape),
                                       lower=True, check_finite=False)
    if L.shape[0] == 0:  # the empty model
        return np.zeros((0, 0))
    Linv, info = linalg.lapack.dtrtri(L, lower=1)
    if info:
        raise linalg.LinAlgError(f"the Cholesky factor is singular (dtrtri info {info})")
    return Linv


def cholesky_inverse(L: np.ndarray) -> np.ndarray:
    """``H^-1 = L^-T L^-1`` from the lower Cholesky factor ``L`` of ``H`` by LAPACK
    ``dpotri`` (``L^-1``, then the product in one triangle: a third of the work of a
    general product), the upper triangle mirrored."""
    if L.shape[0] == 0:  # the empty model
        return np.zeros((0, 0))
    Hinv, info = linalg.lapack.dpotri(L, lower=1)
    if info:
        raise linalg.LinAlgError(f"the Cholesky factor is singular (dpotri info {info})")
    Hinv = np.tril(Hinv)
    Hinv += np.tril(Hinv, -1).T
    return Hinv


def precision_factor(G: np.ndarray, alpha: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """The lower Cholesky factor of the weight posterior's precision ``Sigma^-1 = beta G +
    A`` (T01 eq. 12; ``G = Phi^T B Phi`` with ``beta = 1`` for per-point precisions ``B``)."""
    H = beta * G
    H[np.diag_indices_from(H)] += alpha
    return cholesky(H)


def gram_weight_posterior(G: np.ndarray, Phit: np.ndarray, alpha: np.ndarray, beta: float
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T01 eqs. (12)-(13) from the Gram matrix ``G = Phi^T Phi`` and ``Phit = Phi^T t``:
    ``Sigma = (beta G + A)^-1``, ``mu = beta Sigma Phi^T t``. Returns ``mu``, ``Sigma`` and
    the Cholesky factor ``L`` of ``Sigma^-1``."""
    L = precision_factor(G, alpha, beta)
    Sigma = cholesky_inverse(L)
    mu = beta * (Sigma @ Phit)
    return mu, Sigma, L


def weight_posterior(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, beta: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T01 eqs. (12)-(13) from the design ``Phi``; see :func:`gram_weight_posterior`."""
    return gram_weight_posterior(Phi.T @ Phi, Phi.T @ t, alpha, beta)


def evidence_from_factor(n: int, beta: float, alpha: np.ndarray, L: np.ndarray, rss: float,
                         mu: np.ndarray) -> float:
    """T01 eq. (15) assembled as in App. A (eqs. 36-41) from the Cholesky factor ``L`` of
    ``Sigma^-1 = A + beta Phi^T Phi``, the residual ``rss = ||t - Phi mu||^2`` and ``mu``."""
    return 0.5 * (n * np.log(beta) + np.sum(np.log(alpha)) - 2 * np.sum(np.log(np.diag(L)))
                  - beta * rss - mu @ (alpha * mu) - n * LOG_2PI)


def gram_log_evidence(G: np.ndarray, Phit: np.ndarray, tt: float, n: int, alpha: np.ndarray,
                      beta: float) -> float:
    """T01 eq. (15), ``ln N(t | 0, beta^-1 I + Phi A^-1 Phi^T)``, from the sufficient
    statistics ``G = Phi^T Phi``, ``Phit = Phi^T t``, ``tt = t^T t`` and ``n`` in the O(M^3)
    Cholesky form of T01 App. A (eqs. 36-41): the residual ``||t - Phi mu||^2`` is
    ``tt - 2 mu^T Phit + mu^T G mu``."""
    alpha = np.asarray(alpha, dtype=float)
    if alpha.size == 0:
        return 0.5 * (n * np.log(beta) - beta * tt - n * LOG_2PI)
    mu, _, L = gram_weight_posterior(G, Phit, alpha, beta)
    return evidence_from_factor(n, beta, alpha, L, max(tt - 2 * mu @ Phit + mu @ G @ mu, 0.0),
                                mu)


def log_evidence(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, beta: float) -> float:
    """T01 eq. (15) from the design (App. A eqs. 36-41), the residual formed directly
    (no cancellation), without the N x N covariance."""
    t = np.asarray(t, dtype=float)
    N = t.size
    alpha = np.asarray(alpha, dtype=float)
    if alpha.size == 0:
        return 0.5 * (N * np.log(beta) - beta * (t @ t) - N * LOG_2PI)
    mu, _, L = weight_posterior(Phi, t, alpha, beta)
    r = t - Phi @ mu
    return evidence_from_factor(N, beta, alpha, L, float(r @ r), mu)


@functools.cache
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads(limit: int | None):
    """Context limiting BLAS to ``limit`` threads (``None``: no limit), through
    threadpoolctl."""
    if limit is None:
        return contextlib.nullcontext()
    try:
        return _blas_controller().limit(limits=limit, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()


def one_blas_thread():
    """Context limiting BLAS to one thread: on busy cores multithreaded OpenBLAS is slower,
    not faster, on the mid-sized products of these fits (``benchmarks/results``)."""
    return blas_threads(1)


def check_positive_int(name: str, value, allow_zero: bool = False) -> int:
    """``value`` as an int > 0 (>= 0 with ``allow_zero``), else a ``ValueError`` naming it."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        kind = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


def check_iterations(max_iter, tol, alpha_min=None, *, tol_optional: bool = False) -> None:
    """``ValueError`` naming the option for an iterative fit's bad ``max_iter`` (a positive
    integer), ``tol`` (> 0; None too where ``tol_optional``) or ``alpha_min`` (a number in
    [0, 1); not checked when None)."""
    check_positive_int("max_iter", max_iter)
    number = (int, float, np.integer, np.floating)
    if not (tol is None and tol_optional) and not (
            isinstance(tol, number) and not isinstance(tol, bool) and tol > 0):
        raise ValueError(f"tol must be > 0{' or None' if tol_optional else ''}, got {tol!r}")
    if alpha_min is not None and not (np.isscalar(alpha_min) and 0 <= alpha_min < 1):
        raise ValueError(f"alpha_min must be a number in [0, 1), got {alpha_min!r}")


def unknown_names(what: str, names, valid, where: str) -> str:
    """The message for names that are not among ``valid``, with the closest valid name of
    each (difflib): "unknown option 'draw' for rvm/nuts; did you mean 'draws'? (valid: ...)"."""
    names, valid = sorted(map(str, names)), sorted(map(str, valid))
    head = f"unknown {what} {names[0]!r}" if len(names) == 1 else f"unknown {what}s {names}"
    hints = []
    lower = {v.lower(): v for v in valid}
    for name in names:
        close = difflib.get_close_matches(name.lower(), list(lower), n=1)
        if close:
            hints.append(f"did you mean {lower[close[0]]!r}"
                         + (f" for {name!r}" if len(names) > 1 else ""))
    hint = f"; {', '.join(hints)}?" if hints else ""
    return f"{head} for {where}{hint} (valid: {', '.join(valid) or 'none'})"


def covariance_root(cov: np.ndarray) -> np.ndarray:
    """A square root ``R`` of each covariance in ``cov`` (..., n, n), ``R R^T = cov``, from
    its eigendecomposition (negative rounding-error eigenvalues clipped to 0), so singular
    covariances (nearly pruned weights, a Laplace covariance of rank < n) are fine."""
    vals, vecs = np.linalg.eigh(0.5 * (cov + np.swapaxes(cov, -1, -2)))
    return vecs * np.sqrt(np.clip(vals, 0.0, None))[..., None, :]


def gaussian_draws(mean: np.ndarray, cov: np.ndarray, shape: int | tuple[int, ...],
                   rng: np.random.Generator) -> np.ndarray:
    """Draws of ``N(mean, cov)`` with leading ``shape``: ``(*shape, n)``, through
    :func:`covariance_root`."""
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    return mean + rng.standard_normal((*shape, mean.size)) @ covariance_root(cov).T


def show_progress(progressbar: bool | None) -> bool:
    """Whether to show the sampler's / optimiser's progress bar: ``progressbar`` when given,
    else (``None``) on in an interactive session (a terminal or Jupyter) and off under CI
    (environment variable ``CI`` set) or when the output is not a terminal (a log file, a
    study's worker)."""
    if progressbar is not None:
        if not isinstance(progressbar, bool | np.bool_):
            raise TypeError(f"progressbar must be True, False or None (automatic), got "
                            f"{progressbar!r}")
        return bool(progressbar)
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        return False
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    if type(shell).__name__ == "ZMQInteractiveShell":  # Jupyter
        return True
    return sys.stderr.isatty()


def check_rows_out(out, n: int, min_kept: int = 1) -> np.ndarray:
    """The rows ``out`` a refit leaves out, as distinct ints in ``[0, n)`` that keep at least
    ``min_kept`` of the ``n`` rows; else a ``ValueError`` naming ``out``."""
    rows = np.asarray(out)
    if rows.ndim != 1 or rows.size == 0 or rows.dtype.kind not in "iu":
        raise ValueError(f"out must be a non-empty 1-D integer array of rows, got {out!r}")
    if rows.min() < 0 or rows.max() >= n or np.unique(rows).size != rows.size:
        raise ValueError(f"out must hold distinct rows in [0, {n}), got {out!r}")
    if n - rows.size < min_kept:
        raise ValueError(f"out leaves {n - rows.size} of {n} rows: a refit needs "
                         f"{min_kept} or more")
    return rows.astype(int)


LOO_BLOCK_FLOATS = 250_000  # floats of a batched array per block of draws (2 MB: in cache)


def loo_from_precision(c_diag: np.ndarray, c_t: np.ndarray) -> np.ndarray:
    """GPML eq. 5.12: ``log N(t_n | mu_n, 1 / c_nn)`` with ``c_nn = [C^-1]_nn`` and
    ``t_n - mu_n = [C^-1 t]_n / c_nn``."""
    return 0.5 * (np.log(c_diag) - LOG_2PI) - 0.5 * c_t**2 / c_diag


def loo_from_covariance(C: np.ndarray, t: np.ndarray) -> np.ndarray:
    """GPML eq. 5.12 for a batch of covariances ``C`` (S, N, N) of ``t``: with ``C = L L^T``,
    ``[C^-1]_nn = sum_k (L^-1)_kn^2`` and ``C^-1 t = L^-T L^-1 t``."""
    Linv = lower_inverse(np.linalg.cholesky(C))
    return loo_from_precision(np.einsum("skn,skn->sn", Linv, Linv),
                               np.einsum("skn,sk->sn", Linv, Linv @ t))


def gaussian_loo_logpdf(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray,
                        beta: np.ndarray) -> np.ndarray:
    """``log p(t_n | t_-n, alpha_s, beta_s)`` (S, N) of the RVM with ``w`` integrated out,
    for draws ``alpha`` (S, M) and ``beta`` (S,): GPML eqs. 5.10-5.12 with ``C = beta^-1 I +
    Phi A^-1 Phi^T`` (T01 eq. 15).

    ``M >= N``: from the Cholesky factor of ``C``. ``M < N``: through the weight posterior
    (Woodbury), ``C^-1 = beta I - beta^2 Phi Sigma Phi^T`` with ``Sigma = (A + beta Phi^T
    Phi)^-1`` (T01 eq. 13), so ``C^-1 t = beta (t - Phi mu)`` and ``[C^-1]_nn = beta (1 -
    beta phi_n^T Sigma phi_n)``; ``Sigma^-1`` is factorised at unit diagonal. Cost
    O(S (M^3 + N M^2))."""
    Phi = np.asarray(Phi, dtype=float)
    t = np.asarray(t, dtype=float)
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    S, M = alpha.shape
    N = t.size
    beta = np.broadcast_to(np.asarray(beta, dtype=float).reshape(-1), (S,))
    out = np.empty((S, N))
    step = max(1, LOO_BLOCK_FLOATS // (min(N, M) * max(M, N)))
    with one_blas_thread():
        if M >= N:
            for lo in range(0, S, step):
                a, b = alpha[lo:lo + step], beta[lo:lo + step]
                C = np.einsum("nm,sm,km->snk", Phi, 1.0 / a, Phi)
                C[:, np.arange(N), np.arange(N)] += 1.0 / b[:, None]
                out[lo:lo + step] = loo_from_covariance(C, t)
            return out
        G, Pt = Phi.T @ Phi, Phi.T @ t
        for lo in range(0, S, step):
            a, b = alpha[lo:lo + step], beta[lo:lo + step]
            H = b[:, None, None] * G
            H[:, np.arange(M), np.arange(M)] += a
            d = np.sqrt(np.einsum("smm->sm", H))
            Linv = lower_inverse(np.linalg.cholesky(H / (d[:, :, None] * d[:, None, :])))
            V = Linv @ (Phi.T[None] / d[:, :, None])  # ||V_n||^2 = phi_n' Sigma phi_n
            u = Linv @ (b[:, None] * Pt / d)[..., None]
            mu = (np.swapaxes(Linv, 1, 2) @ u)[..., 0] / d
            q = np.maximum(1.0 - b[:, None] * np.einsum("smn,smn->sn", V, V),
                           np.finfo(float).tiny)
            out[lo:lo + step] = loo_from_precision(b[:, None] * q,
                                                    b[:, None] * (t - mu @ Phi.T))
    return out
