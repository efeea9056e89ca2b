"""A team ledger in PostgreSQL (``--ledger postgresql://user@host/db``), with psycopg 3.

The same ledger as the SQLite file (:mod:`privmob.privacy.ledger` holds its meaning, once):
this store supplies the connection, the locks and the writes. A charge is one transaction:
``lock_for_charge`` takes ``SELECT ... FOR UPDATE`` on the dataset's budget row and on the
ledger head (every charge extends one chain), privmob then reads what was spent and checks
the release under those locks, and writes its entries through ``charge``, which refuses
entries that do not continue the chain at the head, are not valid spends, are not signed by a
key that may charge, or do not fit what both accountings count in full of the budget. Two
releasers on two hosts racing for the last of a budget are serialized by the server; the second
sees the first's entry.

Roles are PostgreSQL roles (:mod:`privmob.privacy.ledger.pg_schema`): the custodian owns the
schema, an analyst can only call the write functions, an auditor can only read.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.ledger import pg_schema as pg_schema
from privmob.privacy.ledger import schema as schema
from privmob.privacy.ledger.faults import Establish, LedgerUnavailable
from privmob.privacy.ledger.rows import Con, Cursor, Parameters, Record, Row, as_int, one

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow

_PLACEHOLDER = re.compile(r"\?")


def public_location(url: str) -> str:
    """The URL without its password (for messages and release metadata)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(
            "a PostgreSQL ledger needs psycopg, which is not installed",
            hint="pip install 'privmob[postgres]'",
        ) from exc
    return psycopg


class PgCon:
    """A psycopg connection as the ledger's shared code uses it: ``?`` placeholders,
    ``in_transaction``, errors as privmob errors."""

    def __init__(self, raw: Connection[TupleRow], location: str) -> None:
        self.raw = raw
        self.location = location

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        # a lost connection (UNKNOWN) holds no transaction to roll back
        status = self.raw.info.transaction_status
        return status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    def execute(self, sql: str, parameters: Parameters = (), /) -> Cursor:
        psycopg = _psycopg()
        text = _PLACEHOLDER.sub("%s", sql.replace("%", "%%")) if parameters else sql
        try:
            return self.raw.execute(text, parameters or None)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise BudgetError(
                f"the ledger {self.location} refused this: {_first_line(exc)} (your database "
                f"role '{self.raw.info.user}' may not do it; nothing was written)",
                hint="budgets, programmes and roles are set by the ledger's custodian; see "
                "docs/operations.md",
            ) from exc
        except psycopg.errors.CheckViolation as exc:
            raise BudgetError(
                f"the ledger {self.location} refused this: {_first_line(exc)}; nothing was written"
            ) from exc
        except psycopg.errors.SerializationFailure as exc:
            raise BudgetError(
                f"the ledger {self.location} refused an entry: {_first_line(exc)}; nothing was "
                "written",
                hint=f"run the release again; if it repeats: privmob ledger verify --ledger "
                f"{self.location}",
            ) from exc
        except psycopg.OperationalError as exc:
            raise _unavailable(self.location, exc) from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unavailable(location: str, exc: BaseException) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"the ledger server {location} cannot be reached or was lost: {_first_line(exc)}",
        hint="check that the server runs and that the URL, user and password are right "
        "(PGPASSWORD or ~/.pgpass); a release that was staged is finished by: privmob ledger "
        f"recover --ledger {location}",
    )


class PostgresStore:
    """A ledger in the ``privmob`` schema of a PostgreSQL database."""

    def __init__(self, url: str, *, timeout: float = 60.0) -> None:
        self.url = url
        self.location = public_location(url)
        self.timeout = timeout
        self._raw: Connection[TupleRow] | None = (
            None  # the open connection (psycopg), reused by each use in turn
        )
        self._busy = False
        self._has_charge: bool | None = None  # the server's charge function (None: not asked)

    def _open(self) -> Connection[TupleRow]:
        psycopg = _psycopg()
        from psycopg import Connection

        try:
            raw = Connection.connect(
                self.url,
                autocommit=True,  # transactions are explicit (BEGIN ... COMMIT), as on SQLite
                connect_timeout=max(1, int(min(self.timeout, 30))),
                application_name="privmob",
            )
        except psycopg.OperationalError as exc:
            raise _unavailable(self.location, exc) from exc
        PgCon(raw, self.location).execute(
            f"SET search_path = {pg_schema.SCHEMA_NAME}; "
            f"SET lock_timeout = '{int(self.timeout * 1000)}ms'"
        )
        return raw

    @contextmanager
    def connect(self) -> Iterator[PgCon]:
        """The store's connection, kept open between uses (a new one when it was lost); a use
        inside another (a read during a charge) gets a connection of its own, so it can never
        end the other's transaction."""
        nested = self._busy
        if nested:
            raw = self._open()
        else:
            if self._raw is None or self._raw.closed or self._raw.broken:
                self._raw = self._open()
            raw = self._raw
            self._busy = True
        con = PgCon(raw, self.location)
        try:
            yield con
        finally:
            if nested:
                raw.close()
            else:
                self._busy = False
                if con.in_transaction:  # never leave a transaction (and its locks) open
                    with contextlib.suppress(Exception):
                        raw.execute("ROLLBACK")

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None

    # -- schema --------------------------------------------------------------------------------
    def _exists(self, con: Con) -> bool:
        row = one(con.execute("SELECT to_regclass(?)", (f"{pg_schema.SCHEMA_NAME}.ledger_meta",)))
        return row[0] is not None

    def open(self, *, create: bool, establish: Establish) -> str | None:
        with self.connect() as con:
            if self._exists(con):
                return None
            if not create:
                raise ConfigError(
                    f"there is no privmob ledger in {self.location}",
                    hint=f"the custodian creates it: privmob ledger init --ledger {self.location}",
                )
            self.create(con, establish)
        return None

    def create(self, con: Con, establish: Establish) -> None:
        """The schema, its functions and roles, and the ledger's identity, in one transaction
        (two custodians creating it at once: one does it, the other sees it done)."""
        con.execute("BEGIN")
        try:
            if not self.create_within(con, establish):
                con.execute("ROLLBACK")
                return
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise

    def create_within(self, con: Con, establish: Establish) -> bool:
        """Inside the caller's transaction, create the schema, its functions and roles and the
        ledger's identity, unless another custodian has (False): an import that is refused
        later rolls all of it back and leaves nothing."""
        import uuid

        con.execute("SELECT pg_advisory_xact_lock(7243911)")
        if self._exists(con):
            return False
        con.execute(pg_schema.TABLES)
        con.execute(pg_schema.SIGNED)
        con.execute(pg_schema.FUNCTIONS)
        con.execute(pg_schema.roles_sql())
        ledger_id = uuid.uuid4().hex
        con.execute(
            "INSERT INTO ledger_meta VALUES ('ledger_id', ?), ('schema', '2'), "
            "('head_count', '0'), ('head_hash', '')",
            (ledger_id,),
        )
        establish(con, ledger_id)  # the custodian's key, signed in the same transaction
        return True

    def has_table(self, name: str) -> bool:
        with self.connect() as con:
            row = one(con.execute("SELECT to_regclass(?)", (f"{pg_schema.SCHEMA_NAME}.{name}",)))
            return row[0] is not None

    def read_meta(self, con: Con) -> dict[str, str]:
        if not self._exists(con):
            return {}
        return schema.read_meta(con)

    # -- writes ----------------------------------------------------------------------------------
    def begin_write(self, con: Con, dataset: str | None) -> None:
        con.execute("BEGIN")
        con.execute("SELECT lock_for_charge(?)", (dataset or "",))

    def insert_budget(self, con: Con, values: Row) -> None:
        con.execute(f"INSERT INTO budgets VALUES ({', '.join('?' * len(values))})", values)

    def next_id(self, con: Con) -> int:
        """Under the head's lock: after the last entry (ids are never reused: no entry can be
        deleted)."""
        return as_int(one(con.execute("SELECT COALESCE(max(id), 0) FROM releases"))[0]) + 1

    def append_entry(self, con: Con, row: Record) -> None:
        """One raw entry (an import, by the custodian: the analyst's role may not)."""
        con.execute("SELECT append_entry(?::jsonb)", (json.dumps(row),))

    def charge_entries(self, con: Con, dataset: str, rows: list[Record]) -> None:
        """The entries of one charge, by the server's ``charge``, the analyst's only write of
        entries: it checks their dataset, ids, chain, unit, costs, signer and the budget. A
        ledger created by an earlier privmob has no ``charge``: its ``append_entry``, as then."""
        if self._has_charge is None:
            found = one(con.execute("SELECT to_regprocedure('charge(text, jsonb)')"))
            self._has_charge = found[0] is not None
        if not self._has_charge:
            for row in rows:
                self.append_entry(con, row)
            return
        con.execute("SELECT charge(?, ?::jsonb)", (dataset, json.dumps(rows)))

    def store_people(self, con: Con, dataset: str, sketch: bytes, now: str) -> None:
        con.execute("SELECT store_people(?, ?, ?)", (dataset, sketch, now))

    def set_head(self, con: Con, count: int, head: str) -> None:
        """``charge`` (or ``append_entry``) moved the head with each entry; check it agrees."""
        meta = self.read_meta(con)
        if (meta.get("head_count"), meta.get("head_hash")) != (str(count), head):
            raise BudgetError(
                f"the ledger {self.location} head moved during a charge; nothing was written",
                hint=f"privmob ledger verify --ledger {self.location}",
            )

    # -- roles -----------------------------------------------------------------------------------
    def grant(self, login: str, role: str) -> str:
        """Make the database role ``login`` an analyst or an auditor of this ledger."""
        group = {"analyst": pg_schema.ANALYST, "auditor": pg_schema.AUDITOR}.get(role)
        if group is None:
            raise ConfigError(f"no ledger role '{role}'", hint="use --as analyst or --as auditor")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$-]{0,62}", login):
            raise ConfigError(f"'{login}' is not a database role name")
        with self.connect() as con:
            exists = con.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (login,)).fetchone()
            if exists is None:
                raise ConfigError(
                    f"there is no database role '{login}' in {self.location}",
                    hint=f'create it first (as a database administrator): CREATE ROLE "{login}" '
                    "LOGIN PASSWORD '...'",
                )
            con.execute(f'GRANT {group} TO "{login}"')
        return group
