"""What the privacy ledger records: a dataset's :class:`Budget`, one :class:`Entry` per charged
part of a release (its cost in the budget's unit and as the release states it, its parameters
and provenance: input fingerprint and rows, output folder and file hashes, OS user and host),
and what a dataset has :class:`Spent`; and how the entries of a charge are written, each
hash-chained to the one before (:mod:`privmob.privacy.ledger.chain`).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypedDict, cast

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger.governance import PEOPLE_PARAM
from privmob.privacy.ledger.keys import Signer, verified
from privmob.privacy.ledger.rows import Con, Record
from privmob.privacy.ledger.spends import spend_problem
from privmob.privacy.ledger.trust import (
    ANALYST,
    CUSTODIAN,
    KeyRing,
    Position,
    entry_message,
    message,
)

if TYPE_CHECKING:
    from privmob.json_types import JSONObject
    from privmob.privacy.ledger.store import Store


class EntryProvenance(TypedDict, total=False):
    """An entry's provenance as read back (:func:`provenance_dict`): its columns
    (:data:`privmob.privacy.ledger.chain.PROVENANCE`), and the digest of the people sketch its
    charge merged (:data:`~privmob.privacy.ledger.governance.PEOPLE_PARAM`)."""

    input_fingerprint: str | None
    input_rows: int | None
    output_dir: str | None
    output_hashes: dict[str, str] | None
    os_user: str | None
    host: str | None
    new_dataset_for_same_data: bool
    people_sketch: str


@dataclass(frozen=True)
class Budget:
    dataset: str
    epsilon: float
    delta: float
    unit: Unit
    created_at: str

    @classmethod
    def of(cls, row: BudgetRow) -> Budget:
        """The budget of a row of ``budgets`` (its :data:`BUDGET_FIELDS`)."""
        return cls(row[0], row[1], row[2], Unit(row[3]), row[4])


#: the columns of ``budgets`` that make a :class:`Budget`, and their types (all NOT NULL)
BUDGET_FIELDS = ("dataset", "epsilon", "delta", "unit", "created_at")
BudgetRow: TypeAlias = tuple[str, float, float, str, str]


@dataclass(frozen=True)
class Entry:
    """One charged release."""

    id: int
    dataset: str
    created_at: str
    kind: str
    cost: Cost  # in the budget's unit
    release_cost: Cost  # as the release states it
    group_size: int | None
    for_publication: bool
    description: str
    params: Mapping[str, object]
    provenance: EntryProvenance = field(default_factory=EntryProvenance)
    row_hash: str = ""
    #: the ledger head after the charge that wrote this entry (its last entry only): entry
    #: count, a one-way commitment to the head hash, the ledger's root key id; a release's
    #: metadata.json carries it so that an auditor sees entries deleted after it
    head: JSONObject = field(default_factory=dict)
    #: the signature of :attr:`head` by the key that charged (``signer``, ``signature``)
    head_signature: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        """What a release's metadata.json shows of its entry. Never the input's fingerprint,
        row count or the entry's hash (which covers them): a published hash of the data lets
        whoever knows all records but one test each candidate for the last one."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "created_at": self.created_at,
            "kind": self.kind,
            "cost": self.cost.to_dict(),
            "release_cost": self.release_cost.to_dict(),
            "group_size": self.group_size,
            "for_publication": self.for_publication,
            "description": self.description,
        }


@dataclass(frozen=True)
class Spent:
    epsilon: float
    delta: float


def entry_provenance(
    input_fingerprint: str | None,
    input_rows: int | None,
    output_dir: str | os.PathLike[str] | None,
    output_hashes: dict[str, str] | None,
    new_dataset_for_same_data: bool,
) -> Record:
    """The provenance columns of an entry (:data:`privmob.privacy.ledger.chain.PROVENANCE`)."""
    import socket  # here, when a release is charged: not before its plan line (issue 43)

    return {
        "input_fingerprint": input_fingerprint,
        "input_rows": None if input_rows is None else int(input_rows),
        "output_dir": None if output_dir is None else str(Path(output_dir).absolute()),
        "output_hashes": (
            None if output_hashes is None else json.dumps(output_hashes, sort_keys=True)
        ),
        "os_user": _os_user(),
        "host": socket.gethostname(),
        "new_dataset_for_same_data": int(bool(new_dataset_for_same_data)),
    }


def insert_entries(
    store: Store,
    con: Con,
    prev: str,
    dataset: str,
    kind: str,
    parts: list[tuple[str, Cost]],
    charged: list[Cost],
    *,
    group_size: int | None,
    for_publication: bool,
    params: Mapping[str, object] | None,
    provenance: Record,
    created: str,
    signer: Signer,
    ledger_id: str,
) -> list[Entry]:
    """Insert one entry per part, each chained to the one before (``prev``: the head's hash)
    and signed by ``signer``; ``charged``: each part's cost in the budget's unit; ``created``:
    the entries' time."""
    entries = []
    rows: list[Record] = []
    entry_id = store.next_id(con)
    for (description, cost), ch in zip(parts, charged, strict=True):
        values: Record = {
            "dataset": dataset,
            "created_at": created,
            "kind": kind,
            # as the store keeps them (REAL / double precision, INTEGER): the hash must be of
            # what is read back (an epsilon given as the integer 1 is hashed as 1.0)
            "epsilon": float(ch.epsilon),
            "delta": float(ch.delta),
            "rho": None if ch.rho is None else float(ch.rho),
            "unit": ch.unit.value,
            "release_epsilon": float(cost.epsilon),
            "release_delta": float(cost.delta),
            "release_unit": cost.unit.value,
            "group_size": None if group_size is None else int(group_size),
            "for_publication": int(for_publication),
            "description": description,
            "params": json.dumps(params or {}, default=str),
            **provenance,
            "nonce": secrets.token_hex(16),
        }
        invalid = spend_problem({"id": entry_id, **values})
        if invalid:  # Cost refuses these; an entry is never signed with one all the same
            raise BudgetError(f"refused: {invalid}; nothing was charged")
        own = chain.digest(prev, chain.hashed({"id": entry_id, **values}))
        signature = signer.sign("entry", entry_message(ledger_id, own))
        rows.append(
            {
                "id": entry_id,
                **values,
                "prev_hash": prev,
                "row_hash": own,
                "signer": signer.key_id,
                "signature": signature,
            }
        )
        prev = own
        entries.append(
            Entry(
                entry_id,
                dataset,
                created,
                kind,
                ch,
                cost,
                group_size,
                for_publication,
                description,
                *release_params(params or {}, provenance_dict(provenance)),
                own,
            )
        )
        entry_id += 1
    store.charge_entries(con, dataset, rows)
    return entries


def head_commitment(row_hash: str) -> str:
    """What a release publishes of the ledger head: a one-way hash of the head entry's hash,
    which covers a random nonce, so it cannot be used to test guesses of the input."""
    return hashlib.sha256(("privmob-release-head\n" + row_hash).encode()).hexdigest()


def signed_head(
    signer: Signer, ledger_id: str, end: Position, root: str | None
) -> tuple[JSONObject, dict[str, str]]:
    """The head a charge returns: entry count, the head's commitment (:func:`head_commitment`),
    the ledger's root key id (a release's metadata.json carries it), and its signature by the
    key that charged (:attr:`Entry.head_signature`), so that whoever keeps it can show a ledger
    behind it or forked from it, and nobody forges one for a ledger they rewound."""
    head: JSONObject = {"count": end.count, "hash": head_commitment(end.head_hash), "root": root}
    signature = signer.sign("head", message(ledger_id, {"head": head}))
    return head, {"signer": signer.key_id, "signature": signature}


def head_signature_problem(
    ring: KeyRing, ledger_id: str, head: Mapping[str, object], signature: Mapping[str, str]
) -> str | None:
    """Why ``signature`` is not the signature of ``head`` by a key that could charge this ledger
    (None: it is)."""
    body = {k: head.get(k) for k in ("count", "hash", "root")}
    k = ring.keys.get(str(signature.get("signer")))
    if (
        k is None
        or k.role not in (CUSTODIAN, ANALYST)
        or not verified(
            k.public, signature.get("signature"), "head", message(ledger_id, {"head": body})
        )
    ):
        return "its ledger head is not signed by a key of this ledger (forged or edited)"
    return None


def release_params(
    stored: Mapping[str, object], provenance: EntryProvenance
) -> tuple[Mapping[str, object], EntryProvenance]:
    """An entry's ``params`` as its release gave them, and its provenance with what the ledger
    added to the signed params: the digest of the people sketch the charge merged (the binding
    of the ledger's own records, data-dependent as the input's fingerprint is, not a parameter
    of the release)."""
    if PEOPLE_PARAM not in stored:
        return stored, provenance
    params = {k: v for k, v in stored.items() if k != PEOPLE_PARAM}
    return params, {**provenance, "people_sketch": str(stored[PEOPLE_PARAM])}


def provenance_dict(values: Record) -> EntryProvenance:
    """An entry's provenance as stored, read back: the output hashes as a dict, the flag a bool."""
    out: dict[str, object] = dict(values)
    hashes = out.get("output_hashes")
    if isinstance(hashes, str):
        out["output_hashes"] = json.loads(hashes)
    out["new_dataset_for_same_data"] = bool(out.get("new_dataset_for_same_data"))
    # the columns of chain.PROVENANCE as stored (TEXT, INTEGER), the hashes as written
    return cast(EntryProvenance, out)


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"
