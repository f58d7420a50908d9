"""Sphinx configuration of the sparsebayes documentation (``make docs``).

Offline: no intersphinx, no remote images or fonts. Three kinds of page are generated at
build time into git-ignored folders, so they never go stale:

* ``api/generated/``: one page per module of ``sparsebayes.models`` and
  ``sparsebayes.inference`` (autodoc + autosummary), each public name (the module's
  ``__all__``) documented once, in the module that defines it;
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
# MathJax is loaded by the browser when a page is read (it is not fetched at build time)

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
autosummary_generate = False  # the pages are written below, one per module
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

PACKAGES = ("sparsebayes.models", "sparsebayes.inference")


def _modules() -> list[str]:
    """Every public module of the two packages, packages first."""
    names = []
    for pkg_name in PACKAGES:
        pkg = importlib.import_module(pkg_name)
        names.append(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


def _public(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]
    return list(names)


def _home(module, name: str) -> tuple[str, str]:
    """(kind, full name where it is documented) of ``module.name``: a name imported from
    another module of the package is a link to where that module documents it."""
    obj = getattr(module, name)
    if inspect.ismodule(obj):
        return "module", obj.__name__
    if inspect.isclass(obj) or inspect.isfunction(obj) or hasattr(obj, "py_func"):
        home = obj.__module__  # (py_func: a numba-compiled function)
        if home != module.__name__ and home.startswith("sparsebayes."):
            return "link", f"{home}.{obj.__qualname__}"
        kind = ("exception" if inspect.isclass(obj) and issubclass(obj, BaseException) else
                "class" if inspect.isclass(obj) else "function")
        return kind, f"{module.__name__}.{name}"
    # a constant: defined here if the module's source assigns it at top level
    assigned = rf"^(?:\w+\s*,\s*)*{name}\b[^=\n]*="
    if not re.search(assigned, inspect.getsource(module), re.M):
        for other in _MODULE_OBJECTS:
            if other is not module and vars(other).get(name) is obj and re.search(
                    assigned, inspect.getsource(other), re.M):
                return "link", f"{other.__name__}.{name}"
    return "data", f"{module.__name__}.{name}"


_MODULE_OBJECTS: list = []


def _write_api(app) -> None:
    out = HERE / "api" / "generated"
    out.mkdir(parents=True, exist_ok=True)
    modules = _modules()
    _MODULE_OBJECTS[:] = [importlib.import_module(m) for m in modules]
    for mod_name, module in zip(modules, _MODULE_OBJECTS, strict=True):
        title = f"``{mod_name}``"
        lines = [title, "=" * len(title), "", f".. automodule:: {mod_name}", "    :no-members:",
                 "", f".. currentmodule:: {mod_name}", ""]
        documented, linked = [], []
        for name in _public(module):
            kind, target = _home(module, name)
            (documented if kind not in ("link", "module") else linked).append(
                (name, kind, target))
        submodules = [m for m in modules if m.rpartition(".")[0] == mod_name]
        if documented:
            lines += [".. autosummary::", "    :nosignatures:", ""]
            lines += [f"    {name}" for name, _, _ in documented] + [""]
        if linked:
            lines += ["Imported here from elsewhere:", ""]
            for name, kind, target in linked:
                role = "mod" if kind == "module" else "obj"
                lines.append(f"* :py:{role}:`{name} <{target}>`")
            lines.append("")
        if submodules:
            lines += [".. rubric:: Modules", ""]
            lines += [f"* :py:mod:`{m}`" for m in submodules] + [""]
        for name, kind, _ in documented:
            directive = {"class": "autoclass", "exception": "autoexception",
                         "function": "autofunction", "data": "autodata"}[kind]
            lines.append(f".. {directive}:: {name}")
            if kind in ("class", "exception"):
                lines += ["    :members:", "    :show-inheritance:"]
            if kind == "data":
                lines.append("    :no-value:")
            lines.append("")
        text = "\n".join(lines)
        path = out / f"{mod_name}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages stay cached
            path.write_text(text)
    index = ["API reference: every module", "===========================", "",
             ".. toctree::", "    :maxdepth: 1", ""] + [f"    {m}" for m in modules]
    text = "\n".join(index) + "\n"
    path = out / "modules.rst"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


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
