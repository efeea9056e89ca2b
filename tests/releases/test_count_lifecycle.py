"""od and population through the one lifecycle (the count template): the Voronoi population from
Python equals the command line's for the same seed, and a release the budget cannot pay is
refused before its input is read, from Python and from the command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import run_cli

import privmob as pm
from privmob.errors import BudgetError, ConfigError

INPUTS = Path(__file__).resolve().parent / "golden" / "inputs"
EVENTS, CELLS, ZONES = INPUTS / "cell_events.csv", INPUTS / "cells.csv", INPUTS / "zones.geojson"


def test_voronoi_population_from_python_equals_the_cli(tmp_path: Path) -> None:
    with pm.Session(EVENTS, tessellation=ZONES, cells=CELLS, seed=4, dataset="v", budget=1) as s:
        result = s.population(epsilon=1, zone_mapping="voronoi", output=tmp_path / "py")
    code = run_cli(["population", str(EVENTS), "-t", str(ZONES), "--cells", str(CELLS), "-e",
                    "1", "--zone-mapping", "voronoi", "-o", str(tmp_path / "cli"), "--test-mode",
                    "--seed", "4", "--budget", "1", "--quiet"])  # fmt: skip
    assert code == 0
    py = pd.read_parquet(tmp_path / "py" / "population.parquet")
    cli = pd.read_parquet(tmp_path / "cli" / "population.parquet")
    pd.testing.assert_frame_equal(py, cli)
    assert result.release.params["zone_mapping"].startswith("voronoi")
    assert result.release.domain["towers"] == len(pd.read_csv(CELLS))
    zones = py[py.kind == "zone"]["count"].to_numpy()
    # tower counts split by area shares: fractional zone values (a contained mapping gives
    # whole numbers), none negative (the tower counts were clamped first)
    assert not np.allclose(zones, np.round(zones)) and (zones >= 0).all()
    # the same seed without the Voronoi mapping: whole numbers per zone (another release)
    with pm.Session(EVENTS, tessellation=ZONES, cells=CELLS, seed=4, dataset="c", budget=1) as s:
        contain = s.population(epsilon=1).to_pandas()
    assert np.allclose(contain["count"], np.round(contain["count"]))


def test_voronoi_population_needs_the_towers_before_reading(tmp_path: Path) -> None:
    bad = tmp_path / "events.csv"
    bad.write_text("not,an,events,file\n1,2,3,4\n")
    with pm.Session(bad, tessellation=ZONES, seed=1, dataset="v", budget=1) as s:
        with pytest.raises(ConfigError, match="towers table"):
            s.population(epsilon=1, zone_mapping="voronoi")
        with pytest.raises(ConfigError, match="zone mapping"):
            s.plan_population(epsilon=1, zone_mapping="nearest")


@pytest.mark.parametrize("kind", ["od", "population"])
def test_over_budget_is_refused_before_the_input_is_read(tmp_path: Path, kind: str) -> None:
    # an input that fails validation if it is read: the refusal must be the budget's (exit 3,
    # BudgetError), never the input's (exit 2, InputError), and nothing is charged
    bad = tmp_path / "unreadable.csv"
    bad.write_text("this is not,a mobility file\n\x00\x01,\n")
    ledger = tmp_path / "ledger.sqlite"
    options = ["-T", "2"] if kind == "od" else []
    code = run_cli([kind, str(bad), "-t", str(ZONES), "-e", "2", *options, "--budget", "1",
                    "--ledger", str(ledger), "--dataset", "d", "-o", str(tmp_path / "o"),
                    "--quiet"])  # fmt: skip
    assert code == 3
    assert not (tmp_path / "o").exists()
    # nothing created (issue 42): not even the budget --budget asked for; it stays pending
    from privmob.privacy.ledger import Ledger

    assert not Ledger(ledger).has_budget("d")
    s = pm.Session(bad, tessellation=ZONES, ledger=ledger, dataset="d", budget=1)
    release = s.od if kind == "od" else s.population
    extra = {"max_trips": 2} if kind == "od" else {}
    with pytest.raises(BudgetError):
        release(epsilon=2, **extra)
    assert s.ledger.remaining() == 1
    # the same input within the budget is read, and refused as the input it is
    from privmob.errors import InputError

    with pytest.raises((InputError, ConfigError)):
        release(epsilon=0.5, **extra)
    assert s.ledger.remaining() == 1 and not Ledger(ledger).has_budget("d")
    s.close()


def test_the_budget_is_checked_once_per_release(monkeypatch: pytest.MonkeyPatch) -> None:
    # the lifecycle's one precheck: the template does not check again what the session checked
    # (two checks per release before), and the next release of the same cost is checked anew
    from privmob.privacy.ledger import Ledger

    checked: list[object] = []
    real = Ledger.check

    def check(self: Ledger, dataset: str, cost: object, group_size: int | None = None) -> None:
        checked.append(cost)
        real(self, dataset, cost, group_size)  # type: ignore[arg-type]

    monkeypatch.setattr(Ledger, "check", check)
    with pm.Session(EVENTS, tessellation=ZONES, cells=CELLS, seed=4, dataset="v", budget=1.5) as s:
        s._accountant.ledger.set_budget("v", 1.5)  # written (a pending one is checked alone)
        s.population(epsilon=1)
        assert len(checked) == 1
        with pytest.raises(BudgetError):  # 0.5 left: refused by the check, before reading
            s.population(epsilon=1)
        assert len(checked) == 2
        s.od(epsilon=0.5, max_trips=2)
        assert len(checked) == 3
