"""The few SQL functions that differ between engines.

privmob's pipeline queries are plain SQL text that DuckDB and Spark SQL both accept (window
functions, CASE, GROUP BY, subqueries with aliases). What differs (the keyed hash used for
bounding, epoch seconds, day of week) is produced by a :class:`Dialect`, so one query definition
serves both engines. Hash functions differ per backend: engines agree on aggregates whenever
bounds truncate nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str

    def keyed_hash(self, key: int, *columns: str) -> str:
        """A 64-bit hash of (key, columns...): the per-release random sort key for bounding.

        The choice for one user depends only on that user's own records and the secret key,
        never on other users' data.
        """
        cols = ", ".join(columns)
        if self.name == "spark":
            return f"xxhash64(CAST({key} AS BIGINT), {cols})"
        return f"hash(CAST({key} AS BIGINT), {cols})"

    def epoch_seconds(self, expr: str) -> str:
        """Whole seconds since 1970-01-01 of a TIMESTAMP (local wall-clock, no zone), rounded
        down: a time before a bin's end must never be counted in the next bin (DuckDB's
        ``epoch`` keeps fractions and a plain cast to BIGINT rounds them to nearest)."""
        if self.name == "spark":
            return f"CAST(unix_timestamp({expr}) AS BIGINT)"
        return f"CAST(floor(epoch({expr})) AS BIGINT)"

    def epoch_micros(self, expr: str) -> str:
        """Whole microseconds since 1970-01-01 of a TIMESTAMP (local wall-clock, no zone)."""
        if self.name == "spark":
            return f"unix_micros(CAST({expr} AS TIMESTAMP_LTZ))"
        return f"epoch_us({expr})"

    def weekday(self, expr: str) -> str:
        """Day of week, Monday = 0 ... Sunday = 6."""
        if self.name == "spark":
            return f"(CAST(dayofweek({expr}) AS INT) + 5) % 7"
        return f"(CAST(isodow({expr}) AS INT) - 1)"

    def hour(self, expr: str) -> str:
        return f"CAST(hour({expr}) AS INT)"

    def double_at(self, values: list[float], index: str) -> str:
        """Element ``index`` (0-based SQL expression) of a constant list of doubles, each
        written so that it parses to exactly the same float (shortest round-trip text)."""
        items = ", ".join(f"CAST('{float(v)!r}' AS DOUBLE)" for v in values)
        if self.name == "spark":
            return f"element_at(array({items}), CAST(({index}) + 1 AS INT))"
        return f"([{items}])[({index}) + 1]"

    def row_number(self) -> str:
        """1-based number of a row in the order the input was read (file order for one
        file); only for messages about bad input, never for a release."""
        if self.name == "spark":
            return "row_number() OVER (ORDER BY monotonically_increasing_id())"
        return "row_number() OVER ()"

    def timestamp_literal(self, iso: str) -> str:
        return f"TIMESTAMP '{iso}'"


DUCKDB = Dialect("duckdb")
SPARK = Dialect("spark")
