"""A CSV of trips or trip points parsed once into user parts (DuckDB, under a memory limit
that splits the users into buckets): the buckets read the parts as they are instead of writing
the input again, every user's records in one part, the counts those of one pass, the parts
private and removed."""

from __future__ import annotations

import gzip
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips, record_bucket_columns

from privmob.data import load_events, load_trip_points, load_trips
from privmob.data.reading import csv_rows_estimate
from privmob.domain import Period
from privmob.engine import DuckDBEngine, buckets
from privmob.engine.buckets import parts_for, root
from privmob.engine.relation import UserParts
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.samplers import Randomness
from privmob.releases.od import ODDomain, exact_counts

#: an engine memory (bytes) small enough that a few thousand rows need several user buckets
SMALL = 60_000


def od_counts(trips, max_trips: int, buckets: int) -> np.ndarray:
    return exact_counts(
        trips,
        domain=ODDomain(9, 1),
        period=Period(),
        unit=PrivacyUnit.USER,
        max_trips=max_trips,
        buckets=buckets,
        rng=Randomness.for_tests(3),
    )


def at_centre(tiles: pd.Series, axis: str) -> pd.Series:
    """The centre of a tile of box_grid(3) (tile t: row t // 3, column t % 3)."""
    if axis == "lng":
        return 13.0 + (tiles % 3 + 0.5) * 0.01
    return 52.0 + (tiles // 3 + 0.5) * 0.01


@pytest.fixture(scope="module")
def trips_csv(tmp_path_factory):
    df = random_trips(300, 9, seed=4, max_per_user=12)
    for end in ("origin", "destination"):
        df[f"{end}_lat"] = at_centre(df[end], "lat")
        df[f"{end}_lng"] = at_centre(df[end], "lng")
    path = tmp_path_factory.mktemp("parts") / "trips.csv"
    df.drop(columns=["origin", "destination"]).to_csv(path, index=False)
    return path, df


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    # the scale of the tests: a few thousand rows in a memory made to need several buckets
    monkeypatch.setattr(buckets, "PARTS_MIN_MEMORY", SMALL)
    monkeypatch.setattr(buckets, "PART_MEMORY", SMALL // 64)


def small_engine(tmp_path) -> DuckDBEngine:
    eng = DuckDBEngine(spill_dir=tmp_path)
    eng.memory_limit = SMALL  # what a true limit gives an input of millions of rows
    return eng


def parts_of(loaded) -> UserParts:
    parts = root(loaded).parts
    assert parts is not None
    return parts


def test_the_row_estimate_is_near_the_rows(trips_csv, tmp_path):
    path, df = trips_csv
    assert abs(csv_rows_estimate(path) - len(df)) < 0.1 * len(df)
    folder = tmp_path / "folder"
    folder.mkdir()
    for i in range(3):
        shutil.copy(path, folder / f"part{i}.csv")
    assert abs(csv_rows_estimate(folder) - 3 * len(df)) < 0.3 * len(df)
    packed = tmp_path / "trips.csv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert csv_rows_estimate(packed) is None  # its size says little of its rows
    assert csv_rows_estimate(df) is None


def test_trips_by_coordinates_count_from_the_parts(trips_csv, tmp_path, monkeypatch):
    path, df = trips_csv
    written = record_bucket_columns(monkeypatch)
    with small_engine(tmp_path) as eng:
        trips = load_trips(str(path), engine=eng, tessellation=box_grid(3))
        parts = parts_of(trips)
        assert parts.count == parts_for(csv_rows_estimate(path), SMALL) >= 8
        # every user's records in one part, the parts private
        seen: dict[int, int] = {}
        for p in range(parts.count):
            (found,) = list((parts.directory / f"pm_part={p}").glob("*.parquet"))
            assert stat.S_IMODE(found.stat().st_mode) == 0o600
            assert stat.S_IMODE(found.parent.stat().st_mode) == 0o700
            users = eng.fetch(f"SELECT DISTINCT uid FROM read_parquet('{found}')")["uid"]
            for u in users:
                assert seen.setdefault(int(u), p) == p
        assert sorted(seen) == sorted(df["uid"].unique())
        unbounded = [od_counts(trips, 10**6, b) for b in (1, 3, 4)]
        bounded = od_counts(trips, 1, 4)
        directory = parts.directory
        assert directory.exists()
    assert not directory.parent.exists()  # removed with the engine
    assert written == []  # no bucket was written again: each read its parts
    inside = df["origin"] != df["destination"]
    expected = np.zeros(82, np.int64)
    np.add.at(expected, (df["origin"] * 9 + df["destination"])[inside], 1)
    for counts in unbounded:
        np.testing.assert_array_equal(counts[:81], expected[:81])
    # one trip kept per user (counted unless it stays within a tile): a user split over
    # several buckets would keep one in each
    users = df["uid"].nunique()
    assert users - (~inside).sum() <= bounded.sum() <= users


def test_buckets_take_whole_parts_in_a_power_of_two(trips_csv, tmp_path):
    path, _ = trips_csv
    with small_engine(tmp_path) as eng:
        parts = parts_of(load_trips(str(path), engine=eng, tessellation=box_grid(3)))
        assert [parts.buckets(n) for n in (1, 2, 3, 4, 5)] == [None, 2, 4, 4, 8]
        assert parts.buckets(parts.count + 1) is None  # more buckets than parts: written again
        files = [set(parts.files(4, b)) for b in range(4)]
        assert sum(len(f) for f in files) == parts.count
        assert set.union(*files) == {str(f) for f in parts.directory.glob("*/*.parquet")}


def test_without_a_limit_or_a_trip_id_the_input_is_one_file(trips_csv, tmp_path):
    path, df = trips_csv
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        assert load_trips(str(path), engine=eng, tessellation=box_grid(3)).base.parts is None
    no_tid = tmp_path / "no_tid.csv"
    pd.read_csv(path).drop(columns=["tid"]).to_csv(no_tid, index=False)
    with small_engine(tmp_path) as eng:
        # the trip id is the row's number: a part's rows would be numbered again
        trips = load_trips(str(no_tid), engine=eng, tessellation=box_grid(3))
        assert root(trips).parts is None
        assert od_counts(trips, 10**6, 4)[:81].sum() == (df["origin"] != df["destination"]).sum()


def test_trip_points_count_from_the_parts_and_events_are_one_file(trips_csv, tmp_path, monkeypatch):
    _, df = trips_csv
    points = pd.concat(
        [
            df.assign(datetime=df["start_time"], lat=df["origin_lat"], lng=df["origin_lng"]),
            df.assign(
                datetime=df["start_time"] + pd.Timedelta(minutes=10),
                lat=df["destination_lat"],
                lng=df["destination_lng"],
            ),
        ]
    )[["uid", "tid", "datetime", "lat", "lng"]]
    points_csv = tmp_path / "points.csv"
    points.to_csv(points_csv, index=False)
    written = record_bucket_columns(monkeypatch)
    from privmob.data.sources import trips_from_points

    with small_engine(tmp_path) as eng:
        tripped = trips_from_points(
            load_trip_points(str(points_csv), engine=eng, tessellation=box_grid(3))
        )
        assert root(tripped).parts is not None
        counts = [od_counts(tripped, 10**6, b) for b in (1, 4)]
        # events: most of their releases count in one pass (homes), so one file
        events = load_events(str(points_csv), engine=eng, tessellation=box_grid(3))
        assert root(events).parts is None
    assert written == []
    np.testing.assert_array_equal(counts[0], counts[1])
    assert counts[0][:81].sum() == len(df)


def test_the_parts_serve_every_release_s_buckets():
    # a count takes whole parts when its buckets, rounded up to a power of two, are at most
    # the parts: the report (trip points) plans with a quarter of the limit, every other
    # release with all of it
    from privmob.engine.buckets import POINT_PARTS_MARGIN, buckets_for
    from privmob.releases.report.build import report_memory

    for rows in (10**6, 3 * 10**7, 10**8, 127 * 10**6, 10**9):
        for limit in (10**9, 4 * 10**9, 12 * 10**9):
            trips = UserParts(Path("."), parts_for(rows, limit), "v", rebase=lambda v: v)
            needed = buckets_for(rows, limit)
            assert needed == 1 or trips.buckets(needed) is not None, (rows, limit)
            count = parts_for(rows, limit, POINT_PARTS_MARGIN)
            points = UserParts(Path("."), count, "v", rebase=lambda v: v)
            needed = buckets_for(rows, report_memory(limit))
            assert needed == 1 or points.buckets(needed) is not None, (rows, limit)


def test_trips_are_parsed_into_no_more_parts_than_their_buckets_need():
    # each part is a file written at once: twice the parts of 100M trips at 4 GB (16, as for
    # trip points) read 9 s slower than the 8 that od's 4 buckets need
    from privmob.engine.buckets import POINT_PARTS_MARGIN

    assert parts_for(10**8, 4 * 10**9) == 8
    assert parts_for(10**8, 4 * 10**9, POINT_PARTS_MARGIN) == 16
    assert parts_for(10**6, 12 * 10**9) == 1  # fits: the parsed input stays one file
    assert parts_for(None, 10**9) == parts_for(10**9, None) == 1


def test_a_tight_memory_parses_into_one_file(monkeypatch):
    # a partitioned write holds a row group per part: at 512 MB it ran out of DuckDB's share
    monkeypatch.undo()
    assert buckets.PARTS_MIN_MEMORY >= 10**9
    assert parts_for(5 * 10**6, 360 * 10**6) == parts_for(10**9, 900 * 10**6) == 1
    assert parts_for(10**8, 2 * 10**9) > 1
    # a part's writer buffers take memory: at most the limit over PART_MEMORY parts
    assert parts_for(10**10, 2 * 10**9) == 16 < buckets.buckets_for(10**10, 10**9)
