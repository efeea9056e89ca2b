"""What can go wrong with a ledger's store, for both stores (:mod:`privmob.privacy.ledger_store`,
:mod:`privmob.privacy.ledger_pg`): a server lost (before or during a charge's commit), a damaged
file; and the hook a new ledger's custodian key is registered by."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from privmob.errors import BudgetError


class LedgerUnavailable(BudgetError):
    """The ledger's server could not be reached, or the connection was lost mid-charge
    (nothing was charged)."""


class ChargeOutcomeUnknown(LedgerUnavailable):
    """The connection was lost while the charge was being committed: it may have been made.
    The release stays staged; ``privmob ledger recover`` settles it from the ledger."""


#: registers a new ledger's custodian key (``Ledger._establish``), given its connection and id
Establish = Callable[[Any, str], None]


def damaged(path: Path | str, exc: Exception) -> BudgetError:
    return BudgetError(
        f"ledger damaged: {path} cannot be read as a privacy ledger ({exc}); nothing was charged",
        hint=f"restore it from a backup; check it with: privmob ledger verify --ledger {path}",
    )
