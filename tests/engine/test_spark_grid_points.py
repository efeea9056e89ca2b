"""Trip points on a regular grid: the in-engine tile arithmetic gives the same tiles on Spark
as on DuckDB and as the tessellation's own assignment (edges included). Needs Java."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.data.grids import square_grid
from privmob.data.sources import load_trip_points
from privmob.engine import DuckDBEngine

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_grid_trip_point_tiles_identical(spark_engine) -> None:
    tess = square_grid((-74.05, 40.6, -73.75, 40.9), 3000)
    rng = np.random.default_rng(1)
    e, f = tess.grid.lng_edges, tess.grid.lat_edges
    lng = np.r_[rng.uniform(-74.1, -73.7, 400), e, e[:5]]
    lat = np.r_[rng.uniform(40.55, 40.95, 400), np.full(len(e), f[2]), f[:5]]
    df = pd.DataFrame(
        {
            "uid": np.arange(len(lng)) // 4,
            "tid": np.arange(len(lng)) // 2,
            "datetime": pd.Timestamp("2024-01-02 10:00", tz="UTC")
            + pd.to_timedelta(np.arange(len(lng)), "min"),
            "lat": lat,
            "lng": lng,
        }
    )
    got = []
    for eng in (DuckDBEngine(), spark_engine):
        p = load_trip_points(df, engine=eng, tessellation=tess)
        got.append(eng.fetch(f"SELECT tid, time, tile FROM {p.view} ORDER BY tid, time"))
    assert got[0].equals(got[1])
    assert np.array_equal(got[0]["tile"].to_numpy(), tess.assign(lng, lat))
