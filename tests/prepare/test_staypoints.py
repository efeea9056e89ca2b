"""GPS traces -> trips by stay points: the engine's SQL against a plain pandas segmentation
of the same rule (docs/inputs.md), on GeoLife and Cabspotting."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privmob.data.grids import square_grid
from privmob.data.sources import load_events
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError
from privmob.prepare.staypoints import gps_trip_points, gps_trips

METRES_PER_DEGREE = 6_371_008.8 * math.pi / 180.0


def reference_segmentation(
    df: pd.DataFrame, tiles: np.ndarray, distance_m: float, minutes: float
) -> tuple[pd.DataFrame, set[tuple[str, int, int]]]:
    """The stay rule written plainly, user by user: (trips, {(uid, tid, seq)} trip points)."""
    df = df.assign(tile=tiles)
    dlat = distance_m / METRES_PER_DEGREE
    window = round(minutes * 60e6)
    trips, points = [], set()
    for uid, g in df.groupby("uid", sort=True):
        g = g.sort_values(["time", "lat", "lng"], kind="stable").reset_index(drop=True)
        us = g["time"].to_numpy("datetime64[us]").astype(np.int64)
        lat, lng, tile = g["lat"].to_numpy(), g["lng"].to_numpy(), g["tile"].to_numpy()
        n = len(g)
        stays: list[list[int]] = []  # [first row, last row]
        reach = -1
        for i in range(n):
            first = np.searchsorted(us, us[i], "left")  # points at the same time count too
            j = np.searchsorted(us, us[i] + window, "left")  # first point at/after t + T
            if j >= n:
                continue
            near_lat = np.all(np.abs(lat[first : j + 1] - lat[i]) <= dlat)
            coslat = math.cos(math.radians(lat[i]))
            near_lng = np.all(np.abs(lng[first : j + 1] - lng[i]) * coslat <= dlat)
            if not (near_lat and near_lng):
                continue
            if i > reach:
                stays.append([i, j])
            else:
                stays[-1][1] = max(stays[-1][1], j)
            reach = max(reach, j)
        for s in range(len(stays) - 1):
            b, a = stays[s][1], stays[s + 1][0]
            trips.append((uid, s + 1, g["time"][b], g["time"][a], tile[b], tile[a]))
            points |= {(uid, s + 1, k + 1) for k in range(b, a + 1)}
    cols = ["uid", "tid", "start_time", "end_time", "origin", "destination"]
    return pd.DataFrame(trips, columns=cols), points


def engine_segmentation(eng, df, tess, distance_m, minutes):
    events = load_events(df, engine=eng, tessellation=tess)
    pts = gps_trip_points(events, distance_m=distance_m, minutes=minutes)
    trips = eng.fetch(f"SELECT * FROM {gps_trips(pts).view}")
    seqs = eng.fetch(f"SELECT uid, tid, seq FROM {pts.view}")
    return trips, {(str(u), int(t), int(s)) for u, t, s in seqs.itertuples(index=False)}


def _compare(eng, df, tess, distance_m, minutes):
    ref_trips, ref_points = reference_segmentation(
        df, np.asarray(tess.assign(df["lng"].to_numpy(), df["lat"].to_numpy())), distance_m, minutes
    )
    got, got_points = engine_segmentation(eng, df, tess, distance_m, minutes)
    key = ["uid", "tid"]
    got = got.sort_values(key).reset_index(drop=True)
    got["tid"] = got["tid"].astype(np.int64)
    for col in ("origin", "destination"):
        got[col] = got[col].astype(np.int64)
        ref_trips[col] = ref_trips[col].astype(np.int64)
    ref_trips["start_time"] = ref_trips["start_time"].astype(got["start_time"].dtype)
    ref_trips["end_time"] = ref_trips["end_time"].astype(got["end_time"].dtype)
    pd.testing.assert_frame_equal(got, ref_trips.sort_values(key).reset_index(drop=True))
    assert got_points == ref_points
    return got


def geolife(shared_data: Path) -> pd.DataFrame:
    df = pd.read_csv(shared_data / "geolife_skmob" / "geolife_sample.txt.gz", dtype={"uid": str})
    return df.assign(time=pd.to_datetime(df["datetime"]))


def cabspotting(shared_data: Path) -> pd.DataFrame:
    frames = []
    for path in sorted((shared_data / "cabspotting_sample").glob("new_*.txt")):
        f = pd.read_csv(path, sep=r"\s+", header=None, names=["lat", "lng", "occupied", "ts"])
        frames.append(f.assign(uid=path.stem.removeprefix("new_")))
    df = pd.concat(frames, ignore_index=True)
    return df.assign(datetime=df["ts"], time=pd.to_datetime(df["ts"], unit="s"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("distance_m", "minutes", "users"), [(200.0, 20.0, ["001", "005"]), (100.0, 5.0, ["005"])]
)
def test_geolife_trips_equal_a_pandas_segmentation(shared_data, engine, distance_m, minutes, users):
    df = geolife(shared_data)
    df = df[df["uid"].isin(users)]
    bounds = [df.lng.min() - 0.01, df.lat.min() - 0.01, df.lng.max() + 0.01, df.lat.max() + 0.01]
    tess = square_grid(bounds, 2000)
    got = _compare(engine, df[["uid", "datetime", "lat", "lng", "time"]], tess, distance_m, minutes)
    assert len(got) > 100  # months of traces: many trips, not a degenerate result
    assert (got["origin"] != got["destination"]).mean() > 0.2


@pytest.mark.slow
def test_cabspotting_trips_equal_a_pandas_segmentation(shared_data, engine):
    """Ten taxis, epoch-second times, polygons (points outside San Francisco are -1)."""
    df = cabspotting(shared_data)
    tess = load_tessellation(shared_data / "sf_neighborhoods" / "sf_neighborhoods.geojson")
    got = _compare(engine, df[["uid", "datetime", "lat", "lng", "time"]], tess, 200.0, 20.0)
    assert got["uid"].nunique() == 10 and len(got) > 100


def _trace(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [("u", pd.Timestamp(t), lat, lng) for t, lat, lng in rows],
        columns=["uid", "datetime", "lat", "lng"],
    )


def test_a_trip_is_the_movement_between_two_stays(engine):
    """Home 08:00-08:30, a 10-minute drive, work 08:40-09:10: one trip from the last point at
    home to the first at work; the drive's points are its points."""
    home, work = (52.0, 13.0), (52.0, 13.1)
    rows = [(f"2024-01-01 08:{m:02d}", *home) for m in range(0, 31, 5)]
    rows += [(f"2024-01-01 08:{m}", 52.0, 13.0 + (m - 30) * 0.01) for m in (33, 36)]
    rows += [(f"2024-01-01 {h}:{m:02d}", *work) for h, m in [(8, 40), (8, 50), (9, 0), (9, 10)]]
    tess = square_grid([12.95, 51.95, 13.15, 52.05], 5000)
    trips, points = engine_segmentation(engine, _trace(rows), tess, 200.0, 20.0)
    assert len(trips) == 1
    t = trips.iloc[0]
    assert str(t["start_time"]) == "2024-01-01 08:30:00"
    assert str(t["end_time"]) == "2024-01-01 08:40:00"
    assert t["origin"] == tess.assign(np.array([13.0]), np.array([52.0]))[0]
    assert t["destination"] == tess.assign(np.array([13.1]), np.array([52.0]))[0]
    assert {s for _, _, s in points} == {7, 8, 9, 10}


def test_short_stops_and_unobserved_ends_are_no_stays(engine):
    """A 10-minute stop (< T) is not a stay; a trace that ends before T has passed at the last
    place is not one either: no two stays, no trip."""
    rows = [(f"2024-01-01 08:{m:02d}", 52.0, 13.0) for m in range(0, 25, 5)]  # stay (20 min)
    rows += [(f"2024-01-01 08:{m:02d}", 52.0, 13.05) for m in range(30, 41, 5)]  # 10 min stop
    rows += [(f"2024-01-01 09:{m:02d}", 52.0, 13.1) for m in range(0, 16, 5)]  # 15 min, ends
    tess = square_grid([12.95, 51.95, 13.15, 52.05], 5000)
    trips, _ = engine_segmentation(engine, _trace(rows), tess, 200.0, 20.0)
    assert trips.empty


def test_distance_is_a_square_of_side_2d(engine):
    """Points 190 m north and 190 m east of the first (269 m away) stay in the stay; 210 m
    north does not."""
    d = 190.0 / METRES_PER_DEGREE
    rows = [
        ("2024-01-01 08:00", 52.0, 13.0),
        ("2024-01-01 08:10", 52.0 + d, 13.0 + d / math.cos(math.radians(52.0))),
        ("2024-01-01 08:20", 52.0, 13.0),
        ("2024-01-01 09:00", 52.5, 13.0),
        ("2024-01-01 09:25", 52.5, 13.0),
    ]
    tess = square_grid([12.95, 51.95, 13.15, 52.6], 5000)
    trips, _ = engine_segmentation(engine, _trace(rows), tess, 200.0, 20.0)
    assert len(trips) == 1
    far = [*rows[:1], ("2024-01-01 08:10", 52.0 + 210.0 / METRES_PER_DEGREE, 13.0), *rows[2:]]
    trips, _ = engine_segmentation(engine, _trace(far), tess, 200.0, 20.0)
    assert trips.empty


@pytest.mark.parametrize(("distance_m", "minutes"), [(0.0, 20.0), (200.0, -1.0), (math.nan, 5.0)])
def test_thresholds_must_be_positive(engine, distance_m, minutes):
    tess = square_grid([12.95, 51.95, 13.15, 52.05], 5000)
    events = load_events(_trace([("2024-01-01", 52.0, 13.0)]), engine=engine, tessellation=tess)
    with pytest.raises(ConfigError, match="positive"):
        gps_trip_points(events, distance_m=distance_m, minutes=minutes)


@pytest.mark.slow
def test_gps_counts_in_user_buckets_equal_one_pass(shared_data, tmp_path):
    """Out of core (--memory-limit): the input is cut into user buckets before the stay
    rule's windows, and the bucket counts sum to the one-pass counts."""
    from privmob.domain import Period
    from privmob.engine import DuckDBEngine
    from privmob.prepare.inputs import load_trips_any
    from privmob.privacy.costs import PrivacyUnit
    from privmob.privacy.samplers import Randomness
    from privmob.releases.od import ODDomain, exact_counts

    df = cabspotting(shared_data)[["uid", "datetime", "lat", "lng"]]
    tess = load_tessellation(shared_data / "sf_neighborhoods" / "sf_neighborhoods.geojson")
    period = Period.parse("week", "2008-05-17", "2008-06-14")
    with DuckDBEngine(spill_dir=tmp_path) as eng:
        trips = load_trips_any(df, engine=eng, tessellation=tess, shape="gps")
        counts = [
            exact_counts(
                trips,
                domain=ODDomain(tess.k, period.n_bins),
                period=period,
                unit=PrivacyUnit.USER,
                max_trips=10**6,
                buckets=b,
                rng=Randomness.for_tests(3),
            )
            for b in (1, 4)
        ]
    assert counts[0].sum() > 100
    np.testing.assert_array_equal(counts[0], counts[1])
