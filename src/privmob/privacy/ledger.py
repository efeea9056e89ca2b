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
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import sqlite3
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privmob.errors import BudgetError, ConfigError
from privmob.privacy import ledger_chain as chain
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger_accounts import Accounts, accounts

DEFAULT_LEDGER_ENV = "PRIVMOB_LEDGER"
DEFAULT_LEDGER_NAME = "ledger.sqlite"

RELEASES_U = """CREATE TRIGGER IF NOT EXISTS releases_append_only_u BEFORE UPDATE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END"""
BUDGETS_U = """CREATE TRIGGER IF NOT EXISTS budgets_fixed_u BEFORE UPDATE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END"""
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS budgets (
    dataset     TEXT PRIMARY KEY,
    epsilon     REAL NOT NULL,
    delta       REAL NOT NULL,
    unit        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    note        TEXT,
    row_hash    TEXT
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
    params          TEXT,
    input_fingerprint TEXT,
    input_rows      INTEGER,
    output_dir      TEXT,
    output_hashes   TEXT,
    os_user         TEXT,
    host            TEXT,
    new_dataset_for_same_data INTEGER NOT NULL DEFAULT 0,
    prev_hash       TEXT,
    row_hash        TEXT
);
CREATE TABLE IF NOT EXISTS ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS releases_fingerprint ON releases(input_fingerprint);
{RELEASES_U};
CREATE TRIGGER IF NOT EXISTS releases_append_only_d BEFORE DELETE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;
{BUDGETS_U};
CREATE TRIGGER IF NOT EXISTS budgets_fixed_d BEFORE DELETE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END;
"""


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
    provenance: dict[str, Any] = field(default_factory=dict)
    row_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        """What a release's metadata.json shows of its entry. Never the input's fingerprint,
        row count or the entry's hash (which covers them): a published hash of the data lets
        whoever knows all records but one test each candidate for the last one."""
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
                _refuse_missing_tables(con, self.path)
            finally:
                con.execute("COMMIT")
            _add_columns(con)  # a ledger of the first schema: before the new index is made
            # one transaction: another process never sees half a schema
            con.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA}\nCOMMIT;")
            self.migrated = _migrate(con)
            self.ledger_id = _meta(con)["ledger_id"]
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
                    _meta(con)["ledger_id"], dict(zip(chain.BUDGET_COLUMNS, values, strict=True))
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
    def accounts(self, dataset: str) -> Accounts:
        """What ``dataset`` has spent under the basic and the zCDP accounting."""
        b = self.budget(dataset)
        with self._connect() as con:
            return _accounts(con, b, [])

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
        return _convert(cost, b.unit, group_size)

    def check(self, dataset: str, cost: Cost, group_size: int | None = None) -> None:
        """Raise :class:`BudgetError` if the release would not fit now (no charge is made)."""
        b = self.budget(dataset)
        charged = _convert(cost, b.unit, group_size)
        with self._connect() as con:
            _refuse_if_over(b, _accounts(con, b, [charged]), charged, self.path)

    def check_input(
        self, dataset: str, fingerprint: str | None, *, new_dataset_for_same_data: bool = False
    ) -> None:
        """Refuse (:class:`BudgetError`) an input whose content another dataset already holds,
        unless the user stated ``new_dataset_for_same_data``. No charge is made."""
        with self._connect() as con:
            _refuse_foreign_input(con, dataset, fingerprint, new_dataset_for_same_data, self.path)

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
        provenance: dict[str, Any] = {
            "input_fingerprint": input_fingerprint,
            "input_rows": None if input_rows is None else int(input_rows),
            "output_dir": None if output_dir is None else str(Path(output_dir).absolute()),
            "output_hashes": (
                None if output_hashes is None else json.dumps(output_hashes, sort_keys=True)
            ),
            "os_user": _os_user(),
            "host": socket.gethostname(),
            "new_dataset_for_same_data": int(bool(new_dataset_for_same_data)),
        }
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
                meta = _meta(con)
                _refuse_broken_head(con, meta, self.path)
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
                _refuse_foreign_input(
                    con, dataset, input_fingerprint, new_dataset_for_same_data, self.path
                )
                charged = [_convert(c, b.unit, group_size) for _, c in parts]
                total = charged[0]
                for c in charged[1:]:
                    total = total + c
                _refuse_if_over(b, _accounts(con, b, charged), total, self.path)
                created = _now()
                prev = meta.get("head_hash") or chain.genesis(meta["ledger_id"])
                entries = []
                for (description, cost), ch in zip(parts, charged, strict=True):
                    values: dict[str, Any] = {
                        "dataset": dataset,
                        "created_at": created,
                        "kind": kind,
                        "epsilon": ch.epsilon,
                        "delta": ch.delta,
                        "rho": ch.rho,
                        "unit": ch.unit.value,
                        "release_epsilon": cost.epsilon,
                        "release_delta": cost.delta,
                        "release_unit": cost.unit.value,
                        "group_size": group_size,
                        "for_publication": int(for_publication),
                        "description": description,
                        "params": json.dumps(params or {}, default=str),
                        **provenance,
                    }
                    entry_id = _next_id(con)
                    own = chain.digest(prev, chain.hashed({"id": entry_id, **values}))
                    names = ", ".join(values)
                    con.execute(
                        f"INSERT INTO releases (id, {names}, prev_hash, row_hash) VALUES "
                        f"({', '.join('?' * (len(values) + 3))})",
                        (entry_id, *values.values(), prev, own),
                    )
                    prev = own
                    entries.append(
                        Entry(
                            entry_id,
                            dataset,
                            created,
                            kind,
                            ch,
                            cost,
                            group_size,
                            for_publication,
                            description,
                            params or {},
                            _provenance_dict(provenance),
                            own,
                        )
                    )
                count = int(meta.get("head_count", "0")) + len(entries)
                _set_head(con, count, prev)
                if within is not None:
                    within(con, entries)
                con.execute("COMMIT")
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
            meta = _meta(con)
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
                _provenance_dict(dict(zip(chain.PROVENANCE, r[15:-1], strict=True))),
                r[-1] or "",
            )
            for r in rows
        ]


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


def _accounts(con: sqlite3.Connection, b: Budget, extra: list[Cost]) -> Accounts:
    rows = con.execute(
        "SELECT epsilon, delta, rho FROM releases WHERE dataset = ? ORDER BY id", (b.dataset,)
    ).fetchall()
    return accounts(
        [(float(r[0]), float(r[1]), r[2]) for r in rows]
        + [(c.epsilon, c.delta, c.rho) for c in extra],
        b.epsilon,
        b.delta,
    )


def _refuse_if_over(b: Budget, after: Accounts, cost: Cost, path: Path) -> None:
    """``after``: the accounts with this release included."""
    if after.fits:
        return
    raise BudgetError(
        f"refused: this release costs {cost.describe()} but dataset '{b.dataset}' cannot pay "
        f"for it: with it, {after.describe()} (budget epsilon={b.epsilon:g}, "
        f"delta={b.delta:g}; ledger {path}); nothing was written",
        hint="lower --epsilon, or see what was spent with: privmob ledger show",
    )


def _refuse_foreign_input(
    con: sqlite3.Connection,
    dataset: str,
    fingerprint: str | None,
    stated: bool,
    path: Path,
) -> None:
    """The budget is bound to the data: content seen under another dataset name is refused,
    unless the user stated that this is a new dataset for the same data (or did so before)."""
    if not fingerprint or stated:
        return
    owners = [
        r[0]
        for r in con.execute(
            "SELECT dataset FROM releases WHERE input_fingerprint = ? GROUP BY dataset "
            "ORDER BY min(id)",
            (fingerprint,),
        ).fetchall()
    ]
    if not owners or dataset in owners:
        return
    raise BudgetError(
        f"refused: this input's content was already released under dataset '{owners[0]}' "
        f"in {path}; its budget is that dataset's, not "
        f"'{dataset}''s; nothing was charged",
        hint=f"use --dataset {owners[0]}, or state --new-dataset-for-same-data if this is "
        "deliberately a separate budget for the same records (it is recorded in the ledger)",
    )


class LedgerMigrated(UserWarning):
    """An older ledger file was upgraded on open (columns added, existing entries chained)."""


def _provenance_dict(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    if isinstance(out.get("output_hashes"), str):
        out["output_hashes"] = json.loads(out["output_hashes"])
    out["new_dataset_for_same_data"] = bool(out.get("new_dataset_for_same_data"))
    return out


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _meta(con: sqlite3.Connection) -> dict[str, str]:
    if "ledger_meta" not in _tables(con):
        return {}
    return dict(con.execute("SELECT key, value FROM ledger_meta").fetchall())


def _integrity_error(path: Path, what: str) -> BudgetError:
    return BudgetError(
        f"the privacy ledger {path} is damaged: {what}; refusing to charge it (a missing "
        "record of spending must never read as 'spent 0')",
        hint=f"restore the ledger from a backup; see: privmob ledger verify --ledger {path}",
    )


def _refuse_missing_tables(con: sqlite3.Connection, path: Path) -> None:
    """A ledger that once held entries must never silently become an empty one."""
    tables = _tables(con) - {"sqlite_sequence"}
    if not tables:
        return  # a new file
    meta = _meta(con)
    if meta.get("ledger_id"):
        missing = sorted({"budgets", "releases"} - tables)
        if missing:
            raise _integrity_error(path, f"its table {missing[0]} was dropped")
        return
    # (ledger_meta without an id: another process is giving this ledger its identity now)
    if ("budgets" in tables) != ("releases" in tables):
        raise _integrity_error(path, "a table of the ledger was dropped")
    for table in ("releases", "budgets"):
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if "row_hash" not in cols:
            continue  # a ledger of the first schema
        if con.execute(f"SELECT 1 FROM {table} WHERE row_hash IS NOT NULL LIMIT 1").fetchone():
            raise _integrity_error(path, "its identity table ledger_meta was dropped")


def _add_columns(con: sqlite3.Connection) -> None:
    """Columns of this schema missing from a ledger of the first schema."""
    tables = _tables(con)
    if "releases" in tables:
        have = {r[1] for r in con.execute("PRAGMA table_info(releases)")}
        for name, sqltype in chain.NEW_ENTRY_COLUMNS.items():
            if name not in have:
                _add_column(con, f"ALTER TABLE releases ADD COLUMN {name} {sqltype}")
    if "budgets" in tables:
        have = {r[1] for r in con.execute("PRAGMA table_info(budgets)")}
        if "row_hash" not in have:
            _add_column(con, "ALTER TABLE budgets ADD COLUMN row_hash TEXT")


def _add_column(con: sqlite3.Connection, sql: str) -> None:
    try:
        con.execute(sql)
    except sqlite3.OperationalError as exc:  # another process opening the file added it
        if "duplicate column" not in str(exc):
            raise


def _migrate(con: sqlite3.Connection) -> str | None:
    """Give a ledger its identity once; chain the entries of a ledger of the first schema."""
    if _meta(con).get("ledger_id"):
        return None
    con.execute("BEGIN IMMEDIATE")
    try:
        if _meta(con).get("ledger_id"):  # another process did it meanwhile
            con.execute("ROLLBACK")
            return None
        ledger_id = uuid.uuid4().hex
        con.execute("INSERT INTO ledger_meta VALUES ('ledger_id', ?)", (ledger_id,))
        con.execute("INSERT INTO ledger_meta VALUES ('schema', '2')")
        rows = chain.entry_rows(con)
        budgets = con.execute(f"SELECT {', '.join(chain.BUDGET_COLUMNS)} FROM budgets").fetchall()
        prev = chain.genesis(ledger_id)
        if rows or budgets:
            # the first schema's triggers forbid any update: lift them for this one step
            con.execute("DROP TRIGGER IF EXISTS releases_append_only_u")
            con.execute("DROP TRIGGER IF EXISTS budgets_fixed_u")
            for row in rows:
                own = chain.digest(prev, chain.hashed(row))
                con.execute(
                    "UPDATE releases SET prev_hash = ?, row_hash = ? WHERE id = ?",
                    (prev, own, row["id"]),
                )
                prev = own
            for b in budgets:
                values = dict(zip(chain.BUDGET_COLUMNS, b, strict=True))
                con.execute(
                    "UPDATE budgets SET row_hash = ? WHERE dataset = ?",
                    (chain.budget_hash(ledger_id, values), values["dataset"]),
                )
            con.execute(RELEASES_U)
            con.execute(BUDGETS_U)
        _set_head(con, len(rows), prev if rows else "")
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    if rows or budgets:
        return (
            f"upgraded a ledger of the first schema: {len(rows)} existing entries and "
            f"{len(budgets)} budgets were hash-chained on this open (they record no input "
            "fingerprint, output or user)"
        )
    return None


def _set_head(con: sqlite3.Connection, count: int, head: str) -> None:
    con.execute(
        "INSERT OR REPLACE INTO ledger_meta VALUES ('head_count', ?), ('head_hash', ?)",
        (str(count), head),
    )


def _next_id(con: sqlite3.Connection) -> int:
    """The id the next entry gets (inside the charging transaction): never one used before."""
    row = con.execute(
        "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'releases'), 0), "
        "COALESCE((SELECT max(id) FROM releases), 0))"
    ).fetchone()
    return int(row[0]) + 1


def _refuse_broken_head(con: sqlite3.Connection, meta: dict[str, str], path: Path) -> None:
    """Cheap check at each charge: the entries end where the ledger recorded they end."""
    if not meta.get("ledger_id"):
        raise _integrity_error(path, "its identity (table ledger_meta) is missing")
    row = con.execute(
        "SELECT count(*), (SELECT row_hash FROM releases ORDER BY id DESC LIMIT 1) FROM releases"
    ).fetchone()
    if int(row[0]) != int(meta.get("head_count", "0")) or (row[1] or "") != meta.get(
        "head_hash", ""
    ):
        raise _integrity_error(
            path,
            f"it holds {row[0]} entries where {meta.get('head_count', '0')} were recorded, or its "
            "last entry changed",
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
