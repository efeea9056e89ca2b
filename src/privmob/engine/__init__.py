"""Engines: where all work on raw records runs (DuckDB by default)."""

from __future__ import annotations

from typing import Any

from privmob.engine.base import Engine, dense_counts
from privmob.engine.duckdb import DuckDBEngine
from privmob.errors import ConfigError

__all__ = ["DuckDBEngine", "Engine", "dense_counts", "make_engine"]


def make_engine(name: str | Engine | None = None, **options: Any) -> Engine:
    """An engine by name: ``"duckdb"`` (default) or ``"spark"``; an engine passes through."""
    if name is None or name == "duckdb":
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
