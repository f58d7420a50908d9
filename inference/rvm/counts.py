"""The RVM with any :class:`~sparsebayes.models.likelihoods.LatentLikelihood` on
``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)`` (Tipping 2001 §3's Laplace scheme; PRML §7.2.3):
counts with a count likelihood and log link, or real targets with e.g. a Student-t
likelihood, as one :class:`~sparsebayes.inference.family.Family` per likelihood, built by
:func:`latent_family` (:func:`count_family` for counts) from the problem class alone:

* type-II ML (``evidence``: Tipping & Faul 2003 on the Laplace surrogate; ``evidence-mackay``:
  T01 eq. 16) by the Laplace code of :mod:`.laplace`, the likelihood's own parameters (e.g. a
  dispersion) learned with the weights' precisions;
* NUTS / ADVI on the hierarchical PyMC model (:mod:`.pymc`, ``problem.pymc_model()``);
* the predictive (:class:`CountPredictive`, :class:`RealPredictive`): the likelihood mixed
  over a Gaussian ``f`` (Laplace) or over the posterior draws of ``f`` and the parameters
  (sampled results);
* leave-one-out: warm-started refits (:class:`CountRefits`, where the likelihood has no
  parameter to refit) and the Laplace cavity (:func:`cavity_logpdf`, Vehtari et al. 2016's
  LA-LOO).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from sparsebayes.models import RVMPoissonRegression
from sparsebayes.models.checks import check_targets
from sparsebayes.models.likelihoods import LatentLikelihood, Poisson
from sparsebayes.models.problems import LatentRVM, check_counts

from ..family import Family
from ..numerics import check_iterations, one_blas_thread
from ..predictive.classification import laplace_cavity, logit_moments
from ..predictive.regression import design, draw_index
from ..results import basis_from_posterior, flat_draws, prior_from_posterior
from . import laplace
from . import pymc as rvm_pymc

__all__ = ["fit_evidence", "fit_mackay", "LatentPredictive", "CountPredictive",
           "RealPredictive", "predict_laplace", "predict_samples", "replicates",
           "training_problem", "CountRefits", "cavity_logpdf", "latent_family", "count_family",
           "posterior_likelihood", "RVM_POISSON"]

GH_NODES = 128  # Gauss-Hermite nodes of the integrals over a Gaussian f (tests: pmf tails)


# --------------------------------------------------------------------------------------------
# Type-II ML
# --------------------------------------------------------------------------------------------


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, alpha_min):
    if not isinstance(problem, LatentRVM):
        raise TypeError(f"{method!r} here is for an RVM with a latent likelihood "
                        f"(RVMPoissonRegression, ...), got {type(problem).__name__}")
    check_iterations(max_iter, tol, alpha_min)
    post = laplace.fit_laplace(problem, problem.likelihood(), algorithm, method, seed=seed,
                               max_iter=max_iter, tol=tol, draws=draws, chains=chains,
                               alpha_min=alpha_min)
    post.attrs.pop("alpha_shared", None)  # one alpha per column: no classes to share over
    return post


def fit_evidence(problem, *, seed=None, max_iter: int = 10000, tol: float = 1e-3,
                 draws: int = 500, chains: int = 2,
                 alpha_min: float = laplace.ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for an RVM of counts: Tipping & Faul's (2003) sequential algorithm on the
    Laplace surrogate ``t_hat = f + g / B`` with precisions ``B`` (the likelihood's gradient
    and negative Hessian in ``f``; TF03 eq. 14, PRML 7.117), each run kept only if the
    Laplace evidence (PRML 7.114) did not fall (:func:`~.laplace.fit_fast`'s loop), the
    likelihood's own parameters maximising the same evidence. ``w`` in the result is drawn
    from the Laplace Gaussian ``N(mu, Sigma)`` (T01 eq. 26); ``alpha_min``: floor on alpha
    for unit-norm columns; ``tol``: on the re-estimates' change in ``ln alpha`` (T&F §4.4)."""
    return _fit(problem, "fast", "evidence", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, alpha_min=alpha_min)


def fit_mackay(problem, *, seed=None, max_iter: int = 5000, tol: float = 1e-6,
               draws: int = 500, chains: int = 2,
               alpha_min: float = laplace.ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for an RVM of counts by MacKay re-estimation ``alpha_i = gamma_i / mu_i^2``
    (T01 eq. 16) around the Newton (IRLS) mode, pruning at ``alpha > 1e12`` (T01 App. B.1)."""
    return _fit(problem, "mackay", "evidence-mackay", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, alpha_min=alpha_min)


def posterior_likelihood(post: xr.DataTree, likelihood_type: type[LatentLikelihood],
                         t=None, draws: bool = False) -> LatentLikelihood:
    """The likelihood of ``post`` on the counts ``t`` (default: its training counts) with
    its parameters at their posterior values: one value each (the mean over the draws; a
    type-II ML result has one) or, with ``draws``, one per draw (flat, shape (S, 1))."""
    if t is None:
        t = post["observed_data"]["t"].values
    params = {}
    for name in likelihood_type.param_names:
        v = flat_draws(post, name)
        params[name] = v[:, None] if draws else float(np.mean(v))
    return likelihood_type(t, **params)


# --------------------------------------------------------------------------------------------
# Predictive
# --------------------------------------------------------------------------------------------


class LatentPredictive:
    """The predictive of targets at ``n`` inputs: per input an equal-weight mixture over
    ``S`` components of the ``likelihood`` with ``f ~ N(means[s], vars[s])`` (Laplace: one
    component; sampled results: one component per draw with ``vars = 0``). ``means`` (S,
    n) or (n,), ``vars`` broadcastable to them; the likelihood's parameters are scalars or
    (S, 1), one per component. Integrals over ``f`` by ``GH_NODES``-point Gauss-Hermite
    quadrature. Subclasses: :class:`CountPredictive`, :class:`RealPredictive`."""

    def __init__(self, means, vars, kind: str = "laplace",
                 likelihood: LatentLikelihood | None = None) -> None:
        means = np.atleast_2d(np.asarray(means, dtype=float))
        vars_ = np.broadcast_to(np.asarray(vars, dtype=float), means.shape)
        if not (np.all(np.isfinite(means)) and np.all(np.isfinite(vars_))):
            raise ValueError("the latent means and variances must be finite")
        if np.any(vars_ < 0):
            raise ValueError("the latent variances must be >= 0")
        self.means, self.vars, self.kind = means, vars_, kind
        self.likelihood = Poisson(np.zeros(0)) if likelihood is None else likelihood

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def _nodes(self) -> tuple[np.ndarray, np.ndarray, LatentLikelihood]:
        """Values of ``f`` (Q, n), their log weights (Q,) (summing to 1) and the likelihood
        with its parameters at each node: Gauss-Hermite nodes of every component (one node
        where all variances are 0)."""
        S, n = self.means.shape
        if not np.any(self.vars):
            return self.means, np.full(S, -np.log(S)), self.likelihood
        x, wq = np.polynomial.hermite.hermgauss(GH_NODES)
        f = self.means[:, None, :] + np.sqrt(2 * self.vars)[:, None, :] * x[None, :, None]
        logw = np.log(wq / np.sqrt(np.pi)) - np.log(S)
        lik = self.likelihood
        per_draw = {k: np.repeat(v, GH_NODES, axis=0) for k, v in lik.params.items()
                    if np.ndim(v) == 2}
        if per_draw:
            lik = lik.with_params(**per_draw)
        return f.reshape(S * GH_NODES, n), np.tile(logw, S), lik

    def _check(self, t) -> np.ndarray:
        return check_targets(t, self.means.shape[1], name="t")

    def logpdf(self, t) -> np.ndarray:
        """``ln p(t_i)`` of the given targets: ``ln sum_q w_q p(t_i | f_qi)``."""
        t = self._check(t)
        f, logw, lik = self._nodes()
        return logsumexp(lik.logpdf(t[None, :], f) + logw[:, None], axis=0)

    def cdf(self, t) -> np.ndarray:
        """``P(t_i <= y_i) = sum_q w_q P(t <= y_i | f_qi)`` (the likelihood's cdf)."""
        return self._cdf(self._check(t))

    def _cdf(self, y: np.ndarray) -> np.ndarray:
        f, logw, lik = self._nodes()
        return np.exp(logw) @ lik.cdf(y[None, :], f)

    def interval(self, p: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Central interval: the ``(1 - p) / 2`` and ``(1 + p) / 2`` quantiles (it holds
        at least probability ``p``)."""
        if not 0 < p < 1:
            raise ValueError(f"p must lie in (0, 1), got {p!r}")
        return self.quantile(0.5 - p / 2), self.quantile(0.5 + p / 2)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kind={self.kind!r}, "
                f"likelihood={self.likelihood.name!r}, n={self.means.shape[1]}, "
                f"components={self.means.shape[0]})")


class CountPredictive(LatentPredictive):
    """The predictive of counts (a :class:`LatentPredictive` of a count likelihood with mean
    ``exp(f)``, default :class:`Poisson`; Laplace: Poisson-lognormal for the Poisson)."""

    @property
    def mean(self) -> np.ndarray:
        """``E[t] = E[exp(f)] = mean_s exp(m_s + v_s / 2)`` (the lognormal mean)."""
        return np.mean(np.exp(self.means + 0.5 * self.vars), axis=0)

    @property
    def var(self) -> np.ndarray:
        """``Var[t] = E[Var[t | f]] + Var[exp(f)]`` (law of total variance) with ``Var[t |
        f] = exp(f) + k exp(2f)`` (the likelihood's ``extra_variance`` ``k``; 0 for the
        Poisson) and the lognormal ``E[exp(2f)] = exp(2m + 2v)``."""
        second_s = np.exp(2 * self.means + 2 * self.vars)
        k = np.asarray(self.likelihood.extra_variance(), dtype=float)
        second = np.mean(second_s, axis=0)
        mean = self.mean
        return mean + np.mean(k * second_s, axis=0) + np.maximum(second - mean**2, 0.0)

    @property
    def rate(self) -> np.ndarray:
        """The predictive mean of the rate ``exp(f)`` (= ``mean``)."""
        return self.mean

    def _check(self, counts) -> np.ndarray:
        return check_counts(counts, self.means.shape[1]).astype(float)

    def quantile(self, q: float) -> np.ndarray:
        """The smallest count ``k`` with ``cdf(k) >= q`` at each input (integer bisection)."""
        if not 0 < q < 1:
            raise ValueError(f"q must lie in (0, 1), got {q!r}")
        n = self.means.shape[1]
        lo = np.full(n, -1.0)  # cdf(lo) < q (cdf(-1) = 0)
        hi = np.ceil(self.mean + 10 * self.std) + 10
        while True:  # grow hi until cdf(hi) >= q
            short = self._cdf(hi) < q
            if not short.any():
                break
            hi = np.where(short, 2 * hi, hi)
        while np.any(hi - lo > 1):
            mid = np.floor(0.5 * (lo + hi))
            ok = self._cdf(mid) >= q
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        return hi


class RealPredictive(LatentPredictive):
    """The predictive of real targets ``t = f + noise`` (a :class:`LatentPredictive` of a
    likelihood with the identity link and a ``noise_variance``, e.g. Student-t)."""

    @property
    def mean(self) -> np.ndarray:
        """``E[t] = mean_s m_s``."""
        return np.mean(self.means, axis=0)

    @property
    def var(self) -> np.ndarray:
        """``Var[t] = mean_s (v_s + Var[t | f]_s) + Var_s[m_s]`` (law of total variance;
        infinite where the noise has none, e.g. Student-t with ``nu <= 2``)."""
        noise = np.asarray(self.likelihood.noise_variance(), dtype=float)
        return (np.mean(self.vars + noise, axis=0)
                + np.mean((self.means - self.mean) ** 2, axis=0))

    def quantile(self, q: float, tol: float = 1e-10) -> np.ndarray:
        """``y`` with ``cdf(y) = q`` at each input (bisection in a bracket grown from the
        components' spread; ``tol`` relative to it)."""
        if not 0 < q < 1:
            raise ValueError(f"q must lie in (0, 1), got {q!r}")
        centre = self.mean
        step = np.sqrt(self.vars.max(axis=0)) + np.ptp(self.means, axis=0)
        step = np.where(step > 0, step, 1.0)  # one component at a point: grown below
        lo, hi = centre - step, centre + step
        for _ in range(200):  # grow the bracket until cdf(lo) <= q <= cdf(hi)
            low, high = self._cdf(lo) > q, self._cdf(hi) < q
            if not (low.any() or high.any()):
                break
            lo, hi = np.where(low, lo - 2 * (hi - lo), lo), np.where(high, hi + 2 * (hi - lo), hi)
        width = tol * (hi - lo)
        while np.any(hi - lo > width):
            mid = 0.5 * (lo + hi)
            ok = self._cdf(mid) >= q
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        return 0.5 * (lo + hi)


def _count_design(post: xr.DataTree, X_new, family: Family) -> np.ndarray:
    if post.attrs.get("problem_kind") != family.kind:
        raise TypeError(f"this predictive is for an {family.problem_type.__name__} posterior")
    return design(post, X_new)


def predict_laplace(post: xr.DataTree, X_new, *, family: Family,
                    predictive: type[LatentPredictive]) -> LatentPredictive:
    """The predictive of a Gaussian weight posterior ``N(mu, Sigma)`` (T01 eq. 26): ``f(x)
    ~ N(phi^T mu, phi^T Sigma phi)`` and the counts' likelihood (at its fitted parameters)
    mixed over it."""
    Phi = _count_design(post, X_new, family)
    if "gaussian_posterior" not in post.children:
        raise ValueError(f"kind='laplace' needs a Gaussian weight posterior (evidence); this "
                         f"{post.attrs.get('method')!r} posterior has draws: use "
                         "kind='samples'")
    g = post["gaussian_posterior"]
    m, V = logit_moments(Phi, g["mu"].values, g["Sigma"].values)
    lik = posterior_likelihood(post, family.problem_type.likelihood_type)
    return predictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace", lik)


def predict_samples(post: xr.DataTree, X_new, max_draws: int | None = 2000, *,
                    family: Family, predictive: type[LatentPredictive]) -> LatentPredictive:
    """The mixture ``mean_s p(t | phi^T w_s, params_s)`` over (at most ``max_draws``, evenly
    thinned) posterior draws of ``w`` and the likelihood's parameters."""
    Phi = _count_design(post, X_new, family)
    w = flat_draws(post, "w")
    keep = draw_index(w.shape[0], max_draws)
    lik = posterior_likelihood(post, family.problem_type.likelihood_type, draws=True)
    lik = lik.with_params(**{k: v[keep] for k, v in lik.params.items()})
    return predictive(w[keep] @ Phi.T, 0.0, "samples", lik)


# --------------------------------------------------------------------------------------------
# Replicates, training problems, leave-one-out
# --------------------------------------------------------------------------------------------


def replicates(post: xr.DataTree, X: np.ndarray, rng: np.random.Generator,
               training: bool = False, *, family: Family) -> np.ndarray:
    """One draw of the targets at ``X`` per posterior draw of ``w`` and of the likelihood's
    parameters: (chain, draw, n)."""
    basis, columns = basis_from_posterior(post)
    w = post["posterior"]["w"].values
    lik = family.problem_type.likelihood_type(np.zeros(0), **{
        k: post["posterior"][k].values[..., None]
        for k in family.problem_type.likelihood_type.param_names})
    return lik.draw(w @ basis.design(X, columns=columns).T, rng)


def prior_targets(Phi: np.ndarray, w: np.ndarray, beta, rng: np.random.Generator,
                  targets=None, *, family: Family) -> np.ndarray:
    """Targets given draws of ``w`` (chain, draw, M) at the design ``Phi`` (the prior
    predictive), the likelihood's parameters drawn from their prior (at the scale of the
    training ``targets`` where it has one); ``beta`` unused."""
    lik_type = family.problem_type.likelihood_type
    on = lik_type(np.zeros(0) if targets is None else targets)
    params = on.prior_draws((*w.shape[:2], 1), rng)
    return lik_type(np.zeros(0), **params).draw(w @ Phi.T, rng)


def training_problem(post: xr.DataTree, rows=slice(None), *, family: Family):
    """The problem ``post`` was fitted to, on training ``rows``: the same kernel (at its
    fitted width), bias, extra columns, prior, width learning and centres."""
    basis, _ = basis_from_posterior(post)
    prior = prior_from_posterior(post)
    return family.problem_type(
        post["constant_data"]["X"].values[rows], post["observed_data"]["t"].values[rows],
        kernel=basis.kernel, bias=basis.bias, extra_columns=basis.extra, prior=prior,
        centres=basis.centres, learn_width=bool(int(post.attrs.get("learn_width", 0))))


class CountRefits(laplace.LaplaceRefits):
    """Warm-started refits of a type-II ML result for counts without some rows: the fit's
    own loop on the other rows from the full-data model (:class:`~.laplace.LaplaceRefits`,
    with the counts' likelihood), and the Laplace predictive (:class:`CountPredictive`) of
    the counts left out. For a likelihood without parameters (a refit would have to learn
    them again: those families refit cold). ``max_iter``, ``tol``, ``alpha_min``: the fit's
    options."""

    problem_type: type[LatentRVM]  # set by latent_family
    fits = {"evidence": fit_evidence, "evidence-mackay": fit_mackay}
    predictive: type[LatentPredictive]  # set by latent_family

    def likelihood(self, rows: np.ndarray) -> LatentLikelihood:
        return self.problem_type.likelihood_type(self.t[rows])

    def problem_on(self, rows: np.ndarray):
        b = self.basis
        return self.problem_type(self.X[rows], self.t[rows], kernel=b.kernel, bias=b.bias,
                                 extra_columns=b.extra, prior=self.prior, learn_width=True,
                                 centres=b.centres)

    def fold_logpdf(self, m: np.ndarray, V: np.ndarray, t_out: np.ndarray) -> np.ndarray:
        lik = self.problem_type.likelihood_type(t_out)
        return self.predictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace",
                               lik).logpdf(t_out)


def cavity_logpdf(post: xr.DataTree, *, family: Family,
                  predictive: type[LatentPredictive]) -> np.ndarray:
    """``ln p(t_n | t_-n)`` (N,) by the Laplace leave-one-out of Vehtari, Mononen, Tolvanen,
    Sivula & Winther (2016, LA-LOO) at the fitted alpha (and likelihood parameters): each
    point's Laplace site (precision ``B_n``, gradient ``g_n`` of the likelihood at the mode)
    taken out of the latent marginal (:func:`~..predictive.classification.laplace_cavity`)
    and the likelihood integrated over the cavity by Gauss-Hermite. Optimistic: alpha and
    the pruning are those fitted to all points (refits refit them)."""
    if not isinstance(post, xr.DataTree) or post.attrs.get("problem_kind") != family.kind:
        raise TypeError(f"post must be an {family.problem_type.__name__} result of fit")
    if "gaussian_posterior" not in post.children:
        raise ValueError(f"no Gaussian weight posterior in a {post.attrs.get('method')!r} "
                         "result: the cavity LOO is for the evidence methods")
    X = post["constant_data"]["X"].values
    lik = posterior_likelihood(post, family.problem_type.likelihood_type)
    g = post["gaussian_posterior"]
    with one_blas_thread():
        m, V = logit_moments(design(post, X), g["mu"].values, g["Sigma"].values)
    c, C = laplace_cavity(m, V, lik.hess(m), lik.grad(m))
    return predictive(c[:, 0], C[:, 0, 0], "cavity", lik).logpdf(lik.t)


def latent_family(problem_type: type[LatentRVM], study_name: str, *, task: str,
                  predictive: type[LatentPredictive]) -> Family:
    """The :class:`~..family.Family` of an RVM with the likelihood
    ``problem_type.likelihood_type`` on ``task``'s targets, its predictive of class
    ``predictive``. Warm refits where the likelihood has no parameters (a dispersion or a
    scale learned again is refitted cold)."""
    family = None

    def bound(fn, **extra):
        def call(*args, **kwargs):
            return fn(*args, **kwargs, family=family, **extra)
        call.__name__, call.__doc__ = fn.__name__, fn.__doc__
        return call

    refits = None
    if not problem_type.likelihood_type.param_names:
        refits = type(f"{problem_type.__name__}Refits", (CountRefits,),
                      {"problem_type": problem_type, "predictive": predictive,
                       "__module__": __name__})
    family = Family(
        kind=problem_type.kind,
        study_name=study_name,
        problem_type=problem_type,
        task=task,
        fit_methods={"evidence": fit_evidence, "evidence-mackay": fit_mackay,
                     "advi": rvm_pymc.fit_advi, "fullrank_advi": rvm_pymc.fit_fullrank_advi,
                     "nuts": rvm_pymc.fit_nuts},
        predict_kinds={"laplace": bound(predict_laplace, predictive=predictive),
                       "samples": bound(predict_samples, predictive=predictive)},
        default_predict={"evidence": "laplace", "evidence-mackay": "laplace",
                         "advi": "samples", "fullrank_advi": "samples", "nuts": "samples"},
        replicates=bound(replicates),
        draw_targets=bound(prior_targets),
        training_problem=bound(training_problem),
        warm_refits={"evidence": refits, "evidence-mackay": refits},
        optimistic="cavity",
        optimistic_loo=bound(cavity_logpdf, predictive=predictive),
        fitted_to_all="the RVM's alpha and pruning",
    )
    return family


def count_family(problem_type: type[LatentRVM], study_name: str) -> Family:
    """The :func:`latent_family` of an RVM of counts (:class:`CountPredictive`)."""
    return latent_family(problem_type, study_name, task="counts", predictive=CountPredictive)


#: The Poisson RVM for counts (T01 §3 with the Poisson likelihood, log link).
RVM_POISSON = count_family(RVMPoissonRegression, "rvm")
