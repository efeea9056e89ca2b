"""Traps a newcomer hit on the command line, gone: ``report --unit trip`` needs no bound, and a
tessellation error names ``--tile-id``, which every release command accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import run_cli

from privmob.privacy.ledger import Ledger


def _tiles_without_id(tmp_path: Path) -> Path:
    square = [[[13.3, 52.5], [13.4, 52.5], [13.4, 52.6], [13.3, 52.6], [13.3, 52.5]]]
    features = [
        {"type": "Feature", "properties": {"foo": f"z{i}", "bar": i},
         "geometry": {"type": "Polygon", "coordinates": square}}
        for i in range(1)
    ]  # fmt: skip
    path = tmp_path / "tiles.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


@pytest.mark.parametrize("command", ["od", "report", "population", "series-counts"])
def test_a_tessellation_error_names_an_option_the_command_accepts(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles = _tiles_without_id(tmp_path)
    opts = {
        "od": ["-T", "2"],
        "report": ["-T", "2", "--start", "2024-01-01", "--end", "2024-02-01"],
        "population": [],
        "series-counts": ["--start", "2024-01-01", "--end", "2024-01-02"],
    }[command]
    argv = ["plan", command, "-t", str(tiles), "-e", "1", *opts]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "no tile id column" in err and "--tile-id" in err and "--id-column" not in err
    assert run_cli([*argv, "--tile-id", "foo"]) == 0  # the option the hint names works
    capsys.readouterr()


def test_report_at_trip_level_needs_no_bound(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = shared_data / "dpmr_fixture"
    base = ["report", str(d / "test_data.csv"), "-t", str(d / "test_tessellation.geojson"),
            "-e", "1", "--start", "2020-12-01", "--end", "2021-01-01", "--budget", "50",
            "--ledger", str(tmp_path / "l.sqlite"), "--quiet"]  # fmt: skip
    # user level: the bound sets the noise, it is required, and the message says which option
    assert run_cli([*base, "-o", str(tmp_path / "u" / "report.html")]) == 2
    assert "-T/--max-trips" in capsys.readouterr().err
    # trip level: no -T (each trip is protected); charged to the user budget by group privacy
    trip = ["--unit", "trip", "--group-size", "20", "-o", str(tmp_path / "t" / "report.html")]
    assert run_cli([*base, *trip]) == 0, capsys.readouterr().err
    assert (tmp_path / "t" / "report.html").exists()
    entries = Ledger(tmp_path / "l.sqlite").entries("test_data")
    assert [e.cost.epsilon for e in entries] == [pytest.approx(20.0)]
