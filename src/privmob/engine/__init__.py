"""Engines: where all work on raw records runs (DuckDB by default).

The package imports its engines when first used (``privmob.engine.DuckDBEngine`` imports
DuckDB and pandas then), so that ``privmob.engine.rundir`` (the private run directory and
the signal handler every command installs) costs nothing at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.engine.base import Engine, dense_counts
    from privmob.engine.duckdb import DuckDBEngine

__all__ = ["DuckDBEngine", "Engine", "dense_counts", "make_engine"]

_LAZY = {
    "Engine": "privmob.engine.base",
    "dense_counts": "privmob.engine.base",
    "DuckDBEngine": "privmob.engine.duckdb",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'privmob.engine' has no attribute '{name}'")


def make_engine(name: str | Engine | None = None, **options: Any) -> Engine:
    """An engine by name: ``"duckdb"`` (default) or ``"spark"``; an engine passes through."""
    if name is None or name == "duckdb":
        from privmob.engine.duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if not isinstance(name, str):
        return name
    if name == "spark":
        try:
            from privmob.engine.spark import SparkEngine
        except ImportError as exc:
            raise ConfigError(
                "the Spark engine is not available",
                hint="install privmob[spark] (PySpark) and Java",
            ) from exc
        return SparkEngine(**options)
    raise ConfigError(f"unknown engine '{name}'", hint="use duckdb or spark")
