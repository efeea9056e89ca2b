"""The privacy ledger: a persistent, append-only record of what each dataset has spent.

One SQLite file holds any number of datasets. A dataset's total budget is set once
(:meth:`Ledger.set_budget`). Every release is charged with :meth:`Ledger.charge` *before* its
output is written: the check of what remains and the insert of the new entry happen in one
``BEGIN IMMEDIATE`` transaction, so two processes racing for the last of a budget cannot both
succeed. Entries can be neither updated nor deleted (SQLite triggers refuse it).

Budgets and charges are kept in (epsilon, delta) per the dataset's unit of privacy. Two
accountings are kept and a release is refused only when neither fits (:mod:`privmob.privacy.
ledger_accounts`): basic sequential composition of (epsilon, delta), and zCDP composition, where
the rho of Gaussian (zCDP) releases adds up and is converted once, tightly, to (epsilon, delta).
A release on a finer unit (trip, event) is charged to a user-level budget only through group
privacy with a stated group size.

Each entry records the content fingerprint and row count of its input, its output folder and
file hashes, the OS user and host; a dataset's budget is bound to the fingerprints it has seen
(the same content under another dataset name is refused unless stated). Entries are hash-chained
and :meth:`Ledger.verify` detects edited, deleted or truncated entries and dropped tables
(:mod:`privmob.privacy.ledger_chain`).

This module holds the :class:`Ledger` (budgets, checks, charges, verification) and where the
file is found; the records and how entries are written are :mod:`privmob.privacy.ledger_entries`,
the SQLite schema, upgrade and integrity checks :mod:`privmob.privacy.ledger_schema`, what a
charge must pass :mod:`privmob.privacy.ledger_checks`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privmob.errors import BudgetError, ConfigError
from privmob.privacy import ledger_chain as chain
from privmob.privacy import ledger_checks as checks
from privmob.privacy import ledger_schema as schema
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger_accounts import Accounts
from privmob.privacy.ledger_entries import (
    Budget,
    Entry,
    Spent,
    entry_provenance,
    insert_entries,
    provenance_dict,
)

DEFAULT_LEDGER_ENV = "PRIVMOB_LEDGER"
DEFAULT_LEDGER_NAME = "ledger.sqlite"


#: datasets this process charged (a run stopped by a signal says whether it was charged)
COMMITTED: list[str] = []


def default_ledger_path() -> Path:
    """``$PRIVMOB_LEDGER`` if set, else the user's data directory (XDG):
    ``$XDG_DATA_HOME/privmob/ledger.sqlite`` (``~/.local/share/privmob/ledger.sqlite``), never
    the current directory (a budget must not depend on where a command is run)."""
    explicit = os.environ.get(DEFAULT_LEDGER_ENV)
    if explicit:
        return Path(explicit)
    data_home = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "privmob" / DEFAULT_LEDGER_NAME


class Ledger:
    """A privacy ledger stored in an SQLite file."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 60.0):
        self.path = Path(path) if path is not None else default_ledger_path()
        self.timeout = timeout
        #: set when this open added the chain to entries of an older ledger (a sentence)
        self.migrated: str | None = None
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            # private from the start: the ledger names datasets, users, hosts and outputs
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        with self._connect() as con:
            con.execute("BEGIN")  # one consistent snapshot for the check
            try:
                schema.refuse_missing_tables(con, self.path)
            finally:
                con.execute("COMMIT")
            schema.add_columns(con)  # a ledger of the first schema: before the new index is made
            # one transaction: another process never sees half a schema
            con.executescript(f"BEGIN IMMEDIATE;\n{schema.SCHEMA}\nCOMMIT;")
            self.migrated = schema.migrate(con)
            self.ledger_id = schema.read_meta(con)["ledger_id"]
        if self.migrated:
            warnings.warn(f"{self.path}: {self.migrated}", LedgerMigrated, stacklevel=2)

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
                values = (dataset, float(epsilon), float(delta), unit.value, _now(), note)
                own = chain.budget_hash(
                    schema.read_meta(con)["ledger_id"],
                    dict(zip(chain.BUDGET_COLUMNS, values, strict=True)),
                )
                con.execute("INSERT INTO budgets VALUES (?, ?, ?, ?, ?, ?, ?)", (*values, own))
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return self.budget(dataset)

    def budget(self, dataset: str) -> Budget:
        with self._connect() as con:
            b = _read_budget(con, dataset)
        if b is None:
            raise BudgetError(
                f"no privacy budget is set for dataset '{dataset}' in {self.path}",
                hint=f"set one first: privmob ledger init {dataset} --epsilon 10 "
                f"--ledger {self.path}  (or pass --budget to the release command)",
            )
        return b

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
    def accounts(self, dataset: str) -> Accounts:
        """What ``dataset`` has spent under the basic and the zCDP accounting."""
        b = self.budget(dataset)
        with self._connect() as con:
            return checks.dataset_accounts(con, b, [])

    def spent(self, dataset: str) -> Spent:
        """Spent (epsilon by the tighter valid accounting; delta by basic composition)."""
        a = self.accounts(dataset)
        return Spent(a.epsilon, a.basic_delta)

    def remaining(self, dataset: str) -> Spent:
        b = self.budget(dataset)
        a = self.accounts(dataset)
        return Spent(a.epsilon_left, max(0.0, b.delta - a.basic_delta))

    def in_budget_unit(self, dataset: str, cost: Cost, group_size: int | None = None) -> Cost:
        """The cost a release charges against the dataset's budget unit."""
        b = self.budget(dataset)
        return checks.to_budget_unit(cost, b.unit, group_size)

    def check(self, dataset: str, cost: Cost, group_size: int | None = None) -> None:
        """Raise :class:`BudgetError` if the release would not fit now (no charge is made)."""
        b = self.budget(dataset)
        charged = checks.to_budget_unit(cost, b.unit, group_size)
        with self._connect() as con:
            checks.refuse_if_over(b, checks.dataset_accounts(con, b, [charged]), charged, self.path)

    def check_input(
        self, dataset: str, fingerprint: str | None, *, new_dataset_for_same_data: bool = False
    ) -> None:
        """Refuse (:class:`BudgetError`) an input whose content another dataset already holds,
        unless the user stated ``new_dataset_for_same_data``. No charge is made."""
        with self._connect() as con:
            checks.refuse_foreign_input(
                con, dataset, fingerprint, new_dataset_for_same_data, self.path
            )

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
        input_fingerprint: str | None = None,
        input_rows: int | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        output_hashes: dict[str, str] | None = None,
        new_dataset_for_same_data: bool = False,
    ) -> Entry:
        """Charge a release atomically, or raise :class:`BudgetError` and charge nothing."""
        return self.charge_parts(
            dataset,
            [(description, cost)],
            kind=kind,
            params=params,
            group_size=group_size,
            for_publication=for_publication,
            input_fingerprint=input_fingerprint,
            input_rows=input_rows,
            output_dir=output_dir,
            output_hashes=output_hashes,
            new_dataset_for_same_data=new_dataset_for_same_data,
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
        input_fingerprint: str | None = None,
        input_rows: int | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        output_hashes: dict[str, str] | None = None,
        new_dataset_for_same_data: bool = False,
        within: Callable[[sqlite3.Connection, list[Entry]], None] | None = None,
    ) -> list[Entry]:
        """Charge several parts of one release (e.g. one per period) in one transaction:
        all entries are written, or none is.

        ``input_fingerprint``/``input_rows`` identify the input (see
        :func:`privmob.data.sources.validate`); ``output_dir``/``output_hashes`` (file name ->
        SHA-256) the output, when known at charge time. An input whose fingerprint another
        dataset holds is refused unless ``new_dataset_for_same_data`` (recorded). ``within``
        runs inside the transaction after the entries are inserted (the release publication
        records its staged files there, ``releases/publish.py``); if it raises, nothing is
        charged."""
        if not parts:
            raise ConfigError("nothing to charge")
        # a recorded programme refuses releases outside it (privmob.privacy.programme_ledger)
        from privmob.privacy.programme_ledger import check_release

        check_release(self, dataset, kind, parts)
        provenance = entry_provenance(
            input_fingerprint, input_rows, output_dir, output_hashes, new_dataset_for_same_data
        )
        with self._connect() as con:
            _begin_immediate(con, self.path)
            try:
                meta = schema.read_meta(con)
                schema.refuse_broken_head(con, meta, self.path)
                b = _read_budget(con, dataset)
                if b is None:
                    raise BudgetError(
                        f"no privacy budget is set for dataset '{dataset}'",
                        hint=f"privmob ledger init {dataset} --epsilon E",
                    )
                checks.refuse_foreign_input(
                    con, dataset, input_fingerprint, new_dataset_for_same_data, self.path
                )
                charged = [checks.to_budget_unit(c, b.unit, group_size) for _, c in parts]
                total = charged[0]
                for c in charged[1:]:
                    total = total + c
                checks.refuse_if_over(b, checks.dataset_accounts(con, b, charged), total, self.path)
                prev = meta.get("head_hash") or chain.genesis(meta["ledger_id"])
                entries = insert_entries(
                    con,
                    prev,
                    dataset,
                    kind,
                    parts,
                    charged,
                    group_size=group_size,
                    for_publication=for_publication,
                    params=params,
                    provenance=provenance,
                    created=_now(),
                )
                count = int(meta.get("head_count", "0")) + len(entries)
                schema.set_head(con, count, entries[-1].row_hash)
                if within is not None:
                    within(con, entries)
                con.execute("COMMIT")
                COMMITTED.append(dataset)
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return entries

    def verify_release(self, metadata: dict[str, Any], name: str = "release") -> list[str]:
        """Check that a release's ``metadata.json`` (its ``ledger`` block) was paid from this
        ledger and that its entries are still here: a deleted or replaced ledger file, or one
        rebuilt without those entries, shows here. Returns the problems found."""
        block = metadata.get("ledger")
        if not isinstance(block, dict) or "id" not in block:
            return [f"{name}: its metadata names no ledger (made before ledgers had an id?)"]
        if block["id"] != self.ledger_id:
            return [
                f"{name}: paid from ledger {block['id']}, but this ledger is {self.ledger_id} "
                "(the ledger it was charged to was deleted or replaced, or is another file)"
            ]
        ids = {e.id for e in self.entries()}
        missing = [i for i in block.get("entry_ids", []) if i not in ids]
        if missing:
            return [f"{name}: its ledger entries {missing} are missing from this ledger"]
        return []

    def verify(self) -> list[str]:
        """Check the hash chain, the recorded head and the budgets; return the problems found
        (empty when the ledger verifies)."""
        with self._connect() as con:
            meta = schema.read_meta(con)
            return chain.problems(
                con, meta["ledger_id"], int(meta.get("head_count", "0")), meta.get("head_hash", "")
            )

    def entries(self, dataset: str | None = None) -> list[Entry]:
        sql = (
            "SELECT id, dataset, created_at, kind, epsilon, delta, rho, unit, release_epsilon,"
            " release_delta, release_unit, group_size, for_publication, description, params, "
            + ", ".join(chain.PROVENANCE)
            + ", row_hash FROM releases"
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
                provenance_dict(dict(zip(chain.PROVENANCE, r[15:-1], strict=True))),
                r[-1] or "",
            )
            for r in rows
        ]


def _begin_immediate(con: sqlite3.Connection, path: Path) -> None:
    """Take the write lock for a charge, waiting a few seconds for another process's."""
    for attempt in range(50):
        try:
            con.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as exc:  # database is locked
            if attempt == 49:
                raise BudgetError(f"the ledger {path} stayed locked: {exc}") from exc
            time.sleep(0.05 * (attempt + 1))


def _read_budget(con: sqlite3.Connection, dataset: str) -> Budget | None:
    row = con.execute(
        "SELECT dataset, epsilon, delta, unit, created_at FROM budgets WHERE dataset = ?",
        (dataset,),
    ).fetchone()
    return None if row is None else Budget(row[0], row[1], row[2], Unit(row[3]), row[4])


class LedgerMigrated(UserWarning):
    """An older ledger file was upgraded on open (columns added, existing entries chained)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
