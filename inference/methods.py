"""The fit methods as objects: what each method is, declared once.

A :class:`Method` says what its result's hyperparameters are, whether the result holds
draws of them, which leave-one-out estimator it gets by default, where a study schedules
it and what it costs there, how a study warms it up, and the checks of the options that
are its own. :func:`~sparsebayes.inference.api.fit`, :func:`~sparsebayes.inference.loo`,
the study, its report, ``RVR``/``RVC`` and the progress lines ask the method
(:func:`method_of`) instead of keeping lists of method names; a family
(:class:`~sparsebayes.inference.family.Family`) maps each method name to its
implementation for that kind of problem. A new method is one :class:`Method`, passed to
:func:`register_method`, and an implementation in each family that offers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Method", "METHODS", "HYPERPARAMETERS", "register_method", "method_of"]

#: What a result's hyperparameters are (its attrs ``hyperparameters``), with their meaning.
HYPERPARAMETERS = {
    "point": "type-II ML point estimates: coordinates of ``posterior`` (constant across the "
             "draws they condition), not variables ArviZ diagnoses",
    "variational": "a variational posterior (ADVI, or the mean-field VRVM of Bishop & Tipping "
                   "2000)",
    "sampled": "draws from their full posterior (NUTS)",
}


@dataclass(frozen=True)
class Method:
    """One fit method.

    Attributes
    ----------
    name : str
        The name ``fit(problem, name)`` takes and the result's ``attrs["method"]``.
    hyperparameters : str
        What its result's hyperparameters are: one of :data:`HYPERPARAMETERS`.
    draws : bool
        Its result holds draws of the hyperparameters from a compiled PyMC model (NUTS,
        ADVI): leave-one-out reweights them by PSIS, cold refits repeat the chains and draws,
        a study runs its cells of one data set in one process (the model compiles once per
        process), and its fits always log their start line.
    loo_estimator : str
        The estimator :func:`~sparsebayes.inference.loo` uses by default: ``"reloo"``
        (PSIS with the points of high Pareto k refitted) or ``"subsample"`` (a cheap
        approximation corrected by cold refits of a fixed subsample).
    schedule_rank : int
        Its place in a study's schedule, costliest first (0); a family may override it
        (:attr:`~sparsebayes.inference.family.Family.schedule_rank`).
    prior_seconds : float
        A study cell's expected core-seconds before any cell of the method has finished
        (only the ratios between methods matter).
    warm_up : mapping or None
        The options of a study's warm-up fit, where the method takes them (fewer draws,
        fewer restarts, ...), or None for no warm-up (NUTS times its own compilation).
    options : mapping
        Option name to ``check(name, value, options)`` for the options that are this
        method's own; ``fit`` runs them, with the shared checks of
        :data:`~sparsebayes.inference.api.OPTION_CHECKS`, before any work.
    description : str
        What it is, in a sentence (the study report's glossary).
    """

    name: str
    hyperparameters: str
    draws: bool = False
    loo_estimator: str = "subsample"
    schedule_rank: int = 3
    prior_seconds: float = 1.0
    warm_up: Mapping[str, Any] | None = field(default_factory=dict)
    options: Mapping[str, Callable[[str, Any, dict], None]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a method's name must be a non-empty string, got {self.name!r}")
        if self.hyperparameters not in HYPERPARAMETERS:
            raise ValueError(f"method {self.name!r}: hyperparameters must be one of "
                             f"{tuple(HYPERPARAMETERS)}, got {self.hyperparameters!r}")
        if self.loo_estimator not in ("reloo", "subsample"):
            raise ValueError(f"method {self.name!r}: loo_estimator must be 'reloo' or "
                             f"'subsample', got {self.loo_estimator!r}")


_WARM_DRAWS = {"draws": 10, "chains": 1, "restarts": 1}  # a warm-up fit: few draws, one start

#: The registered methods by name (:func:`register_method` adds one).
METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Make ``method`` known to ``fit``, ``loo``, the study and the estimators.

    A family still has to implement it (``Family.fit_methods``); a family implementing an
    unregistered method is refused.

    Parameters
    ----------
    method : Method
        The declaration; registering the same declaration again is allowed, a different
        one under a name already taken is refused (``ValueError``).

    Returns
    -------
    Method
        ``method``.

    Examples
    --------
    >>> from sparsebayes.inference.methods import METHODS, register_method
    >>> register_method(METHODS["nuts"]) is METHODS["nuts"]  # the same one again: allowed
    True
    """
    if not isinstance(method, Method):
        raise TypeError(f"register_method takes a Method, got {type(method).__name__}")
    if METHODS.get(method.name, method) != method:
        raise ValueError(f"a different method is registered as {method.name!r}")
    METHODS[method.name] = method
    return method


def method_of(name_or_post) -> Method:
    """The registered :class:`Method` of a name or of a result.

    Parameters
    ----------
    name_or_post : str or xarray.DataTree
        A method name, or a result of :func:`~sparsebayes.inference.fit` (its
        ``attrs["method"]``).

    Returns
    -------
    Method
        Its declaration; ``ValueError`` naming the registered methods for an unknown name.

    Examples
    --------
    >>> from sparsebayes.inference.methods import method_of
    >>> method_of("nuts").hyperparameters, method_of("nuts").draws
    ('sampled', True)
    """
    name = name_or_post if isinstance(name_or_post, str) else \
        getattr(name_or_post, "attrs", {}).get("method")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; the registered methods are "
                         f"{sorted(METHODS)}")
    return METHODS[name]


for _method in (
    Method("evidence", "point", prior_seconds=1.6, warm_up=_WARM_DRAWS,
           description="type-II maximum likelihood (the evidence) by Tipping & Faul's "
                       "(2003) fast sequential algorithm, a Gaussian posterior of the "
                       "weights at the optimum"),
    Method("evidence-mackay", "point", prior_seconds=1.6, warm_up=_WARM_DRAWS,
           description="type-II maximum likelihood by Tipping's (2001) re-estimation "
                       "(MacKay's updates)"),
    Method("vrvm", "variational", schedule_rank=2, warm_up=_WARM_DRAWS,
           description="the variational RVM of Bishop & Tipping (2000), a factorised "
                       "posterior of weights and hyperparameters in closed form"),
    Method("advi", "variational", draws=True, schedule_rank=1, prior_seconds=0.65,
           warm_up={**_WARM_DRAWS, "max_iter": 200},  # the optimisation cut short
           description="mean-field ADVI (Kucukelbir et al. 2017) on the PyMC model"),
    Method("fullrank_advi", "variational", draws=True, schedule_rank=1,
           warm_up={**_WARM_DRAWS, "max_iter": 200},
           description="full-rank ADVI on the PyMC model (correlations kept)"),
    Method("nuts", "sampled", draws=True, loo_estimator="reloo", schedule_rank=0,
           prior_seconds=4.5, warm_up=None,
           description="the No-U-Turn sampler (Hoffman & Gelman 2014) on the PyMC model"),
):
    register_method(_method)
