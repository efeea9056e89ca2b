"""``privmob series`` and ``privmob tpl`` end to end (real ledger, real files)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from privmob.cli import series
from privmob.errors import BudgetError, ConfigError, InputError, OutputError
from privmob.privacy.ledger import Ledger


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer(pretty_exceptions_enable=False)
    series.register(a)
    return a


#: the public time grid of the series _csv writes (24 hourly steps)
GRID = ["--start", "2024-01-01", "--end", "2024-01-02", "--freq", "1h"]


def _csv(tmp_path: Path, zones: bool = False) -> Path:
    t = pd.date_range("2024-01-01", periods=24, freq="h")
    if zones:
        df = pd.DataFrame(
            {"t": np.tile(t, 2), "zone": np.repeat(["a", "b"], 24), "v": np.arange(48)}
        )
    else:
        df = pd.DataFrame({"t": t, "v": np.arange(24)})
    path = tmp_path / "s.csv"
    df.to_csv(path, index=False)
    return path


def test_series_writes_a_charged_release(app: typer.Typer, tmp_path: Path) -> None:
    src = _csv(tmp_path)
    led = tmp_path / "l.sqlite"

    def run(out: str, *extra: str):  # type: ignore[no-untyped-def]
        args = [
            "series", str(src), "--value-column", "v", "--time-column", "t",
            "--landmarks", "2024-01-01 03:00:00,2024-01-01T05:00", "--epsilon", "1",
            "--scheme", "uniform", "--sensitivity", "2", "-o", str(tmp_path / out),
            "--ledger", str(led), *GRID, *extra,
        ]  # fmt: skip
        return CliRunner().invoke(app, args)

    res = run("out", "--budget", "2.5")
    assert res.exit_code == 0, res.output
    budgets = pd.read_parquet(tmp_path / "out" / "budgets.parquet")
    assert budgets["epsilon_t"].tolist() == pytest.approx([1 / 3] * 24)
    assert budgets["landmark"].sum() == 2
    assert budgets["noise_scale"].tolist() == pytest.approx([6.0] * 24)
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert meta["params"]["landmarks"] == [3, 5]
    assert meta["for_publication"] is True and "warning" not in meta  # secure noise
    assert Ledger(led).spent("s").epsilon == pytest.approx(1.0)
    # a second release of 1 fits, a third is refused before anything is written
    assert run("o2").exit_code == 0
    res3 = run("o3")
    assert isinstance(res3.exception, BudgetError)
    assert not (tmp_path / "o3").exists()


def test_series_per_zone_and_bad_landmark(app: typer.Typer, tmp_path: Path) -> None:
    src = _csv(tmp_path, zones=True)
    base = [
        "series", str(src), "--value-column", "v", "--time-column", "t", "--zone-column",
        "zone", "--zones", "a,b", "--epsilon", "1", "--sensitivity", "1", "--test-mode",
        "--budget", "10", "--seed", "1", "--scheme", "adaptive", *GRID,
    ]  # fmt: skip
    res = CliRunner().invoke(
        app, [*base, "--landmarks", "0,1,7", "--landmark-positions", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    out = pd.read_parquet(tmp_path / "o" / "series.parquet")
    assert len(out) == 48 and set(out["zone"]) == {"a", "b"}
    res = CliRunner().invoke(app, [*base, "--landmarks", "1999-01-01", "-o", str(tmp_path / "x")])
    assert isinstance(res.exception, ConfigError)


def test_series_zone_domain_is_declared_not_read(app: typer.Typer, tmp_path: Path) -> None:
    # SPEC 1.1: the zones of the release are public; a zone without rows must not silently
    # vanish from the output (that would reveal which zones are empty).
    src = _csv(tmp_path, zones=True)  # rows for zones a and b only
    base = [
        "series", str(src), "--value-column", "v", "--time-column", "t", "--zone-column",
        "zone", "--epsilon", "1", "--sensitivity", "1", "--ledger", str(tmp_path / "l.sqlite"),
        "--budget", "10", *GRID,
    ]  # fmt: skip
    runner = CliRunner()
    res = runner.invoke(app, [*base, "--zones", "a,b,c", "-o", str(tmp_path / "o1")])
    assert isinstance(res.exception, InputError), res.output
    assert "no row" in str(res.exception)
    res = runner.invoke(app, [*base, "--zones", "a", "-o", str(tmp_path / "o2")])
    assert isinstance(res.exception, InputError), res.output
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "o3")])
    assert isinstance(res.exception, ConfigError), res.output
    res = runner.invoke(app, [*base, "--zones", "b,a", "-o", str(tmp_path / "o4")])
    assert res.exit_code == 0, res.output
    out = pd.read_parquet(tmp_path / "o4" / "series.parquet")
    assert out["zone"].drop_duplicates().tolist() == ["b", "a"]
    assert not any((tmp_path / d).exists() for d in ("o1", "o2", "o3"))
    assert Ledger(tmp_path / "l.sqlite").spent("s").epsilon == pytest.approx(1.0)


def test_series_time_domain_can_be_declared(app: typer.Typer, tmp_path: Path) -> None:
    # a timestamp without a row must not silently vanish from the release (SPEC 1.1)
    path = tmp_path / "gap.csv"
    t = pd.date_range("2024-01-01", periods=24, freq="h").delete(5)  # hour 5 has no row
    pd.DataFrame({"t": t, "v": np.arange(23)}).to_csv(path, index=False)
    base = [
        "series", str(path), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
        "--sensitivity", "1", "--ledger", str(tmp_path / "l.sqlite"), "--budget", "5",
        "--start", "2024-01-01", "--end", "2024-01-02",
    ]  # fmt: skip
    res = CliRunner().invoke(app, [*base, "--freq", "1h", "-o", str(tmp_path / "o1")])
    assert isinstance(res.exception, InputError), res.output
    assert "some steps of the declared grid" in str(res.exception)
    assert "05:00" not in str(res.exception)  # never a data date
    res = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "o2")])  # --freq missing
    assert isinstance(res.exception, ConfigError), res.output
    full = _csv(tmp_path)
    ok = [str(full), *base[2:], "--freq", "1h", "-o", str(tmp_path / "o3")]
    res = CliRunner().invoke(app, ["series", *ok])
    assert res.exit_code == 0, res.output
    assert Ledger(tmp_path / "l.sqlite").spent("s").epsilon == pytest.approx(1.0)


def test_series_refuses_duplicate_timestamps(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    pd.DataFrame({"t": [1, 1, 2], "v": [1, 2, 3]}).to_csv(path, index=False)
    res = CliRunner().invoke(
        app,
        ["series", str(path), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
         "--sensitivity", "1", "-o", str(tmp_path / "o"), "--ledger",
         str(tmp_path / "l.sqlite"), "--budget", "1", "--domain-from-data"],
    )  # fmt: skip
    assert isinstance(res.exception, InputError)
    assert "more than one row" in str(res.exception)


def test_tpl_prints_the_spec_vector_and_searches(app: typer.Typer, tmp_path: Path) -> None:
    m = tmp_path / "p.json"
    m.write_text(json.dumps([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]]))
    res = CliRunner().invoke(
        app, ["tpl", "--matrix", str(m), "--epsilon-t", "0.1", "--T", "10", "--target", "1",
              "--search"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "0.293044" in res.output and "max TPL (event-level) = 0.293044" in res.output
    assert "largest per-timestamp budget" in res.output
    res = CliRunner().invoke(
        app, ["tpl", "--backward", str(m), "--forward", "none", "--T", "3", "--landmarks", "1"]
    )
    assert res.exit_code == 0, res.output
    assert "max landmark loss" in res.output


@pytest.mark.slow
def test_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    """As a user runs it: one message plus a hint, exit code 2."""
    import os
    import subprocess
    import sys

    path = tmp_path / "d.csv"
    pd.DataFrame({"t": [1, 2], "v": [1, 2]}).to_csv(path, index=False)
    res = subprocess.run(
        [sys.executable, "-m", "privmob", "series", str(path), "--value-column", "nope",
         "--time-column", "t", "--epsilon", "1", "--sensitivity", "1", "-o",
         str(tmp_path / "o"), "--ledger", str(tmp_path / "l.sqlite"), "--budget", "1",
         "--domain-from-data"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "no such column" in res.stderr and "Traceback" not in res.stderr


def test_series_counts_from_raw_events(app: typer.Typer, tmp_path: Path, shared_data) -> None:  # type: ignore[no-untyped-def]
    args = [
        "series-counts", str(shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"),
        "-t", str(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson"),
        "--names", "uid,datetime,lat,lng,location_id", "--delimiter", "\t",
        "--timezone", "America/New_York", "--start", "2010-09-11", "--end", "2010-09-12",
        "--landmarks", "2010-09-11 09:00", "--epsilon", "1", "--max-per-bin", "2",
        "-o", str(tmp_path / "o"), "--budget", "1.1", "--ledger", str(tmp_path / "l.sqlite"),
        "--quiet",
    ]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "o" / "metadata.json").read_text())
    assert meta["privacy"]["bounds"]["sensitivity_per_timestamp"] == 2.0
    assert meta["params"]["landmarks"] == [9]
    assert meta["domain"] == {"timestamps": 24, "zones": 264}
    # SPEC 1.1: the events outside the period are one noisy cell, charged on top (0.1 x eps)
    out = pd.read_parquet(tmp_path / "o" / "outliers.parquet")
    assert len(out) == 1 and out["epsilon"].iloc[0] == pytest.approx(0.1)
    assert out["noise_scale"].iloc[0] == pytest.approx(2 / 0.1)
    assert meta["privacy"]["cost"]["epsilon"] == pytest.approx(1.1)
    assert [e["cost"]["epsilon"] for e in meta["ledger_entries"]] == pytest.approx([1.0, 0.1])
    assert Ledger(tmp_path / "l.sqlite").spent("gowalla_nyc_events").epsilon == pytest.approx(1.1)


def test_taken_output_is_refused_before_charging(app: typer.Typer, tmp_path: Path) -> None:
    src = _csv(tmp_path)
    led = tmp_path / "l.sqlite"
    args = [
        "series", str(src), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
        "--sensitivity", "1", "-o", str(tmp_path / "out"), "--ledger", str(led),
        "--budget", "5", *GRID,
    ]  # fmt: skip
    assert CliRunner().invoke(app, args).exit_code == 0
    res = CliRunner().invoke(app, args)  # same folder, no --overwrite
    assert isinstance(res.exception, OutputError), res.output
    assert Ledger(led).spent("s").epsilon == pytest.approx(1.0)  # nothing burnt


def test_series_needs_a_declared_grid_or_says_it_is_not_for_publication(
    app: typer.Typer, tmp_path: Path
) -> None:
    """Without --start/--end/--freq the file's own dates were the domain and the release was
    stamped for publication."""
    from privmob.releases.stamp import read_stamp

    src = _csv(tmp_path)
    led = tmp_path / "l.sqlite"
    base = [
        "series", str(src), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
        "--sensitivity", "1", "--ledger", str(led), "--budget", "5",
    ]  # fmt: skip
    res = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "o1")])
    assert isinstance(res.exception, ConfigError) and "--start" in str(res.exception)
    assert not (tmp_path / "o1").exists() and Ledger(led).entries("s") == []
    res = CliRunner().invoke(app, [*base, "--domain-from-data", *GRID, "-o", str(tmp_path / "o")])
    assert isinstance(res.exception, ConfigError)  # one or the other, not both
    res = CliRunner().invoke(app, [*base, "--domain-from-data", "-o", str(tmp_path / "o2")])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "o2" / "metadata.json").read_text())
    assert meta["for_publication"] is False and "--domain-from-data" in meta["warning"]
    stamp = read_stamp(tmp_path / "o2" / "series.parquet")
    assert stamp["privmob.for_publication"] == "false"
    assert "--domain-from-data" in stamp["privmob.warning"]


def test_series_messages_name_rows_not_dates(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    t = list(pd.date_range("2024-01-01", periods=24, freq="h"))
    t[7] = pd.Timestamp("2023-06-05 13:17")  # off the grid: its date must not be printed
    pd.DataFrame({"t": t, "v": np.arange(24)}).to_csv(path, index=False)
    args = [
        "series", str(path), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
        "--sensitivity", "1", "--test-mode", "--budget", "5", *GRID, "-o", str(tmp_path / "o"),
    ]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, InputError), res.output
    msg = str(res.exception)
    assert "row 8" in msg and "2023" not in msg and "13:17" not in msg


def test_a_different_budget_is_refused_by_series_and_series_counts(
    app: typer.Typer, tmp_path: Path
) -> None:
    """``--budget`` sets the dataset's budget once; a different one is refused (exit 3) before
    anything is read or written, as od does (one rule: releases.base.Accountant)."""
    from privmob.errors import EXIT_BUDGET

    src = _csv(tmp_path)
    led = tmp_path / "l.sqlite"
    args = [
        "series", str(src), "--value-column", "v", "--time-column", "t", "--epsilon", "1",
        "--sensitivity", "1", "--ledger", str(led), *GRID,
    ]  # fmt: skip
    assert (
        CliRunner().invoke(app, [*args, "--budget", "2", "-o", str(tmp_path / "a")]).exit_code == 0
    )
    res = CliRunner().invoke(app, [*args, "--budget", "5", "-o", str(tmp_path / "b")])
    assert isinstance(res.exception, BudgetError) and res.exception.exit_code == EXIT_BUDGET == 3
    assert not (tmp_path / "b").exists()
    assert Ledger(led).budget("s").epsilon == pytest.approx(2.0)
    # series-counts: the dataset already has a budget of 1 (landmark); --budget 5 is refused
    # before the events are read (the events file does not even exist)
    Ledger(led).set_budget("events", 1.0, 0.0, "landmark")
    tess = tmp_path / "zones.geojson"
    tess.write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
        '{"tile_id": "a"}, "geometry": {"type": "Polygon", "coordinates": '
        "[[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}}]}"
    )
    res = CliRunner().invoke(
        app,
        [
            "series-counts", str(tmp_path / "events.csv"), "-t", str(tess), "--start",
            "2024-01-01", "--end", "2024-01-02", "-e", "1", "-o", str(tmp_path / "c"),
            "--ledger", str(led), "--budget", "5",
        ],
    )  # fmt: skip
    assert isinstance(res.exception, BudgetError), res.output
    assert not (tmp_path / "c").exists()
    assert Ledger(led).budget("events").epsilon == pytest.approx(1.0)
