"""The package's layout holds: no import circles, each layer imports only from its own layer
or the ones below it, no private name crosses a module boundary, and docstrings cite papers,
not files outside the repository or issue numbers. Read from the source (AST), so it also
covers the imports inside functions."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"models": "sparsebayes.models", "inference": "sparsebayes.inference"}

# lowest first; a module may import from its own layer and the layers before it
LAYERS = [
    ("models", r"sparsebayes\.models(\..*)?"),
    ("core", r"sparsebayes\.inference\.(numerics|results|likelihoods|samplers|progress)"),
    ("predictive", r"sparsebayes\.inference\.predictive(\..*)?"),
    ("rvm", r"sparsebayes\.inference\.rvm(\..*)?"),
    ("gp", r"sparsebayes\.inference\.gp(\..*)?"),
    ("front", r"sparsebayes\.inference(\.(api|groups|loo|compare|plots|sklearn|metrics))?"),
    ("application", r"sparsebayes\.inference\.(study(\..*)?|cli)"),
]
SIBLINGS = {("rvm", "gp"), ("gp", "rvm")}  # the two model families stay apart


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
            if _layer(t) > _layer(m) or (a, b) in SIBLINGS:
                wrong.append(f"{m} ({a}) imports {t} ({b})")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_module():
    private = [f"{m} imports {n} from {t}" for m in MODULES for t, n in _imports(m)
               if n.startswith("_") and not n.startswith("__") or "._" in t]
    assert not private, "\n".join(private)


def test_docstrings_cite_papers_not_files_or_issues():
    pattern = re.compile(r"DESIGN\.md|papers/|\bNOTES\b|\b[Ii]ssue #?\d")
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for path, _ in MODULES.values()
             for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)
