"""What the custodian of a ledger does, and the roles that decide who may do it.

On SQLite a role is the possession of a key the ledger registered (:mod:`privmob.privacy.
ledger.trust`): the **custodian** sets budgets, grants and rotates keys, links datasets into a
family (one per-person budget for, e.g., monthly extracts with rotating pseudonyms), approves a
release of the same data under another dataset name, signs checkpoints and adopts (signs once)
a ledger made before ledgers were signed; an **analyst** charges releases to existing budgets;
an **auditor** (or anyone without a key) reads and verifies.

:class:`Custody` is a part of :class:`privmob.privacy.ledger.Ledger`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, cast

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger import governance as governance
from privmob.privacy.ledger import schema as schema
from privmob.privacy.ledger import trust as trust
from privmob.privacy.ledger import witness as witness
from privmob.privacy.ledger.keys import Signer, key_id, keys_dir, own_key, resolve
from privmob.privacy.ledger.rows import Con, Record, column_names

PEOPLE_KEY_ENV = "PRIVMOB_PEOPLE_KEY"


class Custody:
    """Roles and the custodian's signed records of a ledger."""

    path: Path | str  # the file, or a PostgreSQL URL without its password
    location: str  # as witnesses know it (privacy/ledger/witness.py)
    witnessed: bool  # False: a throw-away ledger, which no witness keeps
    ledger_id: str
    signer: Signer | None
    _people_key: bytes | None

    def _connect(self) -> AbstractContextManager[Con]:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Con]:
        raise NotImplementedError

    def _signer(self) -> Signer | None:
        """The opener's key; the user's default key is looked up again if it had none (another
        process may have created it since this ledger was opened)."""
        if self.signer is None:
            self.signer = resolve(None)
        return self.signer

    # -- reading ------------------------------------------------------------------------------
    def key_ring(self) -> trust.KeyRing:
        with self._connect() as con:
            return trust.key_ring(con, self.ledger_id)

    def role(self) -> str | None:
        """This opener's role now (None: no key, or a key this ledger does not know)."""
        signer = self._signer()
        if signer is None:
            return None
        with self._connect() as con:
            ring = trust.key_ring(con, self.ledger_id)
            return ring.role(signer.key_id, head_count(con))

    def family(self, dataset: str) -> str:
        """The dataset whose budget ``dataset`` is charged to (itself, unless linked)."""
        with self._connect() as con:
            return family_of(con, dataset)[0]

    def family_members(self, dataset: str) -> list[str]:
        """The datasets charged to ``dataset``'s budget (its family), the family's first."""
        with self._connect() as con:
            return family_of(con, dataset)[1]

    def shares_budget(self, a: str, b: str) -> bool:
        """True when ``a`` and ``b`` are one dataset or linked into one family by the custodian
        (signed links only)."""
        if a == b:
            return True
        with self._connect() as con:
            ring = trust.key_ring(con, self.ledger_id)
            links, _ = trust.records(con, self.ledger_id, ring, "dataset_links")
        same: bool = links.get(a, {}).get("family", a) == links.get(b, {}).get("family", b)
        return same

    def approved_same_data(self, dataset: str) -> bool:
        """True when the custodian approved (signed) releases of data another dataset holds
        under ``dataset``."""
        with self._connect() as con:
            ring = trust.key_ring(con, self.ledger_id)
            approvals, _ = trust.records(con, self.ledger_id, ring, "same_data_approvals")
        return dataset in approvals

    def people_key(self) -> bytes:
        """The per-ledger secret that keys the people sketches (``privacy/people.py``): from
        ``$PRIVMOB_PEOPLE_KEY`` (hex), or the file ``people-<ledger id>.key`` beside the opener's
        key (or in the user's key folder); a custodian creates it on first use (an ephemeral or
        environment key derives it). Never stored in the ledger."""
        if self._people_key is not None:
            return self._people_key
        explicit = os.environ.get(PEOPLE_KEY_ENV)
        if explicit:
            try:
                self._people_key = bytes.fromhex(explicit.strip())
            except ValueError:
                raise ConfigError(f"${PEOPLE_KEY_ENV} is not hex") from None
            return self._people_key
        folder = self.signer.path.parent if self.signer and self.signer.path else keys_dir()
        where = folder / f"people-{self.ledger_id}.key"
        if where.exists():
            self._people_key = bytes.fromhex(where.read_text().strip())
            return self._people_key
        if self.role() != trust.CUSTODIAN or self.signer is None:
            raise BudgetError(
                f"the people key of ledger {self.ledger_id} is not here ({where})",
                hint=f"the custodian copies their {where.name} there, or sets ${PEOPLE_KEY_ENV}; "
                "if you are this ledger's custodian, your key is not recognised: see what was "
                f"changed with: privmob ledger verify --ledger {self.path}",
            )
        if self.signer.path is None:
            raw = self.signer.private.private_bytes_raw()
            self._people_key = hmac.new(
                raw, b"privmob people key\n" + self.ledger_id.encode(), hashlib.sha256
            ).digest()
            return self._people_key
        value = secrets.token_bytes(32)
        try:
            fd = os.open(where, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(value.hex())
        except FileExistsError:  # another process made it meanwhile
            value = bytes.fromhex(where.read_text().strip())
        self._people_key = value
        return value

    # -- the custodian's acts -------------------------------------------------------------------
    def _as_custodian(self, con: Con, what: str) -> tuple[Signer, trust.KeyRing]:
        ring = trust.key_ring(con, self.ledger_id)
        signer = require_role(self._signer(), ring, head_count(con), (trust.CUSTODIAN,), what, self)
        if migrate_governance(con, self.ledger_id, signer):
            ring = trust.key_ring(con, self.ledger_id)
        return signer, ring

    def require_custodian(self, what: str) -> None:
        """Refuse (:class:`BudgetError`) unless this opener holds an active custodian key."""
        with self._connect() as con:
            self._as_custodian(con, what)

    def grant(self, role: str, name: str, public_hex: str) -> str:
        """Register a public key with a role; returns its key id."""
        if role not in trust.ROLES:
            raise ConfigError(f"unknown role {role!r}", hint="custodian, analyst or auditor")
        with self._write() as con:
            signer, ring = self._as_custodian(con, f"grant the {role} key {name}")
            kid = key_id(bytes.fromhex(public_hex))
            if ring.role(kid, head_count(con)) is not None:
                raise ConfigError(f"the key {kid[:12]} is already registered in {self.path}")
            trust.add_key_event(
                con,
                self.ledger_id,
                signer,
                action="grant",
                role=role,
                name=name,
                public_hex=public_hex,
                at_count=head_count(con),
                created=now(),
            )
        return kid

    def revoke(self, kid: str) -> None:
        """Stop a key: its entries so far stay valid; it signs nothing after now."""
        with self._write() as con:
            signer, ring = self._as_custodian(con, "revoke a key")
            k = ring.keys.get(kid)
            if k is None or k.revoked_at is not None:
                raise ConfigError(f"no active key {kid} in {self.path}")
            trust.revoke_key(
                con, self.ledger_id, signer, k, at_count=head_count(con), created=now()
            )
            # a checkpoint signs the governance chain with the revocation in it (and what a
            # revoked custodian signed is vouched for by an active key); this custodian
            # witnesses it, so cutting the revocation from the chain's end is seen
            ring = trust.key_ring(con, self.ledger_id)
            pos = self._sign_checkpoint(con, signer, ring)
            signed = witness.latest_checkpoint(con)
        if self.witnessed:
            head = witness.Head(pos.count, pos.last_id, pos.head_hash)
            witness.record(self.ledger_id, ring.root, head, self.location, signed)

    def rotate(self, new: Signer, name: str = "custodian") -> None:
        """Hand custody to the key ``new``: granted and the current key revoked, both signed by
        the current key; everything signed before stays verifiable."""
        with self._write() as con:
            signer, ring = self._as_custodian(con, "rotate the custodian key")
            at = head_count(con)
            created = now()
            trust.add_key_event(
                con,
                self.ledger_id,
                signer,
                action="grant",
                role=trust.CUSTODIAN,
                name=name,
                public_hex=new.public_hex,
                at_count=at,
                created=created,
            )
            old = ring.keys[signer.key_id]
            trust.revoke_key(con, self.ledger_id, signer, old, at_count=at, created=created)
            # the new key vouches for everything the old one signed, now: a record the retired
            # key signs later is refused, whatever it claims
            self._sign_checkpoint(con, new, trust.key_ring(con, self.ledger_id))
        self.signer = new

    def checkpoint(self) -> trust.Position:
        """Sign where the ledger stands (charges then start from here), after verifying every
        entry since the last checkpoint, as a charge does (``ledger verify`` checks all)."""
        with self._write() as con:
            signer, ring = self._as_custodian(con, "sign a checkpoint")
            pos = self._sign_checkpoint(con, signer, ring)
            signed = witness.latest_checkpoint(con)
        if self.witnessed:
            head = witness.Head(pos.count, pos.last_id, pos.head_hash)
            witness.record(self.ledger_id, ring.root, head, self.location, signed)
        return pos

    def _sign_checkpoint(self, con: Con, signer: Signer, ring: trust.KeyRing) -> trust.Position:
        latest = trust.checkpoints_latest(con, self.ledger_id, ring)
        problems = list(ring.problems)
        if latest is not None and latest.problem:
            problems.append(latest.problem)
        start = trust.GENESIS if latest is None else latest.position
        pos, more = trust.verify_after(con, self.ledger_id, ring, start)
        problems += more
        if pos.count != head_count(con):
            problems.append(f"it holds {pos.count} entries but recorded {head_count(con)}")
        seen = witness.disagreement(con, self.ledger_id, ring.root, self.location)
        if seen:  # never sign a ledger behind or forked from a head this user witnessed
            problems.append(seen)
        if problems:
            raise BudgetError(
                f"refused: the ledger {self.path} does not verify ({problems[0]}); no "
                f"checkpoint was signed (see: privmob ledger verify --ledger {self.path})"
            )
        trust.add_checkpoint(con, self.ledger_id, signer, pos, now())
        return pos

    def link(self, family: str, dataset: str) -> str:
        """Charge ``dataset`` to ``family``'s budget from now on (one per-person budget);
        returns the family's dataset (the one with the budget)."""
        with self._write() as con:
            signer, _ = self._as_custodian(con, f"link '{dataset}' to '{family}'")
            root = family_of(con, family)[0]
            if budget_row(con, root) is None:
                raise BudgetError(f"dataset '{family}' has no budget in {self.path} to share")
            if dataset == root or family_of(con, dataset)[0] == root:
                return root
            if (
                budget_row(con, dataset) is not None
                or con.execute(
                    "SELECT 1 FROM dataset_links WHERE dataset = ? OR family = ?",
                    (dataset, dataset),
                ).fetchone()
            ):
                raise BudgetError(
                    f"dataset '{dataset}' already has a budget or a family of its own in "
                    f"{self.path}; only a dataset without one joins a family",
                    hint="link new extracts before their first release",
                )
            values: Record = {"dataset": dataset, "family": root, "at_count": head_count(con)}
            trust.add_record(
                con,
                self.ledger_id,
                signer,
                "dataset_links",
                {**values, "created_at": now()},
            )
            # the member's own row (entries name their dataset): the family's budget, marked;
            # charges are decided on the family's budget (privacy/ledger/__init__.py)
            fam = budget_row(con, root)
            assert fam is not None
            row = {**fam, "dataset": dataset, "created_at": now(), "note": f"family of {root}"}
            own = chain.budget_hash(self.ledger_id, trust.budget_values(row))
            con.execute(
                "INSERT INTO budgets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *trust.budget_values(row).values(),
                    own,
                    signer.key_id,
                    trust.budget_signature(signer, self.ledger_id, own),
                ),
            )
            member = {**trust.budget_values(row), "row_hash": own}
            governance.attest(
                con, self.ledger_id, signer, "budgets", member, str(row["created_at"])
            )
            # vouched for at once: deleting it later is seen (trust.vouched_missing)
            self._sign_checkpoint(con, signer, trust.key_ring(con, self.ledger_id))
        return root

    def approve_same_data(self, dataset: str, note: str = "") -> None:
        """Allow releases under ``dataset`` of data another dataset already released
        (``--new-dataset-for-same-data``), signed by the custodian."""
        with self._write() as con:
            signer, _ = self._as_custodian(con, f"approve same-data releases under '{dataset}'")
            if con.execute(
                "SELECT 1 FROM same_data_approvals WHERE dataset = ?", (dataset,)
            ).fetchone():
                return
            trust.add_record(
                con,
                self.ledger_id,
                signer,
                "same_data_approvals",
                {
                    "dataset": dataset,
                    "note": note,
                    "at_count": head_count(con),
                    "created_at": now(),
                },
            )
            self._sign_checkpoint(con, signer, trust.key_ring(con, self.ledger_id))

    def adopt(self, name: str = "custodian") -> int:
        """Sign a ledger made before ledgers were signed, once: its chain must verify; the
        opener's key becomes its custodian, its budgets are signed and a checkpoint covers its
        entries. Returns the number of entries adopted. Only the custodian should do this, after
        checking the ledger against the releases made from it (``ledger verify L RELEASE...``):
        the chain alone does not prove that nobody rebuilt it."""
        if self.signer is None:  # the single-user path: the user's own key, made if needed
            self.signer = own_key()
        signer = self.signer
        with self._write() as con:
            ring = trust.key_ring(con, self.ledger_id)
            if ring.root is not None or con.execute("SELECT 1 FROM ledger_keys").fetchone():
                raise ConfigError(f"the ledger {self.path} is already signed")
            meta = schema.read_meta(con)
            count = head_count(con)
            problems = chain.problems(con, self.ledger_id, count, meta.get("head_hash", ""))
            if problems:
                raise BudgetError(
                    f"refused: the ledger {self.path} does not verify ({problems[0]}); it was "
                    "not adopted"
                )
            establish(con, self.ledger_id, signer, name)
            ring = trust.key_ring(con, self.ledger_id)
            pos, _ = trust.verify_after(con, self.ledger_id, ring, trust.GENESIS, adopted_to=2**62)
            trust.add_checkpoint(con, self.ledger_id, signer, pos, now(), adopted=True)
            for (dataset,) in con.execute(
                "SELECT dataset FROM budgets WHERE signature IS NULL"
            ).fetchall():
                sign_budget(con, self.ledger_id, signer, str(dataset))
            # verified above: its records become the start of its governance chain
            if governance.available(con) and not governance.head(con, self.ledger_id)[0]:
                governance.attest_existing(con, self.ledger_id, signer, now())
        return pos.count


# -- helpers shared with the ledger ---------------------------------------------------------------
def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def head_count(con: Con) -> int:
    return int(schema.read_meta(con).get("head_count", "0"))


def establish(con: Con, ledger_id: str, signer: Signer, name: str) -> None:
    """Make ``signer`` the custodian (root key) of a ledger and sign where it starts."""
    trust.add_key_event(
        con,
        ledger_id,
        signer,
        action="grant",
        role=trust.CUSTODIAN,
        name=name,
        public_hex=signer.public_hex,
        at_count=0,
        created=now(),
    )


def migrate_governance(con: Con, ledger_id: str, signer: Signer) -> bool:
    """A ledger made before the governance chain (privacy/ledger/governance.py) gets it at its
    custodian's next write, once, if it verifies (everything checked: slow once on a big
    ledger); one that does not stays as it is, and ``ledger verify`` says why. True: made."""
    if not governance.available(con) or governance.head(con, ledger_id)[0]:
        return False
    if governance.governed_rows(con) <= 1 or all_problems(con, ledger_id):
        return False
    governance.attest_existing(con, ledger_id, signer, now())
    return True


def sign_budget(con: Con, ledger_id: str, signer: Signer, dataset: str) -> None:
    """Sign a budget row (adoption of an unsigned ledger). The only update made to a budget:
    the trigger is lifted for this statement, inside the caller's transaction."""
    (row_hash,) = cast(  # the budget's row hash (set when the ledger was chained)
        "tuple[str]",
        con.execute("SELECT row_hash FROM budgets WHERE dataset = ?", (dataset,)).fetchone(),
    )
    con.execute("DROP TRIGGER IF EXISTS budgets_fixed_u")
    con.execute(
        "UPDATE budgets SET signer = ?, signature = ? WHERE dataset = ?",
        (signer.key_id, trust.budget_signature(signer, ledger_id, row_hash), dataset),
    )
    con.execute(schema.BUDGETS_U)


def budget_row(con: Con, dataset: str) -> Record | None:
    cur = con.execute(
        f"SELECT {', '.join(chain.BUDGET_COLUMNS)}, row_hash, signer, signature FROM budgets "
        "WHERE dataset = ?",
        (dataset,),
    )
    r = cur.fetchone()
    return None if r is None else dict(zip(column_names(cur), r, strict=True))


def family_of(con: Con, dataset: str) -> tuple[str, list[str]]:
    """(the family's dataset, all its members) as the file says (the charge checks the links'
    signatures itself)."""
    row = con.execute("SELECT family FROM dataset_links WHERE dataset = ?", (dataset,)).fetchone()
    root = str(row[0]) if row else dataset
    members = [
        str(r[0])
        for r in con.execute(
            "SELECT dataset FROM dataset_links WHERE family = ? ORDER BY dataset", (root,)
        )
    ]
    return root, [root, *members]


def all_problems(con: Con, ledger_id: str) -> list[str]:
    meta = schema.read_meta(con)
    return trust.all_problems(
        con, ledger_id, int(meta.get("head_count", "0")), meta.get("head_hash", "")
    )


class Located(Protocol):
    """A ledger as messages name it."""

    @property
    def path(self) -> Path | str: ...


def require_role(
    signer: Signer | None,
    ring: trust.KeyRing,
    count: int,
    roles: tuple[str, ...],
    what: str,
    ledger: Located,
) -> Signer:
    """The opener's key if its role is one of ``roles``; else a refusal naming what to do."""
    if ring.root is None:
        raise BudgetError(
            f"refused to {what}: the ledger {ledger.path} is not signed; nothing was written "
            f"(see: privmob ledger verify --ledger {ledger.path}; its custodian signs it once "
            "with privmob ledger adopt)"
        )
    if signer is None:
        raise BudgetError(
            f"refused to {what}: no key (set PRIVMOB_KEY to your private key file); nothing "
            "was written",
            hint="only a key registered in the ledger may write to it: privmob ledger keygen FILE "
            "and ask its custodian to grant it",
        )
    role = ring.role(signer.key_id, count)
    if role not in roles:
        known = ring.keys.get(signer.key_id)
        who = f"the {role} key" if role else "a key this ledger does not know"
        if known is not None and known.revoked_at is not None:
            who = f"the {known.role} key of {known.name}, revoked"
        raise BudgetError(
            f"refused to {what}: {ledger.path} knows your key {signer.key_id[:12]} as {who}; "
            f"only a {' or '.join(roles)} may; nothing was written",
            hint="ask the ledger's custodian (privmob ledger grant ...)",
        )
    return signer


def iter_roles(ring: trust.KeyRing) -> Iterator[tuple[str, trust.KeyState]]:
    yield from sorted(ring.keys.items(), key=lambda kv: kv[1].granted_at)
