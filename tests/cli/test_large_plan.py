"""A plan too large asks first (issue 42, item 5): an OD matrix of a 1 km grid by day over 92
days (48.7 M cells in the issue, 142 s, 96% of its cells indistinguishable from 0) is refused
before anything is read unless the operator confirms it (``--yes``, ``confirm=True``), with the
cell count and how to go on. The input is a file that fails when read: a refusal that read it
would say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import box_grid, run_cli

import privmob as pm
from privmob.errors import ConfigError, InputError, PrivmobWarning
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.privacy.signal import LARGE_PLAN_CELLS
from privmob.releases.plan import Plan

#: 729 tiles of 0.009 degree (about 1 km north-south) at 13 E, 52 N
GRID = {"n": 27, "size": 0.009}
#: 92 days, by day
PERIOD = ("2024-01-01", "2024-04-02")
PAIRS = 729 * 728 * 92  # off-diagonal OD pairs by day: 48,825,504 (and the outliers cells)


def unreadable(tmp_path: Path) -> Path:
    """A CSV that no loader accepts (no trip column): reading it fails."""
    path = tmp_path / "not-trips.csv"
    path.write_text("this,is\nnot,trips\n")
    return path


def test_the_level_is_a_stated_cell_count() -> None:
    def plan(cells: int) -> Plan:
        return Plan("od", Cost.pure(1.0, "user"), cells, 0, cells, 15.0, "discrete-laplace")

    assert plan(LARGE_PLAN_CELLS).warning is None
    said = plan(LARGE_PLAN_CELLS + 1).warning
    assert said is not None and "10,000,001 cells, more than the 10,000,000" in said


def test_a_python_release_of_48_million_cells_is_refused_before_reading(tmp_path: Path) -> None:
    data = unreadable(tmp_path)
    period = pm.Period(*PERIOD, bin="day")
    s = pm.Session(str(data), tessellation=box_grid(**GRID).gdf, budget=5, dataset="big")
    cells = s.plan_od(epsilon=1, max_trips=5, period=period).cells
    assert PAIRS < cells < PAIRS + 100
    with pytest.raises(ConfigError, match=f"{cells:,} cells, more than the 10,000,000") as no:
        s.od(epsilon=1, max_trips=5, period=period)
    assert "Nothing was read or charged" in str(no.value) and "confirm=True" in str(no.value.hint)
    assert s._loaded == {} and s.ledger.spent() == 0
    s.close()
    # confirmed: told once, then on to read the input (which fails here), not refused by size
    s = pm.Session(
        str(data), tessellation=box_grid(**GRID).gdf, budget=5, dataset="big", confirm=True
    )
    with (
        pytest.warns(PrivmobWarning, match="more than the 10,000,000"),
        pytest.raises((InputError, ConfigError)) as read,
    ):
        s.od(epsilon=1, max_trips=5, period=period)
    assert "more than the 10,000,000" not in str(read.value)
    s.close()


def test_the_command_line_asks_for_yes_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / "grid-1km.geojson"
    box_grid(**GRID).gdf.to_file(grid, driver="GeoJSON")
    ledger = tmp_path / "ledger.sqlite"
    argv = ["od", str(unreadable(tmp_path)), "-t", str(grid), "-e", "1", "-T", "5"]
    argv += ["--start", PERIOD[0], "--end", PERIOD[1], "--bin", "day", "--budget", "5"]
    argv += ["--dataset", "big", "--ledger", str(ledger), "-o", str(tmp_path / "od")]
    assert run_cli(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{PAIRS // 10**6},8" in err and "cells, more than the 10,000,000" in err
    assert "--yes" in err and "reading and validating" not in err
    assert not Ledger(ledger).has_budget("big") and not (tmp_path / "od").exists()
    # with --yes: past the question, to the input (which fails to be read here)
    assert run_cli([*argv, "--yes"]) != 0
    assert "refused before reading" not in capsys.readouterr().err
