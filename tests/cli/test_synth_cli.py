"""``privmob synth`` from the command line (on a bare app with the command registered)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import typer
from typer.testing import CliRunner

from privmob.cli.synth import register
from privmob.errors import ConfigError, InputError


def app() -> typer.Typer:
    a = typer.Typer()
    register(a)
    a.command("noop", hidden=True)(lambda: None)  # keep 'synth' a sub-command
    return a


def test_synth_events_with_grid_and_tiles_out(tmp_path: Path) -> None:
    out = tmp_path / "ev.parquet"
    args = ["synth", "events", "--users", "300", "--days", "7", "--start", "2024-03-04"]
    args += ["--grid", "64", "--towers", "40", "--seed", "5", "-o", str(out)]
    args += ["--tiles-out", str(tmp_path / "tiles.geojson")]
    r = CliRunner().invoke(app(), args)
    assert r.exit_code == 0, r.output
    assert "rows of 300 users" in r.output and "40 towers" in r.output
    assert pq.read_table(out).num_rows > 0
    assert pq.read_table(tmp_path / "ev.cells.parquet").num_rows == 40
    tiles = json.loads((tmp_path / "tiles.geojson").read_text())
    assert 50 <= len(tiles["features"]) <= 80
    ts = pq.read_table(out).column("datetime").to_pandas()
    assert ts.min() >= pd.Timestamp("2024-03-04", tz="UTC")


def test_synth_refuses_to_overwrite_and_reports_bad_tessellation(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    base = ["synth", "trips", "--users", "50", "--days", "3", "-q", "-o", str(out)]
    assert CliRunner().invoke(app(), base).exit_code == 0
    assert out.exists()
    r = CliRunner().invoke(app(), base)
    assert isinstance(r.exception, ConfigError) and "--overwrite" in str(r.exception)
    assert CliRunner().invoke(app(), [*base, "--overwrite"]).exit_code == 0
    r = CliRunner().invoke(app(), [*base, "--overwrite", "--tessellation", "missing.geojson"])
    assert isinstance(r.exception, InputError) and "missing.geojson" in str(r.exception)
