"""Who is in a dataset, for binding a budget to people rather than to bytes (issue 27).

A content fingerprint binds a budget to one exact input; an edit as small as a one-second shift
gives another fingerprint. The people a budget protects are the same in every such edit, so the
ledger also keeps, per dataset, a :class:`PeopleSketch`: a bottom-k sketch of keyed hashes of
the dataset's distinct user ids. A release under a new dataset name whose users overlap an
existing dataset's beyond :data:`OVERLAP_THRESHOLD` is refused (unless the two datasets share a
budget or the custodian approved it), see :func:`privmob.privacy.ledger.checks.refuse_known_people`.

What it is:

* each distinct user id's canonical text ``u`` (as in the content fingerprint,
  :func:`privmob.data.fingerprint.identity_text`: an integral number is its integer's text
  whatever the column's type, so the ids ``7``, ``7.0`` and ``"7.0"`` are one person, and the
  same events with int64 or float64 ids have one sketch) is hashed with a
  secret ``key`` of this ledger (:func:`people_key`) as ``SHA-256(k2 || hex(SHA-256(k1 || u)))``
  (``k1``, ``k2``: the key's halves, in hex; a nested keyed hash, so neither length extension nor
  a dictionary of ids helps anyone without the key), and the first 64 bits are kept;
* the sketch is the :data:`SKETCH_SIZE` smallest of those values (all of them for a smaller
  dataset): a uniform random sample of the users, chosen by the key;
* :meth:`PeopleSketch.overlap` estimates the share of the *smaller* dataset's users who are also
  in the other one (so a subset of a dataset's users is caught too).

Error (``k`` = :data:`SKETCH_SIZE` = 4096, threshold 0.5): the estimate is a share among the
``n`` sampled users of both sketches below their common cut-off (``n`` is about ``k`` for two
datasets of similar size, ``k x smaller/larger`` otherwise), binomial with standard error
``sqrt(c(1-c)/n)``: 0.0078 at ``c = 0.5`` for ``n = 4096``. For datasets of similar size a true
overlap of 0.4 is refused (false refusal) with probability below 1e-30 and one of 0.6 accepted
(false accept) below 1e-30; of 0.45 / 0.55: below 1e-10. Ten times smaller (``n`` ~ 410): a true
0.4 or 0.6 is misjudged with probability ~ 3e-5; a hundred times smaller (``n`` ~ 41): ~ 0.1.
A true subset (or a copy) always has an estimate of 1 (every sampled user of the smaller
dataset is in the larger one's sketch), however unequal the sizes; the five edits of issue 27
(another input time zone, renumbered trips, times shifted, a row added or dropped, a copy)
keep the overlap at or near 1. Hash collisions of two different ids among 2^64 values are
negligible (~ n^2 / 2^65).

What it is not: a relabelling of the pseudonyms (a new id per user) gives disjoint hashes and is
not detected: no content check can tell relabelled data from other people's. Datasets known to
hold the same people under rotating pseudonyms are linked by the custodian into one budget (a
dataset family). The sketch never leaves the ledger: no release, metadata.json or message holds
it, a user id or a hash; a refusal names the other dataset and the threshold only.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

#: k: how many keyed hashes a sketch keeps (32 KiB per dataset in the ledger)
SKETCH_SIZE = 4096

#: refuse a release under another dataset name when at least this share of the smaller
#: dataset's users is estimated to be in the other one
OVERLAP_THRESHOLD = 0.5

#: the hex digits of the keyed hash kept per user (64 bits)
HASH_DIGITS = 16

_MAGIC = b"PMPS1"
_HEADER = struct.Struct(">5sI")  # magic, k


@dataclass(frozen=True)
class PeopleSketch:
    """The bottom-k sketch of a dataset's keyed user hashes (sorted, distinct, at most ``k``)."""

    hashes: tuple[int, ...]
    k: int = SKETCH_SIZE

    @classmethod
    def of(cls, hashes: Iterable[int], k: int = SKETCH_SIZE) -> PeopleSketch:
        """The sketch of these keyed hashes (any order, repeats allowed)."""
        return cls(tuple(sorted(set(hashes))[:k]), k)

    @classmethod
    def of_hex(cls, digits: Iterable[str], k: int = SKETCH_SIZE) -> PeopleSketch:
        """The sketch of keyed hashes given as hex digits (what the engines compute)."""
        return cls.of((int(d, 16) for d in digits), k)

    @property
    def full(self) -> bool:
        """True when the dataset has more users than the sketch keeps (a sample, not all)."""
        return len(self.hashes) >= self.k

    def merge(self, other: PeopleSketch) -> PeopleSketch:
        """The sketch of the union of both datasets' users."""
        return PeopleSketch.of(self.hashes + other.hashes, min(self.k, other.k))

    def overlap(self, other: PeopleSketch) -> float:
        """Estimated share of the smaller dataset's users who are in the other one, in [0, 1].

        Below the common cut-off (the smaller of the two sketches' largest kept hash, for a
        full sketch), both sketches hold *every* user of their dataset, so the users there are
        a uniform sample of the union and the share is counted on them."""
        if not self.hashes or not other.hashes:
            return 0.0
        inf = 1 << 64
        cut = min(self.hashes[-1] if self.full else inf, other.hashes[-1] if other.full else inf)
        mine = {h for h in self.hashes if h <= cut}
        theirs = {h for h in other.hashes if h <= cut}
        smaller = min(len(mine), len(theirs))
        return len(mine & theirs) / smaller if smaller else 0.0

    def to_bytes(self) -> bytes:
        body = b"".join(h.to_bytes(8, "big") for h in self.hashes)
        return _HEADER.pack(_MAGIC, self.k) + body

    @classmethod
    def from_bytes(cls, data: bytes) -> PeopleSketch:
        magic, k = _HEADER.unpack_from(data)
        body = data[_HEADER.size :]
        if magic != _MAGIC or len(body) % 8:
            raise ValueError("not a people sketch")
        return cls.of((int.from_bytes(body[i : i + 8], "big") for i in range(0, len(body), 8)), k)

    def __repr__(self) -> str:  # never the hashes
        return f"PeopleSketch({len(self.hashes)} of k={self.k})"


def key_halves(key: bytes) -> tuple[str, str]:
    """The two halves of a people key as hex text (``k1``, ``k2`` of the keyed hash)."""
    return key[: len(key) // 2].hex(), key[len(key) // 2 :].hex()


def keyed_hash(key: bytes, uid: str) -> int:
    """The reference of one user's keyed hash (what the engines compute in SQL):
    the first 64 bits of ``SHA-256(k2 || hex(SHA-256(k1 || uid)))``; ``uid`` is the id's
    canonical text (:func:`privmob.data.fingerprint.canonical_id`)."""
    k1, k2 = key_halves(key)
    inner = hashlib.sha256((k1 + uid).encode()).hexdigest()
    return int(hashlib.sha256((k2 + inner).encode()).hexdigest()[:HASH_DIGITS], 16)


class HoldsPeopleKey(Protocol):
    """A ledger (:class:`~privmob.privacy.ledger.Ledger`): it keeps its people sketches' secret."""

    def people_key(self) -> bytes: ...


def people_key(ledger: HoldsPeopleKey) -> bytes:
    """The secret of ``ledger``'s people sketches (32 bytes): the ledger's own, held by its
    custodian and never stored in the ledger (``Ledger.people_key``). Everyone who releases from
    one ledger holds the same secret, so that the sketches compare."""
    return ledger.people_key()
