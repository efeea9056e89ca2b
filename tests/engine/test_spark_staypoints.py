"""GPS traces -> trips by stay points: the same SQL gives the same trips and trip points on
Spark as on DuckDB (three Cabspotting taxis, epoch-second times, SF polygons). Needs Java."""

from __future__ import annotations

import pandas as pd
import pytest

from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.prepare.inputs import load_gps_points
from privmob.prepare.staypoints import gps_trips

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_gps_trips_identical_on_spark(spark_engine, shared_data) -> None:
    frames = []
    for path in sorted((shared_data / "cabspotting_sample").glob("new_*.txt"))[:3]:
        f = pd.read_csv(path, sep=r"\s+", header=None, names=["lat", "lng", "occupied", "datetime"])
        frames.append(f.assign(uid=path.stem.removeprefix("new_")))
    df = pd.concat(frames, ignore_index=True)[["uid", "datetime", "lat", "lng"]]
    tess = load_tessellation(shared_data / "sf_neighborhoods" / "sf_neighborhoods.geojson")
    got = []
    for eng in (DuckDBEngine(), spark_engine):
        points = load_gps_points(df, 150.0, 10.0, engine=eng, tessellation=tess)
        trips = eng.fetch(
            f"SELECT uid, tid, start_time, end_time, origin, destination "
            f"FROM {gps_trips(points).view} ORDER BY uid, tid"
        )
        seqs = eng.fetch(f"SELECT uid, tid, seq FROM {points.view} ORDER BY uid, seq")
        trips = trips.astype(
            {"tid": "int64", "origin": "int64", "destination": "int64"}
            | {"start_time": "datetime64[ns]", "end_time": "datetime64[ns]"}
        )
        got.append((trips, seqs.astype({"tid": "int64", "seq": "int64"})))
    assert len(got[0][0]) > 50
    pd.testing.assert_frame_equal(got[0][0], got[1][0])
    pd.testing.assert_frame_equal(got[0][1], got[1][1])
