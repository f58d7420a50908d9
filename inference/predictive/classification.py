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
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import log_expit, log_softmax, logsumexp

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
]


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
    by ``kappa(Var(f_k - f_j))`` and the result renormalised. Accuracy against quadrature
    (tests/test_class_predictive.py): for K = 3 and pairwise variances up to 4, within 0.06
    (0.007 on average) of the exact ``E[softmax(f)]``; it grows with the variance (~0.14 at
    variances of 25 or more), so ``kind="samples"`` is the reference far from the data.
    """
    d = np.einsum("nkk->nk", P)
    V = d[:, :, None] + d[:, None, :] - 2 * P
    Amat = (M[:, :, None] - M[:, None, :]) * _kappa(V)
    logp = -logsumexp(-Amat, axis=2)
    return logp - logsumexp(logp, axis=1, keepdims=True)


def _classes(post: xr.DataTree) -> np.ndarray:
    return np.asarray(json.loads(post.attrs["classes"]))


def _design(post: xr.DataTree, X_new) -> np.ndarray:
    if post.attrs.get("problem_kind") != "classification":
        raise TypeError("this predictive is for a classification posterior")
    return design(post, X_new)


def _binary_columns(log_p1: np.ndarray, log_p0: np.ndarray) -> np.ndarray:
    return np.column_stack([log_p0, log_p1])


def moderated_log_proba(Phi: np.ndarray, mu: np.ndarray, Sigma: np.ndarray) -> np.ndarray:
    """Moderated log class probabilities (n, K) at the design rows ``Phi`` (n, M) for the
    Gaussian weight posterior ``N(mu, Sigma)``: binary (``mu`` (M,), ``Sigma`` (M, M)) by
    :func:`moderated_bernoulli`, softmax (``mu`` (M, K), ``Sigma`` (M, K, M, K)) by
    :func:`moderated_softmax`."""
    if mu.ndim == 1:
        m, s2 = Phi @ mu, np.einsum("ij,jk,ik->i", Phi, Sigma, Phi)
        return _binary_columns(moderated_bernoulli(m, s2), moderated_bernoulli(-m, s2))
    return moderated_softmax(Phi @ mu, np.einsum("ni,ikjl,nj->nkl", Phi, Sigma, Phi))


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
