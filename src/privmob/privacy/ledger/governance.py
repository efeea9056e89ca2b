"""Governance as one chain signed by the custodian: key grants, revocations and rotations,
budgets, dataset family links, same-data approvals and checkpoints, in the order they were made.

Each of these records keeps its row in its own table (``ledger_keys``, ``budgets``,
``dataset_links``, ``same_data_approvals``, ``checkpoints``: what the rest of privmob and the
PostgreSQL server read), and each is also an entry of the ``governance`` table: its table, the
digest of its row (:func:`record_digest`), chained to the entry before it with the entries'
own hashing (:func:`privmob.privacy.ledger.chain.digest`) and signed by a custodian key active
at that point of the chain. So

* a record deleted, or edited, leaves an entry whose record is gone: detected;
* a record inserted outside the chain (a revoked analyst's grant row copied again, a row of
  an earlier ledger) is in no entry: it counts for nothing and is reported;
* an entry deleted, replayed or moved breaks the chain (the next entry's previous hash);
* a key's validity is decided by the position of its grant and revocation in the chain, not by
  the table's row numbers (:func:`privmob.privacy.ledger.trust.key_ring` replays key events in
  chain order).

Deleting the last entries of the chain together with their records is seen by whoever holds a
later position: each checkpoint signs the governance head it follows (in its ``vouched`` list),
and witnesses keep the latest checkpoint they saw (:mod:`privmob.privacy.ledger.witness`).

A ledger made before this chain (records, no ``governance`` entry) is read as before and is
given its chain on its custodian's next write (:func:`attest_existing`), after it verifies.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger.rows import Con, Record, as_int, one, row_dicts

if TYPE_CHECKING:
    from privmob.privacy.ledger.keys import Signer

#: the governed tables, in the order a ledger made before the chain has its records attested;
#: the columns a record's digest leaves out: its row number, and a budget's signature (an
#: adopted ledger's budgets are signed after they were written)
GOVERNED: dict[str, tuple[str, ...]] = {
    "ledger_keys": ("seq",),
    "budgets": ("signer", "signature"),
    "dataset_links": (),
    "same_data_approvals": (),
    "checkpoints": ("seq",),
}
ORDER = {"ledger_keys": "seq", "checkpoints": "seq"}  # others: as inserted (rowid / ctid)
NAMES = {
    "ledger_keys": "key event",
    "budgets": "budget",
    "dataset_links": "family link",
    "same_data_approvals": "same-data approval",
    "checkpoints": "checkpoint",
}
#: how a checkpoint's ``vouched`` list names the governance head it follows, and each dataset
#: that has a people sketch then (sketches are written by analysts' charges, so they are not
#: records of this chain: the charge's signed entries name each one (:data:`PEOPLE_PARAM`),
#: and a sketch a checkpoint named must not disappear)
HEAD_PREFIX = "governance:"
PEOPLE_PREFIX = "people:"
MARK_PREFIXES = (HEAD_PREFIX, PEOPLE_PREFIX)


def genesis(ledger_id: str) -> str:
    return hashlib.sha256(f"privmob-governance:{ledger_id}".encode()).hexdigest()


def record_digest(table: str, row: Mapping[str, object]) -> str:
    """The digest of a governed record: its stored columns (but those of :data:`GOVERNED`)."""
    left_out = GOVERNED[table]
    values = {k: v for k, v in row.items() if k not in left_out}
    return hashlib.sha256(chain.canonical({table: values}).encode()).hexdigest()


def entry_hash(prev: str, table: str, record: str, created: str) -> str:
    return chain.digest(prev, {"table": table, "record": record, "created_at": created})


def message(ledger_id: str, row_hash: str) -> bytes:
    return (ledger_id + "\n" + chain.canonical({"governance": row_hash})).encode()


@dataclass(frozen=True)
class Entry:
    seq: int
    table: str
    record: str
    created_at: str
    prev_hash: str
    row_hash: str
    signer: str
    signature: str


COLUMNS = ("seq", "kind", "record", "created_at", "prev_hash", "row_hash", "signer", "signature")


def available(con: Con) -> bool:
    """Whether the ledger has the chain's table (a PostgreSQL ledger made by an earlier privmob
    has none; an SQLite file gets it when opened)."""
    if isinstance(con, sqlite3.Connection):
        return True
    return one(con.execute("SELECT to_regclass('governance')"))[0] is not None


def governed_rows(con: Con) -> int:
    return sum(as_int(one(con.execute(f"SELECT count(*) FROM {t}"))[0]) for t in GOVERNED)


def entries(con: Con) -> list[Entry]:
    """The chain's entries in order (none on a ledger made before it)."""
    rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM governance ORDER BY seq").fetchall()
    # seq INTEGER, the others TEXT, all NOT NULL
    typed = cast("Sequence[tuple[int, str, str, str, str, str, str, str]]", rows)
    return [Entry(int(r[0]), *r[1:]) for r in typed]


def head(con: Con, ledger_id: str) -> tuple[int, str]:
    """(entries, hash of the last) of the chain; (0, its genesis) when empty."""
    row = one(
        con.execute(
            "SELECT count(*), (SELECT row_hash FROM governance ORDER BY seq DESC LIMIT 1) "
            "FROM governance"
        )
    )
    return as_int(row[0]), str(row[1] or genesis(ledger_id))


def holds(con: Con, count: int, last: str) -> bool:
    """Whether the chain's entry number ``count`` (1 = the first) is still ``last``."""
    row = con.execute(
        "SELECT row_hash FROM governance ORDER BY seq LIMIT 1 OFFSET ?", (count - 1,)
    ).fetchone()
    return row is not None and row[0] == last


def people_marks(con: Con) -> list[str]:
    rows = con.execute("SELECT dataset FROM dataset_people ORDER BY dataset").fetchall()
    return [PEOPLE_PREFIX + str(r[0]) for r in rows]


def people_gone(con: Con, vouched: Iterable[str]) -> str | None:
    """A dataset whose people sketch a checkpoint named and that has none now (None: none)."""
    named = sorted(v[len(PEOPLE_PREFIX) :] for v in vouched if v.startswith(PEOPLE_PREFIX))
    if not named:
        return None
    have = {str(r[0]) for r in con.execute("SELECT dataset FROM dataset_people").fetchall()}
    return next((d for d in named if d not in have), None)


#: the key of an entry's signed ``params`` that names the SHA-256 of the people sketch its
#: charge merged (hex): a stored sketch is the one the latest entry of its dataset that names
#: one names, or it was replaced. A charge's caller may not set it.
PEOPLE_PARAM = "people_sketch"
#: the entries that may name one (the same text as the partial index ``releases_people``, so
#: that both stores find a dataset's latest such entry in the index)
NAMES_SKETCH = f"params LIKE '%\"{PEOPLE_PARAM}\"%'"


def sketch_digest(sketch: bytes) -> str:
    """What an entry names of a people sketch: the SHA-256 of its stored bytes (hex)."""
    return hashlib.sha256(bytes(sketch)).hexdigest()


def named_sketch(con: Con, dataset: str) -> str | None:
    """The digest of the people sketch that the latest entry of ``dataset`` naming one names
    (None: no entry names one, a ledger made before entries did; ``""``: its params are not
    readable, so it names no sketch that can be stored)."""
    sql = f"SELECT params FROM releases WHERE dataset = ? AND {NAMES_SKETCH} ORDER BY id DESC"
    row = con.execute(sql + " LIMIT 1", (dataset,)).fetchone()
    if row is None:
        return None
    found = _named(row[0])
    if found is not None:
        return found
    for (params,) in con.execute(sql, (dataset,)).fetchall():  # the key's text elsewhere (rare)
        found = _named(params)
        if found is not None:
            return found
    return None


def _named(params: object) -> str | None:
    if not isinstance(params, str | bytes | bytearray):  # json.loads: TypeError
        return ""
    try:
        value = json.loads(params)
    except ValueError:
        return ""
    if not isinstance(value, dict) or PEOPLE_PARAM not in value:
        return None
    named = value[PEOPLE_PARAM]
    return named if isinstance(named, str) else ""


def stored_people(con: Con) -> list[tuple[str, bytes, str | None]]:
    """Each stored people sketch: its dataset, its bytes, and what the entries of its dataset
    name of it (:func:`named_sketch`), in one query (one index probe per sketch)."""
    latest = (
        f"SELECT r.params FROM releases r WHERE r.dataset = p.dataset AND r.{NAMES_SKETCH} "
        "ORDER BY r.id DESC LIMIT 1"
    )
    # dataset TEXT, sketch BLOB / bytea (both NOT NULL), the params TEXT of the latest entry
    rows = cast(
        "Sequence[tuple[str, bytes, str | None]]",
        con.execute(
            f"SELECT p.dataset, p.sketch, ({latest}) FROM dataset_people p ORDER BY p.dataset"
        ).fetchall(),
    )
    out = []
    for dataset, sketch, params in rows:
        named = None if params is None else _named(params)
        if params is not None and named is None:  # the key's text elsewhere (rare)
            named = named_sketch(con, str(dataset))
        out.append((str(dataset), bytes(sketch), named))
    return out


def replaced_sketch(dataset: str, sketch: bytes, named: str | None) -> str | None:
    """Why ``sketch``, stored as ``dataset``'s, is not the one its entries name (``named``,
    :func:`named_sketch`; None: no entry names one). Names the dataset, never the sketch or a
    hash."""
    if named is None or named == sketch_digest(sketch):
        return None
    return (
        f"the people sketch of dataset '{dataset}' is not the one its entries name (replaced: "
        "the check of the people in a release would be switched off)"
    )


def _gone(dataset: str) -> str:
    return (
        f"the people sketch of dataset '{dataset}', which its entries name, is gone (deleted: "
        "the check of the people in a release would be open again)"
    )


def gone_sketch(con: Con, dataset: str) -> str | None:
    """Why ``dataset``, which has no stored people sketch, should have one (None: no entry of
    it names one)."""
    return None if named_sketch(con, dataset) is None else _gone(dataset)


def gone_people(con: Con) -> list[str]:
    """Every dataset whose entries name a people sketch and that has none stored (one query,
    an index probe per dataset with a budget)."""
    rows = con.execute(
        "SELECT b.dataset FROM budgets b WHERE NOT EXISTS (SELECT 1 FROM dataset_people p "
        "WHERE p.dataset = b.dataset) AND EXISTS (SELECT 1 FROM releases r WHERE "
        f"r.dataset = b.dataset AND r.{NAMES_SKETCH}) ORDER BY b.dataset"
    ).fetchall()
    return [_gone(str(r[0])) for r in rows if named_sketch(con, str(r[0])) is not None]


def replaced_people(con: Con) -> list[str]:
    """Every stored people sketch that is not the one its dataset's entries name, and every
    one its entries name that is gone."""
    found = [replaced_sketch(*row) for row in stored_people(con)]
    return [f for f in found if f] + gone_people(con)


def head_mark(con: Con, ledger_id: str) -> str:
    """The governance head as a checkpoint vouches for it."""
    count, last = head(con, ledger_id)
    return f"{HEAD_PREFIX}{count}:{last}"


def attest(
    con: Con, ledger_id: str, signer: Signer, table: str, row: Mapping[str, object], now: str
) -> None:
    """Append the record ``row`` of ``table`` (as stored) to the chain, signed by ``signer``
    (inside the caller's transaction, which holds the write lock). A ledger made before the
    chain (records but no entry yet) is left as it is until :func:`attest_existing`."""
    if not available(con):
        return
    count, prev = head(con, ledger_id)
    if count == 0 and governed_rows(con) > 1:
        return
    _append(con, ledger_id, signer, table, row, now, prev)


def _append(
    con: Con,
    ledger_id: str,
    signer: Signer,
    table: str,
    row: Mapping[str, object],
    now: str,
    prev: str,
) -> None:
    record = record_digest(table, row)
    own = entry_hash(prev, table, record, now)
    signature = signer.sign("governance", message(ledger_id, own))
    con.execute(
        "INSERT INTO governance (kind, record, created_at, prev_hash, row_hash, signer, "
        "signature) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (table, record, now, prev, own, signer.key_id, signature),
    )


def stored_records(con: Con) -> dict[str, list[Record]]:
    """Every governed table's rows, as stored, in their order."""
    out: dict[str, list[Record]] = {}
    for table in GOVERNED:
        cur = con.execute(f"SELECT * FROM {table} ORDER BY {ORDER.get(table, 'created_at')}")
        out[table] = row_dicts(cur)
    return out


def attest_existing(con: Con, ledger_id: str, signer: Signer, now: str) -> int:
    """Give a ledger made before the chain its chain: every record, in :data:`GOVERNED`'s
    order (the caller has verified them); returns how many."""
    n = 0
    for table, rows in stored_records(con).items():
        for row in rows:
            _, prev = head(con, ledger_id)
            _append(con, ledger_id, signer, table, row, now, prev)
            n += 1
    return n


@dataclass
class Replay:
    """The chain checked against the records: which rows it attests (per table, in chain
    order), and what does not add up (sentences naming the entry or the row)."""

    order: list[tuple[Entry, Record | None]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _label(table: str, row: Record) -> str:
    if table == "ledger_keys":
        return f"key event {row.get('seq')!s} ({row.get('action')!s} {row.get('name')!s})"
    if table == "checkpoints":
        return f"checkpoint {row.get('seq')!s}"
    return f"{NAMES[table]} of '{row.get('dataset')!s}'"


def replay(con: Con, ledger_id: str) -> Replay:
    """Link the chain's entries (previous hash, own hash) and match each to its record; the
    signatures are checked by the caller, who knows which keys were active at each entry
    (:func:`privmob.privacy.ledger.trust.key_ring`)."""
    out = Replay()
    chain_entries = entries(con)
    stored = stored_records(con)
    by_digest: dict[tuple[str, str], list[Record]] = {}
    for table, rows in stored.items():
        for row in rows:
            by_digest.setdefault((table, record_digest(table, row)), []).append(row)
    prev = genesis(ledger_id)
    attested: Counter[tuple[str, str]] = Counter()
    for e in chain_entries:
        if e.prev_hash != prev:
            out.problems.append(
                f"governance entry {e.seq}: the previous entry's hash does not match (an entry "
                "of the custodian's chain was deleted, replayed or moved)"
            )
        if e.row_hash != entry_hash(e.prev_hash, e.table, e.record, e.created_at):
            out.problems.append(f"governance entry {e.seq}: its content does not match its hash")
        prev = e.row_hash
        if e.table not in GOVERNED:
            out.problems.append(f"governance entry {e.seq}: no such record kind {e.table!r}")
            continue
        key = (e.table, e.record)
        attested[key] += 1
        rows = by_digest.get(key, [])
        if attested[key] > len(rows):
            out.problems.append(
                f"governance entry {e.seq} ({NAMES[e.table]}): its record is gone (deleted or "
                "edited)"
            )
            out.order.append((e, None))
            continue
        out.order.append((e, rows[attested[key] - 1]))
    for (table, digest), rows in by_digest.items():
        for row in rows[attested[(table, digest)] :]:
            out.problems.append(
                f"{_label(table, row)}: in no entry of the custodian's governance chain (written "
                "outside it, e.g. a signed row copied again): it counts for nothing"
            )
    return out


def vouched_head(vouched: Iterable[str]) -> tuple[int, str] | None:
    """The governance head a checkpoint's ``vouched`` list names (None: made before)."""
    for v in vouched:
        if v.startswith(HEAD_PREFIX):
            count, _, last = v[len(HEAD_PREFIX) :].partition(":")
            return int(count), last
    return None
