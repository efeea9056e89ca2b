"""Where a privacy ledger is stored: an SQLite file, or a PostgreSQL database for a team.

The ledger's meaning (what a charge must pass, the two accountings, the hash chain, what is
recorded) is written once, in :mod:`privmob.privacy.ledger` and the modules it uses, over a
:class:`Store`. A store supplies only what differs between the two: how to connect, how a
charge takes its locks (SQLite: ``BEGIN IMMEDIATE`` on the file; PostgreSQL: a transaction with
``SELECT ... FOR UPDATE`` on the dataset's budget row and the ledger head), how a row is
appended (PostgreSQL: through ``SECURITY DEFINER`` functions, so an analyst's database role
writes no table), and the schema. Reads are plain SQL with ``?`` placeholders on both.

:func:`open_store` picks the store from the location: ``postgresql://...`` (or
``postgres://...``) is a database (:mod:`privmob.privacy.ledger.pg`), anything else a file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.ledger import schema as schema
from privmob.privacy.ledger.faults import (
    ChargeOutcomeUnknown,
    Establish,
    LedgerUnavailable,
    damaged,
    disk_full,
    is_disk_full,
)
from privmob.privacy.ledger.rows import Con, Record, Row
from privmob.privacy.ledger.turn import Turn

__all__ = ["ChargeOutcomeUnknown", "LedgerUnavailable", "SqliteStore", "Store", "open_store"]

URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str | os.PathLike[str]) -> bool:
    return str(location).startswith(URL_SCHEMES)


class Store(Protocol):
    """What differs between an SQLite and a PostgreSQL ledger (see the module's text)."""

    #: the ledger as named in messages (a path; a URL without its password)
    location: str
    timeout: float

    def connect(self) -> AbstractContextManager[Con]: ...

    def open(self, *, create: bool, establish: Establish) -> str | None:
        """Create (``create``; a new ledger gets its custodian key by ``establish`` in the same
        transaction) or check the schema; returns a sentence when an older ledger was upgraded
        on this open. ``create=False`` and no ledger: :class:`ConfigError`."""
        ...

    def read_meta(self, con: Con) -> dict[str, str]: ...

    def begin_write(self, con: Con, dataset: str | None) -> None:
        """Start the transaction of a write, holding the locks that serialize charges (of
        ``dataset``, and of the chain's head)."""
        ...

    def insert_budget(self, con: Con, values: Row) -> None: ...

    def next_id(self, con: Con) -> int: ...

    def append_entry(self, con: Con, row: Record) -> None:
        """Append one chained entry (all columns of ``releases``, hashes included)."""
        ...

    def charge_entries(self, con: Con, dataset: str, rows: list[Record]) -> None:
        """Append the chained entries of one charge of ``dataset`` (PostgreSQL: the server's
        ``charge`` checks and writes them)."""
        ...

    def set_head(self, con: Con, count: int, head: str) -> None: ...

    def store_people(self, con: Con, dataset: str, sketch: bytes, now: str) -> None:
        """Keep ``sketch`` as the dataset's people sketch (privmob.privacy.people)."""
        ...

    def has_table(self, name: str) -> bool: ...


class SqliteStore:
    """A ledger in an SQLite file (created 0600 in a 0700 directory when missing)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.timeout = timeout
        self._turns: dict[int, Turn] = {}  # by connection: its place in the writers' queue

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection; a full disk is a full disk, a file that is not an SQLite database
        "ledger damaged"."""
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise self._fault(exc) from None
        try:
            con.execute("PRAGMA foreign_keys = ON")
            # a commit empties the rollback journal instead of deleting it: the same
            # durability (the journal is synced after truncating), without the directory
            # update a deleted journal costs (a charge's commit 10 ms -> 1 ms on ext4)
            con.execute("PRAGMA journal_mode = TRUNCATE")
            yield con
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise self._fault(exc) from None
        except OSError as exc:
            if is_disk_full(self.path, exc):
                raise disk_full(self.path, exc) from None
            raise
        finally:
            turn = self._turns.pop(id(con), None)
            con.close()
            if turn is not None:
                turn.give()

    def _fault(self, exc: sqlite3.DatabaseError) -> BudgetError:
        if is_disk_full(self.path, exc):
            return disk_full(self.path, exc)
        return damaged(self.path, exc)

    def open(self, *, create: bool, establish: Establish) -> str | None:
        if not self.path.exists():
            if not create:
                raise ConfigError(
                    f"no ledger at {self.path}",
                    hint="check --ledger (or PRIVMOB_LEDGER); a ledger is created by privmob "
                    "ledger init",
                )
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # private from the start: the ledger names datasets, users, hosts and outputs
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                if is_disk_full(self.path, exc):
                    raise disk_full(self.path, exc) from None
                raise
        with self.connect() as con:
            con.execute("BEGIN")  # one consistent snapshot for the check
            try:
                schema.refuse_missing_tables(con, self.path)
            finally:
                con.execute("COMMIT")
            schema.add_columns(con)  # a ledger of the first schema: before the new index is made
            # one transaction: another process never sees half a schema
            con.executescript(f"BEGIN IMMEDIATE;\n{schema.SCHEMA}\nCOMMIT;")
            return schema.migrate(con, establish)

    def read_meta(self, con: Con) -> dict[str, str]:
        return schema.read_meta(con)

    def begin_write(self, con: Con, dataset: str | None) -> None:
        """Take the file's write lock, waiting a few seconds for another process's (in the
        order the writers asked: :mod:`privmob.privacy.ledger.turn`)."""
        if id(con) not in self._turns:
            turn = Turn(self.path, self.timeout)
            if turn.take():
                self._turns[id(con)] = turn
        for attempt in range(50):
            try:
                con.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:  # database is locked
                if attempt == 49:
                    raise BudgetError(f"the ledger {self.path} stayed locked: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))

    def insert_budget(self, con: Con, values: Row) -> None:
        con.execute(f"INSERT INTO budgets VALUES ({', '.join('?' * len(values))})", values)

    def next_id(self, con: Con) -> int:
        return schema.next_id(con)

    def append_entry(self, con: Con, row: Record) -> None:
        con.execute(
            f"INSERT INTO releases ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            tuple(row.values()),
        )

    def charge_entries(self, con: Con, dataset: str, rows: list[Record]) -> None:
        for row in rows:
            self.append_entry(con, row)

    def set_head(self, con: Con, count: int, head: str) -> None:
        schema.set_head(con, count, head)

    def store_people(self, con: Con, dataset: str, sketch: bytes, now: str) -> None:
        con.execute(
            "INSERT INTO dataset_people (dataset, sketch, updated) VALUES (?, ?, ?) "
            "ON CONFLICT(dataset) DO UPDATE SET sketch = excluded.sketch, "
            "updated = excluded.updated",
            (dataset, sketch, now),
        )

    def has_table(self, name: str) -> bool:
        if not self.path.exists():
            return False
        with self.connect() as con:
            return name in schema.table_names(con)


def open_store(location: str | os.PathLike[str], *, timeout: float = 60.0) -> Store:
    """The store of a ledger at ``location`` (a file path, or a ``postgresql://`` URL)."""
    if is_database_url(location):
        from privmob.privacy.ledger.pg import PostgresStore

        return PostgresStore(str(location), timeout=timeout)
    return SqliteStore(location, timeout=timeout)
