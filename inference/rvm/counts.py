"""The RVM for counts with any :class:`~sparsebayes.models.likelihoods.CountLikelihood`
on ``f = Phi w``, ``w_i ~ N(0, 1/alpha_i)`` (Tipping 2001 §3's Laplace scheme with a count
likelihood and log link; PRML §7.2.3), as one
:class:`~sparsebayes.inference.family.Family` per likelihood, built by
:func:`count_family` from the problem class alone:

* type-II ML (``evidence``: Tipping & Faul 2003 on the Laplace surrogate; ``evidence-mackay``:
  T01 eq. 16) by the Laplace code of :mod:`.laplace`, the likelihood's own parameters (e.g. a
  dispersion) learned with the weights' precisions;
* NUTS / ADVI on the hierarchical PyMC model (:mod:`.pymc`, ``problem.pymc_model()``);
* the predictive :class:`CountPredictive`: the likelihood mixed over a Gaussian ``f``
  (Laplace) or over the posterior draws of ``f`` and the parameters (sampled results);
* leave-one-out: warm-started refits (:class:`CountRefits`, where the likelihood has no
  parameter to refit) and the Laplace cavity (:func:`cavity_logpdf`, Vehtari et al. 2016's
  LA-LOO).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from sparsebayes.models import RVMPoissonRegression
from sparsebayes.models.likelihoods import CountLikelihood, Poisson
from sparsebayes.models.problems import RVMCountsRecord, check_counts

from ..family import SAMPLED_FIRST, Family
from ..numerics import one_blas_thread
from ..predictive.classification import laplace_cavity, logit_moments
from ..predictive.regression import design, draw_index
from ..results import basis_from_posterior, flat_draws, prior_from_posterior
from . import laplace
from . import pymc as rvm_pymc

__all__ = ["fit_evidence", "fit_mackay", "CountPredictive", "predict_laplace",
           "predict_samples", "replicates", "training_problem", "CountRefits",
           "cavity_logpdf", "count_family", "posterior_likelihood", "RVM_POISSON"]

GH_NODES = 128  # Gauss-Hermite nodes of the integrals over a Gaussian f (tests: pmf tails)


# --------------------------------------------------------------------------------------------
# Type-II ML
# --------------------------------------------------------------------------------------------


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, alpha_min):
    if not isinstance(problem, RVMCountsRecord):
        raise TypeError(f"{method!r} here is for an RVM of counts (RVMPoissonRegression, ...), "
                        f"got {type(problem).__name__}")
    laplace.check_options(max_iter, tol, alpha_min)
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


def posterior_likelihood(post: xr.DataTree, likelihood_type: type[CountLikelihood],
                         t=None, draws: bool = False) -> CountLikelihood:
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


class CountPredictive:
    """The predictive of counts at ``n`` inputs: per input an equal-weight mixture over
    ``S`` components of the count ``likelihood`` (default :class:`Poisson`) with mean
    ``exp(f)``, ``f ~ N(means[s], vars[s])`` (Laplace: one component, Poisson-lognormal for
    the Poisson; sampled results: one component per draw with ``vars = 0``). ``means`` (S,
    n) or (n,), ``vars`` broadcastable to them; the likelihood's parameters are scalars or
    (S, 1), one per component. Integrals over ``f`` by ``GH_NODES``-point Gauss-Hermite
    quadrature."""

    def __init__(self, means, vars, kind: str = "laplace",
                 likelihood: CountLikelihood | None = None) -> None:
        means = np.atleast_2d(np.asarray(means, dtype=float))
        vars_ = np.broadcast_to(np.asarray(vars, dtype=float), means.shape)
        if not (np.all(np.isfinite(means)) and np.all(np.isfinite(vars_))):
            raise ValueError("the latent means and variances must be finite")
        if np.any(vars_ < 0):
            raise ValueError("the latent variances must be >= 0")
        self.means, self.vars, self.kind = means, vars_, kind
        self.likelihood = Poisson(np.zeros(0)) if likelihood is None else likelihood

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
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    @property
    def rate(self) -> np.ndarray:
        """The predictive mean of the rate ``exp(f)`` (= ``mean``)."""
        return self.mean

    def _nodes(self) -> tuple[np.ndarray, np.ndarray, CountLikelihood]:
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

    def _check_counts(self, counts) -> np.ndarray:
        return check_counts(counts, self.means.shape[1]).astype(float)

    def logpdf(self, counts) -> np.ndarray:
        """``ln p(t_i)`` of the given counts: ``ln sum_q w_q p(t_i | f_qi)``."""
        t = self._check_counts(counts)
        f, logw, lik = self._nodes()
        return logsumexp(lik.logpdf(t[None, :], f) + logw[:, None], axis=0)

    def cdf(self, counts) -> np.ndarray:
        """``P(t_i <= k_i) = sum_q w_q P(t <= k_i | f_qi)`` (the likelihood's cdf)."""
        k = self._check_counts(counts)
        return self._cdf(k)

    def _cdf(self, k: np.ndarray) -> np.ndarray:
        f, logw, lik = self._nodes()
        return np.exp(logw) @ lik.cdf(k[None, :], f)

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

    def interval(self, p: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Central count interval: the ``(1 - p) / 2`` and ``(1 + p) / 2`` quantiles (it holds
        at least probability ``p``)."""
        if not 0 < p < 1:
            raise ValueError(f"p must lie in (0, 1), got {p!r}")
        return self.quantile(0.5 - p / 2), self.quantile(0.5 + p / 2)

    def __repr__(self) -> str:
        return (f"CountPredictive(kind={self.kind!r}, likelihood={self.likelihood.name!r}, "
                f"n={self.means.shape[1]}, components={self.means.shape[0]})")


def _count_design(post: xr.DataTree, X_new, family: Family) -> np.ndarray:
    if post.attrs.get("problem_kind") != family.kind:
        raise TypeError(f"this predictive is for an {family.problem_type.__name__} posterior")
    return design(post, X_new)


def predict_laplace(post: xr.DataTree, X_new, *, family: Family) -> CountPredictive:
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
    return CountPredictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace", lik)


def predict_samples(post: xr.DataTree, X_new, max_draws: int | None = 2000, *,
                    family: Family) -> CountPredictive:
    """The mixture ``mean_s p(t | phi^T w_s, params_s)`` over (at most ``max_draws``, evenly
    thinned) posterior draws of ``w`` and the likelihood's parameters."""
    Phi = _count_design(post, X_new, family)
    w = flat_draws(post, "w")
    keep = draw_index(w.shape[0], max_draws)
    lik = posterior_likelihood(post, family.problem_type.likelihood_type, draws=True)
    lik = lik.with_params(**{k: v[keep] for k, v in lik.params.items()})
    return CountPredictive(w[keep] @ Phi.T, 0.0, "samples", lik)


# --------------------------------------------------------------------------------------------
# Replicates, training problems, leave-one-out
# --------------------------------------------------------------------------------------------


def replicates(post: xr.DataTree, X: np.ndarray, rng: np.random.Generator,
               training: bool = False, *, family: Family) -> np.ndarray:
    """One draw of the counts at ``X`` per posterior draw of ``w`` and of the likelihood's
    parameters: (chain, draw, n)."""
    basis, columns = basis_from_posterior(post)
    w = post["posterior"]["w"].values
    lik = family.problem_type.likelihood_type(np.zeros(0), **{
        k: post["posterior"][k].values[..., None]
        for k in family.problem_type.likelihood_type.param_names})
    return lik.draw(w @ basis.design(X, columns=columns).T, rng)


def prior_targets(Phi: np.ndarray, w: np.ndarray, beta, rng: np.random.Generator, *,
                  family: Family) -> np.ndarray:
    """Counts given draws of ``w`` (chain, draw, M) at the design ``Phi`` (the prior
    predictive), the likelihood's parameters drawn from their prior; ``beta`` unused."""
    lik_type = family.problem_type.likelihood_type
    params = lik_type.prior_draws((*w.shape[:2], 1), rng)
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

    problem_type: type[RVMCountsRecord]  # set by count_family

    def likelihood(self, rows: np.ndarray) -> CountLikelihood:
        return self.problem_type.likelihood_type(self.t[rows])

    def problem_on(self, rows: np.ndarray):
        b = self.basis
        return self.problem_type(self.X[rows], self.t[rows], kernel=b.kernel, bias=b.bias,
                                 extra_columns=b.extra, prior=self.prior, learn_width=True,
                                 centres=b.centres)

    def fold_logpdf(self, m: np.ndarray, V: np.ndarray, t_out: np.ndarray) -> np.ndarray:
        lik = self.problem_type.likelihood_type(t_out)
        return CountPredictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace",
                               lik).logpdf(t_out)


def cavity_logpdf(post: xr.DataTree, *, family: Family) -> np.ndarray:
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
    return CountPredictive(c[:, 0], C[:, 0, 0], "cavity", lik).logpdf(lik.t)


def count_family(problem_type: type[RVMCountsRecord], study_name: str) -> Family:
    """The :class:`~..family.Family` of an RVM of counts with the likelihood
    ``problem_type.likelihood_type``. Warm refits where the likelihood has no parameters
    (a dispersion learned again is refitted cold)."""
    family = None

    def bound(fn):
        def call(*args, **kwargs):
            return fn(*args, **kwargs, family=family)
        call.__name__, call.__doc__ = fn.__name__, fn.__doc__
        return call

    refits = None
    if not problem_type.likelihood_type.param_names:
        refits = type(f"{problem_type.__name__}Refits", (CountRefits,),
                      {"problem_type": problem_type, "__module__": __name__})
    family = Family(
        kind=problem_type.kind,
        study_name=study_name,
        problem_type=problem_type,
        task="counts",
        fit_methods={"evidence": fit_evidence, "evidence-mackay": fit_mackay,
                     "advi": rvm_pymc.fit_advi, "fullrank_advi": rvm_pymc.fit_fullrank_advi,
                     "nuts": rvm_pymc.fit_nuts},
        predict_kinds={"laplace": bound(predict_laplace), "samples": bound(predict_samples)},
        default_predict={"evidence": "laplace", "evidence-mackay": "laplace",
                         "advi": "samples", "fullrank_advi": "samples", "nuts": "samples"},
        replicates=bound(replicates),
        draw_targets=bound(prior_targets),
        training_problem=bound(training_problem),
        warm_refits={"evidence": refits, "evidence-mackay": refits},
        optimistic="cavity",
        optimistic_loo=bound(cavity_logpdf),
        fitted_to_all="the RVM's alpha and pruning",
        schedule_rank=SAMPLED_FIRST,
    )
    return family


#: The Poisson RVM for counts (T01 §3 with the Poisson likelihood, log link).
RVM_POISSON = count_family(RVMPoissonRegression, "rvm")
