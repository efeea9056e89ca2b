"""The heads of ledgers this OS user has witnessed, kept outside every ledger (issue 39).

A ledger file can be rolled back by whoever can write it: an older copy put back, or its last
entries deleted and the head set by hand, is a ledger whose chain verifies on its own. Only a
head seen before, kept where the writer of the ledger cannot reach it, tells. Each OS user keeps
one witness per ledger id in their private data directory
(``$XDG_DATA_HOME/privmob/witness/<ledger id>.json``, beside their keys; mode 0600 in a 0700
folder), holding:

* the ledger's **root** (custodian) key id, pinned at first contact: a ledger re-signed with
  another root, or emptied of its keys and adopted by another key, is not the ledger witnessed;
* the latest **head** witnessed (entry count, last entry id, its hash): a ledger that no longer
  holds that entry is *behind* (rolled back, truncated); one that holds another entry there
  is *forked* (its history after the head was rewritten);
* the **locations** (file paths, database URLs without a password) it was seen at: another
  ledger found at one of them was deleted and re-created, or replaced.
* the latest **checkpoint** seen (number and signature): deleting it, with a custodian record
  it vouched for (a family link, an approval), is seen.

Every charge, ``ledger verify`` and ``ledger checkpoint`` compare the ledger with this user's
witness (:func:`disagreement`) and refuse one that disagrees; each records the head it verified
(:func:`record`). A witness only sees what it saw: a rollback to before the last head this user
witnessed, by anyone, is caught on this user's next comparison; what happened between two
looks of one witness is caught only through another witness (another user, a release's head).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from privmob.privacy.ledger.keys import keys_dir
from privmob.privacy.ledger.rows import Con, as_int
from privmob.privacy.ledger.trust import stored_hash


@dataclass(frozen=True)
class Head:
    """A head of a ledger's chain: how many entries, the last one's id and hash."""

    count: int
    last_id: int
    hash: str


@dataclass(frozen=True)
class Witness:
    """What this OS user witnessed of one ledger."""

    ledger_id: str
    root: str | None
    head: Head
    locations: tuple[str, ...]
    #: the latest checkpoint seen (its number and signature): deleting it, to hide a custodian
    #: record it vouched for, is seen
    checkpoint: tuple[int, str] | None = None


#: the head of a new ledger (no entry yet)
GENESIS = Head(0, 0, "")


class WitnessUnreadable(Exception):
    """A witness file that cannot be read (a sentence)."""


def witness_dir() -> Path:
    """``$XDG_DATA_HOME/privmob/witness`` (beside the user's keys)."""
    return keys_dir().parent / "witness"


def witness_file(ledger_id: str) -> Path:
    return witness_dir() / f"{ledger_id}.json"


def load(ledger_id: str) -> Witness | None:
    """This user's witness of ``ledger_id`` (None: never seen). Raises
    :class:`WitnessUnreadable` for a file that is there but cannot be read."""
    return _read(witness_file(ledger_id))


def _read(path: Path) -> Witness | None:
    try:
        data = json.loads(path.read_text())
        head = data["head"]
        cp = data.get("checkpoint")
        return Witness(
            str(data["ledger_id"]),
            data.get("root"),
            Head(int(head["count"]), int(head["last_id"]), str(head["hash"])),
            tuple(str(x) for x in data.get("locations", [])),
            None if cp is None else (int(cp[0]), str(cp[1])),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WitnessUnreadable(
            f"your witness of this ledger ({path}) cannot be read ({exc}): it is not compared"
        ) from None


def others_at(location: str, ledger_id: str) -> list[Witness]:
    """Witnesses of other ledgers seen at ``location``."""
    found: list[Witness] = []
    folder = witness_dir()
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        if path.stem == ledger_id:
            continue
        with contextlib.suppress(WitnessUnreadable):
            w = _read(path)
            if w is not None and location in w.locations:
                found.append(w)
    return found


def disagreement(con: Con, ledger_id: str, root: str | None, location: str) -> str | None:
    """Why the ledger open on ``con`` is not the one this user witnessed (one sentence), or
    None when it agrees (or was never witnessed)."""
    for other in others_at(location, ledger_id):
        return (
            f"{location} held ledger {other.ledger_id} when you last verified or charged it "
            f"({other.head.count} entries); it now holds ledger {ledger_id}: the ledger was "
            "deleted and re-created, or replaced"
        )
    try:
        seen = load(ledger_id)
    except WitnessUnreadable as exc:
        return str(exc)
    if seen is None:
        return None
    if seen.root is not None and root != seen.root:
        return (
            f"its custodian (root) key is {str(root)[:12]}..., not {seen.root[:12]}... as you "
            "first saw it: the ledger was re-signed, replaced or adopted by another key"
        )
    if seen.head.last_id:
        now = stored_hash(con, seen.head.last_id)
        if now is None:
            return (
                f"it is behind the head you witnessed ({seen.head.count} entries, the last "
                f"{seen.head.last_id}), which it no longer holds: entries were deleted at the "
                "end, or an older copy of the ledger was put back"
            )
        if now != seen.head.hash:
            return (
                f"its entry {seen.head.last_id} is not the one you witnessed as its head "
                f"({seen.head.count} entries): its history was rewritten (forked)"
            )
    if seen.checkpoint is not None:
        row = con.execute(
            "SELECT signature FROM checkpoints WHERE seq = ?", (seen.checkpoint[0],)
        ).fetchone()
        if row is None or row[0] != seen.checkpoint[1]:
            return (
                f"its checkpoint {seen.checkpoint[0]}, which you witnessed, is gone or replaced "
                "(custodian records it vouched for may have been deleted with it)"
            )
    return None


def latest_checkpoint(con: Con) -> tuple[int, str] | None:
    """The ledger's latest checkpoint (number, signature), to witness."""
    row = con.execute("SELECT seq, signature FROM checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else (as_int(row[0]), str(row[1]))


def current(con: Con) -> Head:
    """The head the ledger on ``con`` records (after a verification that found it whole)."""
    row = con.execute("SELECT value FROM ledger_meta WHERE key = 'head_count'").fetchone()
    last = con.execute("SELECT id, row_hash FROM releases ORDER BY id DESC LIMIT 1").fetchone()
    if last is None:
        return GENESIS
    return Head(as_int(row[0]) if row else 0, as_int(last[0]), str(last[1] or ""))


def record(
    ledger_id: str,
    root: str | None,
    head: Head,
    location: str,
    checkpoint: tuple[int, str] | None = None,
) -> None:
    """Keep ``head`` (when it is later than the one witnessed), pin ``root`` at first contact
    and add ``location``. Best effort: a witness that cannot be written weakens only this
    user's next comparison, never a charge already made."""
    with contextlib.suppress(OSError), _locked(ledger_id):
        try:
            seen = load(ledger_id)
        except WitnessUnreadable:
            seen = None
        if seen is not None and seen.head.count > head.count:
            head = seen.head
        pinned = seen.root if seen is not None and seen.root else root
        kept = None if seen is None else seen.checkpoint
        if kept is not None and (checkpoint is None or kept[0] > checkpoint[0]):
            checkpoint = kept
        locations = sorted({*(seen.locations if seen else ()), location})
        data: WitnessFile = {
            "ledger_id": ledger_id,
            "root": pinned,
            "head": {"count": head.count, "last_id": head.last_id, "hash": head.hash},
            "locations": locations,
            "checkpoint": None if checkpoint is None else list(checkpoint),
        }
        if seen is not None and _same(seen, data):
            return
        fd, tmp = tempfile.mkstemp(prefix=".witness-", dir=witness_dir())  # mode 0600
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, witness_file(ledger_id))


def forget_location_hint(location: str) -> str:
    """What a user does when a ledger they witnessed was removed on purpose."""
    return (
        f"if the ledger that was at {location} is gone for good (not restored, not replaced), "
        f"remove your witness of it from {witness_dir()}; otherwise ask its custodian"
    )


class WitnessHead(TypedDict):
    count: int
    last_id: int
    hash: str


class WitnessFile(TypedDict):
    """What a witness file holds (JSON)."""

    ledger_id: str
    root: str | None
    head: WitnessHead
    locations: list[str]
    checkpoint: list[int | str] | None


def _same(seen: Witness, data: WitnessFile) -> bool:
    h = data["head"]
    return (
        seen.root == data["root"]
        and (seen.head.count, seen.head.last_id, seen.head.hash)
        == (h["count"], h["last_id"], h["hash"])
        and list(seen.locations) == data["locations"]
        and (None if seen.checkpoint is None else list(seen.checkpoint)) == data["checkpoint"]
    )


@contextlib.contextmanager
def _locked(ledger_id: str) -> Iterator[None]:
    """An exclusive lock on this ledger's witness (racing charges of one user keep the
    latest head)."""
    folder = witness_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): the later writer wins
        yield
        return
    fd = os.open(folder / f".{ledger_id}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
