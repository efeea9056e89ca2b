"""Input sources: reading files, folders, URLs and in-memory tables into the engine, their
columns and column types, and the datasets they name.

Reading never modifies an input; a source that cannot be read raises one
:class:`~privmob.errors.InputError` naming the file and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from privmob.data import diagnose
from privmob.engine.relation import new_name
from privmob.errors import ConfigError, EngineError, InputError
from privmob.surface import option, spelled

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


@dataclass(frozen=True)
class CsvFiles:
    """A CSV file or folder and how to read it, for inputs that are not laid out as privmob
    reads by default: ``header=False`` (no header row: columns ``column0, ...`` unless
    ``names`` names them), ``names`` (the columns, in order; implies no header row),
    ``delimiter``, and ``uid_from_filename`` (per-user files whose name, without its
    extensions, is the user id: Cabspotting's ``new_abboip.txt``; the files get a ``uid``
    column)."""

    path: str | Path
    delimiter: str | None = None
    header: bool = True
    names: tuple[str, ...] | None = None
    uid_from_filename: bool = False

    def __str__(self) -> str:
        return str(self.path)

    @property
    def has_header(self) -> bool:
        return self.header and not self.names


def as_csv_files(
    source: Any,
    *,
    header: bool = True,
    names: list[str] | tuple[str, ...] | None = None,
    uid_from_filename: bool = False,
) -> Any:
    """``source`` with its layout when one is given (a :class:`CsvFiles`), else as it is;
    a layout given for a table (not a path) is refused."""
    if header and not names and not uid_from_filename:
        return source
    if not isinstance(source, str | Path):
        raise ConfigError(
            "names, header and uid_from_filename describe files, not a table",
            hint="give a CSV path or folder, or name the table's columns before",
        )
    return CsvFiles(source, None, header, tuple(names) if names else None, uid_from_filename)


def describe_source(source: Any) -> str:
    if isinstance(source, CsvFiles):
        return str(source.path)
    if isinstance(source, str | Path):
        return str(source)
    return f"<{type(source).__module__.split('.')[0]} {type(source).__name__}>"


class Reading(TypedDict, total=False):
    """How an input is read: the keywords every loader takes (``load_events``,
    ``load_trip_points``, ``load_trips``, ``load_trips_any``), each with its default."""

    columns: Mapping[str, str] | None  # None: the canonical names (canonical=yours otherwise)
    timezone: str  # "UTC": the time zone of timestamps written without an offset
    delimiter: str | None  # None: detected


def refuse_unknown_reading(reading: Mapping[str, object]) -> None:
    """A reading keyword :class:`Reading` does not name (``timezon=``) is a TypeError, as
    Python refuses it for a function that lists its keywords: never silently ignored."""
    unknown = sorted(set(reading) - set(Reading.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} of a loader")


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
    layout = source if isinstance(source, CsvFiles) else None
    if layout is not None:
        source = layout.path
        delimiter = delimiter or layout.delimiter
        header, names = layout.has_header, list(layout.names) if layout.names else names
    if isinstance(source, str | Path):
        text = str(source)
        if _is_csv(text, display):
            files = _csv_files(Path(text)) if not is_url(text) and Path(text).is_dir() else text
            if isinstance(files, list):
                _tell_skipped(Path(text), files)
            by_file = layout is not None and layout.uid_from_filename
            from privmob.engine.base import CsvFormat  # numpy and pandas: when reading

            fmt = CsvFormat(
                delimiter=delimiter,
                header=header,
                names=tuple(names) if names else None,
                filename_column=FILE_COLUMN if by_file else None,
            )
            read = partial(engine.read_csv, view, files, fmt=fmt)
        else:  # a Parquet file, or a folder of Parquet files
            if layout is not None and layout.uid_from_filename:
                raise ConfigError(
                    f"{display}: the user id from the file name is read from CSV files only",
                    hint="Parquet files carry their own uid column",
                )
            read = partial(engine.read_parquet, view, text)
        _engine_read(display, read, text)
        _engine_read(display, partial(engine.fetch, f"SELECT * FROM {view} LIMIT 0"), text)
        if layout is not None and layout.uid_from_filename:
            view = _uid_from_file_name(engine, view, display)
    elif _is_table(source):
        engine.register(view, source)
    else:
        raise ConfigError(
            f"cannot read input of type {type(source).__name__}",
            hint="give a CSV/Parquet path or a pandas/Polars/Arrow table",
        )
    return view, display


#: the column holding each row's file while the user id is taken from it
FILE_COLUMN = "_privmob_file"


def _uid_from_file_name(engine: Engine, view: str, display: str) -> str:
    """A view of ``view`` with ``uid`` = the name of each row's file without its directory
    and its .csv/.tsv/.txt/.gz extensions (the same text on every engine)."""
    columns = [c for c in engine.columns(view) if c != FILE_COLUMN]
    if any(c.lower() == "uid" for c in columns):
        raise ConfigError(
            f"{display}: the files have a uid column already; the user id cannot also come "
            "from the file name",
            hint=spelled("leave out --uid-from-filename", "pass uid_from_filename=False"),
        )
    name = f"regexp_extract({FILE_COLUMN}, '([^/]+)$', 1)"
    uid = f"regexp_replace({name}, '(?i)([.](csv|tsv|txt|gz))+$', '')"
    out = new_name("raw")
    kept = ", ".join(ident(c) for c in columns)
    engine.create_view(out, f"SELECT {kept}, {uid} AS uid FROM {view}")
    return out


def reads_csv(source: Any) -> bool:
    """Whether :func:`read_raw` reads ``source`` as CSV text (a path to CSV files)."""
    if isinstance(source, CsvFiles):
        source = source.path
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


#: .txt files of an input folder that are documentation, not data, by the start of their
#: name (case-insensitive): a dataset's LICENSE, README or notes beside its CSV files
NOT_DATA_NAMES = (
    "license",
    "licence",
    "copying",
    "readme",
    "notice",
    "authors",
    "citation",
    "changelog",
    "changes",
    "contributing",
    "notes",
    "source",
)


def _is_data_file(path: Path) -> bool:
    """A .csv/.tsv/.txt/.gz file, not hidden, and not a .txt named as documentation (a data
    file named ``source_2024.csv`` is read)."""
    name, suffix = path.name.lower(), path.suffix.lower()
    return (
        path.is_file()
        and not name.startswith(".")
        and suffix in CSV_SUFFIXES
        and not (suffix == ".txt" and name.startswith(NOT_DATA_NAMES))
    )


def _csv_files(folder: Path) -> list[str]:
    """The data files of an input folder: its .csv/.tsv/.txt/.gz files except hidden ones and
    .txt documentation (:data:`NOT_DATA_NAMES`), in name order."""
    return sorted(str(p) for p in folder.iterdir() if _is_data_file(p))


def _tell_skipped(folder: Path, read: list[str]) -> None:
    """Warn the operator (a :class:`~privmob.errors.PrivmobWarning`, never part of a release)
    of the files of an input folder that are not read as data."""
    from privmob.errors import PrivmobWarning
    from privmob.surface import warn_caller

    kept = set(read)
    skipped = sorted(p.name for p in folder.iterdir() if str(p) not in kept)
    if skipped:
        shown = ", ".join(skipped[:10]) + (
            f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        )
        warn_caller(
            f"{folder}: {len(skipped)} file(s) that are not data were skipped ({shown}); data "
            f"files are .csv, .tsv, .txt or .gz, not hidden, not named {NOT_DATA_NAMES[0]}, "
            f"{NOT_DATA_NAMES[3]}, notes...",
            PrivmobWarning,
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
                hint=f"raise {option('memory_limit')}",
            ) from exc
        raise unreadable(
            display,
            path,
            first,
            hint=f"check the file format and delimiter ({spelled('--delimiter', 'delimiter=')})",
        ) from exc


def unreadable(display: str, path: str | None, reason: str, *, hint: str) -> InputError:
    """The one message for an input the engine could not read: the file's encoding or a
    damaged gzip stream where that is the cause (a local ``path`` only), else the engine's
    ``reason`` (its first line, values scrubbed where they could be data) with ``hint``."""
    cause = diagnose.encoding_hint(path) if path and not is_url(path) else None
    if cause is not None:
        return InputError(cause[0], source=display, hint=cause[1])
    return InputError(f"cannot be read: {reason}", source=display, hint=hint)


def quote(text: str | Path) -> str:
    return str(text).replace("'", "''")


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: the hint of a missing uid: only a person's id may stand for it
UID_HINT = (
    "map the column that identifies a person: --columns uid=<column>; per-user files named by "
    "the user id: --uid-from-filename. A vehicle, bike or device id is not a person: without "
    "a person id, release per trip (--unit trip)"
)


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
                hint=UID_HINT if canon == "uid" else f"map it: --columns {canon}=<your column>",
            )
    return resolved


def column_types(engine: Engine, view: str) -> dict[str, str]:
    df = engine.fetch(f"DESCRIBE SELECT * FROM {view}")
    return dict(zip(df["column_name"], df["column_type"].str.upper(), strict=True))


def require_engine(engine: Any) -> Engine:
    if engine is None:
        raise EngineError("no engine given")
    return cast(Engine, engine)


#: bytes of a CSV file sampled for its mean line length (:func:`csv_rows_estimate`)
ROWS_SAMPLE_BYTES = 1 << 16


def csv_rows_estimate(source: Any) -> int | None:
    """About how many rows a local, uncompressed CSV file or folder holds: its size over the
    mean length of the lines in the first :data:`ROWS_SAMPLE_BYTES` of its first file; None
    for anything else (compressed files, URLs, tables). Only plans work (how many user parts
    the input is parsed into, :mod:`privmob.engine.buckets`): never printed or released."""
    if isinstance(source, CsvFiles):
        source = source.path
    if not isinstance(source, str | Path) or is_url(str(source)):
        return None
    path = Path(source)
    files = [Path(f) for f in _csv_files(path)] if path.is_dir() else [path]
    if not files or any(f.suffix.lower() == ".gz" for f in files):
        return None
    try:
        size = sum(f.stat().st_size for f in files)
        with open(files[0], "rb") as first:
            sample = first.read(ROWS_SAMPLE_BYTES)
    except OSError:
        return None
    lines = sample.count(b"\n")
    if lines == 0:
        return 1
    return max(1, round(size * lines / len(sample)))
