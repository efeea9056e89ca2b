"""The DuckDB engine (the default): embedded, multi-threaded, spills to disk."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from privmob.engine.base import CsvFormat
from privmob.engine.dialect import DUCKDB, Dialect
from privmob.engine.relation import new_name

if TYPE_CHECKING:
    import pyarrow as pa


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
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        from privmob.engine.buckets import parse_memory
        from privmob.engine.memory import FREED_MEMORY_SETTINGS, process_memory
        from privmob.engine.rundir import open_run_dir

        # the limit caps the whole process: the engine gets what the process does not already
        # use (engine/memory.py); that sizes the user buckets (engine/buckets.py), and DuckDB
        # gets a share of it and spills its sorts, joins and group-bys to temp_directory above
        self.process_memory = (
            process_memory(parse_memory(memory_limit), memory_limit) if memory_limit else None
        )
        self.memory_limit = self.process_memory.available if self.process_memory else None
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        for setting, value in FREED_MEMORY_SETTINGS.items():
            with contextlib.suppress(duckdb.CatalogException):  # newer than this DuckDB
                self.con.execute(f"SET {setting} = {value}")
        if self.memory_limit:
            self._limit_to(self.memory_limit)
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        # default: this run's private working directory (engine/rundir.py), never a shared one
        tmp = Path(temp_directory) if temp_directory else open_run_dir().sub("duckdb")
        self.temp_directory = tmp
        # where user buckets are written (private subdirectories, removed after counting)
        self.spill_dir = Path(spill_dir) if spill_dir else open_run_dir().sub("buckets")
        self.con.execute(f"SET temp_directory = '{_quote(tmp)}'")
        self.con.execute("SET preserve_insertion_order = false")
        _progress_bar_off(self.con)  # the CLI has its own progress
        self._keep: list[object] = []  # Python objects registered as views must stay alive
        self._private: list[Path] = []  # directories of private_directory, removed at close
        self._sniffed: dict[str, str] = {}  # CSV reader -> the fixed reader detected for it
        self._csv_views: dict[str, str] = {}  # view of read_csv -> its fixed reader, if any
        self.stored: list[str] = []  # tables of store_table, in order (drop_stored)
        # whether privmob.data.times.scanned_times may read times through the CSV scanner, and
        # the errors of a scanner stopped by a value it cannot convert (not an interrupt, a
        # full disk or a lack of memory: those stop the run)
        self.scans_times = SCANS_TIMES
        self.conversion_errors = (duckdb.ConversionException, duckdb.InvalidInputException)

    def _limit_to(self, engine_memory: int) -> None:
        """DuckDB's limit and settings for ``engine_memory`` bytes of engine memory."""
        from privmob.engine.buckets import duckdb_memory_limit
        from privmob.engine.memory import limited_settings

        self.con.execute(f"SET memory_limit = '{duckdb_memory_limit(engine_memory)}'")
        for setting, value in limited_settings(engine_memory).items():
            with contextlib.suppress(duckdb.CatalogException):  # newer than this DuckDB
                self.con.execute(f"SET {setting} = {value}")

    def reserve(self, nbytes: int) -> None:
        """Set ``nbytes`` of the process's memory limit aside for the release's own arrays (its
        dense domain and output table: the plan's estimate); DuckDB and the user buckets then
        plan within the rest (engine/memory.py). Without a limit, nothing changes."""
        if self.process_memory is not None:
            self.memory_limit = self.process_memory.engine_memory(nbytes)
            self._limit_to(self.memory_limit)

    def register(self, name: str, data: object) -> None:
        if isinstance(data, str | Path):
            self.read_parquet(name, str(data))
            return
        if hasattr(data, "to_arrow") and not isinstance(data, pd.DataFrame):
            data = data.to_arrow()  # Polars
        self._keep.append(data)
        self.con.register(name, data)

    def store_table(self, name: str, data: pa.Table) -> None:
        """``data`` copied into a temporary table of DuckDB's own, the Python object not kept:
        its memory is then within DuckDB's ``memory_limit`` and spilled to the temp directory
        under pressure, where a registered table (:meth:`register`) stays in Python's memory for
        the life of the engine (the tile lookups of a large input: 20 bytes per distinct
        coordinate, one per user bucket)."""
        scan = new_name("arrow")
        self.con.register(scan, data)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {scan}")
        finally:
            self.con.unregister(scan)
        self.stored.append(name)

    def drop_stored(self, keep: int) -> None:
        """Drop the tables :meth:`store_table` made after its first ``keep``: a user bucket's
        tile lookup once the bucket is counted. Kept, the lookups of 50M trips in 23 buckets
        over 2,000 Voronoi cells (87 MB each) filled DuckDB's 138 MiB share at 1 GB by the 22nd
        bucket, which then ran out of memory (benchmarks/bench_memory_cap.py, 2026-12-02)."""
        for name in self.stored[keep:]:
            self.con.execute(f"DROP TABLE IF EXISTS {name}")
        del self.stored[keep:]

    def read_parquet(self, name: str, path: str) -> None:
        """A Parquet file, or every ``*.parquet`` file of a folder (local or a URL DuckDB reads)."""
        if path.endswith("/") or Path(path).is_dir():
            path = path.rstrip("/") + "/*.parquet"
        self.create_view(name, f"SELECT * FROM read_parquet('{_quote(path)}')")

    def read_csv(self, name: str, path: str | list[str], fmt: CsvFormat = CsvFormat()) -> None:
        """CSV file(s) (gzip ok) as text columns (see :class:`CsvFormat`)."""
        opts = ["header = " + ("true" if fmt.header else "false"), "all_varchar = true"]
        if fmt.filename_column:
            opts.append(f"filename = '{_quote(fmt.filename_column)}'")
        if fmt.delimiter:
            opts.append(f"delim = '{_quote(fmt.delimiter)}'")
        if fmt.names:
            opts.append("names = [" + ", ".join(f"'{_quote(n)}'" for n in fmt.names) + "]")
        files = (
            f"'{_quote(path)}'"
            if isinstance(path, str)
            else "[" + ", ".join(f"'{_quote(p)}'" for p in path) + "]"
        )
        reader = f"read_csv({files}, {', '.join(opts)})"
        # sniff_csv's fixed reader leaves the file name column out: detect as read then
        fixed = f"FROM {reader}" if fmt.filename_column else self._sniffed_once(reader)
        self.create_view(name, f"SELECT * {fixed}")
        if fixed != f"FROM {reader}":
            self._csv_views[name] = fixed

    def retyped_csv(self, name: str, types: dict[str, str]) -> str | None:
        """A new view of the CSV file(s) of :meth:`read_csv`'s view ``name`` reading the
        columns of ``types`` as those types (DuckDB's CSV scanner converts them, and a value it
        cannot convert fails the query that reads it) and the others as text, with the same
        dialect. None where that reader cannot be written with certainty (several files, a
        DuckDB without the fixed reader, column names its reader does not print as expected)."""
        fixed = self._csv_views.get(name)
        if fixed is None:
            return None
        columns = self.columns(name)
        as_text = ", ".join(f"'{_quote(c)}': 'VARCHAR'" for c in columns)
        typed = ", ".join(f"'{_quote(c)}': '{types.get(c, 'VARCHAR')}'" for c in columns)
        if fixed.count(f"columns={{{as_text}}}") != 1 or not set(types) <= set(columns):
            return None
        view = new_name("typed_csv")
        self.create_view(
            view, "SELECT * " + fixed.replace(f"columns={{{as_text}}}", f"columns={{{typed}}}")
        )
        return view if self.columns(view) == columns else None

    def _sniffed_once(self, reader: str) -> str:
        """``FROM`` a CSV reader whose dialect and columns are detected once, now: DuckDB
        detects them again each time a query on a detecting reader is planned (30-90 ms on
        any file; a release plans about ten), and the fixed reader it proposes
        (``sniff_csv``'s prompt) reads the same columns and rows without detecting. Where that
        does not work (several files; DuckDB before 1.2, whose prompt drops the quote and
        sets a comment character), the detecting reader as given."""
        if not FIXED_READER:
            return f"FROM {reader}"
        if reader in self._sniffed:  # the same file read again (e.g. its shape, then its rows)
            return self._sniffed[reader]
        sniff = "sniff_csv(" + reader.removeprefix("read_csv(")
        try:
            row = self.con.execute(f"SELECT Prompt FROM {sniff}").fetchone()
        except duckdb.Error:  # a list of files; or a reading error, raised by the reader below
            return f"FROM {reader}"
        prompt = str(row[0]).strip().rstrip(";") if row else ""
        fixed = prompt if prompt.startswith("FROM read_csv(") else f"FROM {reader}"
        self._sniffed[reader] = fixed
        return fixed

    def create_view(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")

    def materialize(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")

    def append(self, name: str, sql: str) -> None:
        self.con.execute(f"INSERT INTO {name} {sql}")

    def fetch(self, sql: str) -> pd.DataFrame:
        return self.con.execute(sql).df()

    def columns(self, name: str) -> list[str]:
        return [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {name}").fetchall()]

    def private_directory(self, prefix: str) -> Path:
        """A fresh directory (mode 0700) for files of this engine that hold records (the parsed
        input), under the spill directory (this run's private working directory unless
        ``spill_dir`` says otherwise); removed when the engine closes or the process exits."""
        self.spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=self.spill_dir))
        self._private.append(path)
        atexit.register(shutil.rmtree, path, True)
        return path

    def close(self) -> None:
        self.con.close()
        for path in self._private:
            shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> DuckDBEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _progress_bar_off(con: duckdb.DuckDBPyConnection) -> None:
    """Turn DuckDB's own progress bar off where it is on. In a Jupyter kernel without
    ipywidgets DuckDB starts with it off and refuses any change to it (``SET`` raises
    InvalidInputException), so it is only set when it is on (tests/docs/test_notebook.py)."""
    rows = con.execute("SELECT current_setting('enable_progress_bar')").fetchall()
    if not rows or rows[0][0]:
        con.execute("SET enable_progress_bar = false")


def _version(text: str) -> tuple[int, int]:
    """Major and minor of a version string ("1.2.0", "1.3.0.dev12"); (0, 0) if unreadable."""
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else (0, 0)


#: The CSV scanner's conversion of times was compared with privmob's reading of the same text
#: (tests/data/test_scanned_times.py) on DuckDB 2; DuckDB 1 turns a value it cannot convert
#: into NULL instead of stopping, and reads fewer forms (privmob.data.times.scanned_times)
SCANS_TIMES = _version(duckdb.__version__) >= (2, 0)

#: DuckDB's ``sniff_csv`` proposes a reader that reads what detection reads from 1.2 on
#: (tests/engine/test_csv_sniffed_once.py; 1.1's omits the quote and sets comment=' ')
FIXED_READER = _version(duckdb.__version__) >= (1, 2)


def _quote(path: str | Path) -> str:
    return str(path).replace("'", "''")
