"""A programme recorded in a real SQLite ledger: progress, refusal outside it, allowances."""

from __future__ import annotations

import pytest

from privmob.errors import BudgetError, ConfigError
from privmob.evaluate.programme import Programme, ScheduleEntry, plan_programme
from privmob.privacy import programme_ledger as pl
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger


def _plan(epsilon: float = 50.0):
    return plan_programme(
        Programme(
            (
                ScheduleEntry("od", 3, "weekly", zones=9, alpha=10, beta=0.05, max_trips=2),
                ScheduleEntry("population", 1, "monthly", zones=9, alpha=10, max_trips=1),
            ),
            epsilon=epsilon,
        )
    )


def test_programme_progress_and_refusals(ledger_at) -> None:
    led = Ledger(ledger_at)
    led.set_budget("city", 100.0)
    led.charge("city", Cost.pure(1.0), kind="density")  # before the programme: not counted
    plan = _plan()
    pl.record(led, "city", plan)
    eps_od = plan.entries[0].epsilon
    for _ in range(3):
        led.charge("city", Cost.pure(eps_od), kind="od-matrix")
    od = pl.progress(led, "city")[0]
    assert (od.planned, od.released) == (3, 3)
    assert od.epsilon_spent == pytest.approx(3 * eps_od)
    spent = led.spent("city").epsilon
    with pytest.raises(BudgetError, match="all 3 planned od-matrix releases"):
        led.charge("city", Cost.pure(eps_od), kind="od-matrix")
    with pytest.raises(BudgetError, match="not in the programme"):
        led.charge("city", Cost.pure(0.1), kind="density")
    eps_pop = plan.entries[1].epsilon
    with pytest.raises(BudgetError, match="exceeds the programme"):
        led.charge("city", Cost.pure(2 * eps_pop), kind="population")
    assert led.spent("city").epsilon == pytest.approx(spent)  # refusals charged nothing
    # the operator says so: one release outside the programme goes through, once
    pl.allow(led, "city", "density", reason="flood response")
    led.charge("city", Cost.pure(0.1), kind="density")
    with pytest.raises(BudgetError):
        led.charge("city", Cost.pure(0.1), kind="density")
    led.charge("city", Cost.pure(eps_pop), kind="population")
    assert pl.progress(led, "city")[1].released == 1


def test_no_programme_no_check_and_infeasible_not_recorded(tmp_path) -> None:
    led = Ledger(tmp_path / "ledger.sqlite")
    led.set_budget("d", 10.0)
    led.charge("d", Cost.pure(1.0), kind="anything")
    with pytest.raises(ConfigError, match="no programme recorded"):
        pl.progress(led, "d")
    with pytest.raises(ConfigError, match="does not meet its targets"):
        pl.record(led, "d", _plan(epsilon=0.5))
    with pytest.raises(ConfigError):
        pl.allow(led, "d", "od", reason=" ")


def test_cli_record_show_allow(tmp_path, ledger_at) -> None:
    import json

    from typer.testing import CliRunner

    from privmob.cli import app

    led = ledger_at
    Ledger(led).set_budget("city", 100.0)
    sched = tmp_path / "p.json"
    sched.write_text(
        json.dumps(
            {
                "budget": {"epsilon": 50},
                "releases": [{"kind": "od", "count": 2, "zones": 9, "alpha": 10, "max_trips": 2}],
            }
        )
    )
    run = CliRunner().invoke
    env = {"COLUMNS": "200"}
    r = run(
        app,
        ["ledger", "programme", "record", str(sched), "--dataset", "city", "--ledger", str(led)],
        env=env,
    )
    assert r.exit_code == 0, r.output
    r = run(
        app, ["ledger", "programme", "show", "--dataset", "city", "--ledger", str(led)], env=env
    )
    assert r.exit_code == 0 and "od" in r.output and "2" in r.output
    r = run(
        app,
        [
            "ledger",
            "programme",
            "allow",
            "--dataset",
            "city",
            "--kind",
            "density",
            "--reason",
            "flood",
            "--ledger",
            str(led),
        ],
        env=env,
    )
    assert r.exit_code == 0
    Ledger(led).charge("city", Cost.pure(0.1), kind="density")


def test_a_ledger_without_programme_is_left_as_it_is(tmp_path) -> None:
    import sqlite3

    led = Ledger(tmp_path / "ledger.sqlite")
    led.set_budget("d", 10.0)
    led.charge("d", Cost.pure(1.0), kind="od-matrix")
    con = sqlite3.connect(led.path)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert not names & {"programmes", "programme_allowances"}
