"""The registered model families (:class:`~sparsebayes.inference.family.Family`): RVM
regression and classification, GP regression and classification. ``fit``, ``predict``, the
predictive groups, leave-one-out, the scikit-learn estimators and the study look a problem
or a result up here. A new family is one line in :data:`REGISTERED`."""

from __future__ import annotations

import xarray as xr

from sparsebayes.models import RVMNegativeBinomialRegression, RVMStudentTRegression

from .family import Family
from .gp.families import GP_CLASSIFICATION, GP_REGRESSION
from .methods import METHODS
from .rvm.counts import RVM_POISSON, RealPredictive, count_family, latent_family
from .rvm.families import RVM_CLASSIFICATION, RVM_REGRESSION

__all__ = ["REGISTERED", "FAMILIES", "family_of", "register_family", "Family"]

REGISTERED: tuple[Family, ...] = (RVM_REGRESSION, RVM_CLASSIFICATION, GP_REGRESSION,
                                  GP_CLASSIFICATION,
                                  RVM_POISSON,
                                  count_family(RVMNegativeBinomialRegression, "nbrvm"),
                                  latent_family(RVMStudentTRegression, "trvm", task="regression",
                                                predictive=RealPredictive))


def _checked(family: Family) -> Family:
    """``family``, whose fit methods are all registered methods
    (:func:`~sparsebayes.inference.methods.register_method`)."""
    unknown = sorted(set(family.fit_methods) - set(METHODS))
    if unknown:
        raise ValueError(f"family {family.kind!r} implements methods that are not registered: "
                         f"{unknown}; register each with "
                         "sparsebayes.inference.methods.register_method(Method(...))")
    return family


FAMILIES: dict[str, Family] = {f.kind: _checked(f) for f in REGISTERED}


def register_family(family: Family) -> Family:
    """Serve ``family`` (one defined outside the package) by ``fit``, ``predict``, the
    predictive groups and leave-one-out from now on; ``ValueError`` if its kind is taken.
    (The study's method names are read from :data:`REGISTERED` at import.)"""
    if not isinstance(family, Family):
        raise TypeError(f"family must be a Family, got {type(family).__name__}")
    if family.kind in FAMILIES:
        raise ValueError(f"a family of kind {family.kind!r} is registered already")
    FAMILIES[family.kind] = _checked(family)
    return family


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
        names = ", ".join(f.problem_type.__name__ for f in FAMILIES.values())
        what = "a DataTree without attrs['problem_kind']" if isinstance(obj, xr.DataTree) \
            else repr(obj) if isinstance(obj, str) else type(obj).__name__
        raise TypeError(f"expected a problem ({names}) or a result of "
                        f"sparsebayes.inference.fit, got {what}")
    return FAMILIES[kind]
