"""Why an input could not be read, said without printing a record.

Bad-input messages name the file, the column, the row and the kind of problem, and the likely
cause: a wrong delimiter, a file that is not UTF-8 text, a file without a header row. They
never show a person's values: a user id, a time or a location is described by its *form*
(``'99/99/9999 99:99'``: digits as 9, letters as a), never by its content, and exact counts of
bad records are kept for ``--verbose`` (:attr:`privmob.errors.PrivmobError.detail`).
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from privmob.surface import spelled

DELIMITERS = ";\t|,"
#: a column name that reads like a value: a number, a date/time, or DuckDB's name for a
#: column of a file read without header (column0, column1, ...)
_VALUE_LIKE = re.compile(
    r"^(-?[0-9]+([.,][0-9]+)?|[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4}.*|column[0-9]+)$"
)
_SCAN_BYTES = 4 << 20


def value_form(value: object, limit: int = 32) -> str:
    """The form of a value without its content: digits become 9, letters a, the rest stays
    (``'2024-13-45 8h'`` -> ``'9999-99-99 9a'``); empty for a missing value."""
    if value is None:
        return "empty"
    text = str(value)
    if not text.strip():
        return "blank"
    form = re.sub(r"[^\W\d_]", "a", re.sub(r"[0-9]", "9", text))
    return repr(form if len(form) <= limit else form[:limit] + "...")


def scrub_values(text: str) -> str:
    """An engine's error text with each quoted value replaced by its form (a conversion error
    quotes the value it could not convert: a time, a coordinate, a user id)."""
    return re.sub(r"'([^']*)'", lambda m: value_form(m.group(1)), text)


def looks_headerless(columns: list[str]) -> bool:
    """Whether the column names read like a row of data (the file has no header row)."""
    if not columns:
        return False
    valuelike = sum(bool(_VALUE_LIKE.match(c.strip())) for c in columns)
    return valuelike >= max(1, len(columns) // 2)


def layout_hint(columns: list[str]) -> tuple[str, str] | None:
    """(problem, hint) when the columns show a layout problem (delimiter, no header)."""
    if len(columns) == 1:
        found = [d for d in DELIMITERS if d in columns[0]]
        if found:
            sep = found[0]
            shown = "'\\t'" if sep == "\t" else repr(sep)
            return (
                f"one column only: the file seems to use {shown} as delimiter",
                f"pass --delimiter {shown} (or leave --delimiter out: it is detected)",
            )
    if looks_headerless(columns):
        return (
            "the first row holds values, not column names: the file seems to have no header row",
            "name its columns in order: "
            + spelled(
                "--no-header --names uid,datetime,lat,lng",
                'names=["uid", "datetime", "lat", "lng"]',
            )
            + ", or add a header row as the file's first line",
        )
    return None


def shown_columns(columns: list[str]) -> str:
    """The column names for a message, unless they are a row of data (then never shown)."""
    if looks_headerless(columns):
        return "(not shown: the first row holds values)"
    return ", ".join(columns)


def encoding_problem(path: str | Path) -> tuple[int, int] | None:
    """(line, byte) of the first byte that is not UTF-8 in a local text file (gzip ok), or
    None. Reads at most the first 4 MB."""
    p = Path(path)
    if not p.is_file() or p.suffix.lower() in {".parquet", ".pq"}:
        return None  # only text (CSV) files have an encoding
    try:
        opener = gzip.open if p.suffix.lower() == ".gz" else open
        with opener(p, "rb") as f:
            data = f.read(_SCAN_BYTES)
    except (OSError, EOFError):  # unreadable, or a damaged gzip stream (gzip_damage)
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start >= len(data) - 4 and len(data) == _SCAN_BYTES:
            return None  # a character cut at the end of the scanned part
        return data.count(b"\n", 0, err.start) + 1, data[err.start]
    return None


def gzip_damage(path: str | Path) -> str | None:
    """What is wrong with a local ``.gz`` file whose gzip stream cannot be read to its end
    (truncated by an interrupted copy, or corrupt), or None. Reads the whole file: only called
    once reading it has failed."""
    p = Path(path)
    if not p.is_file() or p.suffix.lower() != ".gz":
        return None
    try:
        with gzip.open(p, "rb") as f:
            while f.read(1 << 20):
                pass
    except EOFError:
        return "the gzip file is truncated: it ends before its end-of-stream marker"
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        return f"the gzip file is damaged ({exc})"
    return None


def encoding_hint(path: str | Path) -> tuple[str, str] | None:
    """(problem, hint) when a local file cannot be read as text: a damaged gzip stream, or
    bytes that are not UTF-8. None after a signal stopped the run (the read was interrupted,
    the file is not at fault)."""
    from privmob.engine.rundir import interrupted

    if interrupted() is not None:
        return None
    damage = gzip_damage(path)
    if damage is not None:
        return damage, "copy or download the file again (gzip -t FILE tests a copy)"
    found = encoding_problem(path)
    if found is None:
        return None
    line, byte = found
    return (
        f"line {line} is not UTF-8 text (byte 0x{byte:02X}; the file is probably latin-1 "
        "or Windows-1252)",
        "convert it to UTF-8, e.g. iconv -f latin1 -t utf-8 in.csv > out.csv",
    )
