"""A trip-level mobility report (issue 42, item 3): the per-user analyses are left out before the
budget is split, from the public unit alone, and the report says why; an analysis whose true
counts are zero (no missing values) beside analyses that clear their noise floor is not called
noise. Real files, a real Session."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid

import privmob as pm
from privmob.errors import ConfigError
from privmob.releases.report import ANALYSES, ReportConfig
from privmob.releases.report.config import NEEDS_A_RIDER, PER_USER_ANALYSES
from privmob.releases.report.spec import ReportSpec

JANUARY = ("2024-01-01", "2024-02-01")


def rides(tmp_path: Path, n: int = 3_000, seed: int = 0) -> Path:
    """Bike-share rides without a rider id (start and end coordinates inside a 3x3 grid of
    0.01 degree at 13 E, 52 N: box_grid(3)), none with a missing value."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 31 * 86_400, n), "s")
    frame = pd.DataFrame(
        {
            "ride_id": [f"r{i}" for i in range(n)],
            "started_at": start,
            "ended_at": start + pd.to_timedelta(rng.integers(120, 3_600, n), "s"),
            "start_lat": 52 + rng.uniform(0.001, 0.029, n),
            "start_lng": 13 + rng.uniform(0.001, 0.029, n),
            "end_lat": 52 + rng.uniform(0.001, 0.029, n),
            "end_lng": 13 + rng.uniform(0.001, 0.029, n),
        }
    )
    path = tmp_path / "rides.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_per_user_analyses_are_left_out_before_the_budget_is_split() -> None:
    trip = ReportConfig.build(epsilon=1.0, max_trips=None, period=JANUARY, unit="trip")
    kept = [a for a in ANALYSES if a not in PER_USER_ANALYSES]
    assert trip.selected == tuple(kept)
    assert trip.omitted == dict.fromkeys(PER_USER_ANALYSES, NEEDS_A_RIDER)
    # the whole epsilon goes to the 10 others (weights 1): 0.1 each, none to the left-out
    assert [trip.epsilon_for(a) for a in kept] == pytest.approx([1.0 / len(kept)] * len(kept))
    assert trip.to_dict()["omitted_analyses"] == trip.omitted
    # the plan counts the cells of the released analyses only: as if the 10 had been asked for
    asked = ReportConfig.build(
        epsilon=1.0, max_trips=None, period=JANUARY, unit="trip", analyses=kept
    )
    grid = box_grid(3)
    assert asked.omitted == {}
    assert ReportSpec(grid, trip).plan().cells == ReportSpec(grid, asked).plan().cells
    assert ReportSpec(grid, trip).plan().parts == 10
    # user level: all 15, and its parameters say nothing new (the golden values stay)
    user = ReportConfig.build(epsilon=1.0, max_trips=3, period=JANUARY)
    assert user.selected == ANALYSES and user.omitted == {}
    assert "omitted_analyses" not in user.to_dict()
    # only per-user analyses asked for at trip level: refused, naming the reason
    with pytest.raises(ConfigError, match="needs a rider id"):
        ReportConfig.build(
            epsilon=1.0, max_trips=None, period=JANUARY, unit="trip", analyses=["trips_per_user"]
        )


def test_a_trip_level_report_says_what_it_left_out_and_calls_no_true_zero_noise(
    tmp_path: Path,
) -> None:
    s = pm.Session(
        str(rides(tmp_path)),
        tessellation=box_grid(3).gdf,
        unit="trip",
        budget=5,
        dataset="rides",
        seed=7,  # fixed noise (a throw-away ledger): the figures below are of this draw
    )
    plan = s.plan_report(epsilon=1, period=pm.Period(*JANUARY), unit="trip")
    assert plan.parts == 10
    assert "left out: trips per user, time between trips" in plan.summary()
    assert NEEDS_A_RIDER in plan.summary()
    out = tmp_path / "report.html"
    s.report(epsilon=1, period=pm.Period(*JANUARY), unit="trip", output=out)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert sorted(doc["analyses"]) == sorted(a for a in ANALYSES if a not in PER_USER_ANALYSES)
    assert doc["params"]["omitted_analyses"] == dict.fromkeys(PER_USER_ANALYSES, NEEDS_A_RIDER)
    assert s.ledger.spent() == pytest.approx(1.0)  # all of it, on 10 analyses
    html = out.read_text()
    for name in PER_USER_ANALYSES:
        assert f"id='{name}'" not in html  # no section (no single bin "1", no empty curve)
        assert f"data-analysis='{name}'" in html
    assert html.count(f"left out ({NEEDS_A_RIDER.replace(chr(39), '&#x27;')})") == 5
    # no ride misses a value: missing_values' cells are true zeros, all within their margin,
    # while e.g. trips per weekday (3,000 rides over 7 cells, margin +-30) clears its floor
    sig = doc["signal"]
    assert sig["analyses"]["trips_per_weekday"]["cells_above_noise_floor"] > 0
    missing = sig["analyses"]["missing_values"]
    assert missing["share_below_margin"] == 1.0 and missing["cells_above_noise_floor"] == 0
    assert missing["warning"] is None and "small or zero" in missing["note"]
    assert sig["warning"] is None
    assert "read those analyses as noise" not in html
    s.close()
