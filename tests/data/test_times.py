"""DuckDB's fast path for plain ISO 8601 times gives exactly what the routing expression gives,
on the values where they could differ: offsets in every spelling, fractions, DST gaps and
folds, naive values read in another zone, and strings just outside the plain form."""

import duckdb
import pytest

from privmob.data.times import PLAIN_NAIVE_RE, PLAIN_ZONED_RE, clock, time_expr
from privmob.engine.dialect import DUCKDB

VALUES = [
    "2024-01-01 10:00:00",
    "2024-01-01T10:00:00",
    "2024-01-01 10:00:00.5",
    "2024-01-01 10:00:00.123456",
    "2024-01-01 10:00:00.1234567",  # more digits than microseconds
    "2024-01-01 10:00:00+02",
    "2024-01-01 10:00:00+0230",
    "2024-01-01 10:00:00+02:30",
    "2024-01-01 10:00:00-05:00",
    "2024-01-01 10:00:00-00:30",
    "2024-01-01 10:00:00Z",
    "2024-01-01 10:00:00z",
    "2024-01-01T10:00:00.8+00",
    "2024-01-06 17:09:12.8+00",  # the benchmark's form
    "2024-03-31 02:30:00",  # a gap in Paris
    "2024-03-31 00:59:59+00",
    "2024-03-31 01:00:00+00",  # Paris jumps at this instant
    "2024-10-27 02:30:00",  # a fold in Paris
    "2024-10-27 00:30:00+00",
    "2024-10-27 01:30:00+00",
    "2024-03-10 02:30:00",  # a gap in New York
    "2024-11-03 01:30:00",  # a fold in New York
    "2024-11-03 05:30:00Z",
    "2024-11-03 06:30:00Z",
    "2024-02-29 23:59:59.999999+14:00",
    "0001-01-01 00:00:00+05",
    "9999-12-31 23:59:59-05",
    "2024-01-01 24:00:00+00",
    "2024-02-30 10:00:00+01",  # no such day
    "2024-01-01 10:00:00+99",
    "2024-01-01 10:00:00+0260",
    # just outside the plain form: routed, so still the same
    " 2024-01-01 10:00:00 ",
    "2024-01-01 10:00:00 +02:00",
    "2024-01-01 10:00+02:00",
    "2024-01-01 10:00",
    "2024-01-01 10:00:00.+01",
    "2024-01-01 10:00:00,5+01",
    "2024-01-01 10:00:00 Europe/Paris",
    "2024-01-01 10:00:00 CET",
    "2024-01-01",
    "1704103200",
    "1704103200.5",
    "yesterday",
    "",
    None,
]

ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Kolkata",
    clock("America/New_York", "UTC"),
    clock("UTC", "Europe/Paris"),
]


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect(":memory:")
    c.execute("SET TimeZone = 'UTC'")
    c.execute("CREATE TABLE v (i INTEGER, t VARCHAR)")
    c.executemany("INSERT INTO v VALUES (?, ?)", list(enumerate(VALUES)))
    yield c
    c.close()


@pytest.mark.parametrize("zone", ZONES, ids=repr)
def test_plain_iso_fast_path_equals_the_routing_expression(con, zone):
    fast = time_expr("t", "VARCHAR", zone, dialect=DUCKDB)
    slow = time_expr("t", "VARCHAR", zone, dialect=DUCKDB, plain_iso=False)
    assert PLAIN_ZONED_RE in fast and PLAIN_NAIVE_RE in fast and PLAIN_NAIVE_RE not in slow
    rows = con.execute(
        f"SELECT i, CAST({fast} AS VARCHAR), CAST({slow} AS VARCHAR) FROM v ORDER BY i"
    ).fetchall()
    differ = [(VALUES[i], f, s) for i, f, s in rows if f != s]
    assert differ == []
    parsed = sum(f is not None for _, f, _ in rows)
    assert parsed >= 30  # the comparison is not between two NULLs


def test_the_plain_forms_are_what_the_fast_path_takes(con):
    def matching(regex):
        sql = f"SELECT i FROM v WHERE regexp_full_match(t, '{regex}')"
        return {VALUES[i] for (i,) in con.execute(sql).fetchall()}

    zoned, naive = matching(PLAIN_ZONED_RE), matching(PLAIN_NAIVE_RE)
    assert not zoned & naive
    assert {"2024-01-06 17:09:12.8+00", "2024-01-01 10:00:00Z", "2024-01-01 10:00:00+0230"} <= zoned
    assert {"2024-01-01 10:00:00", "2024-01-01T10:00:00", "2024-01-01 10:00:00.1234567"} <= naive
    routed = {" 2024-01-01 10:00:00 ", "2024-01-01 10:00+02:00", "2024-01-01 10:00:00 CET"}
    assert not routed & (zoned | naive)
