"""DuckDB reads the times of a CSV input through its CSV scanner (the column read as TIMESTAMPTZ)
where naive times are UTC: every text the scanner converts gets the value privmob's own reading
of the text gives (privmob.data.times.time_expr), and where the scanner stops, or leaves a time
NULL, the text is read as before, with the same rows, fingerprint and errors."""

import re
from itertools import product

import duckdb
import pandas as pd
import pytest
from tests.helpers import box_grid, trips_from_points

from privmob.data import load_events, load_trip_points, load_trips
from privmob.data.times import SCANNED_TIME_TYPE, clock, scanned_times, time_expr
from privmob.engine import DuckDBEngine
from privmob.engine.dialect import DUCKDB
from privmob.engine.duckdb import SCANS_TIMES
from privmob.errors import InputError

pytestmark = pytest.mark.skipif(
    not SCANS_TIMES, reason="DuckDB 1 does not read times through the CSV scanner"
)

DATES = ["2024-01-01", "2024-1-1", "24-01-01", "2024/01/01", "12024-01-01", "2024-02-30"]
SEPARATORS = [" ", "T", "  ", "t"]
CLOCKS = ["08:00:00", "8:00:00", "08:00", "08:00:00.5", "08:00:00.1234567", "24:00:00", "08:00:60"]
ZONES = [
    "", "Z", "z", " z", "+02", "+0230", "+02:30", "-05:00", "-00:30", "+14:00", " +09:00", "+2",
    " GMT+2", "+02:00:30", " Europe/Paris", "Europe/Paris", " CET", " UTC", " America/New_York",
    " AM", " (BC)",
]  # fmt: skip
OTHERS = [
    "2024-01-01", "2024-03-31 02:30:00", "2024-11-03 01:30:00", "2024-03-10 02:30:00",
    "1704103200", "1704103200.5", "infinity", "-infinity", "epoch", "yesterday",
    "01/02/2024 08:00", "20240101T080000Z", "2024-01-01 8:00 PM", " 2024-01-01 08:00:00",
    "2024-01-01 08:00:00 ", " 2024-01-01 08:00:00+02 ",
]  # fmt: skip
TEXTS = [d + s + c + z for d, s, c, z in product(DATES, SEPARATORS, CLOCKS, ZONES)] + OTHERS


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


@pytest.fixture(scope="module")
def texts_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("times") / "times.csv"
    path.write_text("i,t\n" + "".join(f"{i},{t}\n" for i, t in enumerate(TEXTS)))
    return path


@pytest.mark.parametrize(
    "zone", ["UTC", clock("America/New_York", "UTC"), clock("Asia/Kolkata", "UTC")], ids=repr
)
def test_every_time_the_scanner_converts_reads_as_privmob_reads_its_text(texts_csv, zone):
    """The same file read twice: as text, through time_expr (the plain ISO fast path and the
    routing both), and with the column typed as the scanner converts it (the texts it cannot
    convert skipped). One value apart fails: before the routing read a zone that DuckDB's
    TIMESTAMP cast drops (" GMT+2", "+02:00:30") as the instant the TIMESTAMPTZ cast gives,
    the scanner and privmob disagreed on them."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    reader = f"read_csv('{texts_csv}', header = true, auto_detect = false"
    text = f"{reader}, columns = {{'i': 'INTEGER', 't': 'VARCHAR'}})"
    typed = (
        f"{reader}, columns = {{'i': 'INTEGER', 't': '{SCANNED_TIME_TYPE}'}}, ignore_errors = true)"
    )
    fast = time_expr("t", "VARCHAR", zone, dialect=DUCKDB)
    routed = time_expr("t", "VARCHAR", zone, dialect=DUCKDB, plain_iso=False)
    scanned = time_expr("t", SCANNED_TIME_TYPE, zone, dialect=DUCKDB)
    rows = con.execute(
        f"SELECT a.i, CAST({scanned} AS VARCHAR) AS s, b.f, b.r FROM {typed} AS a JOIN ("
        f"SELECT i, CAST({fast} AS VARCHAR) AS f, CAST({routed} AS VARCHAR) AS r FROM {text}) AS b "
        "USING (i) ORDER BY a.i"
    ).fetchall()
    differ = [(TEXTS[i], s, f, r) for i, s, f, r in rows if not s == f == r]
    assert differ == []
    # the comparison covers many forms, and the scanner refuses many others
    assert 600 <= len(rows) <= len(TEXTS) - 600
    accepted = {TEXTS[i] for i, *_ in rows}
    assert {"2024-01-01 08:00:00 GMT+2", "2024-1-1T8:00:00+02:00:30"} <= accepted
    assert all(s is not None for _, s, _, _ in rows)


class Statements:
    """The engine's connection, every statement recorded on its way to DuckDB."""

    def __init__(self, con):
        self.con, self.sql = con, []

    def execute(self, sql, *args, **kwargs):
        self.sql.append(sql)
        return self.con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.con, name)


def _copies(eng):
    """For each COPY of the parsed input: whether the view it read is over the scanner."""
    out = []
    for sql in eng.con.sql:
        if sql.startswith("COPY ("):
            view = re.search(r"FROM (pm_parsed_\d+)\)", sql)[1]
            (definition,) = eng.con.con.execute(
                "SELECT sql FROM duckdb_views() WHERE view_name = ?", [view]
            ).fetchone()
            out.append("pm_typed_csv_" in definition)
    return out


def _load(path, loader, grid, scans=True, **kwargs):
    eng = DuckDBEngine(spill_dir=path.parent / f"spill-{scans}")
    eng.scans_times = scans
    eng.con = Statements(eng.con)
    loaded = loader(path, engine=eng, tessellation=grid, **kwargs)
    df = eng.fetch(f"SELECT * FROM {loaded.view}")
    return eng, loaded, df.sort_values(list(df.columns)).reset_index(drop=True)


ACCEPTED = [
    "2024-01-01 08:00:00.5+01:00",
    "2024-01-01 08:30:00",
    "2024-01-02 09:00 Europe/Berlin",
    "2024-1-2 9:05:00",
    "2024-01-03T10:00:00Z",
    "2024-01-03 10:30:00 GMT+2",
    "2024-01-03 10:45:00+02:00:30",
    " 2024-01-03 11:30:00+02 ",
]


def _points(times):
    n = len(times)
    return pd.DataFrame(
        {
            "uid": [str(i // 2) for i in range(n)],
            "tid": [str(i // 2) for i in range(n)],
            "datetime": times,
            "lat": [f"{52.005 + 0.01 * (i % 3):.3f}" for i in range(n)],
            "lng": [f"{13.005 + 0.01 * (i % 2):.3f}" for i in range(n)],
        }
    )


def _trips(times: list[str]) -> pd.DataFrame:
    return trips_from_points(_points(times), times)


LOADERS = [
    (load_trip_points, _points),
    (load_events, lambda t: _points(t).drop(columns="tid")),
    (load_trips, _trips),
]


@pytest.mark.parametrize(("loader", "table"), LOADERS, ids=["trip points", "events", "trips"])
@pytest.mark.parametrize("zone", ["UTC"], ids=repr)
def test_a_csv_whose_times_all_convert_is_read_through_the_scanner(
    tmp_path, grid, loader, table, zone
):
    table(ACCEPTED).to_csv(tmp_path / "in.csv", index=False)
    eng, scanned, got = _load(tmp_path / "in.csv", loader, grid, timezone=zone)
    assert _copies(eng) == [True]
    eng2, text, want = _load(tmp_path / "in.csv", loader, grid, scans=False, timezone=zone)
    assert _copies(eng2) == [False]
    pd.testing.assert_frame_equal(got, want)
    assert scanned.fingerprint == text.fingerprint and scanned.rows == text.rows == len(ACCEPTED)
    assert got.filter(like="time").notna().all().all()


@pytest.mark.parametrize(("loader", "table"), LOADERS, ids=["trip points", "events", "trips"])
def test_where_the_scanner_stops_the_text_is_read_and_the_attempt_leaves_no_file(
    tmp_path, grid, loader, table
):
    # epoch seconds on the last of 30,000 rows: the scanner converts the rows before it
    times = [*(ACCEPTED * 3750)[:29_999], "1704186000"]
    table(times).to_csv(tmp_path / "in.csv", index=False)
    eng, scanned, got = _load(tmp_path / "in.csv", loader, grid)
    assert _copies(eng) == [True, False]
    assert (
        len(list(eng.spill_dir.rglob("*"))) == 2
    )  # one directory, one file: the attempt's are gone
    _, text, want = _load(tmp_path / "in.csv", loader, grid, scans=False)
    pd.testing.assert_frame_equal(got, want)
    assert scanned.fingerprint == text.fingerprint and scanned.rows == len(times)


@pytest.mark.parametrize(
    "zone", [clock("UTC", "Asia/Tokyo"), clock("America/New_York", "UTC")], ids=repr
)
def test_naive_times_read_in_another_zone_are_not_scanned(tmp_path, grid, zone):
    """Naive times in a zone of their own (``--input-timezone``) are read from the text, where
    a time that carries its own offset is refused (issue 42: the zone would go unused), so
    every time here is naive."""
    naive = [t for t in ACCEPTED if t.strip().count(":") == 2 and t[-1].isdigit()][:2]
    assert naive == ["2024-01-01 08:30:00", "2024-1-2 9:05:00"]
    _points(naive).to_csv(tmp_path / "in.csv", index=False)
    eng, _, _ = _load(tmp_path / "in.csv", load_trip_points, grid, timezone=zone)
    assert _copies(eng) == [False]
    with DuckDBEngine() as eng:
        eng.read_csv("raw", str(tmp_path / "in.csv"))
        types = {c: "VARCHAR" for c in eng.columns("raw")}
        args = ("raw", {"datetime": "x"}, {"datetime": "datetime"}, types)
        assert scanned_times(eng, *args, "UTC") is not None
        assert scanned_times(eng, *args, clock("UTC", "Europe/Paris")) is None
        assert scanned_times(eng, *args, "UTC", keep=["datetime"]) is None


def test_an_empty_optional_time_is_read_from_the_text(tmp_path, grid):
    """A NULL time in the scanned file may be an empty field or a value the scanner left NULL
    (DuckDB 1): only the text tells, so the text is read; an empty end time is allowed."""
    df = _trips(ACCEPTED)
    df.loc[3, "end_time"] = None
    df.to_csv(tmp_path / "in.csv", index=False)
    eng, scanned, got = _load(tmp_path / "in.csv", load_trips, grid)
    assert _copies(eng) == [True, False]
    assert len(list(eng.spill_dir.rglob("*"))) == 2  # the scanned file and its directory are gone
    _, text, want = _load(tmp_path / "in.csv", load_trips, grid, scans=False)
    pd.testing.assert_frame_equal(got, want)
    assert scanned.fingerprint == text.fingerprint


@pytest.mark.parametrize(
    ("bad", "message"),
    [("", "missing timestamp"), ("2024-13-45 secret 8:00:00", "unparsable timestamp")],
    ids=["missing", "unparsable"],
)
def test_a_bad_time_is_named_by_its_row_without_its_value(tmp_path, grid, bad, message):
    times = list(ACCEPTED)
    times[5] = bad
    _points(times).to_csv(tmp_path / "in.csv", index=False)
    errors = []
    for scans in (True, False):
        with pytest.raises(InputError) as err:
            _load(tmp_path / "in.csv", load_trip_points, grid, scans=scans)
        errors.append(err.value)
    assert [(e.row, e.column) for e in errors] == [(6, "datetime")] * 2
    assert str(errors[0]) == str(errors[1]) and message in str(errors[0])
    # nothing raised along the way (the scanner's error quotes the input line) is kept
    chain, e = [], errors[0]
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(f"{e} {getattr(e, 'detail', '')}" for e in chain)
    assert "secret" not in text and "52.0" not in text
