"""Input sources: reading files, folders, URLs and in-memory tables into the engine, their
columns and column types, and the datasets they name.

Reading never modifies an input; a source that cannot be read raises one
:class:`~privmob.errors.InputError` naming the file and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.data import diagnose
from privmob.engine.relation import new_name
from privmob.errors import ConfigError, EngineError, InputError

if TYPE_CHECKING:
    from privmob.engine.base import Engine


def dataset_name(explicit: str | None, source: str | Path) -> str:
    """The dataset name: explicit, or the input file's name without extensions."""
    if explicit:
        return explicit
    name = Path(str(source)).name
    for suffix in (".gz", ".parquet", ".csv", ".tsv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "dataset"


CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".gz"}


NUMERIC_TIME_TYPES = {"DOUBLE", "FLOAT", "REAL"}


# integer types whose every value fits a BIGINT (so that CAST AS BIGINT is exact)
INT64_SAFE_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}


INTEGER_TYPES = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
}


def describe_source(source: Any) -> str:
    if isinstance(source, str | Path):
        return str(source)
    return f"<{type(source).__module__.split('.')[0]} {type(source).__name__}>"


def read_raw(
    engine: Engine,
    source: Any,
    *,
    delimiter: str | None = None,
    header: bool = True,
    names: list[str] | None = None,
) -> tuple[str, str]:
    """Expose ``source`` as a raw view (all columns as read). Returns (view, display name)."""
    display = describe_source(source)
    view = new_name("raw")
    if isinstance(source, str | Path):
        text = str(source)
        if _is_csv(text, display):
            files = _csv_files(Path(text)) if not is_url(text) and Path(text).is_dir() else text
            read = partial(
                engine.read_csv, view, files, delimiter=delimiter, header=header, names=names
            )
        else:  # a Parquet file, or a folder of Parquet files
            read = partial(engine.read_parquet, view, text)
        _engine_read(display, read, text)
        _engine_read(display, partial(engine.fetch, f"SELECT * FROM {view} LIMIT 0"), text)
    elif _is_table(source):
        engine.register(view, source)
    else:
        raise ConfigError(
            f"cannot read input of type {type(source).__name__}",
            hint="give a CSV/Parquet path or a pandas/Polars/Arrow table",
        )
    return view, display


def reads_csv(source: Any) -> bool:
    """Whether :func:`read_raw` reads ``source`` as CSV text (a path to CSV files)."""
    if not isinstance(source, str | Path):
        return False
    text = str(source)
    return _is_csv(text, describe_source(source))


def _is_table(source: Any) -> bool:
    """A pandas / Arrow table, or anything with ``to_arrow`` (Polars)."""
    import pandas as pd  # here, so that naming a dataset does not load pandas
    import pyarrow as pa

    return isinstance(source, pd.DataFrame | pa.Table) or hasattr(source, "to_arrow")


def is_url(text: str) -> bool:
    """``s3a://bucket/x``, ``hdfs://nn/x``, ``file:///x``: read by the engine, not checked here."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text) is not None


def _is_csv(text: str, display: str) -> bool:
    """Whether a path names CSV (else Parquet). Local paths are checked first (exist, not
    empty); a local file is Parquet by its .parquet/.pq name, CSV otherwise; a local folder is
    Parquet if it holds .parquet files, else its .csv/.tsv/.txt/.gz files are read; a URL is
    CSV by its .csv/.tsv/.txt/.gz name (globs too), otherwise a Parquet file or folder."""
    parquet = {".parquet", ".pq"}
    if is_url(text):
        suffix = Path(text.rstrip("/")).suffix.lower()
        return suffix in CSV_SUFFIXES
    path = Path(text)
    _check_local_file(path, display)
    if path.is_dir():  # a folder of Parquet files, else of CSV files
        return not any(path.glob("*.parquet"))
    return path.suffix.lower() not in parquet


def _csv_files(folder: Path) -> list[str]:
    return sorted(
        str(p) for p in folder.iterdir() if p.is_file() and p.suffix.lower() in CSV_SUFFIXES
    )


def _check_local_file(path: Path, display: str) -> None:
    if not path.exists():
        raise InputError("file not found", source=display, hint="check the path")
    if path.is_dir():
        if not any(path.glob("*.parquet")) and not _csv_files(path):
            raise InputError("directory holds no .parquet files and no CSV files", source=display)
    elif path.stat().st_size == 0:
        raise InputError(
            "the file is empty",
            source=display,
            hint="give a file with a header row and records",
        )


def _engine_read(display: str, read: Callable[[], Any], path: str | None = None) -> None:
    """Run an engine's read step; its own read errors become one InputError (naming the
    likely cause: a file that is not UTF-8, a memory limit too small to read it)."""
    try:
        read()
    except InputError:
        raise
    except Exception as exc:  # engine-specific read errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "out of memory" in str(exc).lower():
            raise EngineError(
                f"{display}: the engine ran out of memory while reading the file",
                hint="raise --memory-limit",
            ) from exc
        cause = diagnose.encoding_hint(path) if path and not is_url(path) else None
        if cause is not None:
            raise InputError(cause[0], source=display, hint=cause[1]) from exc
        raise InputError(
            f"cannot be read: {first}",
            source=display,
            hint="check the file format and delimiter (--delimiter)",
        ) from exc


def quote(text: str | Path) -> str:
    return str(text).replace("'", "''")


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def resolve_columns(
    engine: Engine,
    view: str,
    display: str,
    *,
    required: list[str],
    optional: list[str],
    mapping: Mapping[str, str] | None,
) -> dict[str, str]:
    """Map canonical names to the source's columns; raise a clear error if one is missing."""
    available = engine.columns(view)
    mapping = dict(mapping or {})
    unknown = set(mapping) - set(required) - set(optional)
    if unknown:
        raise ConfigError(
            f"unknown canonical column(s) in the mapping: {sorted(unknown)}",
            hint=f"canonical names are: {', '.join(required + optional)}",
        )
    lower = {c.lower(): c for c in available}
    resolved: dict[str, str] = {}
    for canon in required + optional:
        actual = mapping.get(canon, canon)
        if actual in available:
            resolved[canon] = actual
        elif actual.lower() in lower:
            resolved[canon] = lower[actual.lower()]
        elif canon in required:
            layout = diagnose.layout_hint(available)
            if layout is not None:
                raise InputError(layout[0], source=display, hint=layout[1])
            raise InputError(
                f"missing column '{actual}' (columns found: {diagnose.shown_columns(available)})",
                source=display,
                column=actual,
                hint=f"map it: --columns {canon}=<your column>",
            )
    return resolved


def column_types(engine: Engine, view: str) -> dict[str, str]:
    df = engine.fetch(f"DESCRIBE SELECT * FROM {view}")
    return dict(zip(df["column_name"], df["column_type"].str.upper(), strict=True))


def require_engine(engine: Any) -> Engine:
    if engine is None:
        raise EngineError("no engine given")
    return engine
