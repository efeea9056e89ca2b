"""Edges of the public time domain: every trip inside the declared period lands in its own bin
(never outside the domain, never in another period's cells)."""

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_trips
from privmob.domain import Period
from privmob.privacy.costs import PrivacyUnit
from privmob.releases.od import ODDomain, exact_counts


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def _trips(times: list[str]) -> pd.DataFrame:
    n = len(times)
    return pd.DataFrame(
        {
            "uid": np.arange(n),
            "tid": np.arange(n),
            "start_time": pd.to_datetime(times, format="ISO8601"),
            "origin": [8] * n,
            "destination": [0] * n,
        }
    )


@pytest.mark.parametrize("bound_per", ["release", "period"])
def test_sub_second_times_before_the_end_stay_in_the_last_bin(engine, grid, bound_per):
    """23:59:59.7 is inside day 1; rounding epoch seconds to nearest used to put it in bin 2
    (outside the domain, or in another period's outliers cell)."""
    times = ["2024-01-01 23:59:59.7", "2024-01-02 23:59:59.999", "2024-01-02 00:00:00.2"]
    trips = load_trips(_trips(times), engine=engine, tessellation=grid)
    period = Period.parse("day", "2024-01-01", "2024-01-03")
    dom = ODDomain(9, period.n_bins)
    counts = exact_counts(
        trips, domain=dom, period=period, unit=PrivacyUnit.USER, max_trips=1, bound_per=bound_per
    )
    od = counts[: dom.od_size].reshape(2, 9, 9)
    assert od[0, 8, 0] == 1 and od[1, 8, 0] == 2
    assert counts[dom.od_size :].sum() == 0  # no outliers: every trip is inside the period


def test_fractional_declared_bounds_keep_bins_in_the_domain(engine, grid):
    times = ["2024-01-02 00:00:00.3"]  # inside [00:00:00.5 on Jan 1, 00:00:00.5 on Jan 2)
    trips = load_trips(_trips(times), engine=engine, tessellation=grid)
    period = Period.parse("day", "2024-01-01 00:00:00.5", "2024-01-02 00:00:00.5")
    dom = ODDomain(9, period.n_bins)
    counts = exact_counts(trips, domain=dom, period=period, unit=PrivacyUnit.USER, max_trips=1)
    assert counts[: dom.od_size].reshape(1, 9, 9)[0, 8, 0] == 1


def test_engine_failure_while_counting_is_an_engine_error_and_charges_nothing(
    engine, grid, tmp_path
):
    from privmob.errors import EngineError
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix

    path = tmp_path / "trips.parquet"
    _trips(["2024-01-01 08:00:00"]).to_parquet(path)
    trips = load_trips(path, engine=engine, tessellation=grid)
    path.unlink()  # the input disappears between validation and counting
    ledger = Ledger(tmp_path / "ledger.sqlite")
    acct = Accountant(ledger, "d", budget=1.0)
    with pytest.raises(EngineError, match="failed while counting"):
        od_matrix(trips, tessellation=grid, epsilon=0.5, accountant=acct, max_trips=1, rng=1)
    assert ledger.entries("d") == []


def test_trip_level_group_size_is_enforced_not_assumed(engine, grid, tmp_path):
    """Charging g x epsilon to a user budget is only valid if no user has more than g trips:
    with group_size 3, a user with 40 trips must move the exact counts by at most 3."""
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.samplers import Randomness
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix

    heavy = _trips(["2024-01-01 08:00:00"] * 40).assign(uid=7)
    trips = load_trips(heavy, engine=engine, tessellation=grid)
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "d", budget=200.0, group_size=3)
    # noise scale 1/epsilon with epsilon 50: |noise| >= 1 w.p. 2e^-50/(1+e^-0.02), negligible
    rel = od_matrix(
        trips,
        tessellation=grid,
        epsilon=50.0,
        accountant=acct,
        unit="trip",
        rng=Randomness.for_tests(0),
    )
    od = rel.tables["od"]
    assert od["count"].sum() == 3
    assert rel.bounds["group_size_enforced"] == 3
    assert acct.ledger.spent("d").epsilon == pytest.approx(150.0)


def test_period_scope_without_declared_period_charges_one_part(engine, grid, tmp_path):
    """With no declared period every trip is in the single bin: the out-of-period cell reads
    no data and must not be charged a second epsilon."""
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix

    trips = load_trips(_trips(["2024-01-01 08:00:00"]), engine=engine, tessellation=grid)
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "d", budget=1.0)
    od_matrix(
        trips,
        tessellation=grid,
        epsilon=1.0,
        accountant=acct,
        max_trips=1,
        bound_per="period",
        rng=1,
    )
    assert acct.ledger.spent("d").epsilon == pytest.approx(1.0)
