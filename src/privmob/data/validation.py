"""Validation of a loaded input in the engine, in one aggregate pass that also computes the
content fingerprint (:mod:`privmob.data.fingerprint`); the first bad row is looked up only
when something is wrong, and the message names the file, the column, the row number and the
kind of problem, never a person's values (:mod:`privmob.data.diagnose`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.data import diagnose
from privmob.data.fingerprint import (
    content_fingerprint,
    fingerprint_source,
    fingerprint_text,
    legacy_fingerprint,
)
from privmob.data.reading import ident, unreadable
from privmob.engine.base import Engine
from privmob.engine.buckets import bucket_expr, make_private, parquet_view
from privmob.engine.relation import UserParts, new_name
from privmob.errors import EngineError, InputError
from privmob.lazy_imports import lazy_module
from privmob.privacy.people import HASH_DIGITS, SKETCH_SIZE, PeopleSketch, key_halves
from privmob.surface import option

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


@dataclass
class Check:
    """One validity condition: ``bad`` is SQL true for a bad row."""

    column: str
    bad: str
    message: str
    hint: str


@dataclass(frozen=True)
class Validated:
    """What the validation pass learnt besides "valid": the row count and the content
    fingerprint (both only ever written to the ledger, never printed or released), and the
    relation to read the parsed input from (the parsed view, or the input parsed once)."""

    rows: int
    fingerprint: str | None
    relation: str
    #: the people sketch of the input's user ids under a ledger's key (one query, run when a
    #: release binds the input; None where the input has no user id)
    people: Callable[[bytes], PeopleSketch] | None = None
    #: the input's fingerprints under earlier definitions (one more pass, run only where a
    #: ledger holds such fingerprints of another dataset: :mod:`privmob.data.fingerprint`)
    older: Callable[[], tuple[str, ...]] | None = None
    #: the input parsed once into user parts (``parts`` of :func:`validate`), else None
    parts: UserParts | None = None


def validate(
    engine: Engine,
    raw_view: str,
    parsed_view: str,
    display: str,
    checks: list[Check],
    content: Mapping[str, str] | None = None,
    *,
    parse_once: Sequence[str] | None = None,
    scanned: str | None = None,
    parts: tuple[str, int] | None = None,
) -> Validated:
    """Run all checks in one pass; raise on the first failing one, naming the row number of
    its first bad record and the form of the bad value (never a record or a personal value;
    the exact counts go to the error's ``detail``, shown with ``--verbose``).

    ``content`` (canonical name -> SQL expression on the parsed view) adds the content
    fingerprint to the same pass. ``parse_once`` (DuckDB; the input columns the loader reads
    besides the parsed ``_p_`` ones): the input is read and parsed once, into a private file
    (:func:`parsed_once`), and the checks, the fingerprint and every later step read that
    (:attr:`Validated.relation`) instead of parsing the input again.

    ``scanned`` (with ``parse_once``): the same parsed view over a reader whose scanner converts
    the time columns (:func:`privmob.data.times.scanned_times`), written instead where every
    time converts; see :func:`_scanned_once`.

    ``parts`` (with ``parse_once``, DuckDB): (the user id's input column, the number of parts):
    the input parsed once is written in that many files by a hash of the user id
    (:class:`privmob.engine.relation.UserParts`), which user buckets then read as they are."""
    exprs = ["count(*) AS n_rows"] + [f"count_if({c.bad}) AS c{i}" for i, c in enumerate(checks)]
    if content:
        exprs.append(f"{content_fingerprint(engine, content)} AS pm_fingerprint")
    relation, row, user_parts = parsed_view, None, None
    try:
        if parse_once is not None and hasattr(engine, "private_directory"):
            split = parts if parts is not None and parts[1] > 1 else None
            once = _scanned_once(engine, scanned, parse_once, exprs, split) if scanned else None
            if once is None:
                relation, written = _write_parsed(engine, parsed_view, parse_once, split)
            else:
                relation, written, row = once
            if split is not None:
                user_parts = UserParts(written, split[1], relation)
        elif parse_once is not None and hasattr(engine, "cache_once"):
            relation = engine.cache_once(new_name("parsed_once"), _parsed_select(
                engine, parsed_view, parse_once))  # fmt: skip
        if row is None:
            source = fingerprint_source(engine, content, relation) if content else relation
            row = engine.fetch(f"SELECT {', '.join(exprs)} FROM {source}").iloc[0]
    except EngineError:
        raise
    except Exception as exc:
        # the cause may be a byte deep in the file, after the part the sniffer read
        first = diagnose.scrub_values(str(exc).strip().splitlines()[0])
        hint = "check the file format, delimiter and column types"
        raise unreadable(display, display, first, hint=hint) from exc
    n_rows = int(row["n_rows"])
    if n_rows == 0:
        raise InputError(
            "has no records",
            source=display,
            hint="check the file (a header row alone is not enough)",
        )
    for i, c in enumerate(checks):
        n_bad = int(row[f"c{i}"])
        if n_bad:
            number, value = _first_bad_row(engine, parsed_view, c)
            share = "every row" if n_bad == n_rows else "some rows"
            raise InputError(
                f"{c.message} (value of the form {diagnose.value_form(value)}; {share})",
                source=display,
                column=c.column,
                row=number,
                hint=c.hint,
                detail=f"{n_bad} of {n_rows} rows",
            )
    fingerprint = None
    if content:
        fingerprint = fingerprint_text(content, n_rows, row["pm_fingerprint"])
    uid = (content or {}).get("uid")
    people = None if uid is None else people_source(engine, relation, uid)
    older = None
    if content:
        older = _older_source(engine, relation, dict(content), n_rows)
    return Validated(n_rows, fingerprint, relation, people, older, user_parts)


def _older_source(
    engine: Engine, relation: str, content: dict[str, str], n_rows: int
) -> Callable[[], tuple[str, ...]]:
    def older() -> tuple[str, ...]:
        return (legacy_fingerprint(engine, relation, content, n_rows),)

    return older


def people_source(engine: Engine, relation: str, uid: str) -> Callable[[bytes], PeopleSketch]:
    """The people sketch of ``relation``'s distinct user ids (``uid``: the SQL of their
    canonical id text, as in the fingerprint: :func:`privmob.data.fingerprint.identity_text`,
    one id whatever the column's type) under a key: one query over the distinct ids, the same
    keyed hash on both engines (:func:`privmob.privacy.people.keyed_hash` is the reference), the
    :data:`~privmob.privacy.people.SKETCH_SIZE` smallest kept. Nothing of it is printed."""

    def sketch(key: bytes) -> PeopleSketch:
        k1, k2 = key_halves(key)
        d = engine.dialect
        hashed = d.sha256_hex(d.concat(f"'{k2}'", d.sha256_hex(d.concat(f"'{k1}'", "u"))))
        found = engine.fetch(
            f"SELECT substr({hashed}, 1, {HASH_DIGITS}) AS h FROM (SELECT DISTINCT {uid} AS u "
            f"FROM {relation}) AS people_ ORDER BY h LIMIT {SKETCH_SIZE}"
        )
        return PeopleSketch.of_hex(found["h"])

    return sketch


def _scanned_once(
    engine: Any,
    scanned: str,
    keep: Sequence[str],
    exprs: list[str],
    parts: tuple[str, int] | None = None,
) -> tuple[str, Path, pd.Series] | None:
    """The input parsed once from ``scanned`` (:func:`privmob.data.times.scanned_times`; in
    user ``parts`` as :func:`validate`): its view, its path and the validation pass's row read
    from it; None where the parsed view must be written instead:

    * the scanner stopped at a value it cannot convert (DuckDB 2 raises; that error, whose text
      quotes the input line, is dropped whole, and nothing raised later is chained to it;
      any other error, an interrupt by a signal among them, stops the run as it would have);
    * a time is NULL in it: an empty field, or a value the scanner could not convert and left
      NULL (DuckDB 1 does), which only the text tells apart (missing or unparsable, with the
      row). The file of this attempt is deleted at once."""
    columns = set(engine.columns(scanned))
    times = [c for c in columns if f"{c}_raw" in columns and c.startswith("_p_")]
    try:
        relation, path = _write_parsed(engine, scanned, keep, parts)
    except engine.conversion_errors:  # the text, read next, says what the value is
        return None
    nulls = " + ".join(f"count_if({ident(t)} IS NULL)" for t in sorted(times)) or "0"
    row = engine.fetch(
        f"SELECT {', '.join(exprs)}, coalesce({nulls}, 0) AS pm_null_times FROM {relation}"
    )
    if int(row["pm_null_times"].iloc[0]):
        shutil.rmtree(path.parent, ignore_errors=True)
        return None
    return relation, path, row.iloc[0]


#: how the parsed input is written (:func:`parsed_once`): uncompressed. The file is read whole,
#: twice (the validation pass, then the release), and deleted: LZ4 saved 6% of its size for
#: 3-6% more CPU time in the write and nothing in the reads (docs/benchmarks.md, "parse once").
PARSED_FILE_OPTIONS = "COMPRESSION 'uncompressed'"


def parsed_once(
    engine: Any, parsed_view: str, keep: Sequence[str], parts: tuple[str, int] | None = None
) -> str:
    """The parsed input written once (one streaming read of the input, times and coordinates
    parsed once) to a Parquet file in a private directory of the engine (mode 0700 under this
    run's private working directory, removed when the engine closes or the process exits; see
    :meth:`privmob.engine.duckdb.DuckDBEngine.private_directory`); returns a view of it.

    The file holds the ``keep`` input columns and the parsed ``_p_`` columns; a ``_p_*_raw``
    column (a time as written, read only by the checks' ``IS NULL``) is kept as true / NULL.
    The checks' row numbers and bad values are still looked up in ``parsed_view``.

    ``parts`` (the user id's input column, a number of parts): written instead in that many
    files by a hash of the user id, ``parts/pm_part=<p>/*.parquet``
    (:class:`privmob.engine.relation.UserParts`)."""
    return _write_parsed(engine, parsed_view, keep, parts)[0]


def _write_parsed(
    engine: Any, parsed_view: str, keep: Sequence[str], parts: tuple[str, int] | None = None
) -> tuple[str, Path]:
    """:func:`parsed_once`: its view and the path of its file (of the folder of its parts);
    what is not written whole is deleted with its directory."""
    select = _parsed_select(engine, parsed_view, keep)
    options = f"FORMAT parquet, {PARSED_FILE_OPTIONS}"
    if parts is None:
        path = engine.private_directory("privmob-parsed-") / "parsed.parquet"
    else:
        user, count = parts
        path = engine.private_directory("privmob-parsed-") / "parts"
        part = bucket_expr(engine.dialect, count, ident(user))
        select = f"SELECT *, CAST({part} AS INTEGER) AS pm_part FROM ({select}) AS parsed_"
        options += ", PARTITION_BY (pm_part)"
    target = str(path).replace("'", "''")
    try:
        engine.con.execute(f"COPY ({select}) TO '{target}' ({options})")
    except Exception as exc:
        shutil.rmtree(path.parent, ignore_errors=True)
        # reading the input fails with the input's errors (validate names them); writing the
        # file fails naming the file, or for want of room: the working directory's problem
        text = str(exc)
        if str(path.parent) in text or "no space left" in text.lower():
            first = text.strip().splitlines()[0]
            raise EngineError(
                f"writing the parsed input failed: {diagnose.scrub_values(first)}",
                hint=f"check the room in the private working directory ({option('spill_dir')})",
            ) from exc
        raise
    make_private(path)
    view = new_name("parsed_once")
    files = [path] if parts is None else sorted(path.glob("*/*.parquet"))  # none: no rows
    parquet_view(engine, view, files, f"{_parsed_select(engine, parsed_view, keep)} LIMIT 0")
    return view, path


def _parsed_select(engine: Any, parsed_view: str, keep: Sequence[str]) -> str:
    """The query of the input parsed once: the ``keep`` input columns and the parsed ``_p_``
    ones, a ``_p_*_raw`` column (a time as written, read only by the checks' ``IS NULL``) as
    true / NULL."""
    columns = [c for c in engine.columns(parsed_view) if c.startswith("_p_")]
    # an input column mapped to two canonical names is kept once
    select = [ident(c) for c in dict.fromkeys(keep) if c not in columns]
    select += [
        f"nullif({ident(c)} IS NOT NULL, false) AS {ident(c)}" if c.endswith("_raw") else ident(c)
        for c in columns
    ]
    return f"SELECT {', '.join(select)} FROM {parsed_view}"


def _first_bad_row(engine: Engine, parsed_view: str, check: Check) -> tuple[int | None, Any]:
    """(1-based row number in the input's order, bad value) of the first row failing
    ``check``; the number is None where the engine cannot number rows in input order."""
    columns = engine.columns(parsed_view)
    col = ident(check.column) if check.column in columns else "NULL"
    number = engine.dialect.row_number()
    found = engine.fetch(
        f"SELECT _pm_rn, CAST({col} AS VARCHAR) AS _pm_value FROM (SELECT {number} AS _pm_rn, "
        f"* FROM {parsed_view}) AS n_ WHERE {check.bad} ORDER BY _pm_rn LIMIT 1"
    )
    if not len(found):
        return None, None
    value = found["_pm_value"].iloc[0]
    return int(found["_pm_rn"].iloc[0]), None if _is_missing(value) else value


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NaT or (isinstance(value, float) and np.isnan(value))


def parsed_view(engine: Engine, raw: str, parsed: dict[str, str]) -> str:
    view = new_name("parsed")
    extra = ", ".join(f"{expr} AS _p_{name}" for name, expr in parsed.items())
    engine.create_view(view, f"SELECT *, {extra} FROM {raw}")
    return view


def float_expr(col: str) -> str:
    return f"TRY_CAST({ident(col)} AS DOUBLE)"


def coord_checks(lat: str, lng: str) -> list[Check]:
    hint = "coordinates must be WGS84 degrees: lat in [-90, 90], lng in [-180, 180]"
    return [
        Check(
            lat,
            f"_p_{lat} IS NULL OR isnan(_p_{lat}) OR abs(_p_{lat}) > 90",
            "missing, NaN or out-of-range latitude",
            hint,
        ),
        Check(
            lng,
            f"_p_{lng} IS NULL OR isnan(_p_{lng}) OR abs(_p_{lng}) > 180",
            "missing, NaN or out-of-range longitude",
            hint,
        ),
    ]


def uid_check(col: str) -> Check:
    return Check(col, f"{ident(col)} IS NULL", "missing user id", "every record needs a user id")


def relabel(checks: list[Check], cols: Mapping[str, str]) -> None:
    """Show the user's own column names in messages."""
    for c in checks:
        c.column = cols.get(c.column, c.column)
