"""Predictive class probabilities: one object (:class:`ClassPredictive`) with ``proba``
(n, K; columns in ``classes`` order), ``label`` and ``logpdf(y)``.

Kinds (``predict(post, X, kind=...)``):

* ``"moderated"`` (default) — integrates the logits over their Gaussian (Laplace) posterior.
  Binary: MacKay's moderated output, the probit approximation of the logistic-Gaussian
  integral, ``p = sigma(kappa(s^2) m)`` with ``kappa(s^2) = (1 + pi s^2 / 8)^-1/2``
  (MacKay 1992; PRML 4.153-4.155). Softmax: the same approximation applied to every pairwise
  logit difference, ``p_k ~ 1 / (1 + sum_{j != k} exp(-kappa(v_kj) (m_k - m_j)))`` with
  ``v_kj = Var(f_k - f_j)``, renormalised to sum to 1 (the "pairwise probit" form of
  ``softmax_k = 1 / sum_j exp(f_j - f_k)``; exact for K = 2, where it is MacKay's formula).
* ``"plugin"`` — ``sigma(m)`` / ``softmax(m)`` at the posterior mean weights.
* ``"samples"`` — average of the class probabilities over the posterior draws of ``w``
  (any method: VI, MCMC, or the Laplace draws of an evidence fit).

Likelihood: T01 eq. 23 (Bernoulli-logistic) for two classes, the softmax of T01 eq. 28
otherwise. The maths are pure functions of the design rows ``Phi`` and the posterior's
arrays (:func:`moderated_log_proba`, :func:`plugin_log_proba`, :func:`samples_log_proba`);
the ``predict_*`` functions are thin wrappers reading them from a DataTree.

Leave-one-out at the fitted hyperparameters: :func:`cavity_logpdf`, the Laplace cavity LOO of
Vehtari, Mononen, Tolvanen, Sivula & Winther (2016) for a Gaussian weight posterior
(:func:`laplace_cavity` removes a point's site, :func:`expected_likelihood_logpdf`
integrates its likelihood over the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import expit, log_expit, log_softmax, logsumexp, ndtri, softmax
from scipy.stats import qmc

from sparsebayes.models import NumericalWarning, RVMClassification
from sparsebayes.models.likelihoods import pair_logits

from ..numerics import warn_user
from ..results import flat_draws
from .regression import design

__all__ = [
    "ClassPredictive",
    "moderated_bernoulli",
    "moderated_softmax",
    "moderated_log_proba",
    "plugin_log_proba",
    "samples_log_proba",
    "predict_moderated",
    "predict_plugin",
    "predict_samples",
    "logit_moments",
    "pair_logit_moments",
    "moderated_from_moments",
    "laplace_cavity",
    "expected_likelihood_logpdf",
    "laplace_sites",
    "bound_sites",
    "cavity_logpdf",
    "GH_POINTS",
    "QMC_POINTS",
]

GH_POINTS = 256  # Gauss-Hermite nodes of the binary cavity integral
QMC_POINTS = 4096  # scrambled Sobol points of the softmax cavity integral (a power of 2)
QMC_SEED = 20160103  # its fixed seed: the estimate is deterministic
_QMC_BLOCK = 4_000_000  # logits held at once by the softmax cavity integral


@dataclass(frozen=True, eq=False)
class ClassPredictive:
    """Predictive class probabilities at ``n`` inputs over the ``K`` classes."""

    log_proba: np.ndarray
    classes: np.ndarray
    kind: str = "moderated"

    @property
    def proba(self) -> np.ndarray:
        """(n, K) probabilities, columns in ``classes`` order; rows sum to 1."""
        return np.exp(self.log_proba)

    @property
    def label(self) -> np.ndarray:
        """The most probable class at each input."""
        return self.classes[np.argmax(self.log_proba, axis=1)]

    def codes(self, y) -> np.ndarray:
        """Column index in ``classes`` of each label of ``y``."""
        y = np.asarray(y)
        if y.ndim == 2 and 1 in y.shape:
            y = y.reshape(-1)
        if y.ndim != 1 or y.shape[0] != self.log_proba.shape[0]:
            raise ValueError(f"y must be 1-D with {self.log_proba.shape[0]} labels, got shape "
                             f"{y.shape}")
        classes = self.classes
        if classes.dtype.kind in "US":
            y = y.astype(str)
        elif y.dtype.kind == "f" and np.any(y != np.round(y)):
            raise ValueError("y holds non-integer floats: class labels must be discrete")
        hit = y[:, None] == classes[None, :]
        if not hit.any(axis=1).all():
            bad = np.unique(y[~hit.any(axis=1)])
            raise ValueError(f"y has labels {bad.tolist()} not among the classes "
                             f"{classes.tolist()}")
        return np.argmax(hit, axis=1)

    def logpdf(self, y) -> np.ndarray:
        """Log predictive probability of each given label."""
        return self.log_proba[np.arange(self.log_proba.shape[0]), self.codes(y)]

    def __repr__(self) -> str:
        return (f"ClassPredictive(kind={self.kind!r}, n={self.log_proba.shape[0]}, "
                f"classes={self.classes.tolist()})")


def _kappa(var: np.ndarray) -> np.ndarray:
    """MacKay's ``kappa(s^2) = (1 + pi s^2 / 8)^-1/2`` (PRML 4.154)."""
    return 1.0 / np.sqrt(1.0 + np.pi * np.maximum(var, 0.0) / 8.0)


def moderated_bernoulli(m: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """``ln int sigma(a) N(a | m, s2) da ~ ln sigma(kappa(s2) m)`` (PRML 4.155)."""
    return log_expit(_kappa(s2) * m)


def moderated_softmax(M: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Log of the pairwise-probit approximation of ``E[softmax(f)]``, ``f ~ N(M_n, P_n)``.

    ``M`` (n, K) logit means, ``P`` (n, K, K) logit covariances. Each
    ``softmax_k = 1 / sum_j exp(-(f_k - f_j))``; every difference ``f_k - f_j`` is moderated
    by ``kappa(Var(f_k - f_j))`` and the result renormalised. Its error against quadrature
    grows with the variance (tests/inference/predictive/test_class_predictive.py), so
    ``kind="samples"`` is the reference far from the data.
    """
    d = np.einsum("nkk->nk", P)
    V = d[:, :, None] + d[:, None, :] - 2 * P
    Amat = (M[:, :, None] - M[:, None, :]) * _kappa(V)
    logp = -logsumexp(-Amat, axis=2)
    return logp - logsumexp(logp, axis=1, keepdims=True)


def _classes(post: xr.DataTree) -> np.ndarray:
    return np.asarray(post.attrs["classes"])


def _design(post: xr.DataTree, X_new) -> np.ndarray:
    if post.attrs.get("problem_kind") != RVMClassification.kind:
        raise TypeError("this predictive is for a classification posterior")
    return design(post, X_new)


def _binary_columns(log_p1: np.ndarray, log_p0: np.ndarray) -> np.ndarray:
    return np.column_stack([log_p0, log_p1])


def moderated_log_proba(Phi: np.ndarray, mu: np.ndarray, Sigma: np.ndarray) -> np.ndarray:
    """Moderated log class probabilities (n, K) at the design rows ``Phi`` (n, M) for the
    Gaussian weight posterior ``N(mu, Sigma)``: binary (``mu`` (M,), ``Sigma`` (M, M)) by
    :func:`moderated_bernoulli`, softmax (``mu`` (M, K), ``Sigma`` (M, K, M, K)) by
    :func:`moderated_softmax`."""
    return moderated_from_moments(*logit_moments(Phi, mu, Sigma))


def logit_moments(Phi: np.ndarray, mu: np.ndarray, Sigma: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Mean (n, K) and covariance (n, K, K) of the logits ``f_n`` at the design rows ``Phi``
    under the Gaussian weight posterior ``N(mu, Sigma)`` in the layout of
    :func:`moderated_log_proba` (binary: K = 1, the logit of the second class)."""
    if mu.ndim == 1:
        return (Phi @ mu)[:, None], np.einsum("ij,jk,ik->i", Phi, Sigma, Phi)[:, None, None]
    return Phi @ mu, np.einsum("ni,ikjl,nj->nkl", Phi, Sigma, Phi)


def pair_logit_moments(Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray,
                       Sigma: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`logit_moments` for weights held as (basis, class) pairs: ``theta`` (P,),
    ``Sigma`` (P, P) over the columns ``Phi_act`` (n, P) of classes ``cls``; ``K`` logits
    (1 for the Bernoulli model): ``f_n = J_n w`` with ``J_n[k, j] = Phi_act[n, j] [cls_j = k]``,
    mean ``J_n theta`` and covariance ``J_n Sigma J_n^T``."""
    J = Phi_act[:, None, :] * (cls[None, None, :] == np.arange(K)[None, :, None])
    return pair_logits(Phi_act, cls, theta, K), np.einsum("nkp,pq,nlq->nkl", J, Sigma, J)


def moderated_from_moments(m: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Moderated log class probabilities (n, classes) from the logits' moments of
    :func:`logit_moments`: :func:`moderated_bernoulli` (K = 1) or :func:`moderated_softmax`."""
    if m.shape[1] == 1:
        s2 = V[:, 0, 0]
        return _binary_columns(moderated_bernoulli(m[:, 0], s2), moderated_bernoulli(-m[:, 0], s2))
    return moderated_softmax(m, V)


def plugin_log_proba(Phi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``log sigma`` / ``log softmax`` of the logits ``Phi w`` at fixed weights ``w``."""
    M = Phi @ w
    if M.ndim == 1:
        return _binary_columns(log_expit(M), log_expit(-M))
    return log_softmax(M, axis=1)


def samples_log_proba(Phi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``log mean_s p(t | Phi w_s)`` over draws ``w`` (S, M) or (S, M, K)."""
    S = w.shape[0]
    if w.ndim == 2:
        f = w @ Phi.T  # (S, n)
        return _binary_columns(logsumexp(log_expit(f), axis=0) - np.log(S),
                               logsumexp(log_expit(-f), axis=0) - np.log(S))
    F = np.einsum("ni,sik->snk", Phi, w)
    return logsumexp(log_softmax(F, axis=2), axis=0) - np.log(S)


def predict_moderated(post: xr.DataTree, X_new) -> ClassPredictive:
    """Moderated class probabilities (see the module docstring)."""
    Phi = _design(post, X_new)
    if "gaussian_posterior" not in post.children:
        raise ValueError(
            f"this kind needs a Gaussian weight posterior (evidence); this "
            f"{post.attrs.get('method')!r} posterior has draws: use kind='samples'")
    g = post["gaussian_posterior"]
    return ClassPredictive(moderated_log_proba(Phi, g["mu"].values, g["Sigma"].values),
                           _classes(post), "moderated")


def predict_plugin(post: xr.DataTree, X_new) -> ClassPredictive:
    """Plug-in probabilities at the posterior mean of ``w`` (ignores its uncertainty)."""
    Phi = _design(post, X_new)
    if "gaussian_posterior" in post.children:
        mu = post["gaussian_posterior"]["mu"].values
    else:
        mu = post["posterior"]["w"].mean(("chain", "draw")).values
    return ClassPredictive(plugin_log_proba(Phi, mu), _classes(post), "plugin")


def predict_samples(post: xr.DataTree, X_new, max_draws: int = 2000) -> ClassPredictive:
    """Class probabilities averaged over (at most ``max_draws``, evenly thinned) posterior
    draws of ``w``: ``p = mean_s p(t | f(x; w_s))``."""
    Phi = _design(post, X_new)
    w = flat_draws(post, "w")
    if w.shape[0] > max_draws:
        w = w[np.linspace(0, w.shape[0] - 1, max_draws).astype(int)]
    return ClassPredictive(samples_log_proba(Phi, w), _classes(post), "samples")


# --------------------------------------------------------------------------------------------
# Laplace leave-one-out: the cavity of each point (Vehtari et al. 2016, LA-LOO)
# --------------------------------------------------------------------------------------------


def laplace_cavity(m: np.ndarray, V: np.ndarray, W: np.ndarray, g: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The Laplace cavity of each point (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016,
    LA-LOO; GPML §3.4 for one logit): the marginal ``N(m_n, V_n)`` of the logits ``f_n``
    (K-variate) under the Laplace posterior, whose site for point n is the second-order
    expansion of ``ln p(y_n | f)`` at the mode ``m_n``: precision ``W_n`` (minus the Hessian)
    and natural mean ``W_n m_n + g_n`` (``g_n`` the gradient). Removing it leaves the
    precision ``V_n^-1 - W_n`` and the natural mean ``V_n^-1 m_n - W_n m_n - g_n``, i.e.

    ``C_n = (V_n^-1 - W_n)^-1 = (I - V_n W_n)^-1 V_n`` and ``c_n = m_n - C_n g_n``

    (the second form needs no ``V_n^-1``: a class without weights has a singular ``V_n``).

    ``m``, ``g`` (n, K); ``V``, ``W`` (n, K, K). Returns ``(c, C)``. For a Gaussian likelihood
    the site is exact and so is the cavity: ``N(c_n, C_n)`` is ``p(f_n | y_-n)``. ``C_n`` is
    positive definite when ``V`` is the Laplace covariance (``Sigma^-1 = A + sum_n J_n^T W_n
    J_n`` with ``A > 0`` gives ``W_n^1/2 V_n W_n^1/2 < I``); if it is not, a
    ``NumericalWarning`` says so and the negative directions are set to zero variance."""
    K = m.shape[1]
    if K == 1:  # v / (1 - v w)
        v, w = V[:, 0, 0], W[:, 0, 0]
        denom = 1.0 - v * w
        bad = ~(denom > 1e-12)
        if bad.any():
            _warn_cavity(int(bad.sum()))
        C = (v / np.where(bad, 1e-12, denom))[:, None, None]
        return m - C[:, :, 0] * g, C
    IVW = np.eye(K) - V @ W
    C = np.linalg.solve(IVW, V)
    C = 0.5 * (C + np.swapaxes(C, 1, 2))
    c = m - np.einsum("nkl,nl->nk", C, g)
    lam = np.linalg.eigvalsh(C)
    scale = np.maximum(np.abs(lam).max(axis=1), np.finfo(float).tiny)
    bad = lam.min(axis=1) < -1e-9 * scale
    if bad.any():
        _warn_cavity(int(bad.sum()))
    return c, C


def _warn_cavity(n_bad: int) -> None:
    warn_user(f"{n_bad} Laplace cavities are not positive definite: the covariance is not "
              "the Laplace covariance at the mode (a fit that did not converge?); their "
              "precision was floored (binary) or negative variances clipped (softmax)",
              NumericalWarning)


def expected_likelihood_logpdf(c: np.ndarray, C: np.ndarray, t: np.ndarray, *,
                               n_points: int | None = None) -> np.ndarray:
    """``ln int p(t_n | f) N(f | c_n, C_n) df`` (n,) for the class codes ``t`` (binary:
    0 / 1 for ``f`` the logit of class 1, ``c`` (n, 1); softmax: 0..K-1, T01 eq. 28).

    Binary: Gauss-Hermite quadrature with ``n_points`` nodes (default :data:`GH_POINTS`);
    the logistic's unit-width step makes it converge slowly in the variance, so the default
    number of nodes is set for the large variances Laplace cavities of evidence fits reach
    (its error against adaptive quadrature is checked in the tests).

    Softmax: randomised quasi-Monte Carlo, ``n_points`` (default :data:`QMC_POINTS`)
    scrambled Sobol points with the fixed seed ``QMC_SEED`` mapped to ``N(0, I)`` by the
    inverse normal CDF and to ``N(c_n, C_n)`` by ``C_n^1/2`` (eigendecomposition; PSD ``C_n``
    allowed), the same points for every row: deterministic (checked against a tensor
    Gauss-Hermite rule in the tests)."""
    t = np.asarray(t, dtype=int)
    K = c.shape[1]
    if n_points is not None and (isinstance(n_points, bool) or not isinstance(
            n_points, int | np.integer) or n_points < 2 or (K > 1 and n_points & (n_points - 1))):
        raise ValueError(f"n_points must be an integer >= 2 (a power of 2 for the softmax), got "
                         f"{n_points!r}")
    if K == 1:
        n = GH_POINTS if n_points is None else int(n_points)
        x, wq = np.polynomial.hermite.hermgauss(n)
        f = c[:, :1] + np.sqrt(2.0 * np.maximum(C[:, 0, :1], 0.0)) * x[None, :]
        sign = (2 * t - 1)[:, None]
        return logsumexp(log_expit(sign * f), b=wq[None, :] / np.sqrt(np.pi), axis=1)
    n = QMC_POINTS if n_points is None else int(n_points)
    z = ndtri(qmc.Sobol(K, scramble=True, seed=QMC_SEED).random(n))  # (S, K)
    lam, U = np.linalg.eigh(C)
    R = U * np.sqrt(np.maximum(lam, 0.0))[:, None, :]  # C = R R^T
    out = np.empty(c.shape[0])
    step = max(1, _QMC_BLOCK // (n * K))
    for a in range(0, c.shape[0], step):
        F = c[a:a + step, :, None] + R[a:a + step] @ z.T  # (b, K, S)
        top = F.max(axis=1)
        ll = (F[np.arange(F.shape[0]), t[a:a + step]] - top
              - np.log(np.exp(F - top[:, None, :]).sum(axis=1)))  # ln softmax_t (T01 eq. 28)
        out[a:a + step] = logsumexp(ll, axis=1) - np.log(n)
    return out


def laplace_sites(m: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Laplace sites at the mode (logits ``m`` (n, K), class codes ``t``): ``W_n`` minus
    the Hessian and ``g_n`` the gradient of ``ln p(t_n | f)`` there (T01 eq. 25): Bernoulli
    (K = 1) ``W = y (1 - y)``, ``g = t - y``; softmax ``W = diag(y) - y y^T``, ``g = e_t - y``."""
    t = np.asarray(t, dtype=int)
    if m.shape[1] == 1:
        y = expit(m)
        return (y * expit(-m))[:, :, None], t[:, None] - y
    y = softmax(m, axis=1)
    W = -y[:, :, None] * y[:, None, :]
    W[:, np.arange(m.shape[1]), np.arange(m.shape[1])] += y
    return W, np.eye(m.shape[1])[t] - y


def bound_sites(m: np.ndarray, V: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sites of a converged variational RVM classifier (Bishop & Tipping 2000): its
    ``q(w)`` is the prior times one Gaussian site per point, the quadratic bound on ``ln p(t_n
    | f)`` at the point's variational parameters, which at convergence are functions of the
    logits' moments. Binary, Jaakkola & Jordan (1997): ``xi_n^2 = m_n^2 + v_n`` (PRML
    10.163), precision ``W = 2 lambda(xi)``, ``lambda(xi) = tanh(xi/2) / (4 xi)``, natural mean
    ``t - 1/2``. Softmax, Böhning (1992): ``psi_n = m_n``, precision ``(I - 1 1^T / K) / 2``,
    natural mean ``e_t - softmax(psi) + W psi``. Returned as :func:`laplace_sites` returns
    them: ``(W, g)`` with ``g`` the natural mean minus ``W m``."""
    t = np.asarray(t, dtype=int)
    n, K = m.shape
    if K == 1:
        xi = np.sqrt(m[:, 0] ** 2 + np.maximum(V[:, 0, 0], 0.0))
        small = xi < 1e-4
        safe = np.where(small, 1.0, xi)
        w = np.where(small, 0.25 - xi**2 / 48, np.tanh(safe / 2) / (2 * safe))
        return w[:, None, None], (t - 0.5 - w * m[:, 0])[:, None]
    W = np.broadcast_to(0.5 * (np.eye(K) - 1.0 / K), (n, K, K))
    return W, np.eye(K)[t] - softmax(m, axis=1)


SITES = ("laplace", "bound")


def cavity_logpdf(Phi: np.ndarray, t: np.ndarray, mu: np.ndarray, Sigma: np.ndarray, *,
                  sites: str = "laplace", n_points: int | None = None) -> np.ndarray:
    """Leave-one-out ``ln p(t_n | t_-n) ~ ln int p(t_n | f) N(f | cavity_n) df`` (n,) at the
    hyperparameters fitted to all points (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016,
    LA-LOO) for an RVM classifier with the Gaussian weight posterior ``N(mu, Sigma)``: the
    logits' marginal at each training row (:func:`logit_moments`), the site of the point
    (``sites="laplace"``: the likelihood's expansion at the mode, :func:`laplace_sites`, for a
    Laplace posterior, T01 eqs. 24-26; ``"bound"``: the Jaakkola-Jordan / Böhning bound of a
    variational ``q(w)``, :func:`bound_sites`), the cavity without it
    (:func:`laplace_cavity`) and the likelihood integrated over the cavity
    (:func:`expected_likelihood_logpdf`).

    ``Phi`` (N, M): the design rows of the training inputs; ``t`` their class codes; ``mu``,
    ``Sigma`` in the layout of :func:`moderated_log_proba` (a result's
    ``gaussian_posterior``). Nothing is refitted: alpha and the pruning stay those fitted to
    all N points, so the estimate is optimistic for them; and the cavity is a second-order
    (Laplace) or bound-based (variational) approximation of removing the point."""
    if sites not in SITES:
        raise ValueError(f"sites must be one of {SITES}, got {sites!r}")
    t = np.asarray(t, dtype=int)
    m, V = logit_moments(Phi, mu, Sigma)
    W, g = laplace_sites(m, t) if sites == "laplace" else bound_sites(m, V, t)
    return expected_likelihood_logpdf(*laplace_cavity(m, V, W, g), t, n_points=n_points)
