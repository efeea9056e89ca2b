"""The privacy ledger: a persistent, append-only record of what each dataset has spent.

One SQLite file holds any number of datasets. A dataset's total budget is set once
(:meth:`Ledger.set_budget`). Every release is charged with :meth:`Ledger.charge` *before* its
output is written: the check of what remains and the insert of the new entry happen in one
``BEGIN IMMEDIATE`` transaction, so two processes racing for the last of a budget cannot both
succeed. Entries can be neither updated nor deleted (SQLite triggers refuse it).

Budgets and charges are kept in (epsilon, delta) per the dataset's unit of privacy and add up
by basic sequential composition. A release on a finer unit (trip, event) is charged to a
user-level budget only through group privacy with a stated group size.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost, Unit

DEFAULT_LEDGER_ENV = "PRIVMOB_LEDGER"
DEFAULT_LEDGER_NAME = "privmob-ledger.sqlite"
TOLERANCE = 1e-9  # relative slack for floating-point sums of epsilons

SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    dataset     TEXT PRIMARY KEY,
    epsilon     REAL NOT NULL,
    delta       REAL NOT NULL,
    unit        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    note        TEXT
);
CREATE TABLE IF NOT EXISTS releases (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset         TEXT NOT NULL REFERENCES budgets(dataset),
    created_at      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    epsilon         REAL NOT NULL,
    delta           REAL NOT NULL,
    rho             REAL,
    unit            TEXT NOT NULL,
    release_epsilon REAL NOT NULL,
    release_delta   REAL NOT NULL,
    release_unit    TEXT NOT NULL,
    group_size      INTEGER,
    for_publication INTEGER NOT NULL,
    description     TEXT,
    params          TEXT
);
CREATE TRIGGER IF NOT EXISTS releases_append_only_u BEFORE UPDATE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS releases_append_only_d BEFORE DELETE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS budgets_fixed_u BEFORE UPDATE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END;
CREATE TRIGGER IF NOT EXISTS budgets_fixed_d BEFORE DELETE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END;
"""


def default_ledger_path() -> Path:
    """``$PRIVMOB_LEDGER`` if set, else ``./privmob-ledger.sqlite``."""
    return Path(os.environ.get(DEFAULT_LEDGER_ENV, DEFAULT_LEDGER_NAME))


@dataclass(frozen=True)
class Budget:
    dataset: str
    epsilon: float
    delta: float
    unit: Unit
    created_at: str


@dataclass(frozen=True)
class Entry:
    """One charged release."""

    id: int
    dataset: str
    created_at: str
    kind: str
    cost: Cost  # in the budget's unit
    release_cost: Cost  # as the release states it
    group_size: int | None
    for_publication: bool
    description: str
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.dataset,
            "created_at": self.created_at,
            "kind": self.kind,
            "cost": self.cost.to_dict(),
            "release_cost": self.release_cost.to_dict(),
            "group_size": self.group_size,
            "for_publication": self.for_publication,
            "description": self.description,
        }


@dataclass(frozen=True)
class Spent:
    epsilon: float
    delta: float


class Ledger:
    """A privacy ledger stored in an SQLite file."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 60.0):
        self.path = Path(path) if path is not None else default_ledger_path()
        self.timeout = timeout
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            con.execute("PRAGMA foreign_keys = ON")
            yield con
        finally:
            con.close()

    # -- budgets --------------------------------------------------------------------------
    def set_budget(
        self,
        dataset: str,
        epsilon: float,
        delta: float = 0.0,
        unit: Unit | str = Unit.USER,
        note: str = "",
    ) -> Budget:
        """Set a dataset's total budget, once. Setting the same budget again is a no-op."""
        Cost(epsilon, delta)  # validates
        unit = Unit(unit)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute(
                    "SELECT epsilon, delta, unit FROM budgets WHERE dataset = ?", (dataset,)
                ).fetchone()
                if row is not None:
                    con.execute("ROLLBACK")
                    if (row[0], row[1], row[2]) != (epsilon, delta, unit.value):
                        raise BudgetError(
                            f"dataset '{dataset}' already has a budget of epsilon={row[0]}, "
                            f"delta={row[1]} per {row[2]} in {self.path}; a budget is set once",
                            hint="use another ledger file or dataset name for a new budget",
                        )
                    return self.budget(dataset)
                con.execute(
                    "INSERT INTO budgets VALUES (?, ?, ?, ?, ?, ?)",
                    (dataset, float(epsilon), float(delta), unit.value, _now(), note),
                )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return self.budget(dataset)

    def budget(self, dataset: str) -> Budget:
        with self._connect() as con:
            row = con.execute(
                "SELECT dataset, epsilon, delta, unit, created_at FROM budgets WHERE dataset = ?",
                (dataset,),
            ).fetchone()
        if row is None:
            raise BudgetError(
                f"no privacy budget is set for dataset '{dataset}' in {self.path}",
                hint=f"set one first: privmob ledger init {dataset} --epsilon 10 "
                f"--ledger {self.path}  (or pass --budget to the release command)",
            )
        return Budget(row[0], row[1], row[2], Unit(row[3]), row[4])

    def has_budget(self, dataset: str) -> bool:
        with self._connect() as con:
            return (
                con.execute("SELECT 1 FROM budgets WHERE dataset = ?", (dataset,)).fetchone()
                is not None
            )

    def datasets(self) -> list[Budget]:
        with self._connect() as con:
            rows = con.execute("SELECT dataset FROM budgets ORDER BY dataset").fetchall()
        return [self.budget(r[0]) for r in rows]

    # -- spending ----------------------------------------------------------------------------
    def spent(self, dataset: str) -> Spent:
        with self._connect() as con:
            return _spent(con, dataset)

    def remaining(self, dataset: str) -> Spent:
        b = self.budget(dataset)
        s = self.spent(dataset)
        return Spent(max(0.0, b.epsilon - s.epsilon), max(0.0, b.delta - s.delta))

    def in_budget_unit(self, dataset: str, cost: Cost, group_size: int | None = None) -> Cost:
        """The cost a release charges against the dataset's budget unit."""
        b = self.budget(dataset)
        return _convert(cost, b.unit, group_size)

    def check(self, dataset: str, cost: Cost, group_size: int | None = None) -> None:
        """Raise :class:`BudgetError` if the release would not fit now (no charge is made)."""
        b = self.budget(dataset)
        charged = _convert(cost, b.unit, group_size)
        _refuse_if_over(b, self.spent(dataset), charged, self.path)

    def charge(
        self,
        dataset: str,
        cost: Cost,
        *,
        kind: str,
        description: str = "",
        params: dict[str, Any] | None = None,
        group_size: int | None = None,
        for_publication: bool = True,
    ) -> Entry:
        """Charge a release atomically, or raise :class:`BudgetError` and charge nothing."""
        return self.charge_parts(
            dataset,
            [(description, cost)],
            kind=kind,
            params=params,
            group_size=group_size,
            for_publication=for_publication,
        )[0]

    def charge_parts(
        self,
        dataset: str,
        parts: list[tuple[str, Cost]],
        *,
        kind: str,
        params: dict[str, Any] | None = None,
        group_size: int | None = None,
        for_publication: bool = True,
    ) -> list[Entry]:
        """Charge several parts of one release (e.g. one per period) in one transaction:
        all entries are written, or none is."""
        if not parts:
            raise ConfigError("nothing to charge")
        # a recorded programme refuses releases outside it (privmob.privacy.programme_ledger)
        from privmob.privacy.programme_ledger import check_release

        check_release(self, dataset, kind, parts)
        with self._connect() as con:
            for attempt in range(50):
                try:
                    con.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as exc:  # database is locked
                    if attempt == 49:
                        raise BudgetError(f"the ledger {self.path} stayed locked: {exc}") from exc
                    time.sleep(0.05 * (attempt + 1))
            try:
                row = con.execute(
                    "SELECT dataset, epsilon, delta, unit, created_at FROM budgets "
                    "WHERE dataset = ?",
                    (dataset,),
                ).fetchone()
                if row is None:
                    raise BudgetError(
                        f"no privacy budget is set for dataset '{dataset}'",
                        hint=f"privmob ledger init {dataset} --epsilon E",
                    )
                b = Budget(row[0], row[1], row[2], Unit(row[3]), row[4])
                charged = [_convert(c, b.unit, group_size) for _, c in parts]
                total = charged[0]
                for c in charged[1:]:
                    total = total + c
                _refuse_if_over(b, _spent(con, dataset), total, self.path)
                created = _now()
                entries = []
                for (description, cost), ch in zip(parts, charged, strict=True):
                    cur = con.execute(
                        "INSERT INTO releases (dataset, created_at, kind, epsilon, delta, rho, "
                        "unit, release_epsilon, release_delta, release_unit, group_size, "
                        "for_publication, description, params) VALUES "
                        "(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (
                            dataset,
                            created,
                            kind,
                            ch.epsilon,
                            ch.delta,
                            ch.rho,
                            ch.unit.value,
                            cost.epsilon,
                            cost.delta,
                            cost.unit.value,
                            group_size,
                            int(for_publication),
                            description,
                            json.dumps(params or {}, default=str),
                        ),
                    )
                    entries.append(
                        Entry(
                            int(cur.lastrowid or 0),
                            dataset,
                            created,
                            kind,
                            ch,
                            cost,
                            group_size,
                            for_publication,
                            description,
                            params or {},
                        )
                    )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return entries

    def entries(self, dataset: str | None = None) -> list[Entry]:
        sql = (
            "SELECT id, dataset, created_at, kind, epsilon, delta, rho, unit, release_epsilon,"
            " release_delta, release_unit, group_size, for_publication, description, params "
            "FROM releases"
        )
        args: tuple[Any, ...] = ()
        if dataset is not None:
            sql += " WHERE dataset = ?"
            args = (dataset,)
        with self._connect() as con:
            rows = con.execute(sql + " ORDER BY id", args).fetchall()
        return [
            Entry(
                r[0],
                r[1],
                r[2],
                r[3],
                Cost(r[4], r[5], r[6], Unit(r[7])),
                Cost(r[8], r[9], None, Unit(r[10])),
                r[11],
                bool(r[12]),
                r[13] or "",
                json.loads(r[14] or "{}"),
            )
            for r in rows
        ]


def _spent(con: sqlite3.Connection, dataset: str) -> Spent:
    row = con.execute(
        "SELECT COALESCE(SUM(epsilon), 0), COALESCE(SUM(delta), 0) FROM releases WHERE dataset = ?",
        (dataset,),
    ).fetchone()
    return Spent(float(row[0]), float(row[1]))


def _convert(cost: Cost, unit: Unit, group_size: int | None) -> Cost:
    if cost.unit == unit:
        return cost
    finer = {Unit.TRIP, Unit.EVENT, Unit.LANDMARK}
    if unit == Unit.USER and cost.unit in finer:
        if group_size is None:
            raise BudgetError(
                f"a {cost.unit}-level release cannot be charged to a user-level budget without "
                f"the most {cost.unit}s one user can have",
                hint="state it (e.g. --group-size 20) to charge group_size x epsilon, or release "
                "at user level",
            )
        return cost.for_group(group_size, Unit.USER)
    raise ConfigError(f"cannot charge a {cost.unit}-level release to a {unit}-level budget")


def _refuse_if_over(b: Budget, spent: Spent, cost: Cost, path: Path) -> None:
    eps_after = spent.epsilon + cost.epsilon
    delta_after = spent.delta + cost.delta
    if eps_after > b.epsilon * (1 + TOLERANCE) or delta_after > b.delta * (1 + TOLERANCE) + 1e-300:
        raise BudgetError(
            f"refused: this release costs {cost.describe()} but dataset '{b.dataset}' has "
            f"epsilon={max(0.0, b.epsilon - spent.epsilon):.6g}, "
            f"delta={max(0.0, b.delta - spent.delta):.3g} left "
            f"(budget epsilon={b.epsilon:g}, delta={b.delta:g}; ledger {path}); nothing was "
            "written",
            hint="lower --epsilon, or see what was spent with: privmob ledger show",
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
