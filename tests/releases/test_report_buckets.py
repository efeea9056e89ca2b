"""The mobility report out of core: counts summed over user-hash buckets equal one pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
from tests.helpers import record_bucket_columns

from privmob.data.grids import square_grid
from privmob.data.sources import load_trip_points
from privmob.engine import DuckDBEngine
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, Tiles, mobility_report
from privmob.releases.report.build import bucketed_exact_counts


def points(n_users: int, seed: int) -> pd.DataFrame:
    """Users with 1-25 trips of 2-3 points, some outside the grid and the period."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for t in range(int(rng.integers(1, 26))):
            start = pd.Timestamp("2024-01-01") + pd.Timedelta(
                minutes=int(rng.integers(-900, 44000))
            )
            for j in range(int(rng.integers(2, 4))):
                ts = start + pd.Timedelta(minutes=17 * j)
                rows.append((u, t, ts, rng.uniform(40.58, 40.92), rng.uniform(-74.06, -73.72)))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def test_bucket_sums_equal_single_pass(tmp_path) -> None:
    tess = square_grid((-74.05, 40.6, -73.75, 40.9), 4000)
    tiles = Tiles.from_tessellation(tess)
    df = points(120, seed=5)
    for unit in ("user", "trip"):
        cfg = ReportConfig.build(
            epsilon=1, max_trips=6, period=("2024-01-01", "2024-01-29"), unit=unit
        )
        with DuckDBEngine() as eng:
            loaded = load_trip_points(df, engine=eng, tessellation=tess)
            one = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=1)
            four = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=4)
        assert one.keys() == four.keys()
        for name in one:
            assert np.array_equal(one[name], four[name]), (unit, name)
        # the bounding bites (users above M) and per-user analyses are non-trivial
        assert one["trips_per_user"].sum() > 100 and one["time_between_trips"].sum() > 100

    for bound in (6, "auto"):  # a bound chosen privately reads its users' trips per bucket too
        cfg = ReportConfig.build(epsilon=1, max_trips=bound, period=("2024-01-01", "2024-01-29"))
        released = []
        for b in (1, 3):
            with DuckDBEngine() as eng:
                loaded = load_trip_points(df, engine=eng, tessellation=tess)
                acc = Accountant(Ledger(tmp_path / f"l{bound}{b}.sqlite"), "d", budget=10)
                rel = mobility_report(eng, loaded, tiles, cfg, acc, rng=9, buckets=b)
                released.append((rel.extra["analyses"], rel.bounds.to_json()))
        assert released[0] == released[1]  # same seed, same exact counts: same release


def test_the_trips_per_user_a_bound_is_chosen_from_are_the_same_in_buckets() -> None:
    from privmob.privacy.bound_choice import BoundChoice
    from privmob.releases.report.build import _trips_per_user

    tess = square_grid((-74.05, 40.6, -73.75, 40.9), 4000)
    df = points(120, seed=5)
    per_user = df.groupby("uid")["tid"].nunique()
    choice = BoundChoice(max_bound=20)
    want = np.zeros(22, dtype=np.int64)  # users per count, above 20 at 21
    for n, users in per_user.clip(upper=21).value_counts().items():
        want[n] = users
    for b in (1, 4):
        with DuckDBEngine() as eng:
            loaded = load_trip_points(df, engine=eng, tessellation=tess)
            got = _trips_per_user(eng, loaded, choice, b, lambda _m: None)
        assert np.array_equal(got, want), b


def test_report_plans_buckets_for_its_heavier_rows() -> None:
    from privmob.releases.report.build import REPORT_MEMORY_FACTOR, report_memory

    assert report_memory(None) is None
    assert report_memory("8GB") == int(8e9 / REPORT_MEMORY_FACTOR)
    assert report_memory(10**9) == int(1e9 / REPORT_MEMORY_FACTOR)


def test_trips_built_in_user_slices_equal_one_pass() -> None:
    # the trips table built in user slices, one after the other (the report's large inputs on
    # DuckDB), holds the same rows as one pass, and so the same counts: every user is in one
    # slice and bounding is per user (slicing by trip would keep other trips of the users
    # above M, and the bounded trips would differ)
    from privmob.releases.report.build import exact_counts

    tess = square_grid((-74.05, 40.6, -73.75, 40.9), 4000)
    tiles = Tiles.from_tessellation(tess)
    cfg = ReportConfig.build(epsilon=1, max_trips=6, period=("2024-01-01", "2024-01-29"))
    tables, counts = [], []
    with DuckDBEngine() as eng:
        loaded = load_trip_points(points(120, seed=11), engine=eng, tessellation=tess)
        for slices in (1, 2, 3):
            counts.append(exact_counts(eng, loaded.view, cfg, tiles, key=5, slices=slices))
            tables.append(eng.fetch("SELECT * FROM pm_trips ORDER BY uid, tid"))
    for table, count in zip(tables[1:], counts[1:], strict=True):
        pd.testing.assert_frame_equal(table, tables[0])
        assert all(np.array_equal(count[n], counts[0][n]) for n in counts[0])
    kept = tables[0].groupby("uid").size()
    assert kept.max() == 6 and len(tables[0]) < len(points(120, seed=11).groupby(["uid", "tid"]))


def test_trips_are_sliced_on_duckdb_for_large_inputs_only() -> None:
    from privmob.releases.report.build import TRIP_SLICE_ROWS, TRIP_SLICES, trip_slices

    with DuckDBEngine() as eng:
        assert trip_slices(eng, None) == 1
        assert trip_slices(eng, TRIP_SLICE_ROWS - 1) == 1
        assert trip_slices(eng, TRIP_SLICE_ROWS) == TRIP_SLICES > 1


def test_polygon_tiles_assigned_per_bucket_equal_one_pass(shared_data, monkeypatch) -> None:
    # on real polygons (NYC taxi zones) the buckets are written from the untiled points and
    # each bucket assigns the tiles of its own coordinates: the counts equal one pass, and no
    # bucket is written through a join to the whole input's tile lookup (that join did not
    # fit in DuckDB's share of a 512 MB limit on 5M points)
    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    tiles = Tiles.from_tessellation(tess)
    df = points(120, seed=6)
    cfg = ReportConfig.build(epsilon=1, max_trips=6, period=("2024-01-01", "2024-01-29"))
    written = record_bucket_columns(monkeypatch)
    with DuckDBEngine() as eng:
        loaded = load_trip_points(df, engine=eng, tessellation=tess)
        one = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=1)
        four = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=4)
    assert len(written) == 4 and all("tile" not in cols for cols in written)
    assert one.keys() == four.keys()
    for name in one:
        assert np.array_equal(one[name], four[name]), name
    # points inside and outside the zones: both the tiles and the outliers cell are counted
    assert one["visits_per_tile"][:-1].sum() > 100 and one["visits_per_tile"][-1] > 0
