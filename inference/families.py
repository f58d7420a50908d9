"""The registered model families (:class:`~sparsebayes.inference.family.Family`): RVM
regression and classification, GP regression and classification. ``fit``, ``predict``, the
predictive groups, leave-one-out, the scikit-learn estimators and the study look a problem
or a result up here. A new family is one line in :data:`REGISTERED`."""

from __future__ import annotations

import xarray as xr

from .family import Family
from .gp.families import GP_CLASSIFICATION, GP_REGRESSION
from .rvm.families import RVM_CLASSIFICATION, RVM_REGRESSION
from .rvm.poisson import RVM_POISSON

__all__ = ["REGISTERED", "FAMILIES", "family_of", "Family"]

REGISTERED: tuple[Family, ...] = (RVM_REGRESSION, RVM_CLASSIFICATION, GP_REGRESSION,
                                  GP_CLASSIFICATION,
                                  RVM_POISSON)
FAMILIES: dict[str, Family] = {f.kind: f for f in REGISTERED}


def family_of(obj) -> Family:
    """The family of a problem record, a result of ``fit`` (attrs ``problem_kind``) or a
    problem kind; ``TypeError`` for anything else."""
    if isinstance(obj, xr.DataTree):
        kind = obj.attrs.get("problem_kind")
    elif isinstance(obj, str):
        kind = obj
    else:
        kind = getattr(type(obj), "kind", None)
        if kind in FAMILIES and not isinstance(obj, FAMILIES[kind].problem_type):
            kind = None
    if kind not in FAMILIES:
        names = ", ".join(f.problem_type.__name__ for f in REGISTERED)
        what = "a DataTree without attrs['problem_kind']" if isinstance(obj, xr.DataTree) \
            else repr(obj) if isinstance(obj, str) else type(obj).__name__
        raise TypeError(f"expected a problem ({names}) or a result of "
                        f"sparsebayes.inference.fit, got {what}")
    return FAMILIES[kind]
