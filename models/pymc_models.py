"""The RVM as hierarchical PyMC models (T01 eqs. 1-6, 15, 23, 28).

Builders, called through ``problem.pymc_model()``:

* regression, non-centred joint: ``alpha_i ~ Gamma(a, b)``, ``z_i ~ N(0, 1)``,
  ``w_i = z_i / sqrt(alpha_i)`` (T01 eq. 5), ``beta ~ Gamma(c, d)`` (or fixed), ``t ~ N(Phi w,
  1/beta)`` (T01 eq. 4);
* regression, collapsed (``collapsed=True``): ``w`` integrated out,
  ``t ~ N(0, C)`` with ``C = beta^-1 I + Phi A^-1 Phi^T`` (T01 eq. 15);
* classification: the non-centred joint model with a Bernoulli-logit (T01 eq. 23) or softmax
  (T01 eq. 28) likelihood; or (``collapsed=True``) ``alpha`` integrated out, so each weight has
  its marginal Student-t prior (T01 eq. 32) and ``alpha_i | w_i ~ Gamma(a + 1/2, b + w_i^2 / 2)``
  is drawn afterwards.

The design matrix ``Phi``, the inputs ``X``, the kernel ``centres`` and the Gamma
hyperparameters are ``pm.Data``, and a compiled sampler can be reused on new data of the same
shape. Out of sample, on the joint models with a built-in kernel (``Phi`` is built from ``X``
inside the graph)::

    with problem.pymc_model():
        pm.set_data({"X": X_new})
        pp = pm.sample_posterior_predictive(post, var_names=["t"])

The dimension ``obs`` has no coordinate values and takes its length from ``X``, so no
``coords`` argument is needed and ``t``'s replicates have ``X_new``'s length. (Passing
``coords={"obs": ...}`` gives ``obs`` values; then pass a ``t_obs`` of the new length too,
or PyMC's ``observed_data`` group clashes with them.) :func:`set_inputs` does the same for
every model (a precomputed ``Phi`` too). PyMC is imported inside the functions, so
``sparsebayes.models`` does not need it.
"""

from __future__ import annotations

import numpy as np

from .checks import check_inputs
from .priors import GammaPrior, resolve_prior

__all__ = [
    "check_proper",
    "check_form",
    "auto_form",
    "regression_model",
    "classification_model",
    "latent_model",
    "set_inputs",
    "collapsed_logp",
]

LOG_2PI = float(np.log(2 * np.pi))

def check_proper(prior: GammaPrior, method: str, needs_beta: bool = True) -> None:
    """``ValueError`` for a hyperprior that makes the posterior improper."""
    names = "abcd" if needs_beta else "ab"
    zero = [n for n in names if getattr(prior, n) == 0]
    if zero:
        raise ValueError(
            f"{method} needs a proper hyperprior, but GammaPrior has {', '.join(zero)} = 0. "
            "With Tipping's flat prior (a = b = c = d = 0) the posterior over alpha is "
            "improper: for every irrelevant basis function p(t | alpha) tends to a constant "
            "as alpha -> infinity, so the posterior mass of log alpha escapes to infinity and "
            "a sampler or variational fit never settles. Pass prior=None for the default "
            "proper prior (default_sampling_prior), or a GammaPrior with all of a, b, c, d > "
            "0; the 'evidence' and 'vrvm' methods accept the flat prior."
        )


def _coords(problem, basis) -> dict:
    """The model's coordinates. ``obs`` has none: its length is that of the first data on it
    (``X``, or ``Phi`` when the design is precomputed), so ``pm.set_data({"X": X_new})``
    resizes it and the replicates of ``t`` follow ``X`` (PyMC's own idiom, ``shape=x.shape``);
    ArviZ numbers it 0..n-1. With coordinate values it would need ``coords={"obs": ...}``
    and a matching ``t_obs`` in every ``pm.set_data``."""
    labels = np.asarray(basis.labels, dtype=str)
    return {
        "basis": labels,
        "basis_bis": labels,
        "feature": np.arange(problem.X.shape[1]),
        "centre": np.arange(basis.centres.shape[0]),
    }


def collapsed_logp(t, Phi, alpha, beta, form: str = "woodbury-graph", PhiTPhi=None):
    """``ln N(t | 0, beta^-1 I + Phi A^-1 Phi^T)`` (T01 eq. 15) as a PyTensor expression.

    ``form="direct"``: Cholesky of the N x N covariance ``C``, O(N^2 M + N^3).
    ``form="woodbury-graph"``: Cholesky of ``H = A + beta Phi^T Phi`` (M x M) with
    ``t^T C^-1 t = beta t^T t - beta^2 t^T Phi H^-1 Phi^T t`` and
    ``ln|C| = ln|H| - N ln beta - sum ln alpha`` (T01 App. A, eqs. 36-41), O(N M + M^3) per
    evaluation when the constant ``PhiTPhi = Phi^T Phi`` is passed in; PyTensor differentiates
    the Cholesky.
    ``form="woodbury"``: the same value from one :class:`~.woodbury_op.CollapsedWoodbury` Op
    whose gradient is written out (T01 App. A), so one Cholesky serves value and gradient
    (unbatched inputs only); cheaper per gradient, opt-in (see :func:`regression_model`).
    """
    import pytensor.tensor as pt
    from pytensor.tensor.linalg import cholesky, solve_triangular

    N = t.shape[-1]
    if form == "direct":
        C = (Phi / alpha) @ Phi.T + pt.eye(N) / beta
        L = cholesky(C, lower=True)
        v = solve_triangular(L, t, lower=True)
        return -0.5 * pt.sum(v**2) - pt.sum(pt.log(pt.diag(L))) - 0.5 * N * LOG_2PI
    G = Phi.T @ Phi if PhiTPhi is None else PhiTPhi
    if form == "woodbury":
        from .woodbury_op import collapsed_woodbury

        t = pt.as_tensor(t)
        return collapsed_woodbury(Phi.T @ t, pt.sum(t**2), N, alpha, beta, G)[0]
    if form == "woodbury-graph":
        H = beta * G + pt.diag(alpha)
        L = cholesky(H, lower=True)
        u = solve_triangular(L, beta * (Phi.T @ t), lower=True)
        quad = beta * pt.sum(t**2) - pt.sum(u**2)
        logdet_C = 2 * pt.sum(pt.log(pt.diag(L))) - N * pt.log(beta) - pt.sum(pt.log(alpha))
        return -0.5 * quad - 0.5 * logdet_C - 0.5 * N * LOG_2PI
    raise ValueError(f"form must be 'direct', 'woodbury' or 'woodbury-graph', got {form!r}")


def _collapsed_random(Phi, alpha, beta, rng=None, size=None):
    """Refuse: a replicate of ``t ~ N(0, beta^-1 I + Phi A^-1 Phi^T)`` at posterior draws of
    ``(alpha, beta)`` is not the posterior predictive (``w`` is integrated out, so it would be
    drawn from its prior: a silently wrong, far too wide answer)."""
    raise NotImplementedError(
        "the collapsed RVM model integrates w out, so PyMC cannot draw predictive replicates "
        "of t from it (they would use w's prior, not its posterior). Use the joint model, "
        "problem.pymc_model() (results store z = w sqrt(alpha) for it), or "
        "sparsebayes.inference.add_posterior_predictive(post) / add_predictions(post, X_new) "
        "/ fit(..., posterior_predictive=True)")


def _design(basis, problem, Phi_np, in_graph: bool):
    """``Phi`` of the model. ``in_graph`` (the joint models, whose draws PyMC's predictive
    uses) and a kernel with a PyTensor form: built from ``pm.Data("X")`` inside the graph, so
    ``pm.set_data({"X": X_new})`` predicts out of sample. Otherwise (the collapsed models,
    whose cost per gradient must not include the kernel; user callables): precomputed
    ``pm.Data("Phi")``, and no ``X`` to set, so ``pm.set_data({"X": ...})`` fails loudly
    instead of silently predicting in sample (use :func:`set_inputs`)."""
    import pymc as pm

    pm.Data("centres", basis.centres, dims=("centre", "feature"))
    if in_graph:
        X = pm.Data("X", problem.X, dims=("obs", "feature"))
        try:
            return basis.tensor_design(X)
        except NotImplementedError:
            pass
    if Phi_np is None:
        Phi_np = basis.design(problem.X)
    return pm.Data("Phi", np.ascontiguousarray(Phi_np), dims=("obs", "basis"))


def ard_weights(a, b, dims, names: tuple[str, str, str] = ("alpha", "z", "w")):
    """The RVM's hierarchical ARD prior, non-centred (T01 eqs. 5-6 with App. A's Gamma
    hyperprior): ``alpha ~ Gamma(a, b)``, ``z ~ N(0, 1)``, ``w = z / sqrt(alpha)`` (so
    ``w | alpha ~ N(0, 1/alpha)``), each on ``dims``; returns ``(alpha, w)``. Shared by the
    regression and classification models and :class:`~sparsebayes.models.RVMLatent`."""
    import pymc as pm
    import pytensor.tensor as pt

    alpha = pm.Gamma(names[0], alpha=a, beta=b, dims=dims)
    z = pm.Normal(names[1], 0.0, 1.0, dims=dims)
    return alpha, pm.Deterministic(names[2], z / pt.sqrt(alpha), dims=dims)


def _on_whole_basis(w, Phi):
    """``w`` with a run-time check that it holds a weight for every column of ``Phi``. A
    pruned result (the evidence methods keep only the relevance vectors) given to
    ``pm.sample_posterior_predictive`` would otherwise fail deep in a matrix product; this
    says what to do instead (the PyMC route equals ``predict()`` or refuses)."""
    import pytensor.tensor as pt
    from pytensor.raise_op import Assert

    message = ("the posterior holds fewer weights than the model's basis has columns: an "
               "evidence result keeps only its relevance vectors. Put it on the whole basis "
               "with pm.sample_posterior_predictive(sparsebayes.inference.pymc_trace(post, "
               "problem), model=problem.pymc_model()), or use sparsebayes.inference.predict")
    basis_axis = -w.type.ndim  # PyMC may prepend draw dimensions when it vectorises
    return Assert(message)(w, pt.eq(w.shape[basis_axis], Phi.shape[-1]))


FORMS = ("auto", "direct", "woodbury", "woodbury-graph")
OP_SAMPLERS = ("nutpie", "advi", "fullrank_advi")  # where auto_form takes the Op


def auto_form(n_obs: int, n_columns: int, sampler: str | None = None) -> str:
    """The collapsed likelihood's form that ``form="auto"`` stands for: ``"direct"`` when
    ``N < M / 4`` (the N x N Cholesky is the smaller), else the Woodbury identity (T01 App. A):
    the closed-form-gradient Op under nutpie and ADVI (``sampler`` "nutpie", "advi" or
    "fullrank_advi"), the graph PyTensor differentiates otherwise (PyMC's own NUTS meets a
    precision that underflowed to 0 with ``ZeroDivisionError`` in PyTensor's numba code for
    the Gamma prior's gradient, where nutpie counts a divergence)."""
    if 4 * n_obs < n_columns:
        return "direct"
    return "woodbury" if sampler in OP_SAMPLERS else "woodbury-graph"


def check_form(form, collapsed_regression: bool = True) -> None:
    """``ValueError`` unless ``form`` names a form of the collapsed likelihood, and is
    ``"auto"`` where the model is not the collapsed regression model."""
    if not (isinstance(form, str) and form in FORMS):
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if form != "auto" and not collapsed_regression:
        raise ValueError(f"form={form!r} applies to the collapsed regression model only")


def regression_model(problem, *, collapsed: bool = False, prior: GammaPrior | None = None,
                     form: str = "auto"):
    """``pm.Model`` of RVM regression (see the module docstring).

    Parameters
    ----------
    problem : RVMRegression.
    collapsed : integrate ``w`` out (T01 eq. 15); the model then has no ``w``.
    prior : Gamma hyperprior; ``None`` takes ``problem.prior``, else
        :func:`default_sampling_prior`. Must be proper (all of a..d > 0; c, d are unused when
        ``problem.noise_sd`` fixes the noise).
    form : "direct", "woodbury", "woodbury-graph" or "auto" (:func:`auto_form` for any
        sampler: ``"woodbury-graph"`` unless N < M / 4) for the collapsed likelihood, see
        :func:`collapsed_logp`; ``fit(problem, "nuts")`` takes the Op (``"woodbury"``)
        under nutpie.

    Variables: ``alpha`` (dim ``basis``), ``beta`` and ``noise_sd`` (deterministic when the
    noise is fixed), non-centred ``z`` and ``w = z / sqrt(alpha)`` (joint model only), and
    the observed ``t`` (dim ``obs``).
    """
    import pymc as pm
    import pytensor.tensor as pt

    if not hasattr(problem, "noise_sd"):  # the Gaussian-noise problem, RVMRegression
        raise TypeError(f"regression_model needs an RVMRegression, got {type(problem).__name__}")
    prior = resolve_prior(problem, prior)
    fixed_noise = problem.noise_sd is not None
    check_proper(prior, "a PyMC model", needs_beta=not fixed_noise)
    check_form(form)
    basis = problem.basis
    Phi_np = basis.design(problem.X)
    N, M = Phi_np.shape
    if form == "auto":
        form = auto_form(N, M)
    with pm.Model(coords=_coords(problem, basis)) as model:
        Phi = _design(basis, problem, Phi_np, in_graph=not collapsed)
        t_obs = pm.Data("t_obs", problem.t, dims="obs")
        a = pm.Data("prior_a", float(prior.a))
        b = pm.Data("prior_b", float(prior.b))
        if collapsed:
            alpha = pm.Gamma("alpha", alpha=a, beta=b, dims="basis")
        else:
            alpha, w = ard_weights(a, b, "basis")
        if fixed_noise:
            beta = pm.Deterministic("beta", pt.as_tensor(1.0 / problem.noise_sd**2))
        else:
            c = pm.Data("prior_c", float(prior.c))
            d = pm.Data("prior_d", float(prior.d))
            beta = pm.Gamma("beta", alpha=c, beta=d)
        pm.Deterministic("noise_sd", 1.0 / pt.sqrt(beta))
        if collapsed:
            G = pm.Data("PhiTPhi", Phi_np.T @ Phi_np, dims=("basis", "basis_bis"))
            pm.CustomDist(
                "t", Phi, alpha, beta, G,
                logp=lambda value, Phi, alpha, beta, G: collapsed_logp(value, Phi, alpha, beta,
                                                                       form, G),
                random=lambda Phi, alpha, beta, G, rng=None, size=None: _collapsed_random(
                    Phi, alpha, beta, rng=rng, size=size),
                signature="(n,m),(m),(),(m,m)->(n)",
                observed=t_obs,
                dims="obs",
            )
        else:
            pm.Normal("t", mu=Phi @ _on_whole_basis(w, Phi), sigma=1.0 / pt.sqrt(beta),
                      observed=t_obs, dims="obs", shape=Phi.shape[0])
    model.rvm_info = {"kind": problem.kind, "collapsed": collapsed, "form": form,
                      "prior": prior, "fixed_noise": fixed_noise}
    return model


def latent_model(problem, observe, *, prior: GammaPrior | None = None,
                 collapsed: bool = False, wdims: tuple[str, ...] = ("basis",),
                 coords: dict | None = None, info: dict | None = None):
    """``pm.Model`` of an RVM with a non-Gaussian likelihood on the latent ``f = Phi w``:
    non-centred ``w = z / sqrt(alpha)`` (T01 eqs. 5-6), or with ``collapsed=True`` ``alpha``
    integrated out, ``w_i ~ Student-t(2a, 0, sqrt(b / a))`` (T01 eq. 32; the model then has
    no ``alpha`` and ``z``). ``observe(f, t_obs, n)`` adds the observed ``t`` (dim ``obs``,
    length ``n``) given ``f`` (n,) or (n, K) for ``wdims`` (basis, class). ``prior``: only
    ``a``, ``b`` are used (proper, > 0); ``None`` as in :func:`regression_model`.
    ``coords``: further coordinates (``class``); ``info``: further ``model.rvm_info``."""
    import pymc as pm
    import pytensor.tensor as pt

    prior = resolve_prior(problem, prior)
    check_proper(prior, "a PyMC model", needs_beta=False)
    basis = problem.basis
    with pm.Model(coords={**_coords(problem, basis), **(coords or {})}) as model:
        Phi = _design(basis, problem, None, in_graph=not collapsed)
        t_obs = pm.Data("t_obs", problem.t, dims="obs")
        a = pm.Data("prior_a", float(prior.a))
        b = pm.Data("prior_b", float(prior.b))
        if collapsed:
            w = pm.StudentT("w", nu=2.0 * a, mu=0.0, sigma=pt.sqrt(b / a), dims=wdims)
        else:
            _, w = ard_weights(a, b, wdims)
        observe(Phi @ _on_whole_basis(w, Phi), t_obs, Phi.shape[0])
    model.rvm_info = {"kind": problem.kind, "collapsed": collapsed, "prior": prior,
                      **(info or {})}
    return model


def classification_model(problem, *, prior: GammaPrior | None = None,
                         likelihood: str | None = None, collapsed: bool = False):
    """``pm.Model`` of RVM classification: non-centred ``w = z / sqrt(alpha)`` with a
    Bernoulli-logit likelihood (T01 eq. 23; ``w`` is the logit weight of ``classes[1]``) for two
    classes, or softmax (T01 eq. 28; ``w``, ``alpha`` on dims (``basis``, ``class``), one weight
    vector per class) for K classes or ``likelihood="softmax"``.

    ``collapsed=True`` integrates ``alpha`` out: ``w_i ~ Student-t(2a, 0, sqrt(b / a))``,
    the marginal prior of T01 eq. 32; the model then has no ``alpha`` and ``z``. This is what
    NUTS and ADVI sample: it has no funnel between ``alpha`` and ``w`` (no divergences on
    Ripley-100 and breast cancer, where the joint model gave 1-20 per 4000 draws).

    ``prior``: only ``a``, ``b`` are used (proper, > 0); ``None`` as in
    :func:`regression_model`. Built by :func:`latent_model`, with the likelihood's own
    observed variable (:meth:`~sparsebayes.models.likelihoods.Bernoulli.observe`).
    """
    if not hasattr(problem, "n_classes"):  # RVMClassification
        raise TypeError(
            f"classification_model needs an RVMClassification, got {type(problem).__name__}")
    if likelihood not in (None, "bernoulli", "softmax"):
        raise ValueError(f"likelihood must be None, 'bernoulli' or 'softmax', got {likelihood!r}")
    K = problem.n_classes
    if likelihood == "bernoulli" and K > 2:
        raise ValueError(f"likelihood='bernoulli' needs 2 classes, the problem has {K}")
    softmax = likelihood == "softmax" or K > 2
    coords = {"class": np.asarray(problem.classes).astype(str)} if softmax else None
    return latent_model(problem, problem.likelihood(softmax).observe, prior=prior,
                        collapsed=collapsed,
                        wdims=("basis", "class") if softmax else ("basis",), coords=coords,
                        info={"softmax": softmax})


def set_inputs(model, problem, X_new) -> None:
    """Point ``model`` at new inputs: ``Phi`` becomes the design of ``X_new`` on the same
    basis (``problem.basis``), so ``pm.sample_posterior_predictive`` predicts there. The
    observed targets are replaced by zeros of the new length (they are not used), so the
    ``observed_data`` PyMC writes has ``X_new``'s length. Equivalent to
    ``pm.set_data({"X": X_new})`` on a joint model with a built-in kernel, and also works
    when ``Phi`` is precomputed data (a Python callable kernel)."""
    import pymc as pm


    if "w" not in model.named_vars:  # the collapsed regression model
        raise ValueError("the collapsed model has no w to predict with: build the joint "
                         "model (collapsed=False), or use sparsebayes.inference.predict")

    X_new = check_inputs(X_new, name="X_new")
    if X_new.shape[1] != problem.X.shape[1]:
        raise ValueError(f"X_new has {X_new.shape[1]} features, the model has "
                         f"{problem.X.shape[1]}")
    n = X_new.shape[0]
    t_dtype = model["t_obs"].get_value().dtype
    names = {v.name for v in model.data_vars}
    data = {}  # the data that sets obs's length first, then the targets
    if "X" in names:
        data["X"] = X_new
    if "Phi" in names:
        data["Phi"] = np.ascontiguousarray(problem.basis.design(X_new))
    data["t_obs"] = np.zeros(n, dtype=t_dtype)
    with model:
        pm.set_data(data)  # obs has no coordinate values: its length follows the data
