"""Composed deltas that reach 1 are capped below 1 (then refused by any budget), never an
overflow or a confusing 'delta must be in [0, 1)' error."""

import math

import pytest

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost, PrivacyUnit


def test_sequential_delta_is_capped_below_one():
    total = Cost.approx(0.5, 0.6) + Cost.approx(0.5, 0.6)
    assert 0.99 < total.delta < 1.0
    assert (Cost.approx(0.1, 0.3) * 5).delta < 1.0


def test_group_privacy_delta_for_large_groups():
    small = Cost.approx(0.1, 1e-9, PrivacyUnit.TRIP).for_group(3)
    assert small.delta == pytest.approx(3 * math.exp(2 * 0.1) * 1e-9)
    big = Cost.approx(1.0, 1e-6, PrivacyUnit.TRIP).for_group(1000)  # e^999 overflows a float
    assert big.epsilon == 1000.0 and 0.99 < big.delta < 1.0


def test_ledger_refuses_a_group_cost_with_delta_near_one(ledger):
    ledger.set_budget("d", 1e6, 0.5)
    with pytest.raises(BudgetError):
        ledger.charge("d", Cost.approx(1.0, 1e-6, PrivacyUnit.TRIP), kind="t", group_size=1000)
    assert ledger.entries("d") == []
