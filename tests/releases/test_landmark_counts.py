"""Counts per zone and hour from raw Gowalla events, bounded per user, then published."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.data import load_events
from privmob.data.grids import square_grid
from privmob.data.tessellation_input import load_tessellation
from privmob.domain import time_grid
from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant, write_release
from privmob.releases.landmark import landmark_spend, publish_series
from privmob.releases.landmark_counts import bounded_zone_counts, publish_zone_counts

COLUMNS = ["uid", "datetime", "lat", "lng", "location_id"]


@pytest.fixture(scope="module")
def gowalla(shared_data):  # type: ignore[no-untyped-def]
    from privmob.engine import make_engine

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    path = shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"
    events = load_events(
        path, engine=make_engine("duckdb"), tessellation=tess, header=False, names=COLUMNS,
        delimiter="\t", timezone="America/New_York",
    )  # fmt: skip
    raw = pd.read_csv(path, sep="\t", header=None, names=COLUMNS)
    local = (
        pd.to_datetime(raw["datetime"], utc=True)
        .dt.tz_convert("America/New_York")
        .dt.tz_localize(None)
    )
    return tess, events, raw.assign(local=local)


def test_bounded_counts_match_pandas(gowalla) -> None:  # type: ignore[no-untyped-def]
    tess, events, raw = gowalla
    grid = time_grid("2010-09-06", "2010-09-13", "1h")
    one, _ = bounded_zone_counts(events, tiles=tess.k, grid=grid, max_per_bin=1, rng=None)
    many, out_many = bounded_zone_counts(
        events, tiles=tess.k, grid=grid, max_per_bin=10_000, rng=None
    )
    assert one.shape == many.shape == (tess.k + 1, 168)
    sel = raw[(raw["local"] >= "2010-09-06") & (raw["local"] < "2010-09-13")]
    hour = sel["local"].dt.floor("h")
    expected_all = sel.groupby(hour).size().reindex(grid, fill_value=0).to_numpy()
    expected_users = sel.groupby(hour)["uid"].nunique().reindex(grid, fill_value=0).to_numpy()
    np.testing.assert_array_equal(many.sum(axis=0), expected_all)
    np.testing.assert_array_equal(one.sum(axis=0), expected_users)  # 1 event per user-hour
    assert np.all(one <= many) and many[-1].sum() > 0  # some check-ins fall outside the zones
    assert out_many == len(raw) - len(sel)  # SPEC 1.1: every out-of-period check-in is counted


def test_publish_zone_counts(gowalla, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tess, events, _ = gowalla
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_budget("gowalla", 2.0, unit=PrivacyUnit.LANDMARK)
    grid = time_grid("2010-09-06", "2010-09-08", "1h")
    rel = publish_zone_counts(
        events, tile_ids=tess.tile_ids, grid=grid, max_per_bin=2, landmarks=[10, 11],
        epsilon=1.0, scheme="uniform", accountant=Accountant(ledger, "gowalla"), rng=5,
    )  # fmt: skip
    assert rel.bounds["sensitivity_per_timestamp"] == 2.0
    assert "enforced" in rel.bounds["sensitivity_source"]
    assert len(rel.tables["series"]) == (tess.k + 1) * 48
    assert rel.tables["budgets"]["epsilon_t"].tolist() == pytest.approx([1 / 3] * 48)
    assert "outside" in set(rel.tables["series"]["zone"])
    assert ledger.spent("gowalla").epsilon == pytest.approx(1.1)  # + the outliers cell (0.1)
    write_release(rel, tmp_path / "out")
    back = pd.read_parquet(tmp_path / "out" / "series.parquet")
    assert back["value"].dtype == np.int64 and len(back) == (tess.k + 1) * 48


def test_time_grid_is_checked() -> None:
    assert len(time_grid("2024-01-01", "2024-01-02", "1h")) == 24
    with pytest.raises(ConfigError):
        time_grid("2024-01-02", "2024-01-01", "1h")
    # a last bin running past the declared (exclusive) end would count events after --end
    # inside the period instead of in the outliers cell (SPEC 1.1)
    with pytest.raises(ConfigError, match="whole number"):
        time_grid("2024-01-01 00:00", "2024-01-01 05:30", "1h")
    assert len(time_grid("2024-01-01 00:00", "2024-01-01 05:30", "30min")) == 11


# -- events outside the declared period (SPEC 1, invariant 1) --------------------------------

IN, OUT = (2.005, 48.005), (5.0, 50.0)  # a point inside the 2 x 2 grid, one outside it


def _hand_made(tmp_path):  # type: ignore[no-untyped-def]
    """Period 2024-01-01 [00:00, 24:00) hourly. Outside it: user a 5 events (before), user b
    2 (one exactly at the exclusive end), user c 1 (outside the zones too)."""
    from privmob.engine import make_engine

    rows = [
        ("a", "2024-01-01 03:10:00", *IN), ("a", "2024-01-01 03:20:00", *IN),
        ("a", "2024-01-01 04:00:00", *OUT),
        *[("a", f"2023-12-31 0{h}:00:00", *IN) for h in range(5)],
        ("b", "2024-01-01 23:59:59", *IN),
        ("b", "2024-01-02 00:00:00", *IN), ("b", "2024-03-01 12:00:00", *IN),
        ("c", "2023-01-01 00:00:00", *OUT),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["uid", "datetime", "lng", "lat"])
    path = tmp_path / "events.csv"
    df.to_csv(path, index=False)
    tess = square_grid((2.0, 48.0, 2.02, 48.02), 1000)
    events = load_events(path, engine=make_engine("duckdb"), tessellation=tess)
    return tess, events, time_grid("2024-01-01", "2024-01-02", "1h")


@pytest.mark.parametrize(("bound", "expected"), [(1, 3), (2, 5), (10, 8)])
def test_out_of_period_events_are_counted_bounded(tmp_path, bound, expected) -> None:  # type: ignore[no-untyped-def]
    tess, events, grid = _hand_made(tmp_path)
    counts, outliers = bounded_zone_counts(
        events, tiles=tess.k, grid=grid, max_per_bin=bound, rng=None
    )
    # a: min(5, bound), b: min(2, bound), c: 1 -- never dropped, never more than bound per user
    assert outliers == expected
    assert counts.shape == (tess.k + 1, 24)
    assert counts[:, 3].sum() == min(2, bound) and counts[-1, 4] == 1 and counts[:, 23].sum() == 1
    assert counts.sum() == 4 if bound >= 2 else counts.sum() == 3


def test_outliers_cell_is_released_and_charged(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tess, events, grid = _hand_made(tmp_path)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_budget("d", 1.25, unit=PrivacyUnit.LANDMARK)
    acct = Accountant(ledger, "d")
    rel = publish_zone_counts(
        events, tile_ids=tess.tile_ids, grid=grid, max_per_bin=2, landmarks=[3, 4],
        epsilon=1.0, scheme="adaptive", accountant=acct, rng=3, outliers_epsilon=0.25,
    )  # fmt: skip
    out = rel.tables["outliers"]
    assert out["cell"].tolist() == ["outside the period"]
    assert out["epsilon"].iloc[0] == 0.25 and out["noise_scale"].iloc[0] == pytest.approx(8.0)
    assert isinstance(out["value"].iloc[0], np.integer | int)
    # the series alone keeps the landmark theorem at epsilon; the cell composes on top
    eps_t = rel.tables["budgets"]["epsilon_t"].to_numpy()
    assert landmark_spend(eps_t, np.array([3, 4])).max() <= 1.0 + 1e-9
    assert rel.cost.epsilon == pytest.approx(1.25) and rel.unit is PrivacyUnit.LANDMARK
    assert [e.cost.epsilon for e in rel.ledger_entries] == pytest.approx([1.0, 0.25])
    # the same two entries as before the count template ran it
    assert [(e.kind, e.description) for e in rel.ledger_entries] == [
        ("series-counts", "landmark series (adaptive)"),
        ("series-counts", "outliers cell (outside the period)"),
    ]
    assert ledger.spent("d").epsilon == pytest.approx(1.25)
    write_release(rel, tmp_path / "o")
    assert len(pd.read_parquet(tmp_path / "o" / "outliers.parquet")) == 1
    # nothing is left: the next release (even without its outliers share) is refused
    with pytest.raises(BudgetError):
        publish_zone_counts(
            events, tile_ids=tess.tile_ids, grid=grid, max_per_bin=2, landmarks=[],
            epsilon=0.01, scheme="uniform", accountant=acct, rng=4,
        )  # fmt: skip
    with pytest.raises(ConfigError):
        publish_zone_counts(
            events, tile_ids=tess.tile_ids, grid=grid, max_per_bin=2, landmarks=[],
            epsilon=0.01, scheme="uniform", accountant=acct, rng=4, outliers_epsilon=0.0,
        )  # fmt: skip


def test_outliers_noise_scale(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Discrete Laplace of scale sensitivity / outliers_epsilon = 10 around the exact value.

    200 draws: the mean |noise| (about 10, sd about 10) has sd 0.71; the window +-3 (4.2 sd)
    fails falsely with probability < 1e-4, and a scale of 5 or 20 lands far outside it.
    """
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_budget("d", 1e6, unit=PrivacyUnit.LANDMARK)
    acct = Accountant(ledger, "d")
    rng = np.random.default_rng(0)
    draws = []
    for seed in rng.integers(0, 2**31, size=200):
        rel = publish_series(
            np.array([5, 6, 7]), [1], 1.0, "uniform", sensitivity=2.0, accountant=acct,
            rng=int(seed), outliers=(1000, 0.2),
        )  # fmt: skip
        draws.append(int(rel.tables["outliers"]["value"].iloc[0]))
    err = np.abs(np.array(draws) - 1000)
    assert abs(err.mean() - 10.0) < 3.0
    assert abs(np.mean(draws) - 1000) < 4.0  # unbiased: sd of the mean about 1
    assert ledger.spent("d").epsilon == pytest.approx(200 * 1.2)


def test_session_series_counts_is_the_command_with_landmark_timestamps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``Session.series_counts`` on par with ``privmob series-counts``: the golden case's
    command (landmarks as positions 1, 4) and the Session with the same landmarks as bin starts
    publish the same values with the same seed."""
    import json
    from datetime import datetime

    from tests.releases.golden_cases import INPUTS, golden_path

    import privmob as pm

    golden = json.loads(golden_path("series_counts").read_text())["tables"]["series.parquet"]
    with pm.Session(
        str(INPUTS / "events.csv"), tessellation=str(INPUTS / "grid.geojson"), seed=7,
        budget=pm.PureDP(100), unit=pm.PrivacyUnit.LANDMARK, dataset="golden",
    ) as s:  # fmt: skip
        rel = s.series_counts(
            epsilon=1, period=pm.Period("2024-01-01", "2024-01-03"), freq="6h", max_per_bin=1,
            landmarks=["2024-01-01 06:00", datetime(2024, 1, 2)],
        ).release  # fmt: skip
    assert rel.params["landmarks"] == [1, 4]
    table = rel.tables["series"]
    assert list(table.columns) == golden["columns"]
    value = golden["columns"].index("value")
    assert table["value"].tolist() == [row[value] for row in golden["rows"]]
    with pytest.raises(ConfigError, match="not a bin of the declared period"):
        s.plan_series_counts(
            epsilon=1, period=pm.Period("2024-01-01", "2024-01-03"), freq="6h",
            landmarks=["2024-01-01 07:00"],
        )  # fmt: skip


def _drop(events) -> None:  # type: ignore[no-untyped-def]
    """Make the loaded events unreadable: the engine fails on the next count."""
    con = events.engine.con
    kind = con.execute(
        "SELECT table_type FROM information_schema.tables WHERE table_name = ?", [events.view]
    ).fetchone()[0]
    con.execute(f"DROP {'VIEW' if kind == 'VIEW' else 'TABLE'} {events.view}")


def test_a_series_that_failed_leaves_no_precheck_behind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """series-counts is run by the count template (its one precheck, cleared when a release
    fails after it): a series that failed after its budget check must not let the next one of
    the same cost skip the check. Spent meanwhile by another accountant, the next series is
    refused before it reads anything (on the code before the template it read the input and
    failed on it)."""
    tess, events, grid = _hand_made(tmp_path)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_budget("d", 1.1, unit=PrivacyUnit.LANDMARK)
    acct = Accountant(ledger, "d")
    kw = dict(tile_ids=tess.tile_ids, grid=grid, max_per_bin=1, landmarks=[2], epsilon=1.0,
              scheme="uniform")  # fmt: skip
    _drop(events)
    with pytest.raises(Exception) as failed:  # the input is gone: the engine fails to read it
        publish_zone_counts(events, accountant=acct, rng=1, **kw)  # type: ignore[arg-type]
    assert not isinstance(failed.value, BudgetError)
    _, events, _ = _hand_made(tmp_path)
    publish_zone_counts(events, accountant=Accountant(ledger, "d"), rng=2, **kw)  # type: ignore[arg-type]
    _drop(events)
    with pytest.raises(BudgetError):
        publish_zone_counts(events, accountant=acct, rng=3, **kw)  # type: ignore[arg-type]
