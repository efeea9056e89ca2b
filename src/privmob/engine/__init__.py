"""Engines: where all work on raw records runs (DuckDB by default).

The package imports its engines when first used (``privmob.engine.DuckDBEngine`` imports
DuckDB and pandas then), so that ``privmob.engine.rundir`` (the private run directory and
the signal handler every command installs) costs nothing at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from privmob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12

    from privmob.engine.base import Engine, dense_counts
    from privmob.engine.duckdb import DuckDBEngine

__all__ = ["DuckDBEngine", "Engine", "dense_counts", "make_engine", "open_engine"]

_LAZY = {
    "Engine": "privmob.engine.base",
    "dense_counts": "privmob.engine.base",
    "DuckDBEngine": "privmob.engine.duckdb",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'privmob.engine' has no attribute '{name}'")


class DuckDBOptions(TypedDict, total=False):
    """The keywords of :class:`DuckDBEngine`."""

    memory_limit: str | None
    threads: int | None
    temp_directory: str | os.PathLike[str] | None
    spill_dir: str | os.PathLike[str] | None


class SparkOptions(TypedDict, total=False):
    """The keywords of :class:`~privmob.engine.spark.SparkEngine`."""

    memory_limit: str | None
    session: SparkSession | None
    master: str | None
    conf: dict[str, str] | None


class EngineOptions(DuckDBOptions, SparkOptions, total=False):
    """The keywords of either engine (the chosen engine's constructor refuses the others)."""


def make_engine(name: str | Engine | None = None, **options: Unpack[EngineOptions]) -> Engine:
    """An engine by name: ``"duckdb"`` (default) or ``"spark"``; an engine passes through."""
    if name is None or name == "duckdb":
        from privmob.engine.duckdb import DuckDBEngine

        duckdb_options: DuckDBOptions = options
        return DuckDBEngine(**duckdb_options)
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
        spark_options: SparkOptions = options
        return SparkEngine(**spark_options)
    raise ConfigError(f"unknown engine '{name}'", hint="use duckdb or spark")


def spark_settings(items: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """Spark settings from ``key=value`` strings (``--spark-conf``) or a mapping."""
    if isinstance(items, Mapping):
        return {str(k): str(v) for k, v in items.items()}
    conf = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"cannot read the Spark setting '{item}'",
                hint="use --spark-conf key=value, e.g. --spark-conf spark.executor.memory=16g",
            )
        conf[key.strip()] = value.strip()
    return conf


def open_engine(
    name: str | Engine | None = "duckdb",
    *,
    memory_limit: str | None = None,
    spill_dir: Path | None = None,
    spark_master: str | None = None,
    spark_conf: Sequence[str] | Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Engine:
    """The engine a session or a command runs on, with its memory limit; for DuckDB the
    parent of this run's private working directory (``spill_dir``, for its temporary files
    and the user buckets), for Spark the master URL and settings. Local Spark keeps its
    shuffle files in the private run directory too. An engine object passes through."""
    if name is not None and not isinstance(name, str):
        return name
    options: EngineOptions = {"memory_limit": memory_limit} if memory_limit else {}
    if name != "spark":
        if spark_master or spark_conf:
            raise ConfigError(
                "--spark-master and --spark-conf apply to the Spark engine",
                hint="add --engine spark (engine='spark')",
            )
        if spill_dir is not None:  # the parent of this run's private working directory
            from privmob.engine.rundir import open_run_dir

            run = open_run_dir(spill_dir)
            options |= {"temp_directory": run.sub("duckdb"), "spill_dir": run.sub("buckets")}
        return make_engine(name, **options)
    conf = spark_settings(spark_conf)
    if progress is not None:
        progress("starting Spark")  # tens of seconds for a local session
    if spark_master:
        options["master"] = spark_master
    if "spark.local.dir" not in conf:
        # the driver's files (in local mode also the shuffle and spill files; on a cluster the
        # driver's own blocks and pyspark's temporary files of frames sent to Spark): ours,
        # private, removed with the run. Executors on a cluster use the local directories
        # their cluster manager gives them (standalone, YARN), or this path on their own
        # disk (Kubernetes: an emptyDir volume)
        from privmob.engine.rundir import open_run_dir

        conf["spark.local.dir"] = str(open_run_dir(spill_dir).sub("spark"))
    if conf:
        options["conf"] = conf
    return make_engine(name, **options)
