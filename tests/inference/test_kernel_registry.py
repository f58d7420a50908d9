"""A kernel defined outside the package (a Matérn 5/2, Rasmussen & Williams 2006 eq. 4.17)
is registered with ``register_kernel`` and is then a citizen like the built-in ones: it
fits, its result passes the contract with its own parameter as ``kernel_length_scale``,
round-trips netCDF, predicts and leaves one out from the reloaded file alone, and serves
scikit-learn's ``RVR``. A kernel that declares a ``width`` and its gradient (an exponential
kernel here) has that width learned by the evidence, as the Gaussian kernel has."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest
import xarray as xr
from scipy import optimize

from sparsebayes.inference import RVR, fit, loo, predict
from sparsebayes.inference.results import basis_from_posterior
from sparsebayes.inference.testing import joint_objective
from sparsebayes.models import CallableKernel, Kernel, RVMRegression, datasets, register_kernel
from sparsebayes.models.kernels import as_kernel, registered_kernel, sq_distances


def matern52(X, C, length_scale):
    """R&W eq. 4.17 with nu = 5/2: (1 + sqrt5 r / l + 5 r^2 / (3 l^2)) exp(-sqrt5 r / l)."""
    r = np.sqrt(5.0 * sq_distances(X, C)) / length_scale
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


@register_kernel
@dataclass(frozen=True, eq=False)
class Matern52(Kernel):
    length_scale: float = 1.0
    name: str = field(default="matern52_test", init=False)
    parameters: ClassVar[dict[str, str]] = {"length_scale": "Matérn 5/2 length scale l"}
    symmetric: ClassVar[bool] = True

    def __call__(self, X, C, out=None):
        K = matern52(X, C, self.length_scale)
        if out is None:
            return K
        out[...] = K
        return out


def test_the_kernel_is_scikit_learns_matern_and_is_registered():
    from sklearn.gaussian_process.kernels import Matern

    rng = np.random.default_rng(0)
    X, C = rng.normal(size=(30, 3)), rng.normal(size=(7, 3))
    ref = Matern(length_scale=1.7, nu=2.5)(X, C)
    np.testing.assert_allclose(Matern52(1.7)(X, C), ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(Matern52(1.7).diagonal(X), 1.0, rtol=1e-12)
    assert registered_kernel("matern52_test") is Matern52
    assert as_kernel("matern52_test", length_scale=2.0).spec() == {
        "name": "matern52_test", "length_scale": 2.0}


def test_a_registered_kernel_fits_reloads_from_netcdf_and_predicts(tmp_path):
    X, t = datasets.sinc(n=120, noise="gaussian", noise_scale=0.1, seed=2)
    post = fit(RVMRegression(X, t, kernel=Matern52(2.0)), "evidence", seed=0)  # checks the contract
    assert post.attrs["kernel"] == "matern52_test"
    assert post.attrs["kernel_length_scale"] == 2.0
    # the same function as a callable kernel: the same fit (another code path: not symmetric)
    ref_kernel = CallableKernel(lambda A, B: matern52(A, B, 2.0))
    ref = fit(RVMRegression(X, t, kernel=ref_kernel), "evidence", seed=0)
    assert post.attrs["log_evidence"] == pytest.approx(ref.attrs["log_evidence"], rel=1e-9)
    assert post.attrs["n_relevant"] == ref.attrs["n_relevant"]

    path = tmp_path / "matern.nc"
    post.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf").load()
    X_new = np.linspace(-12, 12, 50)[:, None]
    p, p_back = predict(post, X_new), predict(back, X_new)
    np.testing.assert_allclose(p_back.mean, p.mean, rtol=1e-12)
    np.testing.assert_allclose(p_back.var, p.var, rtol=1e-12)
    # T01 eq. 21 on the callable fit's own design (a callable cannot be rebuilt from attrs)
    basis, columns = basis_from_posterior(ref, kernel=ref_kernel)
    mean_ref = basis.design(X_new, columns=columns) @ ref["gaussian_posterior"]["mu"].values
    np.testing.assert_allclose(p.mean, mean_ref, rtol=1e-7, atol=1e-9)
    star = predict(back, X_new, kind="rvm*")  # RQ05 eqs. 6-7 use k(x*, x*) = 1 here
    assert np.all(star.var >= p.var - 1e-12)
    assert loo(back).elpd == pytest.approx(loo(post).elpd, rel=1e-12)
    # scikit-learn's route takes it too, and pickles
    rvr = pickle.loads(pickle.dumps(RVR(kernel=Matern52(2.0), random_state=0).fit(X, t)))
    np.testing.assert_allclose(rvr.predict(X_new), p.mean, rtol=1e-12, atol=1e-15)


def test_an_unregistered_kernel_class_is_refused_with_the_remedy():
    @dataclass(frozen=True, eq=False)
    class Mine(Kernel):
        scale: float = 1.0
        name: str = field(default="mine", init=False)
        parameters: ClassVar[dict[str, str]] = {"scale": "a scale"}

        def __call__(self, X, C, out=None):
            return matern52(X, C, self.scale)

    X, t = datasets.sinc(n=30, seed=0)
    with pytest.raises(TypeError, match="Mine is not registered.*register_kernel"):
        RVMRegression(X, t, kernel=Mine())
    with pytest.raises(ValueError, match="kernel name 'gaussian' is taken"):
        register_kernel(type("Gaussian2", (Mine,), {"name": "gaussian"}))
    with pytest.raises(ValueError, match="unknown kernel 'nope'.*register_kernel"):
        as_kernel("nope")


@register_kernel
@dataclass(frozen=True, eq=False)
class Exponential(Kernel):
    """``exp(-||x - c|| / r)`` (R&W eq. 4.18), with ``dK/d ln r = K ||x - c|| / r``."""

    width: float = 1.0
    name: str = field(default="exponential_test", init=False)
    parameters: ClassVar[dict[str, str]] = {"width": "exponential kernel width r"}
    symmetric: ClassVar[bool] = True

    def __call__(self, X, C, out=None):
        D = np.sqrt(sq_distances(X, C, out=out), out=out)
        D /= -self.width
        return np.exp(D, out=D)

    def log_width_gradient(self, X, C, K, dK):
        return np.array([np.sum(dK * K * np.sqrt(sq_distances(X, C)) / self.width)])


def test_a_kernel_declaring_its_width_gradient_has_its_width_learned():
    X, t = datasets.sinc(n=100, noise="gaussian", noise_scale=0.1, seed=4)
    problem = RVMRegression(X, t, kernel=Exponential(1.0))
    assert problem.kernel.learns_width and not Matern52().learns_width
    # T01 App. C through the kernel's own gradient, against differences of the evidence
    cols = np.array([0, 5, 20, 41, 66, 90])
    x0 = np.log([1.3, 0.7, 2.0, 1.1, 0.4, 3.0, 0.9])  # ln r, then ln alpha
    basis = problem.basis
    _, grad = joint_objective(x0, basis, X, t, cols, 1, 80.0)
    num = optimize.approx_fprime(x0, lambda v: joint_objective(v, basis, X, t, cols, 1, 80.0)[0],
                                 1e-6)
    np.testing.assert_allclose(grad, num, rtol=1e-4, atol=1e-6)
    # learned: a stationary point of the evidence in ln r, above the fit at the start width
    learned = fit(RVMRegression(X, t, kernel=Exponential(1.0), learn_width=True), "evidence",
                  seed=0)
    r = float(learned.attrs["kernel_width"])
    start, at_r, below, above = (
        fit(RVMRegression(X, t, kernel=Exponential(w)), "evidence", seed=0).attrs["log_evidence"]
        for w in (1.0, r, r / 1.1, r * 1.1))
    assert r != pytest.approx(1.0, rel=1e-2)
    assert learned.attrs["log_evidence"] == pytest.approx(at_r, rel=1e-6)
    assert at_r > max(start, below, above)
    with pytest.raises(ValueError, match="matern52_test.*log_width_gradient"):
        RVMRegression(X, t, kernel=Matern52(2.0), learn_width=True)
