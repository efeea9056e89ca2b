"""What makes a ledger trustworthy: signed records, who may sign what, and the verified
position a charge starts from.

**Keys and roles.** ``ledger_keys`` is a sequence of grant and revoke events. The first event is
the custodian's key granted by itself (the ledger's root of trust); every later event is signed
by a custodian key not revoked before it. A key is active for the entries appended after its
grant and up to its revocation, so a rotated-out key's entries stay verifiable. A revoked key
could still sign records that claim to be older than its revocation, so every checkpoint lists
(``vouched``) the custodian records that verified when it was signed, rotation and a
custodian's revocation sign one with an active key at once, and a record (or the latest
checkpoint) signed by a key revoked since counts only if the latest checkpoint vouches for it.
Custodians sign
budgets, dataset family links, same-data approvals, key events and checkpoints; analysts and
custodians sign entries; auditors sign nothing (they need no key at all to verify).

**Why a charge can verify incrementally.** A charge must not trust any row it did not verify,
yet re-verifying 100,000 entries per charge is too slow. The accounts a charge decides on are
therefore never summed from old rows: they are the totals of a *verified position* (entry id,
head hash, each dataset's totals at that point) plus the entries after it, each of which the
charge verifies (chain link, content hash, signature by an active analyst or custodian key).
Editing an entry before the position changes nothing the charge reads (and ``ledger verify``,
which checks everything, reports it); editing after it is refused. A position is trusted when

* it is a **checkpoint signed by a custodian** key, stored in the ledger, whose head hash is still
  the stored hash of its last entry (whoever edits the file cannot forge the signature); or
* it is this user's own **position cache** (``keys/verified/``), signed with the key the charge is
  made with, written after this user's last successful charge. Alone it is not trustworthy as a
  record of the ledger (it is per user and machine, it can be lost, and it says nothing about
  entries others appended), so it is used only (a) as a shortcut to a position this key verified
  itself and (b) as a witness: a ledger now *behind* it (entries deleted at the end, an older
  copy restored, the custodian key replaced) is refused.

The latest of the two is the start; with neither, the charge verifies from the first entry.
Deleting one's own latest entries after the last checkpoint cannot be seen in the file alone:
the position caches of the users who charged, and the ledger head each release's metadata
carries (``privmob ledger verify --ledger L RELEASE...``) are the witnesses for that.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger import governance as governance
from privmob.privacy.ledger.keys import Signer, keys_dir, verified
from privmob.privacy.ledger.rows import Con, Record, as_int, row_dicts, text
from privmob.privacy.ledger.spends import budget_problem, spend_problem

CUSTODIAN, ANALYST, AUDITOR = "custodian", "analyst", "auditor"
ROLES = (CUSTODIAN, ANALYST, AUDITOR)
#: a custodian's charge leaves a checkpoint when this many entries follow the last one
CHECKPOINT_EVERY = 64


class Untrusted(Exception):
    """A record that does not verify (a sentence for ``ledger verify`` and the refusal)."""


# -- messages -------------------------------------------------------------------------------
def message(ledger_id: str, values: Mapping[str, object]) -> bytes:
    return (ledger_id + "\n" + chain.canonical(values)).encode()


def entry_message(ledger_id: str, row_hash: str) -> bytes:
    return (ledger_id + "\n" + row_hash).encode()


def budget_values(row: Record) -> Record:
    return {k: row[k] for k in chain.BUDGET_COLUMNS}


# -- keys -----------------------------------------------------------------------------------
@dataclass
class KeyState:
    role: str
    name: str
    public: str
    granted_at: int
    revoked_at: int | None = None

    def active_for_entry(self, entry_id: int) -> bool:
        return self.granted_at < entry_id and (
            self.revoked_at is None or entry_id <= self.revoked_at
        )

    def active_at(self, count: int) -> bool:
        return self.granted_at <= count and (self.revoked_at is None or count <= self.revoked_at)


@dataclass
class KeyRing:
    """The keys of a ledger, replayed from its signed events."""

    keys: dict[str, KeyState] = field(default_factory=dict)
    root: str | None = None
    problems: list[str] = field(default_factory=list)

    def role(self, key_id: str, count: int) -> str | None:
        """The role a key may act in now (a revoked key: none, whatever it signed before)."""
        k = self.keys.get(key_id)
        return k.role if k is not None and k.revoked_at is None and k.granted_at <= count else None

    def custodian_public(self, key_id: str, count: int) -> str | None:
        k = self.keys.get(key_id)
        if k is None or k.role != CUSTODIAN or not k.active_at(count):
            return None
        return k.public

    def entry_public(self, key_id: str | None, entry_id: int) -> str | None:
        k = self.keys.get(key_id or "")
        if k is None or k.role not in (CUSTODIAN, ANALYST) or not k.active_for_entry(entry_id):
            return None
        return k.public


KEY_COLUMNS = ("key_id", "action", "role", "name", "public_key", "at_count", "created_at")


class KeyEvent(TypedDict):
    """A row of ``ledger_keys``: a key granted or revoked, signed by a custodian key."""

    seq: int
    key_id: str
    action: str
    role: str
    name: str
    public_key: str
    at_count: int
    created_at: str
    signer: str
    signature: str


def key_ring(con: Con, ledger_id: str, *, fast: bool = True) -> KeyRing:
    """The keys, replayed from their signed events in the order of the custodian's governance
    chain (:mod:`privmob.privacy.ledger.governance`: a grant counts from its place in the
    chain, and a row inserted outside it not at all); the chain's problems are the ring's. A
    ledger made before the chain: in the order of the table, as then."""
    ring = KeyRing()
    seen: dict[str, int] = {}  # signature -> the event that carried it first
    chained = governance.available(con) and bool(governance.head(con, ledger_id)[0])
    if not chained:
        rows = con.execute(
            f"SELECT seq, {', '.join(KEY_COLUMNS)}, signer, signature FROM ledger_keys ORDER BY seq"
        ).fetchall()
        for r in rows:
            event = dict(zip(("seq", *KEY_COLUMNS, "signer", "signature"), r, strict=True))
            if not _apply_event(ring, ledger_id, event, seen):
                return ring
        return ring
    replayed = governance.replay(con, ledger_id)
    ring.problems += replayed.problems
    # the chain up to the head the latest checkpoint signed is vouched for by that checkpoint
    # (its hash links are checked above): its entries' signatures need no check, as entries
    # before a checkpoint need none at a charge; all are checked when that checkpoint is not
    vouched_to = 0 if replayed.problems or not fast else _checkpointed_prefix(replayed)
    for i, (e, row) in enumerate(replayed.order):
        first = ring.root is None
        # the chain begins with the custodian's own key, signed by itself
        if first and (
            row is None or e.table != "ledger_keys" or not _apply_event(ring, ledger_id, row, seen)
        ):
            ring.problems.append(
                f"governance entry {e.seq}: the chain does not begin with the ledger's first key"
            )
            ring.root = None
            return ring
        k = ring.keys.get(e.signer)
        pub = k.public if k and k.role == CUSTODIAN and k.revoked_at is None else None
        if i == vouched_to and vouched_to and not _checkpoint_signed(ring, ledger_id, row):
            return key_ring(con, ledger_id, fast=False)  # not vouched for: check every entry
        if i < vouched_to:
            pass
        elif pub is None or not verified(
            pub, e.signature, "governance", governance.message(ledger_id, e.row_hash)
        ):
            ring.problems.append(
                f"governance entry {e.seq} ({governance.NAMES.get(e.table, e.table)}): not "
                "signed by a custodian key active at its place in the chain"
            )
            continue
        if not first and row is not None and e.table == "ledger_keys":
            _apply_event(ring, ledger_id, row, seen)
    return ring


def _checkpointed_prefix(replayed: governance.Replay) -> int:
    """How many entries of the chain the latest checkpoint in it signed as its head, when its
    own entry follows right after (0: none)."""
    for i in range(len(replayed.order) - 1, -1, -1):
        e, row = replayed.order[i]
        if e.table != "checkpoints" or row is None:
            continue
        try:
            head = governance.vouched_head(json.loads(cast(str, row["vouched"])))
        except (ValueError, TypeError):
            return 0
        if head is None or head[0] != i or i == 0 or replayed.order[i - 1][0].row_hash != head[1]:
            return 0
        return i
    return 0


def _checkpoint_signed(ring: KeyRing, ledger_id: str, row: Record | None) -> bool:
    """Whether a checkpoint row is signed by a custodian key active now in ``ring``."""
    if row is None:
        return False
    try:
        values = _checkpoint_values(row)
    except (ValueError, TypeError, KeyError):
        return False
    k = ring.keys.get(text(row.get("signer")) or "")
    return (
        k is not None
        and k.role == CUSTODIAN
        and k.revoked_at is None
        and verified(
            k.public,
            text(row.get("signature")),
            "checkpoint",
            message(ledger_id, {"checkpoint": values}),
        )
    )


def _checkpoint_values(row: Record) -> dict[str, object]:
    """What a checkpoint's signature covers, from its stored row."""
    c = cast(CheckpointRow, row)  # its columns' types (schema.SIGNED_TABLES), all NOT NULL
    pos = Position(int(c["last_id"]), int(c["entry_count"]), c["head_hash"], {})
    return {
        **pos.values(),
        "totals": json.loads(c["totals"]),
        "adopted": int(c["adopted"]),
        "vouched": json.loads(c["vouched"]),
        "created_at": c["created_at"],
    }


class CheckpointRow(TypedDict):
    """The columns of a row of ``checkpoints`` that its signature covers."""

    entry_count: int
    last_id: int
    head_hash: str
    totals: str
    adopted: int
    vouched: str
    created_at: str


def _apply_event(ring: KeyRing, ledger_id: str, event: Record, seen: dict[str, int]) -> bool:
    """Apply one key event to ``ring`` (False: the ledger's first key does not verify)."""
    values = {k: event[k] for k in KEY_COLUMNS}
    key = cast(KeyEvent, event)  # a row of ledger_keys: its columns' types, all NOT NULL
    signer, signature, seq = key["signer"], key["signature"], key["seq"]
    if signature in seen:  # Ed25519 signs one event once: a copy is a replay
        ring.problems.append(
            f"key event {seq} ({values['action']!s} {values['name']!s}) replays key event "
            f"{seen[signature]}: a grant or revocation recorded again counts for nothing"
        )
        return True
    seen[str(signature)] = int(seq)
    msg = message(ledger_id, {"key_event": values})
    if ring.root is None:  # the first event: the custodian's key, signed by itself
        ok = (
            values["action"] == "grant"
            and values["role"] == CUSTODIAN
            and signer == key["key_id"]
            and verified(key["public_key"], signature, "key", msg)
        )
        if not ok:
            ring.problems.append(f"key event {seq}: the ledger's first key does not verify")
            return False
        ring.root = key["key_id"]
    else:  # in sequence: a key revoked before this event cannot have signed it
        k = ring.keys.get(signer)
        pub = k.public if k and k.role == CUSTODIAN and k.revoked_at is None else None
        if pub is None or not verified(pub, signature, "key", msg):
            ring.problems.append(
                f"key event {seq} ({values['action']!s} {values['name']!s}): not signed by an "
                "active custodian key"
            )
            return True
    if key["action"] == "grant":
        ring.keys[key["key_id"]] = KeyState(
            key["role"], key["name"], key["public_key"], key["at_count"]
        )
    elif key["action"] == "revoke" and key["key_id"] in ring.keys:
        ring.keys[key["key_id"]].revoked_at = key["at_count"]
    return True


def add_key_event(
    con: Con,
    ledger_id: str,
    signer: Signer,
    *,
    action: str,
    role: str,
    name: str,
    public_hex: str,
    at_count: int,
    created: str,
) -> None:
    from privmob.privacy.ledger.keys import key_id

    values: Record = {
        "key_id": key_id(bytes.fromhex(public_hex)),
        "action": action,
        "role": role,
        "name": name,
        "public_key": public_hex,
        "at_count": at_count,
        "created_at": created,
    }
    sig = signer.sign("key", message(ledger_id, {"key_event": values}))
    con.execute(
        f"INSERT INTO ledger_keys ({', '.join(KEY_COLUMNS)}, signer, signature) "
        f"VALUES ({', '.join('?' * (len(KEY_COLUMNS) + 2))})",
        (*values.values(), signer.key_id, sig),
    )
    row = {**values, "signer": signer.key_id, "signature": sig}
    governance.attest(con, ledger_id, signer, "ledger_keys", row, created)


def revoke_key(
    con: Con,
    ledger_id: str,
    signer: Signer,
    key: KeyState,
    *,
    at_count: int,
    created: str,
) -> None:
    """Record, signed by ``signer``, that the registered ``key`` signs nothing after
    ``at_count`` (its earlier entries stay valid)."""
    add_key_event(
        con,
        ledger_id,
        signer,
        action="revoke",
        role=key.role,
        name=key.name,
        public_hex=key.public,
        at_count=at_count,
        created=created,
    )


# -- custodian records: budgets, links, approvals -------------------------------------------
def budget_signature(signer: Signer, ledger_id: str, row_hash: str) -> str:
    return signer.sign("budget", message(ledger_id, {"row_hash": row_hash}))


def budget_row_problem(ring: KeyRing, ledger_id: str, row: Record) -> str | None:
    invalid = budget_problem(str(row["dataset"]), row.get("epsilon"), row.get("delta"))
    if invalid:
        return invalid
    if row.get("row_hash") != chain.budget_hash(ledger_id, budget_values(row)):
        return f"budget of '{row['dataset']!s}': does not match its hash (edited)"
    k = ring.keys.get(text(row.get("signer")) or "")
    msg = message(ledger_id, {"row_hash": row["row_hash"]})
    if (
        k is None
        or k.role != CUSTODIAN
        or not verified(k.public, text(row.get("signature")), "budget", msg)
    ):
        return f"budget of '{row['dataset']!s}': not signed by a custodian key (edited or forged)"
    return None


RECORD_COLUMNS = {
    "dataset_links": ("dataset", "family", "at_count", "created_at"),
    "same_data_approvals": ("dataset", "note", "at_count", "created_at"),
}


def add_record(con: Con, ledger_id: str, signer: Signer, table: str, values: Record) -> None:
    cols = RECORD_COLUMNS[table]
    sig = signer.sign(table, message(ledger_id, {table: values}))
    con.execute(
        f"INSERT INTO {table} ({', '.join(cols)}, signer, signature) "
        f"VALUES ({', '.join('?' * (len(cols) + 2))})",
        (*(values[c] for c in cols), signer.key_id, sig),
    )
    row = {**{c: values[c] for c in cols}, "signer": signer.key_id, "signature": sig}
    governance.attest(con, ledger_id, signer, table, row, str(values["created_at"]))


def records(
    con: Con,
    ledger_id: str,
    ring: KeyRing,
    table: str,
    vouched: frozenset[str] | None = None,
) -> tuple[dict[str, Record], list[str]]:
    """The custodian-signed rows of ``table`` by dataset, and the rows that do not verify;
    with ``vouched`` (the latest checkpoint's), a row signed by a key revoked since must be in
    it."""
    cols = RECORD_COLUMNS[table]
    good: dict[str, Record] = {}
    bad: list[str] = []
    for r in con.execute(f"SELECT {', '.join(cols)}, signer, signature FROM {table}"):
        values = dict(zip(cols, r[:-2], strict=True))
        # the columns' types (RECORD_COLUMNS, schema.SIGNED_TABLES), all NOT NULL
        signer, signature = cast("tuple[str, str]", r[-2:])
        dataset, at_count = cast(str, values["dataset"]), cast(int, values["at_count"])
        pub = ring.custodian_public(signer, at_count)
        if pub is None or not verified(pub, signature, table, message(ledger_id, {table: values})):
            bad.append(f"{table} of '{dataset}': not signed by a custodian key")
            continue
        if vouched is not None and not is_vouched(ring, signer, table, values, vouched):
            bad.append(f"{table} of '{dataset}': signed by a revoked key, after it")
            continue
        good[dataset] = values
    return good, bad


def is_vouched(
    ring: KeyRing, signer: str | None, table: str, values: Record, vouched: frozenset[str]
) -> bool:
    """A record signed by a key revoked since counts only if a checkpoint vouched for it."""
    return not retired(ring, signer) or record_digest(table, values) in vouched


def vouched_missing(con: Con, ledger_id: str, ring: KeyRing) -> str | None:
    """Why custodian records the latest checkpoint vouched for are gone (a budget, a family
    link or a same-data approval deleted since), or None."""
    latest = checkpoints_latest(con, ledger_id, ring)
    if latest is None or latest.problem or not latest.vouched:
        return None
    signed_head = governance.vouched_head(latest.vouched)
    if signed_head is not None and not governance.holds(con, *signed_head):
        return (
            f"the custodian's governance chain no longer holds its entry {signed_head[0]} as "
            f"checkpoint {latest.seq} signed it (entries deleted at its end, or replaced)"
        )
    gone = governance.people_gone(con, latest.vouched)
    if gone:
        return (
            f"the people sketch of dataset '{gone}', which checkpoint {latest.seq} recorded, "
            "is gone (deleted: the check of the people in a release would be open again)"
        )
    missing = {
        v for v in latest.vouched if not v.startswith(governance.MARK_PREFIXES)
    } - record_digests(con, ledger_id)
    if not missing:
        return None
    return (
        f"{len(missing)} custodian record(s) that checkpoint {latest.seq} vouched for are gone: "
        "a family link, a same-data approval or a budget was deleted or changed"
    )


def vouched_now(con: Con, ledger_id: str, ring: KeyRing) -> frozenset[str]:
    latest = checkpoints_latest(con, ledger_id, ring)
    return frozenset() if latest is None or latest.problem else latest.vouched


# -- totals and positions -------------------------------------------------------------------
#: per dataset: [epsilon, delta of entries without rho, epsilon, delta, rho of those with it,
#: number of entries with rho]
Totals = dict[str, list[float]]


def add_to(totals: Totals, dataset: str, eps: float, delta: float, rho: float | None) -> None:
    t = totals.setdefault(dataset, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    if rho is None:
        t[0] += eps
        t[1] += delta
    else:
        t[2] += eps
        t[3] += delta
        t[4] += rho
        t[5] += 1


def account_rows(totals: Totals, datasets: list[str]) -> list[tuple[float, float, float | None]]:
    """Rows for :func:`privmob.privacy.ledger.accounting.accounts` equal to ``datasets``' totals."""
    rows: list[tuple[float, float, float | None]] = []
    for d in datasets:
        t = totals.get(d)
        if t is None:
            continue
        rows.append((t[0], t[1], None))
        if t[5]:
            rows.append((t[2], t[3], t[4]))
    return rows


def totals_equal(a: Totals, b: Totals) -> bool:
    if set(a) != set(b):
        return False
    return all(
        math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
        for d in a
        for x, y in zip(a[d], b[d], strict=True)
    )


@dataclass(frozen=True)
class Position:
    """A verified point of the chain: the entry id it ends at, how many entries, its head hash,
    every dataset's totals there."""

    last_id: int
    count: int
    head_hash: str
    totals: Totals

    def values(self) -> dict[str, object]:
        """The fields by name, as signed and stored (a copy)."""
        return asdict(self)


GENESIS = Position(0, 0, "", {})


def stored_hash(con: Con, entry_id: int) -> str | None:
    row = con.execute("SELECT row_hash FROM releases WHERE id = ?", (entry_id,)).fetchone()
    return None if row is None else text(row[0])


def add_checkpoint(
    con: Con,
    ledger_id: str,
    signer: Signer,
    pos: Position,
    created: str,
    *,
    adopted: bool = False,
) -> None:
    """Sign ``pos`` and every custodian record that verifies now (``vouched``: so that a key
    retired later cannot add records that pass as older than its retirement)."""
    vouched = sorted(record_digests(con, ledger_id))
    if governance.available(con) and governance.head(con, ledger_id)[0]:
        vouched.append(governance.head_mark(con, ledger_id))  # the chain it follows
    vouched += governance.people_marks(con)  # which datasets have a people sketch
    values = {**pos.values(), "adopted": int(adopted), "vouched": vouched, "created_at": created}
    sig = signer.sign("checkpoint", message(ledger_id, {"checkpoint": values}))
    row: Record = {
        "entry_count": pos.count,
        "last_id": pos.last_id,
        "head_hash": pos.head_hash,
        "totals": json.dumps(pos.totals, sort_keys=True),
        "adopted": int(adopted),
        "vouched": json.dumps(vouched),
        "created_at": created,
        "signer": signer.key_id,
        "signature": sig,
    }
    con.execute(
        f"INSERT INTO checkpoints ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        tuple(row.values()),
    )
    governance.attest(con, ledger_id, signer, "checkpoints", row, created)


def record_digest(table: str, values: Mapping[str, object]) -> str:
    """What a checkpoint vouches for of a custodian record (a budget: its row hash)."""
    if table == "budgets":
        return str(values["row_hash"])
    return hashlib.sha256(chain.canonical({table: values}).encode()).hexdigest()


def record_digests(con: Con, ledger_id: str) -> set[str]:
    """The digests of the custodian records (budgets, links, approvals) that verify now."""
    ring = key_ring(con, ledger_id)
    out = set()
    budgets = con.execute(
        f"SELECT {', '.join(chain.BUDGET_COLUMNS)}, row_hash, signer, signature FROM budgets"
    )
    for row in row_dicts(budgets):
        if budget_row_problem(ring, ledger_id, row) is None:
            out.add(record_digest("budgets", row))
    for table in RECORD_COLUMNS:
        good, _ = records(con, ledger_id, ring, table)
        out.update(record_digest(table, v) for v in good.values())
    return out


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    position: Position
    adopted: bool
    #: why it is not trusted (None: signed by a custodian and its head is still in place)
    problem: str | None
    signer: str = ""
    vouched: frozenset[str] = frozenset()


def checkpoints(con: Con, ledger_id: str, ring: KeyRing, limit: int = -1) -> list[Checkpoint]:
    """The checkpoints (all, or the latest ``limit``), latest first, each with its verdict."""
    out = []
    rows = con.execute(
        "SELECT seq, entry_count, last_id, head_hash, totals, adopted, created_at, signer, "
        "signature, vouched FROM checkpoints ORDER BY seq DESC LIMIT ?",
        (limit if limit >= 0 else 2**62,),  # all (PostgreSQL takes no negative LIMIT)
    ).fetchall()
    # the columns' types (schema.SIGNED_TABLES), all NOT NULL
    for r in cast("Sequence[tuple[int, int, int, str, str, int, str, str, str, str]]", rows):
        try:
            totals = json.loads(r[4])
            vouched = json.loads(r[9])
        except ValueError:
            totals, vouched = {}, []
        pos = Position(int(r[2]), int(r[1]), r[3], totals)
        values = {
            **pos.values(),
            "adopted": int(r[5]),
            "vouched": vouched,
            "created_at": r[6],
        }
        pub = ring.custodian_public(r[7], pos.count)
        problem = None
        if pub is None or not verified(
            pub, r[8], "checkpoint", message(ledger_id, {"checkpoint": values})
        ):
            problem = f"checkpoint {r[0]}: not signed by a custodian key"
        elif pos.last_id and stored_hash(con, pos.last_id) != pos.head_hash:
            problem = f"checkpoint {r[0]}: entry {pos.last_id} is no longer the one it signed"
        out.append(Checkpoint(int(r[0]), pos, bool(r[5]), problem, r[7], frozenset(vouched)))
    return out


def retired(ring: KeyRing, signer: str | None) -> bool:
    k = ring.keys.get(signer or "")
    return k is not None and k.revoked_at is not None


def verify_after(
    con: Con,
    ledger_id: str,
    ring: KeyRing,
    start: Position,
    adopted_to: int = 0,
    until: int | None = None,
) -> tuple[Position, list[str]]:
    """Verify every entry after ``start`` (up to id ``until``): chain, content, signature; the
    position at the end and the problems (empty: all verify). Entries up to ``adopted_to`` (a
    migration checkpoint) may be unsigned."""
    problems: list[str] = []
    totals = {d: list(t) for d, t in start.totals.items()}
    prev = start.head_hash or chain.genesis(ledger_id)
    expected = start.last_id + 1
    count = start.count
    last_id = start.last_id
    for row in chain.entry_rows(con, start.last_id, until):
        i = as_int(row["id"])
        if i != expected or row["prev_hash"] != prev:
            problems.append(
                f"entry {i}: the previous entry's hash does not match "
                "(an entry before it was deleted, reordered or edited)"
            )
        own = chain.entry_digest(row)
        if row["row_hash"] != own:
            problems.append(f"entry {i}: its content does not match its hash (edited)")
        pub = ring.entry_public(text(row["signer"]), i)
        if i > adopted_to and (
            pub is None
            or not verified(pub, text(row["signature"]), "entry", entry_message(ledger_id, own))
        ):
            problems.append(
                f"entry {i}: not signed by a key the custodian registered (forged or edited)"
            )
        invalid = spend_problem(row)
        if invalid:  # reported, never summed: a negative cost would refill the budget
            problems.append(invalid)
        else:
            # a valid spend: numbers, rho also None
            spend = cast(
                "tuple[float, float, float | None]", (row["epsilon"], row["delta"], row["rho"])
            )
            add_to(totals, str(row["dataset"]), float(spend[0]), float(spend[1]), spend[2])
        prev = text(row["row_hash"]) or own
        expected = i + 1
        count += 1
        last_id = i
    return Position(last_id, count, prev if last_id else "", totals), problems


def start_of_charge(con: Con, ledger_id: str, ring: KeyRing, signer: Signer) -> Position:
    """The verified position a charge starts from (see the module's text), then every entry
    after it verified: the position at the head. Raises :class:`Untrusted`."""
    if ring.root is None:
        raise Untrusted(
            "it is not signed (a ledger made before signed ledgers, or one whose keys were "
            "removed); its custodian checks it and signs it once with privmob ledger adopt"
        )
    if ring.problems:
        raise Untrusted(ring.problems[0])
    gone = vouched_missing(con, ledger_id, ring)
    if gone:
        raise Untrusted(gone)
    start = GENESIS
    latest = checkpoints_latest(con, ledger_id, ring)
    if latest is not None:
        if latest.problem:
            raise Untrusted(latest.problem)
        if retired(ring, latest.signer):
            raise Untrusted(
                f"its latest checkpoint ({latest.seq}) is signed by a revoked key; the "
                "custodian signs a new one (privmob ledger checkpoint)"
            )
        start = latest.position
    cached = cached_position(ledger_id, signer)
    if cached is not None:
        witness = behind(con, ring, *cached)
        if witness:
            raise Untrusted(witness)
        # a shortcut only where the custodian's checkpoint is far behind
        if cached[0].last_id > start.last_id + CHECKPOINT_EVERY:
            start = cached[0]
    head, problems = verify_after(con, ledger_id, ring, start)
    if problems:
        raise Untrusted(problems[0])
    return head


def all_problems(con: Con, ledger_id: str, head_count: int, head_hash: str) -> list[str]:
    """Everything that does not verify, as sentences: keys, every entry from the first (chain,
    content, signature), the recorded head, every checkpoint (signature, head, totals), budgets,
    family links and approvals. Needs public keys only."""
    ring = key_ring(con, ledger_id, fast=False)  # every signature of the chain
    if ring.root is None:
        return [
            *ring.problems,
            *chain.problems(con, ledger_id, head_count, head_hash),
            "the ledger is not signed (made before signed ledgers, or its keys were removed): "
            "nothing in it can be trusted until its custodian checks it and signs it once with "
            "privmob ledger adopt",
        ]
    found = list(ring.problems)
    cps = sorted(checkpoints(con, ledger_id, ring), key=lambda c: (c.position.last_id, c.seq))
    found += [c.problem for c in cps if c.problem]
    adopted_to = max((c.position.last_id for c in cps if c.adopted and not c.problem), default=0)
    pos = GENESIS
    for c in cps:
        if c.problem:
            continue
        if c.position.last_id > pos.last_id:
            pos, problems = verify_after(con, ledger_id, ring, pos, adopted_to, c.position.last_id)
            found += problems
        if (pos.count, pos.head_hash) != (c.position.count, c.position.head_hash) or not (
            totals_equal(pos.totals, c.position.totals)
        ):
            found.append(
                f"checkpoint {c.seq}: the entries up to {c.position.last_id} no longer "
                "add up to what it signed"
            )
    pos, problems = verify_after(con, ledger_id, ring, pos, adopted_to)
    found += problems
    if pos.count != head_count or pos.head_hash != head_hash:
        found.append(
            f"the ledger holds {pos.count} entries but recorded {head_count} "
            "(entries were deleted at the end, or the ledger was truncated or replaced)"
        )
    budgets = row_dicts(
        con.execute(
            f"SELECT {', '.join(chain.BUDGET_COLUMNS)}, row_hash, signer, signature FROM budgets"
        )
    )
    vouched = vouched_now(con, ledger_id, ring)
    for row in budgets:
        problem = budget_row_problem(ring, ledger_id, row)
        if problem is None and not is_vouched(ring, text(row["signer"]), "budgets", row, vouched):
            problem = f"budget of '{row['dataset']!s}': signed by a revoked key, after it"
        if problem:
            found.append(problem)
    for table in RECORD_COLUMNS:
        found += records(con, ledger_id, ring, table, vouched)[1]
    gone = vouched_missing(con, ledger_id, ring)
    if gone:
        found.append(gone)
    found += governance.replaced_people(con)
    return found


def behind(con: Con, ring: KeyRing, pos: Position, root: str) -> str | None:
    """Why the ledger is behind a position this user verified before (None: it is not)."""
    if root != ring.root:
        return (
            f"its custodian key is not the one your key verified before ({root[:12]}...): the "
            "ledger was replaced or re-signed"
        )
    if pos.last_id and stored_hash(con, pos.last_id) != pos.head_hash:
        return (
            f"it no longer holds entry {pos.last_id} as your key verified it: entries were "
            "deleted at the end, or an older copy of the ledger was put back"
        )
    return None


def checkpoints_latest(con: Con, ledger_id: str, ring: KeyRing) -> Checkpoint | None:
    found = checkpoints(con, ledger_id, ring, limit=1)
    return found[0] if found else None


# -- this user's position cache ---------------------------------------------------------------
def _cache_path(ledger_id: str, signer: Signer) -> Path:
    return keys_dir() / "verified" / f"{ledger_id}-{signer.key_id[:16]}.json"


def cached_position(ledger_id: str, signer: Signer) -> tuple[Position, str] | None:
    """This key's last verified position of this ledger and the ledger's root key then."""
    if signer.path is None:
        return None  # a key from the environment or an ephemeral one keeps no cache
    try:
        data = json.loads(_cache_path(ledger_id, signer).read_text())
        body = data["body"]
        if not verified(signer.public_hex, data["signature"], "position", message(ledger_id, body)):
            return None
        p = body["position"]
        return Position(p["last_id"], p["count"], p["head_hash"], p["totals"]), body["root"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cache_position(ledger_id: str, signer: Signer, pos: Position, root: str) -> None:
    if signer.path is None:
        return
    target = _cache_path(ledger_id, signer)
    body = {"position": pos.values(), "root": root}
    data = {"body": body, "signature": signer.sign("position", message(ledger_id, body))}
    try:
        keys_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
        target.parent.mkdir(exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".pos-", dir=target.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, target)
    except OSError:
        pass  # a shortcut only: the next charge verifies from the last checkpoint
