"""What differs between engines: a :class:`Dialect` per engine.

privmob's pipeline queries are plain SQL text that DuckDB and Spark SQL both accept (window
functions, CASE, GROUP BY, subqueries with aliases). Every difference, whether of SQL (the keyed
hash used for bounding, epoch seconds, day of week, exact sums, ...) or of how a step is best
run on that engine (whether privmob cuts the input into user buckets itself, whether bounding
ranks only the users above the bound, ...), is a method or an attribute of the engine's
dialect (:class:`DuckDBDialect`, :class:`SparkDialect`), so one query definition serves both
engines and no code outside the engine asks which engine it runs on. Hash functions differ per
backend: engines agree on aggregates whenever bounds truncate nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar


class Dialect(ABC):
    """The SQL and the ways of running that one engine needs (one instance per engine:
    :data:`DUCKDB`, :data:`SPARK`). Its ways of running are off unless the engine's dialect
    turns them on."""

    #: the engine's name (``"duckdb"``, ``"spark"``): for messages and the engine's choice
    name: ClassVar[str]
    #: the engine manages its own memory (spills by itself): privmob cuts no user buckets or
    #: slices to keep within a memory limit
    manages_own_memory: ClassVar[bool] = False
    #: per-user bounding ranks only the units of users above the bound (the same units are
    #: kept; where ranking all is cheaper than the count and its join, False)
    ranks_above_bound_only: ClassVar[bool] = False
    #: several count vectors over one relation share one scan (``stack`` and one GROUP BY)
    #: instead of a UNION ALL branch each
    fuses_count_scans: ClassVar[bool] = False
    #: the row count of a local Parquet input is read from its metadata
    parquet_rows_from_metadata: ClassVar[bool] = False
    #: a CSV input is parsed once and kept (in a private file, or the engine's cache)
    parses_csv_once: ClassVar[bool] = False
    #: UTC instants are read as wall clock without a zone lookup per row
    fast_utc_instants: ClassVar[bool] = False
    #: text in the plain ISO forms is read by a plain cast instead of the routing expression
    casts_plain_iso: ClassVar[bool] = False
    #: the content fingerprint's sampled row digests are computed once in a projection below
    #: the aggregate (:func:`privmob.data.fingerprint.fingerprint_source`)
    digests_in_projection: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @abstractmethod
    def keyed_hash(self, key: int, *columns: str) -> str:
        """A 64-bit hash of (key, columns...): the per-release random sort key for bounding.

        The choice for one user depends only on that user's own records and the secret key,
        never on other users' data.
        """

    @abstractmethod
    def user_bucket(self, user: str, n_buckets: int) -> str:
        """The bucket (0..n_buckets-1) of a user (a plain, unkeyed hash of the user id)."""

    @abstractmethod
    def epoch_seconds(self, expr: str) -> str:
        """Whole seconds since 1970-01-01 of a TIMESTAMP (local wall-clock, no zone), rounded
        down: a time before a bin's end must never be counted in the next bin (DuckDB's
        ``epoch`` keeps fractions and a plain cast to BIGINT rounds them to nearest)."""

    @abstractmethod
    def epoch_micros(self, expr: str) -> str:
        """Whole microseconds since 1970-01-01 of a TIMESTAMP (local wall-clock, no zone)."""

    @abstractmethod
    def weekday(self, expr: str) -> str:
        """Day of week, Monday = 0 ... Sunday = 6."""

    def hour(self, expr: str) -> str:
        return f"CAST(hour({expr}) AS INT)"

    @abstractmethod
    def double_at(self, values: list[float], index: str) -> str:
        """Element ``index`` (0-based SQL expression) of a constant list of doubles, each
        written so that it parses to exactly the same float (shortest round-trip text)."""

    @abstractmethod
    def row_number(self) -> str:
        """1-based number of a row in the order the input was read (file order for one
        file); only for messages about bad input, never for a release."""

    def timestamp_literal(self, iso: str) -> str:
        return f"TIMESTAMP '{iso}'"

    @abstractmethod
    def wall_clock(self, ts: str, naive: str, tz: str) -> str:
        """The wall clock in the zone ``tz`` of the naive timestamp ``ts`` read in ``naive``."""

    @abstractmethod
    def utc_instant_micros(self, instant: str) -> str | None:
        """The microseconds since 1970 of an instant column read at the time zone UTC, from
        the instant itself; None where they are read from its wall clock."""

    @abstractmethod
    def concat(self, left: str, right: str) -> str:
        """Two texts joined."""

    @abstractmethod
    def sha256_hex(self, text: str) -> str:
        """SHA-256 of a text, as 64 lower-case hex digits."""

    @abstractmethod
    def exact_sum_text(self, integer: str) -> str:
        """An aggregate: the exact sum of a BIGINT expression as text (NULL over no value)."""

    @abstractmethod
    def row_hash_sum(self, text: str, when: str | None, digest: str | None = None) -> str:
        """An aggregate: the exact sum of the first 8 bytes of MD5 of ``text`` (a
        little-endian integer) over the rows where ``when`` holds (every row for None), as
        text (NULL over no row). ``digest``: a column holding the MD5 hex digest already
        (NULL for a row not summed), where :attr:`digests_in_projection`."""


class DuckDBDialect(Dialect):
    """DuckDB: in-process, kept within a memory limit by privmob's user buckets."""

    name = "duckdb"
    ranks_above_bound_only = True
    parquet_rows_from_metadata = True
    parses_csv_once = True
    fast_utc_instants = True
    casts_plain_iso = True

    def keyed_hash(self, key: int, *columns: str) -> str:
        return f"hash(CAST({key} AS BIGINT), {', '.join(columns)})"

    def user_bucket(self, user: str, n_buckets: int) -> str:
        return f"hash({user}) % {n_buckets}"

    def epoch_seconds(self, expr: str) -> str:
        return f"CAST(floor(epoch({expr})) AS BIGINT)"

    def epoch_micros(self, expr: str) -> str:
        return f"epoch_us({expr})"

    def weekday(self, expr: str) -> str:
        return f"(CAST(isodow({expr}) AS INT) - 1)"

    def double_at(self, values: list[float], index: str) -> str:
        return f"([{_doubles(values)}])[({index}) + 1]"

    def row_number(self) -> str:
        return "row_number() OVER ()"

    def wall_clock(self, ts: str, naive: str, tz: str) -> str:
        return f"timezone('{tz}', timezone('{naive}', {ts}))"

    def utc_instant_micros(self, instant: str) -> str | None:
        return None

    def concat(self, left: str, right: str) -> str:
        return f"{left} || {right}"

    def sha256_hex(self, text: str) -> str:
        return f"sha256({text})"

    def exact_sum_text(self, integer: str) -> str:
        return f"CAST(sum({integer}) AS VARCHAR)"

    def row_hash_sum(self, text: str, when: str | None, digest: str | None = None) -> str:
        # md5_number: the digest as a little-endian integer; its low 64 bits are bytes 0-7.
        # As text: a HUGEINT would reach pandas as a float and lose its low digits
        low = f"CAST(md5_number({text}) & {2**64 - 1} AS UBIGINT)"
        return f"CAST(sum({_only(low, when)}) AS VARCHAR)"


class SparkDialect(Dialect):
    """Spark SQL: local mode or a cluster, managing its own memory."""

    name = "spark"
    manages_own_memory = True
    # each UNION ALL branch would be a scan of a cached table and a shuffle stage of its own
    fuses_count_scans = True
    parses_csv_once = True
    digests_in_projection = True
    # ranks_above_bound_only off: the count of each user's units and its join would be a
    # shuffle each

    def keyed_hash(self, key: int, *columns: str) -> str:
        """``xxhash64``: Spark's ``hash`` has 32 bits."""
        return f"xxhash64(CAST({key} AS BIGINT), {', '.join(columns)})"

    def user_bucket(self, user: str, n_buckets: int) -> str:
        """``pmod``: never negative, where ``%`` keeps the hash's sign."""
        return f"pmod(xxhash64({user}), {n_buckets})"

    def epoch_seconds(self, expr: str) -> str:
        """``unix_timestamp``: whole seconds, rounded down."""
        return f"CAST(unix_timestamp({expr}) AS BIGINT)"

    def epoch_micros(self, expr: str) -> str:
        """``unix_micros`` reads an instant: the wall clock read as one in the session's zone
        (UTC)."""
        return f"unix_micros(CAST({expr} AS TIMESTAMP_LTZ))"

    def weekday(self, expr: str) -> str:
        """``dayofweek``: Sunday = 1 ... Saturday = 7."""
        return f"(CAST(dayofweek({expr}) AS INT) + 5) % 7"

    def double_at(self, values: list[float], index: str) -> str:
        """``element_at``: 1-based, its index an INT."""
        return f"element_at(array({_doubles(values)}), CAST(({index}) + 1 AS INT))"

    def row_number(self) -> str:
        """A window needs an order: the order rows were read in."""
        return "row_number() OVER (ORDER BY monotonically_increasing_id())"

    def wall_clock(self, ts: str, naive: str, tz: str) -> str:
        """Through the UTC instant of ``ts``."""
        return f"from_utc_timestamp(to_utc_timestamp({ts}, '{naive}'), '{tz}')"

    def utc_instant_micros(self, instant: str) -> str | None:
        """The instant's own microseconds: reading them from the wall clock would convert
        every time twice (instant to wall clock in the parsed view, back for ``unix_micros``)."""
        return f"unix_micros({instant})"

    def concat(self, left: str, right: str) -> str:
        """``concat``: NULL where either is NULL, as DuckDB's ``||``."""
        return f"concat({left}, {right})"

    def sha256_hex(self, text: str) -> str:
        """``sha2`` of 256 bits."""
        return f"sha2({text}, 256)"

    def exact_sum_text(self, integer: str) -> str:
        """From three BIGINT sums of the 21-bit parts of ``integer`` (``i = hi * 2^42 + mid *
        2^21 + lo``, the arithmetic shift keeping the sign in ``hi``: exact below 2^42 rows
        whether or not ANSI mode is on), combined once as a DECIMAL. A DECIMAL sum per row
        costs twice the whole statement's other work (10M trips' two times on local[2]:
        0.70-0.78 s against 0.33-0.38 s for the parts, 0.36-0.41 s without the sums;
        benchmarks/bench_fingerprint.py)."""
        part = 2**21 - 1
        hi = f"CAST(sum(shiftright({integer}, 42)) AS DECIMAL(38, 0)) * {2**42}"
        mid = f"CAST(sum(shiftright({integer}, 21) & {part}) AS DECIMAL(38, 0)) * {2**21}"
        lo = f"sum({integer} & {part})"
        return f"CAST({hi} + {mid} + {lo} AS VARCHAR)"

    def row_hash_sum(self, text: str, when: str | None, digest: str | None = None) -> str:
        """From ``md5``'s hex digits (or from the column ``digest`` that holds them), three
        BIGINT sums of 24-, 24- and 16-bit parts (exact below 2^39 rows whether or not ANSI
        mode is on), combined once as a DECIMAL."""
        hex_digest = digest or f"md5({text})"

        def little_endian(first: int, last: int) -> str:  # bytes first..last of the digest
            pairs = [f"substr({hex_digest}, {2 * b + 1}, 2)" for b in range(last, first - 1, -1)]
            return f"CAST(conv(concat({', '.join(pairs)}), 16, 10) AS BIGINT)"

        total = " + ".join(
            f"CAST(sum({_only(little_endian(a, b), when)}) AS DECIMAL(38, 0)) * {2 ** (8 * a)}"
            for a, b in ((0, 2), (3, 5), (6, 7))
        )
        return f"CAST({total} AS VARCHAR)"


def _doubles(values: list[float]) -> str:
    return ", ".join(f"CAST('{float(v)!r}' AS DOUBLE)" for v in values)


def _only(expr: str, when: str | None) -> str:
    return expr if when is None else f"CASE WHEN {when} THEN {expr} END"


DUCKDB: Dialect = DuckDBDialect()
SPARK: Dialect = SparkDialect()
