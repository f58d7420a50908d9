"""The latent likelihoods' own maths against SciPy: log pmf or pdf, cdf, derivatives in the
latent ``f`` (finite differences), draws, the negative binomial's Poisson limit, and the
Student-t's parameters at the targets' scale and its problem's refusals."""

import numpy as np
import pytest
from scipy import stats

from sparsebayes.models import RVMStudentTRegression
from sparsebayes.models.likelihoods import Poisson
from sparsebayes.models.negative_binomial import NegativeBinomial
from sparsebayes.models.student_t import NU_PRIOR, StudentT

T = np.array([0, 1, 2, 5, 13, 40, 0, 7])
F = np.array([-1.0, 0.2, 0.7, 1.5, 2.4, 3.9, 1.0, -0.3])


def _nbinom(r, f):
    """SciPy's ``nbinom(n=r, p=r / (r + e^f))``: mean ``e^f``, variance ``e^f + e^2f / r``."""
    return stats.nbinom(r, r / (r + np.exp(f)))


@pytest.mark.parametrize("r", [0.3, 2.0, 50.0])
def test_negative_binomial_logpdf_and_cdf_are_scipys(r):
    lik = NegativeBinomial(T, dispersion=r)
    np.testing.assert_allclose(lik.logpdf(T, F), _nbinom(r, F).logpmf(T), rtol=1e-10)
    np.testing.assert_allclose(lik.cdf(T, F), _nbinom(r, F).cdf(T), rtol=1e-9)
    np.testing.assert_allclose(lik.extra_variance() * np.exp(2 * F) + np.exp(F),
                               _nbinom(r, F).var(), rtol=1e-12)


@pytest.mark.parametrize("lik", [Poisson(T), NegativeBinomial(T, dispersion=1.7)],
                         ids=lambda v: v.name)
def test_derivatives_in_f_are_finite_differences(lik):
    """Gradient, negative Hessian B and dB/df (T01 eqs. 24-25, App. C) by central
    differences of the log pmf and of B."""
    h = 1e-5
    g, B, dB = lik.derivatives(F)
    up, down = lik.logpdf(T, F + h), lik.logpdf(T, F - h)
    np.testing.assert_allclose(g, (up - down) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(B, -(up - 2 * lik.logpdf(T, F) + down) / h**2, rtol=1e-3,
                               atol=1e-5)
    np.testing.assert_allclose(dB, (lik.derivatives(F + h)[1] - lik.derivatives(F - h)[1])
                               / (2 * h), rtol=1e-6, atol=1e-8)
    assert np.all(B > 0)  # log-concave in f: the Laplace scheme's Newton steps are safe


def test_negative_binomial_tends_to_the_poisson():
    """``ln NB - ln Poisson = (t(t - 1) / 2 - t mu + mu^2 / 2) / r + O(1 / r^2)`` (the
    expansion of ``ln Gamma(t + r) - ln Gamma(r) - t ln r`` and ``r ln(1 + mu / r)``)."""
    mu, r = np.exp(F), 1e4
    diff = NegativeBinomial(T, dispersion=r).logpdf(T, F) - Poisson(T).logpdf(T, F)
    np.testing.assert_allclose(diff * r, T * (T - 1) / 2 - T * mu + mu**2 / 2, rtol=2e-2,
                               atol=1e-3)
    np.testing.assert_allclose(NegativeBinomial(T, dispersion=1e8).logpdf(T, F),
                               Poisson(T).logpdf(T, F), atol=1e-5)


def test_draws_have_the_likelihoods_moments():
    rng = np.random.default_rng(0)
    f = np.full(200_000, np.log(6.0))
    d = NegativeBinomial(np.zeros(0), dispersion=2.0).draw(f, rng)
    assert abs(d.mean() - 6.0) < 0.05 and abs(d.var() / (6.0 + 36.0 / 2.0) - 1) < 0.02
    assert d.dtype == np.int64
    # one dispersion per draw (chain, draw, 1) broadcasts over the points
    per_draw = NegativeBinomial(np.zeros(0), dispersion=np.array([[[0.5]], [[500.0]]]))
    d = per_draw.draw(np.full((2, 1, 50_000), np.log(4.0)), rng)
    assert d[0].var() / d[0].mean() > 8 and abs(d[1].var() / d[1].mean() - 1) < 0.05


def test_prior_draws_are_the_pymc_models_prior():
    """``1 / sqrt(r) ~ HalfNormal(1)``: the median of ``r`` is ``1 / q^2`` with ``q`` the
    HalfNormal's median, ``Phi^-1(0.75)``."""
    r = NegativeBinomial.prior_draws((200_000,), np.random.default_rng(1))["dispersion"]
    assert abs(np.median(r) / stats.norm.ppf(0.75) ** -2 - 1) < 0.02


def test_parameters_are_named_and_started_from_the_moments():
    rng = np.random.default_rng(2)
    t = rng.negative_binomial(2.0, 2.0 / (2.0 + 5.0), 5000)
    lik = NegativeBinomial(t)
    assert 1.6 < lik.params["dispersion"] < 2.5  # m^2 / (v - m) of the counts
    assert NegativeBinomial(t, dispersion=3.0).with_targets(t[:5]).params == {"dispersion": 3.0}
    with pytest.raises(TypeError, match="no parameter"):
        NegativeBinomial(t, shape=1.0)


@pytest.mark.parametrize("nu", [1.0, 2.5, 30.0])
def test_student_t_logpdf_and_cdf_are_scipys(nu):
    t = np.array([-3.0, 0.1, 0.4, 7.0])
    f = np.array([0.5, 0.0, 0.4, -1.0])
    lik = StudentT(t, sigma=0.7, nu=nu)
    ref = stats.t(nu, loc=f, scale=0.7)
    np.testing.assert_allclose(lik.logpdf(t, f), ref.logpdf(t), rtol=1e-12)
    np.testing.assert_allclose(lik.cdf(t, f), ref.cdf(t), rtol=1e-12)


def test_student_t_derivatives_in_f_are_finite_differences():
    """Gradient, ``B = -d^2 ln p / df^2`` (negative beyond ``sqrt(nu) sigma``: an outlier)
    and ``dB/df`` against central differences."""
    t = np.array([0.0, 0.3, 2.0, -5.0])
    lik = StudentT(t, sigma=0.5, nu=3.0)
    f = np.array([0.1, 0.2, 0.0, 0.0])
    g, B, dB = lik.derivatives(f)
    h = 1e-5
    gp, Bp, _ = lik.derivatives(f + h)
    gm, Bm, _ = lik.derivatives(f - h)
    np.testing.assert_allclose(g, (lik.logpdf(t, f + h) - lik.logpdf(t, f - h)) / (2 * h),
                               rtol=1e-7)
    np.testing.assert_allclose(B, -(gp - gm) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(dB, (Bp - Bm) / (2 * h), rtol=1e-6)
    assert np.all(B[2:] < 0) and np.all(B[:2] > 0)  # the outliers: not log-concave
    # the surrogate's precisions: positive, B where B is above the Fisher information
    fisher = 4.0 / (6.0 * 0.25)
    np.testing.assert_allclose(lik.surrogate_precision(f), np.maximum(B, fisher))


def test_student_t_draws_and_prior_draws_have_their_moments():
    rng = np.random.default_rng(0)
    lik = StudentT(np.zeros(0), sigma=0.5, nu=5.0)
    draws = lik.draw(np.full(400_000, 2.0), rng)
    assert abs(draws.mean() - 2) < 0.01
    assert abs(draws.var() / (0.25 * 5 / 3) - 1) < 0.03
    assert abs(lik.noise_variance() - 0.25 * 5 / 3) < 1e-12
    assert np.isinf(StudentT(np.zeros(0), sigma=0.5, nu=2.0).noise_variance())
    t = np.array([0.0, 4.0])  # sd 2
    prior = StudentT(t).prior_draws((400_000,), rng)
    assert abs(prior["sigma"].mean() - 2 * np.sqrt(2 / np.pi)) < 0.01  # HalfNormal(sd(t))
    assert abs(prior["nu"].mean() - NU_PRIOR[0] / NU_PRIOR[1]) < 0.1  # Gamma(2, 0.1)


def test_student_t_parameters_start_and_are_bounded_at_the_targets_scale():
    t = np.array([0.0, 10.0, 20.0, 30.0])
    lik = StudentT(t)
    assert lik.params == {"sigma": pytest.approx(0.1 * t.std()), "nu": 4.0}
    lo, hi = np.exp(lik.log_bounds["sigma"])
    assert lo == pytest.approx(1e-4 * t.std()) and hi == pytest.approx(10 * t.std())
    held = lik.with_targets(np.array([1.0, 1.0]))  # held-out targets keep the fit's bounds
    assert held.log_bounds == lik.log_bounds and held.params == lik.params
    with pytest.raises(TypeError, match="no parameter"):
        StudentT(t, dispersion=2.0)


def test_student_t_problem_refuses_what_it_cannot_fit():
    X = np.linspace(0, 1, 5)[:, None]
    with pytest.raises(ValueError, match="t varies by only"):
        RVMStudentTRegression(X, np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        RVMStudentTRegression(X, [0, 1, np.nan, 2, 3])
    with pytest.raises(ValueError, match="mismatched"):
        RVMStudentTRegression(X, np.arange(4.0))
