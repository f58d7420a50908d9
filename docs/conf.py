"""Sphinx configuration of the sparsebayes documentation (``make docs``).

Offline: no intersphinx, no remote images or fonts, MathJax served from the site
(sphinx-mathjax-offline copies it into ``_static/mathjax``). Three kinds of page are
generated at build time into git-ignored folders, so they never go stale:

* ``api/generated/``: the API reference by topic (``API_TOPICS``), the public names only
  (the ``__all__`` of ``sparsebayes.models``, ``sparsebayes.inference`` and
  ``sparsebayes.inference.study``), one page per name (autodoc + numpydoc);
* ``examples/*.ipynb``: the jupytext percent scripts ``notebooks/NN_name.py``, executed by
  myst-nb at small size (``SPARSEBAYES_SMALL=1``, as ``tests/test_notebooks.py`` runs them);
* ``benchmarks/results/*.md``: one page per ``benchmarks/results/*.md`` table.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "sparsebayes"
author = "sparsebayes developers"
copyright = "sparsebayes developers"
release = version = "0.1.0"

extensions = [
    "myst_nb",  # MyST Markdown pages and executed notebooks
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: no CDN, works offline
    "sphinx.ext.viewcode",
    "sphinx_design",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
templates_path = []
html_static_path = ["_static"]
html_theme = "pydata_sphinx_theme"
html_title = "sparsebayes"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": []}

# --- MyST and myst-nb ---------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "cache"  # executed once, kept in _build/.jupyter_cache until edited
nb_execution_timeout = 900
nb_execution_raise_on_error = True  # a failing cell fails the build
nb_execution_in_temp = True  # files a notebook writes land in a temporary folder
nb_merge_streams = True
# The notebooks at the size the tests run them (tests/test_notebooks.py); the kernel
# inherits this process's environment.
os.environ.setdefault("SPARSEBAYES_SMALL", "1")
if "SPARSEBAYES_DATA" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["SPARSEBAYES_DATA"] = str(ROOT.parent / "shared" / "data")
os.environ.pop("MPLBACKEND", None)  # the kernel shows figures inline

# --- API pages: autodoc + numpydoc --------------------------------------------------------
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the pages are written below, one per public name
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# numpydoc reads "name : text" as a parameter's *type*: a description written on the name's
# line renders as one long type with no description. PR07 (a parameter with no
# description) fails the build on that.
numpydoc_validation_checks = {"PR07"}
numpydoc_xref_param_type = False

# The API reference: the public names only, i.e. the ``__all__`` of these packages, grouped
# by topic. Every name of an ``__all__`` must be in exactly one topic (the build stops
# otherwise); each is documented once, under its public name (``sparsebayes.inference.fit``,
# not the module that defines it), on a page of its own; modules listed (``datasets``) get
# one page with their own ``__all__``. (name, title, package, intro, [(section, names)]).
PUBLIC_PACKAGES = ("sparsebayes.models", "sparsebayes.inference",
                   "sparsebayes.inference.study", "sparsebayes.inference.sklearn")
API_TOPICS = [
    ("models", "Models", "sparsebayes.models",
     "What is believed: a problem states the data, the basis and the prior; any method of "
     ":func:`~sparsebayes.inference.fit` computes its posterior.", [
         ("Problems", ["RVMRegression", "RVMClassification", "RVMPoissonRegression",
                       "RVMNegativeBinomialRegression", "RVMStudentTRegression",
                       "GPRegression", "GPClassification"]),
         ("Kernels and bases", ["GaussianKernel", "LinearKernel", "PolynomialKernel",
                                "LinearSplineKernel", "LogBasis", "CallableKernel", "Kernel",
                                "as_kernel", "register_kernel", "Basis"]),
         ("Priors and the PyMC building block", ["GammaPrior", "RVMLatent"]),
         ("Data sets", ["datasets"]),
         ("Warnings", ["SparseBayesWarning", "ConvergenceWarning", "NumericalWarning",
                       "SamplingWarning"]),
     ]),
    ("fitting", "Fitting", "sparsebayes.inference",
     "A posterior of a problem by any method, in one ArviZ ``DataTree`` layout.", [
         ("", ["fit", "FIT_METHODS", "pymc_trace"]),
         ("Methods", ["Method", "METHODS", "method_of", "register_method"]),
     ]),
    ("predictive", "Predictive distributions", "sparsebayes.inference",
     "Predictions at new inputs from a fitted posterior, and the ArviZ groups of replicated "
     "data.", [
         ("", ["predict", "PREDICT_KINDS", "Predictive", "MixturePredictive"]),
         ("ArviZ groups", ["add_predictions", "add_posterior_predictive",
                           "add_prior_predictive"]),
     ]),
    ("loo", "Leave-one-out and comparison", "sparsebayes.inference",
     "Leave-one-out predictive accuracy of fitted results, and comparisons of methods.", [
         ("", ["loo", "loo_compare", "compare_posteriors"]),
     ]),
    ("studies", "Comparison studies", "sparsebayes.inference.study", "", [
        ("Running a study", ["run_study", "StudyConfig", "DEFAULT_STUDY", "SMALL_STUDY"]),
        ("Data", ["parse_data", "user_data", "load_split", "DataSpec", "Split", "REGRESSION",
                  "CLASSIFICATION"]),
        ("Methods", ["parse_methods", "MethodSpec", "FAMILIES"]),
        ("Cells and the results table", ["Cell", "run_cell", "load_table", "StudyExistsError",
                                         "TABLE", "MANIFEST", "TIMING_COLUMNS"]),
    ]),
    ("sklearn", "scikit-learn estimators", "sparsebayes.inference.sklearn",
     "Import them from ``sparsebayes.inference``: ``from sparsebayes.inference import RVR, "
     "RVC``.", [
         ("", ["RVR", "RVC"]),
     ]),
]


def _defined_in(obj, name: str, candidates) -> str:
    """Full internal name of a public object: ``module.qualname`` for classes and functions,
    else the module whose source assigns ``name`` at top level."""
    if inspect.isclass(obj) or inspect.isfunction(obj) or hasattr(obj, "py_func"):
        return f"{obj.__module__}.{obj.__qualname__}"
    assigned = re.compile(rf"^(?:\w+\s*,\s*)*{name}\b[^=\n]*=", re.M)
    for module in candidates:
        if vars(module).get(name) is obj and assigned.search(inspect.getsource(module)):
            return f"{module.__name__}.{name}"
    raise RuntimeError(f"cannot find where {name} is defined")


def _constant_doc(internal: str) -> list[str]:
    """The ``#:`` comment above a module-level constant."""
    from sphinx.pycode import ModuleAnalyzer

    module, _, name = internal.rpartition(".")
    lines = ModuleAnalyzer.for_module(module).find_attr_docs().get(("", name))
    if not lines:
        raise RuntimeError(f"{internal} is public but has no '#:' comment to document it")
    return [line for line in lines if line.strip()]


def _is_constant(obj) -> bool:
    return not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)
                or hasattr(obj, "py_func"))


# internal full name -> public full name, for cross-references written to internal names
_PUBLIC_NAME: dict[str, str] = {}


def _public_bases(cls) -> list:
    """The bases to show: each internal (non-public) sparsebayes base replaced by its own
    bases, recursively; ``object`` dropped."""
    out = []
    for base in cls.__bases__:
        if base is object:
            continue
        internal = f"{base.__module__}.{base.__qualname__}"
        if base.__module__.startswith("sparsebayes.") and internal not in _PUBLIC_NAME:
            out += [b for b in _public_bases(base) if b not in out]
        elif base not in out:
            out.append(base)
    return out


def _process_bases(app, name, obj, options, bases) -> None:
    bases[:] = _public_bases(obj)


def _object_page(public: str, obj) -> list[str]:
    module, _, name = public.rpartition(".")  # titled by its name, as in the sidebar
    lines = [name, "=" * len(name), "", f".. currentmodule:: {module}", ""]
    if inspect.isclass(obj):
        directive = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        lines += [f".. {directive}:: {name}", "    :members:"]
        foreign = [b.__name__ for b in obj.__mro__[1:]
                   if not b.__module__.startswith("sparsebayes.")]
        if len(foreign) < len(obj.__mro__) - 1:  # some sparsebayes bases: their members too
            lines.append(f"    :inherited-members: {', '.join(foreign)}")
        if _public_bases(obj):
            lines.append("    :show-inheritance:")
    else:
        lines.append(f".. autofunction:: {name}")
    return lines + [""]


def _constant_block(name: str, obj, internal: str) -> list[str]:
    value = repr(obj)
    lines = [f".. py:data:: {name}"]
    if len(value) <= 120 and "<" not in value:
        lines.append(f"    :value: {value}")
    lines += ["", *(f"    {line}" for line in _constant_doc(internal)), ""]
    return lines


def _section(title: str, char: str) -> list[str]:
    return [title, char * len(title), ""] if title else []


def _write_api(app) -> None:
    out = HERE / "api" / "generated"
    out.mkdir(parents=True, exist_ok=True)
    packages = {p: importlib.import_module(p) for p in PUBLIC_PACKAGES}
    modules = [importlib.import_module(info.name) for p in ("sparsebayes.models",
               "sparsebayes.inference") for info in pkgutil.walk_packages(
               packages[p].__path__, p + ".")]
    # every public name, keyed by where it is defined, with the public name it is shown as
    home: dict[str, str] = {}
    for pkg_name, pkg in packages.items():
        for name in pkg.__all__:
            internal = _defined_in(getattr(pkg, name), name, modules) \
                if not inspect.ismodule(getattr(pkg, name)) else getattr(pkg, name).__name__
            home.setdefault(internal, f"{pkg_name}.{name}")
    datasets = packages["sparsebayes.models"].datasets
    for name in datasets.__all__:  # the data sets module's names, documented on its page
        internal = _defined_in(getattr(datasets, name), name, modules)
        home[internal] = f"sparsebayes.models.datasets.{name}"
    _PUBLIC_NAME.clear()
    _PUBLIC_NAME.update(home)
    def internal_name(pkg_name: str, name: str) -> str:
        obj = getattr(packages[pkg_name], name)
        return obj.__name__ if inspect.ismodule(obj) else _defined_in(obj, name, modules)

    placed = {}
    for _, _, pkg_name, _, sections in API_TOPICS:
        for _, names in sections:
            for name in names:
                if name not in packages[pkg_name].__all__:
                    raise RuntimeError(f"docs/conf.py API_TOPICS lists {pkg_name}.{name}, "
                                       "which is not in that package's __all__")
                placed[internal_name(pkg_name, name)] = f"{pkg_name}.{name}"
    for pkg_name in PUBLIC_PACKAGES:
        for name in packages[pkg_name].__all__:
            if internal_name(pkg_name, name) not in placed:
                raise RuntimeError(f"{pkg_name}.{name} is public (__all__) but no topic of "
                                   "API_TOPICS in docs/conf.py lists it: add it to one")

    pages: dict[str, str] = {}
    described = set()  # a package's docstring (and its module target) on its first page only
    for page, title, pkg_name, intro, sections in API_TOPICS:
        pkg = packages[pkg_name]
        shown = pkg_name if page != "sklearn" else "sparsebayes.inference"
        lines = _section(title, "=")
        if pkg_name not in described:
            described.add(pkg_name)
            lines += [f".. automodule:: {pkg_name}", "    :no-members:", ""]
        if intro:
            lines += [intro, ""]
        lines += [f".. currentmodule:: {shown}", ""]
        for section, names in sections:
            lines += _section(section, "-")
            objects, constants, toc = [], [], []
            for name in names:
                obj = getattr(pkg, name)
                internal = internal_name(pkg_name, name)
                public = home[internal]
                if _is_constant(obj):
                    constants.append((name, obj, internal, public))
                    continue
                objects.append(name if public == f"{shown}.{name}" else f"~{public}")
                if public == f"{shown}.{name}":
                    toc.append(public)
                    pages[public] = "\n".join(_module_page(public, obj, home, modules)
                                              if inspect.ismodule(obj)
                                              else _object_page(public, obj))
            if objects:
                lines += [".. autosummary::", "    :nosignatures:", ""]
                lines += [f"    {o}" for o in objects] + [""]
            if toc:
                lines += [".. toctree::", "    :hidden:", ""] + [f"    {p}" for p in toc]
                lines.append("")
            for name, obj, internal, public in constants:
                if public == f"{shown}.{name}":
                    lines += _constant_block(name, obj, internal)
                else:
                    lines += [f"``{name}``: :py:data:`{public}`", ""]
        pages[page] = "\n".join(lines)
    for stale in set(out.glob("*.rst")) - {out / f"{p}.rst" for p in pages}:
        stale.unlink()
    for page, text in pages.items():
        path = out / f"{page}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages stay cached
            path.write_text(text)


def _module_page(public: str, module, home, modules) -> list[str]:
    """A public module (``sparsebayes.models.datasets``): its docstring, then its
    ``__all__`` on the same page."""
    lines = [*_section(public, "="), f".. automodule:: {public}", "    :no-members:", "",
             f".. currentmodule:: {public}", ""]
    names = [n for n in module.__all__ if not _is_constant(getattr(module, n))]
    lines += [".. autosummary::", "    :nosignatures:", ""] + [f"    {n}" for n in names]
    lines.append("")
    for name in names:
        lines += _object_page(f"{public}.{name}", getattr(module, name))[5:]
    lines += _section("Constants", "-")
    for name in module.__all__:
        obj = getattr(module, name)
        if _is_constant(obj):
            lines += _constant_block(name, obj, _defined_in(obj, name, modules))
    return lines


def _resolve_internal(app, env, node, contnode):
    """A reference written to where a public name is defined (``sparsebayes.inference.api.
    fit``, or relatively ``.api.fit``) links to its public page."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    public = _PUBLIC_NAME.get(target)
    if public is None:
        found = {v for k, v in _PUBLIC_NAME.items() if k.endswith("." + target)}
        if len(found) != 1:
            return None
        public = found.pop()
    return env.domains.python_domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)


# --- examples and benchmark tables --------------------------------------------------------
def _write_examples(app) -> None:
    import jupytext

    out = HERE / "examples"
    for src in sorted((ROOT / "notebooks").glob("[0-9]*.py")):
        dest = out / f"{src.stem}.ipynb"
        if not dest.exists() or dest.stat().st_mtime < src.stat().st_mtime:
            jupytext.write(jupytext.read(src), dest)


def _close_heading_gaps(text: str) -> str:
    """The benchmark scripts' Markdown with heading levels renumbered without gaps (# then
    ### becomes # then ##), which MyST requires of a page."""
    out, fence, levels = [], False, []
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"(#+) ", line)
        if m:
            level = len(m.group(1))
            while levels and levels[-1][0] >= level:
                levels.pop()
            new = levels[-1][1] + 1 if levels else 1
            levels.append((level, new))
            line = "#" * new + line[level:]
        out.append(line)
    return "\n".join(out)


def _skip_member(app, what, name, obj, skip, options):
    """scikit-learn's generated metadata-routing methods (``set_fit_request``, ...) are
    scikit-learn's API, documented there, and cite its glossary."""
    if re.fullmatch(r"set_\w+_request|get_metadata_routing", name):
        return True
    return None


def _write_benchmarks(app) -> None:
    out = HERE / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    for stale in set(out.glob("*.md")) - {out / s.name for s in
                                          (ROOT / "benchmarks" / "results").glob("*.md")}:
        stale.unlink()
    for src in sorted((ROOT / "benchmarks" / "results").glob("*.md")):
        text = _close_heading_gaps(src.read_text()) + (
            f"\n\nSource: `benchmarks/results/{src.name}`, written by the benchmark.\n")
        dest = out / src.name
        if not dest.exists() or dest.read_text() != text:
            dest.write_text(text)


def setup(app):
    app.connect("builder-inited", _write_api, priority=100)
    app.connect("builder-inited", _write_examples, priority=100)
    app.connect("builder-inited", _write_benchmarks, priority=100)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-bases", _process_bases)
    app.connect("missing-reference", _resolve_internal)
