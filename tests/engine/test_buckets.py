"""Out-of-core counting by user buckets (DuckDB): same counts as one pass, bounds kept,
the input partitioned once into a private spill directory that never outlives the count."""

from __future__ import annotations

import math
import stat

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips, record_bucket_columns

from privmob.data import load_trips
from privmob.domain import Period
from privmob.engine import DuckDBEngine
from privmob.engine.buckets import (
    BUCKET_SHARE,
    BYTES_PER_ROW,
    DUCKDB_SHARE,
    SPILL_PREFIX,
    bucketed_counts,
    buckets_for,
    parse_memory,
    plan_buckets,
    user_buckets,
)
from privmob.errors import ConfigError
from privmob.prepare.inputs import load_trips_any
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.samplers import Randomness
from privmob.releases.od import ODDomain, exact_counts, od_matrix


@pytest.fixture(scope="module")
def events_files(tmp_path_factory):
    from privmob.data.synth import default_tessellation, synth_events

    d = tmp_path_factory.mktemp("ev")
    tess = default_tessellation(36)
    synth_events(
        d / "ev.parquet", d / "cells.parquet", n_users=80, days=3, tessellation=tess, seed=2
    )
    return d, tess


def load_events(eng, d, tess):
    return load_trips_any(
        str(d / "ev.parquet"),
        engine=eng,
        tessellation=tess,
        shape="events",
        cells=str(d / "cells.parquet"),
    )


def od_counts(trips, k, max_trips, buckets, period=None):
    period = period or Period.parse("day", "2024-01-01", "2024-01-04")
    return exact_counts(
        trips,
        domain=ODDomain(k, period.n_bins),
        period=period,
        unit=PrivacyUnit.USER,
        max_trips=max_trips,
        buckets=buckets,
        rng=Randomness.for_tests(3),
    )


def spill_dirs(parent):
    return [p for p in parent.iterdir() if p.name.startswith(SPILL_PREFIX)]


def test_filtered_view_buckets_partition_the_users(engine):
    df = random_trips(200, 9, seed=1)
    trips = load_trips(df, engine=engine, tessellation=box_grid(3))
    seen = []
    for part in user_buckets(trips, 7):
        seen.append(set(engine.fetch(f"SELECT DISTINCT uid FROM {part.view}")["uid"]))
    assert sum(len(s) for s in seen) == 200  # disjoint ...
    assert set().union(*seen) == set(range(200))  # ... and complete
    assert sum(1 for s in seen if s) >= 5  # and really split


def test_spilled_buckets_partition_the_users_in_a_private_directory(tmp_path):
    df = random_trips(300, 9, seed=4)
    n_buckets = 7
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = load_trips(df, engine=eng, tessellation=box_grid(3))
        seen: list[set[int]] = []
        dir_modes: list[int] = []
        other_access: list[int] = []  # group/other permission bits of spilled files
        rows: list[int] = []

        def count(part):
            (spill,) = spill_dirs(tmp_path)  # one spill directory while counting
            dir_modes.append(stat.S_IMODE(spill.stat().st_mode))
            files = [f for f in spill.rglob("*") if f.is_file()]
            other_access.extend(stat.S_IMODE(f.stat().st_mode) & 0o077 for f in files)
            got = eng.fetch(f"SELECT uid FROM {part.view}")["uid"]
            rows.append(len(got))
            seen.append(set(got))
            return np.array([len(got)])

        total = bucketed_counts(trips, count, n_buckets)
    assert total[0] == len(df) == sum(rows)  # every row read once, from its own bucket
    assert sum(len(s) for s in seen) == 300  # each user in exactly one bucket
    assert set().union(*seen) == set(range(300))
    assert sum(1 for s in seen if s) >= 5
    assert dir_modes == [0o700] * n_buckets  # the spill directory is private ...
    assert other_access and not any(other_access)  # ... and so are its files
    assert spill_dirs(tmp_path) == []  # removed after success


def test_the_bucket_writer_buffers_fewer_rows_per_bucket_the_more_buckets(tmp_path):
    """Under a memory limit the user-bucket writer (PARTITION_BY) buffers up to DuckDB's
    flush threshold per thread, in blocks kept per bucket: its threshold is DuckDB's share
    over buckets x threads (one threshold for any number of buckets ran out of DuckDB's 136
    MiB at 1 GB over 2,000 Voronoi cells: 94 buckets of 50M trip points with 356k rows; with
    20k rows the same write ran). The engine's own threshold is back after the write."""
    from privmob.engine.buckets import WRITER_FLUSH_ROWS, writer_flush_rows

    engine = int(136 * 2**20 / DUCKDB_SHARE)  # DuckDB's 136 MiB at 1 GB over 2,000 cells
    assert writer_flush_rows(engine, 94, 2) <= 20_000 < engine // 800
    assert writer_flush_rows(engine, 23, 2) > writer_flush_rows(engine, 94, 2)
    assert writer_flush_rows(engine, 1, 1) <= WRITER_FLUSH_ROWS[1]
    assert writer_flush_rows(engine, 10**6, 8) == WRITER_FLUSH_ROWS[0]

    class Spy:  # the threshold each COPY ran with
        def __init__(self, con):
            self.con, self.seen = con, []

        def execute(self, sql, *args):
            if sql.startswith("COPY"):
                setting = "SELECT current_setting('partitioned_write_flush_threshold')"
                self.seen.append(int(self.con.execute(setting).fetchone()[0]))
            return self.con.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.con, name)

    df = random_trips(200, 9, seed=4)
    with DuckDBEngine(memory_limit="2GB", spill_dir=tmp_path) as eng:
        trips = load_trips(df, engine=eng, tessellation=box_grid(3))
        setting = "SELECT current_setting('partitioned_write_flush_threshold') AS p"
        own = int(eng.fetch(setting)["p"].iloc[0])
        threads = int(eng.fetch("SELECT current_setting('threads') AS t")["t"].iloc[0])
        eng.con = spy = Spy(eng.con)
        total = bucketed_counts(trips, lambda part: np.array([1]), 50)
        eng.con = spy.con
        assert int(eng.fetch(setting)["p"].iloc[0]) == own
    assert total[0] == 50
    assert spy.seen == [writer_flush_rows(eng.memory_limit, 50, threads)]
    assert spy.seen[0] < own


def test_a_buckets_tile_lookup_is_dropped_once_the_bucket_is_counted(tmp_path):
    """Trips by coordinates over polygons get a tile lookup per user bucket (a DuckDB table
    within its memory limit): each is dropped once its bucket is counted. Kept, 23 of them
    (50M trips over 2,000 Voronoi cells at 1 GB) filled DuckDB's share by the 22nd bucket."""
    rng = np.random.default_rng(3)
    n = 400
    rides = pd.DataFrame(
        {
            "person": rng.integers(0, 60, n),
            "started_at": pd.Timestamp("2024-01-01 08:00") + pd.to_timedelta(np.arange(n), "min"),
            "start_lat": 52.0 + rng.random(n) * 0.03,
            "start_lng": 13.0 + rng.random(n) * 0.03,
            "end_lat": 52.0 + rng.random(n) * 0.03,
            "end_lng": 13.0 + rng.random(n) * 0.03,
        }
    )
    import geopandas as gpd
    import shapely

    from privmob.data.tessellation_input import load_tessellation

    frame = shapely.box(13.0, 52.0, 13.03, 52.03)  # 12 irregular cells: point in polygon
    seeds = shapely.multipoints(np.c_[13.0, 52.0] + rng.random((12, 2)) * 0.03)
    cells = [c & frame for c in shapely.get_parts(shapely.voronoi_polygons(seeds, extend_to=frame))]
    tess = load_tessellation(
        gpd.GeoDataFrame({"tile_id": range(len(cells))}, geometry=cells, crs="EPSG:4326")
    )
    tables = "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name LIKE 'pm_coordtiles%'"
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = load_trips_any(rides, engine=eng, tessellation=tess, columns={"uid": "person"})
        live: list[int] = []

        def count(part):
            got = eng.fetch(f"SELECT count(*) AS n FROM {part.view} WHERE origin >= 0")
            live.append(int(eng.fetch(tables)["n"].iloc[0]))
            return np.array([int(got["n"].iloc[0])])

        total = bucketed_counts(trips, count, 5)
        assert int(eng.fetch(tables)["n"].iloc[0]) == 0 and eng.stored == []
    assert live == [1] * 5  # one lookup at a time: this bucket's
    assert total[0] == n  # every trip counted once, in its own bucket


def test_spill_directory_is_removed_after_a_failure(tmp_path):
    df = random_trips(50, 9, seed=6)
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = load_trips(df, engine=eng, tessellation=box_grid(3))
        calls = []

        def failing(part):
            calls.append(1)
            assert spill_dirs(tmp_path)
            if len(calls) == 2:
                raise RuntimeError("disk full")
            return np.zeros(1)

        with pytest.raises(RuntimeError, match="disk full"):
            bucketed_counts(trips, failing, 4)
    assert len(calls) == 2
    assert spill_dirs(tmp_path) == []


def test_unusable_spill_directory_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with DuckDBEngine() as eng:
        trips = load_trips(random_trips(20, 9, seed=7), engine=eng, tessellation=box_grid(3))
        with pytest.raises(ConfigError, match="spill directory"):
            bucketed_counts(trips, lambda p: np.zeros(1), 3, spill_dir=blocker / "sub")


def test_bucketed_events_counts_equal_one_pass(events_files, tmp_path):
    d, tess = events_files
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = load_events(eng, d, tess)
        one = od_counts(trips, tess.k, 10**6, buckets=1)
        many = od_counts(trips, tess.k, 10**6, buckets=6)
        assert spill_dirs(tmp_path) == []
    assert one.sum() > 100
    np.testing.assert_array_equal(one, many)


def test_bucketed_trips_and_trip_points_equal_one_pass(tmp_path):
    df = random_trips(120, 9, seed=8)
    points = df.melt(
        id_vars=["uid", "tid", "start_time"], value_vars=["origin", "destination"]
    ).rename(columns={"start_time": "datetime"})
    points["datetime"] += pd_seconds(points["variable"].eq("destination").astype(int) * 600)
    grid = box_grid(3)  # tile t = row t // 3, column t % 3, 0.01 degree squares
    points["lng"] = 13.0 + (points["value"] % 3 + 0.5) * 0.01
    points["lat"] = 52.0 + (points["value"] // 3 + 0.5) * 0.01
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        for shape, data in (("trips", df), ("trip-points", points)):
            cols = ["uid", "tid", "datetime", "lat", "lng"]
            trips = load_trips_any(
                data if shape == "trips" else data[cols],
                engine=eng,
                tessellation=grid,
                shape=shape,
            )
            one = od_counts(trips, 9, 10**6, buckets=1, period=Period())
            many = od_counts(trips, 9, 10**6, buckets=5, period=Period())
            assert one.sum() == len(df), shape
            np.testing.assert_array_equal(one, many)


def test_coordinate_trips_tiled_per_bucket_equal_one_pass(shared_data, monkeypatch):
    # one-row trips given by coordinates on real polygons (NYC taxi zones): the buckets are
    # written from the untiled trips and each bucket assigns the tiles of its own trip ends;
    # the counts equal one pass, one pass equals the tiles the tessellation assigns, and no
    # lookup of the whole input's trip ends is built for a run in buckets
    from privmob.data import sources
    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    k = tess.k
    rng = np.random.default_rng(11)
    n_users = 150
    uid = np.repeat(np.arange(n_users), rng.integers(1, 13, n_users))
    n = uid.size
    places = np.column_stack([rng.uniform(-74.02, -73.78, 40), rng.uniform(40.6, 40.85, 40)])
    ends = []
    for _ in ("origin", "destination"):  # shared places (lookups overlap) and fresh points,
        xy = places[rng.integers(0, 40, n)]  # some outside every zone (water, New Jersey)
        fresh = rng.random(n) < 0.4
        xy[fresh] = np.column_stack(
            [rng.uniform(-74.3, -73.65, fresh.sum()), rng.uniform(40.45, 40.95, fresh.sum())]
        )
        ends.append(xy)
    df = pd_frame(uid, ends)
    o = tess.assign(ends[0][:, 0], ends[0][:, 1])
    d = tess.assign(ends[1][:, 0], ends[1][:, 1])
    inside = (o >= 0) & (d >= 0)
    expected = np.zeros(k * k, np.int64)
    np.add.at(expected, o[inside & (o != d)] * k + d[inside & (o != d)], 1)

    lookups: list[int] = []
    tiles_of = sources.coordinate_tiles

    def counted_lookup(engine, tessellation, pairs_sql):
        name = tiles_of(engine, tessellation, pairs_sql)
        lookups.append(int(engine.fetch(f"SELECT count(*) AS n FROM {name}")["n"].iloc[0]))
        return name

    monkeypatch.setattr(sources, "coordinate_tiles", counted_lookup)
    written = record_bucket_columns(monkeypatch)
    distinct = len(np.unique(np.concatenate(ends), axis=0))
    with DuckDBEngine() as eng:
        trips = load_trips(df, engine=eng, tessellation=tess)
        assert lookups == []  # nothing looked up at loading
        many = od_counts(trips, k, 3, buckets=4, period=Period())
        assert len(written) == 4 and all("origin" not in cols for cols in written)
        assert len(lookups) == 4 and max(lookups) < distinct <= sum(lookups)
        unbounded_many = od_counts(trips, k, 10**6, buckets=4, period=Period())
        lookups.clear()
        one = od_counts(trips, k, 3, buckets=1, period=Period())
        assert lookups == [distinct]  # the whole input's lookup, built when read in one pass
        unbounded = od_counts(trips, k, 10**6, buckets=1, period=Period())
    np.testing.assert_array_equal(unbounded, unbounded_many)
    np.testing.assert_array_equal(unbounded[: k * k], expected)
    assert unbounded[k * k :].sum() == n - inside.sum()  # an end outside: the outliers cell
    assert expected.sum() > 150 and n - inside.sum() > 50
    # od draws a fresh bounding key per bucket: the kept trips differ (so do the kept ones
    # within a tile, counted but not released), their number does not
    diagonal = int((inside & (o == d)).sum())
    kept = np.minimum(np.bincount(uid), 3).sum()
    assert unbounded.sum() == n - diagonal
    for bounded in (one, many):
        assert kept - diagonal <= bounded.sum() <= kept < unbounded.sum()


def test_view_created_on_read_once_and_again_after_a_failure(engine):
    # Loaded.derived_on_read: the view is created at its first read, not when the relation is
    # built, printed or rebuilt per bucket; once; and again at the next read if it failed
    from privmob.engine.relation import Loaded

    engine.create_view("pm_test_base", "SELECT 1 AS uid")
    base = Loaded("pm_test_base", "s", "x", engine, ["uid"])
    calls: list[int] = []

    def create() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first creation fails")
        engine.create_view("pm_test_on_read", "SELECT uid FROM pm_test_base")

    rel = base.derived_on_read("pm_test_on_read", "y", ["uid"], create, lambda b: b)
    assert "not created" in repr(rel) and calls == [] and rel.columns == ["uid"]
    assert rel.derive is not None and rel.derive(base) is base and calls == []
    with pytest.raises(RuntimeError):
        _ = rel.view
    assert rel.view == "pm_test_on_read" and rel.view == "pm_test_on_read" and calls == [1, 1]
    assert engine.fetch(f"SELECT uid FROM {rel.view}")["uid"].tolist() == [1]


def pd_frame(uid, ends):
    import pandas as pd

    n = uid.size
    return pd.DataFrame(
        {
            "uid": uid,
            "tid": np.arange(n),
            "start_time": pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n) * 60, "s"),
            "origin_lat": ends[0][:, 1],
            "origin_lng": ends[0][:, 0],
            "destination_lat": ends[1][:, 1],
            "destination_lng": ends[1][:, 0],
        }
    )


def pd_seconds(values):
    import pandas as pd

    return pd.to_timedelta(values, unit="s")


def test_bucketed_truncation_keeps_the_bound(engine):
    df = random_trips(60, 9, seed=5, max_per_user=9)  # never within one tile
    expected = int(np.minimum(df.groupby("uid").size().to_numpy(), 2).sum())
    trips = load_trips(df, engine=engine, tessellation=box_grid(3))
    for b in (1, 4):
        assert od_counts(trips, 9, 2, buckets=b, period=Period()).sum() == expected


def test_bucket_estimate_follows_rows_and_limit():
    assert parse_memory("8GB") == 8 * 10**9 and parse_memory("512MiB") == 512 * 2**20
    for bad in ("lots", "1..2GB"):
        with pytest.raises(ConfigError):
            parse_memory(bad)
    rows = 10**9
    fits = math.ceil(rows * BYTES_PER_ROW / BUCKET_SHARE)  # just one bucket's share
    assert buckets_for(rows, fits) == 1
    assert buckets_for(rows, fits - 1) == 2
    assert buckets_for(rows, fits // 10 + 1) == 10
    assert buckets_for(rows, "12GB") == int(np.ceil(rows * BYTES_PER_ROW / (12e9 * BUCKET_SHARE)))
    # homes need less per event: 1.27B events at 12GB in one pass (3 buckets at 4GB), not 15
    from privmob.releases.population import HOME_BYTES_PER_ROW

    assert buckets_for(1_272_192_139, "12GB", HOME_BYTES_PER_ROW) == 1
    assert buckets_for(1_272_192_139, "4GB", HOME_BYTES_PER_ROW) == 3
    assert buckets_for(1_272_192_139, "12GB") == 15
    # the limit caps the process: the engine gets the limit minus the baseline RSS, and
    # DuckDB's own limit is a share of that (results and counts beside it)
    with DuckDBEngine(memory_limit="3GB") as eng:
        baseline = eng.process_memory.baseline
        assert 30e6 < baseline < 2e9 and eng.memory_limit == 3e9 - baseline
        got = eng.fetch("SELECT current_setting('memory_limit') AS m")["m"].iloc[0]
        want = DUCKDB_SHARE * (3e9 - baseline)
        # DuckDB shows the limit truncated to 0.1 GiB (1.2 GiB reads "1.1 GiB"), never above it
        shown = parse_memory(got.replace(" ", ""))
        assert -0.01 * 2**30 <= want - shown < 0.15 * 2**30


def test_memory_limit_plans_buckets_and_release_reports_them(events_files, accountant):
    d, tess = events_files
    with DuckDBEngine(memory_limit="3GB") as eng:
        trips = load_events(eng, d, tess)
        assert plan_buckets(trips, None) == 1
        rows = int(eng.fetch(f"SELECT count(*) AS n FROM {trips.base.view}")["n"].iloc[0])
        per_bucket = rows * BYTES_PER_ROW / BUCKET_SHARE
        assert plan_buckets(trips, int(per_bucket / 3) + 10) == 3
        steps: list[str] = []
        rel = od_matrix(
            trips,
            tessellation=tess,
            epsilon=1.0,
            accountant=accountant,
            max_trips=5,
            rng=1,
            buckets=3,
            step=steps.append,
        )
    assert [s for s in steps if "user bucket " in s] == [
        f"counting trips: user bucket {i}/3" for i in (1, 2, 3)
    ]  # one progress line per bucket, after the one partitioning pass
    assert "counting trips: writing 3 user buckets" in steps
    assert len(rel.tables["od"]) == tess.k * (tess.k - 1)


def test_unique_trips_are_rebuilt_per_bucket(events_files, tmp_path):
    from privmob.prepare.unique import unique_trips

    d, tess = events_files
    period = Period.parse("day", "2024-01-01", "2024-01-04")
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = unique_trips(load_events(eng, d, tess), period)
        assert trips.base is not None  # the window is cut per bucket, not above it
        one = od_counts(trips, tess.k, 10**6, buckets=1)
        many = od_counts(trips, tess.k, 10**6, buckets=4)
    assert one.sum() > 50
    np.testing.assert_array_equal(one, many)


def test_cli_memory_limit_and_spill_dir(tmp_path, monkeypatch):
    import privmob.engine.buckets as buckets_module
    from privmob.cli import main

    random_trips(50, 9, seed=9).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    spill = tmp_path / "spill"
    planned: list[int] = []
    plan = buckets_module.buckets_for
    monkeypatch.setattr(buckets_module, "BYTES_PER_ROW", 10**8)  # tiny input, many buckets
    monkeypatch.setattr(
        buckets_module, "buckets_for", lambda *a: planned.append(plan(*a)) or planned[-1]
    )
    args = ["od", str(tmp_path / "trips.parquet"), "-t", str(tmp_path / "grid.geojson")]
    args += ["-e", "0.5", "-T", "2", "--budget", "1", "--ledger", str(tmp_path / "l.sqlite")]
    args += ["-o", str(tmp_path / "out"), "--quiet"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--memory-limit", "3GB", "--spill-dir", str(spill)])
    assert exc.value.code in (0, None)
    assert planned and planned[0] > 1  # really bucketed ...
    assert spill.is_dir() and spill_dirs(spill) == []  # ... and nothing left behind
    assert (tmp_path / "out" / "od.parquet").exists()


def test_plan_counts_rows_of_a_csv_folder(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    df = random_trips(30, 9, seed=10)
    df.iloc[:40].to_csv(folder / "a.csv", index=False)
    df.iloc[40:].to_csv(folder / "b.csv", index=False)
    with DuckDBEngine() as eng:
        trips = load_trips(str(folder), engine=eng, tessellation=box_grid(3))
        assert plan_buckets(trips, math.ceil(len(df) * BYTES_PER_ROW / BUCKET_SHARE)) == 1
        assert plan_buckets(trips, math.ceil(len(df) * BYTES_PER_ROW / BUCKET_SHARE / 3)) == 3


def test_population_series_and_density_buckets_equal_one_pass(events_files, tmp_path):
    """The event releases without trips: homes (population), per-bin bounded zone counts
    (series-counts) and the density pre-sampling, summed over 4 spilled user buckets, equal
    the single pass for the same key, with bounds that truncate (1 event per user and bin,
    3 hourly visits per user); one progress line per bucket; no spill file left."""
    from datetime import datetime

    from privmob.data.sources import load_events as load_event_rows
    from privmob.domain import time_grid
    from privmob.prepare.presample import bucketed_density_counts
    from privmob.releases.landmark_counts import bounded_zone_counts
    from privmob.releases.population import exact_home_counts

    d, tess = events_files
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        ev = load_event_rows(
            str(d / "ev.parquet"), engine=eng, tessellation=tess, cells=str(d / "cells.parquet")
        )
        homes = [exact_home_counts(ev, tess.k, buckets=b) for b in (1, 4)]
        grid = time_grid("2024-01-01", "2024-01-03", "1h")  # the third day is out of period
        series = [
            bounded_zone_counts(
                ev, tiles=tess.k, grid=grid, max_per_bin=1, rng=Randomness(seed=5), buckets=b
            )
            for b in (1, 4)
        ]
        steps: list[str] = []
        week = datetime(2024, 1, 1)
        dens = [
            bucketed_density_counts(ev, tess.k, week, 3, key=77, buckets=b, step=steps.append)
            for b in (1, 4)
        ]
        assert spill_dirs(tmp_path) == []
    np.testing.assert_array_equal(homes[0], homes[1])
    assert homes[0].sum() == 80  # every user has exactly one home cell
    np.testing.assert_array_equal(series[0][0], series[1][0])
    assert series[0][1] == series[1][1] > 0  # the out-of-period cell
    one, many = dens
    np.testing.assert_array_equal(one.sampled, many.sampled)
    np.testing.assert_array_equal(one.one_visit, many.one_visit)
    assert (one.total_visits, one.outside) == (many.total_visits, many.outside)
    assert one.sampled.sum() <= 3 * 80 and one.sampled.sum() < one.total_visits  # truncated
    assert [s for s in steps if "user bucket " in s] == [
        f"pre-sampling: user bucket {i}/4" for i in (1, 2, 3, 4)
    ]


def test_plan_takes_the_validation_count_without_a_query(tmp_path):
    """A validated input's rows come from its validation pass: planning asks the engine
    nothing (a count through the loaded view reads the whole input again)."""
    df = random_trips(30, 9, seed=11)
    df.to_csv(tmp_path / "trips.csv", index=False)
    with DuckDBEngine() as eng:
        trips = load_trips(tmp_path / "trips.csv", engine=eng, tessellation=box_grid(3))
        assert trips.rows == len(df)
        asked = []
        fetch = eng.fetch
        eng.fetch = lambda sql: asked.append(sql) or fetch(sql)
        limit = math.ceil(len(df) * BYTES_PER_ROW / BUCKET_SHARE / 2)
        assert plan_buckets(trips, limit) == 2 and asked == []
