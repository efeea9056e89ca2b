"""Accountant(budget=...) states the data holder's total: a different existing total is refused."""

import pytest

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.releases.base import Accountant


def test_same_budget_again_is_accepted(ledger):
    Accountant(ledger, "d", budget=1.0)
    acct = Accountant(ledger, "d", budget=1.0)
    acct.precheck(Cost.pure(1.0))


def test_a_different_budget_is_refused_not_ignored(ledger):
    first = Accountant(ledger, "d", budget=10.0)
    assert not ledger.has_budget("d")  # pending: written with the first charge (issue 42)
    first.write_budget()
    with pytest.raises(BudgetError, match="already has a budget"):
        Accountant(ledger, "d", budget=1.0)
    with pytest.raises(BudgetError, match="already has a budget"):
        Accountant(ledger, "d", budget=10.0, budget_delta=1e-6)
    assert ledger.budget("d").epsilon == 10.0


def test_release_extras_cannot_overwrite_the_stamp_or_cost():
    from privmob.errors import ConfigError
    from privmob.privacy.costs import PrivacyUnit
    from privmob.releases.release import Release

    def rel(extra):
        return Release(
            "k",
            Cost.pure(1.0),
            PrivacyUnit.USER,
            {},
            {},
            {},
            {},
            {},
            for_publication=False,
            extra=extra,
        )

    assert rel({"note": 1}).metadata()["note"] == 1
    for key in ("for_publication", "privacy", "warning"):
        with pytest.raises(ConfigError, match="may not replace"):
            rel({key: True}).metadata()


def test_a_pending_budget_is_checked_before_reading_and_written_with_the_charge(ledger):
    """A budget asked for is not in the ledger until the first charge, so a refused release
    leaves none behind; the precheck still refuses a cost it cannot pay, before reading."""
    acct = Accountant(ledger, "p", budget=1.0)
    with pytest.raises(BudgetError, match="cannot pay"):
        acct.precheck(Cost.pure(2.0))
    acct.precheck(Cost.pure(0.5))
    assert not ledger.has_budget("p") and acct.remaining().epsilon == 1.0
