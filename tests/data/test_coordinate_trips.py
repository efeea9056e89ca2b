"""One-row trips with start and end coordinates (Citi Bike, Divvy) are read as they are and
assigned to tiles by point-in-polygon; without a rider id only trip-level releases run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from tests.helpers import run_cli

from privmob.data import detect_shape
from privmob.data.grids import square_grid
from privmob.errors import InputError
from privmob.prepare.inputs import load_trips_any
from privmob.privacy.ledger import Ledger

JC_BOUNDS = [-74.1, 40.65, -73.95, 40.8]


@pytest.mark.parametrize("month", ["201704", "201801"])
def test_citibike_rides_are_read_directly(shared_data, engine, month):
    path = shared_data / "citibike_jc" / f"JC-{month}-citibike-tripdata.csv"
    tess = square_grid(JC_BOUNDS, 500)
    assert detect_shape(engine, str(path)) == "trips"
    trips = load_trips_any(str(path), engine=engine, tessellation=tess, uid_per_trip=True)
    got = engine.fetch(f"SELECT * FROM {trips.view} ORDER BY tid")
    raw = pd.read_csv(path)
    assert len(got) == len(raw)
    assert got["uid"].nunique() == len(raw)  # each ride its own unit
    o = tess.assign(raw["start station longitude"].to_numpy(), raw["start station latitude"])
    d = tess.assign(raw["end station longitude"].to_numpy(), raw["end station latitude"])
    want = pd.DataFrame(
        {
            "start_time": pd.to_datetime(raw["starttime"]),
            "end_time": pd.to_datetime(raw["stoptime"]),
            "origin": np.asarray(o, dtype=np.int64),
            "destination": np.asarray(d, dtype=np.int64),
        }
    )
    cols = list(want.columns)
    have = got[cols].astype({"origin": np.int64, "destination": np.int64})
    have["start_time"] = have["start_time"].astype(want["start_time"].dtype)
    have["end_time"] = have["end_time"].astype(want["end_time"].dtype)
    # the same rides (the engine's row order is not the file's)
    pd.testing.assert_frame_equal(
        have.sort_values(cols).reset_index(drop=True), want.sort_values(cols).reset_index(drop=True)
    )
    assert (got["origin"] >= 0).mean() > 0.9  # the grid covers Jersey City


def test_divvy_layout_is_read_with_ride_ids(engine):
    rides = pd.DataFrame(
        {
            "ride_id": ["A1", "B2", "C3"],
            "rideable_type": ["classic_bike"] * 3,
            "started_at": ["2024-05-01 08:00:00", "2024-05-01 09:00:00", "2024-05-02 10:00:00"],
            "ended_at": ["2024-05-01 08:20:00", "2024-05-01 09:15:00", "2024-05-02 10:30:00"],
            "start_lat": [40.70, 40.72, 99.0],
            "start_lng": [-74.05, -74.04, -74.0],
            "end_lat": [40.72, 40.70, 40.71],
            "end_lng": [-74.04, -74.05, -74.03],
            "member_casual": ["member", "casual", "member"],
        }
    )
    tess = square_grid(JC_BOUNDS, 500)
    with pytest.raises(InputError, match="latitude"):  # 99 degrees: refused, not dropped
        load_trips_any(rides, engine=engine, tessellation=tess, uid_per_trip=True)
    ok = rides.iloc[:2]
    loaded = load_trips_any(ok, engine=engine, tessellation=tess, uid_per_trip=True)
    got = engine.fetch(f"SELECT * FROM {loaded.view} ORDER BY tid")
    assert list(got["tid"]) == ["A1", "B2"] and list(got["uid"]) == ["A1", "B2"]
    assert list(got["origin"]) == list(tess.assign(ok["start_lng"].to_numpy(), ok["start_lat"]))


def test_user_level_needs_a_rider_id(engine):
    rides = pd.DataFrame(
        {"started_at": ["2024-05-01 08:00"], "start_lat": [40.7], "start_lng": [-74.05]}
        | {"end_lat": [40.71], "end_lng": [-74.04]}
    )
    with pytest.raises(InputError, match="--unit trip"):
        load_trips_any(rides, engine=engine, tessellation=square_grid(JC_BOUNDS, 500))
    with_uid = rides.assign(person=[7])
    got = load_trips_any(
        with_uid, engine=engine, tessellation=square_grid(JC_BOUNDS, 500), columns={"uid": "person"}
    )
    assert engine.fetch(f"SELECT uid FROM {got.view}")["uid"].tolist() == [7]


@pytest.mark.slow
def test_od_cli_on_citibike(shared_data, tmp_path, capsys):
    grid = tmp_path / "grid.geojson"
    grid.write_text(json.dumps(square_grid(JC_BOUNDS, 1000).to_geojson_dict()))
    data = str(shared_data / "citibike_jc" / "JC-201801-citibike-tripdata.csv")
    ledger = tmp_path / "l.sqlite"
    name = "citibike-jc"
    init = [
        "ledger",
        "init",
        name,
        "--make-key",
        "--epsilon",
        "5",
        "--unit",
        "trip",
        "--ledger",
        str(ledger),
    ]
    assert run_cli(init) == 0
    base = ["od", data, "-t", str(grid), "--epsilon", "1", "--ledger", str(ledger)]
    base += ["-q"]
    user = ["--dataset", "per-person", "--budget", "5", "--unit", "user", "--max-trips", "3"]
    assert run_cli([*base, *user, "-o", str(tmp_path / "u")]) != 0
    assert "--unit trip" in capsys.readouterr().err
    assert not (tmp_path / "u").exists()
    assert not Ledger(ledger).has_budget("per-person")  # a refused release creates nothing
    trip = ["--dataset", name, "--unit", "trip"]
    assert run_cli([*base, *trip, "-o", str(tmp_path / "t")]) == 0
    assert not pd.read_parquet(tmp_path / "t" / "od.parquet").empty
    assert Ledger(ledger).remaining(name).epsilon == 4
