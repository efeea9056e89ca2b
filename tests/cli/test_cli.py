"""The command line as a user runs it: real subprocesses, exit codes, no tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.conftest import REPO
from tests.helpers import od_argv, privmob_process

run = privmob_process


@pytest.fixture
def fixture_files(shared_data):
    return (
        shared_data / "dpmr_fixture" / "test_data.csv",
        shared_data / "dpmr_fixture" / "test_tessellation.geojson",
    )


def test_od_end_to_end_and_ledger_show(tmp_path: Path, fixture_files: tuple[Path, Path]) -> None:
    data, tess = fixture_files
    r = run(*od_argv(data, tess, "-o", "out", "--quiet", max_trips=3, budget=1), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "privacy cost: epsilon=0.5 per user" in r.stdout
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert meta["privacy"]["bounds"]["max_trips_per_user"] == 3 and meta["for_publication"]
    assert len(pd.read_parquet(tmp_path / "out" / "od.parquet")) == 12
    r = run("ledger", "show", cwd=tmp_path)
    assert r.returncode == 0 and " od " in r.stdout and "left epsilon=0.5" in r.stdout


def test_overspend_exits_3_and_writes_nothing(
    tmp_path: Path, fixture_files: tuple[Path, Path]
) -> None:
    data, tess = fixture_files
    r = run(*od_argv(data, tess, "-o", "out", epsilon=2, max_trips=3, budget=1), cwd=tmp_path)
    assert r.returncode == 3
    assert "refused" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("uid,tid,datetime,lat,lng\n1,1,not-a-time,52.5,13.4\n", "unparsable timestamp"),
        ("uid;tid;datetime;lat;lng\n1;1;2024-01-01;52.5;13.4\n", "delimiter"),
        ("", "empty"),
    ],
)
def test_bad_input_exits_2_with_one_message(
    tmp_path: Path, fixture_files: tuple[Path, Path], content: str, expect: str
) -> None:
    _, tess = fixture_files
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    args = od_argv(bad, tess, "-o", "o", "--input-shape", "trip-points", epsilon=1, max_trips=1,
                   budget=5)  # fmt: skip
    if "delimiter" in expect:
        args += ["--delimiter", ","]
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert expect in r.stderr and "Traceback" not in r.stderr
    assert str(bad) in r.stderr or expect == "delimiter"
    assert bad.read_text() == content


def test_missing_max_trips_is_a_config_error(tmp_path, fixture_files):
    data, tess = fixture_files
    r = run("od", str(data), "-t", str(tess), "-e", "1", "--budget", "5", cwd=tmp_path)
    assert r.returncode == 2 and "--max-trips" in r.stderr and "Traceback" not in r.stderr


def test_module_entry_point_has_help():
    r = subprocess.run(
        [sys.executable, "-m", "privmob", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0 and "od" in r.stdout


def test_demo_runs_offline_and_reports_cost(tmp_path):
    r = run("demo", "--users", "300", "-o", "d", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "d"
    for name in (
        "trips.parquet",
        "tessellation.geojson",
        "ledger.sqlite",
        "od/od.parquet",
        "od/metadata.json",
    ):
        assert (out / name).exists(), name
    assert "privacy cost: epsilon=1 per user" in r.stdout
    meta = json.loads((out / "od" / "metadata.json").read_text())
    assert meta["params"]["period"]["granularity"] == "week" and meta["domain"]["periods"] == 4
    r2 = run("demo", "--users", "300", "-o", "d", "--quiet", cwd=tmp_path)  # runs again
    assert r2.returncode == 0 and "epsilon=98 left" in r2.stdout
