import sqlite3

import pytest
from tests.privacy.racing import race_for_budget

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger import Ledger


@pytest.fixture
def ledger(ledger_at):
    """This module's ledgers: one in each store (tests/privacy/conftest.py)."""
    return Ledger(ledger_at)


def test_budget_is_set_once(ledger):
    ledger.set_budget("d", 1.0)
    ledger.set_budget("d", 1.0)  # same budget again: no-op
    with pytest.raises(BudgetError, match="set once"):
        ledger.set_budget("d", 2.0)


def test_refuses_overspend_and_charges_nothing(ledger):
    ledger.set_budget("d", 1.0)
    ledger.charge("d", Cost.pure(0.7), kind="od")
    with pytest.raises(BudgetError, match="refused"):
        ledger.charge("d", Cost.pure(0.4), kind="od")
    assert len(ledger.entries("d")) == 1
    assert ledger.spent("d").epsilon == pytest.approx(0.7)
    ledger.charge("d", Cost.pure(0.3), kind="od")  # exactly the rest fits
    assert ledger.remaining("d").epsilon == pytest.approx(0.0)


def test_no_budget_is_an_error(ledger):
    with pytest.raises(BudgetError, match="no privacy budget"):
        ledger.charge("nope", Cost.pure(0.1), kind="od")


def test_parts_are_all_or_nothing(ledger):
    ledger.set_budget("d", 1.0)
    with pytest.raises(BudgetError):
        ledger.charge_parts("d", [("a", Cost.pure(0.5)), ("b", Cost.pure(0.6))], kind="od")
    assert ledger.entries("d") == []
    ledger.charge_parts("d", [("a", Cost.pure(0.5)), ("b", Cost.pure(0.5))], kind="od")
    assert [e.description for e in ledger.entries("d")] == ["a", "b"]


def test_append_only(tmp_path):
    """The file's triggers (PostgreSQL: test_ledger_postgres.py)."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.set_budget("d", 1.0)
    ledger.charge("d", Cost.pure(0.5), kind="od")
    con = sqlite3.connect(ledger.path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("UPDATE releases SET epsilon = 0")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("DELETE FROM releases")
    with pytest.raises(sqlite3.DatabaseError, match="set once"):
        con.execute("UPDATE budgets SET epsilon = 100")
    con.close()


def test_trip_level_needs_group_size_for_user_budget(ledger):
    ledger.set_budget("d", 10.0)
    with pytest.raises(BudgetError, match="group"):
        ledger.charge("d", Cost.pure(0.5, PrivacyUnit.TRIP), kind="od")
    e = ledger.charge("d", Cost.pure(0.5, PrivacyUnit.TRIP), kind="od", group_size=14)
    assert e.cost.epsilon == pytest.approx(7.0) and e.release_cost.epsilon == 0.5


def test_racing_processes_cannot_overspend(ledger_at: str) -> None:
    """Eight real processes race for a budget that fits three charges (in each store)."""
    path = ledger_at
    Ledger(path).set_budget("d", 1.0)
    assert sum(race_for_budget(path, 8)) == 3
    led = Ledger(path)
    assert len(led.entries("d")) == 3
    assert led.spent("d").epsilon == pytest.approx(0.9)


def test_an_integer_epsilon_verifies(ledger):
    """pm.Session(...).od_matrix(epsilon=1): the entry is hashed as it is stored (1.0), so the
    ledger verifies (it reported 'entry 1: its content does not match its hash' before)."""
    ledger.set_budget("d", 10)
    ledger.charge("d", Cost.pure(1), kind="od")
    ledger.charge("d", Cost(1, 0, rho=1), kind="od")
    assert ledger.verify() == []
