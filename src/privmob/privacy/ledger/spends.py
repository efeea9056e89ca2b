"""What a valid spend is: the one rule every ledger entry's costs obey, wherever an entry is
made (a charge, the PostgreSQL server's ``append_entry``, an import) and wherever it is read
(``ledger verify``, the sums a charge or ``ledger show`` decides on).

An entry's epsilon, delta and rho (in the budget's unit) and the epsilon and delta of the
release as it stated them are finite numbers >= 0, and its deltas are below 1. A negative or
infinite cost is no privacy loss at all: signed by a registered key or not, such an entry would
refill (or empty) a budget, so it is refused where it is made and reported, by its id, where it
is read, and it is never added to what a dataset has spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: the cost columns of an entry (``releases``), each a finite number >= 0; deltas below 1
COST_COLUMNS = ("epsilon", "delta", "rho", "release_epsilon", "release_delta")
DELTA_COLUMNS = ("delta", "release_delta")
#: the columns that may be NULL (an entry without rho: not a zCDP release)
OPTIONAL_COLUMNS = ("rho",)


def spend_problem(row: Mapping[str, object]) -> str | None:
    """Why the costs of the entry ``row`` (with its ``id`` when it has one) are not a valid
    spend, as a sentence naming the entry; None when they are."""
    for column in COST_COLUMNS:
        if column not in row:
            continue
        value = row[column]
        if value is None and column in OPTIONAL_COLUMNS:
            continue
        why = _invalid(column, value)
        if why:
            name = f"entry {row['id']}" if row.get("id") is not None else "an entry"
            return f"{name}: {column}={value!r} is not a valid spend ({why})"
    return None


def _invalid(column: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "it must be a number"
    if not math.isfinite(value):
        return "it must be finite"
    if value < 0:
        return "a cost is never below 0"
    if column in DELTA_COLUMNS and value >= 1:
        return "a delta must be below 1"
    return None


def budget_problem(dataset: str, epsilon: object, delta: object) -> str | None:
    """Why a budget row is not a valid budget (the same rule: finite, >= 0, delta below 1)."""
    for column, value in (("epsilon", epsilon), ("delta", delta)):
        why = _invalid(column, value)
        if why:
            return f"budget of '{dataset}': {column}={value!r} is not a valid budget ({why})"
    return None


def sql_condition(record: str = "", infinity: str = "'Infinity'") -> str:
    """The same rule in SQL, over the ``releases`` record ``record`` (none: the row's own
    columns). ``infinity``: the store's literal for it (PostgreSQL's NaN sorts above infinity,
    so ``< 'Infinity'`` refuses it too; SQLite stores a NaN as NULL and writes ``9e999``)."""
    parts = []
    for column in COST_COLUMNS:
        value = f"{record}.{column}" if record else column
        below = "1" if column in DELTA_COLUMNS else infinity
        ok = f"({value} >= 0 AND {value} < {below})"
        if column in OPTIONAL_COLUMNS:
            ok = f"({value} IS NULL OR {ok})"
        else:
            ok = f"({value} IS NOT NULL AND {ok})"
        parts.append(ok)
    return " AND ".join(parts)
