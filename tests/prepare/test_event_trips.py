"""Events → trips (hourly modal location, seed 003's rule), unique trips, homes — in SQL that
runs on DuckDB (and on Spark when PySpark and Java are present)."""

from __future__ import annotations

import pandas as pd
import pytest

from privmob.domain import Period
from privmob.engine.dialect import DUCKDB
from privmob.engine.relation import Loaded
from privmob.prepare.homes import home_cells_sql, homes_sql
from privmob.prepare.trips import consecutive_event_trips, events_to_trips, hourly_trips_sql
from privmob.prepare.unique import unique_trips


def _events(engine, rows) -> Loaded:
    df = pd.DataFrame(rows, columns=["uid", "time", "tile"])
    df["time"] = pd.to_datetime(df["time"])
    df["tile"] = df["tile"].astype("int32")
    engine.register("ev_test", df)
    return Loaded("ev_test", "test", "events", engine, ["uid", "time", "tile"])


ROWS = [
    # user 1: hour 8 → mode 0 (0,0,1); hour 9 → 1; hour 11 → tie 2/3 → 2; hour 12 → 2
    (1, "2024-01-01 08:05", 0),
    (1, "2024-01-01 08:10", 1),
    (1, "2024-01-01 08:50", 0),
    (1, "2024-01-01 09:30", 1),
    (1, "2024-01-01 11:10", 3),
    (1, "2024-01-01 11:20", 2),
    (1, "2024-01-01 12:00", 2),
    # user 2: hour 8 → tie between outside (-1) and 5 → 5; hour 9 → 4
    (2, "2024-01-01 08:00", -1),
    (2, "2024-01-01 08:30", 5),
    (2, "2024-01-01 09:15", 4),
]


def _trips(engine, sql: str) -> list[tuple]:
    df = engine.fetch(f"SELECT uid, origin, destination FROM ({sql}) t ORDER BY uid, tid")
    return [tuple(int(v) for v in r) for r in df.itertuples(index=False)]


def test_hourly_modal_trips(engine) -> None:
    ev = _events(engine, ROWS)
    assert _trips(engine, hourly_trips_sql(ev.view, DUCKDB)) == [(1, 0, 1), (1, 1, 2), (2, 5, 4)]
    strict = hourly_trips_sql(ev.view, DUCKDB, consecutive_hours=True)
    assert _trips(engine, strict) == [(1, 0, 1), (2, 5, 4)]
    t = events_to_trips(ev, "hourly")
    df = engine.fetch(f"SELECT * FROM {t.view} ORDER BY uid, tid")
    assert list(df.columns) == ["uid", "tid", "start_time", "end_time", "origin", "destination"]
    first = df.iloc[0]
    assert str(first.start_time) == "2024-01-01 08:50:00"  # last event at the origin tile
    assert str(first.end_time) == "2024-01-01 09:30:00"
    assert (df.end_time > df.start_time).all()


def test_seed003_rule_counts_every_change(engine) -> None:
    ev = _events(engine, ROWS)
    got = _trips(engine, f"SELECT * FROM {consecutive_event_trips(ev).view}")
    assert got == [(1, 0, 1), (1, 1, 0), (1, 0, 1), (1, 1, 3), (1, 3, 2), (2, -1, 5), (2, 5, 4)]


def test_unique_trips_per_week(engine) -> None:
    rows = [
        (1, "2024-01-01 08:00", 0),
        (1, "2024-01-01 09:00", 1),
        (1, "2024-01-02 08:00", 0),
        (1, "2024-01-02 09:00", 1),  # same pair, same week: dropped
        (1, "2024-01-09 08:00", 0),
        (1, "2024-01-09 09:00", 1),  # next week: kept
    ]
    ev = _events(engine, rows)
    trips = events_to_trips(ev, "hourly")
    period = Period.parse("week", "2024-01-01", "2024-01-15")
    u = unique_trips(trips, period)
    got = _trips(engine, f"SELECT * FROM {u.view}")
    # 0→1: Jan 1 (kept), Jan 2 (same week: dropped), Jan 9 (next week: kept); 1→0 starts on
    # Jan 1 and Jan 2, both in week 0: kept once
    assert sorted(got) == [(1, 0, 1), (1, 0, 1), (1, 1, 0)]
    assert len(_trips(engine, f"SELECT * FROM {trips.view}")) == 5


def test_homes_night_mode_and_unknown(engine) -> None:
    rows = [
        (1, "2024-01-01 21:00", 3),
        (1, "2024-01-01 22:00", 3),
        (1, "2024-01-02 05:59", 2),
        (1, "2024-01-02 12:00", 2),  # day time: ignored
        (1, "2024-01-02 13:00", 2),
        (2, "2024-01-01 23:00", 4),
        (2, "2024-01-02 01:00", 1),  # tie 4/1 → smallest index 1
        (3, "2024-01-01 12:00", 0),  # no night event → unknown
        (4, "2024-01-01 20:00", -1),  # only outside → outside cell
        (5, "2024-01-01 06:00", 0),  # 06:00 is day → unknown
    ]
    ev = _events(engine, rows)
    homes = engine.fetch(f"SELECT * FROM ({homes_sql(ev.view, DUCKDB)}) h ORDER BY uid")
    assert dict(zip(homes.uid, homes.tile, strict=True)) == {1: 3, 2: 1, 4: -1}
    cells = engine.fetch(f"SELECT * FROM ({home_cells_sql(ev.view, DUCKDB, 6)}) c ORDER BY i0")
    assert dict(zip(cells.i0, cells.n, strict=True)) == {1: 1, 3: 1, 6: 1, 7: 2}


@pytest.mark.spark
@pytest.mark.slow
def test_same_sql_runs_on_spark() -> None:
    pyspark = pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    from pyspark.sql import SparkSession

    from privmob.engine.dialect import SPARK

    del pyspark
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    # getOrCreate may return the session other tests share: use it, never stop it here
    df = pd.DataFrame(ROWS, columns=["uid", "time", "tile"])
    df["time"] = pd.to_datetime(df["time"])
    spark.createDataFrame(df).createOrReplaceTempView("ev_test")
    q = f"SELECT uid, origin, destination FROM ({hourly_trips_sql('ev_test', SPARK)}) t"
    got = sorted(tuple(int(v) for v in r) for r in spark.sql(q).collect())
    assert got == [(1, 0, 1), (1, 1, 2), (2, 5, 4)]
    h = spark.sql(home_cells_sql("ev_test", SPARK, 6)).collect()
    assert sum(r["n"] for r in h) == 2
