"""Generators against their formulas and loaders against the data README's counts."""


import numpy as np
import pytest
from conftest import DATA, needs_data

from sparsebayes.models import datasets


def test_sinc_noise_models_and_seed():
    X, t = datasets.sinc(100, noise="uniform", seed=3)
    f = np.sin(X[:, 0]) / np.where(X[:, 0] == 0, 1, X[:, 0])
    assert X.shape == (100, 1) and np.all(np.abs(t - f) <= 0.2)
    assert np.abs(t - f).max() > 0.15  # U[-0.2, 0.2] reaches near its bound in 100 draws
    _, t2 = datasets.sinc(100, noise="uniform", seed=3)
    np.testing.assert_array_equal(t, t2)
    assert datasets.sinc_function(0.0) == 1.0
    Xn, tn = datasets.sinc(50, noise=None, seed=0, evenly_spaced=False)
    np.testing.assert_allclose(tn, np.sin(Xn[:, 0]) / Xn[:, 0])
    _, tg0 = datasets.sinc(4000, noise="gaussian", seed=1)
    x = np.linspace(-10, 10, 4000)
    assert np.std(tg0 - datasets.sinc_function(x)) == pytest.approx(0.1, rel=0.05)
    with pytest.raises(ValueError, match="noise"):
        datasets.sinc(10, noise="cauchy")


@pytest.mark.parametrize("kind", [1, 2, 3])
def test_friedman_equals_formula(kind):
    """Friedman (1991) eqs., Tipping App. E (62)-(64), recomputed from the returned X."""
    X, t = datasets.friedman(3000, kind=kind, seed=0)
    x1, x2, x3, x4 = X[:, 0], X[:, 1], X[:, 2], X[:, 3]
    if kind == 1:
        f = 10 * np.sin(np.pi * x1 * x2) + 20 * (x3 - 0.5) ** 2 + 10 * x4 + 5 * X[:, 4]
        sd = 1.0
    elif kind == 2:
        f = np.sqrt(x1**2 + (x2 * x3 - 1 / (x2 * x4)) ** 2)
        sd = np.std(f) / 3
    else:
        f = np.arctan((x2 * x3 - 1 / (x2 * x4)) / x1)
        sd = np.std(f) / 3
    assert np.std(t - f) == pytest.approx(sd, rel=0.06)
    assert abs(np.mean(t - f)) < 4 * sd / np.sqrt(3000)


def test_ripley_mixture_class_means():
    X, y = datasets.ripley_mixture(20000, seed=0)
    assert np.bincount(y).tolist() == [10000, 10000]
    np.testing.assert_allclose(X[y == 0].mean(0), [-0.2, 0.3], atol=0.02)
    np.testing.assert_allclose(X[y == 1].mean(0), [0.05, 0.7], atol=0.02)
    # within a class: mixture variance = 0.03 + spread of the two means
    assert X[y == 0, 0].var() == pytest.approx(0.03 + 0.25, rel=0.05)


@needs_data("ripley")
def test_ripley_loader_counts():
    X, y = datasets.load_ripley("train", data_dir=DATA)
    assert X.shape == (250, 2) and np.bincount(y).tolist() == [125, 125]
    X, y = datasets.load_ripley("test", data_dir=DATA)
    assert X.shape == (1000, 2) and np.bincount(y).tolist() == [500, 500]


def test_ripley_ships_with_the_package(tmp_path, monkeypatch):
    """With no data folder, or one without Ripley's files, they are read from the package
    (models/data, its README's sha256); a file in the data folder is preferred; a set the
    package does not ship is still refused with the message naming its files."""
    import hashlib

    readme = (datasets.BUNDLED / "README.md").read_text()
    for name in datasets.FILES["ripley"]:
        digest = hashlib.sha256((datasets.BUNDLED / name).read_bytes()).hexdigest()
        assert f"`{digest}`" in readme.replace("\n", "")
    monkeypatch.delenv("SPARSEBAYES_DATA", raising=False)
    for where in (None, tmp_path):
        assert datasets.missing_files("ripley", where)[1] == []
        assert datasets.missing_message("ripley", where) is None
        X, y = datasets.load_ripley("test", data_dir=where)
        assert X.shape == (1000, 2) and np.bincount(y).tolist() == [500, 500]
        assert datasets.available(where)["ripley"] == str(datasets.BUNDLED / "ripley_train.csv")
    (tmp_path / "ripley_train.csv").write_text("xs,ys,yc\n0.5,0.5,1\n0.1,0.2,0\n")
    X, y = datasets.load_ripley("train", data_dir=tmp_path)
    assert X.shape == (2, 2) and y.tolist() == [1, 0]
    with pytest.raises(FileNotFoundError, match="needs the file.*boston.csv"):
        datasets.load_boston(data_dir=tmp_path)
    if not datasets.missing_files("ripley", DATA)[1] and (DATA / "ripley_test.csv").is_file():
        assert (DATA / "ripley_test.csv").read_bytes() == \
            (datasets.BUNDLED / "ripley_test.csv").read_bytes()  # the data folder's copy


@needs_data("banana", "breast_cancer", "german", "heart")
@pytest.mark.parametrize("name, n_train, n_test, d", [
    ("banana", 400, 4900, 2), ("breast_cancer", 200, 77, 9), ("german", 700, 300, 20),
    ("heart", 170, 100, 13)])
def test_ida_splits_partition_the_data(name, n_train, n_test, d):
    for split in (0, 9):
        Xtr, ytr, Xte, yte = datasets.load_ida(name, split, data_dir=DATA)
        assert Xtr.shape == (n_train, d) and Xte.shape == (n_test, d)
        assert set(np.unique(np.r_[ytr, yte])) == {0, 1}
    with np.load(DATA / f"{name}.npz") as z:
        n = z["X"].shape[0]
        idx = np.sort(np.r_[z["train_idx"][3], z["test_idx"][3]])
    np.testing.assert_array_equal(idx, np.arange(n))


@needs_data("boston", "pima_ripley", "haberman", "banana")
def test_other_loaders(monkeypatch):
    monkeypatch.setenv("SPARSEBAYES_DATA", str(DATA))
    X, t, names = datasets.load_boston()
    assert X.shape == (506, 13) and names[0] == "CRIM" and t.max() == 50.0
    Xtr, ytr, Xte, yte = datasets.load_pima("ripley")
    assert np.bincount(ytr).tolist() == [132, 68] and np.bincount(yte).tolist() == [223, 109]
    X, y = datasets.load_haberman()
    assert np.bincount(y).tolist() == [225, 81]
    found = datasets.available()
    assert found["sinc"] == "generator" and found["banana"].endswith("banana.npz")


def test_missing_file_says_which_and_where(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSEBAYES_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="SPARSEBAYES_DATA"):
        datasets.load_boston()
    with pytest.raises(FileNotFoundError, match=r"boston\.csv: not found in the data "
                       r"folder .*SPARSEBAYES_DATA.*scikit-learn 1\.1\.3"):
        datasets.load_boston(data_dir=tmp_path)
    assert datasets.available(tmp_path)["boston"].startswith("missing: boston.csv")
    with pytest.raises(ValueError, match="unknown IDA"):
        datasets.load_ida("spam", data_dir=tmp_path)
