"""Predictive distributions for regression: one object type with ``mean``, ``var``,
``logpdf(y)`` and ``interval(p)`` so every metric works on every method."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy import stats

from sparsebayes.models.problems import check_inputs, check_targets

from .results import basis_from_posterior

__all__ = ["Predictive", "predict_rvm", "check_new_inputs"]


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


def check_new_inputs(post: xr.DataTree, X_new) -> np.ndarray:
    """``X_new`` as a finite float array with the training number of features."""
    X_new = check_inputs(X_new, name="X_new")
    d = post["constant_data"]["X"].shape[1]
    if X_new.shape[1] != d:
        raise ValueError(f"X_new has {X_new.shape[1]} features, the model was fitted on {d}")
    return X_new


def predict_rvm(post: xr.DataTree, X_new) -> Predictive:
    """Tipping (2001) eqs. (21)-(22): mean ``phi(x)^T mu``, variance
    ``1/beta + phi(x)^T Sigma phi(x)``, at the point hyperparameters."""
    if "gaussian_posterior" not in post.children:
        raise ValueError(
            f"kind='rvm' needs a Gaussian weight posterior (evidence or vrvm); this "
            f"{post.attrs.get('method')!r} posterior has draws: use kind='samples'"
        )
    X_new = check_new_inputs(post, X_new)
    g = post["gaussian_posterior"]
    basis, columns = basis_from_posterior(post)
    Phi = basis.design(X_new, columns=columns)
    mu, Sigma = g["mu"].values, g["Sigma"].values
    mean = Phi @ mu
    var = 1.0 / float(g["beta"]) + np.einsum("ij,jk,ik->i", Phi, Sigma, Phi)
    return Predictive(mean=mean, var=var, kind="rvm")
