"""The RVM as a component of a user's own PyMC model, in the manner of ``pm.gp.Latent``::

    rvm = RVMLatent(GaussianKernel(1.0), centres=30)
    with pm.Model():
        f = rvm.prior("f", X)                          # f = Phi(X) w, T01 eqs. 1-2, 5-6
        pm.Poisson("y", mu=pm.math.exp(f), observed=y)  # any likelihood, any other effects
        idata = pm.sample()
        f_new = rvm.conditional("f_new", X_new)        # Phi(X_new) w, same weights
        pm.sample_posterior_predictive(idata, var_names=["f_new"])

``prior`` adds ``{name}_alpha ~ Gamma(a, b)`` (one precision per basis function),
non-centred ``{name}_z ~ N(0, 1)`` and ``{name}_w = z / sqrt(alpha)`` on the dim
``{name}_basis``, and returns ``f = Phi(X) w`` as a deterministic ``name``. The design is
built inside the graph from ``pm.Data("{name}_X")`` for the built-in kernels, so
``pm.set_data({"{name}_X": X_new})`` moves ``f`` to new inputs; a user's Python callable
gets a precomputed ``pm.Data("{name}_Phi")`` instead. PyMC is imported inside the methods.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .basis import Basis
from .checks import check_inputs
from .kernels import GaussianKernel, as_kernel
from .priors import GammaPrior, unit_scale_prior
from .problems import check_centres, make_basis
from .pymc_models import ard_weights

__all__ = ["RVMLatent"]


class RVMLatent:
    """The RVM's latent function with its hierarchical ARD prior (T01 eqs. 5-6).

    Parameters
    ----------
    kernel : Kernel, str or callable
        A :class:`Kernel`, a kernel name or a callable ``k(X, C)``.
    centres : int or array of shape (M, d), optional
        ``None`` (a kernel at every input given to :meth:`prior`, the classic RVM), an int
        ``M`` (``M`` k-means centres of those inputs, deterministic) or an (M, d) array.
    prior : GammaPrior, optional
        A proper :class:`GammaPrior` (``a``, ``b`` > 0; ``c``, ``d`` unused), or ``None``:
        ``a = 2``, ``b = 2 / mean(Phi^2)``, each weight Student-t with 4 dof at the scale of
        a latent function of unit size (:func:`~sparsebayes.models.priors.unit_scale_prior`).
        Scale the function inside your model (``f * sigma_f``) if it is not of unit size.
    bias : bool, default True
        Add a bias column, as for :class:`RVMRegression`.
    extra_columns : sequence of str, default ()
        Extra non-kernel columns, as for :class:`RVMRegression`.
    """

    def __init__(self, kernel=None, *, centres=None, prior: GammaPrior | None = None,
                 bias: bool = True, extra_columns: Sequence[str] = ()):
        self.kernel = as_kernel(GaussianKernel(1.0) if kernel is None else kernel)
        if prior is not None:
            if not isinstance(prior, GammaPrior):
                raise TypeError(f"prior must be a GammaPrior or None, got {type(prior).__name__}")
            if not (prior.a > 0 and prior.b > 0):
                raise ValueError(f"prior must be proper (a > 0 and b > 0), got {prior}: with "
                                 "Tipping's flat prior the posterior of alpha is improper")
        self.centres = centres
        self.hyperprior = prior
        self.bias = bool(bias)
        self.extra_columns = tuple(extra_columns)
        self.basis: Basis | None = None
        self.name: str | None = None
        self._w = None

    def _design(self, name: str, X: np.ndarray, X_data=None):
        """``Phi(X)`` in the graph from the user's ``pm.Data`` ``X_data`` or a new
        ``pm.Data(name + "_X")``; precomputed data for a kernel without a PyTensor form."""
        import pymc as pm
        import pytensor.tensor as pt

        try:
            self.basis.tensor_design(pt.matrix())  # does the kernel have a PyTensor form?
        except NotImplementedError:
            if X_data is not None:
                raise ValueError(
                    f"the {self.basis.kernel.name!r} kernel has no PyTensor form, so its design "
                    "cannot follow a pm.Data X through pm.set_data: pass X as a NumPy array "
                    "(the design is then precomputed data)") from None
            return pm.Data(f"{name}_Phi", np.ascontiguousarray(self.basis.design(X)))
        return self.basis.tensor_design(pm.Data(f"{name}_X", X) if X_data is None else X_data)

    def prior(self, name: str, X, dims: str | None = None):
        """The latent ``f = Phi(X) w`` with ``alpha_i ~ Gamma(a, b)``, ``w_i = z_i /
        sqrt(alpha_i)``, ``z_i ~ N(0, 1)`` (T01 eqs. 5-6, non-centred); call inside a
        ``pm.Model``. ``X``: an array (it becomes ``pm.Data(name + "_X")``) or your own
        ``pm.Data`` (its current value sets the basis and its centres). Returns the
        deterministic ``name`` (dims ``dims`` if given)."""
        import pymc as pm
        from pytensor.compile.sharedvalue import SharedVariable
        from pytensor.graph.basic import Variable

        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        X_data = None
        if isinstance(X, SharedVariable):  # the user's own pm.Data: set_data moves f
            X_data, X = X, X.get_value()
        elif isinstance(X, Variable):
            raise TypeError("X must be an array or a pm.Data variable (whose current value "
                            "sets the basis), got a symbolic expression")
        X = check_inputs(X, name="X")
        model = pm.modelcontext(None)
        self.basis = make_basis(self.kernel, X, check_centres(self.centres, X), self.bias,
                                self.extra_columns)
        prior = self.hyperprior or unit_scale_prior(self.basis.mean_square(X))
        basis_dim = f"{name}_basis"
        model.add_coord(basis_dim, np.asarray(self.basis.labels, dtype=str))
        Phi = self._design(name, X, X_data)
        _, self._w = ard_weights(prior.a, prior.b, basis_dim,
                                 names=(f"{name}_alpha", f"{name}_z", f"{name}_w"))
        self.name = name
        return pm.Deterministic(name, Phi @ self._w, dims=dims)

    def conditional(self, name: str, X_new, dims: str | None = None):
        """``f(X_new) = Phi(X_new) w`` with the weights of :meth:`prior` (the RVM's latent
        function at new inputs, T01 eq. 21's mean given ``w``): a deterministic ``name``, for
        ``pm.sample_posterior_predictive(idata, var_names=[name])``."""
        import pymc as pm

        if self._w is None:
            raise RuntimeError("RVMLatent.conditional needs the weights: call "
                               "rvm.prior(name, X) inside the model first")
        X_new = check_inputs(X_new, name="X_new")
        if X_new.shape[1] != self.basis.n_features:
            raise ValueError(f"X_new has {X_new.shape[1]} features, the prior's X has "
                             f"{self.basis.n_features}")
        Phi_new = self.basis.design(X_new)
        return pm.Deterministic(name, pm.math.constant(Phi_new) @ self._w, dims=dims)
