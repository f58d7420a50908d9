"""The RVM's model families: regression (Gaussian noise, T01 eqs. 4-22) and classification
(Bernoulli-logit or softmax, T01 eqs. 23-28), as :class:`~sparsebayes.inference.family.Family`
objects."""

from __future__ import annotations

import numpy as np
import xarray as xr

from sparsebayes.models import RVMClassification, RVMRegression
from sparsebayes.models.likelihoods import Bernoulli, Softmax

from ..family import Family
from ..numerics import gaussian_loo_logpdf
from ..predictive import classification as class_predictive
from ..predictive import regression as regression_predictive
from ..predictive.regression import beta_draws, design
from ..results import basis_from_posterior, flat_draws, prior_from_posterior
from . import evidence, laplace, vrvm, vrvm_classification
from . import pymc as rvm_pymc

__all__ = ["RVM_REGRESSION", "RVM_CLASSIFICATION", "regression_targets",
           "class_targets", "gaussian_loo", "weight_replicates"]


def regression_targets(Phi: np.ndarray, w: np.ndarray, beta: np.ndarray | None,
                       rng: np.random.Generator, targets=None) -> np.ndarray:
    """``t = Phi w + eps``, ``eps ~ N(0, 1/beta)`` per draw of ``w`` (chain, draw, M) and
    ``beta`` (chain, draw): T01 eq. 4 (the training ``targets`` unused)."""
    mean = w @ Phi.T
    return mean + rng.standard_normal(mean.shape) / np.sqrt(beta)[..., None]


def class_targets(Phi: np.ndarray, w: np.ndarray, beta: np.ndarray | None,
                  rng: np.random.Generator, targets=None) -> np.ndarray:
    """A class code per draw of ``w``: Bernoulli-logit (T01 eq. 23; ``w`` (chain, draw, M)
    is the logit weight of ``classes[1]``) or softmax (eq. 28; ``w`` (chain, draw, M, K))."""
    if w.ndim == 3:
        return Bernoulli(np.zeros(0)).draw(w @ Phi.T, rng)
    return Softmax(np.zeros(0), w.shape[-1]).draw(np.einsum("nm,cdmk->cdnk", Phi, w), rng)


def weight_replicates(draw_targets):
    """The replicate drawer of an RVM family whose targets given the weights are drawn by
    ``draw_targets(Phi, w, beta, rng)``: one draw of ``t`` at ``X`` per posterior draw."""
    def replicates(post: xr.DataTree, X: np.ndarray, rng: np.random.Generator,
                   training: bool = False) -> np.ndarray:
        basis, columns = basis_from_posterior(post)
        beta = post["posterior"]["beta"].values if "beta" in post["posterior"] else None
        return draw_targets(basis.design(X, columns=columns), post["posterior"]["w"].values,
                            beta, rng)
    return replicates


def _basis_options(post: xr.DataTree) -> dict:
    basis, _ = basis_from_posterior(post)
    return {"kernel": basis.kernel, "bias": basis.bias, "extra_columns": basis.extra,
            "prior": prior_from_posterior(post), "centres": basis.centres,
            "learn_width": bool(int(post.attrs.get("learn_width", 0)))}


def regression_problem(post: xr.DataTree, rows=slice(None)) -> RVMRegression:
    """The RVM regression ``post`` was fitted to, on training ``rows``: the same kernel (at
    its fitted width), bias, extra columns, fixed noise, prior, width learning and centres."""
    noise_sd = None
    if int(post.attrs.get("noise_fixed", 0)):
        noise_sd = float(post["posterior"]["noise_sd"].values.reshape(-1)[0])
    return RVMRegression(post["constant_data"]["X"].values[rows],
                         post["observed_data"]["t"].values[rows], noise_sd=noise_sd,
                         **_basis_options(post))


def classification_problem(post: xr.DataTree, rows=slice(None)) -> RVMClassification:
    """The RVM classification ``post`` was fitted to, on training ``rows`` (the labels are
    the class codes 0..K-1)."""
    return RVMClassification(post["constant_data"]["X"].values[rows],
                             post["observed_data"]["t"].values[rows], **_basis_options(post))


def hyperparameter_draws(post: xr.DataTree) -> tuple[np.ndarray, np.ndarray]:
    """Draws (S, M) of ``alpha`` and (S,) of ``beta``; type-II ML results give one draw."""
    if "gaussian_posterior" in post.children:
        g = post["gaussian_posterior"]
        return g["alpha"].values[None], np.array([float(g["beta"])])
    return flat_draws(post, "alpha"), beta_draws(post)


def gaussian_loo(post: xr.DataTree) -> np.ndarray:
    """(S, N) ``log p(t_n | t_-n, alpha_s, beta_s)`` with ``w`` integrated out, for each
    hyperparameter draw (GPML eqs. 5.10-5.12 with T01 eq. 15's covariance)."""
    X = post["constant_data"]["X"].values
    return gaussian_loo_logpdf(design(post, X), post["observed_data"]["t"].values,
                               *hyperparameter_draws(post))


#: RVM regression: Gaussian noise (T01 eqs. 4-22).
RVM_REGRESSION = Family(
    kind=RVMRegression.kind,
    study_name="rvm",
    problem_type=RVMRegression,
    task="regression",
    fit_methods={"evidence": evidence.fit_fast, "evidence-mackay": evidence.fit_mackay,
                 "vrvm": vrvm.fit_vrvm, "advi": rvm_pymc.fit_advi,
                 "fullrank_advi": rvm_pymc.fit_fullrank_advi, "nuts": rvm_pymc.fit_nuts},
    predict_kinds={"rvm": regression_predictive.predict_rvm,
                   "rvm*": regression_predictive.predict_rvm_star,
                   "samples": regression_predictive.predict_samples},
    default_predict={"evidence": "rvm", "evidence-mackay": "rvm", "vrvm": "rvm",
                     "advi": "samples", "fullrank_advi": "samples", "nuts": "samples"},
    replicates=weight_replicates(regression_targets),
    draw_targets=regression_targets,
    training_problem=regression_problem,
    warm_refits={"evidence": evidence.EvidenceRefits, "evidence-mackay": evidence.EvidenceRefits,
                 "vrvm": vrvm.VRVMRefits},
    optimistic="gaussian",
    optimistic_loo=lambda post: gaussian_loo(post)[0],
    fitted_to_all="the RVM's alpha, beta and pruning",
    psis_loglik=gaussian_loo,
    sklearn_posteriors=("evidence", "evidence-mackay", "vrvm", "advi", "nuts"),
    noise=True,
)

#: RVM classification: Bernoulli-logit or softmax (T01 eqs. 23-28).
RVM_CLASSIFICATION = Family(
    kind=RVMClassification.kind,
    study_name="rvm",
    problem_type=RVMClassification,
    task="classification",
    fit_methods={"evidence": laplace.fit_fast, "evidence-mackay": laplace.fit_mackay,
                 "vrvm": vrvm_classification.fit_vrvm_classification,
                 "advi": rvm_pymc.fit_advi, "fullrank_advi": rvm_pymc.fit_fullrank_advi,
                 "nuts": rvm_pymc.fit_nuts},
    predict_kinds={"moderated": class_predictive.predict_moderated,
                   "plugin": class_predictive.predict_plugin,
                   "samples": class_predictive.predict_samples},
    default_predict={"evidence": "moderated", "evidence-mackay": "moderated",
                     "vrvm": "moderated", "advi": "samples", "fullrank_advi": "samples",
                     "nuts": "samples"},
    replicates=weight_replicates(class_targets),
    draw_targets=class_targets,
    training_problem=classification_problem,
    warm_refits={"evidence": laplace.LaplaceRefits, "evidence-mackay": laplace.LaplaceRefits,
                 "vrvm": vrvm_classification.VRVMClassificationRefits},
    optimistic="cavity",
    optimistic_loo=laplace.laplace_cavity_logpdf,
    fitted_to_all="the RVM's alpha and pruning",
    sklearn_posteriors=("evidence", "evidence-mackay", "vrvm", "advi", "nuts"),
)
