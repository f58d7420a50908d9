"""The package's layout holds: no import circles, each layer imports only from its own layer
or the ones below it, no private name crosses a module boundary, and docstrings cite papers,
not files outside the repository or issue numbers. Read from the source (AST), so it also
covers the imports inside functions."""

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"models": "sparsebayes.models", "inference": "sparsebayes.inference"}

# lowest first; a module may import from its own layer and the layers before it
LAYERS = [
    ("models", r"sparsebayes\.models(\..*)?"),
    ("core", r"sparsebayes\.inference\."
             r"(numerics|results|samplers|progress|family|contract|methods)"),
    ("predictive", r"sparsebayes\.inference\.predictive(\..*)?"),
    ("gp", r"sparsebayes\.inference\.gp(\..*)?"),
    ("rvm", r"sparsebayes\.inference\.rvm(\..*)?"),
    ("front", r"sparsebayes\.inference"
              r"(\.(families|api|groups|loo|compare|plots|sklearn|metrics))?"),
    ("application", r"sparsebayes\.inference\.(study(\..*)?|cli|testing)"),
]


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for top, package in PACKAGES.items():
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT / top).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            out[name] = (path, is_package)
    return out


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, str]]:
    """(module imported, name imported from it) for every sparsebayes import of ``name``."""
    path, is_package = MODULES[name]
    here = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level \
                else node.module
            if target and target.startswith("sparsebayes"):
                out += [(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target,
                         a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names if a.name.startswith("sparsebayes")]
    return [(t, n) for t, n in out if t != name]


def _layer(name: str) -> int:
    return next(i for i, (_, pattern) in enumerate(LAYERS) if re.fullmatch(pattern, name))


def test_every_module_has_a_layer():
    for name in MODULES:
        assert any(re.fullmatch(p, name) for _, p in LAYERS), name


def test_no_import_circles():
    graph = {m: {t for t, _ in _imports(m) if t in MODULES} for m in MODULES}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                pytest.fail(" -> ".join([*path[path.index(t):], t]))
            if t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [m])


def test_imports_go_down_the_layers():
    wrong = []
    for m in MODULES:
        for t, _ in _imports(m):
            if t not in MODULES:
                continue
            a, b = LAYERS[_layer(m)][0], LAYERS[_layer(t)][0]
            if _layer(t) > _layer(m):
                wrong.append(f"{m} ({a}) imports {t} ({b})")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_module():
    """Except into the documented testing module, which hands internals to the tests."""
    private = [f"{m} imports {n} from {t}" for m in MODULES for t, n in _imports(m)
               if (n.startswith("_") and not n.startswith("__") or "._" in t)
               and m != "sparsebayes.inference.testing"]
    assert not private, "\n".join(private)


def test_docstrings_cite_papers_not_files_or_issues():
    pattern = re.compile(r"DESIGN\.md|papers/|\bNOTES\b|\b[Ii]ssue #?\d")
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for path, _ in MODULES.values()
             for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------------------
# the families and the result contract hold the knowledge the code once branched on
# --------------------------------------------------------------------------------------
def _kind_literals() -> set[str]:
    from sparsebayes.inference.families import REGISTERED

    return {f.kind for f in REGISTERED}


@functools.cache
def _nodes() -> tuple[tuple[Path, ast.AST], ...]:
    """(path, node) for every AST node of the package, parsed once for all the checks."""
    return tuple((path.relative_to(ROOT), node) for path, _ in MODULES.values()
                 for node in ast.walk(ast.parse(path.read_text())))


def test_no_branching_on_kind_strings():
    """At most 3 comparisons against a family's kind string in the package: the rest read
    the family objects (sparsebayes.inference.families)."""
    kinds = _kind_literals()
    found = []
    for path, node in _nodes():
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            values = {s.value for s in sides if isinstance(s, ast.Constant)}
            values |= {e.value for s in sides if isinstance(s, ast.Tuple | ast.Set | ast.List)
                       for e in s.elts if isinstance(e, ast.Constant)}
            if values & kinds:
                found.append(f"{path}:{node.lineno}")
    assert len(found) <= 3, "\n".join(found)


# An implementation choosing among its own variants by the method it was called as (mean-
# field or full-rank ADVI; the fast or MacKay evidence's refits), or a refits class refusing
# another method's result: the only comparisons with a method name the package has outside
# inference/methods.py.
METHOD_VARIANTS = {"inference/samplers.py": 2, "inference/rvm/pymc.py": 2,
                   "inference/rvm/laplace.py": 1, "inference/rvm/evidence.py": 1,
                   "inference/rvm/vrvm_classification.py": 1}


def _compared_with(node: ast.Compare, names: set[str]) -> bool:
    sides = [node.left, *node.comparators]
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    values |= {e.value for s in sides if isinstance(s, ast.Tuple | ast.Set | ast.List)
               for e in s.elts if isinstance(e, ast.Constant)}
    return bool(values & names)


def test_no_branching_on_method_names():
    """What a method is (its hyperparameters, draws, LOO estimator, schedule, warm-up) is
    read from its :class:`~sparsebayes.inference.methods.Method`, never from a comparison
    with its name: the only ones are :data:`METHOD_VARIANTS`."""
    from sparsebayes.inference.methods import METHODS

    names = set(METHODS)
    assert _compared_with(ast.parse('m in ("advi", "x")').body[0].value, names)  # can fail
    found: dict[str, list[int]] = {}
    for path, node in _nodes():
        if isinstance(node, ast.Compare) and _compared_with(node, names) \
                and path.name != "methods.py":
            found.setdefault(str(path), []).append(node.lineno)
    assert {p: len(lines) for p, lines in found.items()} == METHOD_VARIANTS, found


def test_no_branching_on_kernel_classes():
    """No ``isinstance(x, <a built-in kernel class>)`` outside ``models/kernels.py``: what a
    kernel can do (a width, its gradient, its diagonal, symmetry) it declares itself, so a
    kernel registered from outside is served the same way."""
    from sparsebayes.models import kernels

    names = {n for n in kernels.__all__ if isinstance(getattr(kernels, n), type)
             and issubclass(getattr(kernels, n), kernels.Kernel)} - {"Kernel", "CallableKernel"}
    found = [f"{path}:{node.lineno}" for path, node in _nodes()
             if path.name != "kernels.py" and isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
             and len(node.args) == 2 and names & {n.id for n in ast.walk(node.args[1])
                                                   if isinstance(n, ast.Name)}]
    assert "GaussianKernel" in names and not found, "\n".join(found)


def test_no_branching_on_likelihood_classes():
    """No ``isinstance(x, <a likelihood class>)`` outside ``models/likelihoods.py``: what a
    likelihood does (derivatives, parameters, draws, PyMC observe) it declares itself, so a
    likelihood defined outside the package is served the same way. The two exceptions are
    the Laplace driver's compiled Bernoulli loops (a speed path with the general code
    beside it)."""
    from sparsebayes.models import likelihoods, negative_binomial, student_t

    names = {n for mod in (likelihoods, negative_binomial, student_t) for n in dir(mod)
             if isinstance(getattr(mod, n), type)
             and issubclass(getattr(mod, n), likelihoods.Likelihood)}
    found = [f"{path.name}:{node.lineno}" for path, node in _nodes()
             if path.name != "likelihoods.py" and isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
             and len(node.args) == 2 and names & {n.id for n in ast.walk(node.args[1])
                                                   if isinstance(n, ast.Name)}]
    assert {"Poisson", "NegativeBinomial", "StudentT", "Bernoulli"} <= names
    assert len(found) <= 2 and all(f.startswith("laplace.py") for f in found), found


@pytest.mark.parametrize("pattern", [r"NegativeBinomial|negative_binomial",
                                     r"(?<!pm\.)\bStudentT\b|RVMStudentTRegression|\bstudent_t\b"])
def test_a_new_likelihood_is_named_in_at_most_three_modules(pattern):
    """A likelihood added as one module (its likelihood and problem class) is named in at
    most 3 modules of models/ and inference/, the package ``__init__`` files aside: its own,
    its registration, and at most one other (a message that suggests it)."""
    found = sorted(str(path.relative_to(ROOT)) for path, _ in MODULES.values()
                   if path.name != "__init__.py" and re.search(pattern, path.read_text()))
    assert 2 <= len(found) <= 3, found


def test_frozen_records_are_not_mutated():
    found = [f"{path}:{node.lineno}" for path, node in _nodes()
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "__setattr__" and isinstance(node.func.value, ast.Name)
             and node.func.value.id == "object"]
    assert not found, "\n".join(found)


def test_no_long_tuples_returned():
    """Results of more than 4 values are named (dataclasses or named tuples)."""
    found = [f"{path}:{node.lineno}" for path, node in _nodes()
             if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)
             and len(node.value.elts) > 4]
    assert not found, "\n".join(found)


def test_docstrings_hold_no_measurements():
    """Docstrings say what and which equation; timings and measured sizes live in
    benchmarks/results and the documentation (at most 3 exceptions)."""
    timed = re.compile(r"\d+(\.\d+)?\s*(s|ms|min|seconds|minutes)\b|\b\d+ runs\b"
                       r"|\d+(\.\d+)?x (faster|slower)|\d+(\.\d+)?\s*(MB|GB)\b")
    found = []
    for path, node in _nodes():
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc and timed.search(doc):
                found.append(f"{path}:{getattr(node, 'lineno', 0)}")
    assert len(found) <= 3, "\n".join(found)


TESTS = ROOT / "tests"
TESTING_MODULE = "sparsebayes.inference.testing"


def test_tests_mirror_the_package():
    """Each test folder is a folder of the package (tests/inference/rvm <-> inference/rvm);
    the tests of the whole package (architecture, docs, notebooks) sit at the top."""
    for path in TESTS.rglob("test_*.py"):
        folder = path.parent.relative_to(TESTS)
        if folder.parts:
            assert (ROOT / folder).is_dir(), f"{path.relative_to(ROOT)}: no package folder " \
                                             f"{folder}"
    top = {p.name for p in TESTS.glob("test_*.py")}
    assert top <= {"test_architecture.py", "test_docs.py", "test_notebooks.py"}, sorted(top)


def test_tests_import_no_private_names():
    """Tests reach internals only through the documented testing module."""
    found = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "sparsebayes") and node.module != TESTING_MODULE:
                found += [f"{path.relative_to(ROOT)}: {a.name} from {node.module}"
                          for a in node.names if a.name.startswith("_")]
    assert not found, "\n".join(found)
