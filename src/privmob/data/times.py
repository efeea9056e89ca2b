"""Time columns: the study time zone, and SQL turning a source column (text with or without an
offset or a zone name, epoch seconds, native timestamps) into a local wall-clock TIMESTAMP.

Naive inputs are taken to be in ``timezone``; inputs with an offset are converted to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from privmob.data.fingerprint import Canonical, time_text
from privmob.data.reading import INTEGER_TYPES, NUMERIC_TIME_TYPES, ident, quote
from privmob.data.validation import Check, parsed_view
from privmob.engine.base import Engine
from privmob.engine.dialect import Dialect
from privmob.errors import ConfigError
from privmob.surface import spelled

OFFSET_RE = r"[0-9]:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)$"


# a zone name after the time ("08:00 Europe/Paris", "08:00 CET"): DuckDB's TIMESTAMP cast would
# silently drop it, so such strings go through TIMESTAMPTZ (unknown names become unparsable)
ZONE_NAME_RE = r"[0-9]\s+[A-Za-z][A-Za-z_]*(/[A-Za-z0-9_+-]+)*$"


# hours and minutes followed by a zone, without seconds ("10:00+02:00", "10:00Z", "10:00 CET")
HHMM_ZONE_RE = r"(^|[ T])[0-9]{1,2}:[0-9]{2}\s*([+-][0-9]|[A-Za-z])"


HHMM_ZONE_SPLIT = r"^(.*?[0-9]{1,2}:[0-9]{2})(\s*([+-][0-9]|[A-Za-z]).*)$"


# epoch seconds written as text (CSV): 9-10 digits, 1973-03-03 to 2286-11-20
EPOCH_RE = r"^-?[0-9]{9,10}([.][0-9]+)?$"


# plain ISO 8601 (DuckDB's fast path): date, T or one space, hours, minutes and seconds, an
# optional fraction after a dot, then nothing (naive) or a Z or +HH[[:]MM] offset (zoned); no
# spaces around. On such a string the routing expression below takes one known branch and changes
# nothing in the string, so a plain cast gives the same value at a fraction of the cost.
PLAIN_NAIVE_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.][0-9]+)?$"
PLAIN_ZONED_RE = PLAIN_NAIVE_RE.removesuffix("$") + r"(?:[zZ]|[+-][0-9]{2}(?::?[0-9]{2})?)$"


def check_timezone(timezone: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # on first use (issue 43)

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone '{timezone}'", hint="use an IANA name such as UTC or Europe/Paris"
        ) from exc
    return timezone


def time_expr(
    col: str, coltype: str, timezone: str, *, dialect: Dialect, plain_iso: bool = True
) -> str:
    """SQL turning a source column into a local wall-clock TIMESTAMP (NULL if unparsable), in
    the engine's ``dialect``.

    A dialect with :attr:`~privmob.engine.dialect.Dialect.fast_utc_instants` (DuckDB) reads a
    UTC instant's wall clock without a zone lookup per row (30x faster than
    ``timezone('UTC', ...)``); one that :attr:`~privmob.engine.dialect.Dialect.casts_plain_iso`
    (DuckDB) reads text in the plain ISO forms (:data:`PLAIN_NAIVE_RE`,
    :data:`PLAIN_ZONED_RE`) with a plain cast instead of the routing expression (3-4x faster
    on strings with an offset), unless ``plain_iso`` is False (the tests compare the two)."""
    c = ident(col)
    tz = quote(timezone)
    naive = quote(naive_zone(timezone))  # naive timestamps: read in this zone (data.times)

    def local(ts: str) -> str:  # a naive timestamp read in `naive`, as wall clock in `tz`
        if naive == tz:
            return ts
        return dialect.wall_clock(ts, naive, tz)

    if instant_type(coltype):
        if timezone == "UTC" and dialect.fast_utc_instants:
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
    routed = _routed_text_time(s, tz, local)
    if not dialect.casts_plain_iso or not plain_iso:
        return routed
    # DuckDB: plain ISO strings (the usual CSV case) skip the routing, for the same value
    # (tests/data/test_times.py compares the two on offsets, fractions, DST edges, naive input)
    v = f"CAST({c} AS VARCHAR)"
    zoned = f"TRY_CAST({v} AS TIMESTAMPTZ)"
    instant = f"make_timestamp(epoch_us({zoned}))" if tz == "UTC" else f"timezone('{tz}', {zoned})"
    # one anchored regular expression per row for a plain string (the second one only for
    # rows that fail the first), against three unanchored ones and the rewriting
    return (
        f"CASE WHEN regexp_full_match({v}, '{PLAIN_ZONED_RE}') THEN {instant} "
        f"WHEN regexp_full_match({v}, '{PLAIN_NAIVE_RE}') "
        f"THEN {local(f'TRY_CAST({v} AS TIMESTAMP)')} "
        f"ELSE {routed} END"
    )


def _routed_text_time(s: str, tz: str, local: Callable[[str], str]) -> str:
    """Any text time ``s`` (trimmed) read alike by DuckDB and Spark: offsets and zone names,
    epoch seconds, naive wall clock (read by ``local``).

    A text that reaches the naive branch but that the engine's zoned cast (DuckDB TIMESTAMPTZ,
    Spark TIMESTAMP_LTZ) reads as another instant than its naive cast (DuckDB TIMESTAMP, Spark
    TIMESTAMP_NTZ; at UTC, the sessions' zone) carries a zone that the naive cast drops without
    a word ("08:00:00 GMT+2", "08:00:00+02:00:30"): it is read as the instant the zoned cast
    gives (NULL, so unparsable, where that cast fails), as DuckDB's CSV scanner reads it
    (:func:`scanned_times`)."""
    # written so that DuckDB and Spark read the same strings alike: "10:00+02:00" -> seconds
    # added ("10:00:00+02:00", Spark needs them before a zone); "08:15 +09:00" -> no space
    # before the offset (DuckDB refuses it). No back-references: their syntax differs.
    hhmm = f"regexp_extract({s}, '{HHMM_ZONE_SPLIT}', "
    with_seconds = (
        f"CASE WHEN regexp_matches({s}, '{HHMM_ZONE_RE}') "
        f"THEN concat({hhmm}1), ':00', {hhmm}2)) ELSE {s} END"
    )
    offset = f"regexp_replace(regexp_replace({with_seconds}, '\\s+[+]', '+'), '\\s+-', '-')"
    zoned = f"TRY_CAST({s} AS TIMESTAMPTZ)"
    naive = (
        f"CASE WHEN {zoned} IS DISTINCT FROM CAST(TRY_CAST({s} AS TIMESTAMP) AS TIMESTAMPTZ) "
        f"THEN timezone('{tz}', {zoned}) ELSE {local(f'TRY_CAST({s} AS TIMESTAMP)')} END"
    )
    return (
        f"CASE WHEN regexp_matches({s}, '({OFFSET_RE})|({ZONE_NAME_RE})') "
        f"THEN timezone('{tz}', TRY_CAST({offset} AS TIMESTAMPTZ)) "
        f"WHEN regexp_matches({s}, '{EPOCH_RE}') "
        f"THEN timezone('{tz}', to_timestamp(TRY_CAST({s} AS DOUBLE))) "
        f"ELSE {naive} END"
    )


#: the type the CSV scanner converts time columns to (:func:`scanned_times`)
SCANNED_TIME_TYPE = "TIMESTAMP WITH TIME ZONE"


def scanned_times(
    engine: Engine,
    raw: str,
    parsed: dict[str, str],
    times: dict[str, str],
    types: dict[str, str],
    timezone: str,
    keep: Sequence[str] = (),
) -> str | None:
    """The parsed view of ``raw`` (CSV read as text) with its time columns converted by the
    CSV scanner instead: DuckDB, naive times read as UTC (the default). ``parsed``: the parsed
    expressions (name -> SQL), ``times``: the names of ``parsed`` that are times -> their input
    column; ``keep``: the input columns kept as they are, which must not be times. None where
    this does not apply (see :meth:`DuckDBEngine.retyped_csv`).

    The scanner converts a time the way DuckDB's ``CAST(text AS TIMESTAMPTZ)`` does, which,
    naive times being UTC, is the value :func:`time_expr` gives the same text (its routing
    reads every form through that cast, or a cast giving the same value:
    tests/data/test_scanned_times.py compares the two on 3,544 forms), and it stops at a
    text it cannot convert (epoch seconds, a space before an offset, anything unparsable):
    :func:`privmob.data.validation.validate` then writes the view of :func:`time_expr`, which
    reads those, or names the bad row. One pass of the scanner costs about a third less than
    reading the text and proving it plain ISO (10M rows on a bare DuckDB connection: 1.7 s
    against 2.6 s; docs/benchmarks.md)."""
    retyped = getattr(engine, "retyped_csv", None)
    if retyped is None or not getattr(engine, "scans_times", False):
        return None
    if naive_zone(timezone) != "UTC" or str(timezone) != "UTC":
        return None  # naive times read as UTC in a UTC release only (input_zone_checks)
    if any(types[c] != "VARCHAR" for c in times.values()) or set(times.values()) & set(keep):
        return None
    scanned_raw = retyped(raw, {c: SCANNED_TIME_TYPE for c in times.values()})
    if scanned_raw is None:
        return None
    exprs = dict(parsed)
    for name, col in times.items():
        exprs[name] = time_expr(col, SCANNED_TIME_TYPE, timezone, dialect=engine.dialect)
    return parsed_view(engine, scanned_raw, exprs)


def instant_type(coltype: str) -> bool:
    """A column of instants (DuckDB TIMESTAMPTZ, Spark TIMESTAMP_LTZ, named alike)."""
    return coltype.startswith("TIMESTAMP WITH TIME ZONE") or coltype == "TIMESTAMPTZ"


def canonical_time(engine: Engine, name: str, coltype: str, timezone: str) -> Canonical:
    """The parsed time ``_p_<name>`` (:func:`time_expr` of an input column of ``coltype``,
    kept as ``_p_<name>_raw``) as the fingerprint's canonical text
    (:func:`privmob.data.fingerprint.time_text`). On Spark an instant column read at the time
    zone UTC has the instant's own microseconds for its wall clock's: they are read from the
    input column (``unix_micros``), where reading them from the wall clock converts every time
    twice (instant to wall clock in the parsed view, back for ``unix_micros``): the validation
    statement of 10M trips on the standalone cluster took 1.02 s against 2.12 s, of 10M events
    0.81 s against 1.57 s (``benchmarks/bench_fingerprint.py --statement-only --engine
    spark-cluster``, best of 8). The same number either way (tested on both engines)."""
    micros = None
    if timezone == "UTC" and instant_type(coltype):
        micros = engine.dialect.utc_instant_micros(f"_p_{name}_raw")
    return time_text(engine, f"_p_{name}", micros)


def native_time(coltype: str) -> bool:
    """A column already of a time type: :func:`time_expr` casts or shifts it, never to NULL."""
    return coltype.startswith("TIMESTAMP") or coltype == "DATE"


def input_zone_checks(
    name: str, col: str, coltype: str, timezone: str
) -> tuple[dict[str, str], list[Check]]:
    """What ``--input-timezone`` (a :class:`Clock` whose naive zone is not its binning zone)
    asks of the time column ``col`` (canonical ``name``, of ``coltype``): that its timestamps
    are written without an offset, the only ones that zone is for. Timestamps that carry their
    own zone would be read by it, the given zone unused while the release records it; so they
    are refused: a column of instants or epoch numbers at once, from its type; a text column
    by a check of the validation pass (the parsed column ``_p_<name>_zoned``: an offset, a zone
    name or epoch seconds), which names the first such row. Returns (parsed columns, checks);
    nothing without such a clock."""
    naive = naive_zone(timezone)
    if naive == str(timezone):
        return {}, []
    said = f"--input-timezone {naive}"
    hint = (
        f"leave out {spelled('--input-timezone', 'input_timezone=')}: timestamps with an "
        f"offset are converted to {spelled('--timezone', 'timezone=')} {timezone} by their "
        "own; it is for timestamps without one"
    )
    numeric = coltype in INTEGER_TYPES | NUMERIC_TIME_TYPES or coltype.startswith("DECIMAL")
    if instant_type(coltype) or numeric:
        raise ConfigError(
            f"column '{col}' holds instants ({coltype}), which carry their own zone: {said} "
            "applies to timestamps written without an offset only",
            hint=hint,
        )
    if native_time(coltype):  # TIMESTAMP or DATE without a zone: read in the given zone
        return {}, []
    text = f"trim(CAST({ident(col)} AS VARCHAR))"
    zoned = f"regexp_matches({text}, '({OFFSET_RE})|({ZONE_NAME_RE})|({EPOCH_RE})')"
    check = Check(
        name,
        f"_p_{name}_zoned",
        f"a timestamp with its own offset or zone, where {said} says they have none",
        hint,
    )
    return {f"{name}_zoned": zoned}, [check]


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


# -- the two time zones of a release ------------------------------------------------------
# The two time zones of a release: the zone of its days, hours and bins, and the zone that
# timestamps written without an offset (naive) are read in.
#
# They differ for data logged in UTC without an offset and released in local time
# (``--input-timezone UTC --timezone America/New_York``). :class:`Clock` *is* the binning zone's
# name (a ``str``, so every loader that takes ``timezone=`` takes it unchanged) and carries the
# naive timestamps' zone in :attr:`Clock.naive`.


class Clock(str):
    """``Clock("America/New_York", naive="UTC")``: bins in New York time, naive timestamps
    read as UTC. Without ``naive``, naive timestamps are read in the binning zone."""

    naive: str

    def __new__(cls, zone: str = "UTC", naive: str | None = None) -> Clock:
        clock = super().__new__(cls, zone)
        clock.naive = naive or zone
        return clock

    def __repr__(self) -> str:
        return f"Clock({str(self)!r}, naive={self.naive!r})"


def clock(timezone: str, input_timezone: str | None = None) -> str:
    """``timezone`` alone, or a :class:`Clock` when naive timestamps are in another zone."""
    if input_timezone is None or input_timezone == timezone:
        return timezone
    check_timezone(input_timezone)
    return Clock(timezone, naive=input_timezone)


def naive_zone(timezone: str) -> str:
    """The zone naive timestamps are read in (the binning zone unless a :class:`Clock` says)."""
    return getattr(timezone, "naive", timezone)
