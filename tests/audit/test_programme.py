"""Programme cost (SPEC 5 vectors, seeds 002 and 003) and ledger statements."""

from __future__ import annotations

import pytest

from privmob.audit.programme import (
    ledger_programme,
    per_user,
    programme,
    repeated,
    trips_over_releases,
)
from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger import Ledger


def test_weekly_releases_over_a_year_vector() -> None:
    lines = repeated(0.66, 52, unit=PrivacyUnit.TRIP, max_units=70)
    assert len(lines) == 52
    assert lines[0].user_cost.epsilon == pytest.approx(70 * 0.66)
    assert lines[-1].cumulative.epsilon == pytest.approx(2402.4, abs=1e-9)
    assert lines[-1].cumulative.unit == PrivacyUnit.USER


def test_thresholding_delta_vector_and_its_group_version() -> None:
    one = repeated(0.66, 1, unit=PrivacyUnit.TRIP, max_units=1, tau=100)[0]
    assert one.release_cost.delta == pytest.approx(2.0998e-29, rel=5e-5)
    # group privacy over 70 trips inflates delta by 70 e^{69 * 0.66}: no longer negligible
    week = repeated(0.66, 1, unit=PrivacyUnit.TRIP, max_units=70, tau=100)[0]
    assert week.user_cost.delta == pytest.approx(
        70 * 2.0998e-29 * 2.718281828 ** (69 * 0.66), rel=1e-4
    )
    assert week.user_cost.delta > 1e-8


def test_per_cell_delta_vector_seed002_week() -> None:
    # a person adds at most 1 to each of at most 70 cells: per-cell composition gives
    # 70 x 2.1e-29 = 1.5e-27, where group privacy gives 8.8e-8; both are reported
    week = repeated(0.66, 1, unit=PrivacyUnit.TRIP, max_units=70, tau=100, cells=70)[0]
    assert week.cell_rule is not None and week.group_rule is not None
    assert week.cell_rule.delta == pytest.approx(70 * 2.0998e-29, rel=5e-5)
    assert week.group_rule.delta == pytest.approx(8.8e-8, rel=0.02)
    assert week.user_cost == week.cell_rule
    assert week.user_cost.epsilon == pytest.approx(70 * 0.66)
    year = repeated(0.66, 52, unit=PrivacyUnit.TRIP, max_units=70, tau=100, cells=70)[-1]
    assert year.cumulative.delta == pytest.approx(52 * 70 * 2.0998e-29, rel=5e-5)


def test_per_cell_rule_zcdp_and_choice() -> None:
    from privmob.audit.programme import per_user_rules

    gauss = Cost.zcdp(0.01, 1e-9, PrivacyUnit.TRIP)
    best, group, cell = per_user_rules(gauss, 10, 10)
    assert group is not None and cell is not None
    assert cell.rho == pytest.approx(0.1) and group.rho == pytest.approx(1.0)
    assert best == cell
    # more cells than trips (a release where one trip touches several cells): the group
    # rule is the smaller epsilon and is kept
    best, group, cell = per_user_rules(Cost(0.5, 1e-12, None, PrivacyUnit.TRIP), 2, 6)
    assert best == group
    # a user-level release is already per person
    assert per_user_rules(Cost.pure(1.0), None, 5) == (Cost.pure(1.0), None, None)
    with pytest.raises(ConfigError):
        per_user_rules(Cost.pure(1.0, PrivacyUnit.TRIP), None, 0)


def test_posterior_bound_vector() -> None:
    line = repeated(0.66, 1, unit=PrivacyUnit.USER)[0]
    assert line.posterior_bound == pytest.approx(0.659260, abs=5e-7)


def test_seed003_user_with_14_trips_over_305_days() -> None:
    trips = [1] * 14 + [0] * 291
    assert len(trips) == 305
    assert trips_over_releases(0.5, trips).epsilon == pytest.approx(7.0)
    assert trips_over_releases(0.5, [0] * 305).epsilon == 0.0
    assert trips_over_releases(0.5, [3, 0, 2]).epsilon == pytest.approx(2.5)


def test_trip_level_needs_a_stated_maximum() -> None:
    with pytest.raises(ConfigError, match="no per-person guarantee"):
        per_user(Cost.pure(0.5, PrivacyUnit.TRIP), None)
    assert per_user(Cost.pure(0.5), None).epsilon == 0.5
    with pytest.raises(ConfigError):
        programme([])


def test_statement_from_a_real_ledger(tmp_path) -> None:
    led = Ledger(tmp_path / "ledger.sqlite")
    led.set_budget("city", 10.0, 0.0, PrivacyUnit.USER)
    led.charge("city", Cost.pure(1.0), kind="od")
    led.charge("city", Cost.pure(0.1, PrivacyUnit.TRIP), kind="od-trip", group_size=20)
    lines = ledger_programme(led, "city")
    assert [ln.user_cost.epsilon for ln in lines] == pytest.approx([1.0, 2.0])
    assert lines[-1].cumulative.epsilon == pytest.approx(3.0)
    # agrees with the ledger's own accounting
    assert lines[-1].cumulative.epsilon == pytest.approx(led.spent("city").epsilon)
    with pytest.raises(ConfigError, match="no releases"):
        ledger_programme(led, "other")
