"""ArviZ's predictive groups for every posterior the library returns, computed from the
result itself (its draws of ``w`` and ``beta``), so they are right for every method, evidence
and VRVM included, without PyMC:

* ``posterior_predictive``: one replicate of ``t`` at the training inputs per posterior draw
  (regression: ``t_rep = Phi w_s + eps_s``, ``eps_s ~ N(0, 1/beta_s)``, T01 eq. 4 at the
  draw; classification: a class code drawn from the Bernoulli-logit / softmax probabilities
  of the draw, T01 eqs. 23, 28), dims ``(chain, draw, obs)`` like ``observed_data.t``;
* ``predictions`` and ``predictions_constant_data``: the same at new inputs;
* for the GPs: regression, a joint draw of ``f`` and the noise per hyperparameter draw
  (R&W eqs. 2.23-2.24; 1000 draws from type-II ML point hyperparameters); classification, a
  class code per draw of the latent ``f`` (GPML eq. 3.1; at new inputs from each draw's
  predictive ``f*``, marginal per input);
* ``prior`` and ``prior_predictive``: draws of the result's hyperprior (attrs ``prior``:
  ``alpha``, ``beta``, ``noise_sd``, ``z``, ``w`` with the posterior's names and dims) and a
  replicate of ``t`` at the training inputs per prior draw, on the model's whole basis.

With them ``az.loo_pit``, ``az.plot_ppc_dist``, ``az.plot_ppc_pit``, ``az.plot_lm`` and
``az.plot_prior_posterior`` work on every result (``az.loo`` and ``az.compare`` need only
``log_likelihood``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from sparsebayes.models import GammaPrior, NumericalWarning

from .families import REGISTERED, Family, family_of
from .numerics import check_positive_int, warn_user
from .predictive.regression import check_new_inputs
from .results import basis_from_posterior, state_point_values

__all__ = ["add_posterior_predictive", "add_predictions", "add_prior_predictive"]

def _family(post, weights_only: bool = False) -> Family:
    if not isinstance(post, xr.DataTree) or "problem_kind" not in post.attrs:
        raise TypeError("post must be a DataTree returned by sparsebayes.inference.fit")
    family = family_of(post)
    if weights_only and not family.weights:
        kinds = [f.kind for f in REGISTERED if f.weights]
        raise ValueError(f"this needs a posterior of {' or '.join(kinds)}, got a "
                         f"{family.kind!r} posterior")
    return family


def _group(values: np.ndarray, obs_dim: str) -> xr.Dataset:
    c, d, n = values.shape
    return xr.Dataset({"t": (("chain", "draw", obs_dim), values)},
                      coords={"chain": np.arange(c), "draw": np.arange(d),
                              obs_dim: np.arange(n)})


def add_posterior_predictive(post: xr.DataTree, seed: int | None = None) -> xr.DataTree:
    """``post`` with a ``posterior_predictive`` group: a replicate of the training targets
    per posterior draw (see the module docstring). Returns a new tree."""
    family = _family(post)
    X = post["constant_data"]["X"].values
    rep = family.replicates(post, X, np.random.default_rng(seed), training=True)
    out = post.copy()
    out["posterior_predictive"] = xr.DataTree(_group(rep, "obs"))
    return out


def add_predictions(post: xr.DataTree, X_new, seed: int | None = None) -> xr.DataTree:
    """``post`` with ``predictions`` (a draw of ``t`` at each row of ``X_new`` per posterior
    draw, dims ``(chain, draw, obs)``) and ``predictions_constant_data`` (``X_new``), as
    ArviZ names them. Returns a new tree."""
    family = _family(post)
    X_new = check_new_inputs(post, X_new)
    rep = family.replicates(post, X_new, np.random.default_rng(seed))
    out = post.copy()
    out["predictions"] = xr.DataTree(_group(rep, "obs"))
    out["predictions_constant_data"] = xr.DataTree(xr.Dataset(
        {"X": (("obs", "feature"), X_new)},
        coords={"obs": np.arange(X_new.shape[0]), "feature": np.arange(X_new.shape[1])}))
    return out


def _log_gamma_draws(shape: float, rate: float, size, rng: np.random.Generator) -> np.ndarray:
    """``ln alpha`` for ``alpha ~ Gamma(shape, rate)``, without underflow for small shapes:
    ``Gamma(a) = Gamma(a + 1) U^(1/a)`` (Marsaglia & Tsang 2000, sec. 5)."""
    return (np.log(rng.gamma(shape + 1.0, 1.0, size)) + np.log(rng.random(size)) / shape
            - np.log(rate))


def add_prior_predictive(post: xr.DataTree, draws: int = 500, seed: int | None = None
                         ) -> xr.DataTree:
    """``post`` with ``prior`` and ``prior_predictive`` groups (one chain of ``draws``), drawn
    from the hyperprior the result was fitted with (attrs ``prior``; T01 eqs. 5-6, the
    non-centred ``w = z / sqrt(alpha)``) and the likelihood (T01 eq. 4, 23 or 28). ``prior``
    has the posterior's variables on its coordinates, so ``az.plot_prior_posterior`` pairs
    them (a point result's hyperparameters are coordinates in both groups);
    ``prior_predictive`` uses every column of the model's basis (an evidence result
    holds only its relevance vectors). Returns a new tree.

    Raises ``ValueError`` for an improper hyperprior (Tipping's flat ``a = b = c = d = 0``,
    the evidence methods' default): it has no draws."""
    family = _family(post, weights_only=True)
    draws = check_positive_int("draws", draws)
    prior = GammaPrior.from_array(post.attrs.get("prior", GammaPrior().as_array()))
    fixed_noise = not family.noise or bool(post.attrs.get("noise_fixed", 0))
    needed = "ab" if fixed_noise else "abcd"
    if any(getattr(prior, n) == 0 for n in needed):
        raise ValueError(
            f"post was fitted with an improper hyperprior ({prior}): Tipping's flat prior has no "
            "prior draws. Fit a problem with prior='weakly_informative', prior='default' or a "
            "GammaPrior with a, b (and c, d when the noise is estimated) > 0")
    rng = np.random.default_rng(seed)
    pos = post["posterior"]
    basis, columns = basis_from_posterior(post)
    X = post["constant_data"]["X"].values
    Phi = basis.design(X)
    w_shape = (1, draws, Phi.shape[1]) + pos["w"].shape[3:]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        log_alpha = _log_gamma_draws(prior.a, prior.b, w_shape, rng)
        z = rng.standard_normal(w_shape)
        w = z * np.exp(-0.5 * log_alpha)
        if family.noise:
            beta = (np.full((1, draws), float(pos["beta"].values.flat[0])) if fixed_noise
                    else np.exp(_log_gamma_draws(prior.c, prior.d, (1, draws), rng)))
        else:
            beta = None
        t = family.draw_targets(Phi, w, beta, rng, targets=post["observed_data"]["t"].values)
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(t))):
        warn_user(
            f"non-finite prior draws: the hyperprior {prior} puts mass on alpha so small that "
            "w = z / sqrt(alpha) overflows; a larger shape a bounds it", NumericalWarning)
    coords = {"chain": [0], "draw": np.arange(draws)}
    dims = {name: pos[name].dims for name in ("alpha", "z", "w")}
    own = {"alpha": np.exp(log_alpha), "z": z, "w": w}
    data = {name: (dims[name], v[:, :, columns]) for name, v in own.items()}
    if family.noise:
        data["beta"] = (("chain", "draw"), beta)
        data["noise_sd"] = (("chain", "draw"), 1.0 / np.sqrt(beta))
    prior_ds = xr.Dataset(data, coords={**coords, **{d: pos[d].values for v in dims.values()
                                                     for d in v if d not in coords}})
    if post.attrs.get("hyperparameters") == "point":  # as in its posterior: coordinates
        prior_ds = state_point_values(prior_ds)
    out = post.copy()
    out["prior"] = xr.DataTree(prior_ds)
    out["prior_predictive"] = xr.DataTree(_group(t, "obs"))
    return out
