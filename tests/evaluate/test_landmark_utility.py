"""Utility study of the landmark schemes: the 0% / 100% limits and the real series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privmob.evaluate.landmark_utility import (
    gowalla_hourly_counts,
    landmark_set,
    plot_utility,
    synthetic_series,
    to_markdown,
    utility_table,
)


def test_limits_match_the_reference_schemes(tmp_path: Path) -> None:
    x = synthetic_series(96, seed=1)
    table = utility_table(x, epsilon=1.0, shares=[0.0, 0.5, 1.0], trials=2, seed=3)
    by = table.set_index(["share", "scheme"])
    for col in ("mae", "mean_epsilon_t"):
        assert by.loc[(0.0, "uniform"), col] == by.loc[(0.0, "event"), col]
        assert by.loc[(1.0, "uniform"), col] == pytest.approx(by.loc[(1.0, "user"), col], 1e-12)
    assert by.loc[(0.0, "skip"), "mae"] == by.loc[(0.0, "event"), "mae"]
    # more landmarks, less budget per timestamp: uniform error grows
    assert by.loc[(0.5, "uniform"), "mae"] > by.loc[(0.0, "uniform"), "mae"]
    # uniform error at 0% is the noise alone: E|discrete Laplace(1)| = 2q/(1-q^2), q = e^-1
    q = np.exp(-1.0)
    assert by.loc[(0.0, "event"), "mae"] == pytest.approx(2 * q / (1 - q * q), rel=0.25)
    md = to_markdown(table)
    assert md.count("\n") == 5 and "| 50% |" in md
    png = plot_utility({"synthetic": table}, tmp_path / "u.png")
    assert png.stat().st_size > 1000


def test_landmark_sets_have_the_requested_share() -> None:
    assert landmark_set(200, 0.25, 0).size == 50
    assert landmark_set(200, 0.0, 0).size == 0
    assert np.array_equal(landmark_set(200, 1.0, 0), np.arange(200))


def test_gowalla_hourly_counts_bound_each_user(shared_data: Path) -> None:
    GOWALLA = shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"
    capped = gowalla_hourly_counts(GOWALLA, max_per_hour=1)
    loose = gowalla_hourly_counts(GOWALLA, max_per_hour=1000)
    assert len(capped) == 720  # the public grid: every hour of September 2010
    assert capped.index.is_monotonic_increasing
    assert (capped <= loose).all() and capped.sum() < loose.sum()
    assert capped.sum() > 1000
    raw = pd.read_csv(GOWALLA, sep="\t", header=None, usecols=[0, 1, 2, 3])
    raw.columns = ["uid", "time", "lat", "lng"]
    t = pd.to_datetime(raw["time"], utc=True).dt.tz_localize(None)
    sel = raw[(t >= "2010-09-01") & (t < "2010-10-01") & raw["lat"].between(40.70, 40.88)
              & raw["lng"].between(-74.02, -73.91)]  # fmt: skip
    assert loose.sum() == len(sel)
    users_per_hour = sel.assign(h=t[sel.index].dt.floor("h")).groupby("h")["uid"].nunique()
    assert capped.sum() == users_per_hour.sum()
