"""The package's imports follow the data flow: a module imports only from its own layer or the
layers below it, and no two packages (or modules) import each other.

Read from the source with ``ast`` (nothing is imported): every ``import`` counts for the layer
order, wherever it is (module level, inside a function, under ``TYPE_CHECKING``); circles are
looked for among the imports that run (``TYPE_CHECKING`` blocks left out), between the
top-level packages and between modules. See docs/architecture.md for the picture.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "privmob"

#: lowest first; a package may import from its own layer and from the layers below.
#: "" is ``privmob/__init__.py`` (``__version__``; its public names are imported lazily).
LAYERS: list[set[str]] = [
    {"", "errors", "extras", "domain", "cores", "lazy_imports", "surface", "json_types"},  # ground
    {"privacy", "dp"},  # mechanisms, costs, ledger; the typed DP vocabulary
    {"engine"},  # relational pipeline, the relation handle
    {"data"},  # reading, validation, times, tiles, loaders, tessellations
    {"prepare"},  # trips, homes, bounding, geometry
    {"releases"},  # one module or package per release, publication
    {"evaluate", "audit"},  # utility, planning, attacks (use releases, never used by them)
    {"render"},  # HTML, maps, layers, files
    {"results"},  # release values with one surface
    {"session"},  # the front door
    {"cli", "__main__"},  # thin adapters
]


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. privmob.releases.od
    target: str  # imported module
    line: int
    runtime: bool  # False under ``if TYPE_CHECKING:``


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> list[Import]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[Import] = []

    def add(target: str, node: ast.stmt, runtime: bool) -> None:
        if target == "privmob" or target.startswith("privmob."):
            found.append(Import(module, target, node.lineno, runtime))

    def visit(node: ast.AST, runtime: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, runtime)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, runtime)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                sub = f"{origin}.{alias.name}"
                add(sub if sub in MODULES else origin, node, runtime)
        for child in ast.iter_child_nodes(node):
            visit(child, runtime)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


IMPORTS = [imp for name, path in sorted(MODULES.items()) for imp in _imports(name, path)]


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"privmob.{package} is in no layer: add it to LAYERS")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_package() -> None:
    # guards against a scan that silently finds nothing (and so passes everything)
    assert len(MODULES) > 100 and len(IMPORTS) > 300
    pairs = {(i.source, i.target) for i in IMPORTS}
    assert ("privmob.releases.od", "privmob.engine.relation") in pairs
    assert ("privmob.releases.report.build", "privmob.releases.report.analyses") in pairs


def test_every_package_has_a_layer() -> None:
    for module in MODULES:
        _layer(_package(module))


def test_no_import_runs_back_up_the_layers() -> None:
    upward = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in IMPORTS
        if _layer(_package(i.target)) > _layer(_package(i.source))
    ]
    assert upward == [], "imports from a higher layer:\n" + "\n".join(upward)


def test_no_circle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for i in IMPORTS:
        a, b = _package(i.source), _package(i.target)
        if i.runtime and a != b:
            graph.setdefault(a, set()).add(b)
    assert _cycles(graph) == []


def test_no_circle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.runtime and i.source != i.target:
            graph.setdefault(i.source, set()).add(i.target)
    assert _cycles(graph) == []


def test_no_circle_between_modules_even_for_type_hints() -> None:
    """A type-only import (``if TYPE_CHECKING:``) that closes a circle still ties two modules
    together for a reader: a type both need belongs in a module below both."""
    graph: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.source != i.target:
            graph.setdefault(i.source, set()).add(i.target)
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_circle_finder_finds_circles(graph: dict[str, set[str]], expected: list) -> None:
    assert _cycles(graph) == expected
