"""The Poisson RVM for counts: ``t_n ~ Poisson(exp(f_n))``, ``f = Phi w``,
``w_i ~ N(0, 1/alpha_i)`` (Tipping 2001 §3's Laplace scheme with the Poisson likelihood and
log link; PRML §7.2.3), as one :class:`~sparsebayes.inference.family.Family`.

* type-II ML (``evidence``: Tipping & Faul 2003 on the Laplace surrogate; ``evidence-mackay``:
  T01 eq. 16) by the Laplace code of :mod:`.laplace` with the
  :class:`~..likelihoods.Poisson` likelihood: the mode by Newton / IRLS (gradient
  ``Phi^T (t - e^f) - A w``, negative Hessian ``Phi^T diag(e^f) Phi + A``, T01 eqs. 24-26);
* NUTS / ADVI on the hierarchical PyMC model (:mod:`.pymc`, ``problem.pymc_model()``);
* the predictive :class:`CountPredictive`: a Poisson mixed over a Gaussian ``f``
  (Poisson-lognormal; Laplace) or over the posterior draws of ``f`` (sampled results);
* leave-one-out: warm-started refits (:class:`PoissonRefits`) and the Laplace cavity
  (:func:`poisson_cavity_logpdf`, Vehtari et al. 2016's LA-LOO).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import gammaincc, logsumexp

from sparsebayes.models import RVMPoissonRegression
from sparsebayes.models.problems import check_counts

from ..family import SAMPLED_FIRST, Family
from ..likelihoods import Poisson
from ..numerics import one_blas_thread
from ..predictive.classification import laplace_cavity, logit_moments
from ..predictive.regression import design, draw_index
from ..results import basis_from_posterior, flat_draws, prior_from_posterior
from . import laplace
from . import pymc as rvm_pymc

__all__ = ["fit_evidence", "fit_mackay", "CountPredictive", "predict_laplace",
           "predict_samples", "poisson_counts", "replicates", "training_problem",
           "PoissonRefits", "poisson_cavity_logpdf", "RVM_POISSON"]

GH_NODES = 128  # Gauss-Hermite nodes of the integrals over a Gaussian f (tests: pmf tails)
RATE_MAX = 1e15  # replicate draws at rates above this are drawn at this rate (numpy's bound)


# --------------------------------------------------------------------------------------------
# Type-II ML
# --------------------------------------------------------------------------------------------


def _fit(problem, algorithm, method, *, seed, max_iter, tol, draws, chains, alpha_min):
    if not isinstance(problem, RVMPoissonRegression):
        raise TypeError(f"{method!r} here is for RVMPoissonRegression, got "
                        f"{type(problem).__name__}")
    laplace.check_options(max_iter, tol, alpha_min)
    post = laplace.fit_laplace(problem, Poisson(problem.t), algorithm, method, seed=seed,
                               max_iter=max_iter, tol=tol, draws=draws, chains=chains,
                               alpha_min=alpha_min)
    post.attrs.pop("alpha_shared", None)  # one alpha per column: no classes to share over
    return post


def fit_evidence(problem, *, seed=None, max_iter: int = 10000, tol: float = 1e-3,
                 draws: int = 500, chains: int = 2,
                 alpha_min: float = laplace.ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for the Poisson RVM: Tipping & Faul's (2003) sequential algorithm on the
    Laplace surrogate ``t_hat = f + (t - e^f) / e^f`` with precisions ``B = e^f`` (TF03 eq.
    14, PRML 7.117), each run kept only if the Laplace evidence (PRML 7.114) did not fall
    (:func:`~.laplace.fit_fast`'s loop). ``w`` in the result is drawn from the Laplace
    Gaussian ``N(mu, Sigma)`` (T01 eq. 26); ``alpha_min``: floor on alpha for unit-norm
    columns; ``tol``: on the re-estimates' change in ``ln alpha`` (T&F §4.4)."""
    return _fit(problem, "fast", "evidence", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, alpha_min=alpha_min)


def fit_mackay(problem, *, seed=None, max_iter: int = 5000, tol: float = 1e-6,
               draws: int = 500, chains: int = 2,
               alpha_min: float = laplace.ALPHA_MIN) -> xr.DataTree:
    """Type-II ML for the Poisson RVM by MacKay re-estimation ``alpha_i = gamma_i / mu_i^2``
    (T01 eq. 16) around the IRLS mode, pruning at ``alpha > 1e12`` (T01 App. B.1)."""
    return _fit(problem, "mackay", "evidence-mackay", seed=seed, max_iter=max_iter, tol=tol,
                draws=draws, chains=chains, alpha_min=alpha_min)


# --------------------------------------------------------------------------------------------
# Predictive
# --------------------------------------------------------------------------------------------


class CountPredictive:
    """The predictive of counts at ``n`` inputs: per input an equal-weight mixture over
    ``S`` components of ``Poisson(exp(f))`` with ``f ~ N(means[s], vars[s])`` (Laplace:
    one Poisson-lognormal component; sampled results: one component per draw with
    ``vars = 0``). ``means`` (S, n) or (n,), ``vars`` broadcastable to them. Integrals over
    ``f`` by ``GH_NODES``-point Gauss-Hermite quadrature."""

    def __init__(self, means, vars, kind: str = "laplace") -> None:
        means = np.atleast_2d(np.asarray(means, dtype=float))
        vars_ = np.broadcast_to(np.asarray(vars, dtype=float), means.shape)
        if not (np.all(np.isfinite(means)) and np.all(np.isfinite(vars_))):
            raise ValueError("the latent means and variances must be finite")
        if np.any(vars_ < 0):
            raise ValueError("the latent variances must be >= 0")
        self.means, self.vars, self.kind = means, vars_, kind

    @property
    def mean(self) -> np.ndarray:
        """``E[t] = E[exp(f)] = mean_s exp(m_s + v_s / 2)`` (the lognormal mean)."""
        return np.mean(np.exp(self.means + 0.5 * self.vars), axis=0)

    @property
    def var(self) -> np.ndarray:
        """``Var[t] = E[exp(f)] + Var[exp(f)]`` (law of total variance; Poisson-lognormal
        ``E[exp(2f)] = exp(2m + 2v)``)."""
        second = np.mean(np.exp(2 * self.means + 2 * self.vars), axis=0)
        mean = self.mean
        return mean + np.maximum(second - mean**2, 0.0)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    @property
    def rate(self) -> np.ndarray:
        """The predictive mean of the rate ``exp(f)`` (= ``mean``)."""
        return self.mean

    def _nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Values of ``f`` (Q, n) and their log weights (Q,) (summing to 1): Gauss-Hermite
        nodes of every component (one node where all variances are 0)."""
        S, n = self.means.shape
        if not np.any(self.vars):
            return self.means, np.full(S, -np.log(S))
        x, wq = np.polynomial.hermite.hermgauss(GH_NODES)
        f = self.means[:, None, :] + np.sqrt(2 * self.vars)[:, None, :] * x[None, :, None]
        logw = np.log(wq / np.sqrt(np.pi)) - np.log(S)
        return f.reshape(S * GH_NODES, n), np.tile(logw, S)

    def _check_counts(self, counts) -> np.ndarray:
        return check_counts(counts, self.means.shape[1]).astype(float)

    def logpdf(self, counts) -> np.ndarray:
        """``ln p(t_i)`` of the given counts: ``ln sum_q w_q Poisson(t_i | exp(f_qi))``."""
        t = self._check_counts(counts)
        f, logw = self._nodes()
        return logsumexp(Poisson.logpmf(t[None, :], f) + logw[:, None], axis=0)

    def cdf(self, counts) -> np.ndarray:
        """``P(t_i <= k_i) = sum_q w_q Q(k_i + 1, exp(f_qi))`` (the Poisson CDF is the
        regularised upper incomplete gamma function)."""
        k = self._check_counts(counts)
        return self._cdf(k)

    def _cdf(self, k: np.ndarray) -> np.ndarray:
        f, logw = self._nodes()
        return np.exp(logw) @ gammaincc(k[None, :] + 1.0, Poisson.rate(f))

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
        return (f"CountPredictive(kind={self.kind!r}, n={self.means.shape[1]}, "
                f"components={self.means.shape[0]})")


def _poisson_design(post: xr.DataTree, X_new) -> np.ndarray:
    if post.attrs.get("problem_kind") != RVMPoissonRegression.kind:
        raise TypeError("this predictive is for an RVMPoissonRegression posterior")
    return design(post, X_new)


def predict_laplace(post: xr.DataTree, X_new) -> CountPredictive:
    """The predictive of a Gaussian weight posterior ``N(mu, Sigma)`` (T01 eq. 26): ``f(x)
    ~ N(phi^T mu, phi^T Sigma phi)`` and ``t ~ Poisson(exp(f))`` mixed over it."""
    Phi = _poisson_design(post, X_new)
    if "gaussian_posterior" not in post.children:
        raise ValueError(f"kind='laplace' needs a Gaussian weight posterior (evidence); this "
                         f"{post.attrs.get('method')!r} posterior has draws: use "
                         "kind='samples'")
    g = post["gaussian_posterior"]
    m, V = logit_moments(Phi, g["mu"].values, g["Sigma"].values)
    return CountPredictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace")


def predict_samples(post: xr.DataTree, X_new, max_draws: int | None = 2000
                    ) -> CountPredictive:
    """The mixture ``mean_s Poisson(t | exp(phi^T w_s))`` over (at most ``max_draws``,
    evenly thinned) posterior draws of ``w``."""
    Phi = _poisson_design(post, X_new)
    w = flat_draws(post, "w")
    w = w[draw_index(w.shape[0], max_draws)]
    return CountPredictive(w @ Phi.T, 0.0, "samples")


# --------------------------------------------------------------------------------------------
# Replicates, training problems, leave-one-out
# --------------------------------------------------------------------------------------------


def poisson_counts(Phi: np.ndarray, w: np.ndarray, beta, rng: np.random.Generator
                   ) -> np.ndarray:
    """Counts ``t ~ Poisson(exp(Phi w))`` per draw of ``w`` (chain, draw, M); ``beta``
    unused (no noise precision). Rates above ``RATE_MAX`` are drawn at it."""
    return rng.poisson(np.minimum(Poisson.rate(w @ Phi.T), RATE_MAX)).astype(np.int64)


def replicates(post: xr.DataTree, X: np.ndarray, rng: np.random.Generator,
               training: bool = False) -> np.ndarray:
    """One draw of the counts at ``X`` per posterior draw of ``w``: (chain, draw, n)."""
    basis, columns = basis_from_posterior(post)
    return poisson_counts(basis.design(X, columns=columns), post["posterior"]["w"].values,
                          None, rng)


def training_problem(post: xr.DataTree, rows=slice(None)) -> RVMPoissonRegression:
    """The :class:`RVMPoissonRegression` ``post`` was fitted to, on training ``rows``: the same
    kernel (at its fitted width), bias, extra columns, prior, width learning and centres."""
    basis, _ = basis_from_posterior(post)
    prior = prior_from_posterior(post)
    return RVMPoissonRegression(
        post["constant_data"]["X"].values[rows], post["observed_data"]["t"].values[rows],
        kernel=basis.kernel, bias=basis.bias, extra_columns=basis.extra, prior=prior,
        centres=basis.centres, learn_width=bool(int(post.attrs.get("learn_width", 0))))


class PoissonRefits(laplace.LaplaceRefits):
    """Warm-started refits of a type-II ML Poisson result without some rows: the fit's own
    loop on the other rows from the full-data model (:class:`~.laplace.LaplaceRefits`, with
    the Poisson likelihood), and the Laplace predictive (:class:`CountPredictive`) of the
    counts left out. ``max_iter``, ``tol``, ``alpha_min``: the fit's options."""

    problem_type = RVMPoissonRegression

    def likelihood(self, rows: np.ndarray) -> Poisson:
        return Poisson(self.t[rows])

    def problem_on(self, rows: np.ndarray) -> RVMPoissonRegression:
        b = self.basis
        return RVMPoissonRegression(self.X[rows], self.t[rows], kernel=b.kernel, bias=b.bias,
                                    extra_columns=b.extra, prior=self.prior, learn_width=True,
                                    centres=b.centres)

    def fold_logpdf(self, m: np.ndarray, V: np.ndarray, t_out: np.ndarray) -> np.ndarray:
        return CountPredictive(m[:, 0], np.maximum(V[:, 0, 0], 0.0), "laplace").logpdf(t_out)


def poisson_cavity_logpdf(post: xr.DataTree) -> np.ndarray:
    """``ln p(t_n | t_-n)`` (N,) by the Laplace leave-one-out of Vehtari, Mononen, Tolvanen,
    Sivula & Winther (2016, LA-LOO) at the fitted alpha: each point's Laplace site (precision
    ``e^m``, gradient ``t - e^m`` at the mode) taken out of the latent marginal
    (:func:`~..predictive.classification.laplace_cavity`) and the Poisson integrated over the
    cavity by Gauss-Hermite. Optimistic: alpha and the pruning are those fitted to all
    points (:class:`PoissonRefits` refits them)."""
    if not isinstance(post, xr.DataTree) or \
            post.attrs.get("problem_kind") != RVMPoissonRegression.kind:
        raise TypeError("post must be an RVMPoissonRegression result of fit")
    if "gaussian_posterior" not in post.children:
        raise ValueError(f"no Gaussian weight posterior in a {post.attrs.get('method')!r} "
                         "result: the cavity LOO is for the evidence methods")
    X = post["constant_data"]["X"].values
    t = post["observed_data"]["t"].values
    g = post["gaussian_posterior"]
    with one_blas_thread():
        m, V = logit_moments(design(post, X), g["mu"].values, g["Sigma"].values)
    lam = Poisson.rate(m)
    c, C = laplace_cavity(m, V, lam[:, :, None], t[:, None] - lam)
    return CountPredictive(c[:, 0], C[:, 0, 0], "cavity").logpdf(t)


#: The Poisson RVM for counts (T01 §3 with the Poisson likelihood, log link).
RVM_POISSON = Family(
    kind=RVMPoissonRegression.kind,
    study_name="rvm",
    problem_type=RVMPoissonRegression,
    task="counts",
    fit_methods={"evidence": fit_evidence, "evidence-mackay": fit_mackay,
                 "advi": rvm_pymc.fit_advi, "fullrank_advi": rvm_pymc.fit_fullrank_advi,
                 "nuts": rvm_pymc.fit_nuts},
    predict_kinds={"laplace": predict_laplace, "samples": predict_samples},
    default_predict={"evidence": "laplace", "evidence-mackay": "laplace", "advi": "samples",
                     "fullrank_advi": "samples", "nuts": "samples"},
    replicates=replicates,
    draw_targets=poisson_counts,
    training_problem=training_problem,
    warm_refits={"evidence": PoissonRefits, "evidence-mackay": PoissonRefits},
    optimistic="cavity",
    optimistic_loo=poisson_cavity_logpdf,
    fitted_to_all="the RVM's alpha and pruning",
    schedule_rank=SAMPLED_FIRST,
)
