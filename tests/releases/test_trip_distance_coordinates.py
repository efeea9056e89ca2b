"""The trip distance from coordinates where the input has them (issue 42, item 5): trip points
and raw GPS traces give each trip's first and last point, so the distance is the great-circle
km between those, not between tile centroids, and a trip with an end outside the tessellation
keeps its distance (it stays outside for the tile dimensions). Hand-computed: along a meridian
the haversine distance is R x the latitude difference in radians (R = 6371.0088 km)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import box_grid

import privmob as pm
from privmob.releases.dimensions import parse_dimension

R_KM = 6371.0088
#: box_grid(3): 0.01 degree tiles over 13.00-13.03 E, 52.00-52.03 N
INSIDE = 6371.0088 * math.radians(52.028 - 52.001)  # 3.0023 km; centroids 52.005-52.025: 2.22
OUTSIDE = 6371.0088 * math.radians(52.095 - 52.005)  # 10.0076 km; the end is out of the grid
EDGES = "distance:0,2.5,3.5,9.5,10.5"  # [0, 2.5) holds the centroids' 2.22 km


def trip_points(tmp_path: Path) -> Path:
    rows = [
        ("u1", "a", "2024-01-01 08:00:00", 52.001, 13.005),
        ("u1", "a", "2024-01-01 08:10:00", 52.015, 13.005),
        ("u1", "a", "2024-01-01 08:20:00", 52.028, 13.005),
        ("u2", "b", "2024-01-01 09:00:00", 52.005, 13.005),
        ("u2", "b", "2024-01-01 09:30:00", 52.095, 13.005),
    ]
    path = tmp_path / "points.csv"
    pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"]).to_csv(path, index=False)
    return path


def gps_traces(tmp_path: Path) -> Path:
    """One person: 30 minutes at (52.005, 13.005), a ride north, 30 minutes at (52.095,
    13.005), outside the grid (stays of 20 minutes within 200 m: the defaults)."""
    t0 = pd.Timestamp("2024-01-01 08:00:00")
    rows = [("p", t0 + pd.Timedelta(minutes=m), 52.005, 13.005) for m in range(0, 35, 5)]
    rows += [("p", t0 + pd.Timedelta(minutes=45), 52.05, 13.005)]
    rows += [("p", t0 + pd.Timedelta(minutes=m), 52.095, 13.005) for m in range(60, 95, 5)]
    path = tmp_path / "gps.csv"
    pd.DataFrame(rows, columns=["uid", "datetime", "lat", "lng"]).to_csv(path, index=False)
    return path


def distances(s: pm.Session) -> list[float]:
    trips = s._load_counted("trips", [parse_dimension(EDGES)])
    got = trips.engine.fetch(f"SELECT distance_km FROM {trips.view} ORDER BY start_time")
    return got["distance_km"].tolist()


def test_trip_points_are_measured_between_their_first_and_last_point(tmp_path: Path) -> None:
    with pm.Session(
        str(trip_points(tmp_path)), tessellation=box_grid(3).gdf, seed=1, budget=1000
    ) as s:
        assert distances(s) == pytest.approx([INSIDE, OUTSIDE], rel=1e-9)
        # a release at a large epsilon (noise scale 0.01: no cell moves): both trips in the
        # bins of their own distance, none in the outliers cell
        got = s.counts(epsilon=100, by=[EDGES], records="trips", max_records=1).to_pandas()
        assert got["count"].tolist() == [0, 1, 0, 1]
        assert "great-circle km between the trip's start and end coordinates" in str(
            s.counts(epsilon=100, by=[EDGES], records="trips", max_records=1).metadata
        )
        # the tile dimensions still put the end outside the grid in the outliers cell
        od = s.counts(epsilon=100, by=["origin", "destination"], records="trips", max_records=1)
        frame = od.to_pandas()
        assert (
            int(frame["count"].sum()) == 1
        )  # trip a only (tile 0 -> tile 6); b is in the outliers cell


def test_gps_trips_are_measured_between_the_stays_coordinates(tmp_path: Path) -> None:
    with pm.Session(
        str(gps_traces(tmp_path)), tessellation=box_grid(3).gdf, shape="gps", seed=1
    ) as s:
        assert distances(s) == pytest.approx([OUTSIDE], rel=1e-9)


def test_a_tile_outside_the_tessellation_has_no_distance_even_in_an_open_last_bin(
    tmp_path: Path,
) -> None:
    """Trips given by tile ids: a trip from a tile id not in the tessellation has no centroid,
    so no distance, and is counted in the outliers cell, whatever the bins: before, its
    distance was half the Earth's circumference (20,015 km; SQL's LEAST skips a NULL) and a
    last bin of [3, 25000) km counted it."""
    rows = [("u1", 1, "2024-01-01 08:00:00", 0, 8), ("u2", 2, "2024-01-01 09:00:00", 99, 8)]
    path = tmp_path / "trips.csv"
    columns = ["uid", "tid", "start_time", "origin", "destination"]
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    with pm.Session(str(path), tessellation=box_grid(3).gdf, seed=1, budget=1000) as s:
        trips = s._load_counted("trips", [pm.Distance([0, 3, 25000])])
        got = trips.engine.fetch(f"SELECT tid, distance_km FROM {trips.view} ORDER BY tid")
        # tile 0 to tile 8: centroids (52.005, 13.005) and (52.025, 13.025), to 1e-6 (the
        # tessellation computes its centroids as areas' centres)
        assert got["distance_km"].iloc[0] == pytest.approx(
            2 * R_KM * math.asin(math.sqrt(
                math.sin(math.radians(0.01)) ** 2
                + math.cos(math.radians(52.005)) * math.cos(math.radians(52.025))
                * math.sin(math.radians(0.01)) ** 2
            )), rel=1e-6,
        )  # fmt: skip
        assert pd.isna(got["distance_km"].iloc[1])
        rel = s.counts(epsilon=100, by=["distance:0,3,25000"], max_records=1).release
        assert rel.tables["counts"]["count"].tolist() == [1, 0]
        assert int(rel.tables["outliers"]["count"].iloc[0]) == 1
