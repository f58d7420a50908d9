"""The contract every result of ``fit`` keeps, for every family and method: its groups, their
dims, and its attrs, each a value of a declared type (a number, a flag, a short name or an
array), never JSON or prose, so that netCDF stores a result as it is and code reads it
without parsing.

:func:`check_result` holds a result to it; ``fit`` calls it before it returns.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .methods import HYPERPARAMETERS, METHODS

__all__ = ["Attr", "Names", "ATTRS", "REQUIRED_ATTRS", "GROUPS", "REQUIRED_GROUPS",
           "DRAWN", "check_result", "ContractError", "option_attrs",
           "options_from_attrs", "refit_options", "FLAG_OPTIONS", "NOT_REPEATED"]


class Names(str):
    """An attr holding a list of names as one string, space-separated (the netCDF / CF
    convention for lists of names, e.g. ``coordinates``); ``""`` for none."""


class ContractError(AssertionError):
    """A result that breaks the declared contract (a bug in the method that built it)."""


@dataclass(frozen=True)
class Attr:
    """One attr: its type (``int``, ``float``, ``bool`` (stored 0/1), ``str`` (a name),
    ``np.ndarray`` (1-D), or a tuple of these) and what it means."""

    type: type | tuple[type, ...]
    doc: str


# the variables a point result draws (weights, their scaled form, a GP's latent values); its
# other posterior variables are the type-II ML point values the draws are conditional on
DRAWN = ("w", "z", "f")


ATTRS: dict[str, Attr] = {
    # every result
    "problem_kind": Attr(str, "the family's kind (sparsebayes.inference.families)"),
    "method": Attr(str, "the fit method"),
    "seed": Attr(int, "the seed of every random draw; -1 for None"),
    "wall_time": Attr(float, "seconds fit took, compilation included"),
    "converged": Attr(bool, "the optimiser or sampler met its criteria"),
    "versions": Attr(Names, "'name==version' of sparsebayes and the libraries it used"),
    "default_predict_kind": Attr(str, "the predictive ``predict`` uses by default"),
    "hyperparameters": Attr(str, "what the hyperparameters are: one of HYPERPARAMETERS"),
    # the basis of an RVM (Basis.to_attrs)
    "kernel": Attr(str, "the kernel's name"),
    # and kernel_<parameter> for each parameter the kernel declares (kernel_attr), and
    # option_<name> for each option passed to fit that a refit repeats (option_attrs)
    "bias": Attr(bool, "the basis has a bias column"),
    "extra_columns": Attr(Names, "the extra (non-kernel) columns, e.g. 'x0 x0*x1'"),
    "dictionary": Attr(bool, "the kernel centres are a dictionary, not the training inputs"),
    "n_relevant": Attr(int, "relevant columns (bias and extra included)"),
    "n_kernel_vectors": Attr(int, "relevant kernel columns: the relevance vectors"),
    "prior": Attr(np.ndarray, "the Gamma hyperprior (a, b, c, d) the result was fitted with"),
    "noise_fixed": Attr(bool, "the noise sd was given, not estimated"),
    "learn_width": Attr(bool, "the kernel width was learned by the evidence"),
    "width": Attr(np.ndarray, "the kernel width used (learned, or chosen by CV)"),
    "alpha_pruned": Attr(float, "the value standing for alpha = inf in ``posterior``"),
    "alpha_shared": Attr(bool, "one alpha per basis column shared by every class"),
    "classes": Attr((np.ndarray, list), "the class labels, in code order (a list of str "
                                        "for text labels)"),
    "positive_class": Attr(str, "the label a binary classifier's weights are the logit of"),
    "likelihood": Attr(str, "the likelihood's name: 'bernoulli', 'softmax', 'poisson', ..."),
    "likelihood_bound": Attr(str, "the VRVM classifier's bound on the softmax"),
    "collapsed": Attr(bool, "NUTS sampled the collapsed (weights integrated out) model"),
    "collapsed_form": Attr(str, "the form of the collapsed regression likelihood NUTS or "
                                "ADVI ran on (regression_model's form)"),
    "backend": Attr(str, "the array backend of the optimiser"),
    # optimisers and samplers
    "n_iter": Attr(int, "iterations"),
    "max_iter": Attr(int, "the iteration limit"),
    "tol": Attr(float, "the convergence tolerance"),
    "local_search_runs": Attr(int, "local-search runs of the fast evidence algorithm"),
    "n_at_alpha_floor": Attr(int, "weights whose alpha sits at the optimiser's floor"),
    "log_evidence": Attr(float, "ln p(t | hyperparameters) at the optimum (T01 eq. 15)"),
    "log_marginal_likelihood": Attr(float, "the GP's ln p(t | theta) at the optimum"),
    "restart_log_marginal_likelihood": Attr(np.ndarray, "the same per restart"),
    "restarts": Attr(int, "optimiser restarts"),
    "elbo": Attr(float, "the final evidence lower bound"),
    "bound_up_to_constant": Attr(bool, "the bound omits an improper prior's normaliser"),
    "learning_rate": Attr(float, "ADVI's learning rate"),
    "optimise_seconds": Attr(float, "seconds of the variational optimisation"),
    "psis_khat": Attr(float, "PSIS Pareto k of the variational draws (Yao et al. 2018)"),
    "sampler": Attr(str, "the NUTS implementation"),
    "chains": Attr(int, "chains"),
    "draws": Attr(int, "draws per chain"),
    "tune": Attr(int, "tuning draws per chain"),
    "target_accept": Attr(float, "NUTS's target acceptance"),
    "adaptation": Attr(str, "nutpie's mass-matrix adaptation"),
    "n_divergent": Attr(int, "divergent transitions"),
    "max_rhat": Attr(float, "largest R-hat"),
    "min_ess_bulk": Attr(float, "smallest bulk ESS"),
    "min_ess_tail": Attr(float, "smallest tail ESS"),
    "compile_time": Attr(float, "seconds compiling the sampler"),
    "sampling_time": Attr(float, "seconds sampling"),
    "fit_time": Attr(float, "seconds of the sampler's run"),
    "width_rounds": Attr(int, "rounds of the width optimisation"),
    "width_at_bound": Attr(int, "how many learned widths ended on their lower bound"),
    "width_at_upper_bound": Attr(int, "how many learned widths ended on their upper bound"),
    "width_route": Attr(str, "who chose the learned widths: 'gp', 'sparse-gp' (a GP's "
                             "type-II ML) or 'evidence' (the RVM's own, in rounds)"),
    "width_route_log_evidence": Attr(float, "that GP's log marginal likelihood or bound"),
    "width_route_seconds": Attr(float, "seconds of that GP's type-II ML"),
    "width_route_inducing": Attr(int, "that GP's inducing inputs (0: the exact GP)"),
    "cv_widths": Attr(np.ndarray, "the widths cross-validated"),
    "cv_mean_score": Attr(np.ndarray, "their mean CV score"),
    # GPs
    "covariance": Attr(str, "the GP covariance: 'se_ard' (GPML eq. 5.1 with ARD)"),
    "fixed": Attr(Names, "the hyperparameters held fixed"),
    "inducing": Attr(int, "a sparse GP's number of inducing inputs (constant_data Z)"),
    "learn_inducing": Attr(bool, "a sparse GP's inducing inputs were learned with its "
                                 "hyperparameters, from constant_data Z_start"),
    "approximation": Attr(str, "a sparse GP's: 'vfe' (Titsias 2009; log_evidence is its "
                               "bound)"),
    "log_likelihood_omitted": Attr(str, "why there is no log_likelihood group: 'size' (too "
                                        "large to hold) or 'latent' (draws of a Laplace q(f))"),
}
#: the declaration of every attr ``option_<name>`` (option_attrs)
OPTION = Attr((float, str), "an option passed to fit, which refits of the result repeat")
REQUIRED_ATTRS = ("problem_kind", "method", "seed", "wall_time", "converged", "versions",
                  "default_predict_kind", "hyperparameters")

# group -> (required, the dims every variable of the group starts with)
GROUPS: dict[str, tuple[str, ...]] = {
    "posterior": ("chain", "draw"),
    "log_likelihood": ("chain", "draw", "obs"),
    "sample_stats": (),
    "observed_data": ("obs",),
    "constant_data": (),
    "gaussian_posterior": (),
    "posterior_predictive": ("chain", "draw", "obs"),
    "predictions": ("chain", "draw", "obs"),
    "predictions_constant_data": ("obs",),
    "prior": ("chain", "draw"),
    "prior_predictive": ("chain", "draw", "obs"),
}
REQUIRED_GROUPS = ("posterior", "observed_data", "constant_data")
NAME = re.compile(r"[A-Za-z0-9_.+\-*=]{0,40}")  # a short name, not a sentence or JSON
NAMES = re.compile(r"([A-Za-z0-9_.+\-*=]+( [A-Za-z0-9_.+\-*=]+)*)?")


def _type_ok(value, kind) -> bool:
    if isinstance(kind, tuple):
        return any(_type_ok(value, k) for k in kind)
    if kind is bool:
        return isinstance(value, int | np.integer) and int(value) in (0, 1)
    if kind is int:
        return isinstance(value, int | np.integer) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, float | int | np.floating | np.integer)
    if kind is Names:
        return isinstance(value, str) and NAMES.fullmatch(value) is not None
    if kind is str:
        return isinstance(value, str) and NAME.fullmatch(value) is not None
    if kind is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "biuf"


#: fit options a refit does not repeat: presentation, resources, and fit's own groups
NOT_REPEATED = ("progressbar", "warn", "cores", "max_seconds", "posterior_predictive",
                "prior_predictive")
#: fit options that are flags (stored as 0/1, read back as bool)
FLAG_OPTIONS = ("collapsed", "warn", "local_search", "posterior_predictive", "prior_predictive",
                "widths_from_gp")


def option_attrs(options: dict) -> dict:
    """The options passed to ``fit`` that a refit of its result repeats (leave-one-out,
    K-fold), as attrs ``option_<name>``: numbers, flags (0/1) and short names. Options of
    other types (a prior object, width bounds) are not stored; a refit takes the method's
    default for them."""
    out = {}
    for name, value in options.items():
        if name in NOT_REPEATED or value is None:
            continue
        if isinstance(value, bool | np.bool_):
            out[f"option_{name}"] = int(value)
        elif isinstance(value, int | float | np.integer | np.floating):
            out[f"option_{name}"] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, str) and NAME.fullmatch(value):
            out[f"option_{name}"] = value
    return out


def options_from_attrs(attrs) -> dict:
    """The fit options :func:`option_attrs` stored in a result's attrs, flags as bool."""
    out = {}
    for key, value in attrs.items():
        if key.startswith("option_"):
            name = key.removeprefix("option_")
            value = value.item() if isinstance(value, np.generic) else value
            out[name] = bool(value) if name in FLAG_OPTIONS else value
    return out


def refit_options(post: xr.DataTree, fit: Callable, **given) -> dict:
    """The options a refit of ``post`` runs with, one for each keyword in ``given``: its
    value when not None, else the option passed to the fit (:func:`options_from_attrs`),
    else the default of ``fit``, the function that made ``post``."""
    passed = options_from_attrs(post.attrs)
    defaults = inspect.signature(fit).parameters
    return {name: passed.get(name, defaults[name].default) if value is None else value
            for name, value in given.items()}


def kernel_attr(name: str, kernel: str | None) -> Attr | None:
    """The declaration of the attr ``kernel_<parameter>``: a parameter the registered kernel
    ``kernel`` declares (``Kernel.parameters``), a number or a 1-D array; else None."""
    from sparsebayes.models.kernels import registered_kernel

    if kernel is None or not name.startswith("kernel_"):
        return None
    try:
        meaning = registered_kernel(kernel).parameters.get(name.removeprefix("kernel_"))
    except ValueError:  # not registered: the attr is undeclared
        return None
    return None if meaning is None else Attr((float, np.ndarray), meaning)


def check_result(post: xr.DataTree, kinds=None) -> None:
    """``ContractError`` listing every way ``post`` breaks the contract: a required group or
    attr missing, a variable without its group's leading dims, an attr not declared in
    :data:`ATTRS` or not of its type (a JSON string or a sentence is not a name).
    ``kinds``: the problem kinds allowed (default: any)."""
    wrong = []
    for group in REQUIRED_GROUPS:
        if group not in post.children:
            wrong.append(f"group {group!r} missing")
    for group, node in post.children.items():
        if group not in GROUPS:
            wrong.append(f"group {group!r} not declared")
            continue
        lead = GROUPS[group]
        for name, var in node.data_vars.items():
            if var.dims[:len(lead)] != lead:
                wrong.append(f"{group}.{name} has dims {var.dims}, not starting {lead}")
    for name in REQUIRED_ATTRS:
        if name not in post.attrs:
            wrong.append(f"attr {name!r} missing")
    for name, value in post.attrs.items():
        spec = ATTRS.get(name) or kernel_attr(name, post.attrs.get("kernel")) or (
            OPTION if name.startswith("option_") else None)
        if spec is None:
            wrong.append(f"attr {name!r} not declared")
        elif not _type_ok(value, spec.type):
            wrong.append(f"attr {name!r} = {str(value)[:80]!r} is not a {spec.type} value")
    if post.attrs.get("hyperparameters") == "point" and "posterior" in post.children:
        drawn = [k for k in post["posterior"].data_vars if k in DRAWN]
        stated = [k for k in post["posterior"].data_vars if k not in DRAWN]
        if drawn and stated:
            wrong.append(f"point values {stated} are variables of posterior, not coordinates")
    if post.attrs.get("hyperparameters") not in (None, *HYPERPARAMETERS):
        wrong.append(f"attr 'hyperparameters' = {post.attrs['hyperparameters']!r} is not one "
                     f"of {sorted(HYPERPARAMETERS)}")
    method = METHODS.get(post.attrs.get("method"))
    if method is not None and post.attrs.get("hyperparameters", method.hyperparameters) \
            != method.hyperparameters:
        wrong.append(f"attr 'hyperparameters' = {post.attrs['hyperparameters']!r}, but the "
                     f"method {method.name!r} declares {method.hyperparameters!r}")
    if kinds is not None and post.attrs.get("problem_kind") not in kinds:
        wrong.append(f"attr 'problem_kind' = {post.attrs.get('problem_kind')!r} is not one of "
                     f"{sorted(kinds)}")
    if wrong:
        raise ContractError(f"a {post.attrs.get('problem_kind')} {post.attrs.get('method')!r} "
                            "result breaks the result contract:\n  " + "\n  ".join(wrong))
