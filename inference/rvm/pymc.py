"""Posteriors of the hierarchical PyMC models: NUTS (nutpie, PyMC, NumPyro, BlackJAX) and
ADVI / full-rank ADVI, all returned in the common DataTree layout.

Regression samples the *collapsed* model (``w`` integrated out, T01 eq. 15) and then draws
``w`` for every posterior draw of ``(alpha, beta)`` from its exact conditional Gaussian
``N(mu, Sigma)`` (T01 eqs. 12-13): Rao-Blackwellised, and free of the funnel between ``alpha`` and
``w`` that defeats NUTS and ADVI on the joint model. Classification has no closed-form marginal
over ``w``, so it integrates ``alpha`` out instead: ``w`` with its marginal Student-t prior
(T01 eq. 32), then ``alpha_i ~ Gamma(a + 1/2, b + w_i^2 / 2)``, its exact conditional, per draw.
"""

from __future__ import annotations

import sys
import time
from typing import NamedTuple

import numpy as np
import xarray as xr

from sparsebayes.models import GammaPrior, NumericalWarning, RVMRegression, SamplingWarning
from sparsebayes.models.likelihoods import likelihood_of
from sparsebayes.models.priors import data_scales, resolve_prior
from sparsebayes.models.pymc_models import auto_form, check_form, check_proper, regression_model

from .. import progress
from ..numerics import check_positive_int, one_blas_thread, show_progress, warn_user
from ..results import gaussian_log_likelihood, make_datatree, relevance_counts
from ..samplers import COMPILED_VI, SAMPLERS, check_tune, diagnose, run_sampler
from .diagnostics import pymc_vi_khat

__all__ = [
    "fit_nuts",
    "fit_advi",
    "fit_fullrank_advi",
    "conditional_weights",
    "mcmc_cost",
    "ElboConvergence",
]

FLOPS_PER_SECOND = 2e9  # one core, dense linear algebra on ~100 x 100 matrices
DEFAULT_DRAWS = 1000  # NUTS draws per chain when draws=None
RETRY_FACTOR = 2  # draws=None: the draws of the second run, if the first did not converge


# --------------------------------------------------------------------------------------------
# Validation and cost
# --------------------------------------------------------------------------------------------


def mcmc_cost(N: int, M: int, n_params: int, draws: int, tune: int, chains: int, *,
              collapsed: bool, cores: int = 2, steps_per_draw: int = 15) -> float:
    """Rough wall time (seconds) of NUTS: leapfrog steps x flops per gradient / speed.

    Collapsed regression: Woodbury Cholesky of an M x M matrix and its gradient
    (~2 M^3 + 4 N M flops); joint models: two matrix-vector products with Phi per output
    (~6 N n_params flops). ``steps_per_draw`` ~ 2^tree_depth (depth 4 is typical here).
    """
    flops = (2.0 * M**3 + 4.0 * N * M) if collapsed else 6.0 * N * n_params
    steps = float(chains) * (draws + tune) * steps_per_draw
    return steps * flops / FLOPS_PER_SECOND / max(1, min(chains, cores))


def gaussian_noise(problem) -> bool:
    """Whether the problem is RVM regression (Gaussian noise, T01 eq. 4: ``w`` integrated
    out in closed form, eq. 15); every other RVM problem has a non-Gaussian likelihood on
    ``f = Phi w`` (:func:`~sparsebayes.models.likelihoods.likelihood_of`) and integrates
    ``alpha`` out."""
    return isinstance(problem, RVMRegression)


def _noise_fixed(problem) -> bool:
    return gaussian_noise(problem) and problem.noise_sd is not None


def _check_prior(problem, prior, method: str) -> GammaPrior:
    prior = resolve_prior(problem, prior)
    needs_beta = gaussian_noise(problem) and problem.noise_sd is None
    check_proper(prior, method, needs_beta=needs_beta)
    return prior



# --------------------------------------------------------------------------------------------
# Rao-Blackwellised weights and log likelihoods
# --------------------------------------------------------------------------------------------


def conditional_weights(Phi: np.ndarray, t: np.ndarray, alpha: np.ndarray, beta: np.ndarray,
                        rng: np.random.Generator, chunk: int = 256
                        ) -> tuple[np.ndarray, np.ndarray]:
    """For each draw ``(alpha_s, beta_s)`` (leading dims ``S``): ``mu_s`` and a draw
    ``w_s ~ N(mu_s, Sigma_s)`` with ``Sigma = (A + beta Phi^T Phi)^-1``, ``mu = beta Sigma
    Phi^T t`` (T01 eqs. 12-13), by batched Cholesky of ``H = Sigma^-1`` (``chunk`` draws
    at a time, ``H`` scaled to unit diagonal): ``w = mu + L^-T z``. Returns ``(w, mu)`` with
    the shape of ``alpha``."""
    from scipy.linalg import solve_triangular

    lead = alpha.shape[:-1]
    M = alpha.shape[-1]
    A = alpha.reshape(-1, M)
    B = np.broadcast_to(beta, lead).reshape(-1)
    G = Phi.T @ Phi
    h = Phi.T @ t
    W = np.empty_like(A)
    MU = np.empty_like(A)
    Z = rng.standard_normal(A.shape)
    diag = np.arange(M)
    for lo in range(0, A.shape[0], chunk):
        a, b = A[lo : lo + chunk], B[lo : lo + chunk]
        H = b[:, None, None] * G
        H[:, diag, diag] += a
        d = np.sqrt(H[:, diag, diag])  # symmetric diagonal scaling: H = D Hs D
        L = np.linalg.cholesky(H / (d[:, :, None] * d[:, None, :]))
        y = solve_triangular(L, (b[:, None] * h / d)[..., None], lower=True)
        # L^T [x, v] = [y, z]: mu = x / d, w = mu + v / d
        xv = solve_triangular(L, np.concatenate([y, Z[lo : lo + chunk, :, None]], axis=2),
                              lower=True, trans="T")
        MU[lo : lo + chunk] = xv[..., 0] / d
        W[lo : lo + chunk] = MU[lo : lo + chunk] + xv[..., 1] / d
    return W.reshape(alpha.shape), MU.reshape(alpha.shape)


def _assemble(problem, model, *, alpha, beta, w, extra_stats, attrs, rng,
              likelihood_draws=None) -> xr.DataTree:
    """The common layout from posterior arrays with leading (chain, draw);
    ``likelihood_draws``: those of the likelihood's own parameters (:func:`_likelihood_draws`)."""
    basis = problem.basis
    Phi = basis.design(problem.X)
    columns = np.arange(basis.n_columns)
    posterior = {"alpha": alpha}
    if gaussian_noise(problem):
        if w is None:
            with one_blas_thread():
                w, _ = conditional_weights(Phi, problem.t, alpha, beta, rng)
        posterior.update(w=w, beta=beta, noise_sd=1.0 / np.sqrt(beta))  # z: make_datatree
        loglik = gaussian_log_likelihood(problem.t, w @ Phi.T, beta)
        extra = {}
    else:
        posterior["w"] = w
        if w.ndim == 4:
            F = np.einsum("nm,cdmk->cdnk", Phi, w)
            extra = {"extra_dims": {"w": ["basis", "class"], "alpha": ["basis", "class"],
                                    "z": ["basis", "class"]},
                     "extra_coords": {"class": np.asarray(problem.classes).astype(str)}}
        else:
            F = w @ Phi.T
            extra = {}
            if getattr(problem, "classes", None) is not None:
                attrs["positive_class"] = str(problem.classes[1])
        softmax_model = F.ndim == 4  # (chain, draw, n, K); binary: (chain, draw, n)
        lik = likelihood_of(problem, softmax_model)
        attrs["likelihood"] = lik.name
        if likelihood_draws:
            posterior.update(likelihood_draws)
            lik = lik.with_params(**{k: v[..., None] for k, v in likelihood_draws.items()})
        loglik = lik.loglik(F if softmax_model else F[..., None])
    dt = make_datatree(problem, basis=basis, columns=columns, posterior=posterior,
                       log_likelihood=loglik, sample_stats=extra_stats, attrs=attrs, **extra)
    dt.attrs.update(relevance_counts(basis, columns, _gamma(Phi, posterior, problem)))
    return dt


def _gamma(Phi, posterior, problem) -> np.ndarray:
    """Per column, how well-determined its weight is, ``gamma_i = 1 - alpha_i Sigma_ii``
    (T01 eq. 17; MacKay 1992), at the posterior median of ``alpha`` (and ``beta``); their sum
    is the effective number of relevant columns. Regression: ``Sigma = (A + beta Phi^T
    Phi)^-1`` (T01 eq. 13); classification: the Laplace form ``Sigma = (A + Phi^T B
    Phi)^-1`` (T01 eq. 26) with ``B`` the logistic (softmax: per-class) curvature at the
    posterior-mean logits, summed over classes.

    A count of ``gamma_i > threshold`` is not used: with correlated basis functions (e.g.
    diabetes, width 5) the sampled posterior spreads the relevance over many of them, so at
    the median ``alpha`` no single ``gamma_i`` exceeded 0.1 (max 0.096, count 0) while
    ``sum gamma = 5.4`` against the evidence method's 6 relevance vectors."""
    alpha = np.median(posterior["alpha"], axis=(0, 1))
    M = alpha.shape[0]
    if gaussian_noise(problem):
        curv = np.full((Phi.shape[0], 1), float(np.median(posterior["beta"])))
        cols = alpha[:, None]
    else:
        F = Phi @ np.mean(posterior["w"], axis=(0, 1))
        F = F[:, None] if F.ndim == 1 else F
        lik = likelihood_of(problem, softmax_model=F.shape[1] > 1)
        curv = np.einsum("nkk->nk", lik.hess(F))  # per class: y (1 - y) (T01 eq. 25)
        cols = alpha[:, None] if alpha.ndim == 1 else alpha
    gamma = np.zeros(M)
    for k in range(cols.shape[1]):
        H = Phi.T @ (curv[:, [k]] * Phi)
        H[np.diag_indices_from(H)] += cols[:, k]
        gamma += 1.0 - cols[:, k] * np.diag(np.linalg.inv(H))  # H is SPD
    return gamma


# --------------------------------------------------------------------------------------------
# NUTS
# --------------------------------------------------------------------------------------------


def _draws(problem, post: xr.Dataset, prior: GammaPrior, collapsed: bool,
           rng: np.random.Generator, shape: tuple[int, int] | None = None):
    """``(alpha, beta, w)`` with leading (chain, draw) from a sampled or VI posterior
    (``shape`` reshapes VI's (1, chains x draws)); ``alpha`` drawn by
    :func:`conditional_alpha` for collapsed classification, ``w`` left None for collapsed
    regression (drawn later by :func:`conditional_weights`), ``beta`` None for
    classification."""
    def get(v):
        arr = post[v].values
        return arr if shape is None else arr.reshape(*shape, *arr.shape[2:])

    if not gaussian_noise(problem):
        w = get("w")
        return (conditional_alpha(w, prior, rng) if collapsed else get("alpha")), None, w
    alpha = get("alpha")
    if "beta" in post and post["beta"].ndim >= 2:
        beta = get("beta")
    else:  # noise fixed
        beta = np.full(alpha.shape[:2], 1.0 / problem.noise_sd**2)
    return alpha, beta, (None if collapsed else get("w"))


def _likelihood_names(problem) -> tuple[str, ...]:
    """The likelihood's own parameters (e.g. a dispersion); none for Gaussian noise."""
    return () if gaussian_noise(problem) else tuple(likelihood_of(problem).param_names)


def _likelihood_draws(problem, post: xr.Dataset, shape: tuple[int, int] | None = None
                      ) -> dict:
    """Draws (chain, draw) of the likelihood's own parameters (:func:`_likelihood_names`)
    from a sampled or VI posterior."""
    out = {}
    for name in _likelihood_names(problem):
        arr = post[name].values
        out[name] = arr if shape is None else arr.reshape(shape)
    return out


def _model_for(problem, prior, collapsed: bool, likelihood, form: str, sampler: str
               ) -> tuple[object, CompiledKey | None, dict]:
    """The PyMC model ``sampler`` runs, its :func:`_compiled_key`, and the attrs naming the
    collapsed regression likelihood's form (``form="auto"``: :func:`auto_form` for this size
    and sampler; ``{}`` for the other models)."""
    woodbury = collapsed and gaussian_noise(problem)  # the collapsed regression model
    if woodbury and form == "auto":
        form = auto_form(problem.X.shape[0], problem.basis.n_columns, sampler)
    if gaussian_noise(problem):
        model = regression_model(problem, collapsed=collapsed, prior=prior, form=form)
    else:
        model = problem.pymc_model(prior=prior, likelihood=likelihood, collapsed=collapsed)
    attrs = {"collapsed_form": model.rvm_info["form"]} if woodbury else {}
    return model, _compiled_key(problem, model, collapsed, likelihood), attrs


class CompiledKey(NamedTuple):
    """What a compiled model depends on besides its ``pm.Data`` (see :func:`_compiled_key`)."""

    kind: str
    form: str | None
    softmax: bool | None
    likelihood: str | None
    noise_sd: float | None
    n_obs: int
    n_columns: int
    n_features: int
    n_classes: int


def _compiled_key(problem, model, collapsed: bool, likelihood) -> CompiledKey | None:
    """The :class:`CompiledKey` of ``problem``'s model: its kind, form and likelihood, the
    shapes and a fixed noise level (a constant of the graph). ``None`` for the joint (not
    collapsed) models, whose design is built in the graph with the centres and the kernel
    as constants: they are compiled for every fit."""
    if not collapsed:
        return None
    n_obs, n_features = problem.X.shape
    return CompiledKey(problem.kind, model.rvm_info.get("form"), model.rvm_info.get("softmax"),
                       likelihood, getattr(problem, "noise_sd", None), n_obs,
                       problem.basis.n_columns, n_features, getattr(problem, "n_classes", 1))


def conditional_alpha(w: np.ndarray, prior: GammaPrior, rng: np.random.Generator
                      ) -> np.ndarray:
    """Draws of ``alpha_i | w_i ~ Gamma(a + 1/2, rate b + w_i^2 / 2)``: the exact conditional
    under ``w_i | alpha_i ~ N(0, 1/alpha_i)``, ``alpha_i ~ Gamma(a, b)`` (T01 eqs. 5-6;
    ``alpha`` is independent of ``t`` given ``w``)."""
    return rng.gamma(prior.a + 0.5, 1.0 / (prior.b + 0.5 * np.asarray(w) ** 2))


def fit_nuts(problem, *, seed: int | None = None, sampler: str = "nutpie",
             draws: int | None = None,
             tune: int = 1000, chains: int = 4, cores: int | None = None,
             target_accept: float | None = None, prior: GammaPrior | None = None,
             collapsed: bool | None = None, likelihood: str | None = None,
             max_seconds: float = 600.0, warn: bool = True, adaptation: str | None = None,
             progressbar: bool | None = None, form: str = "auto") -> xr.DataTree:
    """Full posterior by NUTS.

    Regression: the collapsed model (``collapsed=False`` samples the naive non-centred joint
    model, for comparison only) and ``w`` drawn from ``N(mu(alpha, beta), Sigma(alpha,
    beta))`` per draw. Classification: ``alpha`` integrated out (``w`` with its Student-t
    prior, T01 eq. 32) and ``alpha`` drawn from ``p(alpha | w)`` per draw
    (:func:`conditional_alpha`); ``collapsed=False`` samples the non-centred joint model.

    Parameters
    ----------
    sampler : "nutpie" (default; numba, compiled once per model shape and reused),
        "pymc", or the JAX samplers "numpyro" / "blackjax" (optional extra ``[jax]``).
    draws, tune, chains : per chain; ``cores`` defaults to min(chains, 2). ``draws=None``:
        ``DEFAULT_DRAWS``, and when those do not pass :func:`diagnose` over every variable
        (R-hat at most 1.01, bulk and tail ESS at least 100 per chain; Vehtari et al. 2021),
        one more run with ``RETRY_FACTOR`` times as many (a log line says so); the result
        is the second run, its ``compile_time`` and ``sampling_time`` both runs'.
    target_accept : NUTS step-size adaptation target; ``None``: 0.9 for regression, 0.95
        for classification (the joint model's heavier-tailed weights: 0 divergences in
        4 x 1000 draws on Ripley-100 for two seeds, against 0 and 1 at 0.9).
    prior : proper Gamma hyperprior; ``None`` takes ``problem.prior`` or
        :func:`~sparsebayes.models.pymc_models.default_sampling_prior`. Improper priors
        raise ``ValueError`` (the posterior would be improper).
    max_seconds : warn (:class:`SamplingWarning`, with the estimate) before starting when
        :func:`mcmc_cost` expects a longer run.
    warn : warn when divergences, R-hat or ESS look bad (see :func:`diagnose`).
    adaptation : nutpie's mass-matrix adaptation, "diag" or "low_rank" (a diagonal plus the
        leading directions fitted to the draws and their gradients by the Fisher divergence,
        Seyboldt, Carlson & Carpenter 2026);
        ``None``: "low_rank" for the models with a latent ``f`` (classification, counts,
        Student-t: the heavy-tailed weights of T01 eq. 32 correlate, so a diagonal scale
        leaves NUTS at its deepest trees), "diag" for the collapsed regression (a low-rank
        scale on ``ln alpha`` can leave a chain stuck where a diagonal one mixes).
    progressbar : the sampler's progress bar (nutpie's or PyMC's); ``None``: on in an
        interactive session, off under CI or without a terminal (:func:`show_progress`).
        Without a bar, nutpie's progress goes to the log (logger ``"sparsebayes"``, a line
        at every tenth of the draws; :mod:`~sparsebayes.inference.progress`).
    form : the collapsed regression likelihood's form
        (:func:`~sparsebayes.models.pymc_models.regression_model`): "auto"
        (:func:`~sparsebayes.models.pymc_models.auto_form`: the closed-form-gradient Op of T01
        App. A under nutpie, the Woodbury graph PyTensor differentiates under the other
        samplers), "woodbury" (the Op), "woodbury-graph" or "direct"; other models take only
        "auto".
    """
    if adaptation is None:
        adaptation = "diag" if gaussian_noise(problem) else "low_rank"
    if adaptation not in ("diag", "low_rank"):
        raise ValueError(f"adaptation must be 'diag' or 'low_rank', got {adaptation!r}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {SAMPLERS}")
    again = draws is None
    draws = DEFAULT_DRAWS if again else check_positive_int("draws", draws)
    chains = check_positive_int("chains", chains)
    tune = check_tune(tune, sampler)
    progressbar = show_progress(progressbar)
    if target_accept is None:
        target_accept = 0.9 if gaussian_noise(problem) else 0.95
    if not (isinstance(target_accept, float | int) and 0 < target_accept < 1):
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
    cores = min(chains, 2) if cores is None else check_positive_int("cores", cores)
    if collapsed is None:
        collapsed = True
    woodbury = collapsed and gaussian_noise(problem)  # the collapsed regression model
    check_form(form, woodbury)
    prior = _check_prior(problem, prior, "NUTS")
    N = problem.X.shape[0]
    M = problem.basis.n_columns
    K = getattr(problem, "n_classes", 1)  # class count: 1 for the other problems
    n_out = K if K > 2 or likelihood == "softmax" else 1
    n_params = M * n_out * (1 if collapsed else 2) + 1
    cost = mcmc_cost(N, M, n_params, draws, tune, chains, collapsed=woodbury, cores=cores)
    if progress.LONG_SECONDS < cost <= max_seconds:
        progress.logger.info(
            "NUTS on N=%d, M=%d (%d parameters, %d x %d iterations): expect roughly %.0f s "
            "by the cost model (progress lines give the measured rate)", N, M, n_params, chains,
            draws + tune, cost)
    if cost > max_seconds:
        warn_user(
            f"this NUTS run is large (N={N}, M={M}, {n_params} parameters, {chains} x "
            f"{draws + tune} iterations): expect roughly {cost / 60:.0f} minutes "
            f"(about {mcmc_cost(N, M, n_params, 1, 0, 1, collapsed=woodbury) * 1e3:.1f} ms "
            "per draw and chain). Consider the 'evidence' or 'advi' methods, fewer draws, "
            "or a subset of the basis.", SamplingWarning)
    model, key, form_attrs = _model_for(problem, prior, collapsed, likelihood, form, sampler)
    seed_int = int(np.random.default_rng(seed).integers(2**31 - 1))

    def run(draws: int) -> xr.DataTree:
        with one_blas_thread():
            post_ds, stats, t_compile, t_sample = run_sampler(
                model, sampler, draws=draws, tune=tune, chains=chains, cores=cores,
                seed=seed_int, target_accept=float(target_accept), key=key,
                adaptation=adaptation, progressbar=progressbar)
        rng = np.random.default_rng(None if seed is None else seed + 1)
        alpha, beta, w = _draws(problem, post_ds, prior, collapsed, rng)
        attrs = {
            "sampler": sampler,
            "collapsed": int(collapsed),
            "prior": prior.as_array(),
            "draws": draws, "tune": tune, "chains": chains,
            "target_accept": float(target_accept),
            "adaptation": adaptation,
            "compile_time": t_compile,
            "sampling_time": t_sample,
            "noise_fixed": int(_noise_fixed(problem)),
            "hyperparameters": "sampled",
            **form_attrs,
        }
        return _assemble(problem, model, alpha=alpha, beta=beta, w=w, extra_stats=stats,
                         attrs=attrs, rng=rng, likelihood_draws=_likelihood_draws(problem,
                                                                                  post_ds))

    dt = run(draws)
    likelihood_names = _likelihood_names(problem)
    if again and not diagnose(dt, ("alpha", "beta", "w", *likelihood_names), warn=False)["ok"]:
        progress.logger.info("NUTS at %d x %d draws did not converge by R-hat and ESS over "
                             "every variable: sampling again with %d x %d", chains, draws,
                             chains, RETRY_FACTOR * draws)
        first = dt.attrs
        dt = run(RETRY_FACTOR * draws)
        for key in ("compile_time", "sampling_time"):  # the second run reuses the compile
            dt.attrs[key] += first[key]
    sampled = ("alpha", "beta", "w")
    if collapsed:
        sampled = ("alpha", "beta") if gaussian_noise(problem) else ("w",)
    sampled += likelihood_names
    diag = diagnose(dt, sampled, warn=warn)
    dt.attrs.update(n_divergent=diag["n_divergent"], max_rhat=diag["max_rhat"],
                    min_ess_bulk=diag["min_ess_bulk"], min_ess_tail=diag["min_ess_tail"],
                    converged=int(diag["ok"]))
    return dt


# --------------------------------------------------------------------------------------------
# ADVI
# --------------------------------------------------------------------------------------------


class ElboConvergence:
    """``pm.fit`` callback: every ``window`` iterations compare the mean loss (-ELBO) of the
    last window with the one before; stop when they differ by less than
    ``max(tol |mean|, 2 x the standard error of the difference)``: the ELBO has stopped
    rising beyond its Monte Carlo noise. ``converged`` records whether it stopped."""

    def __init__(self, window: int = 500, tol: float = 1e-4) -> None:
        self.window = window
        self.tol = tol
        self.converged = False

    def __call__(self, approx, losses, i) -> None:
        w = self.window
        if losses is None or i % w or len(losses) < 2 * w:
            return
        last, prev = losses[-w:], losses[-2 * w:-w]
        last, prev = last[np.isfinite(last)], prev[np.isfinite(prev)]
        if last.size < w // 2 or prev.size < w // 2:
            return
        diff = abs(last.mean() - prev.mean())
        se = np.sqrt(last.var() / last.size + prev.var() / prev.size)
        if diff < max(self.tol * abs(last.mean()), 2 * se):
            self.converged = True
            raise StopIteration(f"ELBO converged after {i} iterations")


def _start_point(problem, model) -> dict:
    """ADVI start: every ``alpha`` at the scale of a weight that alone explains ``t`` and the
    noise variance at a tenth of ``var(t)`` (as the evidence method starts); ``w = 0`` for
    the collapsed classification model (no ``alpha``); a latent likelihood's own parameters
    that are free variables of the model at their type-II ML start (e.g. a Student-t's
    scale at a tenth of ``sd(t)``: from its prior's scale, mean-field ADVI on a full basis
    ends in the optimum where the noise explains the targets)."""
    alpha_unit, var_t = data_scales(problem)
    start = {}
    if hasattr(problem, "likelihood_type"):
        free = {v.name for v in model.free_RVs}
        start = {k: np.asarray(v, dtype=float) for k, v in problem.likelihood().params.items()
                 if k in free}
    if "alpha" not in model.named_vars:
        return start
    start["alpha"] = np.full(model["alpha"].shape.eval(), alpha_unit)
    if gaussian_noise(problem) and problem.noise_sd is None:
        start["beta"] = np.asarray(10.0 / var_t)
    return start


VI_LEARNING_RATE = 0.01  # Adam's step on q's mean (see vi_optimizer)


def vi_optimizer(learning_rate: float, method: str, model):
    """``pm.fit``'s ``obj_optimizer``: Adam (Kingma & Ba 2015) at ``learning_rate`` on ``q``'s
    mean (and mean-field scales), and for full-rank ADVI at ``learning_rate / sqrt(d)`` on
    the Cholesky factor ``L`` of its d x d covariance. Adam moves every parameter by about
    its rate per step, so a draw ``mean + L z`` moves ``sqrt(d)`` times further through
    ``L`` than through the mean; at one rate for both the noise in ``L`` swamped the ELBO on
    breast cancer (d = 570: ELBO -6263 at rate 0.002, against -503 with ``L`` at
    0.01 / sqrt(570) and the mean at 0.01; sinc N = 100: -250 against -63)."""
    import pymc as pm
    from pymc.variational.updates import get_or_compute_grads

    d = sum(np.size(v) for v in model.initial_point().values())  # dimension of q
    scale_rate = learning_rate / np.sqrt(d) if method == "fullrank_advi" else learning_rate

    def optimizer(loss_or_grads=None, params=None):
        updates = {}
        for grad, param in zip(get_or_compute_grads(loss_or_grads, params), params,
                               strict=True):
            rate = learning_rate if param.name == "mu" else scale_rate
            updates.update(pm.adam([grad], [param], learning_rate=rate))
        return updates

    return optimizer


def _divergence_advice(name: str, prior, rate: float) -> str:
    """The error of an ELBO optimisation that ended in NaN twice: what to do first."""
    return (f"Pass a smaller learning_rate (e.g. learning_rate={rate / 10:g}) or use "
            f"method='evidence' or 'nuts': {name} diverged (NaN in the ELBO optimisation at "
            f"learning_rate={10 * rate:g} and {rate:g}, hyperprior {prior}).")


def _fit_vi(problem, method: str, *, seed, max_iter, tol, window, learning_rate, draws,
            chains, prior, likelihood, collapsed, progressbar) -> xr.DataTree:
    draws = check_positive_int("draws", draws)
    chains = check_positive_int("chains", chains)
    max_iter = check_positive_int("max_iter", max_iter)
    window = check_positive_int("window", window)
    progressbar = show_progress(progressbar)
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    if not (learning_rate is None or (isinstance(learning_rate, float | int)
                                      and learning_rate > 0)):
        raise ValueError(f"learning_rate must be > 0 or None, got {learning_rate!r}")
    name = "ADVI" if method == "advi" else "full-rank ADVI"
    prior = _check_prior(problem, prior, name)
    collapsed = bool(collapsed)
    model, key, form_attrs = _model_for(problem, prior, collapsed, likelihood, "auto", method)
    rate = VI_LEARNING_RATE if learning_rate is None else float(learning_rate)
    seed_int = int(np.random.default_rng(seed).integers(2**31 - 1))
    start = _start_point(problem, model)
    start_time = time.perf_counter()
    t_compile = 0.0
    with one_blas_thread():
        for attempt in (0, 1):  # a NaN: once more at a tenth of the rate
            run, seconds = COMPILED_VI.run(
                model, None if key is None else (method, rate, key), method,
                lambda m, rate=rate: vi_optimizer(rate, method, m))
            t_compile += seconds
            run.reset(start, seed_int)
            callback = ElboConvergence(window=window, tol=tol)
            try:
                hist = run.iterate(max_iter, callback, progressbar, name)
                break
            except FloatingPointError:
                if attempt == 0:
                    rate /= 10
                    continue
                raise FloatingPointError(_divergence_advice(name, prior, rate)) from None
        if attempt:
            warn_user(f"{name} diverged (NaN in the ELBO) at learning_rate={10 * rate:g}; refitted "
                      f"at {rate:g}", NumericalWarning)
        approx = run.approx
        sample = approx.sample(draws * chains, random_seed=seed_int + 1)
        t_fit = time.perf_counter() - start_time - t_compile
        khat = pymc_vi_khat(approx, run.model, seed=seed, logp=run.logp)
    post = sample["posterior"].to_dataset()
    rng = np.random.default_rng(None if seed is None else seed + 1)
    alpha, beta, w = _draws(problem, post, prior, collapsed, rng, shape=(chains, draws))
    likelihood_draws = _likelihood_draws(problem, post, shape=(chains, draws))
    elbo = float(-np.mean(hist[-window:]))
    if not callback.converged:
        warn_user(f"{name} did not converge in max_iter={max_iter} iterations (the ELBO still "
              "rises beyond its noise); the result is the last iterate (converged=False)",
              SamplingWarning)
    elif progressbar:  # in place of PyMC's "Interrupted at ..." line
        print(f"{name} converged after {hist.size:,} iterations (ELBO {elbo:,.5g})",
              file=sys.stderr)
    attrs = {
        "converged": int(callback.converged),
        "n_iter": int(hist.size),
        "elbo": elbo,
        "fit_time": t_fit,
        "compile_time": t_compile,
        "learning_rate": rate,
        "psis_khat": khat,
        "collapsed": int(collapsed),
        "prior": prior.as_array(),
        "noise_fixed": int(_noise_fixed(problem)),
        "hyperparameters": "variational",  # independent draws: the chain has no meaning
        **form_attrs,
    }
    return _assemble(problem, model, alpha=alpha, beta=beta, w=w,
                     extra_stats={"elbo": (("iteration",), -hist)}, attrs=attrs, rng=rng,
                     likelihood_draws=likelihood_draws)


def fit_advi(problem, *, seed: int | None = None, max_iter: int = 30000, tol: float = 1e-4,
             window: int = 500, learning_rate: float | None = None, draws: int = 500,
             chains: int = 2, prior: GammaPrior | None = None,
             likelihood: str | None = None, collapsed: bool = True,
             progressbar: bool | None = None) -> xr.DataTree:
    """Mean-field ADVI (``pm.fit(method="advi")``, Adam) on the collapsed models (regression:
    ``w`` integrated out; classification: ``alpha`` integrated out, as :func:`fit_nuts`),
    stopped by :class:`ElboConvergence`; ``sample_stats.elbo`` is the ELBO trace. Proper
    priors only (see :func:`fit_nuts`); ``collapsed=False`` fits the non-centred joint
    model (for comparison). ``progressbar``: PyMC's bar and, at convergence, a line "ADVI
    converged after n iterations"; ``None``: on in an interactive session only
    (:func:`show_progress`).

    ``learning_rate``: Adam's step on ``q``'s mean, ``None``: ``VI_LEARNING_RATE`` (0.01;
    :func:`vi_optimizer`). An optimisation that ends in NaN is redone once at a tenth of the
    rate (with a ``NumericalWarning``); a second NaN raises ``FloatingPointError`` saying
    what to do. ``attrs``: ``learning_rate`` used, ``psis_khat``: the Pareto k-hat of ``q``
    against the model's joint density (Yao et al. 2018; below 0.7 usable,
    :func:`~.diagnostics.pymc_vi_khat`)."""
    return _fit_vi(problem, "advi", seed=seed, max_iter=max_iter, tol=tol, window=window,
                   learning_rate=learning_rate, draws=draws, chains=chains, prior=prior,
                   likelihood=likelihood, collapsed=collapsed, progressbar=progressbar)


def fit_fullrank_advi(problem, *, seed: int | None = None, max_iter: int = 30000,
                      tol: float = 1e-4, window: int = 500,
                      learning_rate: float | None = None,
                      draws: int = 500, chains: int = 2, prior: GammaPrior | None = None,
                      likelihood: str | None = None, collapsed: bool = True,
                      progressbar: bool | None = None) -> xr.DataTree:
    """Full-rank ADVI (``pm.fit(method="fullrank_advi")``); otherwise as :func:`fit_advi`."""
    return _fit_vi(problem, "fullrank_advi", seed=seed, max_iter=max_iter, tol=tol,
                   window=window, learning_rate=learning_rate, draws=draws, chains=chains,
                   prior=prior, likelihood=likelihood, collapsed=collapsed,
                   progressbar=progressbar)
