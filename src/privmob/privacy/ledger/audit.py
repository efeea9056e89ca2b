"""Reading a privacy ledger for an audit: its entries, its head, the full verification (public
keys only) and the check of release folders against it (their entries and the ledger head their
``metadata.json`` carries). :class:`Audit` is a part of :class:`privmob.privacy.ledger.Ledger`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypedDict, cast

from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger import schema as schema
from privmob.privacy.ledger import trust as trust
from privmob.privacy.ledger import witness as witness
from privmob.privacy.ledger.entries import (
    Entry,
    head_commitment,
    head_signature_problem,
    provenance_dict,
    release_params,
)
from privmob.privacy.ledger.keys import Signer
from privmob.privacy.ledger.rows import Con, Parameters, SQLValue, text

if TYPE_CHECKING:
    from privmob.json_types import JSONObject


#: a row of :meth:`Audit.entries`' query: the entry's columns, its provenance
#: (:data:`~privmob.privacy.ledger.chain.PROVENANCE`) and its hash
EntryRow: TypeAlias = """tuple[
    int, str, str, str, float, float, float | None, str, float, float, str, int | None, int,
    str | None, str | None, *tuple[SQLValue, ...], str | None
]"""


class ReleaseHead(TypedDict, total=False):
    """The ledger head a release's ``metadata.json`` states
    (:func:`~privmob.privacy.ledger.entries.signed_head`)."""

    count: int
    hash: str
    root: str | None


class Audit:
    """What an auditor reads of a ledger."""

    path: Path | str  # the file, or a PostgreSQL URL without its password
    location: str  # as witnesses know it (privacy/ledger/witness.py)
    witnessed: bool  # False: a throw-away ledger, which no witness keeps
    ledger_id: str

    def _connect(self) -> AbstractContextManager[Con]:
        raise NotImplementedError

    def _signer(self) -> Signer | None:
        raise NotImplementedError

    def head(self) -> JSONObject:
        """The ledger's head now: entry count, the commitment a release publishes, root key."""
        with self._connect() as con:
            meta = schema.read_meta(con)
            root = trust.key_ring(con, self.ledger_id).root
        h = meta.get("head_hash", "")
        return {
            "count": int(meta.get("head_count", "0")),
            "hash": head_commitment(h) if h else "",
            "root": root,
        }

    def verify_release(self, metadata: Mapping[str, object], name: str = "release") -> list[str]:
        """Check that a release's ``metadata.json`` (its ``ledger`` block) was paid from this
        ledger and that its entries are still here: a deleted or replaced ledger file, or one
        rebuilt without those entries, shows here. Returns the problems found."""
        block = metadata.get("ledger")
        if not isinstance(block, dict) or "id" not in block:
            return [f"{name}: its metadata names no ledger (made before ledgers had an id?)"]
        if block["id"] != self.ledger_id:
            return [
                f"{name}: paid from ledger {block['id']}, but this ledger is {self.ledger_id} "
                "(the ledger it was charged to was deleted or replaced, or is another file)"
            ]
        ids = {e.id for e in self.entries()}
        missing = [i for i in block.get("entry_ids", []) if i not in ids]
        if missing:
            return [f"{name}: its ledger entries {missing} are missing from this ledger"]
        head = block.get("head")
        if isinstance(head, dict) and "count" in head:
            signature = block.get("head_signature")
            # as metadata.json states them (checked against this ledger below)
            return self._check_head(
                cast(ReleaseHead, head),
                name,
                signature if isinstance(signature, dict) else None,
            )
        return []

    def _check_head(
        self, head: ReleaseHead, name: str, signature: Mapping[str, str] | None = None
    ) -> list[str]:
        """A release's head (count, commitment, root key) against this ledger."""
        with self._connect() as con:
            count = int(schema.read_meta(con).get("head_count", "0"))
            row = con.execute(
                "SELECT row_hash FROM releases ORDER BY id LIMIT 1 OFFSET ?",
                (int(head["count"]) - 1,),
            ).fetchone()
            ring = trust.key_ring(con, self.ledger_id)
            root = ring.root
        if int(head["count"]) > count:
            return [
                f"{name}: the ledger held {head['count']} entries after its charge, this one "
                f"holds {count}: entries were deleted at the end (or an older copy was put back)"
            ]
        if row is None or head_commitment(text(row[0]) or "") != head.get("hash"):
            return [
                f"{name}: the ledger's entry {head['count']} is not the one it was charged "
                "after (entries were deleted, replaced or re-chained)"
            ]
        claimed_root = head.get("root")
        if claimed_root and claimed_root != root:
            return [
                f"{name}: it was charged to a ledger whose custodian key was "
                f"{claimed_root[:12]}..., this ledger's is {str(root)[:12]}... (re-signed)"
            ]
        if signature is None:  # (a release that carries no signed head)
            return []
        forged = head_signature_problem(ring, self.ledger_id, head, signature)
        return [f"{name}: {forged}"] if forged else []

    def verify(self) -> list[str]:
        """Check everything: keys, the hash chain and every entry's signature, the recorded
        head, checkpoints, budgets, family links and approvals, and that the ledger agrees with
        the heads and root this OS user witnessed (:mod:`privmob.privacy.ledger.witness`);
        return the problems found (empty when the ledger verifies, and then its head is
        witnessed). Needs no private key."""
        from privmob.privacy.ledger.custody import all_problems

        with self._connect() as con:
            found = all_problems(con, self.ledger_id)
            ring = trust.key_ring(con, self.ledger_id)
            seen = witness.disagreement(con, self.ledger_id, ring.root, self.location)
            if seen:
                found.append(seen)
            signer = self._signer()
            cached = None if signer is None else trust.cached_position(self.ledger_id, signer)
            if cached is not None:  # this key's own position (a shortcut of its charges)
                behind = trust.behind(con, ring, *cached)
                if behind and not seen:
                    found.append(behind)
            if not found and self.witnessed:
                witness.record(
                    self.ledger_id,
                    ring.root,
                    witness.current(con),
                    self.location,
                    witness.latest_checkpoint(con),
                )
            return found

    def entries(self, dataset: str | None = None) -> list[Entry]:
        sql = (
            "SELECT id, dataset, created_at, kind, epsilon, delta, rho, unit, release_epsilon,"
            " release_delta, release_unit, group_size, for_publication, description, params, "
            + ", ".join(chain.PROVENANCE)
            + ", row_hash FROM releases"
        )
        args: Parameters = ()
        if dataset is not None:
            sql += " WHERE dataset = ?"
            args = (dataset,)
        with self._connect() as con:
            # the columns as the schema declares them; the provenance columns as stored
            rows = cast("Sequence[EntryRow]", con.execute(sql + " ORDER BY id", args).fetchall())
        return [
            Entry(
                r[0],
                r[1],
                r[2],
                r[3],
                Cost(r[4], r[5], r[6], Unit(r[7])),
                Cost(r[8], r[9], None, Unit(r[10])),
                r[11],
                bool(r[12]),
                r[13] or "",
                *release_params(
                    json.loads(r[14] or "{}"),
                    provenance_dict(dict(zip(chain.PROVENANCE, r[15:-1], strict=True))),
                ),
                r[-1] or "",
            )
            for r in rows
        ]
