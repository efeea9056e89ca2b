"""The session's view of its ledger: what was spent on the dataset and what remains."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import pandas as pd

    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.entries import Budget
    from privmob.releases.base import Accountant
else:
    pd = lazy_module("pandas")


class SessionLedger:
    """What was spent on the session's dataset, what remains, entry by entry."""

    def __init__(self, ledger: Ledger, dataset: str, accountant: Accountant | None = None) -> None:
        self._ledger = ledger
        self.dataset = dataset
        #: the session's accountant: a budget given to the session is pending there until the
        #: first release is charged (a refused release creates none: releases/base.py)
        self._accountant = accountant

    def _pending(self) -> Budget | None:
        """The budget the session was given and the ledger does not hold yet, else None."""
        pending: Budget | None = getattr(self._accountant, "pending_budget", None)
        if pending is None or self._ledger.has_budget(self.dataset):
            return None
        return pending

    @property
    def path(self) -> Path | str:
        """The ledger's file, or its database URL (without a password)."""
        path = self._ledger.path
        return path if isinstance(path, str) else Path(path)

    def remaining(self) -> float:
        pending = self._pending()
        if pending is not None:
            return float(pending.epsilon)
        return float(self._ledger.remaining(self.dataset).epsilon)

    def spent(self) -> float:
        if self._pending() is not None:
            return 0.0
        return float(self._ledger.spent(self.dataset).epsilon)

    def to_pandas(self) -> pd.DataFrame:
        """One row per ledger entry of the dataset (kind, description, epsilon, delta) with the
        epsilon spent so far and what remains of the budget after it."""
        budget = self._pending() or self._ledger.budget(self.dataset)
        rows = []
        spent = 0.0
        for e in self._ledger.entries(self.dataset):
            spent += e.cost.epsilon
            rows.append(
                {
                    "id": e.id,
                    "created_at": e.created_at,
                    "kind": e.kind,
                    "description": e.description,
                    "epsilon": e.cost.epsilon,
                    "delta": e.cost.delta,
                    "for_publication": e.for_publication,
                    "spent": spent,
                    "remaining": max(0.0, budget.epsilon - spent),
                }
            )
        columns = [
            "id", "created_at", "kind", "description", "epsilon", "delta",
            "for_publication", "spent", "remaining",
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str:
        return (
            f"<p>ledger {self.path}: dataset '{self.dataset}' spent epsilon={self.spent():.6g}, "
            f"remaining {self.remaining():.6g}</p>" + self.to_pandas().to_html(index=False)
        )
