"""``--input-timezone`` (how timestamps without an offset are read) is separate from
``--timezone`` (the zone of the release's bins): naive-UTC data can be binned in local time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from privmob.cli import series
from privmob.data.times import Clock, clock

#: 40 users, one event each at 15:10 UTC on 2024-01-01 (10:10 in New York), written naive
NAIVE_UTC = "2024-01-01 15:10:00"


@pytest.fixture
def events(tmp_path: Path) -> tuple[Path, Path]:
    ev = tmp_path / "ev.csv"
    ev.write_text(
        "uid,datetime,lat,lng\n" + "".join(f"u{i},{NAIVE_UTC},0.5,0.5\n" for i in range(40))
    )
    zones = tmp_path / "z.geojson"
    square = [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]
    feature = {"type": "Feature", "properties": {"tile_id": "a"},
               "geometry": {"type": "Polygon", "coordinates": square}}  # fmt: skip
    zones.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    return ev, zones


def _hour_with_events(tmp_path: Path, ev: Path, zones: Path, *tz: str) -> list[int]:
    app = typer.Typer()
    series.register(app)
    out = tmp_path / f"out{len(tz)}"
    res = CliRunner().invoke(
        app,
        ["series-counts", str(ev), "-t", str(zones), "--start", "2024-01-01", "--end",
         "2024-01-02", "-e", "1000", "--budget", "2000", "--test-mode", "-q", "-o", str(out),
         *tz],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    counts = pd.read_parquet(out / "series.parquet")
    return [ts.hour for ts in counts.loc[counts["value"] > 20, "timestamp"]]


def test_naive_utc_events_binned_in_local_time(events: tuple[Path, Path], tmp_path: Path) -> None:
    # epsilon 1000 over 24 bins: P(a bin's noise moves a count of 40 or 0 past 20) < 1e-300
    ev, zones = events
    local = ["--timezone", "America/New_York"]
    assert _hour_with_events(tmp_path, ev, zones, *local, "--input-timezone", "UTC") == [10]
    # without --input-timezone naive timestamps are read in --timezone (as before)
    assert _hour_with_events(tmp_path, ev, zones, *local) == [15]


def test_the_loader_and_the_session_read_naive_timestamps_in_the_input_zone(
    events: tuple[Path, Path],
) -> None:
    import privmob as pm
    from privmob.data import load_events
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import make_engine

    ev, zones = events
    assert clock("UTC") == "UTC" and not isinstance(clock("UTC", "UTC"), Clock)
    eng = make_engine("duckdb")
    tess = load_tessellation(zones)
    loaded = load_events(
        str(ev), engine=eng, tessellation=tess, timezone=clock("America/New_York", "UTC")
    )
    got = eng.fetch(f"SELECT DISTINCT time FROM {loaded.view}")["time"].tolist()
    assert got == [pd.Timestamp("2024-01-01 10:10:00")]
    with pm.Session(
        str(ev), tessellation=zones, budget=pm.PureDP(1), dataset="ev",
        timezone="Europe/Paris", input_timezone="UTC",
    ) as s:  # fmt: skip
        view = s._load_events().view
        got = s._started_engine.fetch(f"SELECT DISTINCT time FROM {view}")["time"].tolist()
    assert got == [pd.Timestamp("2024-01-01 16:10:00")]
