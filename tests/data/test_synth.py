"""Synthetic mobility: schema, determinism, statistical shape, streaming, cells table.

All tests use fixed seeds, so they are deterministic (false-failure rate 0 for a given numpy
version); the thresholds are set well inside what the model produces (e.g. the max/mean ratio
of trips per user is ~40 for lognormal sigma=1 with 4,000 users; the test asks for > 8), so a
broken rhythm or tail (a flat hour profile, equal weekday/weekend volumes, a Poisson count
per user) fails them.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely

from privmob.data.synth import (
    SynthConfig,
    default_cells_path,
    default_tessellation,
    iter_synthetic,
    synth_events,
    synth_trip_points,
    synth_trips,
    write_synthetic,
)
from privmob.data.tessellation import Tessellation
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError

SMALL = {"n_users": 1500, "days": 14, "mean_trips_per_user": 12.0, "seed": 7}


def read(path: Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


@pytest.fixture(scope="module")
def trips(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    p = tmp_path_factory.mktemp("synth") / "trips.parquet"
    synth_trips(p, n_users=4000, days=28, mean_trips_per_user=15.0, seed=11)
    return read(p)


def test_trips_schema_and_ids(tmp_path: Path) -> None:
    s = synth_trips(tmp_path / "t.parquet", coordinates=True, **SMALL)
    schema = pq.read_schema(s.path)
    assert schema.names == [
        "uid",
        "tid",
        "start_time",
        "end_time",
        "origin",
        "destination",
        "origin_lat",
        "origin_lng",
        "destination_lat",
        "destination_lng",
    ]
    assert schema.field("start_time").type == pa.timestamp("us", tz="UTC")
    assert schema.field("origin").type == pa.int64()
    df = read(s.path)
    assert s.rows == len(df) and df["uid"].nunique() == SMALL["n_users"]
    tess = default_tessellation()
    assert set(df["origin"]).issubset(set(tess.tile_ids))
    assert (df["end_time"] > df["start_time"]).all()
    # tid = 0..n-1 per user in time order
    g = df.groupby("uid")
    assert (g["tid"].min() == 0).all() and (g["tid"].max() + 1 == g.size()).all()
    assert g["start_time"].apply(lambda t: t.is_monotonic_increasing).all()
    # the period is respected
    assert df["start_time"].min() >= pd.Timestamp("2024-01-01", tz="UTC")
    assert df["start_time"].max() < pd.Timestamp("2024-01-15", tz="UTC")
    # coordinates fall in the stated tiles
    o = tess.assign(df["origin_lng"].to_numpy(), df["origin_lat"].to_numpy())
    d = tess.assign(df["destination_lng"].to_numpy(), df["destination_lat"].to_numpy())
    assert np.array_equal(np.asarray(tess.tile_ids)[o], df["origin"].to_numpy())
    assert np.array_equal(np.asarray(tess.tile_ids)[d], df["destination"].to_numpy())


def test_points_inside_irregular_polygons(tmp_path: Path) -> None:
    # concave polygon, multipolygon and string ids: the triangle sampler stays inside
    u = shapely.Polygon([(0, 0), (3, 0), (3, 3), (2, 3), (2, 1), (1, 1), (1, 3), (0, 3)])
    mp = shapely.MultiPolygon([shapely.box(4, 0, 5, 1), shapely.box(6, 2, 7, 3)])
    gdf = gpd.GeoDataFrame({"tile_id": ["u", "m"]}, geometry=[u, mp], crs=4326)
    tess = load_tessellation(gdf)
    s = synth_trips(tmp_path / "t.parquet", tessellation=tess, coordinates=True, **SMALL)
    df = read(s.path)
    assert pq.read_schema(s.path).field("origin").type == pa.string()
    got = np.asarray(tess.tile_ids)[tess.assign(df["origin_lng"], df["origin_lat"])]
    assert np.array_equal(got, df["origin"].to_numpy())
    # nothing in the notch of the U or between the two squares of the multipolygon
    assert not ((df["origin_lng"].between(1, 2)) & (df["origin_lat"] > 1)).any()
    assert not df["origin_lng"].between(5, 6).any()


def test_real_tessellation_points(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "nyc_taxi_zones" / "taxi_zones.geojson"
    if not path.exists():
        pytest.skip(f"{path} not found (real-data tests need ../shared/data)")
    tess = load_tessellation(path)
    s = synth_trips(tmp_path / "t.parquet", tessellation=tess, coordinates=True, **SMALL)
    df = read(s.path)
    got = np.asarray(tess.tile_ids)[tess.assign(df["destination_lng"], df["destination_lat"])]
    assert np.array_equal(got, df["destination"].to_numpy())


def test_determinism(tmp_path: Path) -> None:
    for kind in ("trips", "trip-points", "events"):
        a = write_synthetic(kind, tmp_path / f"a-{kind}.parquet", SynthConfig(**SMALL))
        b = write_synthetic(kind, tmp_path / f"b-{kind}.parquet", SynthConfig(**SMALL))
        assert pq.read_table(a.path).equals(pq.read_table(b.path)), kind
    c = write_synthetic("trips", tmp_path / "c.parquet", SynthConfig(**{**SMALL, "seed": 8}))
    assert not pq.read_table(c.path).equals(pq.read_table(tmp_path / "a-trips.parquet"))


def test_heavy_tailed_trips_per_user(trips: pd.DataFrame) -> None:
    per_user = trips.groupby("uid").size()
    assert 12 < per_user.mean() < 18  # configured mean 15
    assert per_user.max() > 8 * per_user.mean()
    assert per_user.median() < per_user.mean()  # right-skewed


def test_weekly_rhythm(trips: pd.DataFrame) -> None:
    day = trips["start_time"].dt.floor("D")
    per_day = trips.groupby(day).size()
    weekend = per_day.index.day_of_week >= 5
    assert per_day[~weekend].mean() > 1.3 * per_day[weekend].mean()


def test_daily_rhythm(trips: pd.DataFrame) -> None:
    wd = trips[trips["start_time"].dt.day_of_week < 5]
    hours = wd["start_time"].dt.hour.value_counts().reindex(range(24), fill_value=0)
    assert hours.loc[6:9].idxmax() in (7, 8, 9)
    assert hours.loc[15:20].idxmax() in (16, 17, 18, 19)
    assert hours.loc[7:9].max() > 1.5 * hours.loc[11:14].mean()  # a real morning peak
    assert hours.loc[0:4].sum() < 0.03 * hours.sum()  # quiet nights
    we = trips[trips["start_time"].dt.day_of_week >= 5]
    we_hours = we["start_time"].dt.hour.value_counts().reindex(range(24), fill_value=0)
    assert we_hours.loc[7:8].sum() < we_hours.loc[12:15].sum() / 2  # no commute at weekends


def test_commutes_go_to_a_few_central_tiles(trips: pd.DataFrame) -> None:
    t = trips["start_time"].dt
    morning = trips[t.hour.between(7, 8) & (t.day_of_week < 5)]
    top = morning["destination"].value_counts(normalize=True)
    homes = trips["origin"].value_counts(normalize=True)
    assert top.iloc[:5].sum() > homes.iloc[:5].sum()  # destinations more concentrated


def test_timezone_shifts_the_rhythm(tmp_path: Path) -> None:
    # the period spans the end of daylight saving time (2024-11-03): ambiguous hours are fine
    cfg = {**SMALL, "start": "2024-10-28"}
    s = synth_trips(tmp_path / "t.parquet", timezone="America/New_York", **cfg)
    df = read(s.path)
    wd = df[df["start_time"].dt.tz_convert("America/New_York").dt.day_of_week < 5]
    local = wd["start_time"].dt.tz_convert("America/New_York").dt.hour.value_counts()
    utc = wd["start_time"].dt.hour.value_counts()
    assert local.loc[7:9].sum() > 2 * local.loc[12:14].sum() / 3
    assert utc.loc[12:14].sum() > utc.loc[7:9].sum()  # 8:00 EST is 13:00 UTC


def test_trip_points(tmp_path: Path) -> None:
    s = synth_trip_points(tmp_path / "p.parquet", **SMALL)
    assert pq.read_schema(s.path).names == ["uid", "tid", "datetime", "lat", "lng"]
    df = read(s.path)
    n = df.groupby(["uid", "tid"]).size()
    assert n.min() >= 2 and 2.5 < n.mean() < 3.5  # origin + destination + Poisson(1)
    assert df.groupby(["uid", "tid"])["datetime"].apply(lambda t: t.is_monotonic_increasing).all()
    t = read(synth_trips(tmp_path / "t.parquet", coordinates=True, **SMALL).path)
    first = df.groupby(["uid", "tid"]).first().reset_index()
    merged = first.merge(t, on=["uid", "tid"])
    assert len(merged) == len(t)
    assert (merged["datetime"] == merged["start_time"]).all()
    assert np.allclose(merged["lat"], merged["origin_lat"])


def test_events_and_cells(tmp_path: Path) -> None:
    s = synth_events(tmp_path / "e.parquet", n_towers=300, **SMALL)
    assert s.cells_path == default_cells_path(tmp_path / "e.parquet") and s.cells == 300
    assert pq.read_schema(s.path).names == ["uid", "datetime", "cell_id"]
    assert pq.read_schema(s.cells_path).names == ["cell_id", "lat", "lng"]
    ev, cells = read(s.path), read(s.cells_path)
    assert cells["cell_id"].is_unique and set(ev["cell_id"]).issubset(set(cells["cell_id"]))
    tess = default_tessellation()
    assert (tess.assign(cells["lng"].to_numpy(), cells["lat"].to_numpy()) >= 0).all()
    assert ev.groupby("uid")["datetime"].apply(lambda t: t.is_monotonic_increasing).all()
    # home anchor at night: a user's night events sit on one tower
    h = ev["datetime"].dt.hour
    night = ev[(h < 5) | (h >= 23)]
    modal_share = night.groupby("uid")["cell_id"].agg(
        lambda c: c.value_counts(normalize=True).iloc[0]
    )
    assert modal_share.median() > 0.8
    # ... and office hours on weekdays mostly elsewhere (the work tower)
    office = ev[(h >= 10) & (h < 16) & (ev["datetime"].dt.day_of_week < 5)]
    home = night.groupby("uid")["cell_id"].agg(lambda c: c.mode().iloc[0])
    work = office.groupby("uid")["cell_id"].agg(lambda c: c.mode().iloc[0])
    both = home.index.intersection(work.index)
    assert (home[both] != work[both]).mean() > 0.7
    # along trips: the same config's trips (same seed stream) have records strictly inside
    # their interval for ~1 - exp(-0.5) = 39% of trips (plus a few stays falling inside)
    t = read(synth_trips(tmp_path / "t.parquet", **SMALL).path)
    m = t.merge(ev, on="uid")
    inside = (m["datetime"] > m["start_time"]) & (m["datetime"] < m["end_time"])
    share = (
        m[inside]
        .groupby(["uid", "tid"])
        .size()
        .reindex(pd.MultiIndex.from_frame(t[["uid", "tid"]]), fill_value=0)
    )
    assert 0.3 < (share > 0).mean() < 0.55
    # and departures are recorded at their exact start time for ~70% of trips
    starts = t.merge(ev, left_on=["uid", "start_time"], right_on=["uid", "datetime"])
    assert 0.6 < starts[["uid", "tid"]].drop_duplicates().shape[0] / len(t) < 0.8


def test_streaming_bounded_memory(tmp_path: Path) -> None:
    def peak(n_users: int) -> tuple[int, int]:
        cfg = SynthConfig(n_users=n_users, days=7, mean_trips_per_user=10, chunk_users=400)
        tracemalloc.start()
        s = write_synthetic("trips", tmp_path / f"m{n_users}.parquet", cfg)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert s.chunks == -(-n_users // 400)
        assert pq.ParquetFile(s.path).num_row_groups == s.chunks
        return top, s.rows

    small, rows_small = peak(800)
    large, rows_large = peak(8000)
    assert rows_large > 8 * rows_small
    assert large < 1.5 * small  # 10x the data, about the same peak


def test_iter_synthetic_chunks_match_file(tmp_path: Path) -> None:
    cfg = SynthConfig(**{**SMALL, "chunk_users": 500})
    tables = list(iter_synthetic("trips", cfg))
    assert len(tables) == 3
    s = write_synthetic("trips", tmp_path / "t.parquet", cfg)
    assert pa.concat_tables(tables).equals(pq.read_table(s.path))


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="n_users"):
        synth_trips(tmp_path / "x.parquet", n_users=0)
    with pytest.raises(ConfigError, match="start"):
        synth_trips(tmp_path / "x.parquet", start="yesterday-ish")
    with pytest.raises(ConfigError, match="unknown kind"):
        write_synthetic("checkins", tmp_path / "x.parquet")  # type: ignore[arg-type]


def test_tessellation_from_file_and_grid(tmp_path: Path) -> None:
    gj = tmp_path / "tiles.geojson"
    gj.write_text(json.dumps(default_tessellation(50).to_geojson_dict()))
    s = synth_trips(tmp_path / "t.parquet", tessellation=gj, **SMALL)
    assert s.tiles == load_tessellation(gj).k
    assert isinstance(default_tessellation(50), Tessellation)


def test_interrupted_run_leaves_no_file(tmp_path: Path) -> None:
    def stop(users_done: int, rows: int) -> None:
        raise KeyboardInterrupt

    out = tmp_path / "t.parquet"
    with pytest.raises(KeyboardInterrupt):
        write_synthetic("trips", out, SynthConfig(**{**SMALL, "chunk_users": 500}), progress=stop)
    assert list(tmp_path.iterdir()) == []
