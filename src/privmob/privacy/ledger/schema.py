"""The privacy ledger's SQLite file: its schema (append-only triggers), the upgrade of a ledger
of the first schema (columns added, existing entries hash-chained once), the integrity checks
made on open and at each charge (a dropped table, a missing identity, entries that no longer
end where the head says), and the head and entry ids kept in the charging transaction.

:class:`privmob.privacy.ledger.Ledger` uses these; the hash chain itself is
:mod:`privmob.privacy.ledger.chain`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from privmob.errors import BudgetError
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger.rows import Con, as_int, one
from privmob.privacy.ledger.spends import sql_condition

RELEASES_U = """CREATE TRIGGER IF NOT EXISTS releases_append_only_u BEFORE UPDATE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END"""
BUDGETS_U = """CREATE TRIGGER IF NOT EXISTS budgets_fixed_u BEFORE UPDATE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END"""
#: the custodian's signed records (privacy/ledger/trust.py): key grants and revocations,
#: checkpoints of the chain with each dataset's totals, dataset families, same-data approvals;
#: each row carries the key id that signed it and its Ed25519 signature; append-only
SIGNED_TABLES = {
    "ledger_keys": """
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    key_id      TEXT NOT NULL,
    action      TEXT NOT NULL,
    role        TEXT NOT NULL,
    name        TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    at_count    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    signer      TEXT NOT NULL,
    signature   TEXT NOT NULL""",
    "checkpoints": """
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_count INTEGER NOT NULL,
    last_id     INTEGER NOT NULL,
    head_hash   TEXT NOT NULL,
    totals      TEXT NOT NULL,
    adopted     INTEGER NOT NULL DEFAULT 0,
    vouched     TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL,
    signer      TEXT NOT NULL,
    signature   TEXT NOT NULL""",
    "dataset_links": """
    dataset     TEXT PRIMARY KEY,
    family      TEXT NOT NULL,
    at_count    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    signer      TEXT NOT NULL,
    signature   TEXT NOT NULL""",
    "same_data_approvals": """
    dataset     TEXT PRIMARY KEY,
    note        TEXT NOT NULL,
    at_count    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    signer      TEXT NOT NULL,
    signature   TEXT NOT NULL""",
    # the custodian's records above and budgets, in one signed chain (privacy/ledger/governance.py)
    "governance": """
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    record      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    row_hash    TEXT NOT NULL,
    signer      TEXT NOT NULL,
    signature   TEXT NOT NULL""",
}
SIGNED_SCHEMA = "".join(
    f"CREATE TABLE IF NOT EXISTS {t} ({cols}\n);\n"
    f"CREATE TRIGGER IF NOT EXISTS {t}_append_only_u BEFORE UPDATE ON {t}\n"
    f"BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;\n"
    f"CREATE TRIGGER IF NOT EXISTS {t}_append_only_d BEFORE DELETE ON {t}\n"
    f"BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;\n"
    for t, cols in SIGNED_TABLES.items()
)
#: the budgets and releases columns of the first ledger files (before fingerprints and the hash
#: chain); this schema adds :data:`NEW_BUDGET_COLUMNS` and ``chain.NEW_ENTRY_COLUMNS`` to them,
#: as :func:`add_columns` does to a file of the first schema when it is opened
FIRST_BUDGETS = """
    dataset     TEXT PRIMARY KEY,
    epsilon     REAL NOT NULL,
    delta       REAL NOT NULL,
    unit        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    note        TEXT"""
FIRST_RELEASES = """
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
    params          TEXT"""
NEW_BUDGET_COLUMNS = {"row_hash": "TEXT", "signer": "TEXT", "signature": "TEXT"}
#: append-only entries, a budget set once (since the first schema)
TRIGGERS = f"""{RELEASES_U};
CREATE TRIGGER IF NOT EXISTS releases_append_only_d BEFORE DELETE ON releases
BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END;
{BUDGETS_U};
CREATE TRIGGER IF NOT EXISTS budgets_fixed_d BEFORE DELETE ON budgets
BEGIN SELECT RAISE(ABORT, 'a dataset budget is set once'); END;
"""


#: entries of valid spends only (privacy/ledger/spends.py; whoever can write the file can drop
#: it: every charge and ``ledger verify`` check each entry they read all the same)
VALID_SPEND = f"""CREATE TRIGGER IF NOT EXISTS releases_valid_spend BEFORE INSERT ON releases
WHEN NOT ({sql_condition("NEW", "9e999")})
BEGIN SELECT RAISE(ABORT, 'an entry''s cost is not a valid spend'); END;
"""


def _tables(budgets: str, releases: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS budgets ({budgets}\n);\n"
        f"CREATE TABLE IF NOT EXISTS releases ({releases}\n);\n"
    )


def _with(columns: str, added: dict[str, str]) -> str:
    return columns + "".join(f",\n    {name} {sqltype}" for name, sqltype in added.items())


#: the first ledger files' schema, which :func:`add_columns` and :func:`migrate` upgrade
FIRST_SCHEMA = _tables(FIRST_BUDGETS, FIRST_RELEASES) + TRIGGERS
SCHEMA = (
    _tables(
        _with(FIRST_BUDGETS, NEW_BUDGET_COLUMNS), _with(FIRST_RELEASES, chain.NEW_ENTRY_COLUMNS)
    )
    + """CREATE TABLE IF NOT EXISTS ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS releases_fingerprint ON releases(input_fingerprint);
-- a dataset's latest entry that names its people sketch (ledger.governance.named_sketch)
CREATE INDEX IF NOT EXISTS releases_people ON releases(dataset, id)
    WHERE params LIKE '%"people_sketch"%';
-- binding: who is in each dataset (privmob.privacy.people), custodian-only, never published
CREATE TABLE IF NOT EXISTS dataset_people (
    dataset TEXT PRIMARY KEY,
    sketch  BLOB NOT NULL,
    updated TEXT NOT NULL
);
"""
    + TRIGGERS
    + VALID_SPEND
    + SIGNED_SCHEMA
)


def table_names(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_meta(con: Con) -> dict[str, str]:
    """The ledger's identity and head (a PostgreSQL ledger always has the table)."""
    if isinstance(con, sqlite3.Connection) and "ledger_meta" not in table_names(con):
        return {}
    # key and value: TEXT NOT NULL
    return dict(
        cast(
            "Sequence[tuple[str, str]]",
            con.execute("SELECT key, value FROM ledger_meta").fetchall(),
        )
    )


def _integrity_error(path: Path | str, what: str) -> BudgetError:
    return BudgetError(
        f"the privacy ledger {path} is damaged: {what}; refusing to charge it (a missing "
        "record of spending must never read as 'spent 0')",
        hint=f"restore the ledger from a backup; see: privmob ledger verify --ledger {path}",
    )


def refuse_missing_tables(con: sqlite3.Connection, path: Path) -> None:
    """A ledger that once held entries must never silently become an empty one."""
    tables = table_names(con) - {"sqlite_sequence"}
    if not tables:
        return  # a new file
    meta = read_meta(con)
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


def add_columns(con: sqlite3.Connection) -> None:
    """Columns of this schema missing from a ledger of the first schema."""
    tables = table_names(con)
    if "releases" in tables:
        have = {r[1] for r in con.execute("PRAGMA table_info(releases)")}
        for name, sqltype in chain.NEW_ENTRY_COLUMNS.items():
            if name not in have:
                _add_column(con, f"ALTER TABLE releases ADD COLUMN {name} {sqltype}")
    if "budgets" in tables:
        have = {r[1] for r in con.execute("PRAGMA table_info(budgets)")}
        for name, sqltype in NEW_BUDGET_COLUMNS.items():
            if name not in have:
                _add_column(con, f"ALTER TABLE budgets ADD COLUMN {name} {sqltype}")


def _add_column(con: sqlite3.Connection, sql: str) -> None:
    try:
        con.execute(sql)
    except sqlite3.OperationalError as exc:  # another process opening the file added it
        if "duplicate column" not in str(exc):
            raise


def migrate(
    con: sqlite3.Connection, establish: Callable[[sqlite3.Connection, str], None]
) -> str | None:
    """Give a ledger its identity once; a new ledger gets its custodian key (``establish``, in
    the same transaction); the entries of a ledger of the first schema are chained (the result
    is unsigned: charges are refused until its custodian adopts it)."""
    if read_meta(con).get("ledger_id"):
        return None
    con.execute("BEGIN IMMEDIATE")
    try:
        if read_meta(con).get("ledger_id"):  # another process did it meanwhile
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
        set_head(con, len(rows), prev if rows else "")
        if not rows and not budgets:
            establish(con, ledger_id)
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    if rows or budgets:
        return (
            f"upgraded a ledger of the first schema: {len(rows)} existing entries and "
            f"{len(budgets)} budgets were hash-chained on this open (they record no input "
            "fingerprint, output or user); it is not signed: nothing is charged to it until its "
            "custodian checks it and signs it once (privmob ledger adopt)"
        )
    return None


def set_head(con: Con, count: int, head: str) -> None:
    con.execute(
        "INSERT OR REPLACE INTO ledger_meta VALUES ('head_count', ?), ('head_hash', ?)",
        (str(count), head),
    )


def next_id(con: Con) -> int:
    """The id the next entry gets (inside the charging transaction): never one used before."""
    row = one(
        con.execute(
            "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'releases'), 0), "
            "COALESCE((SELECT max(id) FROM releases), 0))"
        )
    )
    return as_int(row[0]) + 1


def refuse_broken_head(con: Con, meta: dict[str, str], path: Path | str) -> None:
    """Cheap check at each charge: the entries end where the ledger recorded they end."""
    if not meta.get("ledger_id"):
        raise _integrity_error(path, "its identity (table ledger_meta) is missing")
    row = one(
        con.execute(
            "SELECT count(*), (SELECT row_hash FROM releases ORDER BY id DESC LIMIT 1) "
            "FROM releases"
        )
    )
    if as_int(row[0]) != int(meta.get("head_count", "0")) or (row[1] or "") != meta.get(
        "head_hash", ""
    ):
        raise _integrity_error(
            path,
            f"it holds {row[0]!s} entries where {meta.get('head_count', '0')} were recorded, or "
            "its last entry changed",
        )
