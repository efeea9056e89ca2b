"""What a newcomer reads must be true and lead on (issue 42, the smaller items): the README's
demo grid has the tiles the demo makes; a study period that ends before it starts is refused
with the dates to write instead; ``--input-timezone`` on timestamps that carry their own offset
is refused, never silently unused while the release records it. Real files and processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from tests.conftest import REPO
from tests.helpers import run_cli

import privmob as pm
from privmob.errors import ConfigError, InputError

#: 40 users, one event each at 15:10 on 2024-01-01
ROWS = 40


def test_the_readme_says_how_many_tiles_the_demo_makes() -> None:
    from privmob.data.synth_model import default_tessellation

    said = re.search(r"square grid of (?:about )?(\d+) tiles", (REPO / "README.md").read_text())
    assert said is not None and "about" not in said.group(0)
    assert int(said.group(1)) == default_tessellation().k  # what `privmob demo` prints


@pytest.mark.parametrize(
    ("start", "end", "said", "hint", "python"),
    [
        (
            "2024-02-01",
            "2024-01-01",
            "ends before it starts",
            "--start 2024-01-01 --end 2024-02-01",
            'Period("2024-01-01", "2024-02-01")',
        ),
        ("2024-02-01", "2024-02-01", "is empty", "--end 2024-02-02", 'end="2024-02-02"'),
    ],
)
def test_a_period_that_does_not_end_after_it_starts_says_what_to_write(
    start: str,
    end: str,
    said: str,
    hint: str,
    python: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match=said) as refused:
        pm.Period(start, end, bin="day")
    assert python in str(refused.value.hint) and "--" not in str(refused.value.hint)  # Python
    zones = _zones(tmp_path)
    for command in (
        ["plan", "od", "-t", str(zones), "-e", "1", "-T", "2", "--bin", "day"],
        ["plan", "report", "-t", str(zones), "-e", "1", "-T", "2"],
        ["plan", "series-counts", "-t", str(zones), "-e", "1"],
    ):
        assert run_cli([*command, "--start", start, "--end", end]) == 2, command
        err = capsys.readouterr().err
        assert said in err and hint in err, (command, err)


def _zones(tmp_path: Path) -> Path:
    zones = tmp_path / "z.geojson"
    square = [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]
    feature = {"type": "Feature", "properties": {"tile_id": "a"},
               "geometry": {"type": "Polygon", "coordinates": square}}  # fmt: skip
    zones.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    return zones


def _events(tmp_path: Path, name: str, times: list[str]) -> Path:
    path = tmp_path / name
    rows = "".join(f"u{i},{t},0.5,0.5\n" for i, t in enumerate(times))
    path.write_text("uid,datetime,lat,lng\n" + rows)
    return path


def _series_counts(tmp_path: Path, data: Path, *zone: str) -> list[str]:
    out = tmp_path / f"out-{data.stem}-{len(zone)}"
    return ["series-counts", str(data), "-t", str(_zones(tmp_path)), "--start", "2024-01-01",
            "--end", "2024-01-02", "-e", "1000", "--test-mode", "-q", "-o", str(out),
            "--timezone", "America/New_York", *zone]  # fmt: skip


def test_input_timezone_on_timestamps_with_an_offset_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    naive = ["2024-01-01 15:10:00"] * ROWS
    with_offset = ["2024-01-01T15:10:00+01:00"] * ROWS
    given = ("--input-timezone", "UTC")
    # naive timestamps: the zone is what they need (read as UTC, binned in New York)
    assert run_cli(_series_counts(tmp_path, _events(tmp_path, "naive.csv", naive), *given)) == 0
    capsys.readouterr()
    # every timestamp, or only some (row 41 on), with an offset: refused, naming the first row
    for name, times, row in (
        ("offset.csv", with_offset, 1),
        ("mixed.csv", naive + with_offset, 41),
    ):
        data = _events(tmp_path, name, times)
        assert run_cli(_series_counts(tmp_path, data, *given)) == 2
        err = capsys.readouterr().err
        assert f"column 'datetime', row {row}: a timestamp with its own offset" in err
        assert "--input-timezone UTC" in err and "leave out --input-timezone" in err
        assert "15:10" not in err  # the value's form only, never the time
        # without --input-timezone the offsets are read as they are (as before)
        assert run_cli(_series_counts(tmp_path, data)) == 0
        capsys.readouterr()
    # instants in Parquet carry their zone in their type: refused before reading a row
    instants = tmp_path / "instants.parquet"
    pd.DataFrame({"uid": [f"u{i}" for i in range(ROWS)], "lat": 0.5, "lng": 0.5,
                  "datetime": pd.Timestamp("2024-01-01 15:10", tz="Europe/Paris")}).to_parquet(
        instants)  # fmt: skip
    assert run_cli(_series_counts(tmp_path, instants, *given)) == 2
    assert "holds instants (TIMESTAMP WITH TIME ZONE)" in capsys.readouterr().err
    # Python says it alike, for one-row trips (start and end times) too
    trips = tmp_path / "trips.csv"
    trips.write_text(
        "uid,start_time,end_time,origin,destination\n"
        + "".join(f"u{i},2024-01-01 15:10:00,2024-01-01 15:40:00Z,a,a\n" for i in range(ROWS))
    )
    s = pm.Session(str(trips), tessellation=_zones(tmp_path), budget=5, dataset="t",
                   timezone="America/New_York", input_timezone="UTC")  # fmt: skip
    with s, pytest.raises(InputError, match="column 'end_time', row 1: a timestamp with its own"):
        s._load_trips()
