"""The Gaussian RVM is the latent RVM's conjugate case: Gaussian noise written as a latent
likelihood (``testing.LatentNormal``, defined outside the families) is fitted by the Laplace
driver every other likelihood takes, and that driver maximises the same evidence as
``RVMRegression``'s closed-form route (T01 eq. 7: the Laplace approximation is exact when
``B = 1 / sigma^2``), to the same optimum where both take the same steps."""

import numpy as np
import pytest

from sparsebayes.inference import families, fit, predict
from sparsebayes.inference.numerics import log_evidence
from sparsebayes.inference.results import basis_from_posterior
from sparsebayes.inference.testing import (
    FixedLatentNormal,
    RVMFixedLatentNormalRegression,
    RVMLatentNormalRegression,
    latent_normal_families,
)
from sparsebayes.models import GaussianKernel, RVMRegression, datasets

SD = FixedLatentNormal.noise_sd


@pytest.fixture(autouse=True)
def latent_normal(monkeypatch):
    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    for family in latent_normal_families():
        families.register_family(family)


def _sinc(n, centres=0):
    x, t = datasets.sinc(n, seed=0)
    options = {"kernel": GaussianKernel(1.0)}
    if centres:
        options["centres"] = x[np.linspace(0, n - 1, centres).astype(int)]
    return x, t, options


def _relevant(post):
    return sorted(post["gaussian_posterior"]["basis"].values.tolist())


@pytest.mark.parametrize("n, centres, method", [(100, 0, "evidence-mackay"),
                                                (1000, 0, "evidence"),
                                                (2000, 200, "evidence")])
def test_the_latent_drivers_objective_is_the_closed_form_evidence(n, centres, method):
    """At the latent driver's optimum, its Laplace log evidence equals T01 eq. 7 at the
    same relevance vectors, alpha and noise (rel 1e-9), on the classic basis and on a
    dictionary, at N in the thousands."""
    x, t, options = _sinc(n, centres)
    post = fit(RVMFixedLatentNormalRegression(x, t, **options), method, seed=0)
    basis, columns = basis_from_posterior(post)
    closed = log_evidence(basis.design(x, columns=columns), t,
                          post["gaussian_posterior"]["alpha"].values, 1.0 / SD**2)
    assert post.attrs["log_evidence"] == pytest.approx(closed, rel=1e-9)


@pytest.mark.parametrize("n, centres, method, options", [
    (100, 0, "evidence-mackay", {}),
    (100, 0, "evidence", {"local_search": False}),
    (2000, 200, "evidence", {"local_search": False})])
def test_both_routes_reach_the_same_optimum_where_they_take_the_same_steps(n, centres,
                                                                           method, options):
    """Noise fixed: MacKay's loop over the closed-form posterior and over the Laplace mode
    (the same re-estimates, T01 eqs. 16-17), and Tipping & Faul's loop on the exact
    products and on the Laplace surrogate (exact here), keep the same relevance vectors, at
    log evidences equal within the fast loops' tolerances (rel 1e-7) and predictive means
    within 1e-4. (Where the pruning paths part, e.g. MacKay on 300 points, they end at
    different local optima of the same evidence.)"""
    x, t, basis_options = _sinc(n, centres)
    closed = fit(RVMRegression(x, t, noise_sd=SD, **basis_options), method, seed=0,
                 **options)
    latent = fit(RVMFixedLatentNormalRegression(x, t, **basis_options), method, seed=0)
    assert _relevant(closed) == _relevant(latent)
    assert latent.attrs["log_evidence"] == pytest.approx(closed.attrs["log_evidence"],
                                                         rel=1e-7)
    np.testing.assert_allclose(predict(latent, x).mean, predict(closed, x).mean, atol=1e-4)


@pytest.mark.parametrize("n, centres", [(100, 0), (2000, 200)])
def test_the_profile_searchs_noise_is_the_re_estimated_noise(n, centres):
    """Noise learned: the latent driver's profile search over sigma (Brent, xtol 1e-2 in
    ln sigma) and the closed-form route's re-estimation (T01 eq. 18) give noise sds within
    1% of each other and of the truth (0.1)."""
    x, t, options = _sinc(n, centres)
    closed = fit(RVMRegression(x, t, **options), "evidence", seed=0)
    latent = fit(RVMLatentNormalRegression(x, t, **options), "evidence", seed=0)
    sd_closed = float(closed["posterior"]["noise_sd"].values.ravel()[0])
    sd_latent = float(latent["posterior"]["sigma"].values.ravel()[0])
    assert sd_latent == pytest.approx(sd_closed, rel=0.01)
    assert abs(sd_latent - 0.1) < 0.015
