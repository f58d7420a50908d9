"""The Gaussian-process model families: regression (Rasmussen & Williams 2006, GPML ch. 2)
and classification (GPML ch. 3), as :class:`~sparsebayes.inference.family.Family` objects."""

from __future__ import annotations

import numpy as np
import xarray as xr

from sparsebayes.models import GPClassification, GPRegression

from ..family import Family
from ..numerics import LOO_BLOCK_FLOATS, loo_from_covariance, one_blas_thread
from ..results import flat_draws
from . import classification, regression

__all__ = ["GP_REGRESSION", "GP_CLASSIFICATION", "gp_loo_logpdf", "gp_loo"]


def gp_loo_logpdf(X: np.ndarray, t: np.ndarray, length_scale: np.ndarray,
                  signal_sd: np.ndarray, noise_sd: np.ndarray) -> np.ndarray:
    """``log p(t_n | t_-n, theta_s)`` (S, N) of GP regression (GPML eqs. 5.10-5.12) for
    hyperparameter draws ``length_scale`` (S, d), ``signal_sd`` and ``noise_sd`` (S,), with
    ``C = K + noise_sd^2 I`` and ``K`` the SE-ARD covariance."""
    from sparsebayes.models.gp import se_ard_covariance

    X, t = np.asarray(X, dtype=float), np.asarray(t, dtype=float)
    ls = np.atleast_2d(length_scale)
    sf, sn = np.atleast_1d(signal_sd), np.atleast_1d(noise_sd)
    S, N = ls.shape[0], t.size
    out = np.empty((S, N))
    step = max(1, LOO_BLOCK_FLOATS // N**2)
    with one_blas_thread():
        for lo in range(0, S, step):
            hi = min(lo + step, S)
            C = np.stack([se_ard_covariance(X, None, ls[s], sf[s]) for s in range(lo, hi)])
            C[:, np.arange(N), np.arange(N)] += (sn[lo:hi] ** 2)[:, None]
            out[lo:hi] = loo_from_covariance(C, t)
    return out


def gp_loo(post: xr.DataTree) -> np.ndarray:
    """(S, N) GPML eq. 5.12 per hyperparameter draw of a GP regression result (one draw for
    type-II ML point hyperparameters); for a sparse GP, of the model ``N(0, Q + s^2 I)``
    (:meth:`~.sparse.VFEPosterior.loo_logpdf`)."""
    sparse = regression.sparse_posterior(post)
    if sparse is not None:
        return sparse.loo_logpdf()[None]
    return gp_loo_logpdf(post["constant_data"]["X"].values, post["observed_data"]["t"].values,
                         *regression.hyperparameter_draws(post))


def _problem(cls):
    def training_problem(post: xr.DataTree, rows=slice(None)):
        """The GP ``post`` was fitted to, on training ``rows``, with its fixed
        hyperparameters (attrs ``fixed``) and its inducing inputs (a sparse GP's: learned
        ones from where the fit started, so a refit learns them without the rows it leaves
        out)."""
        ds = post["posterior"]
        fixed = {k: flat_draws(post, k)[0]
                 for k in post.attrs.get("fixed", "").split() if k in ds}
        options = {k: v if v.ndim else float(v) for k, v in fixed.items()}
        data = post["constant_data"]
        if "Z_start" in data:
            options.update(inducing=data["Z_start"].values, learn_inducing=True)
        elif "Z" in data:
            options["inducing"] = data["Z"].values
        return cls(data["X"].values[rows], post["observed_data"]["t"].values[rows],
                   **options)
    return training_problem


#: Sampling first; the point fit ranks with ADVI: its exact leave-one-out refits the
#: hyperparameters at every point.
GP_SCHEDULE = {"nuts": 0, "evidence": 1}

#: GP regression (GPML ch. 2).
GP_REGRESSION = Family(
    kind=GPRegression.kind,
    study_name="gp",
    problem_type=GPRegression,
    task="regression",
    fit_methods={"evidence": regression.fit_evidence, "nuts": regression.fit_nuts},
    predict_kinds={"gp": regression.predict_gp},
    default_predict={"evidence": "gp", "nuts": "gp"},
    replicates=lambda post, X, rng, training=False: regression.target_replicates(
        post, X, rng, regression.POINT_DRAWS),
    training_problem=_problem(GPRegression),
    warm_refits={"evidence": regression.GPRefits},
    optimistic="gaussian",
    optimistic_loo=lambda post: gp_loo(post)[0],
    fitted_to_all="the GP's length scales, signal sd and noise sd",
    psis_loglik=gp_loo,
    schedule_rank=GP_SCHEDULE,
    noise=True,
    weights=False,
)

#: GP classification, binary and K > 2 (GPML ch. 3).
GP_CLASSIFICATION = Family(
    kind=GPClassification.kind,
    study_name="gp",
    problem_type=GPClassification,
    task="classification",
    fit_methods={"evidence": classification.fit_evidence, "nuts": classification.fit_nuts},
    predict_kinds={"laplace": classification.predict_laplace,
                   "plugin": classification.predict_plugin,
                   "nuts": classification.predict_nuts},
    default_predict={"evidence": "laplace", "nuts": "nuts"},
    replicates=lambda post, X, rng, training=False: classification.class_replicates(
        post, None if training else X, rng),
    training_problem=_problem(GPClassification),
    warm_refits={"evidence": classification.GPClassificationRefits},
    optimistic="cavity",
    optimistic_loo=classification.gp_laplace_cavity_logpdf,
    fitted_to_all="the GP's length scales and signal sd",
    schedule_rank=GP_SCHEDULE,
    weights=False,
)
