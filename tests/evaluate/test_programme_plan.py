"""The programme planner: targets met in a Monte Carlo of the real mechanisms, seed 002's
naive accounting, infeasible programmes explained, schedules read from files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privmob.errors import ConfigError, InputError
from privmob.evaluate.programme import (
    Programme,
    ScheduleEntry,
    as_programme,
    plan_programme,
)
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness

SCHEDULE = {
    "horizon": "one year",
    "budget": {"epsilon": 80, "delta": 1e-6},
    "releases": [
        {
            "kind": "od",
            "cadence": "weekly",
            "count": 52,
            "zones": 25,
            "alpha": 10,
            "beta": 0.05,
            "unit": "user",
            "max_trips": 5,
        },
        {
            "kind": "population",
            "cadence": "monthly",
            "count": 12,
            "zones": 25,
            "alpha": 20,
            "beta": 0.05,
            "unit": "user",
            "max_trips": 1,
        },
    ],
}


@pytest.mark.parametrize("kind", ["discrete-laplace", "laplace-rounded"])
def test_suggested_parameters_meet_targets_in_monte_carlo(kind: str) -> None:
    """For each entry, 40,000 cells of the real noise (calibrate + Noise.add, the releases'
    own path) at the planned epsilon and bound: the share of |error| > alpha is <= beta plus
    5 standard errors (sd of the share <= 0.0011 at beta 0.05: false-failure rate < 3e-7 per
    check). The discrete Gaussian sigma of the zCDP column is checked the same way."""
    plan = plan_programme(as_programme({**SCHEDULE, "noise": kind}))
    assert plan.feasible
    n = 40_000
    for i, e in enumerate(plan.entries):
        d = e.entry
        assert d.alpha is not None
        noise, _ = calibrate(kind, e.epsilon, l1_sensitivity=d.sensitivity)
        x = noise.add(np.zeros(n, dtype=np.int64), Randomness.for_tests(10 + i))
        slack = 5 * np.sqrt(d.beta * (1 - d.beta) / n)
        assert np.mean(np.abs(x) > d.alpha) <= d.beta + slack
        # and the planned epsilon is not wasteful: 10% less misses the target on average
        tighter, _ = calibrate(kind, 0.9 * e.epsilon, l1_sensitivity=d.sensitivity)
        assert tighter.tail(d.alpha) > d.beta
        assert e.gaussian_sigma is not None
        g = Noise(NoiseKind.DISCRETE_GAUSSIAN, e.gaussian_sigma)
        y = g.add(np.zeros(n, dtype=np.int64), Randomness.for_tests(20 + i))
        assert np.mean(np.abs(y) > d.alpha) <= d.beta + slack


def test_planned_od_release_meets_its_target_end_to_end(tmp_path) -> None:
    """The planned epsilon through the real OD release (DuckDB counting, bounding, noise):
    30 releases of a 9-tile grid (72 cells each, 2,160 cells): the share of cells off by
    more than alpha is <= beta + 5 sd (sd 0.0047): false-failure rate < 1e-6."""
    from collections import Counter

    from tests.helpers import box_grid, trips_frame

    from privmob.data import load_trips
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix

    prog = Programme(
        (ScheduleEntry("od", 30, "daily", zones=9, alpha=6, beta=0.1, max_trips=2),),
        epsilon=1000.0,
    )
    e = plan_programme(prog).entries[0]
    from privmob.engine.duckdb import DuckDBEngine

    grid = box_grid(3)
    rows = [(u, u % 9, (u + 1) % 9) for u in range(40)]
    trips = load_trips(trips_frame(rows), engine=DuckDBEngine(), tessellation=grid)
    true = Counter((str(o), str(d)) for _, o, d in rows)
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "d", budget=1e6)
    errors = []
    for seed in range(30):
        rel = od_matrix(
            trips, tessellation=grid, epsilon=e.epsilon, accountant=acct, max_trips=2, rng=seed
        )
        od = rel.tables["od"]
        truth = np.array([true[(o, d)] for o, d in zip(od.origin, od.destination, strict=True)])
        errors.append(np.abs(od["count"].to_numpy() - truth) > 6)
    share = float(np.mean(errors))
    assert share <= 0.1 + 5 * np.sqrt(0.1 * 0.9 / 2160)


def test_seed_002_naive_accounting_and_trip_level_claim() -> None:
    prog = Programme(
        (
            ScheduleEntry(
                "od", 52, "weekly", zones=25, unit=PrivacyUnit.TRIP, max_trips=70, epsilon=0.66
            ),
        ),
        epsilon=10.0,
    )
    plan = plan_programme(prog)
    assert plan.naive_per_trip == pytest.approx(2402.4)
    assert plan.pure == pytest.approx(2402.4)
    assert not plan.feasible and "the budget is 10" in plan.problems[0]


def test_infeasible_programme_says_what_would_work() -> None:
    plan = plan_programme(as_programme({**SCHEDULE, "budget": {"epsilon": 10}}))
    assert not plan.feasible
    od = plan.entries[0]
    text = " | ".join(od.suggestions)
    assert "a larger budget" in text and "fewer periods" in text
    assert "a looser target" in text and "over one year" in text
    # the horizon bound it suggests meets alpha within its share of the budget
    share = 10 * od.per_person / plan.pure
    t_h = int(text.split("at most ")[1].split(" ")[0])
    noise, _ = calibrate("discrete-laplace", share, l1_sensitivity=t_h)
    assert noise.tail(10) <= 0.05
    worse, _ = calibrate("discrete-laplace", share, l1_sensitivity=t_h + 1)
    assert worse.tail(10) > 0.05


def test_schedule_files_and_bad_input(tmp_path) -> None:
    good = tmp_path / "p.json"
    good.write_text(json.dumps(SCHEDULE))
    assert len(as_programme(good).entries) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**SCHEDULE, "releases": [{"kind": "od", "count": 3, "zonez": 4}]}))
    with pytest.raises(InputError, match="unknown field"):
        as_programme(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        as_programme(broken)
    with pytest.raises(ConfigError, match="either an accuracy target"):
        ScheduleEntry("od", 3)


def test_cli_plan_programme(tmp_path) -> None:
    from typer.testing import CliRunner

    from privmob.cli import app

    path = tmp_path / "p.json"
    path.write_text(json.dumps(SCHEDULE))
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "programme", str(path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "naive per-trip accounting (as Bassolas et al.'s)" in r.output
    assert "the budget meets every target" in r.output
    path.write_text(json.dumps({**SCHEDULE, "budget": {"epsilon": 10}}))
    r = runner.invoke(app, ["plan", "programme", str(path), "--json"])
    assert json.loads(r.output)["feasible"] is False
    r = runner.invoke(app, ["plan", "programme", str(path)], env={"COLUMNS": "200"})
    assert r.exit_code == 1 and "what would work" in r.output
    # the single-release planner still answers at the group level
    r = runner.invoke(app, ["plan", "--alpha", "10"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "smallest eps" in r.output


def test_session_plan_programme_is_the_cli_plan(tmp_path) -> None:
    """``Session.plan_programme`` (Python objects) gives the CLI's ``--json`` plan of the same
    schedule file, and reads no data (the session's input does not exist)."""
    from tests.helpers import box_grid
    from typer.testing import CliRunner

    import privmob as pm
    from privmob.cli import app

    path = tmp_path / "p.json"
    path.write_text(json.dumps(SCHEDULE))
    r = CliRunner().invoke(app, ["plan", "programme", str(path), "--json"])
    assert r.exit_code == 0, r.output
    s = pm.Session(tmp_path / "absent.parquet", tessellation=box_grid(3).gdf, budget=1)
    programme = pm.Programme(
        entries=tuple(
            pm.ScheduleEntry(
                **{k: v for k, v in e.items() if k != "unit"}, unit=PrivacyUnit(e["unit"])
            )
            if "unit" in e
            else pm.ScheduleEntry(**e)
            for e in SCHEDULE["releases"]
        ),
        epsilon=SCHEDULE["budget"]["epsilon"],
        delta=SCHEDULE["budget"].get("delta", 1e-6),
        horizon=SCHEDULE["horizon"],
    )
    assert s.plan_programme(programme).to_dict() == json.loads(r.output)
    assert s.plan_programme(path).to_dict() == json.loads(r.output)
    assert not (tmp_path / "absent.parquet").exists()
    s.close()


def test_the_programme_converts_zcdp_as_the_ledger_does() -> None:
    """Issue 28: the planner used rho + 2 sqrt(rho ln 1/delta) (58.0066 for the docs example)
    while the ledger converts with the tight bound (56.4356): a budget in between was called
    infeasible by the planner and paid by the ledger."""
    from privmob.evaluate.programme import plan_programme
    from privmob.privacy.costs import zcdp_to_epsilon
    from privmob.privacy.zcdp import zcdp_epsilon

    schedule = {
        "horizon": "one year",
        "budget": {"epsilon": 57, "delta": 1e-6},
        "releases": [
            {"kind": "od", "cadence": "weekly", "count": 52, "zones": 25, "alpha": 10,
             "beta": 0.05, "unit": "user", "max_trips": 5},
            {"kind": "population", "cadence": "monthly", "count": 12, "zones": 25, "alpha": 20},
        ],
    }  # fmt: skip
    plan = plan_programme(schedule)
    assert plan.zcdp_rho is not None and plan.zcdp is not None
    assert plan.zcdp == pytest.approx(zcdp_epsilon(plan.zcdp_rho, 1e-6), rel=1e-12)
    assert plan.zcdp == pytest.approx(56.4356, abs=1e-4)
    assert zcdp_to_epsilon(plan.zcdp_rho, 1e-6) == pytest.approx(58.0066, abs=1e-4)
    assert plan.feasible  # 57 lies between the two conversions
