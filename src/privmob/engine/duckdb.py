"""The DuckDB engine (the default): embedded, multi-threaded, spills to disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from privmob.engine.dialect import DUCKDB, Dialect


class DuckDBEngine:
    """An in-process DuckDB database holding this run's views and tables."""

    name = "duckdb"
    dialect: Dialect = DUCKDB

    def __init__(
        self,
        *,
        memory_limit: str | None = None,
        threads: int | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.con = duckdb.connect(":memory:")
        self.memory_limit = memory_limit  # also sizes the user buckets (engine/buckets.py)
        self.con.execute("SET TimeZone = 'UTC'")
        if memory_limit:
            self.con.execute(f"SET memory_limit = '{memory_limit}'")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        tmp = Path(temp_directory) if temp_directory else Path(tempfile.gettempdir()) / "privmob"
        self.con.execute(f"SET temp_directory = '{tmp}'")
        self.con.execute("SET preserve_insertion_order = false")
        self.con.execute("SET enable_progress_bar = false")  # the CLI has its own progress
        self._keep: list[Any] = []  # Python objects registered as views must stay alive

    def register(self, name: str, data: Any) -> None:
        if isinstance(data, str | Path):
            self.create_view(name, f"SELECT * FROM read_parquet('{_quote(data)}')")
            return
        if hasattr(data, "to_arrow") and not isinstance(data, pd.DataFrame):
            data = data.to_arrow()  # Polars
        self._keep.append(data)
        self.con.register(name, data)

    def create_view(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")

    def materialize(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")

    def fetch(self, sql: str) -> pd.DataFrame:
        return self.con.execute(sql).df()

    def columns(self, name: str) -> list[str]:
        return [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {name}").fetchall()]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> DuckDBEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _quote(path: str | Path) -> str:
    return str(path).replace("'", "''")
