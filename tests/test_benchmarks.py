"""The benchmark scripts are run by hand, not by the suite (docs/benchmarks.md): each name they
import from privmob is checked here, so that moving a function out of a module breaks a test,
not a benchmark found broken months later (bench_fingerprint_canonical.py imported the
fingerprint's functions from privmob.data.validation after they had moved)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _privmob_imports(script: Path) -> list[tuple[str, str]]:
    tree = ast.parse(script.read_text(), filename=str(script))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module is not None
        and node.module.startswith("privmob")
        for alias in node.names
    ]


def _exists(module: str, name: str) -> bool:
    """``from module import name`` would work: an attribute, or a submodule of a package."""
    found = importlib.import_module(module)
    if hasattr(found, name):
        return True
    return hasattr(found, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None


@pytest.mark.parametrize("script", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_from_privmob_exists(script: Path) -> None:
    missing = [f"{m}.{n}" for m, n in _privmob_imports(script) if not _exists(m, n)]
    assert not missing, f"{script.name} imports what privmob no longer has: {missing}"
