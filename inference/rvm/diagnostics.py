"""How good is an approximate posterior: the Pareto k-hat of its importance ratios
(Yao, Vehtari, Simpson & Gelman 2018, "Yes, but did it work?", §3).

Draw ``theta_s ~ q``, form ``log r_s = log p(theta_s, t) - log q(theta_s)`` with the joint
density of the same model in the parametrisation ``q`` lives in, and fit a generalised
Pareto distribution to the largest ratios (PSIS, Vehtari et al. 2024, via arviz_stats). Its
shape ``k``: below 0.5 ``q`` is close to the posterior (importance sampling from it
converges fast), 0.5-0.7 usable with care, above 0.7 the approximation is poor (Yao et al.
2018 §3.1). Constants in ``log p`` (an improper prior's normaliser, the evidence) do not
change ``k``; ``log r`` constant over the draws (``q`` exact) gives ``k = -inf``.

Pruned weights (``alpha_i = inf``) are left out of both densities: ``w_i = 0`` there in the
model and in ``q``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from ..numerics import LOG_2PI, cholesky

__all__ = ["psis_khat", "gamma_logpdf", "gaussian_sample", "vrvm_regression_log_ratios",
           "vrvm_regression_khat", "vrvm_classification_log_ratios", "vrvm_classification_khat",
           "pymc_vi_log_ratios", "pymc_vi_khat", "KHAT_DRAWS"]

KHAT_DRAWS = 1000  # draws from q per k-hat


def psis_khat(log_ratios: np.ndarray) -> float:
    """Pareto k-hat of the importance ratios ``exp(log_ratios)`` (draws from ``q``,
    independent: relative efficiency 1): PSIS (``arviz_stats`` ``psislw``), Yao et al.
    (2018) §3. ``-inf`` when the ratios are all equal (``q`` is the posterior); ``inf`` when
    a log ratio is not finite or the tail is too heavy for the Pareto fit (its NaN)."""
    from arviz_stats.base import array_stats

    lr = np.asarray(log_ratios, dtype=float).ravel()
    if not np.all(np.isfinite(lr)):
        return float("inf")  # q puts mass where the joint density is 0 (or overflows)
    if np.ptp(lr) <= 1e-9 * (1.0 + float(np.max(np.abs(lr)))):
        return float("-inf")
    # psislw smooths the ratios 1 / exp(ary) (LOO's 1 / p(y_i | theta)): pass -log r
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        _, khat = array_stats.psislw(-lr, r_eff=1.0)
    # NaN: the largest ratios exceed the rest by more than exp(700), too heavy a tail to fit
    return float(khat) if not np.isnan(khat) else float("inf")


def gamma_logpdf(x: np.ndarray, shape, rate) -> np.ndarray:
    """``ln Gamma(x | shape, rate)``; for ``shape = rate = 0`` the improper ``-ln x``
    (Tipping's prior, flat in ``ln x``; T01 eq. 6), its normaliser dropped."""
    x = np.asarray(x, dtype=float)
    shape = np.asarray(shape, dtype=float)
    rate = np.asarray(rate, dtype=float)
    proper = (shape > 0) & (rate > 0)
    norm = np.where(proper, shape * np.log(np.where(proper, rate, 1.0))
                    - gammaln(np.where(proper, shape, 1.0)), 0.0)
    return norm + (shape - 1) * np.log(x) - rate * x


def gaussian_sample(mu: np.ndarray, S: np.ndarray, n: int, rng: np.random.Generator, *,
                    precision: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws of ``N(mu, S)`` (or ``N(mu, S^-1)`` with ``precision``) and their log
    densities, through the Cholesky factor ``L`` of ``S``: ``w = mu + L z`` (``mu + L^-T z``),
    ``ln q = -z^T z / 2 - ln|L| - M ln(2 pi) / 2`` (``+ ln|L|``)."""
    from scipy.linalg import solve_triangular

    mu = np.asarray(mu, dtype=float)
    L = cholesky(0.5 * (S + S.T))
    z = rng.standard_normal((n, mu.size))
    logdet = np.sum(np.log(np.diag(L)))
    if precision:
        w = mu + solve_triangular(L.T, z.T, lower=False, check_finite=False).T
    else:
        w = mu + z @ L.T
        logdet = -logdet
    return w, -0.5 * np.sum(z * z, axis=1) + logdet - 0.5 * mu.size * LOG_2PI


def _gaussian_prior_logpdf(w: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``sum_i ln N(w_i | 0, 1 / alpha_i)`` over the last axis (T01 eq. 5)."""
    return 0.5 * np.sum(np.log(alpha) - LOG_2PI - alpha * w * w, axis=-1)


def _rng(seed) -> np.random.Generator:
    """A stream of its own for the diagnostic, reproducible from the fit's ``seed``."""
    return np.random.default_rng(None if seed is None else [int(seed), 2018])


def vrvm_regression_log_ratios(stats, prior, state, *, seed=None, draws: int = KHAT_DRAWS
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Draws ``w, alpha, beta`` of the variational RVM regression posterior (Bishop & Tipping
    2000) ``q(w) q(alpha) q(beta)`` (``state``: a ``VRVMState``) and their log importance
    ratios against the joint density ``ln N(t | Phi w, 1/beta) + sum ln N(w_i | 0,
    1/alpha_i) + ln Gamma(alpha_i | a, b) + ln Gamma(beta | c, d)`` (T01 eqs. 5-6, 8) over
    the kept columns, from the sufficient statistics ``stats`` (``G``, ``Phit``, ``tt``,
    ``n``): ``||t - Phi w||^2 = t^T t - 2 w^T Phi^T t + w^T G w``. A fixed noise
    (``state.beta_fixed``) is in both densities' place."""
    rng = _rng(seed)
    act = np.asarray(state.active)
    G, h = stats.G[np.ix_(act, act)], stats.Phit[act]
    w, log_q = gaussian_sample(state.mu, state.Sigma, draws, rng)
    alpha = rng.gamma(state.a_tilde, 1.0 / state.b_tilde, (draws, act.size))
    log_q = log_q + np.sum(gamma_logpdf(alpha, state.a_tilde, state.b_tilde), axis=1)
    log_p = _gaussian_prior_logpdf(w, alpha) + np.sum(gamma_logpdf(alpha, prior.a, prior.b),
                                                      axis=1)
    if state.beta_fixed is None:
        beta = rng.gamma(state.c_tilde, 1.0 / state.d_tilde, draws)
        log_q = log_q + gamma_logpdf(beta, state.c_tilde, state.d_tilde)
        log_p = log_p + gamma_logpdf(beta, prior.c, prior.d)
    else:
        beta = np.full(draws, float(state.beta_fixed))
    rss = stats.tt - 2 * w @ h + np.einsum("si,ij,sj->s", w, G, w)
    log_p = log_p + 0.5 * stats.n * (np.log(beta) - LOG_2PI) - 0.5 * beta * np.maximum(rss, 0)
    return {"w": w, "alpha": alpha, "beta": beta}, log_p - log_q


def vrvm_regression_khat(stats, prior, state, *, seed=None, draws: int = KHAT_DRAWS) -> float:
    """:func:`psis_khat` of :func:`vrvm_regression_log_ratios`."""
    return psis_khat(vrvm_regression_log_ratios(stats, prior, state, seed=seed,
                                                draws=draws)[1])


def vrvm_classification_log_ratios(Phi: np.ndarray, lik, prior, state, *, seed=None,
                                   draws: int = KHAT_DRAWS
                                   ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Draws ``w, alpha`` of the variational RVM classifier (Bishop & Tipping 2000 §4)
    ``q(w) q(alpha)`` (``state``: a ``VRVMClassState``: ``q(w) = N(mu, H^-1)`` over the
    (column, class) pairs ``cols``, ``cls``; ``q(alpha_i) = Gamma(k, k / <alpha_i>)``) and
    their log importance ratios against the joint density with the exact likelihood
    (``lik``: Bernoulli, T01 eq. 23, or softmax, eq. 28; not the variational bound)
    ``ln p(t | w) + sum ln N(w_i | 0, 1/alpha_i) + ln Gamma(alpha_i | a, b)``. ``Phi``: the
    design of every basis column (N, M)."""
    rng = _rng(seed)
    cols = np.asarray(state.cols)
    w, log_q = gaussian_sample(state.mu, state.H, draws, rng, precision=True)
    k = float(state.q_alpha_shape)
    rate = k / np.asarray(state.alpha, dtype=float)
    alpha = rng.gamma(k, 1.0 / rate, (draws, cols.size))
    log_q = log_q + np.sum(gamma_logpdf(alpha, k, rate), axis=1)
    log_p = (lik.draws_loglik(Phi[:, cols], np.asarray(state.cls), w).sum(axis=1)
             + _gaussian_prior_logpdf(w, alpha)
             + np.sum(gamma_logpdf(alpha, prior.a, prior.b), axis=1))
    return {"w": w, "alpha": alpha}, log_p - log_q


def vrvm_classification_khat(Phi: np.ndarray, lik, prior, state, *, seed=None,
                             draws: int = KHAT_DRAWS) -> float:
    """:func:`psis_khat` of :func:`vrvm_classification_log_ratios`."""
    return psis_khat(vrvm_classification_log_ratios(Phi, lik, prior, state, seed=seed,
                                                    draws=draws)[1])


def pymc_vi_log_ratios(approx, model, *, seed=None, draws: int = KHAT_DRAWS, logp=None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Draws (``draws``, d) of a PyMC mean-field or full-rank ADVI approximation (``pm.fit``;
    Kucukelbir et al. 2017) in the model's unconstrained space, ``theta = mean + L z`` (``L``
    diagonal with the fitted standard deviations, or the fitted Cholesky factor), and their
    log importance ratios against the model's joint log density there, Jacobians of the
    transforms included (``model.compile_logp(jacobian=True)``, or ``logp`` if given: that
    function compiled before), as Yao et al. (2018) §3 prescribe."""
    if len(approx.groups) != 1:
        raise ValueError("pymc_vi_log_ratios takes a single-group approximation (pm.fit's ADVI)")
    group = approx.groups[0]
    mean = np.asarray(group.mean.eval(), dtype=float)
    if hasattr(group, "L"):  # full rank
        L = np.asarray(group.L.eval(), dtype=float)
        logdet = np.sum(np.log(np.diag(L)))
    else:
        std = np.asarray(group.std.eval(), dtype=float)
        L = np.diag(std)
        logdet = np.sum(np.log(std))
    z = _rng(seed).standard_normal((draws, mean.size))
    theta = mean + z @ L.T
    log_q = -0.5 * np.sum(z * z, axis=1) - logdet - 0.5 * mean.size * LOG_2PI
    logp = model.compile_logp(jacobian=True) if logp is None else logp
    log_p = np.empty(draws)
    for s in range(draws):  # one compiled call per draw (a vectorised graph was slower)
        log_p[s] = logp({name: theta[s, slc].reshape(shape)
                         for name, slc, shape, _ in group.ordering.values()})
    return theta, log_p - log_q


def pymc_vi_khat(approx, model, *, seed=None, draws: int = KHAT_DRAWS, logp=None) -> float:
    """:func:`psis_khat` of :func:`pymc_vi_log_ratios`."""
    return psis_khat(pymc_vi_log_ratios(approx, model, seed=seed, draws=draws, logp=logp)[1])
