"""Predictive distributions for regression: objects with ``mean``, ``var``, ``logpdf(y)``
and ``interval(p)``, so every metric works on every method.

* :class:`Predictive` — independent Gaussians (T01 eqs. 21-22, RVM* RQ05 eqs. 6-7, GP at
  point hyperparameters).
* :class:`MixturePredictive` — an equal-weight Gaussian mixture per test point, the exact
  predictive of a sample-based posterior (VI, MCMC, or hyperparameter draws).

Kinds (``predict(post, X_new, kind=...)`` on a regression posterior): ``"rvm"``
(:func:`predict_rvm`), ``"rvm*"`` (:func:`predict_rvm_star`, Rasmussen & Quiñonero-Candela
2005 = RQ05), ``"samples"`` (:func:`predict_samples`).

The maths are pure functions of the design rows ``Phi`` (the basis functions at the test
inputs) and the posterior's arrays (:func:`gaussian_predictive`, :func:`samples_predictive`,
:func:`rvm_star_moments`); the ``predict_*`` functions are thin wrappers that read those
arrays from a DataTree (:func:`design` builds ``Phi`` from the basis it stores).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy import special, stats

from sparsebayes.models import RVMRegression
from sparsebayes.models.checks import check_inputs, check_targets

from ..numerics import one_blas_thread, weight_posterior
from ..results import basis_from_posterior, flat_draws

__all__ = [
    "Predictive",
    "MixturePredictive",
    "predict_rvm",
    "predict_rvm_star",
    "predict_samples",
    "rvm_star_moments",
    "gaussian_predictive",
    "samples_predictive",
    "design",
    "check_new_inputs",
]


@dataclass(frozen=True, eq=False)
class Predictive:
    """Independent Gaussian predictive ``N(mean_i, var_i)`` at each test input."""

    mean: np.ndarray
    var: np.ndarray
    kind: str = "rvm"

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def logpdf(self, y) -> np.ndarray:
        """Pointwise log predictive density of ``y``."""
        y = check_targets(y, self.mean.shape[0], name="y")
        return stats.norm.logpdf(y, self.mean, self.std)

    def interval(self, p: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Central interval holding probability ``p``."""
        if not 0 < p < 1:
            raise ValueError(f"p must lie in (0, 1), got {p!r}")
        z = stats.norm.ppf(0.5 + p / 2)
        return self.mean - z * self.std, self.mean + z * self.std

    def __repr__(self) -> str:
        return f"Predictive(kind={self.kind!r}, n={self.mean.size})"


@dataclass(frozen=True, eq=False)
class MixturePredictiveRecord:
    """The checked fields of a :class:`MixturePredictive` (build that, not this)."""

    means: np.ndarray
    vars: np.ndarray
    kind: str = "samples"

    @property
    def n_components(self) -> int:
        return self.means.shape[0]

    @property
    def mean(self) -> np.ndarray:
        """``E[y] = mean_s m_s`` (written about the first draw, so identical draws give
        their common value exactly)."""
        m0 = self.means[0]
        return m0 + np.mean(self.means - m0, axis=0)

    @property
    def var(self) -> np.ndarray:
        """``Var[y] = mean_s v_s + mean_s (m_s - E[y])^2`` (law of total variance)."""
        v0 = self.vars[0]
        return v0 + np.mean(self.vars - v0, axis=0) + np.mean((self.means - self.mean) ** 2,
                                                                 axis=0)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def _check_y(self, y) -> np.ndarray:
        return check_targets(y, self.means.shape[1], name="y")

    def logpdf(self, y) -> np.ndarray:
        """``log mean_s N(y | m_s, v_s)`` by log-sum-exp."""
        y = self._check_y(y)
        lp = stats.norm.logpdf(y, self.means, np.sqrt(self.vars))
        top = lp.max(axis=0)
        return top + np.log(np.mean(np.exp(lp - top), axis=0))

    def cdf(self, y) -> np.ndarray:
        """Mixture CDF ``mean_s Phi((y - m_s) / sqrt(v_s))``."""
        y = self._check_y(y)
        return np.mean(special.ndtr((y - self.means) / np.sqrt(self.vars)), axis=0)

    def _quantile(self, prob: float, z: float) -> np.ndarray:
        """``x`` with ``cdf(x) = prob``; ``z`` is the standard normal quantile of ``prob``.

        The component quantiles ``m_s + z sd_s`` bracket the root. Newton's method starts
        at the moment-matched Gaussian's quantile ``E[y] + z sd[y]`` (clipped into the
        bracket); a step that would leave the bracket bisects instead, and a Newton step
        below the tolerance ends the search (taken, not replaced by a bisection).
        """
        sd = np.sqrt(self.vars)
        comp = self.means + z * sd
        lo, hi = comp.min(axis=0), comp.max(axis=0)
        x = np.clip(self.mean + z * self.std, lo, hi)
        tol = 1e-13 * (np.abs(x) + sd.max(axis=0))
        active = hi - lo > tol
        for _ in range(200):
            if not active.any():
                break
            zs = (x[active] - self.means[:, active]) / sd[:, active]
            F = np.mean(special.ndtr(zs), axis=0) - prob
            f = np.mean(np.exp(-0.5 * zs**2) / sd[:, active], axis=0) / np.sqrt(2 * np.pi)
            xa, la, ha = x[active], lo[active], hi[active]
            la = np.where(F < 0, xa, la)
            ha = np.where(F > 0, xa, ha)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = xa - F / f
            converged = np.isfinite(step) & (np.abs(step - xa) <= tol[active])
            inside = converged | (np.isfinite(step) & (step > la) & (step < ha))
            new = np.where(inside, step, 0.5 * (la + ha))
            done = converged | (F == 0) | (ha - la <= tol[active])
            x[active], lo[active], hi[active] = np.where(F == 0, xa, new), la, ha
            idx = np.flatnonzero(active)
            active[idx[done]] = False
        x[hi - lo <= 0] = lo[hi - lo <= 0]
        return x

    def interval(self, p: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Central interval holding probability ``p``: the mixture's ``(1-p)/2`` and
        ``(1+p)/2`` quantiles."""
        if not 0 < p < 1:
            raise ValueError(f"p must lie in (0, 1), got {p!r}")
        z = stats.norm.ppf(0.5 + p / 2)
        return self._quantile(0.5 - p / 2, -z), self._quantile(0.5 + p / 2, z)

    def __repr__(self) -> str:
        return (f"MixturePredictive(kind={self.kind!r}, n={self.means.shape[1]}, "
                f"components={self.n_components})")


class MixturePredictive(MixturePredictiveRecord):
    """Equal-weight Gaussian mixture at each test input: component ``s`` at input ``i`` is
    ``N(means[s, i], vars[s, i])`` (one component per posterior draw).

    ``mean`` and ``var`` are the mixture moments (law of total variance), ``logpdf`` is
    exact (log-sum-exp) and ``interval`` solves the mixture CDF. If every component at an
    input is the same Gaussian, all of them equal that Gaussian's values exactly.
    """

    def __init__(self, means, vars, kind: str = "samples") -> None:
        means = np.atleast_2d(np.asarray(means, dtype=float))
        vars_ = np.broadcast_to(np.asarray(vars, dtype=float), means.shape)
        if not (np.all(np.isfinite(means)) and np.all(np.isfinite(vars_))):
            raise ValueError("mixture means and variances must be finite")
        if np.any(vars_ <= 0):
            raise ValueError("mixture component variances must be > 0")
        super().__init__(means, vars_, kind)


def check_new_inputs(post: xr.DataTree, X_new) -> np.ndarray:
    """``X_new`` as a finite float array with the training number of features."""
    X_new = check_inputs(X_new, name="X_new")
    d = post["constant_data"]["X"].shape[1]
    if X_new.shape[1] != d:
        raise ValueError(f"X_new has {X_new.shape[1]} features, the model was fitted on {d}")
    return X_new


def design(post: xr.DataTree, X_new) -> np.ndarray:
    """The design rows ``Phi`` (n, M) of the posterior's basis (the columns on its dim
    ``basis``) at ``X_new``, rebuilt from the DataTree."""
    X_new = check_new_inputs(post, X_new)
    basis, columns = basis_from_posterior(post)
    return basis.design(X_new, columns=columns)


def gaussian_predictive(Phi: np.ndarray, mu: np.ndarray, Sigma: np.ndarray, beta: float
                        ) -> Predictive:
    """T01 eqs. 21-22: mean ``phi(x)^T mu``, variance ``1/beta + phi(x)^T Sigma phi(x)`` at
    the design rows ``Phi`` (n, M), for the weight posterior ``N(mu, Sigma)`` and noise
    precision ``beta``."""
    var = 1.0 / float(beta) + np.einsum("ij,jk,ik->i", Phi, Sigma, Phi)
    return Predictive(mean=Phi @ mu, var=var, kind="rvm")


def samples_predictive(Phi: np.ndarray, w: np.ndarray, beta: np.ndarray
                       ) -> MixturePredictive:
    """The equal-weight mixture ``mean_s N(y | phi(x)^T w_s, 1/beta_s)`` over draws ``w``
    (S, M) and ``beta`` (S,) at the design rows ``Phi`` (n, M)."""
    return MixturePredictive(w @ Phi.T, (1.0 / np.asarray(beta, float))[:, None],
                             kind="samples")


def predict_rvm(post: xr.DataTree, X_new) -> Predictive:
    """T01 eqs. 21-22 at the point hyperparameters (:func:`gaussian_predictive`)."""
    if "gaussian_posterior" not in post.children:
        raise ValueError(
            f"kind='rvm' needs a Gaussian weight posterior (evidence or vrvm); this "
            f"{post.attrs.get('method')!r} posterior has draws: use kind='samples'"
        )
    g = post["gaussian_posterior"]
    return gaussian_predictive(design(post, X_new), g["mu"].values, g["Sigma"].values,
                               float(g["beta"]))


def _regression_posterior(post: xr.DataTree, kind: str) -> None:
    pkind = post.attrs.get("problem_kind")
    if pkind != RVMRegression.kind:
        raise ValueError(f"kind={kind!r} is for RVM regression posteriors, got a {pkind} "
                         "posterior")


def draw_index(n_draws: int, max_draws: int | None) -> np.ndarray:
    if max_draws is None or n_draws <= max_draws:
        return np.arange(n_draws)
    if not isinstance(max_draws, int | np.integer) or max_draws <= 0:
        raise ValueError(f"max_draws must be a positive integer or None, got {max_draws!r}")
    return np.linspace(0, n_draws - 1, max_draws).round().astype(int)


def beta_draws(post: xr.DataTree) -> np.ndarray:
    ds = post["posterior"]
    if "beta" in ds:
        return flat_draws(post, "beta")
    if "noise_sd" in ds:
        return 1.0 / flat_draws(post, "noise_sd") ** 2
    raise ValueError("the posterior has neither beta nor noise_sd draws")


def predict_samples(post: xr.DataTree, X_new, max_draws: int | None = 2000
                    ) -> MixturePredictive:
    """Exact predictive of a sample-based regression posterior: the equal-weight mixture
    ``mean_s N(y | phi(x)^T w_s, 1/beta_s)`` over (at most ``max_draws``, evenly thinned)
    posterior draws of ``(w, beta)``."""
    _regression_posterior(post, "samples")
    w, beta = flat_draws(post, "w"), beta_draws(post)
    keep = draw_index(w.shape[0], max_draws)
    return samples_predictive(design(post, X_new), w[keep], beta[keep])


def _star_terms(Phi_new, P, Kt, kk, k_ss, mu, Sigma, beta, alpha_star):
    """RQ05 eqs. 4, 6-7 at a block of test points, given ``P = Phi^T phi_*``,
    ``Kt = phi_*^T t`` and ``kk = phi_*^T phi_*`` (one column / entry per test point)."""
    m = Phi_new @ mu  # RQ05 eq. 4
    SPn = Sigma @ Phi_new.T
    v = 1.0 / beta + np.einsum("ij,ji->i", Phi_new, SPn)
    SP = Sigma @ P
    q = beta * (Kt - P.T @ mu)  # RQ05 eq. 7: phi_*^T (t - Phi mu) / sigma^2
    e = k_ss - beta * np.einsum("ij,ji->i", Phi_new, SP)  # RQ05 eq. 7
    s = beta * kk - beta**2 * np.einsum("ji,ji->i", P, SP)  # RQ05 eq. 7, C^-1 by Woodbury
    d = alpha_star + np.maximum(s, 0.0)
    return m + e * q / d, v + e**2 / d  # RQ05 eq. 6


def rvm_star_moments(Phi: np.ndarray, t: np.ndarray, mu: np.ndarray, Sigma: np.ndarray,
                     beta: float, Phi_new: np.ndarray, K_star: np.ndarray,
                     k_star_star: np.ndarray, alpha_star: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Augmented predictive mean and variance, RQ05 eqs. 6-7.

    Parameters
    ----------
    Phi : (N, M) training design of the model's basis functions; ``mu``, ``Sigma`` its
        weight posterior (T01 eqs. 12-13 / RQ05 eq. 3) at noise precision ``beta``.
    Phi_new : (n, M) the same basis functions at the test inputs.
    K_star : (N, n) the new basis function of each test point, centred on it, at the
        training inputs (``phi_*``); ``k_star_star`` (n,) its value at its own centre.
    alpha_star : prior precision of the new weight.

    Returns ``(m_*, v_*)``; each test point costs O(N M + M^2).
    """
    P = Phi.T @ K_star
    return _star_terms(Phi_new, P, K_star.T @ t, np.einsum("ij,ij->j", K_star, K_star),
                       k_star_star, mu, Sigma, beta, alpha_star)


def predict_rvm_star(post: xr.DataTree, X_new, alpha_star: float | None = None, *,
                     use_draws: bool | None = None, max_draws: int | None = 500,
                     chunk: int = 1024) -> Predictive | MixturePredictive:
    """RVM* (Rasmussen & Quiñonero-Candela 2005): at each test input add one basis function
    centred on it, with weight ``w_* ~ N(0, 1/alpha_star)``, and predict by RQ05 eqs. 6-7.

    ``alpha_star`` defaults to ``1 / var(t)`` of the training targets (RQ05 §2.2). A
    posterior with a Gaussian weight group (evidence, VRVM) gives a :class:`Predictive`;
    one with draws of ``alpha`` and ``beta`` (NUTS, ADVI; or ``use_draws=True``) gives the
    mixture over (at most ``max_draws``) draws of the per-draw augmented predictive, with
    ``mu``, ``Sigma`` recomputed for each draw by T01 eqs. 12-13.
    """
    _regression_posterior(post, "rvm*")
    t = post["observed_data"]["t"].values
    if alpha_star is None:
        alpha_star = 1.0 / np.var(t)
    if (isinstance(alpha_star, bool) or not isinstance(alpha_star, numbers.Real)
            or not np.isfinite(alpha_star) or alpha_star <= 0):
        raise ValueError(f"alpha_star must be a finite number > 0, got {alpha_star!r}")
    if not isinstance(chunk, int | np.integer) or chunk <= 0:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    gaussian = "gaussian_posterior" in post.children
    if use_draws is None:
        use_draws = not gaussian
    if not use_draws and not gaussian:
        raise ValueError("use_draws=False needs a Gaussian weight posterior (evidence, vrvm)")
    X_new = check_new_inputs(post, X_new)
    X = post["constant_data"]["X"].values
    basis, columns = basis_from_posterior(post)
    Phi = basis.design(X, columns=columns)
    if use_draws:

        alpha, beta = flat_draws(post, "alpha"), beta_draws(post)
        keep = draw_index(alpha.shape[0], max_draws)
        moments = [weight_posterior(Phi, t, alpha[s], float(beta[s]))[:2] + (float(beta[s]),)
                   for s in keep]
    else:
        g = post["gaussian_posterior"]
        moments = [(g["mu"].values, g["Sigma"].values, float(g["beta"]))]
    means = np.empty((len(moments), X_new.shape[0]))
    vars_ = np.empty_like(means)
    with one_blas_thread():
        _rvm_star_blocks(basis, columns, X, t, Phi, X_new, moments, float(alpha_star), chunk,
                         means, vars_)
    if not use_draws:
        return Predictive(mean=means[0], var=vars_[0], kind="rvm*")
    return MixturePredictive(means, vars_, kind="rvm*")


def _rvm_star_blocks(basis, columns, X, t, Phi, X_new, moments, alpha_star, chunk, means,
                     vars_) -> None:
    """Fill ``means``, ``vars_`` (draws x test points) block by block of test points."""
    for lo in range(0, X_new.shape[0], chunk):
        Xc = X_new[lo:lo + chunk]
        K_star = basis.kernel(X, Xc)  # (N, n): phi_* at the training inputs
        P = Phi.T @ K_star
        Kt, kk = K_star.T @ t, np.einsum("ij,ij->j", K_star, K_star)
        k_ss = basis.kernel.diagonal(Xc)
        Phi_new = basis.design(Xc, columns=columns)
        for j, (mu, Sigma, beta) in enumerate(moments):
            means[j, lo:lo + chunk], vars_[j, lo:lo + chunk] = _star_terms(
                Phi_new, P, Kt, kk, k_ss, mu, Sigma, beta, alpha_star)
