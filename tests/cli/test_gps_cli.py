"""`privmob od --input-shape gps` on GeoLife: raw traces read directly, trips between stays."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from tests.helpers import run_cli

from privmob.data.grids import square_grid


@pytest.fixture
def beijing_grid(tmp_path):
    path = tmp_path / "grid.geojson"
    tess = square_grid([113.5, 22.1, 121.2, 41.2], 20_000)
    path.write_text(json.dumps(tess.to_geojson_dict()))
    return path


@pytest.mark.slow
def test_od_reads_raw_gps_traces(shared_data, beijing_grid, tmp_path):
    out = tmp_path / "od"
    argv = [
        "od",
        str(shared_data / "geolife_skmob" / "geolife_sample.txt.gz"),
        "-t",
        str(beijing_grid),
        "--input-shape",
        "gps",
        "--stay-distance",
        "150",
        "--stay-minutes",
        "15",
        "--epsilon",
        "1",
        "--max-trips",
        "50",
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--budget",
        "5",
        "-q",
        "-o",
        str(out),
        "--yes",  # 3,958 tiles of 20 km: 15.7 million OD cells, a plan that asks first
    ]
    assert run_cli(argv) == 0
    assert not pd.read_parquet(out / "od.parquet").empty


def test_bad_stay_threshold_is_refused(beijing_grid, tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("uid,datetime,lat,lng\nu,2024-01-01 08:00,39.9,116.3\n")
    code = run_cli(
        [
            "od",
            str(trace),
            "-t",
            str(beijing_grid),
            "--input-shape",
            "gps",
            "--stay-minutes",
            "0",
            "--epsilon",
            "1",
            "--max-trips",
            "5",
            "--ledger",
            str(tmp_path / "l.sqlite"),
            "--budget",
            "5",
            "-o",
            str(tmp_path / "od"),
            "--yes",  # past the question the 15.7-million-cell plan asks first
        ]
    )
    assert code != 0
    assert "--stay-minutes must be a positive number" in capsys.readouterr().err
    assert not (tmp_path / "od").exists()


@pytest.mark.slow
def test_report_reads_raw_gps_traces(shared_data, tmp_path):
    """Two Cabspotting taxis (epoch seconds, no trip id) -> a mobility report over SF."""
    frames = []
    for path in sorted((shared_data / "cabspotting_sample").glob("new_*.txt"))[:2]:
        f = pd.read_csv(path, sep=r"\s+", header=None, names=["lat", "lng", "occupied", "datetime"])
        frames.append(f.assign(uid=path.stem.removeprefix("new_")))
    traces = tmp_path / "taxis.csv"
    pd.concat(frames)[["uid", "datetime", "lat", "lng"]].to_csv(traces, index=False)
    out = tmp_path / "r" / "report.html"
    argv = ["report", str(traces), "--input-shape", "gps", "--stay-minutes", "10"]
    argv += ["-t", str(shared_data / "sf_neighborhoods" / "sf_neighborhoods.geojson")]
    argv += ["--epsilon", "1", "--max-trips", "20", "--period", "2008-05-17", "2008-06-11"]
    argv += ["--ledger", str(tmp_path / "l.sqlite"), "--budget", "5", "-q"]
    assert run_cli([*argv, "-o", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert len(doc["analyses"]) == 15
