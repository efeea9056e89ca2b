"""Moving a ledger between stores: ``privmob ledger export FILE`` / ``ledger import FILE``.

The export is one JSON document: the ledger's identity and head, and every row of its tables
(the custodian's signed keys, checkpoints, families and approvals; budgets; entries with their
hashes and signatures; programmes and their allowances; the people sketches, their bytes in
hex, which the entries name) exactly as stored. The import creates
the ledger from it (a new SQLite file, or the schema of a PostgreSQL database that has none yet,
created by its custodian's database role) under the same identity, appends the entries one by
one through the store's own append (on PostgreSQL: ``append_entry``, which refuses an entry that
does not continue the chain) and verifies everything (chain, signatures, checkpoints) before it
commits; a ledger that does not verify is not imported. Releases paid from the old store verify
against the new one (same id, same entries, same keys). The file names datasets, users, hosts
and input fingerprints: it is created 0600.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from privmob.errors import BudgetError, ConfigError, InputError
from privmob.privacy.ledger.rows import Con, Record, one, row_dicts
from privmob.privacy.ledger.schema import SIGNED_TABLES
from privmob.privacy.ledger.spends import spend_problem
from privmob.privacy.programme_ledger import SCHEMA as programme_schema

if TYPE_CHECKING:
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.pg import PostgresStore
    from privmob.privacy.ledger.store import Store

FORMAT = "privmob-ledger-export"
VERSION = 1
#: the tables moved, in the order they are written back (keys before what they signed)
SIGNED = tuple(SIGNED_TABLES)
OPTIONAL = ("programmes", "programme_allowances")
#: (table, column) numbered by the store (AUTOINCREMENT / bigserial)
SERIAL = (
    *((t, c.split()[0]) for t, c in SIGNED_TABLES.items() if "AUTOINCREMENT" in c),
    ("programme_allowances", "id"),
)
#: the people sketches (privacy/people.py): bytes, written in hex
PEOPLE = "dataset_people"
ORDER = {"budgets": "dataset", "releases": "id", "programmes": "dataset", PEOPLE: "dataset"}


class Export(TypedDict):
    """The export's document (JSON)."""

    format: str
    version: int
    ledger_id: str
    head_count: int
    head_hash: str
    #: every row of each table by column name, as stored (a people sketch in hex)
    tables: dict[str, list[Record]]


def _rows(con: Con, table: str) -> list[Record]:
    rows = row_dicts(con.execute(f"SELECT * FROM {table} ORDER BY {ORDER.get(table, 1)}"))
    if table == PEOPLE:  # sketch: BLOB / bytea NOT NULL
        rows = [{**r, "sketch": bytes(cast(bytes, r["sketch"])).hex()} for r in rows]
    return rows


def export_ledger(ledger: Ledger, path: Path) -> dict[str, int]:
    """Write ``ledger`` to ``path`` (refused when the ledger does not verify)."""
    problems = ledger.verify()
    if problems:
        raise BudgetError(
            f"the ledger {ledger.path} does not verify ({problems[0]}); not exported",
            hint=f"privmob ledger verify --ledger {ledger.path}",
        )
    tables = [
        t for t in (*SIGNED, "budgets", "releases", *OPTIONAL, PEOPLE) if ledger.store.has_table(t)
    ]
    with ledger.store.connect() as con:
        con.execute("BEGIN")  # one snapshot
        try:
            meta = ledger.store.read_meta(con)
            doc: Export = {
                "format": FORMAT,
                "version": VERSION,
                "ledger_id": meta["ledger_id"],
                "head_count": int(meta.get("head_count", "0")),
                "head_hash": meta.get("head_hash", ""),
                "tables": {t: _rows(con, t) for t in tables},
            }
        finally:
            con.execute("COMMIT")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
    return {t: len(doc["tables"].get(t, [])) for t in ("budgets", "releases")}


def _read(path: Path) -> Export:
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
    return cast(Export, doc)  # as privmob ledger export writes it (checked as it is imported)


def _insert(con: Con, table: str, row: Record) -> None:
    con.execute(
        f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        tuple(row.values()),
    )


def _sketch_bytes(row: Record, path: Path) -> bytes:
    try:
        return bytes.fromhex(str(row["sketch"]))
    except (KeyError, ValueError):
        raise InputError(
            f"{path}: the people sketch of dataset '{row.get('dataset')!s}' is not hex; nothing "
            "was imported",
            hint="export it again with privmob ledger export",
        ) from None


def _holds_anything(store: Store) -> bool:
    """A database with a ledger that has keys, budgets or entries (an empty schema, left by
    an older privmob's import that did not verify, can take another)."""
    if not store.has_table("ledger_meta"):
        return False
    with store.connect() as con:
        row = one(
            con.execute(
                "SELECT (SELECT count(*) FROM ledger_keys) + (SELECT count(*) FROM budgets) + "
                "(SELECT count(*) FROM releases)"
            )
        )
    return bool(row[0])


def import_ledger(location: str | os.PathLike[str], path: Path) -> Ledger:
    """Create the ledger at ``location`` from the export at ``path``; nothing is left behind
    when it does not verify (a new file is removed; a database's new schema is created in the
    import's transaction, so it is rolled back with it)."""
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.custody import all_problems
    from privmob.privacy.ledger.store import SqliteStore, open_store

    doc = _read(path)
    store = open_store(location)
    in_file = isinstance(store, SqliteStore)
    if (in_file and Path(location).exists()) or (not in_file and _holds_anything(store)):
        raise ConfigError(
            f"there is a ledger at {store.location} already; an import creates a new one",
            hint="import into a new file, or a database whose custodian has not run "
            "privmob ledger init",
        )

    def no_key(con: Con, ledger_id: str) -> None:  # its keys come from the file
        return None

    if in_file:
        store.open(create=True, establish=no_key)
    tables = doc.get("tables", {})
    try:
        with store.connect() as con:
            if in_file:
                store.begin_write(con, None)
            else:  # the schema in the import's own transaction: a refusal leaves none
                con.execute("BEGIN")
                cast("PostgresStore", store).create_within(con, no_key)
            try:
                con.execute(
                    "UPDATE ledger_meta SET value = ? WHERE key = 'ledger_id'", (doc["ledger_id"],)
                )
                for table in (*SIGNED, "budgets"):
                    for row in tables.get(table, []):
                        _insert(con, table, row)
                for row in tables.get("releases", []):
                    invalid = spend_problem(row)
                    if invalid:
                        raise BudgetError(
                            f"{path} does not verify ({invalid}); nothing was imported"
                        )
                    store.append_entry(con, row)
                if tables.get("releases"):
                    store.set_head(con, int(doc["head_count"]), str(doc["head_hash"]))
                for table in OPTIONAL:
                    if tables.get(table) and isinstance(con, sqlite3.Connection):
                        for statement in programme_schema.split(";"):  # a new file has none
                            con.execute(statement)
                    for row in tables.get(table, []):
                        _insert(con, table, row)
                for row in tables.get(PEOPLE, []):  # (an export of an earlier privmob: none)
                    _insert(con, PEOPLE, {**row, "sketch": _sketch_bytes(row, path)})
                if not in_file:  # rows given their own ids: the sequences go on after them
                    for table, key in SERIAL:
                        con.execute(
                            f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), "
                            f"COALESCE((SELECT max({key}) FROM {table}), 0) + 1, false)"
                        )
                problems = all_problems(con, doc["ledger_id"])
                if problems:
                    raise BudgetError(
                        f"{path} does not verify once imported ({problems[0]}); nothing was "
                        "imported",
                        hint="export it again from a ledger that verifies",
                    )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
    except BaseException:
        if in_file:
            Path(location).unlink(missing_ok=True)
        raise
    return Ledger(location, create=False)
