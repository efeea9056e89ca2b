"""Moving a ledger between stores: ``privmob ledger export FILE`` / ``ledger import FILE``.

The export is one JSON document: the ledger's identity and head, and every row of its tables
(budgets, entries with their hashes, programmes and their allowances) exactly as stored. The
import writes it into an empty ledger (a new SQLite file, or a PostgreSQL ledger its custodian
just created) under the same identity, appending the entries one by one through the store's
own append (on PostgreSQL: ``append_entry``, which refuses an entry that does not continue the
chain), then verifies the result; a ledger that does not verify is not imported (nothing is
committed). Releases paid from the old store verify against the new one (same id, same
entries). The file names datasets, users, hosts and input fingerprints: it is created 0600.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.errors import BudgetError, ConfigError, InputError
from privmob.privacy import ledger_chain as chain
from privmob.privacy.programme_ledger import SCHEMA as programme_schema

if TYPE_CHECKING:
    from privmob.privacy.ledger import Ledger

FORMAT = "privmob-ledger-export"
VERSION = 1
#: tables moved besides the entries, in the order they are written back
OTHER_TABLES = ("programmes", "programme_allowances")


def _rows(con: Any, table: str, order: str) -> list[dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {table} ORDER BY {order}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def export_ledger(ledger: Ledger, path: Path) -> dict[str, int]:
    """Write ``ledger`` to ``path`` (refused when the ledger does not verify)."""
    problems = ledger.verify()
    if problems:
        raise BudgetError(
            f"the ledger {ledger.path} does not verify ({problems[0]}); not exported",
            hint=f"privmob ledger verify --ledger {ledger.path}",
        )
    with ledger.store.connect() as con:
        con.execute("BEGIN")  # one snapshot
        try:
            meta = ledger.store.read_meta(con)
            doc: dict[str, Any] = {
                "format": FORMAT,
                "version": VERSION,
                "ledger_id": meta["ledger_id"],
                "head_count": int(meta.get("head_count", "0")),
                "head_hash": meta.get("head_hash", ""),
                "budgets": _rows(con, "budgets", "dataset"),
                "entries": _rows(con, "releases", "id"),
            }
            for table in OTHER_TABLES:
                if ledger.store.has_table(table):
                    doc[table] = _rows(con, table, "1")
        finally:
            con.execute("COMMIT")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
    return {"budgets": len(doc["budgets"]), "entries": len(doc["entries"])}


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{path}: cannot read a ledger export ({exc})",
            hint="pass a file written by privmob ledger export",
        ) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise InputError(
            f"{path}: not a privmob ledger export (version {VERSION})",
            hint="pass a file written by privmob ledger export",
        )
    return doc


def import_ledger(ledger: Ledger, path: Path) -> dict[str, int]:
    """Write the export at ``path`` into ``ledger``, which must hold no budget and no entry."""
    doc = _read(path)
    store = ledger.store
    with store.connect() as con:
        store.begin_write(con, None)
        try:
            held = con.execute(
                "SELECT (SELECT count(*) FROM budgets), (SELECT count(*) FROM releases)"
            ).fetchone()
            if held[0] or held[1]:
                raise ConfigError(
                    f"the ledger {ledger.path} already holds {held[0]} budgets and {held[1]} "
                    "entries; a ledger is imported into an empty one only",
                    hint="create a new ledger (a new file, or privmob ledger init on a new "
                    "database) and import into it",
                )
            con.execute(
                "UPDATE ledger_meta SET value = ? WHERE key = 'ledger_id'", (doc["ledger_id"],)
            )
            for b in doc["budgets"]:
                values = tuple(b[c] for c in (*chain.BUDGET_COLUMNS, "row_hash"))
                store.insert_budget(con, values)
            for e in doc["entries"]:
                store.append_entry(con, e)
            if doc["entries"]:
                store.set_head(con, int(doc["head_count"]), str(doc["head_hash"]))
            for table in OTHER_TABLES:
                if doc.get(table) and isinstance(con, sqlite3.Connection):
                    for statement in programme_schema.split(";"):  # a new file has none yet
                        con.execute(statement)
                for row in doc.get(table, []):
                    con.execute(
                        f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                        f"({', '.join('?' * len(row))})",
                        tuple(row.values()),
                    )
            meta = store.read_meta(con)
            problems = chain.problems(
                con, meta["ledger_id"], int(meta.get("head_count", "0")), meta.get("head_hash", "")
            )
            if problems:
                raise BudgetError(
                    f"{path} does not verify once imported ({problems[0]}); nothing was imported",
                    hint="export it again from a ledger that verifies",
                )
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
    ledger.ledger_id = doc["ledger_id"]
    return {"budgets": len(doc["budgets"]), "entries": len(doc["entries"])}
