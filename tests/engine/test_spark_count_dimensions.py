"""The count template's dimensions with declared edges and values give the same exact counts on
DuckDB and on Spark (local mode): trip distance from coordinates and from tile centroids, a
categorical column carried through the loader, time bins and zones. Bounds that truncate
nothing (the keyed sample differs between engines). Needs Java: marked ``spark``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips

import privmob as pm
from privmob.engine import DuckDBEngine

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXACT = 1e10  # noise scale <= 1e-4: the released counts are the exact counts
MANY = 10**6


def _counts(engine: object, data: pd.DataFrame, by: list[object], records: str) -> pd.DataFrame:
    with pm.Session(
        data, tessellation=box_grid(3), engine=engine, dataset="t", seed=1, budget=1e11
    ) as s:
        period = pm.Period("2024-01-01", "2024-01-04")
        rel = s.counts(
            epsilon=EXACT, by=by, records=records, max_records=MANY, period=period
        ).release
    return pd.concat([rel.tables["counts"], rel.tables["outliers"]])


def test_new_dimensions_count_the_same_on_both_engines(spark_engine: object) -> None:
    rng = np.random.default_rng(3)
    trips = random_trips(25, 9, seed=6)
    trips["end_time"] = trips["start_time"] + pd.to_timedelta(rng.integers(1, 90, len(trips)), "m")
    trips["mode"] = np.array(["bike", "car", "walk"])[rng.integers(0, 3, len(trips))]
    coords = trips.drop(columns=["origin", "destination"]).assign(
        origin_lat=52.0 + rng.random(len(trips)) * 0.03,
        origin_lng=13.0 + rng.random(len(trips)) * 0.03,
        destination_lat=52.0 + rng.random(len(trips)) * 0.03,
        destination_lng=13.0 + rng.random(len(trips)) * 0.03,
    )
    events = coords.rename(
        columns={"start_time": "datetime", "origin_lat": "lat", "origin_lng": "lng"}
    )[["uid", "datetime", "lat", "lng", "mode"]]
    cases = [
        (trips, ["distance:0,0.5,1,2", "mode:bike,car", "weekday"], "trips"),
        (coords, [pm.Distance([0, 0.5, 1, 2, 4]), "duration:0,30,60"], "trips"),
        (events, ["zone", pm.TimeBins("6h"), pm.Categorical("mode", ["walk"])], "events"),
    ]
    duck = DuckDBEngine()
    try:
        for data, by, records in cases:
            a = _counts(duck, data, by, records)
            b = _counts(spark_engine, data, by, records)
            assert a["count"].sum() == len(data)  # every record in a cell or the outliers
            pd.testing.assert_frame_equal(
                a.reset_index(drop=True).astype(str), b.reset_index(drop=True).astype(str)
            )
    finally:
        duck.close()


def test_trip_points_distance_from_their_ends_is_the_same_on_both_engines(
    spark_engine: object,
) -> None:
    """Trip points: the distance between each trip's first and last point (some ends outside
    the grid, which keep their distance) counts the same on DuckDB and Spark."""
    rng = np.random.default_rng(5)
    n = 40
    start = pd.Timestamp("2024-01-01 06:00") + pd.to_timedelta(rng.integers(0, 2 * 86_400, n), "s")
    ends = [
        pd.DataFrame(
            {
                "uid": np.arange(n) % 7,
                "tid": np.arange(n),
                "datetime": start + pd.Timedelta(minutes=minutes),
                "lat": 52.0 + rng.random(n) * 0.05,  # the grid spans 0.03 degree
                "lng": 13.0 + rng.random(n) * 0.05,
            }
        )
        for minutes in (0, 10, 25)
    ]
    points = pd.concat(ends, ignore_index=True)
    by: list[object] = [pm.Distance([0, 1, 2, 4, 8])]
    duck = DuckDBEngine()
    try:
        a = _counts(duck, points, by, "trips")
        b = _counts(spark_engine, points, by, "trips")
    finally:
        duck.close()
    assert a["count"].sum() == n and a["count"].iloc[:-1].sum() == n  # none without a distance
    pd.testing.assert_frame_equal(
        a.reset_index(drop=True).astype(str), b.reset_index(drop=True).astype(str)
    )
