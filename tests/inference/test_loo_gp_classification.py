"""Leave-one-out of the Laplace GP classifier (GPML Algorithms 3.1-3.4, 5.1): the Laplace
cavity (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016, LA-LOO) against exact Gaussian
conditioning (GPML eq. 5.12) and against dense conditioning on the other points' sites;
warm-started refits against cold fits; the omitted log_likelihood group against PSIS."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_expit, log_softmax, softmax

from sparsebayes.inference import fit, predict
from sparsebayes.inference.gp.classification import (
    GPClassificationRefits,
    averaged_probability,
    averaged_softmax,
    gp_laplace_cavity_logpdf,
    laplace_cavity,
    laplace_mode,
    softmax_laplace_mode,
)
from sparsebayes.inference.loo import gp_loo_logpdf
from sparsebayes.models import GPClassification, NumericalWarning, datasets
from sparsebayes.models.gp import se_ard_covariance

# warm == cold: L-BFGS-B stops at ftol 2.2e-9 (relative) / pgtol 1e-5 from different starts;
# measured on 80 folds: log Z within 1.5e-6, predictive log probabilities within 5e-5 (flat
# directions of log Z move the hyperparameters more than the predictive)
LML_TOL, LOGP_TOL = 1e-5, 1e-4


def _problem(n, C=3, seed=0, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    codes = np.argmax(X[:, :1] * np.array([[-2.0, 0.0, 2.0]])[:, :C]
                      + 0.7 * rng.normal(size=(n, C)), axis=1)
    return X, codes


def test_cavity_of_a_gaussian_likelihood_is_exact_leave_one_out():
    """With a Gaussian likelihood the Laplace posterior is exact and its sites are the
    likelihood: W_n = 1 / s^2, grad_n = (y_n - m_n) / s^2. The cavity predictive
    N(y_n | mu_-n, S_-n + s^2) must be GPML eq. 5.12; for K outputs with correlated noise
    Sigma_n (W_n = Sigma_n^-1, the matrix branch) dense conditioning of y_n on y_-n."""
    rng = np.random.default_rng(0)
    n, ls, sf, sn = 15, 0.7, 1.3, 0.4
    X = rng.uniform(-2, 2, size=(n, 1))
    K = se_ard_covariance(X, None, np.array([ls]), sf)
    y = rng.multivariate_normal(np.zeros(n), K + sn**2 * np.eye(n))
    A = np.linalg.solve(K + sn**2 * np.eye(n), K)  # (K + s^2 I)^-1 K
    m, Sig = A.T @ y, K - K @ A
    mu, s2 = laplace_cavity(m, np.diag(Sig), np.full(n, sn**-2), (y - m) / sn**2)
    ref = gp_loo_logpdf(X, y, np.array([[ls]]), np.array([sf]), np.array([sn]))[0]
    np.testing.assert_allclose(stats.norm.logpdf(y, mu, np.sqrt(s2 + sn**2)), ref, rtol=1e-9)

    C = 3
    noise = np.array([[0.3, 0.1, -0.05], [0.1, 0.2, 0.04], [-0.05, 0.04, 0.25]])
    Kb = np.kron(K, np.eye(C))
    cov_y = Kb + np.kron(np.eye(n), noise)
    Y = rng.multivariate_normal(np.zeros(n * C), cov_y)
    Wb = np.kron(np.eye(n), np.linalg.inv(noise))
    Sf = np.linalg.solve(np.eye(n * C) + Kb @ Wb, Kb)  # (K^-1 + W)^-1
    mf = Sf @ Wb @ Y
    blocks = np.stack([Sf[i * C:(i + 1) * C, i * C:(i + 1) * C] for i in range(n)])
    Wn = np.broadcast_to(np.linalg.inv(noise), (n, C, C))
    grad = np.einsum("nab,nb->na", Wn, (Y - mf).reshape(n, C))
    mu, S = laplace_cavity(mf.reshape(n, C), blocks, Wn, grad)
    for i in range(n):
        o, r = np.arange(i * C, (i + 1) * C), np.setdiff1d(np.arange(n * C), np.arange(
            i * C, (i + 1) * C))
        gain = np.linalg.solve(cov_y[np.ix_(r, r)], cov_y[np.ix_(r, o)])
        exact = stats.multivariate_normal(gain.T @ Y[r], cov_y[np.ix_(o, o)]
                                          - cov_y[np.ix_(o, r)] @ gain)
        assert stats.multivariate_normal(mu[i], S[i] + noise).logpdf(Y[o]) == pytest.approx(
            exact.logpdf(Y[o]), rel=1e-9)


def _dense_cavity_logpdf(post):
    """The cavity by brute force: the Laplace sites (precision W_j, natural mean W_j f_j +
    grad_j) of every point j != n on the prior over all n K latents, conditioned densely
    ((I + K W_-n)^-1 K), then the same likelihood average as the predictive."""
    X, codes = post["constant_data"]["X"].values, post["observed_data"]["t"].values
    F = post["constant_data"]["f_mode"].values
    K = se_ard_covariance(X, None, post["posterior"]["length_scale"].values[0, 0],
                          float(post["posterior"]["signal_sd"].values[0, 0]))
    n = codes.size
    if F.ndim == 2:
        C = F.shape[1]
        P = softmax(F, axis=1)
        Wn = np.einsum("ia,ab->iab", P, np.eye(C)) - np.einsum("ia,ib->iab", P, P)
        G = np.eye(C)[codes] - P
    else:
        C, p = 1, expit(F)
        Wn, G, F = (p * (1 - p))[:, None, None], (codes - p)[:, None], F[:, None]
    Kb = np.kron(K, np.eye(C))
    out = np.empty(n)
    for i in range(n):
        W, b = np.zeros((n * C, n * C)), np.zeros(n * C)
        for j in set(range(n)) - {i}:
            W[j * C:(j + 1) * C, j * C:(j + 1) * C] = Wn[j]
            b[j * C:(j + 1) * C] = Wn[j] @ F[j] + G[j]
        A = np.linalg.solve(np.eye(n * C) + Kb @ W, Kb)
        mu, S = (A @ b)[i * C:(i + 1) * C], A[i * C:(i + 1) * C, i * C:(i + 1) * C]
        if C == 1:
            sign = 2 * codes[i] - 1
            out[i] = np.log(averaged_probability(sign * mu, S[0]))[0]
        else:
            out[i] = np.log(averaged_softmax(mu[None], S[None])[0, codes[i]])
    return out


@pytest.fixture(scope="module")
def fits():
    """Two- and three-class fits on 30 points (the two-class one saturates: signal sd ~ 140)
    with their exact LOO by warm refits."""
    out = {}
    for C in (2, 3):
        X, codes = _problem(30, C=C, seed=5)
        post = fit(GPClassification(X, codes), "evidence", seed=0, draws=300)
        refits = GPClassificationRefits(post)
        exact = np.array([refits.fold(np.array([i]))[0][0] for i in range(codes.size)])
        out[C] = post, exact
    return out


@pytest.mark.parametrize("C", [2, 3])
def test_cavity_equals_dense_conditioning_on_the_other_sites_and_is_near_exact_loo(fits, C):
    post, exact = fits[C]
    cavity = gp_laplace_cavity_logpdf(post)
    np.testing.assert_allclose(cavity, _dense_cavity_logpdf(post), rtol=1e-8, atol=1e-10)
    # LA-LOO holds the hyperparameters and the other points' sites fixed: measured 0.005
    # (two classes) and 0.64 (three classes) nats from the exact LOO's elpd of ~ -14
    assert abs(cavity.sum() - exact.sum()) < 1.5


@pytest.mark.parametrize("C", [2, 3])
def test_log_likelihood_is_omitted_since_psis_over_laplace_draws_is_wrong(fits, C):
    """The fit stores no log_likelihood (attrs say why): PSIS-LOO over the stored Laplace
    draws of f with log p(t_n | f_n) is far from the exact LOO (measured -4750 and -42
    against -13.8 and -14.7) with Pareto k > 0.7, while the cavity is close."""
    import arviz as az
    import xarray as xr

    post, exact = fits[C]
    assert "log_likelihood" not in post.children
    assert post.attrs["log_likelihood_omitted"] == "latent"
    f, codes = post["posterior"]["f"].values, post["observed_data"]["t"].values
    ll = (log_expit((2 * codes - 1) * f) if C == 2
          else log_softmax(f, axis=3)[:, :, np.arange(codes.size), codes])
    tree = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"f0": (("chain", "draw"), f[..., 0, 0] if C > 2
                                        else f[..., 0])}),
        "log_likelihood": xr.Dataset({"t": (("chain", "draw", "obs"), ll)})})
    with pytest.warns(UserWarning, match="Pareto"):
        psis = az.loo(tree, pointwise=True)
    assert float(psis.pareto_k.max()) > 0.7
    gap = abs(psis.elpd - exact.sum())
    assert gap > 10 and gap > 10 * abs(gp_laplace_cavity_logpdf(post).sum() - exact.sum())


def test_a_far_warm_start_of_the_mode_reaches_the_mode():
    """Newton from a saturated warm start (W ~ 0: what a refit's line search can leave)
    stalled far below the mode (log Z -9.8e5 against -23.4 here); now the step is halved
    or the start dropped, and the result is the mode from f = 0, which satisfies GPML eq.
    3.17, f = K grad log p(y | f) (eq. 3.40 for the softmax)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    t = (X[:, 0] + 0.7 * rng.normal(size=30) > 0).astype(float)
    K = se_ard_covariance(X, None, np.exp([0.04, 2.95]), float(np.exp(4.95)))
    cold = laplace_mode(K, t)
    for f0 in (30 * (1 - 2 * t), 100 * rng.normal(size=30)):
        warm = laplace_mode(K, t, f0)
        assert warm.log_z == pytest.approx(cold.log_z, abs=1e-8)
        np.testing.assert_allclose(warm.f, K @ (t - warm.pi), atol=1e-6 * np.abs(warm.f).max())
    codes = np.argmax(X[:, :1] * np.array([[-2.0, 0.0, 2.0]]) + rng.normal(size=(30, 3)), 1)
    Y = np.eye(3)[codes]
    K = se_ard_covariance(X, None, np.exp([0.04, 2.95]), 3.0)  # (at signal sd 141 the
    # softmax mode stops at its round-off floor, 1e-5 of |F|, from any start)
    cold = softmax_laplace_mode(K, codes, 3)
    warm = softmax_laplace_mode(K, codes, 3, 30 * (1 - 2 * Y))
    assert warm.log_z == pytest.approx(cold.log_z, abs=1e-8)
    np.testing.assert_allclose(warm.F, K @ (Y - warm.P), atol=1e-9 * np.abs(warm.F).max())


def _cold(X, y, out, **fixed):
    keep = np.setdiff1d(np.arange(y.size), out)
    sub = fit(GPClassification(X[keep], y[keep], **fixed), "evidence", seed=0)
    return sub.attrs["log_marginal_likelihood"], predict(sub, X[out]).logpdf(y[out])


def _assert_warm_equals_cold(refits, X, y, out, **fixed):
    logp, converged = refits.fold(np.asarray(out))
    lml, cold = _cold(X, y, np.asarray(out), **fixed)
    assert converged
    assert refits.log_marginal_likelihood > lml - LML_TOL
    np.testing.assert_allclose(logp, cold, atol=LOGP_TOL, rtol=0)
    return lml


def test_warm_refits_equal_cold_fits_two_classes():
    X, y = datasets.ripley_mixture(40, seed=1)
    post = fit(GPClassification(X, y), "evidence", seed=0)
    refits = GPClassificationRefits(post)
    for out in ([1], [5], [7, 12, 30, 2]):
        _assert_warm_equals_cold(refits, X, y, out)
    # without point 11 the cold fit's third (random) start finds a higher optimum than the
    # local search from the full-data one; restarts=3 adds that start
    lml = _assert_warm_equals_cold(GPClassificationRefits(post, restarts=3), X, y, [11])
    refits.fold(np.array([11]))
    assert refits.log_marginal_likelihood < lml - 0.5
    # hyperparameters held fixed stay fixed: the refit is the Laplace mode on the kept rows
    fixed = {"length_scale": 0.4, "signal_sd": 2.0}
    post = fit(GPClassification(X, y, **fixed), "evidence", seed=0)
    refits = GPClassificationRefits(post)
    _assert_warm_equals_cold(refits, X, y, [3, 4], **fixed)
    np.testing.assert_allclose(np.exp(refits.theta), [0.4, 0.4, 2.0])


def test_warm_refits_equal_cold_fits_three_classes(fits):
    X, codes = _problem(30, C=3, seed=5)
    refits = GPClassificationRefits(fits[3][0])
    for out in ([0], [3, 17]):
        _assert_warm_equals_cold(refits, X, codes, out)


def test_bad_input():
    X, y = datasets.ripley_mixture(20, seed=1)
    post = fit(GPClassification(X, y), "evidence", seed=0, restarts=1)
    refits = GPClassificationRefits(post)
    for out in ([], [0, 0], [20], [-1], [0.5], np.arange(19)):
        with pytest.raises(ValueError, match="out must be"):
            refits.fold(np.asarray(out))
    with pytest.raises(ValueError, match="restarts"):
        GPClassificationRefits(post, restarts=0)
    with pytest.raises(TypeError, match="method 'evidence'"):
        GPClassificationRefits({"posterior": None})
    with pytest.raises(TypeError, match="method 'evidence'"):
        gp_laplace_cavity_logpdf(X)
    # a site precision above the marginal's (round-off) leaves no cavity: the marginal, warned
    with pytest.warns(NumericalWarning, match="not positive definite at 1 points"):
        mu, s2 = laplace_cavity(np.zeros(2), np.ones(2), np.array([0.5, 2.0]), np.ones(2))
    np.testing.assert_allclose(s2, [2.0, 1.0])
    np.testing.assert_allclose(mu, [-2.0, -1.0])
