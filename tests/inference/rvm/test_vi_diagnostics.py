"""PSIS k-hat of the variational approximations (Yao, Vehtari, Simpson & Gelman 2018), checked
against closed forms: a Gaussian ``q`` equal to the exact posterior gives constant log
importance ratios (the log evidence, T01 eq. 15) and ``k = -inf``; a ``q`` three times too
narrow gives ``k > 0.7`` (asymptotically ``1 - 1/9``); the VRVM log ratios equal the joint
and ``q`` densities written out with SciPy; the stored ``psis_khat`` equals arviz_stats'
Pareto fit to those ratios."""

from __future__ import annotations

import numpy as np
import pytest
from arviz_stats.base import array_stats
from scipy import stats
from scipy.special import expit, log_softmax

from sparsebayes.inference import fit
from sparsebayes.inference.rvm.diagnostics import (
    psis_khat,
    pymc_vi_log_ratios,
    vrvm_classification_log_ratios,
    vrvm_regression_log_ratios,
)
from sparsebayes.inference.rvm.statistics import GramStatistics
from sparsebayes.inference.rvm.vrvm import vrvm
from sparsebayes.inference.rvm.vrvm_classification import vrvm_classification
from sparsebayes.models import (
    GammaPrior,
    GaussianKernel,
    RVMClassification,
    RVMRegression,
    datasets,
)
from sparsebayes.models.likelihoods import likelihood_for


def arviz_khat(log_ratios: np.ndarray) -> float:
    """The generalised Pareto shape of the largest importance weights, by arviz_stats'
    ``pareto_khat`` on the weights themselves (an independent path to ``psislw``'s)."""
    w = np.exp(log_ratios - log_ratios.max())
    return float(array_stats.pareto_khat(w[None, :], r_eff=1.0, tail="right"))


@pytest.mark.parametrize("d", [1, 10])
def test_khat_of_gaussian_proposals(d):
    """q = N(0, s^2 I) for p = N(0, I): ratios ~ exp((1 - s^2) |z|^2 / 2), a Pareto tail of
    shape 1 - s^2 (Yao et al. 2018 §3): -inf for s = 1, > 0.7 for s = 1/3, < 0.5 for a
    wider q (bounded ratios)."""
    rng = np.random.default_rng(d)
    z = rng.standard_normal((1000, d))
    for s, check in ((1.0, lambda k: k == -np.inf), (1 / 3, lambda k: k > 0.7),
                     (1.5, lambda k: k < 0.5)):
        x = s * z
        log_r = (stats.norm.logpdf(x).sum(1)
                 - (stats.norm.logpdf(z).sum(1) - d * np.log(s)))
        k = psis_khat(log_r)
        assert check(k), (s, k)
        if np.isfinite(k):
            assert k == pytest.approx(arviz_khat(log_r), abs=1e-12)


def test_khat_of_degenerate_ratios():
    """Log ratios spread over thousands of nats (one draw carries all the weight; arviz_stats'
    Pareto fit gives NaN) or not finite: k = inf, the approximation is useless."""
    log_r = np.random.default_rng(0).normal(0.0, 1000.0, 1000)
    assert psis_khat(log_r) == np.inf
    assert psis_khat(np.r_[log_r[:10] / 1000, np.nan]) == np.inf


def _conjugate_model(rng):
    """w ~ N(0, 1/alpha), t ~ N(Phi w, 1/beta) with alpha, beta fixed: the posterior is
    N(mu, Sigma) (T01 eqs. 12-13) and the evidence N(t | 0, C), C = I/beta + Phi A^-1 Phi^T."""
    import pymc as pm

    N, M = 20, 4
    Phi = rng.normal(size=(N, M))
    alpha, beta = np.array([0.5, 1.0, 2.0, 4.0]), 3.0
    t = Phi @ rng.normal(size=M) + rng.normal(size=N) / np.sqrt(beta)
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.0 / np.sqrt(alpha), shape=M)
        pm.Normal("t", Phi @ w, 1.0 / np.sqrt(beta), observed=t)
    Sigma = np.linalg.inv(np.diag(alpha) + beta * Phi.T @ Phi)
    mu = beta * Sigma @ Phi.T @ t
    C = np.eye(N) / beta + Phi @ np.diag(1 / alpha) @ Phi.T
    return model, mu, Sigma, stats.multivariate_normal(np.zeros(N), C).logpdf(t)


def _softplus_inverse(x):
    return np.log(np.expm1(x))


@pytest.mark.usefixtures("pytensor_in_python")  # values checked: no numba compile needed
def test_pymc_khat_of_the_exact_posterior_and_of_a_narrow_one():
    """Full-rank ADVI's q set to the exact posterior: every log ratio is the log evidence
    and k = -inf; with its Cholesky factor divided by 3, k > 0.7."""
    import pymc as pm

    model, mu, Sigma, log_evidence = _conjugate_model(np.random.default_rng(0))
    approx = pm.FullRank(model=model)
    group = approx.groups[0]
    for scale, check in ((1.0, lambda k: k == -np.inf), (1 / 3, lambda k: k > 0.7)):
        L = np.linalg.cholesky(Sigma) * scale
        L[np.diag_indices_from(L)] = _softplus_inverse(np.diag(L))  # PyMC: softplus diagonal
        group.params_dict["mu"].set_value(mu)
        group.params_dict["L_tril"].set_value(L[np.tril_indices_from(L)])
        _, log_r = pymc_vi_log_ratios(approx, model, seed=0)
        if scale == 1.0:
            np.testing.assert_allclose(log_r, log_evidence, rtol=1e-10)
        k = psis_khat(log_r)
        assert check(k), (scale, k)


@pytest.mark.usefixtures("pytensor_in_python")  # values checked: no numba compile needed
def test_pymc_khat_includes_the_jacobian():
    """Mean-field q = N(0, 1) on log x for x ~ LogNormal(0, 1): exact once the log
    transform's Jacobian is counted, so every log ratio is 0 (both densities normalised)."""
    import pymc as pm

    with pm.Model() as model:
        pm.LogNormal("x", 0.0, 1.0, shape=3)
    approx = pm.MeanField(model=model)
    group = approx.groups[0]
    group.params_dict["mu"].set_value(np.zeros(3))
    group.params_dict["rho"].set_value(np.full(3, _softplus_inverse(1.0)))
    theta, log_r = pymc_vi_log_ratios(approx, model, seed=0)
    np.testing.assert_allclose(log_r, 0.0, atol=1e-12)
    assert psis_khat(log_r) == -np.inf and theta.shape == (1000, 3)


def test_vrvm_regression_log_ratios_and_stored_khat():
    """The VRVM regression log ratios equal ln p(t, w, alpha, beta) - ln q(w, alpha, beta)
    written with SciPy on the full design (not the Gram statistics), and the fit stores
    arviz_stats' k-hat of the same draws (same seed)."""
    X, t = datasets.sinc(n=40, noise="gaussian", seed=0)
    prior = GammaPrior(a=1e-2, b=1e-4, c=1e-2, d=1e-4)
    problem = RVMRegression(X, t, GaussianKernel(3.0), prior=prior)
    Phi = problem.basis.design(X)
    stats_ = GramStatistics(Phi.T @ Phi, Phi.T @ t, float(t @ t), float(t.sum()), t.size)
    st = vrvm(Phi, t, prior)
    draws, log_r = vrvm_regression_log_ratios(stats_, prior, st, seed=4)
    w, alpha, beta = draws["w"], draws["alpha"], draws["beta"]
    P = Phi[:, st.active]
    log_p = (stats.norm.logpdf(t, w @ P.T, 1 / np.sqrt(beta)[:, None]).sum(1)
             + stats.norm.logpdf(w, 0, 1 / np.sqrt(alpha)).sum(1)
             + stats.gamma.logpdf(alpha, prior.a, scale=1 / prior.b).sum(1)
             + stats.gamma.logpdf(beta, prior.c, scale=1 / prior.d))
    log_q = (stats.multivariate_normal(st.mu, st.Sigma).logpdf(w)
             + stats.gamma.logpdf(alpha, st.a_tilde, scale=1 / st.b_tilde).sum(1)
             + stats.gamma.logpdf(beta, st.c_tilde, scale=1 / st.d_tilde))
    np.testing.assert_allclose(log_r, log_p - log_q, rtol=1e-8)
    post = fit(problem, "vrvm", seed=4)
    assert post.attrs["psis_khat"] == pytest.approx(arviz_khat(log_r), abs=1e-10)


def _three_classes(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.argmax(X @ rng.normal(size=(2, 3)) + 0.5 * rng.normal(size=(n, 3)), axis=1)


@pytest.mark.parametrize("K", [2, 3])
def test_vrvm_classification_log_ratios_and_stored_khat(K):
    """The VRVM classifier's log ratios use the exact likelihood (Bernoulli / softmax, not
    the bound) and Tipping's flat prior on alpha (density 1/alpha): equal to SciPy's; the
    fit stores arviz_stats' k-hat of the same draws."""
    X, y = datasets.ripley_mixture(60, seed=1) if K == 2 else _three_classes()
    problem = RVMClassification(X, y, GaussianKernel(0.7))
    Phi = problem.basis.design(X)
    st = vrvm_classification(Phi, problem.t, K)
    lik = likelihood_for(problem.t, K, K > 2)
    draws, log_r = vrvm_classification_log_ratios(Phi, lik, GammaPrior(), st, seed=2)
    w, alpha = draws["w"], draws["alpha"]
    F = np.zeros((w.shape[0], X.shape[0], K if K > 2 else 1))
    for j, (c, k) in enumerate(zip(st.cols, st.cls, strict=True)):
        F[:, :, k] += w[:, [j]] * Phi[:, c]
    if K == 2:
        loglik = stats.bernoulli.logpmf(problem.t, expit(F[..., 0])).sum(1)
    else:
        loglik = np.take_along_axis(log_softmax(F, axis=2), problem.t[None, :, None],
                                    axis=2)[..., 0].sum(1)
    log_p = (loglik + stats.norm.logpdf(w, 0, 1 / np.sqrt(alpha)).sum(1)
             - np.log(alpha).sum(1))
    rate = st.q_alpha_shape / st.alpha
    log_q = (stats.multivariate_normal(st.mu, np.linalg.inv(st.H)).logpdf(w)
             + stats.gamma.logpdf(alpha, st.q_alpha_shape, scale=1 / rate).sum(1))
    np.testing.assert_allclose(log_r, log_p - log_q, rtol=1e-8)
    post = fit(problem, "vrvm", seed=2)
    assert post.attrs["psis_khat"] == pytest.approx(arviz_khat(log_r), abs=1e-10)


# --------------------------------------------------------------------------------------------
# ADVI's defaults on classification
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("K", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_elbo_gradient_is_finite_at_large_logits(K):
    """The classification model's likelihood keeps finite ELBO gradients when logits are
    large (PyMC's Bernoulli(logit_p) gave NaN once a logit passed ~37: breast cancer's ADVI
    diverged), and its density is the Bernoulli's ``t f - ln(1 + e^f)`` / SciPy's softmax."""
    import pymc as pm

    X, y = datasets.ripley_mixture(40, seed=1) if K == 2 else _three_classes(40)
    problem = RVMClassification(X, y, GaussianKernel(0.5))
    model = problem.pymc_model(collapsed=True)
    Phi = problem.basis.design(X)
    # binary: logits ~ +100 (sigmoid rounds to 1); softmax: differences > 745 (exp -> 0)
    shape = tuple(len(model.coords[dim]) for dim in model.named_vars_to_dims["w"])  # no compile
    w = np.full(shape, 5.0 if K == 2 else 500.0)
    if K > 2:
        w[:, 1:] *= -1
    F = Phi @ w
    assert (F[problem.t == 0].max() > 40 if K == 2 else (F[:, 0] - F[:, 1]).max() > 745)
    ref = (np.sum(problem.t * F - np.logaddexp(0, F)) if K == 2 else
           log_softmax(F, axis=1)[np.arange(F.shape[0]), problem.t].sum())
    assert model.compile_logp(vars=[model["t"]])({"w": w}) == pytest.approx(ref, rel=1e-12)
    with model:
        inference = pm.ADVI(random_seed=0)
    inference.approx.groups[0].params_dict["mu"].set_value(w.ravel())
    inference.fit(n=3, progressbar=False, obj_optimizer=pm.sgd(learning_rate=1e-12))
    assert np.all(np.isfinite(inference.hist))


@pytest.fixture(scope="module")
def breast_cancer():
    """Standardised breast cancer, 400 training points, width sqrt(30); the held-out accuracy
    of a fit; and the evidence fit's (seed 1), computed once for both ADVI methods."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    from sparsebayes.inference import predict

    data = load_breast_cancer()
    X = StandardScaler().fit_transform(data.data)
    idx = np.random.default_rng(0).permutation(X.shape[0])
    train, test = idx[:400], idx[400:]
    problem = RVMClassification(X[train], data.target[train], GaussianKernel(np.sqrt(30)))

    def accuracy(post):
        proba = np.asarray(predict(post, X[test]).proba)
        return np.mean((proba[:, 1] > 0.5) == data.target[test])

    return problem, accuracy, accuracy(fit(problem, "evidence", seed=1))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["advi", "fullrank_advi"])
def test_advi_defaults_on_standardised_breast_cancer(method, breast_cancer):
    """ADVI and full-rank ADVI with default options on standardised breast cancer (400
    training points, width sqrt(30)): no NaN, no refit at a smaller rate (a warning would
    fail the test), a finite k-hat, and held-out accuracy within 0.03 of the evidence fit's
    (both 0.96-0.98 when measured)."""
    problem, accuracy, evidence_accuracy = breast_cancer
    post = fit(problem, method, seed=1)
    assert post.attrs["learning_rate"] == 0.01 and post.attrs["converged"] == 1
    assert np.isfinite(post.attrs["psis_khat"])
    assert accuracy(post) >= evidence_accuracy - 0.03


def test_vi_divergence_error_says_what_to_do_first():
    """An ELBO optimisation that ends in NaN at the given rate and again at a tenth of it
    (ADVI on sinc at learning_rate=5000: log alpha overflows) raises an error that starts with
    the advice and names the option, not PyMC's list of NaN coordinates."""
    X, t = datasets.sinc(n=40, noise="uniform", seed=0)
    with pytest.raises(FloatingPointError) as info:
        fit(RVMRegression(X, t, GaussianKernel(3.0)), "advi", seed=1, learning_rate=5000.0)
    message = str(info.value)
    assert message.startswith("Pass a smaller learning_rate (e.g. learning_rate=50)")
    assert "at learning_rate=5000 and 500" in message and "ravel()" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
