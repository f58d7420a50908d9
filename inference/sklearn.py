"""scikit-learn estimators backed by :func:`sparsebayes.inference.fit`.

:class:`RVR` (regression, Tipping 2001 §2) and :class:`RVC` (classification, §3: Bernoulli
for two classes; for more, K one-vs-rest binary models by default or the multiclass softmax
of T01 eq. 28) follow the scikit-learn estimator contract: parameters stored unchanged by
``__init__`` and validated in ``fit``, input validation by
:func:`sklearn.utils.validation.validate_data`, fitted attributes ending in ``_``. The full
posterior is kept as ``posterior_`` (the ArviZ ``DataTree`` of ``fit``; a tuple of the K
binary ones for one-vs-rest), so everything the library does with a posterior works on it.

Names follow Tipping (2001): ``alpha_`` are the weight precisions and ``beta_`` the noise
precision. scikit-learn's :class:`~sklearn.linear_model.ARDRegression` calls the noise
precision ``alpha_`` and the weight precisions ``lambda_``.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from sparsebayes.models import (
    GammaPrior,
    GaussianKernel,
    Kernel,
    LinearKernel,
    LinearSplineKernel,
    NumericalWarning,
    PolynomialKernel,
    RVMClassification,
    RVMRegression,
    as_kernel,
)

from .api import fit, predict
from .methods import METHODS
from .predictive.classification import moderated_log_proba, samples_log_proba
from .predictive.regression import Predictive, gaussian_predictive, samples_predictive
from .results import basis_from_posterior, flat_draws
from .rvm.families import RVM_CLASSIFICATION, RVM_REGRESSION
from .rvm.widths import default_width_bounds, estimator_ard_bounds, estimator_width_range

__all__ = ["RVR", "RVC"]

KERNELS = ("rbf", "linear", "poly", "linear_spline")
# width="cv": these x the evidence's start, none below its lower bound (narrower widths
# degenerate: on diabetes 0.25x took 366 s, 0.5x 66 s, 1x 1.4 s, every point kept)
CV_WIDTH_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)
# the method that learns kernel widths itself (type-II ML over the width, T01 App. C); the
# other posteriors are computed at the width it learns
WIDTH_METHOD = "evidence"
CV_FOLDS = 5


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _make_kernel(est, X: np.ndarray) -> tuple[Kernel | None, bool | str]:
    """The kernel named by ``est.kernel`` and whether its width is to be learned (True: by
    the evidence, "cv": by cross-validation; the kernel is then None, built where the
    width is learned)."""
    kernel, width = est.kernel, est.width
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}")
        if kernel == "rbf":
            if width is None:
                return None, True
            if isinstance(width, str) and width == "cv":
                return None, "cv"
            w = np.asarray(width, dtype=float) if not isinstance(width, str) else None
            if w is None or w.ndim > 1 or w.size == 0 or not np.all(np.isfinite(w)) \
                    or np.any(w <= 0):
                raise ValueError(
                    f"width must be None (learned by the evidence), 'cv' (chosen by "
                    f"cross-validation), a number > 0 or one number > 0 per feature, got "
                    f"{width!r}")
            if w.ndim == 1 and w.size != X.shape[1]:
                raise ValueError(f"width has {w.size} values but X has {X.shape[1]} features")
            return GaussianKernel(float(w) if w.ndim == 0 else tuple(w)), False
        if kernel == "poly":
            degree = est.degree
            if not isinstance(degree, numbers.Integral) or isinstance(degree, bool) \
                    or degree < 1:
                raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
            if not isinstance(est.coef0, numbers.Real) or not np.isfinite(est.coef0):
                raise ValueError(f"coef0 must be a finite number, got {est.coef0!r}")
            return PolynomialKernel(int(degree), 1.0 / X.shape[1], float(est.coef0)), False
        if kernel == "linear_spline":
            if X.shape[1] != 1:
                raise ValueError(f"kernel='linear_spline' needs 1 feature, X has {X.shape[1]}")
            return LinearSplineKernel(), False
        return LinearKernel(), False
    if isinstance(kernel, Kernel) or callable(kernel):
        return as_kernel(kernel), False
    raise TypeError(f"kernel must be a name in {KERNELS} or a callable, got {kernel!r}")


def _check_common(est) -> tuple[str, dict, int | None]:
    """Validate the parameters shared by RVR and RVC; return the method, its options and
    the integer seed for :func:`fit`."""
    posteriors = est._family.sklearn_posteriors
    if est.posterior not in posteriors:
        raise ValueError(f"posterior must be one of {posteriors}, got {est.posterior!r}")
    if not isinstance(est.bias, bool | np.bool_):
        raise TypeError(f"bias must be True or False, got {est.bias!r}")
    if est.prior is not None and not isinstance(est.prior, GammaPrior):
        raise TypeError(f"prior must be a GammaPrior or None, got {type(est.prior).__name__}")
    options = est.fit_options
    if options is None:
        options = {}
    elif not isinstance(options, Mapping):
        raise TypeError(f"fit_options must be a dict or None, got {type(options).__name__}")
    seed = None
    if est.random_state is not None:
        seed = int(check_random_state(est.random_state).randint(np.iinfo(np.int32).max))
    return est.posterior, dict(options), seed


def _posterior_value(post: xr.DataTree, name: str) -> np.ndarray:
    """Point value of a hyperparameter: the type-II ML value of a Gaussian posterior
    (evidence, VRVM), else the posterior mean over chains and draws."""
    if "gaussian_posterior" in post.children and name in post["gaussian_posterior"]:
        return np.asarray(post["gaussian_posterior"][name].values)
    return np.asarray(post["posterior"][name].mean(("chain", "draw")).values)


def _call_fit(problem, method: str, seed: int | None, options: dict) -> xr.DataTree:
    """:func:`fit`, without the library's notes on duplicate rows of ``X`` when it has some:
    duplicates are ordinary in tabular data and handled exactly (an identical basis function
    adds nothing to the evidence, so the copies are skipped as duplicates and at most one is
    ever kept). Every other warning passes, including the one about a kernel width far larger
    than the input range (the other cause of skipped near-duplicate basis functions)."""
    with warnings.catch_warnings():
        if np.unique(problem.X, axis=0).shape[0] < problem.X.shape[0]:
            for message in (r"X has \d+ duplicate rows",
                            r"\d+ candidate basis functions were skipped as numerical "
                            "duplicates"):
                warnings.filterwarnings("ignore", message=message, category=NumericalWarning)
        return fit(problem, method, seed=seed, **options)


def _learn_width(make_problem: Callable, per_input: bool, X: np.ndarray,
                 seed: int | None, options: dict) -> xr.DataTree:
    """Evidence fit with the Gaussian width learned (``per_input``: one width per input),
    none below a lower bound (``posterior_.attrs["width_at_bound"]``: how many widths ended
    on it).

    One width per input (ARD, Tipping 2001 §4.4.1's eta-RVM): L-BFGS-B within
    :func:`~.rvm.widths.estimator_ard_bounds`, from the evidence fit's own start (the tied
    model's search, whatever widths the kernel holds: here the bounds' geometric means).
    One width: from the start of :func:`~.rvm.widths.estimator_width_range`, bounded below
    by its ``r_min``; if the optimum lies below it, the constrained optimum is taken to be
    on the bound (the evidence rises monotonically towards the degenerate small-width limit)
    and the model is refitted there. Warnings of the discarded fit are dropped, those of the
    returned fit are passed on."""
    if per_input:
        bounds = estimator_ard_bounds(X)
        kernel = GaussianKernel(tuple(np.sqrt(bounds[:, 0]) * np.sqrt(bounds[:, 1])))
        post = _call_fit(make_problem(kernel, True), "evidence", seed,
                         {**options, "width_bounds": bounds})
        at_bound = post.attrs["width"] <= bounds[:, 0] * (1 + 1e-6)
        post.attrs["width_at_bound"] = int(np.sum(at_bound))
        return post
    r_min, r0 = estimator_width_range(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = _call_fit(make_problem(GaussianKernel(r0), True), "evidence", seed, options)
    if float(np.min(post.attrs["width"])) >= r_min:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        post.attrs["width_at_bound"] = 0
        return post
    post = _call_fit(make_problem(GaussianKernel(r_min), False), "evidence", seed, options)
    post.attrs["width"] = np.array([r_min])
    post.attrs["width_at_bound"] = 1
    return post


def _log_predictive_density(est, X: np.ndarray, y: np.ndarray) -> float:
    """Mean log density of held-out targets under the Gaussian predictive (T01 eqs.
    21-22): the cross-validation score of :class:`RVR` with ``width="cv"``."""
    mean, std = est.predict(X, return_std=True)
    return float(np.mean(Predictive(mean=mean, var=std**2).logpdf(y)))


def _cv_width(est, X: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    """Tipping's (2001, App. E) protocol for the width: the one of ``CV_WIDTH_FACTORS`` x
    the evidence's start (:func:`~.rvm.widths.estimator_width_range`), at least the median
    nearest-neighbour distance (:func:`~.rvm.widths.default_width_bounds`: narrower bases
    each see only their own point), with the best
    ``CV_FOLDS``-fold cross-validated predictive log likelihood of the evidence fit (RVC:
    log loss; RVR: :func:`_log_predictive_density`), by scikit-learn's ``GridSearchCV``
    (stratified folds for RVC). Warnings of the fold fits are dropped."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    # Not the estimators' evidence floor (twice that distance): it guards the evidence, which
    # keeps rising as the width shrinks; held-out data do not reward interpolation, and on
    # high-dimensional inputs (USPS) the best widths lie between the two.
    start = estimator_width_range(X)[1]
    bounds = default_width_bounds(X)
    floor = start if bounds is None else float(bounds[0, 0])
    grid = sorted({float(max(floor, start * f)) for f in CV_WIDTH_FACTORS})
    scoring = "neg_log_loss" if isinstance(est, ClassifierMixin) else _log_predictive_density
    base = clone(est).set_params(width=grid[0], posterior="evidence")
    search = GridSearchCV(base, {"width": grid}, cv=CV_FOLDS, scoring=scoring,
                          error_score="raise", refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    scores = np.asarray(search.cv_results_["mean_test_score"], dtype=float)
    return grid[int(np.argmax(scores))], {"cv_widths": np.array(grid),
                                          "cv_mean_score": scores}


def _fit_posterior(est, make_problem: Callable, X: np.ndarray, y: np.ndarray) -> xr.DataTree:
    """``fit(problem, method=posterior)``. With ``width=None`` the width is learned by the
    evidence (:func:`_learn_width`), with ``width="cv"`` chosen by cross-validation
    (:func:`_cv_width`); other posteriors are then computed at that width."""
    method, options, seed = _check_common(est)
    kernel, learn = _make_kernel(est, X)
    if not learn:
        return _call_fit(make_problem(kernel, False), method, seed, options)
    if learn == "cv":
        width, attrs = _cv_width(est, X, y)
        post = _call_fit(make_problem(GaussianKernel(width), False), method, seed, options)
        post.attrs.update(width=np.array([width]), **attrs)
        return post
    per_input = est._width_per_input and X.shape[1] > 1
    if method == WIDTH_METHOD:
        return _learn_width(make_problem, per_input, X, seed, options)
    width = np.asarray(_learn_width(make_problem, per_input, X, seed, {}).attrs["width"])
    fixed = GaussianKernel(tuple(width) if per_input else float(width[0]))
    post = _call_fit(make_problem(fixed, False), method, seed, options)
    post.attrs["width"] = width
    return post


def _set_fitted(est, post: xr.DataTree, X: np.ndarray) -> None:
    est.posterior_ = post
    centre_index = np.asarray(post["constant_data"]["centre_index"].values)
    est.relevance_ = centre_index[centre_index >= 0]
    est.relevance_vectors_ = X[est.relevance_]
    est.alpha_ = _posterior_value(post, "alpha")
    width = post.attrs.get("width")
    if width is None and isinstance(est.kernel, str) and est.kernel == "rbf":
        width = np.atleast_1d(np.asarray(est.width, dtype=float))
    est.width_ = None if width is None else (
        float(width[0]) if np.size(width) == 1 else np.asarray(width, dtype=float))


def _library_predicts(post: xr.DataTree) -> bool:
    """Whether :func:`predict` serves this posterior: its kernel can be rebuilt from the
    DataTree (every built-in kernel can, a user callable cannot)."""
    return post.attrs["kernel"] != "callable"


def _design(post: xr.DataTree, kernel, X: np.ndarray) -> np.ndarray:
    """Columns of ``post`` (dim ``basis``) at ``X``, the basis rebuilt from the DataTree
    with the estimator's ``kernel`` (a user callable, which the DataTree cannot store)."""
    basis, columns = basis_from_posterior(post, kernel=as_kernel(kernel))
    return basis.design(X, columns=columns)


def _regression_predictive(post: xr.DataTree, Phi: np.ndarray):
    """Predictive at the design rows ``Phi``: T01 eqs. 21-22 for a Gaussian weight
    posterior, else the mixture over the posterior draws of ``w``, ``beta``."""
    if "gaussian_posterior" in post.children:
        g = post["gaussian_posterior"]
        return gaussian_predictive(Phi, g["mu"].values, g["Sigma"].values, float(g["beta"]))
    return samples_predictive(Phi, flat_draws(post, "w"), flat_draws(post, "beta"))


def _class_log_proba(post: xr.DataTree, Phi: np.ndarray) -> np.ndarray:
    """Moderated log probabilities at the design rows ``Phi`` for a Gaussian posterior,
    else the average over the draws of ``w`` (:mod:`~.predictive.classification`)."""
    if "gaussian_posterior" in post.children:
        g = post["gaussian_posterior"]
        return moderated_log_proba(Phi, g["mu"].values, g["Sigma"].values)
    return samples_log_proba(Phi, flat_draws(post, "w"))


class _RVMBase(BaseEstimator):
    """Parameters shared by :class:`RVR` and :class:`RVC`."""

    # width=None learns one width per input (RVR) or one shared width (RVC): see RVR's doc
    _width_per_input = False

    def __init__(self, kernel="rbf", width=None, *, degree=3, coef0=1.0, bias=True,
                 prior=None, posterior="evidence", fit_options=None, random_state=None,
                 centres=None):
        self.kernel = kernel
        self.centres = centres
        self.width = width
        self.degree = degree
        self.coef0 = coef0
        self.bias = bias
        self.prior = prior
        self.posterior = posterior
        self.fit_options = fit_options
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        method = METHODS.get(self.posterior)
        tags.non_deterministic = (method is not None and method.draws
                                  and self.random_state is None)
        return tags


_PARAMS_DOC = """
    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "linear_spline"} or callable, default="rbf"
        Basis functions centred on the training inputs. "rbf" is Tipping's Gaussian
        ``exp(-||x - c||^2 / width^2)`` (T01 eq. 30; scikit-learn's ``gamma = 1 / width^2``);
        "poly" is ``(x.c / n_features + coef0)^degree``; "linear_spline" is T01 eq. 29 (one
        feature only). A callable ``k(X, C) -> (n, m) array`` or a
        :class:`sparsebayes.models.Kernel` is used as it is.
    width : float, array of shape (n_features,), "cv" or None, default=None
        Gaussian width ``r`` (kernel="rbf" only; ignored by other kernels, like ``gamma`` in
        :class:`~sklearn.svm.SVC`). ``"cv"``: one width among 0.5 to 4 times
        ``sqrt(sum_k var(x_k))`` (7 values, none under the median distance to the nearest
        neighbour) with the best 5-fold cross-validated predictive log likelihood of the
        evidence fit (log loss for RVC, Gaussian log density for RVR; Tipping 2001 App. E
        chooses widths by cross-validation), attrs ``cv_widths`` and ``cv_mean_score`` of
        ``posterior_``.
        ``None``: maximise the evidence over the width too (Tipping 2001 §4.3), none below
        twice the median nearest-neighbour distance (below it the evidence degenerates, see
        :func:`~.rvm.widths.estimator_width_range`; ``posterior_.attrs["width_at_bound"]``
        counts the widths on that bound). RVR learns one width per input (ARD, the eta-RVM
        of Tipping 2001 §4.4.1; started from one shared width); RVC one width, started from
        ``sqrt(sum_k var(x_k))`` = ``sqrt(n_features)`` on standardised inputs (per-input
        widths by the Laplace evidence overfit: the evidence rises while the test log loss
        worsens). For posteriors other than "evidence" this type-II ML width is then held
        fixed. The per-input search costs more with many inputs; for one width use
        ``"cv"``, a number, or ``RVMRegression(..., learn_width=True)`` with a
        ``GaussianKernel`` of one width. Standardise the inputs
        (``make_pipeline(StandardScaler(), RVC())``): the inputs are used as given, and one
        width cannot suit features of different scales. A width far below the spacing of
        the inputs (median nearest neighbour over 5 widths away) warns: each basis function
        then sees only its own point (every test point far from the data gets the same
        probability).
    degree : int, default=3
        Degree of the "poly" kernel.
    coef0 : float, default=1.0
        Constant of the "poly" kernel.
    bias : bool, default=True
        Include a bias basis function (its own precision ``alpha``).
    prior : GammaPrior or None, default=None
        Hyperprior on ``alpha`` (and ``beta``); ``None`` is the method's default (Tipping's
        flat prior for "evidence" and "vrvm", a proper one for "advi" and "nuts").
    posterior : {"evidence", "evidence-mackay", "vrvm", "advi", "nuts"}, default="evidence"
        How ``fit`` computes the posterior (:func:`sparsebayes.inference.fit` ``method``):
        type-II ML by Tipping & Faul's fast algorithm or by MacKay re-estimation, the
        variational RVM, ADVI or NUTS.
    fit_options : dict or None, default=None
        Extra keyword arguments of the method (e.g. ``max_iter``, ``draws``, ``chains``).
    centres : None, int or array of shape (n_centres, n_features), default=None
        The basis dictionary: ``None`` centres a kernel on every training input (the
        classic RVM); an int ``M`` uses ``M`` k-means centres of the training inputs (cost
        O(M^3) per step instead of O(N^3): use it for large data sets); an array its rows.
    random_state : int, RandomState or None, default=None
        Seed of the posterior draws and samplers.
"""

_ATTRS_DOC = """
    Attributes
    ----------
    posterior_ : xarray.DataTree
        The posterior returned by :func:`sparsebayes.inference.fit`.
    relevance_ : ndarray of shape (n_relevance,)
        Training indices of the relevance vectors: the kernel basis functions on dimension
        ``basis`` of ``posterior_`` (the pruned set for "evidence"; every training input for
        the posteriors that do not prune, "vrvm", "advi" and "nuts").
    relevance_vectors_ : ndarray of shape (n_relevance, n_features)
        The relevance vectors.
    alpha_ : ndarray of shape (n_basis,)
        Precisions of the weights of the basis functions kept (Tipping's ``alpha``; the
        type-II ML values, or posterior means for sampled posteriors). Dimension ``basis`` of
        ``posterior_`` labels them ("bias" or the training index).
    width_ : float, ndarray or None
        Gaussian width used (learned when ``width=None``: one per feature for RVR with more
        than one feature); ``None`` for other kernels.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string column names).
"""


# --------------------------------------------------------------------------------------------
# Regression
# --------------------------------------------------------------------------------------------


class RVR(RegressorMixin, _RVMBase):
    __doc__ = (
        """Relevance vector regression (Tipping 2001, §2) as a scikit-learn regressor.
"""
        + _PARAMS_DOC
        + """    noise_sd : float or None, default=None
        Noise standard deviation; ``None`` estimates it (T01 eq. 18).
"""
        + _ATTRS_DOC
        + """    beta_ : float
        Noise precision ``1 / sigma^2`` (scikit-learn's ARDRegression calls it ``alpha_``).

    Examples
    --------
    >>> from sparsebayes.inference import RVR
    >>> import numpy as np
    >>> X = np.linspace(-10, 10, 50)[:, None]
    >>> reg = RVR().fit(X, np.sinc(X[:, 0] / np.pi))
    >>> mean, std = reg.predict(X, return_std=True)
"""
    )
    _family = RVM_REGRESSION

    _width_per_input = True

    def __init__(self, kernel="rbf", width=None, *, degree=3, coef0=1.0, bias=True,
                 noise_sd=None, prior=None, posterior="evidence", fit_options=None,
                 random_state=None, centres=None):
        super().__init__(kernel, width, degree=degree, coef0=coef0, bias=bias, prior=prior,
                         posterior=posterior, fit_options=fit_options,
                         random_state=random_state, centres=centres)
        self.noise_sd = noise_sd

    def fit(self, X, y) -> RVR:
        """Fit the posterior of the weights and hyperparameters to ``(X, y)``."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True,
                             ensure_min_samples=2)
        if self.noise_sd is not None and (
                not isinstance(self.noise_sd, numbers.Real) or not self.noise_sd > 0):
            raise ValueError(f"noise_sd must be None or a number > 0, got {self.noise_sd!r}")

        def problem(kernel, learn):
            return RVMRegression(X, y, kernel=kernel, bias=self.bias, noise_sd=self.noise_sd,
                                 prior=self.prior, learn_width=learn, centres=self.centres)

        problem(GaussianKernel(1.0), False)  # the targets' checks, before any width search
        post = _fit_posterior(self, problem, X, y)
        _set_fitted(self, post, X)
        self.beta_ = float(_posterior_value(post, "beta"))
        return self

    def predict(self, X, return_std: bool = False):
        """Predictive mean, and with ``return_std`` the predictive standard deviation
        ``sqrt(1/beta + phi(x)^T Sigma phi(x))`` (T01 eqs. 21-22; it includes the noise)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        post = self.posterior_
        if _library_predicts(post):
            pred = predict(post, X)
        else:
            pred = _regression_predictive(post, _design(post, self.kernel, X))
        return (pred.mean, np.sqrt(pred.var)) if return_std else pred.mean


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------


class RVC(ClassifierMixin, _RVMBase):
    __doc__ = (
        """Relevance vector classification (Tipping 2001, §3) as a scikit-learn classifier:
    Bernoulli-logit for two classes (T01 eq. 23); for K > 2 classes K one-vs-rest binary
    RVMs (Tipping 2001 §4.4.2's protocol) by default, or one softmax model (T01 eq. 28).
"""
        + _PARAMS_DOC
        + """    multiclass : {"ovr", "softmax"}, default="ovr"
        The model for K > 2 classes (ignored for two). "ovr": K binary RVMs, class ``k``
        against the rest, each with its own relevance vectors, ``alpha`` and (learned)
        width; the class probabilities are their probabilities of ``k`` normalised to sum
        to 1 (as :class:`~sklearn.multiclass.OneVsRestClassifier`). "softmax": one model
        with a weight per (basis, class) pair and a joint Laplace approximation (T01 eq. 28),
        whose probabilities sum to 1 by construction. One-vs-rest is the default because it
        errs less on the library's multiclass benchmarks (scikit-learn's digits, USPS): the
        softmax's Laplace evidence (per-pair ``alpha``) enters most basis functions for a
        single class and keeps far fewer weights in all than the K binary evidences, a
        sparsity MacKay's re-estimation reaches too. The softmax is one model (one
        posterior, fewer relevance vectors) and its probabilities scored the lower
        cross-validated log loss on USPS (benchmarks/results/usps_softmax.md).
"""
        + _ATTRS_DOC
        + """    classes_ : ndarray of shape (n_classes,)
        Class labels.
    estimators_ : list of RVC
        For K > 2 classes with ``multiclass="ovr"``: the K binary classifiers, ``k`` against
        the rest (labels 0 / 1). ``posterior_`` is then the tuple of their posteriors,
        ``relevance_`` the union of their relevance vectors, ``alpha_`` the list of their
        ``alpha_`` and ``width_`` one width per class when they differ.
"""
    )
    _family = RVM_CLASSIFICATION

    def __init__(self, kernel="rbf", width=None, *, degree=3, coef0=1.0, bias=True,
                 prior=None, posterior="evidence", fit_options=None, random_state=None,
                 centres=None, multiclass="ovr"):
        super().__init__(kernel, width, degree=degree, coef0=coef0, bias=bias, prior=prior,
                         posterior=posterior, fit_options=fit_options,
                         random_state=random_state, centres=centres)
        self.multiclass = multiclass

    def fit(self, X, y) -> RVC:
        """Fit the posterior of the weights and hyperparameters to ``(X, y)``."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        if self.multiclass not in ("ovr", "softmax"):
            raise ValueError(f"multiclass must be 'ovr' or 'softmax', got {self.multiclass!r}")
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"RVC needs samples of at least 2 classes in the data, but the data contain "
                f"only one class: {self.classes_[0]!r}")
        if self.classes_.size > 2 and self.multiclass == "ovr":
            self._fit_one_vs_rest(X, codes)
            return self
        if hasattr(self, "estimators_"):
            del self.estimators_

        def problem(kernel, learn):
            return RVMClassification(X, codes, kernel=kernel, bias=self.bias, prior=self.prior,
                                     learn_width=learn, centres=self.centres)

        post = _fit_posterior(self, problem, X, codes)
        _set_fitted(self, post, X)
        return self

    def _fit_one_vs_rest(self, X: np.ndarray, codes: np.ndarray) -> None:
        """K binary RVCs with this one's parameters, class ``k`` (label 1) against the rest."""
        from sklearn.base import clone

        self.estimators_ = [clone(self).fit(X, (codes == k).astype(int))
                            for k in range(self.classes_.size)]
        self.posterior_ = tuple(e.posterior_ for e in self.estimators_)
        self.relevance_ = np.unique(np.concatenate([e.relevance_ for e in self.estimators_]))
        self.relevance_vectors_ = X[self.relevance_]
        self.alpha_ = [e.alpha_ for e in self.estimators_]
        widths = [e.width_ for e in self.estimators_]
        if widths[0] is None or all(np.array_equal(w, widths[0]) for w in widths):
            self.width_ = widths[0]
        else:
            self.width_ = np.asarray(widths, dtype=float)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n_samples, n_classes), columns in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities: the moderated output for the Laplace (evidence)
        posterior (MacKay's probit approximation for two classes, its pairwise form for the
        softmax; :mod:`~sparsebayes.inference.predictive.classification`), the average over the
        posterior draws of ``w`` otherwise. One-vs-rest: the K binary probabilities of their
        class, normalised to sum to 1."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if getattr(self, "estimators_", None) is not None:
            logp = np.column_stack([e.predict_log_proba(X)[:, 1] for e in self.estimators_])
            return logp - np.logaddexp.reduce(logp, axis=1, keepdims=True)
        post = self.posterior_
        if _library_predicts(post):
            return np.asarray(predict(post, X).log_proba)
        return _class_log_proba(post, _design(post, self.kernel, X))

    def decision_function(self, X) -> np.ndarray:
        """Log-odds of ``classes_[1]`` (two classes) or log-probabilities (n, K)."""
        logp = self.predict_log_proba(X)
        if self.classes_.size == 2:
            return logp[:, 1] - logp[:, 0]
        return logp

    def predict(self, X) -> np.ndarray:
        """The most probable class."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
