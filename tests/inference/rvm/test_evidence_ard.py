"""Learned ARD widths (``learn_width=True`` with one Gaussian width per input) learned by the
RVM's own evidence (``widths_from_gp=False``, Tipping 2001 §4.3 and App. C), whose result
does not depend on the starting widths: the sparse fit starts from the evidence
optimum of the tied-alpha model (isotropic first), each claim against an independent
reference (Tipping 2001 §4.4.1, the Friedman #1 function itself, dense eq. 15, finite
differences, the design path). The ten data sets of §4.4.1 are in benchmarks/bench_ard.py;
the tests here fit the first three of them."""

import warnings

import numpy as np
import pytest
from conftest import dense_rbf_log_evidence, friedman1, friedman1_raw
from scipy import stats

from sparsebayes.inference import fit, predict
from sparsebayes.inference.testing import tied_columns, tied_objective
from sparsebayes.models import GaussianKernel, NumericalWarning, RVMRegression

D = 10  # Friedman #1: inputs 1-5 relevant (1-3 non-linearly, 4-5 linearly), 6-10 irrelevant
N_SETS = 3  # the first three of the benchmark's ten data sets
START = 5.0  # every width starts here (inputs standardised); the result does not depend on it
FIXED_WIDTHS = (4.0, 5.0, 6.0)  # the isotropic baseline's grid (3 and 8 are far worse)


def friedman1_f(U):
    """T01 App. E eq. (62): ``10 sin(pi x1 x2) + 20 (x3 - 1/2)^2 + 10 x4 + 5 x5``."""
    return (10 * np.sin(np.pi * U[:, 0] * U[:, 1]) + 20 * (U[:, 2] - 0.5) ** 2 + 10 * U[:, 3]
            + 5 * U[:, 4])


def ard_fit(X, t, start, width_bounds=None, widths_from_gp=False, **kw):
    """The ARD evidence fit (its widths by the RVM's evidence, or a GP's); with the default
    width bounds and the evidence's widths, the warning that some width ended on the
    joint-space floor is expected exactly when ``attrs['width_at_bound'] > 0``."""
    kernel = GaussianKernel(np.broadcast_to(np.asarray(start, float), X.shape[1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NumericalWarning)
        post = fit(RVMRegression(X, t, kernel=kernel, learn_width=True, **kw), "evidence",
                   seed=0, draws=10, chains=1, width_bounds=width_bounds,
                   widths_from_gp=widths_from_gp)
    on_floor = [w for w in caught if "lower bound" in str(w.message)]
    assert len(on_floor) == (post.attrs["width_at_bound"] > 0 and width_bounds is None
                             and not widths_from_gp)
    return post


def mse_of(post, Xt, ft):
    return float(np.mean((predict(post, Xt).mean - ft) ** 2))


def permutation_effect(f, Z, seed=0):
    """Per input k: the RMS change of ``f(Z)`` when column k of ``Z`` is permuted (the
    others held): how much the function uses input k, whatever its parametrisation."""
    rng = np.random.default_rng(seed)
    f0 = f(Z)
    out = []
    for k in range(Z.shape[1]):
        Zp = Z.copy()
        Zp[:, k] = rng.permutation(Zp[:, k])
        out.append(np.sqrt(np.mean((f(Zp) - f0) ** 2)))
    return np.array(out)


@pytest.fixture(scope="module")
def friedman_fits():
    """Per data set: the ARD fit (and its test MSE) and the fixed isotropic fits' MSEs."""
    rows = []
    for seed in range(N_SETS):
        X, t, Xt, ft = friedman1(seed)
        post = ard_fit(X, t, START)
        fixed = {r: mse_of(fit(RVMRegression(X, t, kernel=GaussianKernel(r)), "evidence",
                                 seed=0, draws=10, chains=1), Xt, ft) for r in FIXED_WIDTHS}
        rows.append({"post": post, "mse": mse_of(post, Xt, ft), "fixed": fixed,
                     "width": np.asarray(post.attrs["width"]),
                     "n": post["posterior"].sizes["basis"]})
    return rows


# --------------------------------------------------------------------------------------------
# Tipping (2001) §4.4.1, Friedman #1
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_friedman1_learned_ard_widths_reproduce_tipping_441(friedman_fits):
    """Tipping (2001) §4.4.1: the eta-RVM (all 10 input scales learned) 0.27 test MSE with
    11.5 vectors, against 2.80 for the RVM with one width chosen by 5-fold CV. Ours, mean
    over the first 3 of the benchmark's 10 data sets (all 10: benchmarks/results/ard.md):
    MSE <= 0.6, at least 3x below the best fixed isotropic width of a grid (chosen by its
    mean *test* MSE: kinder to the baseline than CV), about as sparse."""
    rows = friedman_fits
    mse = np.mean([r["mse"] for r in rows])
    fixed = {w: np.mean([r["fixed"][w] for r in rows]) for w in FIXED_WIDTHS}
    best_fixed = min(fixed.values())
    n_vec = np.mean([r["n"] for r in rows])
    report = (f"ARD MSE {mse:.3f} (paper 0.27), {n_vec:.1f} vectors (paper 11.5); fixed "
              f"widths {fixed} (paper 2.80)")
    print("\n" + report)
    assert mse <= 0.6, report
    assert 3 * mse <= best_fixed, report
    assert 5 <= n_vec <= 25, report
    # the printed baseline is Tipping's: 2.80 sits inside our grid's range
    assert 2.0 <= best_fixed <= 4.0, report


@pytest.mark.slow
def test_irrelevant_inputs_widths_end_10x_wider(friedman_fits):
    """"The five irrelevant inputs' widths at least 10x wider than the relevant ones'", read
    in T01's parametrisation: input k enters the kernel (eq. 31) as ``eta_k (x_k - c_k)^2``
    with ``eta_k = r_k^-2``, so 10x in width is 100x in eta. Two readings, both asserted:

    * by group, on every data set: the geometric mean of the five irrelevant widths is at
      least 10x that of the five relevant ones (inputs 1-5);
    * input by input, median over the data sets: each irrelevant input at least 10x each
      non-linear input (1-3) and at least 2x the linear inputs 4-5.

    Inputs 4-5 enter eq. (62) linearly, and a Gaussian kernel carries a trend on the flank
    of a wide basis: their widths are legitimately large (medians ~30-45 over 10 data sets
    against 150-340 for the irrelevant inputs), so "10x each relevant input" does not hold
    for them and is not claimed. The irrelevant widths stop where the evidence flattens
    (beyond ~50, ``(x_k - c_k)^2 / r_k^2 < 0.5%``) or at a finite-sample local optimum
    (20-55 on some data sets); test_irrelevant_inputs_are_switched_off checks what matters,
    that the fitted function does not use them."""
    W = np.log([r["width"] for r in friedman_fits])
    group = np.exp(W[:, 5:].mean(1) - W[:, :5].mean(1))
    med = np.exp(np.median(W, axis=0))
    print("\nirrelevant / relevant widths (geometric means per data set):", group.round(1),
          "\nmedian widths", med.round(1))
    assert np.all(group >= 10), np.exp(W).round(1)
    assert np.min(med[5:]) >= 10 * np.max(med[:3]), med.round(1)
    assert np.min(med[5:]) >= 2 * np.max(med[3:5]), med.round(1)


@pytest.mark.slow
def test_irrelevant_inputs_are_switched_off(friedman_fits):
    """Whatever the widths, the learned function uses inputs as the true one (T01 eq. 62)
    does: permuting a relevant input's test column moves the prediction as much as it moves
    the noise-free function (within 15%), and permuting an irrelevant one (no effect on the
    truth) moves it by less than a fifth of the weakest relevant input's true effect (x5:
    ``5 sqrt(1/6) = 2.04``; noise sd 1)."""
    for seed, row in enumerate(friedman_fits):
        X, _, U, f = friedman1_raw(seed)
        np.testing.assert_allclose(friedman1_f(U), f, rtol=1e-12)  # the generator is eq. 62
        m, s = X.mean(0), X.std(0)
        truth = permutation_effect(friedman1_f, U)
        ours = permutation_effect(
            lambda Z, post=row["post"], m=m, s=s: predict(post, (Z - m) / s).mean, U)
        print(f"\nset {seed}: truth {truth.round(2)}\n       ours {ours.round(2)}")
        assert np.all(truth[5:] == 0)
        np.testing.assert_allclose(ours[:5], truth[:5], rtol=0.15)
        assert np.all(ours[5:] < 0.2 * np.min(truth[:5])), ours.round(3)


@pytest.mark.slow
def test_learned_widths_do_not_depend_on_the_start(friedman_fits):
    """Three starts spread over a factor 4 (all 2.5, all 10, and a mixture in between)
    give the same widths, evidence and test error. The tolerance is 1e-12 relative: the
    starting widths enter no computation (the search starts from the tied model's optimum),
    so the three fits run the same floating-point operations; before, the same starts gave
    MSE 1.4 / 0.40 / 4.3 on this data set."""
    X, t, Xt, ft = friedman1(0)
    ref = friedman_fits[0]
    mixed = np.geomspace(2.5, 10.0, D)[np.random.default_rng(0).permutation(D)]
    for start in (2.5, 10.0, mixed):
        post = ard_fit(X, t, start)
        np.testing.assert_allclose(post.attrs["width"], ref["width"], rtol=1e-12)
        assert post.attrs["log_evidence"] == pytest.approx(ref["post"].attrs["log_evidence"],
                                                           rel=1e-12)
        assert mse_of(post, Xt, ft) == pytest.approx(ref["mse"], rel=1e-12)


@pytest.mark.slow
def test_learned_widths_follow_the_inputs_order_and_units(friedman_fits):
    """A test the start-free construction cannot pass by design: the inputs permuted and
    each rescaled (factors 0.5 to 2) give the same fit with the widths permuted and
    rescaled alike (to L-BFGS-B's tolerance), the same evidence and test error.

    The bounds are given, permuted and rescaled with the inputs (floor 0.5, below every
    width the evidence picks here). The default joint-space floor (above the non-linear
    inputs' evidence optimum on this data set) is equivariant too, but the inputs it
    holds on the floor leave a flat ridge with optima 0.2 nats apart, which the two
    orders reach differently."""
    X, t, Xt, ft = friedman1(0)
    rng = np.random.default_rng(1)
    perm = rng.permutation(D)
    scale = np.geomspace(0.5, 2.0, D)[rng.permutation(D)]
    bounds = np.array([(0.5, 1e3)] * D)
    ref = {"post": ard_fit(X, t, START, width_bounds=[tuple(b) for b in bounds])}
    ref["width"] = np.asarray(ref["post"].attrs["width"])
    ref["mse"] = mse_of(ref["post"], Xt, ft)
    post = ard_fit(X[:, perm] * scale, t, START,
                   width_bounds=[tuple(b) for b in bounds * scale[:, None]])
    np.testing.assert_allclose(post.attrs["width"], ref["width"][perm] * scale, rtol=0.02)
    assert post.attrs["log_evidence"] == pytest.approx(ref["post"].attrs["log_evidence"],
                                                       abs=1e-3)
    assert mse_of(post, Xt[:, perm] * scale, ft) == pytest.approx(ref["mse"], rel=0.01)


@pytest.mark.slow
def test_reported_evidence_is_eq15_at_the_returned_widths(friedman_fits):
    """The log evidence reported equals T01 eq. (15) evaluated densely (SciPy's N x N
    Gaussian density) at the returned widths, alpha and beta, the design rebuilt with
    scikit-learn's rbf_kernel on inputs scaled by 1 / width (gamma = 1): to 1e-6 (the
    weights' precisions reach 1e-6 here, so C's condition number, ~1e8, limits the dense
    reference itself: SciPy's density and slogdet with a solve differ by ~2e-7)."""
    post = friedman_fits[0]["post"]
    idx = post["constant_data"]["centre_index"].values
    assert np.sum(idx < 0) == int("bias" in post["posterior"]["basis"].values)
    direct = dense_rbf_log_evidence(post)
    assert post.attrs["log_evidence"] == pytest.approx(direct, abs=1e-6)


# --------------------------------------------------------------------------------------------
# The tied model and the two data paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("isotropic", [False, True])
def test_tied_objective_is_eq15_and_its_gradient_matches_finite_differences(isotropic):
    """The tied model's value is eq. (15) with A = beta diag(lambda_k on kernel columns,
    lambda_o on the bias and linear columns), dense; its gradient (App. C for the widths,
    App. A eqs. 42 and 45 for ln lambda and ln beta) equals central differences."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (45, 3))
    t = np.sin(3 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(45)
    problem = RVMRegression(X, t, kernel=GaussianKernel((0.7, 1.5, 4.0)),
                            extra_columns=("linear",))
    basis = problem.basis
    cols = tied_columns(basis)
    assert cols.size == basis.n_columns  # fewer than TIED_MAX_KERNEL_COLUMNS: all
    scale = np.array([0.5, 1.0, 2.0]) if isotropic else None
    p = np.array([0.3, 2.0, -1.0, 3.0]) if isotropic else np.log([0.7, 1.5, 4.0, 7.0, 0.5, 20.])
    value, grad = tied_objective(p, basis.kernel, basis, X, t, cols, scale)
    width = np.exp(p[0]) * scale if isotropic else np.exp(p[:3])
    Phi = basis.with_kernel(GaussianKernel(width)).design(X)
    is_k = basis.kernel_index() >= 0
    lam_k, lam_o, beta = np.exp(p[-3:])  # alpha_g = beta lambda_g
    C = np.eye(t.size) / beta + (Phi / (beta * np.where(is_k, lam_k, lam_o))) @ Phi.T
    direct = stats.multivariate_normal(np.zeros(t.size), C).logpdf(t)
    assert -value * t.size == pytest.approx(direct, rel=1e-10)
    h = 1e-5
    num = [(tied_objective(p + h * e, basis.kernel, basis, X, t, cols, scale)[0]
            - tied_objective(p - h * e, basis.kernel, basis, X, t, cols, scale)[0]) / (2 * h)
           for e in np.eye(p.size)]
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-8)


def test_tied_columns_are_evenly_spaced_when_there_are_many(monkeypatch):
    from sparsebayes.inference.rvm import evidence

    X = np.random.default_rng(0).standard_normal((50, 2))
    basis = RVMRegression(X, X[:, 0], kernel=GaussianKernel((1.0, 1.0)),
                          extra_columns=("linear",)).basis
    monkeypatch.setattr(evidence, "TIED_MAX_KERNEL_COLUMNS", 11)
    cols = tied_columns(basis)
    kern = basis.kernel_index()[cols]
    assert np.sum(kern < 0) == 3  # the bias and two linear columns are always in
    np.testing.assert_array_equal(kern[kern >= 0], np.arange(0, 50, 4.9).round().astype(int))


def test_dictionary_of_the_training_inputs_learns_the_same_widths():
    """centres=X (the statistics path: tied model and sparse fit on Phi^T Phi) learns the
    widths, relevance vectors and evidence of centres=None (the design path)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-5, 5, (80, 3))
    t = np.sinc(X[:, 0] / np.pi) + 0.1 * X[:, 1] + 0.1 * rng.standard_normal(80)
    classic = ard_fit(X, t, 2.0)
    dic = ard_fit(X, t, 2.0, centres=X.copy())
    np.testing.assert_allclose(dic.attrs["width"], classic.attrs["width"], rtol=1e-5)
    assert dic.attrs["log_evidence"] == pytest.approx(classic.attrs["log_evidence"], abs=1e-6)
    lab = [s if s == "bias" else s.lstrip("c") for s in dic["posterior"]["basis"].values]
    assert sorted(lab) == sorted(classic["posterior"]["basis"].values.tolist())


@pytest.mark.parametrize("widths_from_gp", [False, True])
def test_fixed_noise_and_width_bounds_are_kept(widths_from_gp):
    """With noise_sd given the noise stays fixed through the tied stage (or the GP's type-II
    ML); the widths stay inside width_bounds (one pair per input)."""
    X, t, _, _ = friedman1(0)
    X, t = X[:120, :3], t[:120]
    box = [(1.0, 3.0), (1.0, 3.0), (2.0, 50.0)]
    post = fit(RVMRegression(X, t, kernel=GaussianKernel((2.0, 2.0, 2.0)), learn_width=True,
                             noise_sd=1.0), "evidence", seed=0, draws=10, chains=1,
               width_bounds=box, widths_from_gp=widths_from_gp)
    assert post.attrs["width_route"] == ("gp" if widths_from_gp else "evidence")
    assert float(post["gaussian_posterior"]["beta"]) == pytest.approx(1.0, rel=1e-12)
    w = np.asarray(post.attrs["width"])
    lo, hi = np.array(box).T
    assert np.all(w >= lo * (1 - 1e-9)) and np.all(w <= hi * (1 + 1e-9))


def test_bad_width_bounds_for_ard_widths():
    X, t, _, _ = friedman1(0)
    problem = RVMRegression(X[:60, :2], t[:60], kernel=GaussianKernel((2.0, 2.0)),
                            learn_width=True)
    for bad in [((1.0, 2.0),) * 3, (2.0, 1.0)]:
        with pytest.raises(ValueError, match="width_bounds"):
            fit(problem, width_bounds=bad)
