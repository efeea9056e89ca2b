"""The ledger's hash chain: each entry carries the hash of the previous entry and its own hash
over its canonical content; the ledger's identity and head (entry count, last hash) are kept in
its ``ledger_meta`` table. This detects an entry that was edited or deleted, a ledger truncated
to fewer entries, a budget edited, and a table dropped and re-created. It is not a signature:
whoever can write the file and knows this format can rebuild a consistent chain; a release's
``metadata.json`` keeps the ledger id and its entries' hashes as an outside witness.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from privmob.privacy.ledger.rows import Con, Record, as_int, row_dicts, text
from privmob.privacy.ledger.spends import spend_problem

#: provenance columns of an entry (besides its cost): the input, the output, who and where
PROVENANCE = (
    "input_fingerprint",
    "input_rows",
    "output_dir",
    "output_hashes",
    "os_user",
    "host",
    "new_dataset_for_same_data",
)
#: the columns of ``releases`` covered by an entry's hash, in this order
ENTRY_COLUMNS = (
    "id",
    "dataset",
    "created_at",
    "kind",
    "epsilon",
    "delta",
    "rho",
    "unit",
    "release_epsilon",
    "release_delta",
    "release_unit",
    "group_size",
    "for_publication",
    "description",
    "params",
    *PROVENANCE,
)
#: columns added to a ledger of the first schema on open
NEW_ENTRY_COLUMNS = {
    "input_fingerprint": "TEXT",
    "input_rows": "INTEGER",
    "output_dir": "TEXT",
    "output_hashes": "TEXT",
    "os_user": "TEXT",
    "host": "TEXT",
    "new_dataset_for_same_data": "INTEGER NOT NULL DEFAULT 0",
    "prev_hash": "TEXT",
    "row_hash": "TEXT",
    "nonce": "TEXT",
    "signer": "TEXT",
    "signature": "TEXT",
}
#: hashed when present: an entry's random nonce (entries written since entries are signed), so
#: that a hash derived from the entry (a release's published ledger head) cannot be used to test
#: guesses of its input's fingerprint or row count
OPTIONAL_HASHED = ("nonce",)
BUDGET_COLUMNS = ("dataset", "epsilon", "delta", "unit", "created_at", "note")


def canonical(values: Mapping[str, object]) -> str:
    """One text per content: sorted keys, floats as their shortest exact repr."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)


def digest(prev: str, values: Mapping[str, object]) -> str:
    return hashlib.sha256((prev + "\n" + canonical(values)).encode()).hexdigest()


def genesis(ledger_id: str) -> str:
    """The 'previous hash' of the first entry: binds the chain to the ledger's identity."""
    return hashlib.sha256(f"privmob-ledger:{ledger_id}".encode()).hexdigest()


def budget_hash(ledger_id: str, row: Mapping[str, object]) -> str:
    return digest(genesis(ledger_id), {"budget": row})


ROW_COLUMNS = (*ENTRY_COLUMNS, *OPTIONAL_HASHED, "prev_hash", "row_hash", "signer", "signature")


def entry_rows(con: Con, after: int = 0, until: int | None = None) -> list[Record]:
    """The entries (all columns of the chain and signature) with an id above ``after`` (and up
    to ``until``)."""
    cur = con.execute(
        f"SELECT {', '.join(ROW_COLUMNS)} FROM releases WHERE id > ? AND id <= ? ORDER BY id",
        (after, 2**62 if until is None else until),
    )
    return row_dicts(cur)


def hashed(row: Record) -> Record:
    out = {k: row.get(k) for k in ENTRY_COLUMNS}
    out.update({k: row[k] for k in OPTIONAL_HASHED if row.get(k) is not None})
    return out


#: REAL columns an older privmob hashed as given (an int epsilon hashed as ``1``, read as 1.0)
REAL_COLUMNS = ("epsilon", "delta", "rho", "release_epsilon", "release_delta")


def entry_digest(row: Record) -> str:
    """The hash of a stored entry's content; for an entry written before entries carried a
    nonce, also as an older privmob hashed it (integral REAL values as ints) when that is the
    hash it stored."""
    prev = text(row["prev_hash"]) or ""
    own = digest(prev, hashed(row))
    if own == row.get("row_hash") or row.get("nonce") is not None:
        return own
    base = hashed(row)
    integral = [k for k in REAL_COLUMNS if isinstance(v := base.get(k), float) and v.is_integer()]
    for n in range(1, 2 ** len(integral)):  # which of them were given as ints
        legacy = dict(base)
        for i, k in enumerate(integral):
            if n >> i & 1:
                legacy[k] = as_int(base[k])
        if digest(prev, legacy) == row.get("row_hash"):
            return str(row["row_hash"])
    return own


def problems(con: Con, ledger_id: str, head_count: int, head_hash: str) -> list[str]:
    """Everything that does not add up, as sentences (empty: the chain verifies)."""
    found: list[str] = []
    prev = genesis(ledger_id)
    rows = entry_rows(con)
    for row in rows:
        if row["prev_hash"] != prev:
            found.append(
                f"entry {row['id']!s}: the previous entry's hash does not match "
                "(an entry before it was deleted or edited)"
            )
        own = entry_digest(row)
        if row["row_hash"] != own:
            found.append(f"entry {row['id']!s}: its content does not match its hash (edited)")
        invalid = spend_problem(row)
        if invalid:
            found.append(invalid)
        prev = text(row["row_hash"]) or own
    if len(rows) != head_count or (rows and prev != head_hash) or (not rows and head_hash):
        found.append(
            f"the ledger holds {len(rows)} entries but recorded {head_count} "
            "(entries were deleted at the end, or the ledger was truncated or replaced)"
        )
    cur = con.execute(f"SELECT {', '.join(BUDGET_COLUMNS)}, row_hash FROM budgets")
    for r in cur.fetchall():
        row = dict(zip(BUDGET_COLUMNS, r[:-1], strict=True))
        if r[-1] != budget_hash(ledger_id, row):
            found.append(f"budget of '{row['dataset']!s}': does not match its hash (edited)")
    return found
