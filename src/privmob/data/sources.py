"""Loading and validating input records into the engine (SPEC section 0).

Three input shapes, each read from CSV (any delimiter, gzip ok), Parquet, or an in-memory
pandas / Polars / Arrow table, with an optional column mapping for other names:

* trips (one row per trip): ``uid, start_time[, end_time][, tid]`` plus ``origin, destination``
  (tile ids) or ``origin_lat, origin_lng, destination_lat, destination_lng``;
* trip points (dp_mobility_report's shape): ``uid, tid, datetime, lat, lng[, tile_id]``;
* events (CDR, check-ins, GPS fixes): ``uid, datetime`` plus ``lat, lng`` or ``cell_id`` with a
  separate cells table ``cell_id, lat, lng``.

Each loader validates the input in the engine (one aggregate pass; the first bad row is looked
up only when something is wrong) and raises :class:`~privmob.errors.InputError` naming the file,
the column, the row number and the kind of problem, never a person's values
(:mod:`privmob.data.diagnose`). It then exposes a view with the canonical schema:

* trips: ``uid, tid, start_time, end_time, origin, destination``
* trip points: ``uid, tid, time, lat, lng, tile``
* events: ``uid, time, tile`` (+ ``lat, lng`` or ``cell_id`` when given)

Times are local wall-clock TIMESTAMPs in the study time zone: naive inputs are taken to be in
``timezone`` (default UTC); inputs with an offset are converted to it. Tiles are integer indexes
into the tessellation (``-1`` = outside every tile: such records go to the outliers cell, never
dropped). Input files are only read, never modified.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
import pyarrow as pa

from privmob.data import diagnose
from privmob.data.clock import naive_zone
from privmob.engine.base import Engine
from privmob.errors import ConfigError, EngineError, InputError

_counter = itertools.count()

CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".gz"}
OFFSET_RE = r"[0-9]:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)$"
# a zone name after the time ("08:00 Europe/Paris", "08:00 CET"): DuckDB's TIMESTAMP cast would
# silently drop it, so such strings go through TIMESTAMPTZ (unknown names become unparsable)
ZONE_NAME_RE = r"[0-9]\s+[A-Za-z][A-Za-z_]*(/[A-Za-z0-9_+-]+)*$"
# hours and minutes followed by a zone, without seconds ("10:00+02:00", "10:00Z", "10:00 CET")
HHMM_ZONE_RE = r"(^|[ T])[0-9]{1,2}:[0-9]{2}\s*([+-][0-9]|[A-Za-z])"
HHMM_ZONE_SPLIT = r"^(.*?[0-9]{1,2}:[0-9]{2})(\s*([+-][0-9]|[A-Za-z]).*)$"
# epoch seconds written as text (CSV): 9-10 digits, 1973-03-03 to 2286-11-20
EPOCH_RE = r"^-?[0-9]{9,10}([.][0-9]+)?$"
NUMERIC_TIME_TYPES = {"DOUBLE", "FLOAT", "REAL"}


@dataclass
class Loaded:
    """A validated input exposed in the engine as a view with the canonical schema."""

    view: str
    source: str
    shape: str
    engine: Engine
    columns: list[str] = field(default_factory=list)
    # derived relations (e.g. trips built from events): the input they were built from and
    # how, so work can be split upstream (per-user buckets must filter before a window)
    base: Loaded | None = None
    derive: Callable[[Loaded], Loaded] | None = None
    #: content fingerprint and row count of the input, from the validation pass (see
    #: :func:`content_fingerprint`); kept by derived relations, charged with each release
    fingerprint: str | None = None
    rows: int | None = None
    #: the fingerprint of the tessellation the tiles were assigned with (checked by releases)
    tiles: str | None = None

    def derived(self, view: str, shape: str, derive: Callable[[Loaded], Loaded]) -> Loaded:
        """A relation built from this one by ``derive`` (which can rebuild it per bucket)."""
        return Loaded(
            view,
            self.source,
            shape,
            self.engine,
            self.engine.columns(view),
            base=self,
            derive=derive,
            fingerprint=self.fingerprint,
            rows=self.rows,
            tiles=self.tiles,
        )


def _tiles_of(tessellation: Any) -> str | None:
    return getattr(tessellation, "fingerprint", None)


def _new_name(prefix: str) -> str:
    return f"pm_{prefix}_{next(_counter)}"


def describe_source(source: Any) -> str:
    if isinstance(source, str | Path):
        return str(source)
    return f"<{type(source).__module__.split('.')[0]} {type(source).__name__}>"


def check_timezone(timezone: str) -> str:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone '{timezone}'", hint="use an IANA name such as UTC or Europe/Paris"
        ) from exc
    return timezone


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
    view = _new_name("raw")
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
    elif isinstance(source, pd.DataFrame | pa.Table) or hasattr(source, "to_arrow"):
        engine.register(view, source)
    else:
        raise ConfigError(
            f"cannot read input of type {type(source).__name__}",
            hint="give a CSV/Parquet path or a pandas/Polars/Arrow table",
        )
    return view, display


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


def _q(text: str | Path) -> str:
    return str(text).replace("'", "''")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- columns ----------------------------------------------------------------------------------


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


def _types(engine: Engine, view: str) -> dict[str, str]:
    df = engine.fetch(f"DESCRIBE SELECT * FROM {view}")
    return dict(zip(df["column_name"], df["column_type"].str.upper(), strict=True))


def time_expr(col: str, coltype: str, timezone: str, *, duckdb: bool = False) -> str:
    """SQL turning a source column into a local wall-clock TIMESTAMP (NULL if unparsable).

    ``duckdb``: the engine is DuckDB, which reads a UTC instant's wall clock without a zone
    lookup per row (30x faster than ``timezone('UTC', ...)``)."""
    c = _ident(col)
    tz = _q(timezone)
    naive = _q(naive_zone(timezone))  # naive timestamps: read in this zone (privmob.data.clock)

    def local(ts: str) -> str:  # a naive timestamp read in `naive`, as wall clock in `tz`
        if naive == tz:
            return ts
        if duckdb:
            return f"timezone('{tz}', timezone('{naive}', {ts}))"
        return f"from_utc_timestamp(to_utc_timestamp({ts}, '{naive}'), '{tz}')"

    if coltype.startswith("TIMESTAMP WITH TIME ZONE") or coltype == "TIMESTAMPTZ":
        if timezone == "UTC" and duckdb:
            return (
                f"CASE WHEN isfinite({c}) THEN make_timestamp(epoch_us({c})) "
                f"ELSE timezone('UTC', {c}) END"
            )
        return f"timezone('{tz}', {c})"
    if coltype.startswith("TIMESTAMP") or coltype == "DATE":
        return local(f"CAST({c} AS TIMESTAMP)")
    if coltype in INTEGER_TYPES | NUMERIC_TIME_TYPES or coltype.startswith("DECIMAL"):
        return f"timezone('{tz}', to_timestamp(CAST({c} AS DOUBLE)))"
    s = f"trim(CAST({c} AS VARCHAR))"
    # written so that DuckDB and Spark read the same strings alike: "10:00+02:00" -> seconds
    # added ("10:00:00+02:00", Spark needs them before a zone); "08:15 +09:00" -> no space
    # before the offset (DuckDB refuses it). No back-references: their syntax differs.
    hhmm = f"regexp_extract({s}, '{HHMM_ZONE_SPLIT}', "
    with_seconds = (
        f"CASE WHEN regexp_matches({s}, '{HHMM_ZONE_RE}') "
        f"THEN concat({hhmm}1), ':00', {hhmm}2)) ELSE {s} END"
    )
    offset = f"regexp_replace(regexp_replace({with_seconds}, '\\s+[+]', '+'), '\\s+-', '-')"
    return (
        f"CASE WHEN regexp_matches({s}, '({OFFSET_RE})|({ZONE_NAME_RE})') "
        f"THEN timezone('{tz}', TRY_CAST({offset} AS TIMESTAMPTZ)) "
        f"WHEN regexp_matches({s}, '{EPOCH_RE}') "
        f"THEN timezone('{tz}', to_timestamp(TRY_CAST({s} AS DOUBLE))) "
        f"ELSE {local(f'TRY_CAST({s} AS TIMESTAMP)')} END"
    )


def float_expr(col: str) -> str:
    return f"TRY_CAST({_ident(col)} AS DOUBLE)"


# -- validation --------------------------------------------------------------------------------


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
    fingerprint (both only ever written to the ledger, never printed or released)."""

    rows: int
    fingerprint: str | None


def content_fingerprint(engine: Engine, content: Mapping[str, str]) -> str:
    """An aggregate SQL expression (text) of the input's content fingerprint, for the
    validation pass: the sum over rows of a 64-bit hash of the row's canonical values
    (``content``: canonical name -> SQL expression). Order-free and independent of the file's
    name, format and column names; see :func:`fingerprint_text`."""
    row_hash = engine.dialect.keyed_hash(0, *content.values())
    # as text: a DECIMAL would reach pandas as a float and lose its low digits
    return f"CAST(sum(CAST({row_hash} AS DECIMAL(38, 0))) AS VARCHAR)"


def fingerprint_text(engine: Engine, content: Mapping[str, str], n_rows: int, total: Any) -> str:
    """The fingerprint: SHA-256 of the engine's hash family, the canonical columns, the row
    count and the row-hash sum (a 64-bit row hash is an accident detector, not a defence
    against someone crafting a collision)."""
    import hashlib

    text = f"privmob-input-v1|{engine.dialect.name}|{','.join(content)}|{n_rows}|{total}"
    return hashlib.sha256(text.encode()).hexdigest()


def identity_text(col: str) -> str:
    """An identifier column as text, so that 7 read as an integer from CSV and "7" from
    Parquet fingerprint alike."""
    return f"CAST({_ident(col)} AS VARCHAR)"


def validate(
    engine: Engine,
    raw_view: str,
    parsed_view: str,
    display: str,
    checks: list[Check],
    content: Mapping[str, str] | None = None,
) -> Validated:
    """Run all checks in one pass; raise on the first failing one, naming the row number of
    its first bad record and the form of the bad value (never a record or a personal value;
    the exact counts go to the error's ``detail``, shown with ``--verbose``).

    ``content`` (canonical name -> SQL expression on the parsed view) adds the content
    fingerprint to the same pass."""
    exprs = ["count(*) AS n_rows"] + [f"count_if({c.bad}) AS c{i}" for i, c in enumerate(checks)]
    if content:
        exprs.append(f"{content_fingerprint(engine, content)} AS pm_fingerprint")
    try:
        row = engine.fetch(f"SELECT {', '.join(exprs)} FROM {parsed_view}").iloc[0]
    except Exception as exc:
        first = str(exc).strip().splitlines()[0]
        cause = None if is_url(display) else diagnose.encoding_hint(display)
        if cause is not None:  # a byte deep in the file, after the part the sniffer read
            raise InputError(cause[0], source=display, hint=cause[1]) from exc
        raise InputError(
            f"cannot be read: {diagnose.scrub_values(first)}",
            source=display,
            hint="check the file format, delimiter and column types",
        ) from exc
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
        fingerprint = fingerprint_text(engine, content, n_rows, row["pm_fingerprint"])
    return Validated(n_rows, fingerprint)


def _first_bad_row(engine: Engine, parsed_view: str, check: Check) -> tuple[int | None, Any]:
    """(1-based row number in the input's order, bad value) of the first row failing
    ``check``; the number is None where the engine cannot number rows in input order."""
    columns = engine.columns(parsed_view)
    col = _ident(check.column) if check.column in columns else "NULL"
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


def _parsed_view(engine: Engine, raw: str, parsed: dict[str, str]) -> str:
    view = _new_name("parsed")
    extra = ", ".join(f"{expr} AS _p_{name}" for name, expr in parsed.items())
    engine.create_view(view, f"SELECT *, {extra} FROM {raw}")
    return view


def native_time(coltype: str) -> bool:
    """A column already of a time type: :func:`time_expr` casts or shifts it, never to NULL."""
    return coltype.startswith("TIMESTAMP") or coltype == "DATE"


def time_checks(col: str, coltype: str = "") -> list[Check]:
    """Missing and unparsable times. A native time column cannot be unparsable: that check
    (which converts every row, e.g. through the ICU time zone code) is left out."""
    checks = [Check(col, f"_p_{col}_raw IS NULL", "missing timestamp", "every record needs a time")]
    if not native_time(coltype):
        checks.append(
            Check(
                col,
                f"_p_{col} IS NULL AND _p_{col}_raw IS NOT NULL",
                "unparsable timestamp",
                "use ISO 8601 (2024-01-31 08:15:00, optionally with +01:00 or Z) or epoch seconds",
            )
        )
    return checks


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
    return Check(col, f"{_ident(col)} IS NULL", "missing user id", "every record needs a user id")


# -- tiles -------------------------------------------------------------------------------------


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


def tile_index(
    engine: Engine, tessellation: Any, column: str, coltype: str, alias: str
) -> tuple[str, str]:
    """SQL mapping a tile-id column to the tile index (-1 if unknown): (expression, join).

    Integer ids forming a contiguous range map arithmetically (no join); other integer ids
    join on BIGINT; anything else joins on the id's text.
    """
    ids = list(tessellation.tile_ids)
    int_ids = all(isinstance(t, int | np.integer) for t in ids)
    col = f"e.{_ident(column)}"
    if int_ids and coltype in INTEGER_TYPES:
        lo, hi = int(min(ids)), int(max(ids))
        if [int(t) for t in ids] == list(range(lo, hi + 1)):
            expr = (
                f"CASE WHEN {col} BETWEEN {lo} AND {hi} THEN CAST({col} - {lo} AS INTEGER) "
                "ELSE -1 END"
            )
            return expr, ""
        return _join_tile_keys(engine, [int(t) for t in ids], pa.int64(), "BIGINT", col, alias)
    if int_ids and (coltype in NUMERIC_TIME_TYPES or coltype.startswith("DECIMAL")):
        # integer ids stored as floats (3.0): compare numbers, not their text ("3.0" != "3")
        return _join_tile_keys(engine, [float(t) for t in ids], pa.float64(), "DOUBLE", col, alias)
    return _join_tile_keys(engine, [str(t) for t in ids], pa.string(), "VARCHAR", col, alias)


def _join_tile_keys(
    engine: Engine, keys: list[Any], arrow_type: pa.DataType, sql_type: str, col: str, alias: str
) -> tuple[str, str]:
    """Register ``tile_key -> tile index`` and LEFT JOIN ``col`` (cast to ``sql_type``) on it."""
    name = _new_name("tiles")
    engine.register(
        name,
        pa.table(
            {
                "tile_key": pa.array(keys, arrow_type),
                "tile": pa.array(np.arange(len(keys), dtype=np.int32)),
            }
        ),
    )
    return (
        f"COALESCE({alias}.tile, -1)",
        f"LEFT JOIN {name} AS {alias} ON CAST({col} AS {sql_type}) = {alias}.tile_key",
    )


def _edge_bin_sql(x: str, edges: np.ndarray, dialect: Any) -> tuple[str, str] | None:
    """SQL for :func:`privmob.data.tessellation._edge_bin` (bin i = (e_i, e_i+1], bin 0
    closed, -1 outside or NaN/NULL) in two steps: (guess, fix). ``guess`` is an arithmetic
    bin (-1 outside); ``fix`` corrects it once against the exact edges, reading the guess
    from column ``{x}_g``. None when the edges are too irregular for one correction."""
    e = np.asarray(edges, dtype=np.float64)
    n = len(e) - 1
    scale = n / float(e[-1] - e[0])
    # the guess for a value in bin i lies in i-1..i+1 when every edge is within 1/4 bin of
    # its place on the uniform grid (float error of the guess is far below that)
    if not np.all(np.abs((e - e[0]) * scale - np.arange(n + 1)) < 0.25):
        return None
    lo, hi = f"CAST('{float(e[0])!r}' AS DOUBLE)", f"CAST('{float(e[-1])!r}' AS DOUBLE)"
    guess = (
        f"CASE WHEN {x} >= {lo} AND {x} <= {hi} THEN least(greatest(CAST(floor(({x} - {lo}) "
        f"* CAST('{scale!r}' AS DOUBLE)) AS BIGINT), 0), {n - 1}) ELSE -1 END"
    )
    g = "{g}"
    at = dialect.double_at
    fix = (
        f"CASE WHEN {g} < 0 THEN -1 "
        f"WHEN {g} > 0 AND {x} <= {at(list(e), g)} THEN {g} - 1 "
        f"WHEN {g} < {n - 1} AND {x} > {at(list(e), f'{g} + 1')} THEN {g} + 1 "
        f"ELSE {g} END"
    )
    return guess, fix


def grid_tiles_sql(grid: Any, relation: str, lng: str, lat: str, dialect: Any) -> str | None:
    """``SELECT *, <tile index> AS _pm_tile FROM relation``: the tile index of (lng, lat) on a
    regular grid, exactly as :meth:`privmob.data.tessellation.GridSpec.assign` gives it (each
    bin computed once per row); None if the edges are too irregular."""
    col = _edge_bin_sql(lng, grid.lng_edges, dialect)
    row = _edge_bin_sql(lat, grid.lat_edges, dialect)
    if col is None or row is None:
        return None
    return (
        f"SELECT s2_.*, CASE WHEN _pm_c < 0 OR _pm_r < 0 THEN -1 "
        f"ELSE CAST(_pm_r * {grid.ncols} + _pm_c AS INTEGER) END AS _pm_tile FROM ("
        f"SELECT s1_.*, {col[1].format(g='_pm_gc')} AS _pm_c, "
        f"{row[1].format(g='_pm_gr')} AS _pm_r FROM ("
        f"SELECT *, {col[0]} AS _pm_gc, {row[0]} AS _pm_gr FROM {relation}) AS s1_) AS s2_"
    )


def coordinate_tiles_sql(engine: Engine, tessellation: Any, parsed_view: str) -> tuple[str, str]:
    """(source, tile expression) for the tile index of ``_p_lng, _p_lat`` in
    ``parsed_view``: ``source`` is the FROM clause (alias ``e``). The distinct coordinates
    are assigned with :func:`coordinate_tiles` and the result joined back.
    """
    lookup = coordinate_tiles(
        engine, tessellation, f"SELECT _p_lng AS lng, _p_lat AS lat FROM {parsed_view}"
    )
    return (
        f"{parsed_view} AS e LEFT JOIN {lookup} AS t ON e._p_lng = t.lng AND e._p_lat = t.lat",
        "COALESCE(t.tile, -1)",
    )


def coordinate_tiles(engine: Engine, tessellation: Any, pairs_sql: str) -> str:
    """Assign tiles to the distinct (lng, lat) pairs of ``pairs_sql``; returns a lookup view.

    Point-in-polygon runs vectorised on the distinct coordinates (GEOS via the tessellation)
    and the result is joined back in the engine.
    """
    df = engine.fetch(f"SELECT DISTINCT lng, lat FROM ({pairs_sql}) AS p_")
    lng = df["lng"].to_numpy(dtype=np.float64)
    lat = df["lat"].to_numpy(dtype=np.float64)
    tiles = np.asarray(tessellation.assign(lng, lat), dtype=np.int32)
    name = _new_name("coordtiles")
    engine.register(name, pa.table({"lng": lng, "lat": lat, "tile": tiles}))
    return name


# -- loaders -----------------------------------------------------------------------------------


def load_events(
    source: Any,
    *,
    engine: Engine,
    tessellation: Any,
    cells: Any = None,
    columns: Mapping[str, str] | None = None,
    cell_columns: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    delimiter: str | None = None,
    header: bool = True,
    names: list[str] | None = None,
) -> Loaded:
    """Events (``uid, datetime`` + ``lat, lng`` or ``cell_id`` with ``cells``) → canonical view.

    Canonical columns: ``uid, time, tile`` plus ``lat, lng`` (coordinates) or ``cell_id``.
    An event whose cell id is not in ``cells`` gets tile -1 (the outliers cell).
    """
    check_timezone(timezone)
    raw, display = read_raw(engine, source, delimiter=delimiter, header=header, names=names)
    use_cells = cells is not None
    required = ["uid", "datetime"] + (["cell_id"] if use_cells else ["lat", "lng"])
    cols = resolve_columns(engine, raw, display, required=required, optional=[], mapping=columns)
    types = _types(engine, raw)
    fast = engine.dialect.name == "duckdb"  # UTC instants without a zone lookup per row
    parsed = {
        "datetime": time_expr(cols["datetime"], types[cols["datetime"]], timezone, duckdb=fast),
        "datetime_raw": _ident(cols["datetime"]),
    }
    checks = [uid_check(cols["uid"]), *time_checks("datetime", types[cols["datetime"]])]
    if not use_cells:
        parsed |= {"lat": float_expr(cols["lat"]), "lng": float_expr(cols["lng"])}
        checks += coord_checks("lat", "lng")
    pview = _parsed_view(engine, raw, parsed)
    _relabel(checks, cols)
    content = {"uid": identity_text(cols["uid"]), "time": "_p_datetime"}
    content |= (
        {"cell_id": identity_text(cols["cell_id"])}
        if use_cells
        else {"lat": "_p_lat", "lng": "_p_lng"}
    )
    checked = validate(engine, raw, pview, display, checks, content)
    view = _new_name("events")
    if use_cells:
        cell_view = load_cells(
            cells, engine=engine, tessellation=tessellation, columns=cell_columns
        )
        cid = f"CAST(e.{_ident(cols['cell_id'])} AS VARCHAR)"
        on = f"{cid} = c.cell_key"
        if types[cols["cell_id"]] in INT64_SAFE_TYPES and _has_int_keys(engine, cell_view):
            # integer ids on both sides: the same match as on their text, on integers
            on = f"CAST(e.{_ident(cols['cell_id'])} AS BIGINT) = c.cell_int"
        # an event at a cell id absent from the cells table is at no known place: tile -1,
        # the noisy outliers cell (as a point outside the tessellation), never a refusal of
        # the whole input (one neighbour must not decide whether there is a release)
        engine.create_view(
            view,
            (
                f"SELECT e.{_ident(cols['uid'])} AS uid, e._p_datetime AS time, "
                f"COALESCE(c.tile, -1) AS tile, {cid} AS cell_id "
                f"FROM {pview} AS e LEFT JOIN {cell_view} AS c ON {on}"
            ),
        )
    else:
        lookup = coordinate_tiles(
            engine, tessellation, f"SELECT _p_lng AS lng, _p_lat AS lat FROM {pview}"
        )
        engine.create_view(
            view,
            (
                f"SELECT e.{_ident(cols['uid'])} AS uid, e._p_datetime AS time, t.tile AS tile, "
                f"e._p_lat AS lat, e._p_lng AS lng FROM {pview} AS e JOIN {lookup} AS t "
                f"ON e._p_lng = t.lng AND e._p_lat = t.lat"
            ),
        )
    return Loaded(
        view,
        display,
        "events",
        engine,
        engine.columns(view),
        fingerprint=checked.fingerprint,
        rows=checked.rows,
        tiles=_tiles_of(tessellation),
    )


def _has_int_keys(engine: Engine, cell_view: str) -> bool:
    """True when every cell has an integer key (the cells' id column is an integer type)."""
    row = engine.fetch(f"SELECT count(*) AS n, count(cell_int) AS k FROM {cell_view}").iloc[0]
    return int(row["k"]) == int(row["n"])


def load_cells(
    cells: Any, *, engine: Engine, tessellation: Any, columns: Mapping[str, str] | None = None
) -> str:
    """Cells (towers) ``cell_id, lat, lng`` → view ``cell_key (VARCHAR), lat, lng, cell_int,
    tile`` (``cell_int``: the id as BIGINT when the id column is an integer type, else NULL)."""
    raw, display = read_raw(engine, cells)
    cols = resolve_columns(
        engine, raw, display, required=["cell_id", "lat", "lng"], optional=[], mapping=columns
    )
    pview = _parsed_view(
        engine, raw, {"lat": float_expr(cols["lat"]), "lng": float_expr(cols["lng"])}
    )
    checks = [
        Check(
            cols["cell_id"],
            f"{_ident(cols['cell_id'])} IS NULL",
            "missing cell id",
            "every cell needs an id",
        ),
        *coord_checks("lat", "lng"),
    ]
    _relabel(checks, cols)
    validate(engine, raw, pview, display, checks)
    key = f"CAST({_ident(cols['cell_id'])} AS VARCHAR)"
    dup = engine.fetch(
        f"SELECT {key} AS k, count(*) AS n FROM {pview} GROUP BY 1 HAVING count(*) > 1 LIMIT 1"
    )
    if len(dup):
        raise InputError(
            f"duplicate cell id '{dup.iloc[0, 0]!s}'",
            source=display,
            column=cols["cell_id"],
            example={cols["cell_id"]: dup.iloc[0, 0]},
            hint="each cell id must appear once in the cells table",
        )
    # integer ids also get an integer key: events join on it, much faster than on text
    int_key = _types(engine, raw)[cols["cell_id"]] in INT64_SAFE_TYPES
    cell_int = f"CAST({_ident(cols['cell_id'])} AS BIGINT)" if int_key else "CAST(NULL AS BIGINT)"
    df = engine.fetch(
        f"SELECT {key} AS cell_key, _p_lat AS lat, _p_lng AS lng, {cell_int} AS cell_int "
        f"FROM {pview}"
    )
    df["tile"] = np.asarray(
        tessellation.assign(df["lng"].to_numpy(), df["lat"].to_numpy()), dtype=np.int32
    )
    view = _new_name("cells")
    engine.register(view, pa.Table.from_pandas(df, preserve_index=False))
    return view


def load_trip_points(
    source: Any,
    *,
    engine: Engine,
    tessellation: Any,
    columns: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    delimiter: str | None = None,
) -> Loaded:
    """Trip points (``uid, tid, datetime, lat, lng[, tile_id]``) → canonical view
    ``uid, tid, time, lat, lng, tile``."""
    check_timezone(timezone)
    raw, display = read_raw(engine, source, delimiter=delimiter)
    cols = resolve_columns(
        engine,
        raw,
        display,
        required=["uid", "tid", "datetime", "lat", "lng"],
        optional=["tile_id"],
        mapping=columns,
    )
    types = _types(engine, raw)
    pview = _parsed_view(
        engine,
        raw,
        {
            "datetime": time_expr(
                cols["datetime"],
                types[cols["datetime"]],
                timezone,
                duckdb=engine.dialect.name == "duckdb",
            ),
            "datetime_raw": _ident(cols["datetime"]),
            "lat": float_expr(cols["lat"]),
            "lng": float_expr(cols["lng"]),
        },
    )
    checks = [
        uid_check(cols["uid"]),
        Check(
            cols["tid"],
            f"{_ident(cols['tid'])} IS NULL",
            "missing trip id",
            "every point needs the id of its trip",
        ),
        *time_checks("datetime", types[cols["datetime"]]),
        *coord_checks("lat", "lng"),
    ]
    _relabel(checks, cols)
    content = {
        "uid": identity_text(cols["uid"]),
        "tid": identity_text(cols["tid"]),
        "time": "_p_datetime",
        "lat": "_p_lat",
        "lng": "_p_lng",
    }
    if "tile_id" in cols:
        content["tile_id"] = identity_text(cols["tile_id"])
    checked = validate(engine, raw, pview, display, checks, content)
    view = _new_name("points")
    canonical = (
        f"e.{_ident(cols['uid'])} AS uid, e.{_ident(cols['tid'])} AS tid, "
        "e._p_datetime AS time, e._p_lat AS lat, e._p_lng AS lng"
    )
    grid = getattr(tessellation, "grid", None)
    regular = grid is not None and grid_tiles_sql(grid, "p_", "lng", "lat", engine.dialect)
    if "tile_id" not in cols and regular:
        # tiles are arithmetic on the coordinates: the points are derived from the parsed
        # input, so user buckets filter before the tile arithmetic, not after it
        base = _new_name("untiled")
        engine.create_view(base, f"SELECT {canonical} FROM {pview} AS e")
        untiled = Loaded(
            base,
            display,
            "trip_points_untiled",
            engine,
            engine.columns(base),
            fingerprint=checked.fingerprint,
            rows=checked.rows,
            tiles=_tiles_of(tessellation),
        )
        return _grid_tiled_points(untiled, grid)
    if "tile_id" in cols:
        tile_expr, tile_sql = tile_index(
            engine, tessellation, cols["tile_id"], types[cols["tile_id"]], "t"
        )
        source = f"{pview} AS e {tile_sql}"
    else:
        source, tile_expr = coordinate_tiles_sql(engine, tessellation, pview)
    engine.create_view(view, f"SELECT {canonical}, {tile_expr} AS tile FROM {source}")
    return Loaded(
        view,
        display,
        "trip_points",
        engine,
        engine.columns(view),
        fingerprint=checked.fingerprint,
        rows=checked.rows,
        tiles=_tiles_of(tessellation),
    )


def _grid_tiled_points(untiled: Loaded, grid: Any) -> Loaded:
    """Canonical trip points with ``tile`` computed on a regular grid from ``untiled``
    (``uid, tid, time, lat, lng``); rebuilt per user bucket by :mod:`privmob.engine.buckets`."""
    eng = untiled.engine
    sql = grid_tiles_sql(grid, untiled.view, "lng", "lat", eng.dialect)
    view = _new_name("points")
    eng.create_view(view, f"SELECT uid, tid, time, lat, lng, _pm_tile AS tile FROM ({sql}) AS g_")
    return untiled.derived(view, "trip_points", lambda b: _grid_tiled_points(b, grid))


def trips_from_points(points: Loaded) -> Loaded:
    """One row per trip from trip points: first point = origin, last point = destination."""
    view = _new_name("trips")
    points.engine.create_view(
        view,
        (
            "SELECT uid, tid, min(time) AS start_time, max(time) AS end_time, "
            "arg_min(tile, time) AS origin, arg_max(tile, time) AS destination "
            f"FROM {points.view} GROUP BY uid, tid"
        ),
    )
    return points.derived(view, "trips", trips_from_points)


def load_trips(
    source: Any,
    *,
    engine: Engine,
    tessellation: Any,
    columns: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    delimiter: str | None = None,
    uid_per_trip: bool = False,
) -> Loaded:
    """One-row trips → canonical view ``uid, tid, start_time, end_time, origin, destination``.

    Origin and destination are tile ids (``origin``, ``destination``) or coordinates
    (``origin_lat, origin_lng, destination_lat, destination_lng``, or the bike-share names of
    :mod:`privmob.data.coordinate_trips`); tile ids not in the tessellation and coordinates
    outside it become ``-1`` (outliers). ``uid_per_trip`` (trip-level releases only): an
    input without a ``uid`` column makes each trip its own unit (uid = the trip id).
    """
    from privmob.data.coordinate_trips import NO_UID_HINT, coordinate_trip_columns

    check_timezone(timezone)
    raw, display = read_raw(engine, source, delimiter=delimiter)
    available = {c.lower() for c in engine.columns(raw)}
    mapping = dict(columns or {})
    if "origin" not in mapping and "origin" not in available:
        mapping = coordinate_trip_columns(engine.columns(raw), mapping) or mapping
    no_uid = "uid" not in mapping and "uid" not in available
    if no_uid and not uid_per_trip and "origin_lat" in mapping:
        raise InputError(
            f"missing column 'uid' (columns found: {', '.join(engine.columns(raw))})",
            source=display,
            column="uid",
            hint=NO_UID_HINT,
        )
    uid_per_trip = uid_per_trip and no_uid
    by_coords = (
        "origin" not in mapping
        and "origin" not in available
        and ("origin_lat" in available or "origin_lat" in mapping)
    )
    ends = (
        ["origin_lat", "origin_lng", "destination_lat", "destination_lng"]
        if by_coords
        else ["origin", "destination"]
    )
    cols = resolve_columns(
        engine,
        raw,
        display,
        required=[*([] if uid_per_trip else ["uid"]), "start_time", *ends],
        optional=["end_time", "tid"],
        mapping=mapping,
    )
    types = _types(engine, raw)
    fast = engine.dialect.name == "duckdb"  # UTC instants without a zone lookup per row
    parsed = {
        "start_time": time_expr(
            cols["start_time"], types[cols["start_time"]], timezone, duckdb=fast
        ),
        "start_time_raw": _ident(cols["start_time"]),
    }
    checks = [*time_checks("start_time", types[cols["start_time"]])]
    if not uid_per_trip:
        checks.insert(0, uid_check(cols["uid"]))
    if "end_time" in cols:
        parsed |= {
            "end_time": time_expr(cols["end_time"], types[cols["end_time"]], timezone, duckdb=fast),
            "end_time_raw": _ident(cols["end_time"]),
        }
        if not native_time(types[cols["end_time"]]):
            checks.append(
                Check(
                    "end_time",
                    "_p_end_time IS NULL AND _p_end_time_raw IS NOT NULL",
                    "unparsable timestamp",
                    "use ISO 8601 or epoch seconds",
                )
            )
    if by_coords:
        for end in ("origin", "destination"):
            parsed |= {
                f"{end}_lat": float_expr(cols[f"{end}_lat"]),
                f"{end}_lng": float_expr(cols[f"{end}_lng"]),
            }
            checks += coord_checks(f"{end}_lat", f"{end}_lng")
    else:
        checks += [
            Check(
                cols[e],
                f"{_ident(cols[e])} IS NULL",
                f"missing {e} tile id",
                "every trip needs an origin and a destination",
            )
            for e in ends
        ]
    pview = _parsed_view(engine, raw, parsed)
    _relabel(checks, cols)
    content = {} if uid_per_trip else {"uid": identity_text(cols["uid"])}
    content["start_time"] = "_p_start_time"
    if "end_time" in cols:
        content["end_time"] = "_p_end_time"
    if "tid" in cols:
        content["tid"] = identity_text(cols["tid"])
    for e in ends:
        content[e] = f"_p_{e}" if by_coords else identity_text(cols[e])
    checked = validate(engine, raw, pview, display, checks, content)
    tid = _ident(cols["tid"]) if "tid" in cols else "row_number() OVER ()"
    uid = f"e.{_ident(cols['uid'])}" if not uid_per_trip else "0"  # replaced by tid below
    end = "_p_end_time" if "end_time" in cols else "_p_start_time"
    view = _new_name("trips")
    if by_coords:
        lookup = coordinate_tiles(
            engine,
            tessellation,
            (
                f"SELECT _p_origin_lng AS lng, _p_origin_lat AS lat FROM {pview} UNION "
                f"SELECT _p_destination_lng, _p_destination_lat FROM {pview}"
            ),
        )
        engine.create_view(
            view,
            (
                f"SELECT {uid} AS uid, {tid} AS tid, e._p_start_time AS "
                f"start_time, e.{end} AS end_time, o.tile AS origin, d.tile AS destination "
                f"FROM {pview} AS e "
                f"JOIN {lookup} AS o ON e._p_origin_lng = o.lng AND e._p_origin_lat = o.lat "
                f"JOIN {lookup} AS d ON e._p_destination_lng = d.lng "
                f"AND e._p_destination_lat = d.lat"
            ),
        )
    else:
        o_expr, o_join = tile_index(
            engine, tessellation, cols["origin"], types[cols["origin"]], "o"
        )
        d_expr, d_join = tile_index(
            engine, tessellation, cols["destination"], types[cols["destination"]], "d"
        )
        engine.create_view(
            view,
            (
                f"SELECT {uid} AS uid, {tid} AS tid, "
                f"e._p_start_time AS start_time, e.{end} AS end_time, "
                f"{o_expr} AS origin, {d_expr} AS destination "
                f"FROM {pview} AS e {o_join} {d_join}"
            ),
        )
    if uid_per_trip:  # each trip its own unit: uid = tid (computed once, then copied)
        per_trip = _new_name("trips")
        engine.create_view(
            per_trip,
            f"SELECT tid AS uid, tid, start_time, end_time, origin, destination FROM {view}",
        )
        view = per_trip
    return Loaded(
        view,
        display,
        "trips",
        engine,
        engine.columns(view),
        fingerprint=checked.fingerprint,
        rows=checked.rows,
        tiles=_tiles_of(tessellation),
    )


def _relabel(checks: list[Check], cols: Mapping[str, str]) -> None:
    """Show the user's own column names in messages."""
    for c in checks:
        c.column = cols.get(c.column, c.column)


def require_engine(engine: Any) -> Engine:
    if engine is None:
        raise EngineError("no engine given")
    return engine
