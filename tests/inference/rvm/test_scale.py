"""Basis dictionaries (``centres=``), chunked and Dask sufficient statistics, the memory guard:
each against an independent reference (the dense design, the classic RVM, NumPy)."""

import numpy as np
import pytest

from sparsebayes.inference import fit, predict
from sparsebayes.inference.numerics import (
    cholesky,
    cholesky_inverse,
    gram_log_evidence,
    log_evidence,
)
from sparsebayes.inference.rvm import statistics as st
from sparsebayes.inference.rvm.sequential import GramProducts, SequentialSparseBayes
from sparsebayes.models import (
    Basis,
    CallableKernel,
    GaussianKernel,
    LinearKernel,
    LinearSplineKernel,
    LogBasis,
    PolynomialKernel,
    RVMClassification,
    RVMRegression,
    datasets,
)


def _data(n=300, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, (n, d))
    t = np.sinc(np.linalg.norm(X, axis=1) / np.pi) + 0.1 * rng.standard_normal(n)
    return X, t


KERNELS = {
    "gauss": (GaussianKernel(2.0), ()),
    "ard": (GaussianKernel([1.5, 3.0]), ("linear",)),
    "spline": (LinearSplineKernel(), ()),
    "poly": (PolynomialKernel(degree=2), ("quadratic",)),
    "linear": (LinearKernel(), ()),
    "log": (LogBasis(), ()),
    "callable": (CallableKernel(lambda X, C: np.tanh(X @ C.T)), ()),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_chunked_statistics_equal_the_dense_ones(name):
    """G = Phi^T Phi, Phi^T t, t^T t, sum t in row chunks of 37 (the last one short) equal
    the products of the whole design to 1e-10, for every kernel and extra column."""
    X, t = _data(211, 2 if name != "spline" else 1)
    if name == "log":
        X = np.abs(X) + 0.1
    kernel, extra = KERNELS[name]
    C = X[::7]
    basis = Basis(kernel, C, True, extra, dictionary=True)
    Phi = basis.design(X)
    stats = st.gram_statistics(basis, X, t, chunk=37)
    np.testing.assert_allclose(stats.G, Phi.T @ Phi, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stats.Phit, Phi.T @ t, rtol=1e-10, atol=1e-10)
    assert stats.tt == pytest.approx(t @ t, rel=1e-12)
    assert stats.var_t == pytest.approx(np.var(t), rel=1e-10)
    cols = np.array([0, 3, 5])
    sub = st.gram_statistics(basis, X, t, columns=cols, chunk=50)
    np.testing.assert_allclose(sub.G, Phi[:, cols].T @ Phi[:, cols], rtol=1e-10, atol=1e-10)


def test_cholesky_inverse_equals_numpy_inverse():
    """``H^-1`` from the Cholesky factor (LAPACK dtrtri) against ``numpy.linalg.inv``, at
    the sizes of a sparse model and for the empty model."""
    rng = np.random.default_rng(3)
    for m in (1, 7, 151):
        A = rng.standard_normal((m, 2 * m))
        H = A @ A.T + 0.1 * np.eye(m)
        np.testing.assert_allclose(cholesky_inverse(cholesky(H)), np.linalg.inv(H),
                                   rtol=1e-9, atol=1e-12 * np.abs(np.linalg.inv(H)).max())
    assert cholesky_inverse(np.zeros((0, 0))).shape == (0, 0)


def test_gram_evidence_equals_the_design_evidence():
    """T01 eq. 15 from the statistics equals the design form (App. A) to 1e-10."""
    X, t = _data()
    Phi = RVMRegression(X, t, GaussianKernel(2.0), centres=40).design_matrix()
    alpha = np.exp(np.random.default_rng(1).uniform(-2, 3, Phi.shape[1]))
    G, Pt = Phi.T @ Phi, Phi.T @ t
    assert gram_log_evidence(G, Pt, t @ t, t.size, alpha, 7.0) == pytest.approx(
        log_evidence(Phi, t, alpha, 7.0), rel=1e-10)
    # and the sequential algorithm on the statistics walks the design's path
    dense = SequentialSparseBayes(Phi, t, np.full(t.size, 7.0))
    gram = SequentialSparseBayes(products=GramProducts(G, Pt, t @ t, t.size, 7.0))
    for _ in range(40):
        a1, g1, d1 = dense.step()
        a2, g2, d2 = gram.step()
        assert a1 == a2 and g1 == pytest.approx(g2, rel=1e-7, abs=1e-9)
        assert gram.log_evidence() == pytest.approx(dense.log_evidence(), rel=1e-9)
        if d1:
            break
    assert dense.active == gram.active


@pytest.mark.filterwarnings("ignore::sparsebayes.models.ConvergenceWarning")
@pytest.mark.parametrize("method", ["evidence", "evidence-mackay"])
def test_dictionary_of_all_training_inputs_equals_the_classic_rvm(method):
    """centres=X (the statistics path) gives centres=None's (the design path) log evidence
    to 1e-8, the same relevance vectors and the same predictive."""
    X, t = _data(150)
    opts = {"max_iter": 200} if method == "evidence-mackay" else {}  # the same 200 iterates
    classic = fit(RVMRegression(X, t, GaussianKernel(2.0)), method, seed=0, **opts)
    dic = fit(RVMRegression(X, t, GaussianKernel(2.0), centres=X.copy()), method, seed=0,
              **opts)
    assert dic.attrs["log_evidence"] == pytest.approx(classic.attrs["log_evidence"], abs=1e-8)
    lab = [s if s == "bias" else s.lstrip("c") for s in dic["posterior"]["basis"].values]
    assert sorted(lab) == sorted(classic["posterior"]["basis"].values.tolist())
    Xn = np.random.default_rng(5).uniform(-5, 5, (40, 2))
    p1, p2 = predict(classic, Xn), predict(dic, Xn)
    np.testing.assert_allclose(p2.mean, p1.mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(p2.var, p1.var, rtol=1e-6, atol=1e-10)


def test_kmeans_dictionary_fit_predicts_and_round_trips(tmp_path):
    """centres=M: M deterministic k-means centres, labels "c<j>", the dictionary stored in
    constant_data, so predictions survive a netCDF round trip; the error is close to the
    classic RVM's on the same data."""
    X, t = _data(600)
    p = RVMRegression(X, t, GaussianKernel(2.0), centres=60)
    assert p.centres.shape == (60, 2)
    np.testing.assert_array_equal(p.centres, RVMRegression(X, t, GaussianKernel(2.0),
                                                           centres=60).centres)
    post = fit(p, "evidence", seed=0)
    assert all(s == "bias" or s.startswith("c") for s in post["posterior"]["basis"].values)
    assert np.all(post["constant_data"]["centre_index"].values == -1)
    np.testing.assert_array_equal(post["constant_data"]["dictionary"].values, p.centres)
    Xt, tt = _data(500, seed=9)
    f_true = np.sinc(np.linalg.norm(Xt, axis=1) / np.pi)
    rmse = np.sqrt(np.mean((predict(post, Xt).mean - f_true) ** 2))
    full = fit(RVMRegression(X, t, GaussianKernel(2.0)), "evidence", seed=0)
    rmse_full = np.sqrt(np.mean((predict(full, Xt).mean - f_true) ** 2))
    assert rmse <= 1.25 * rmse_full
    import xarray as xr

    path = tmp_path / "post.nc"
    post.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf")
    np.testing.assert_allclose(predict(back, Xt).mean, predict(post, Xt).mean, rtol=1e-12)


def test_kmeans_runs_once_for_the_fits_of_one_vs_rest(monkeypatch):
    """The K binary fits of ``OneVsRestClassifier(RVC(centres=M))`` share one k-means run
    (the dictionary is a deterministic function of X and M, kept by the digest of X); the
    kept centres equal a fresh k-means run's, and other inputs get their own run."""
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.multiclass import OneVsRestClassifier

    from sparsebayes.inference import RVC
    from sparsebayes.models import problems

    calls = []
    fit_kmeans = MiniBatchKMeans.fit
    monkeypatch.setattr(MiniBatchKMeans, "fit",
                        lambda self, X, *a, **k: calls.append(X.shape) or fit_kmeans(self, X))
    monkeypatch.setattr(problems, "KMEANS", problems.KMeansCentres(size=4))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 2)) + np.repeat(3 * np.eye(3)[:, :2], 80, axis=0)
    y = np.repeat([0, 1, 2], 80)
    ovr = OneVsRestClassifier(RVC(width=1.5, centres=30)).fit(X, y)
    assert len(ovr.estimators_) == 3 and len(calls) == 1
    kept = problems.kmeans_centres(X, 30)
    problems.KMEANS.clear()
    np.testing.assert_array_equal(kept, problems.kmeans_centres(X, 30))  # a fresh run
    assert len(calls) == 2
    X2 = X.copy()
    X2[0, 0] += 1e-9
    problems.kmeans_centres(X2, 30)
    assert len(calls) == 3


def test_kmeans_cache_under_threads(monkeypatch):
    """Threads fitting on more distinct inputs than the cache keeps (study cells may run in
    threads) all get the centres a serial run gives, and the cache stays within its size."""
    from concurrent.futures import ThreadPoolExecutor

    from sparsebayes.models import problems

    monkeypatch.setattr(problems, "KMEANS", problems.KMeansCentres(size=4))
    inputs = [np.random.default_rng(s).normal(size=(200, 2)) for s in range(7)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda X: problems.kmeans_centres(X, 10), inputs * 3))
    assert len(problems.KMEANS) <= problems.KMEANS.size
    problems.KMEANS.clear()
    serial = [problems.kmeans_centres(X, 10) for X in inputs]
    for i, centres in enumerate(got):
        np.testing.assert_array_equal(centres, serial[i % len(inputs)])


def test_classification_with_a_dictionary():
    """Ripley: a 30-centre dictionary classifies about as well as the classic RVM."""
    X, y = datasets.ripley_mixture(250, seed=2)
    Xt, yt = datasets.ripley_mixture(1000, seed=3)
    full = fit(RVMClassification(X, y, GaussianKernel(0.5)), "evidence", seed=0)
    dic = fit(RVMClassification(X, y, GaussianKernel(0.5), centres=30), "evidence", seed=0)
    err = [np.mean(predict(p, Xt).label != yt) for p in (full, dic)]
    assert err[1] <= err[0] + 0.02
    # a dictionary of every training input equals the classic basis
    same = fit(RVMClassification(X, y, GaussianKernel(0.5), centres=X.copy()), "evidence",
               seed=0)
    assert same.attrs["log_evidence"] == pytest.approx(full.attrs["log_evidence"], abs=1e-8)


def test_dask_input_equals_numpy_input():
    """The statistics as a map-reduce over Dask row chunks on a 2-worker LocalCluster equal
    the NumPy ones, and so does the fit (log evidence to 1e-8)."""
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    X, t = _data(900)
    C = RVMRegression(X, t, GaussianKernel(2.0), centres=50).centres
    ref = fit(RVMRegression(X, t, GaussianKernel(2.0), centres=C), "evidence", seed=0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(200, 2))
        td = da.from_array(t, chunks=200)
        basis = Basis(GaussianKernel(2.0), C, True, (), dictionary=True)
        s_np = st.gram_statistics(basis, X, t)
        s_da = st.gram_statistics(basis, Xd, td)
        np.testing.assert_allclose(s_da.G, s_np.G, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(s_da.Phit, s_np.Phit, rtol=1e-12, atol=1e-10)
        post = fit(RVMRegression(Xd, td, GaussianKernel(2.0), centres=C), "evidence", seed=0)
    assert post.attrs["log_evidence"] == pytest.approx(ref.attrs["log_evidence"], abs=1e-8)
    assert post["posterior"]["basis"].values.tolist() == ref["posterior"]["basis"].values.tolist()


def test_bad_dictionaries_and_dask_inputs():
    X, t = _data(50)
    with pytest.raises(ValueError, match="centres has 3 features but X has 2"):
        RVMRegression(X, t, centres=np.ones((4, 3)))
    with pytest.raises(ValueError, match="centres contains NaN"):
        RVMRegression(X, t, centres=np.array([[np.nan, 1.0]]))
    for M in (0, -3, 51):
        with pytest.raises(ValueError, match="between 1 and the number of training points"):
            RVMClassification(X, t > 0.2, centres=M)
    for bad in (True, 2.5):
        with pytest.raises(TypeError, match="centres must be None, an int"):
            RVMRegression(X, t, centres=bad)
    with pytest.raises(TypeError, match="centres"):
        RVMRegression(X, t, centres=np.array([["a", "b"]]))
    da = pytest.importorskip("dask.array")
    Xd = da.from_array(X, chunks=(10, 2))
    td = da.from_array(t, chunks=10)
    with pytest.raises(ValueError, match="needs a basis dictionary"):
        RVMRegression(Xd, td)
    unknown = Xd[Xd[:, 0] > 0]  # boolean indexing: unknown chunk sizes
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        RVMRegression(unknown, td, centres=5)
    with pytest.raises(TypeError, match="t must be one too"):
        RVMRegression(Xd, t, centres=5)
    bad = da.from_array(np.where(np.arange(50)[:, None] == 7, np.nan, X), chunks=(10, 2))
    with pytest.raises(ValueError, match="NaN or inf"):
        fit(RVMRegression(bad, td, centres=X[:5]), "evidence")


def test_memory_guard_names_the_size_and_the_way_out(monkeypatch):
    X, t = _data(200)
    monkeypatch.setattr(st, "available_memory", lambda: 10_000)
    with pytest.raises(MemoryError, match=r"200 x 201 design matrix needs .*GiB.*centres=M"):
        fit(RVMRegression(X, t, GaussianKernel(2.0)), "evidence")


def test_vrvm_on_the_statistics_of_a_dictionary_equals_vrvm_on_its_design():
    """VRVM with a dictionary runs on chunked statistics; the same dictionary's design
    through the design path (vrvm on Phi) gives the same bound and posterior."""
    from sparsebayes.inference.rvm.vrvm import vrvm
    from sparsebayes.models import GammaPrior

    X, t = _data(400)
    p = RVMRegression(X, t, GaussianKernel(2.0), centres=40)
    post = fit(p, "vrvm", seed=0)
    st = vrvm(p.design_matrix(), t, GammaPrior())
    assert post.attrs["elbo"] == pytest.approx(st.bound[-1], rel=1e-9)
    np.testing.assert_allclose(post["gaussian_posterior"]["mu"].values, st.mu, rtol=1e-6,
                               atol=1e-9)


def test_memory_guard_for_classification(monkeypatch):
    X, y = datasets.ripley_mixture(100, seed=0)
    monkeypatch.setattr(st, "available_memory", lambda: 10_000)
    with pytest.raises(MemoryError, match=r"100 x 101 design.*centres=M"):
        fit(RVMClassification(X, y, GaussianKernel(0.5)), "evidence")


@pytest.mark.slow
def test_collapsed_nuts_on_a_dictionary_agrees_with_its_evidence_solution():
    """The same dictionary model (30 k-means centres of 400 points) by the evidence (T01
    eq. 15 on the sufficient statistics) and by NUTS on the collapsed model (w integrated
    out, PhiTPhi precomputed: cost per gradient O(M^3), not O(N)): the evidence predictive
    means lie within the NUTS posterior sd of f at >= 90% of test inputs (measured: all),
    the noise sds agree to 10%, and NUTS converged: max R-hat < 1.01 with 2 x 2000 draws
    (measured over seeds 0-7: 1.0020-1.0056; 2 x 500 draws gave 1.007-1.020, luck)."""
    import warnings

    X, t = _data(400, d=2, seed=7)
    problem = RVMRegression(X, t, GaussianKernel(2.0), centres=30)
    ev = fit(problem, "evidence", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nuts = fit(problem, "nuts", seed=0, draws=2000, tune=1000, chains=2)
    assert nuts.attrs["n_divergent"] == 0
    assert nuts.attrs["max_rhat"] < 1.01
    Xn = np.random.default_rng(8).uniform(-4, 4, (60, 2))
    Phi = problem.basis.design(Xn)
    w = nuts["posterior"]["w"].values.reshape(-1, Phi.shape[1])
    f = w @ Phi.T
    m_ev = predict(ev, Xn).mean
    assert np.mean(np.abs(m_ev - f.mean(0)) <= f.std(0)) >= 0.9
    np.testing.assert_allclose(predict(nuts, Xn, kind="samples", max_draws=None).mean,
                               f.mean(0), atol=1e-8)
    sd_ev = float(ev["posterior"]["noise_sd"].values.flat[0])
    assert float(nuts["posterior"]["noise_sd"].mean()) == pytest.approx(sd_ev, rel=0.1)
