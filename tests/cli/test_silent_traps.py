"""Traps that used to spend budget silently (issue 29): a tessellation in metres without a CRS,
a GPS log read as events, a tiny epsilon warned about only after the charge (then, issue 42,
charged after its warning: now refused unless confirmed). Each is refused or warned about
before anything is charged, on real files."""

from __future__ import annotations

import warnings
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import box
from tests.helpers import box_grid, run_cli

import privmob as pm
from privmob.errors import ConfigError, InputError, PrivmobWarning
from privmob.privacy.ledger import Ledger


def metres_geojson(tmp_path: Path) -> Path:
    """San Francisco tiles in UTM 10N metres, written without a CRS (GeoJSON readers then
    take EPSG:4326, GeoJSON's default)."""
    tiles = [box(550_000 + i * 1000, 4_180_000, 551_000 + i * 1000, 4_181_000) for i in range(3)]
    path = tmp_path / "sf_metres.geojson"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyogrio: "'crs' was not provided"
        gpd.GeoDataFrame({"tile_id": [0, 1, 2]}, geometry=tiles, crs=None).to_file(path)
    return path


def test_a_tessellation_in_metres_is_refused_before_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles = metres_geojson(tmp_path)
    assert gpd.read_file(tiles).crs.to_epsg() == 4326  # the trap: read as degrees
    # the data is not even a readable file: the tessellation is refused first
    data = tmp_path / "trips.csv"
    data.write_text("not,a\ntrips,file\n")
    ledger = tmp_path / "ledger.sqlite"
    argv = ["od", str(data), "-t", str(tiles), "-e", "1", "-T", "3", "--budget", "5"]
    argv += ["--ledger", str(ledger), "-o", str(tmp_path / "od")]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "sf_metres.geojson" in err and "cannot be longitude/latitude" in err
    assert "EPSG:4326" in err and "to_crs" in err  # what to do
    assert not ledger.exists() or Ledger(ledger).spent("trips").epsilon == 0
    with pytest.raises(InputError, match="cannot be longitude/latitude"):
        pm.Session(str(data), tessellation=str(tiles), budget=5)
    # the same tiles declared in metres are reprojected and accepted
    declared = tmp_path / "sf_declared.geojson"
    gpd.read_file(tiles).set_crs(32610, allow_override=True).to_file(declared)
    s = pm.Session(str(data), tessellation=str(declared), budget=5)
    lng, lat = s.tessellation.gdf.geometry.iloc[0].centroid.coords[0]
    assert -123 < lng < -122 and 37 < lat < 38.5
    s.close()


def cabspotting_events(shared: Path, tmp_path: Path) -> Path:
    """Two Cabspotting taxis as located events ``uid, datetime, lat, lng`` (no trip id)."""
    frames = []
    for path in sorted((shared / "cabspotting_sample").glob("new_*.txt"))[:2]:
        df = pd.read_csv(path, sep=" ", header=None, names=["lat", "lng", "occupied", "ts"])
        df["uid"] = path.stem
        df["datetime"] = pd.to_datetime(df["ts"], unit="s")
        frames.append(df[["uid", "datetime", "lat", "lng"]])
    out = tmp_path / "cabs.csv"
    pd.concat(frames).to_csv(out, index=False)
    return out


def sf_grid(tmp_path: Path) -> Path:
    path = tmp_path / "sf.geojson"
    box_grid(4, size=0.05, lng0=-122.52, lat0=37.70).gdf.to_file(path, driver="GeoJSON")
    return path


def test_a_gps_log_read_as_events_is_refused_before_the_charge(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, tiles = cabspotting_events(shared_data, tmp_path), sf_grid(tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    base = ["od", str(data), "-t", str(tiles), "-e", "1", "-T", "20", "--budget", "5"]
    base += ["--ledger", str(ledger), "--dataset", "cabs", "--quiet"]
    assert run_cli([*base, "-o", str(tmp_path / "a")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "of a GPS log (trips between stays) alike" in err and "--input-shape gps" in err
    assert "Nothing was read or charged" in err
    # nothing created either (issue 42): not even the budget --budget asked for
    assert not Ledger(ledger).has_budget("cabs") and not (tmp_path / "a").exists()
    # declared, either way, it runs (and charges)
    assert run_cli([*base, "--input-shape", "events", "-o", str(tmp_path / "b")]) == 0
    assert Ledger(ledger).spent("cabs").epsilon == pytest.approx(1)
    capsys.readouterr()
    s = pm.Session(str(data), tessellation=str(tiles), budget=5, dataset="cabs")
    with pytest.raises(ConfigError, match="declare which") as exc:
        s.od_matrix(epsilon=1, max_trips=20)
    assert exc.value.detail is None  # no figure of the data, not even with --verbose
    assert s.ledger.spent() == 0
    s.close()


def phone_events(tmp_path: Path) -> Path:
    """Made-up located events in box_grid(3): 150 users, about one event per active hour."""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 3_000
    path = tmp_path / "events.csv"
    pd.DataFrame(
        {
            "uid": rng.integers(0, 150, n),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 2 * 86_400, n), unit="s"),
            "lat": 52 + rng.uniform(0.0005, 0.0295, n),
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    ).to_csv(path, index=False)
    return path


def test_sparse_events_are_refused_alike_and_run_declared(tmp_path: Path) -> None:
    """Phone-like events (a few per user and hour) told from their column names are refused as
    a GPS log is (the rule reads no record); declared as events they run."""
    data = phone_events(tmp_path)
    with pm.Session(str(data), tessellation=box_grid(3).gdf, budget=5, dataset="ev") as s:
        with pytest.raises(ConfigError, match="declare which"):
            s.od_matrix(epsilon=1, max_trips=5)
        assert s.ledger.spent() == 0
    s = pm.Session(str(data), tessellation=box_grid(3).gdf, budget=5, dataset="ev", shape="events")
    od = s.od_matrix(epsilon=1, max_trips=5)
    assert od.metadata.cost.epsilon == 1 and "gps" not in str(od.metadata.params).lower()
    s.close()


def test_a_tiny_epsilon_is_refused_before_reading_unless_confirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42: a warned release used to be charged all the same. Now the warning refuses it
    before anything is read or charged unless the operator confirmed it (``confirm=True``,
    ``--yes``); the plan line says the warning."""
    data = phone_events(tmp_path)
    # Python: refused, nothing read (an unreadable input would fail at reading) or charged
    s = pm.Session(str(data), tessellation=box_grid(3).gdf, budget=5, dataset="ev", shape="events")
    with pytest.raises(ConfigError, match=r"epsilon 0\.05 is below 0\.1") as refused:
        s.od_matrix(epsilon=0.05, max_trips=5)
    assert "confirm=True" in str(refused.value.hint) and "Nothing was read or charged" in str(
        refused.value
    )
    assert s.ledger.spent() == 0 and s._loaded == {}
    s.close()
    spent_when_warned: list[float] = []
    s = pm.Session(
        str(data),
        tessellation=box_grid(3).gdf,
        budget=5,
        dataset="ev",
        confirm=True,
        shape="events",
    )
    s.warn.tell = lambda message: spent_when_warned.append(s.ledger.spent())  # type: ignore[attr-defined]
    s.od_matrix(epsilon=0.05, max_trips=5)
    assert spent_when_warned == [0]  # confirmed: warned once, before anything was charged
    assert s.ledger.spent() == pytest.approx(0.05)
    with warnings.catch_warnings(record=True) as caught:  # Python: a PrivmobWarning
        warnings.simplefilter("always")
        s.warn.tell = pm.Session(
            str(data), tessellation=box_grid(3).gdf, budget=5, dataset="x"
        ).tell  # type: ignore[attr-defined]
        s.od_matrix(epsilon=0.2, max_trips=5)  # at or above the level: no warning
        s.od_matrix(epsilon=0.01, max_trips=5)
    texts = [str(w.message) for w in caught if issubclass(w.category, PrivmobWarning)]
    assert len(texts) == 1 and "epsilon 0.01 is below 0.1" in texts[0]
    s.close()
    # the command line: the plan shows it without spending
    assert run_cli(["plan", "od", "-t", str(tmp_path / "none.geojson"), "-e", "0.05"]) == 2
    capsys.readouterr()
    zones = tmp_path / "zones.geojson"
    box_grid(3).gdf.to_file(zones, driver="GeoJSON")
    assert run_cli(["plan", "od", "-t", str(zones), "-e", "0.05", "-T", "5"]) == 0
    assert "warning: epsilon 0.05 is below 0.1" in capsys.readouterr().err
    # a release: the plan line says it, then the refusal; nothing read, charged or written
    ledger = tmp_path / "cli.sqlite"
    argv = ["od", str(data), "-t", str(zones), "-e", "0.05", "-T", "5", "--budget", "5"]
    argv += ["--dataset", "cli", "--ledger", str(ledger), "-o", str(tmp_path / "od")]
    argv += ["--input-shape", "events"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    plan_line = next(line for line in err.splitlines() if line.startswith("plan: "))
    assert "warning: epsilon 0.05 is below 0.1" in plan_line
    assert "--yes" in err and "reading and validating" not in err
    assert not Ledger(ledger).has_budget("cli") and not (tmp_path / "od").exists()
    assert run_cli([*argv, "--yes", "--quiet"]) == 0
    assert Ledger(ledger).spent("cli").epsilon == pytest.approx(0.05)
