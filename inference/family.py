"""A model family: everything the front of the library needs to know about one kind of
problem, in one object.

``fit``, ``predict``, the predictive groups, leave-one-out, the scikit-learn estimators and
the study read a problem's family (:func:`sparsebayes.inference.families.family_of`) instead
of branching on its kind: a new likelihood is one :class:`Family` and its registration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .methods import method_of

__all__ = ["Family", "Refits"]


class Refits(Protocol):
    """Warm-started leave-one-out refits of a point result (``Family.warm_refits``):
    built from the result, ``fold(out)`` refits it without the rows ``out`` and
    returns the refit's log predictive density at them and whether it converged. A class
    may also have ``cold_reason(post)`` (a static method): why the refits of ``post`` must
    start cold instead, or None."""

    def __init__(self, post: Any) -> None: ...

    def fold(self, out: np.ndarray) -> tuple[np.ndarray, bool]: ...


@dataclass(frozen=True)
class Family:
    """One model family.

    Attributes
    ----------
    kind : str
        The problem's ``kind`` and the result's ``attrs["problem_kind"]``.
    study_name : str
        The method family a study names it by (``"rvm"`` in ``rvm/evidence``); one name
        serves one family per task.
    problem_type : type
        The problem record class (``RVMRegression``, ...).
    task : str
        What the targets are: ``"regression"`` (real), ``"classification"`` (class labels)
        or ``"counts"`` (non-negative integers); a study's task and metrics.
    fit_methods : dict
        Method name to ``fn(problem, *, seed, **options)`` returning the result.
    predict_kinds : dict
        Predictive kind to ``fn(post, X_new, **options)``.
    default_predict : dict
        Method to its natural predictive kind.
    replicates : callable
        ``fn(post, X, rng, training)``: one draw of the targets at ``X`` per posterior draw,
        (chain, draw, n) (the predictive groups).
    training_problem : callable
        ``fn(post, rows)``: the problem ``post`` was fitted to, on ``rows`` of its training
        set (leave-one-out refits).
    draw_targets : callable or None
        ``fn(Phi, w, beta, rng, targets=None)``: targets given draws of an RVM's weights
        (and noise precision) at the design ``Phi`` (prior predictive draws; ``targets``:
        the training targets, whose scale a likelihood's prior may take); None for a GP.
    warm_refits : dict
        Point (type-II ML) method to its warm-started refits class
        (``cls(post).fold(rows_out)``, or None for cold refits); the other methods are
        sampled.
    optimistic : str or None
        Name of the leave-one-out estimate at the hyperparameters fitted to all points.
    optimistic_loo : callable or None
        ``fn(post)``: its pointwise values (N,).
    fitted_to_all : str
        What the optimistic estimate holds fitted to all points (for messages).
    psis_loglik : callable or None
        ``fn(post)``: (S, N) pointwise log likelihood for PSIS-LOO where it is not the
        result's ``log_likelihood`` group (hyperparameter draws of a collapsed model).
    sklearn_posteriors : tuple of str
        The methods the scikit-learn estimators offer.
    schedule_rank : dict
        Method name to its place in a study's schedule, costliest first, where this
        family's implementation differs from the method's own
        (:attr:`~sparsebayes.inference.methods.Method.schedule_rank`).
    noise : bool
        The likelihood has a noise precision ``beta`` (Gaussian noise).
    weights : bool
        The result holds an RVM weight posterior (``w``, ``alpha`` on a basis): prior draws,
        kernel-width checks and relevance counts apply.
    """

    kind: str
    study_name: str
    problem_type: type
    task: str
    fit_methods: Mapping[str, Callable]
    predict_kinds: Mapping[str, Callable]
    default_predict: Mapping[str, str]
    replicates: Callable[..., np.ndarray]
    training_problem: Callable[..., Any]
    draw_targets: Callable[..., np.ndarray] | None = None
    warm_refits: Mapping[str, type[Refits] | None] = field(default_factory=dict)
    optimistic: str | None = None
    optimistic_loo: Callable[..., np.ndarray] | None = None
    fitted_to_all: str = ""
    psis_loglik: Callable[..., np.ndarray] | None = None
    sklearn_posteriors: tuple[str, ...] = ()
    schedule_rank: Mapping[str, int] = field(default_factory=dict)
    noise: bool = False
    weights: bool = True

    @property
    def labels(self) -> bool:
        """The targets are class labels (stratified folds, error rates)."""
        return self.task == "classification"

    def rank(self, method: str) -> int:
        """The place of ``method`` in a study's schedule (0: costliest, first)."""
        return self.schedule_rank.get(method, method_of(method).schedule_rank)

    def predict_kind(self, method: str) -> str:
        """The predictive a ``method`` result uses by default."""
        return self.default_predict.get(method) or next(iter(self.predict_kinds))
