"""``privmob audit``: the SPEC vectors from flags, ledger statements, attacks on synthetic data."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from privmob.cli import app
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger import Ledger

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result


def output_of(*args: str) -> str:
    """The output of ``privmob args``, which must succeed (exit 0)."""
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    return r.output


def test_cost_reproduces_seed_002_and_spec_vectors() -> None:
    out = output_of(
        "audit",
        "cost",
        "-e",
        "0.66",
        "--unit",
        "trip",
        "--max-trips",
        "70",
        "--releases",
        "52",
        "--tau",
        "100",
    )
    assert "epsilon=2402.4" in out
    assert "2.0998e-29" in out
    r = invoke("audit", "cost", "-e", "0.66")
    assert r.exit_code == 0 and "0.659260" in r.output


def test_cost_shows_both_delta_rules() -> None:
    args = ["-e", "0.66", "--unit", "trip", "--max-trips", "70", "--tau", "100"]
    out = output_of("ledger", "cost", *args, "--max-cells", "70")
    assert "group privacy over 70 units: epsilon 46.2, delta 8.81e-08" in out
    assert "per-cell composition over 70 cells: epsilon 46.2, delta 1.47e-27" in out
    assert "(used)" in out.split("per-cell composition")[1]
    r = invoke("ledger", "cost", *args)
    assert r.exit_code == 0 and "per-cell" not in r.output


def test_cost_seed_003_user_with_14_trips() -> None:
    out = output_of(
        "audit", "cost", "-e", "0.5", "--unit", "trip", "--user-trips", "14", "--releases", "305"
    )
    assert "loses epsilon = 7 " in out


def test_cost_from_a_ledger(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    led.set_budget("city", 5.0)
    led.charge("city", Cost.pure(0.5), kind="od-matrix")
    led.charge("city", Cost.pure(0.1, PrivacyUnit.TRIP), kind="od-trip", group_size=10)
    out = output_of("audit", "cost", "--ledger", str(path), "--dataset", "city")
    assert "epsilon=1.5 per user" in out


def test_epsilon_exit_code_marks_a_violation() -> None:
    ok = invoke(
        "audit",
        "epsilon",
        "--fp",
        "300",
        "--negatives",
        "1000",
        "--fn",
        "300",
        "--positives",
        "1000",
        "--claimed",
        "1",
    )
    assert ok.exit_code == 0 and "consistent" in ok.output
    bad = invoke(
        "audit",
        "epsilon",
        "--fp",
        "20",
        "--negatives",
        "1000",
        "--fn",
        "20",
        "--positives",
        "1000",
        "--claimed",
        "1",
    )
    assert bad.exit_code == 1 and "VIOLATED" in bad.output


def test_lrt_writes_a_table(tmp_path) -> None:
    out = tmp_path / "lrt.csv"
    output_of(
        "audit",
        "lrt",
        "--k-max",
        "4",
        "--trials",
        "400",
        "--quiet",
        "-o",
        str(out),
        "--noise",
        "discrete-laplace",
        "--style",
        "user",
        "-T",
        "2",
    )
    df = pd.read_csv(out)
    assert list(df.k) == [0, 1, 2, 3, 4]
    assert {"accuracy", "bound", "epsilon_lower", "fpr", "fnr"} <= set(df.columns)


def test_lrt_background_from_synthetic_trips(tmp_path) -> None:
    from privmob.data.synth import default_tessellation, synth_trips

    trips = tmp_path / "trips.parquet"
    synth_trips(trips, n_users=300, days=14, seed=1)
    tiles = tmp_path / "tiles.geojson"
    tiles.write_text(json.dumps(default_tessellation().to_geojson_dict()))
    out = output_of(
        "audit",
        "lrt",
        "--trips",
        str(trips),
        "-t",
        str(tiles),
        "--tau",
        "3",
        "--k-max",
        "2",
        "--trials",
        "200",
        "--quiet",
    )
    assert "weekly unique trips" in out
    assert "real user-weeks" in out


def test_bad_flags_exit_2_without_traceback(tmp_path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "privmob", "audit", "lrt", "--noise", "gaussian", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "error:" in r.stderr


@pytest.mark.slow
def test_ml_command_runs_on_synthetic_data(tmp_path) -> None:
    out = tmp_path / "ml.csv"
    output_of(
        "audit",
        "ml",
        "-e",
        "1",
        "--users",
        "40",
        "--zones",
        "5",
        "--days",
        "80",
        "--targets",
        "3",
        "--min-days",
        "6",
        "--trees",
        "5",
        "--models",
        "logistic",
        "--quiet",
        "-o",
        str(out),
    )
    df = pd.read_csv(out)
    assert set(df.setting) == {"raw/raw", "private/private", "raw/private"}
