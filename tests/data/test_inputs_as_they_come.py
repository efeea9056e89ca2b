"""Inputs as people bring them (issue 29): an input folder with a LICENSE and notes beside the
data, a file without header row, per-user files whose name is the user id (Cabspotting as
shipped), and one-row trips with coordinates read by the mobility report as ``od`` reads them.
Each through the command line and the Session, on real files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

import privmob as pm
from privmob.errors import InputError, PrivmobWarning
from privmob.privacy.ledger import Ledger

CAB_NAMES = ["lat", "lng", "occupied", "datetime"]


def trips_rows(seed: int = 1, n: int = 400) -> pd.DataFrame:
    """One-row trips inside box_grid(3), with start and end coordinates (50 users)."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-01-02") + pd.to_timedelta(rng.integers(0, 5 * 86_400, n), "s")
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 50, n),
            "start_time": start.astype(str),
            "end_time": (start + pd.Timedelta(minutes=20)).astype(str),
            "origin_lat": 52 + rng.uniform(0.001, 0.029, n),
            "origin_lng": 13 + rng.uniform(0.001, 0.029, n),
            "destination_lat": 52 + rng.uniform(0.001, 0.029, n),
            "destination_lng": 13 + rng.uniform(0.001, 0.029, n),
        }
    )


@pytest.fixture
def zones(tmp_path: Path) -> Path:
    path = tmp_path / "zones.geojson"
    box_grid(3).gdf.to_file(path, driver="GeoJSON")
    return path


def test_files_that_are_not_data_are_skipped_and_listed(tmp_path: Path, zones: Path) -> None:
    folder = tmp_path / "trips"
    folder.mkdir()
    rows = trips_rows()
    rows.iloc[:250].to_csv(folder / "part-1.csv", index=False)
    rows.iloc[250:].to_csv(folder / "notes-2.csv", index=False)  # a CSV is data, named so or not
    (folder / "LICENSE").write_text("MIT License\n\nCopyright (c) someone\n")
    (folder / "README.txt").write_text("Trips of a made-up city.\n")
    (folder / "notes.txt").write_text("collected in January\n")
    (folder / ".part-3.csv").write_text("uid,start_time\nx,y\n")  # hidden (an editor's copy)
    s = pm.Session(str(folder), tessellation=box_grid(3).gdf, budget=5, dataset="t")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trips = s._load_trips()
    assert trips.rows == len(rows)  # both parts, nothing else
    said = [str(w.message) for w in caught if issubclass(w.category, PrivmobWarning)]
    assert said and all(n in said[0] for n in ("LICENSE", "README.txt", "notes.txt", ".part-3"))
    assert "part-1.csv" not in said[0] and "notes-2.csv" not in said[0]
    s.close()


def test_cli_lists_skipped_files_and_keeps_them_out_of_the_release(
    tmp_path: Path, zones: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "trips"
    folder.mkdir()
    trips_rows().to_csv(folder / "trips.csv", index=False)
    (folder / "LICENSE.txt").write_text("MIT License\n")
    out = tmp_path / "od"
    argv = ["od", str(folder), "-t", str(zones), "-e", "1", "-T", "5", "--budget", "5"]
    assert run_cli([*argv, "--ledger", str(tmp_path / "l.sqlite"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "LICENSE.txt" in err
    assert "LICENSE" not in (out / "metadata.json").read_text()


def test_a_file_without_header_row(tmp_path: Path, zones: Path) -> None:
    rows = trips_rows()
    data = tmp_path / "trips.csv"
    rows.to_csv(data, index=False, header=False)
    ledger = tmp_path / "l.sqlite"
    base = ["od", str(data), "-t", str(zones), "-e", "1", "-T", "5", "--budget", "5", "--quiet"]
    base += ["--ledger", str(ledger), "--dataset", "t"]
    # without the option: refused before any charge, naming the option
    with pytest.raises(InputError, match="no header row") as exc:
        pm.Session(str(data), tessellation=str(zones), budget=5).od_matrix(epsilon=1, max_trips=5)
    assert 'names=["uid", "datetime", "lat", "lng"]' in (exc.value.hint or "")  # Python words
    names = ",".join(rows.columns)
    assert run_cli([*base, "--no-header", "--names", names, "-o", str(tmp_path / "a")]) == 0
    assert Ledger(ledger).spent("t").epsilon == 1
    s = pm.Session(str(data), tessellation=str(zones), budget=5, dataset="t2",
                   names=list(rows.columns), header=False)  # fmt: skip
    assert s._load_trips().rows == len(rows)
    s.close()


def cab_files(shared: Path) -> list[Path]:
    folder = shared / "cabspotting_sample"
    if not folder.is_dir():
        pytest.skip(f"the Cabspotting sample is absent ({folder})")
    return sorted(folder.glob("new_*.txt"))


def test_cabspotting_as_shipped(shared_data: Path, tmp_path: Path) -> None:
    """The folder as published: space-separated ``lat lng occupied unix_ts`` per taxi, the taxi
    id in the file name, a LICENSE and a SOURCE.md beside them."""
    files = cab_files(shared_data)
    folder = shared_data / "cabspotting_sample"
    sf = box_grid(8, size=0.025, lng0=-122.52, lat0=37.70).gdf
    s = pm.Session(str(folder), tessellation=sf, budget=5, dataset="cabs", shape="gps",
                   names=CAB_NAMES, delimiter=" ", uid_from_filename=True)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        points = s._load_trip_points()
    said = " ".join(str(w.message) for w in caught if issubclass(w.category, PrivmobWarning))
    assert "LICENSE_Bruno-Limon_repo.txt" in said and "SOURCE.md" in said
    uids = s._started_engine.fetch(f"SELECT DISTINCT uid FROM {points.base.view}")["uid"]
    assert sorted(uids) == sorted(p.stem for p in files)  # one user per file, by its name
    expected = sum(len(pd.read_csv(p, sep=" ", header=None)) for p in files)
    assert points.base.rows == expected
    od = s.od_matrix(epsilon=1, max_trips=20)
    assert od.metadata.cost.epsilon == 1
    s.close()


def test_cabspotting_as_shipped_on_the_command_line(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cab_files(shared_data)
    sf = tmp_path / "sf.geojson"
    box_grid(8, size=0.025, lng0=-122.52, lat0=37.70).gdf.to_file(sf, driver="GeoJSON")
    out = tmp_path / "od"
    argv = ["od", str(shared_data / "cabspotting_sample"), "--input-shape", "gps"]
    argv += ["--no-header", "--names", ",".join(CAB_NAMES), "--uid-from-filename"]
    argv += ["--delimiter", " ", "-t", str(sf), "-e", "1", "-T", "20", "--budget", "5"]
    argv += ["--ledger", str(tmp_path / "l.sqlite"), "--dataset", "cabs", "-o", str(out)]
    assert run_cli(argv) == 0
    meta = (out / "metadata.json").read_text()
    assert "new_" not in meta and "LICENSE" not in meta  # no file or user name in the release
    assert json.loads(meta)["privacy"]["cost"]["epsilon"] == 1
    capsys.readouterr()


def test_uid_from_filename_refuses_files_with_a_uid(tmp_path: Path) -> None:
    folder = tmp_path / "users"
    folder.mkdir()
    trips_rows().to_csv(folder / "alice.csv", index=False)
    s = pm.Session(str(folder), tessellation=box_grid(3).gdf, budget=5, dataset="u",
                   uid_from_filename=True)  # fmt: skip
    with pytest.raises(pm.errors.ConfigError, match="uid column already"):
        s._load_trips()
    s.close()


def test_report_reads_one_row_trips_with_coordinates(
    tmp_path: Path, zones: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "trips.csv"
    trips_rows().to_csv(data, index=False)
    out = tmp_path / "report.html"
    argv = ["report", str(data), "-t", str(zones), "-e", "1", "-T", "10", "--start"]
    argv += ["2024-01-01", "--end", "2024-01-08", "--budget", "5", "--seed", "1", "--test-mode"]
    assert run_cli([*argv, "-o", str(out)]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report  # written, from the trips' two ends
    # rides without a rider id (bike-share): per trip, and the hint never maps uid to a bike
    rides = trips_rows().drop(columns=["uid"]).assign(bikeid=7)
    rides.to_csv(tmp_path / "rides.csv", index=False)
    base = ["report", str(tmp_path / "rides.csv"), "-t", str(zones), "-e", "1", "--start"]
    base += ["2024-01-01", "--end", "2024-01-08", "--budget", "5", "--seed", "1", "--test-mode"]
    assert run_cli([*base, "-T", "10", "-o", str(tmp_path / "r1.html")]) == 2
    err = capsys.readouterr().err
    assert "--unit trip" in err and "uid=bikeid" not in err and "not a person" in err
    ledger = str(tmp_path / "trip-ledger.sqlite")
    assert run_cli(["ledger", "init", "rides", "--make-key", "--epsilon", "5", "--unit", "trip",
                    "--ledger", ledger]) == 0  # fmt: skip
    trip = ["report", str(tmp_path / "rides.csv"), "-t", str(zones), "-e", "1", "--unit", "trip"]
    trip += ["--start", "2024-01-01", "--end", "2024-01-08", "--ledger", ledger, "--quiet"]
    assert run_cli([*trip, "-o", str(tmp_path / "r2.html")]) == 0, capsys.readouterr().err
    assert Ledger(ledger).spent("rides").epsilon == 1
    s = pm.Session(str(data), tessellation=str(zones), seed=1, budget=5)
    rep = s.mobility_report(epsilon=1, max_trips=10, period=pm.Period("2024-01-01", "2024-01-08"))
    assert rep.metadata.cost.epsilon == 1
    s.close()
