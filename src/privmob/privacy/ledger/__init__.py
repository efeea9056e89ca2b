"""The privacy ledger: a persistent, append-only record of what each dataset has spent.

One SQLite file holds any number of datasets. A dataset's total budget is set once
(:meth:`Ledger.set_budget`). Every release is charged with :meth:`Ledger.charge` *before* its
output is written: the check of what remains and the insert of the new entry happen in one
``BEGIN IMMEDIATE`` transaction, so two processes racing for the last of a budget cannot both
succeed. Entries can be neither updated nor deleted (SQLite triggers refuse it).

Budgets and charges are kept in (epsilon, delta) per the dataset's unit of privacy. Two
accountings are kept and a release is refused only when neither fits (:mod:`privmob.privacy.
ledger.accounting`): basic sequential composition of (epsilon, delta), and zCDP composition, where
the rho of Gaussian (zCDP) releases adds up and is converted once, tightly, to (epsilon, delta).
A release on a finer unit (trip, event) is charged to a user-level budget only through group
privacy with a stated group size.

Each entry records the content fingerprint and row count of its input, its output folder and
file hashes, the OS user and host; a dataset's budget is bound to the fingerprints it has seen
(the same content under another dataset name is refused unless stated). Entries are hash-chained
(:mod:`privmob.privacy.ledger.chain`) and signed (Ed25519) by the key that appended them;
budgets, keys, dataset families, approvals and checkpoints by the custodian
(:mod:`privmob.privacy.ledger.trust`, roles :mod:`privmob.privacy.ledger.custody`). A charge
fails closed: it decides on a verified position and the entries after it, each verified, and
refuses on any mismatch. :meth:`Ledger.verify` checks everything with public keys only
(:mod:`privmob.privacy.ledger.audit`).

This module holds the :class:`Ledger` (budgets, checks, charges) and where the file is found;
the records and how entries are written are :mod:`privmob.privacy.ledger.entries`, keys
:mod:`privmob.privacy.ledger.keys`, the SQLite schema, upgrade and integrity checks
:mod:`privmob.privacy.ledger.schema` (all the ledger's SQL tables), what a charge must pass
:mod:`privmob.privacy.ledger.checks`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger import checks as checks
from privmob.privacy.ledger import governance as governance
from privmob.privacy.ledger import keys as keys
from privmob.privacy.ledger import schema as schema
from privmob.privacy.ledger import trust as trust
from privmob.privacy.ledger import witness as witness
from privmob.privacy.ledger.accounting import Accounts, accounts
from privmob.privacy.ledger.audit import Audit
from privmob.privacy.ledger.custody import (
    Custody,
    budget_row,
    establish,
    family_of,
    head_count,
    migrate_governance,
    require_role,
)
from privmob.privacy.ledger.entries import (
    BUDGET_FIELDS,
    Budget,
    BudgetRow,
    Entry,
    Spent,
    entry_provenance,
    insert_entries,
    signed_head,
)
from privmob.privacy.ledger.governance import PEOPLE_PARAM
from privmob.privacy.ledger.rows import Con, Record, as_int, one, text
from privmob.privacy.ledger.store import (
    ChargeOutcomeUnknown,
    LedgerUnavailable,
    SqliteStore,
    Store,
    is_database_url,
    open_store,
)
from privmob.privacy.people import PeopleSketch
from privmob.surface import warn_caller

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12

DEFAULT_LEDGER_ENV = "PRIVMOB_LEDGER"
DEFAULT_LEDGER_NAME = "ledger.sqlite"


def default_ledger_location() -> str | Path:
    """``$PRIVMOB_LEDGER`` as given (a path or a ``postgresql://`` URL), else the default file."""
    explicit = os.environ.get(DEFAULT_LEDGER_ENV)
    if explicit and is_database_url(explicit):
        return explicit
    return default_ledger_path()


#: datasets this process charged (a run stopped by a signal says whether it was charged)
COMMITTED: list[str] = []


def default_ledger_path() -> Path:
    """``$PRIVMOB_LEDGER`` if set, else the user's data directory (XDG):
    ``$XDG_DATA_HOME/privmob/ledger.sqlite`` (``~/.local/share/privmob/ledger.sqlite``), never
    the current directory (a budget must not depend on where a command is run)."""
    explicit = os.environ.get(DEFAULT_LEDGER_ENV)
    if explicit:
        return Path(explicit)
    data_home = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "privmob" / DEFAULT_LEDGER_NAME


class ReleaseFacts(TypedDict, total=False):
    """What a charge records about a release besides its kind and cost: the keywords of
    :meth:`Ledger.charge_parts` that :meth:`Ledger.charge` passes on."""

    params: Mapping[str, object] | None
    group_size: int | None
    for_publication: bool
    input_fingerprint: str | None
    input_rows: int | None
    older_fingerprints: Sequence[str]
    output_dir: str | os.PathLike[str] | None
    output_hashes: dict[str, str] | None
    new_dataset_for_same_data: bool


class Ledger(Custody, Audit):
    """A privacy ledger stored in an SQLite file or a PostgreSQL database
    (:mod:`privmob.privacy.ledger.store`: one ledger, two stores), opened with a key (its role
    decides what this opener may write: :mod:`privmob.privacy.ledger.custody`).

    ``path``: an SQLite file, or a ``postgresql://`` URL (a team ledger,
    :mod:`privmob.privacy.ledger.pg`); default :func:`default_ledger_location`. ``key``: a
    :class:`~privmob.privacy.ledger.keys.Signer` or a private key file; by default
    ``$PRIVMOB_KEY_PEM``, ``$PRIVMOB_KEY`` or the user's own key. A new ledger's custodian is
    the key that creates it (the user's own key, created if needed). ``create=False``: a
    missing file (or database without a ledger) is an error (:class:`ConfigError`), never a new
    empty ledger."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        key: keys.Signer | str | os.PathLike[str] | None = None,
        timeout: float = 60.0,
        create: bool = True,
    ):
        location = path if path is not None else default_ledger_location()
        self.store: Store = open_store(location, timeout=timeout)
        #: the file (a :class:`~pathlib.Path`), or the database URL without its password
        self.path: Path | str = (
            self.store.path if isinstance(self.store, SqliteStore) else self.store.location
        )
        #: where this ledger is, as its witnesses know it (a resolved path; a URL)
        self.location: str = (
            os.path.realpath(self.store.path)
            if isinstance(self.store, SqliteStore)
            else self.store.location
        )
        self.timeout = timeout
        self.signer = keys.resolve(key)
        #: a throw-away ledger (test mode: signed by a throw-away key) leaves no witness
        self.witnessed = not (self.signer is not None and self.signer.throwaway)
        self._people_key = None
        self._created = False
        #: the user's own key file, when this open made it (a new ledger opened without a key:
        #: its custodian key), so that the command says so
        self.made_key: Path | None = None
        #: set when this open added the chain to entries of an older ledger (a sentence)
        self.migrated: str | None = self.store.open(create=create, establish=self._establish)
        with self._connect() as con:
            self.ledger_id = self.store.read_meta(con)["ledger_id"]
        if self._created and self.signer is not None and self.witnessed:  # root pinned now
            witness.record(self.ledger_id, self.signer.key_id, witness.GENESIS, self.location)
        if self.migrated:
            warn_caller(f"{self.path}: {self.migrated}", LedgerMigrated)

    def _establish(self, con: Con, ledger_id: str) -> None:
        """A new ledger: the opener's key (the user's own, created if needed) is its custodian."""
        if self.signer is None:
            existed = keys.default_key_path().exists()
            self.signer = keys.own_key()
            if not existed:
                self.made_key = self.signer.path
        establish(con, ledger_id, self.signer, "custodian")
        self._created = True

    def _connect(self) -> AbstractContextManager[Con]:
        return self.store.connect()

    @contextmanager
    def _write(self) -> Iterator[Con]:
        """A write transaction (the custodian's acts)."""
        with self._connect() as con:
            self.store.begin_write(con, None)
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

    # -- budgets --------------------------------------------------------------------------
    def set_budget(
        self,
        dataset: str,
        epsilon: float,
        delta: float = 0.0,
        unit: Unit | str = Unit.USER,
        note: str = "",
    ) -> Budget:
        """Set a dataset's total budget, once. Setting the same budget again is a no-op."""
        Cost(epsilon, delta)  # validates
        unit = Unit(unit)
        with self._connect() as con:
            self.store.begin_write(con, dataset)
            try:
                fam = family_of(con, dataset)[0]
                if fam != dataset:  # a member: the family's budget again is a no-op
                    b = _read_budget(con, fam)
                    con.execute("ROLLBACK")
                    if b is not None and (b.epsilon, b.delta, b.unit) == (epsilon, delta, unit):
                        return b
                    raise BudgetError(
                        f"dataset '{dataset}' is linked into a family in {self.path}: it is "
                        "charged to the family's budget and has none of its own"
                    )
                row = con.execute(
                    "SELECT epsilon, delta, unit FROM budgets WHERE dataset = ?", (dataset,)
                ).fetchone()
                if row is not None:
                    con.execute("ROLLBACK")
                    if (row[0], row[1], row[2]) != (epsilon, delta, unit.value):
                        raise BudgetError(
                            f"dataset '{dataset}' already has a budget of epsilon={row[0]!s}, "
                            f"delta={row[1]!s} per {row[2]!s} in {self.path}; a budget is set once",
                            hint="use another ledger file or dataset name for a new budget",
                        )
                    return self.budget(dataset)
                ring = trust.key_ring(con, self.ledger_id)
                signer = require_role(
                    self._signer(),
                    ring,
                    head_count(con),
                    (trust.CUSTODIAN,),
                    f"set a budget for '{dataset}'",
                    self,
                )
                values = (dataset, float(epsilon), float(delta), unit.value, _now(), note)
                own = chain.budget_hash(
                    self.ledger_id, dict(zip(chain.BUDGET_COLUMNS, values, strict=True))
                )
                sig = trust.budget_signature(signer, self.ledger_id, own)
                migrate_governance(con, self.ledger_id, signer)  # an earlier ledger: first
                self.store.insert_budget(con, (*values, own, signer.key_id, sig))
                stored = dict(zip(chain.BUDGET_COLUMNS, values, strict=True))
                governance.attest(
                    con, self.ledger_id, signer, "budgets", {**stored, "row_hash": own}, values[4]
                )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return self.budget(dataset)

    def budget(self, dataset: str) -> Budget:
        """The budget ``dataset`` is charged to (its family's, when linked)."""
        with self._connect() as con:
            b = _read_budget(con, family_of(con, dataset)[0])
        if b is None:
            raise BudgetError(
                f"no privacy budget is set for dataset '{dataset}' in {self.path}",
                hint=f"set one first: privmob ledger init {dataset} --epsilon 10 "
                f"--ledger {self.path}  (or pass --budget to the release command)",
            )
        return b

    def has_budget(self, dataset: str) -> bool:
        with self._connect() as con:
            root = family_of(con, dataset)[0]
            return (
                con.execute("SELECT 1 FROM budgets WHERE dataset = ?", (root,)).fetchone()
                is not None
            )

    def datasets(self) -> list[Budget]:
        with self._connect() as con:
            rows = con.execute(  # a family's members are shown under the family's budget
                "SELECT dataset FROM budgets WHERE dataset NOT IN "
                "(SELECT dataset FROM dataset_links) ORDER BY dataset"
            ).fetchall()
        return [self.budget(str(r[0])) for r in rows]

    # -- spending ----------------------------------------------------------------------------
    def accounts(self, dataset: str) -> Accounts:
        """What ``dataset`` has spent under the basic and the zCDP accounting."""
        b = self.budget(dataset)
        with self._connect() as con:
            return checks.dataset_accounts(con, b, [], family_of(con, b.dataset)[1], self.path)

    def spent(self, dataset: str) -> Spent:
        """Spent (epsilon by the tighter valid accounting; delta by basic composition)."""
        a = self.accounts(dataset)
        return Spent(a.epsilon, a.basic_delta)

    def remaining(self, dataset: str) -> Spent:
        b = self.budget(dataset)
        a = self.accounts(dataset)
        return Spent(a.epsilon_left, max(0.0, b.delta - a.basic_delta))

    def in_budget_unit(self, dataset: str, cost: Cost, group_size: int | None = None) -> Cost:
        """The cost a release charges against the dataset's budget unit."""
        b = self.budget(dataset)
        return checks.to_budget_unit(cost, b.unit, group_size)

    def check(self, dataset: str, cost: Cost, group_size: int | None = None) -> None:
        """Raise :class:`BudgetError` if the release would not fit now (no charge is made)."""
        b = self.budget(dataset)
        charged = checks.to_budget_unit(cost, b.unit, group_size)
        with self._connect() as con:
            members = family_of(con, b.dataset)[1]
            after = checks.dataset_accounts(con, b, [charged], members, self.path)
            checks.refuse_if_over(b, after, charged, self.path)

    def check_input(
        self,
        dataset: str,
        fingerprint: str | None,
        *,
        people: PeopleSketch | None = None,
        new_dataset_for_same_data: bool = False,
        older_fingerprints: Sequence[str] = (),
    ) -> None:
        """Refuse (:class:`BudgetError`) an input whose content another dataset already holds,
        or whose users (``people``) another dataset holds, unless the user stated
        ``new_dataset_for_same_data`` (an analyst: only where the custodian approved it) or the
        other dataset is in its family. ``older_fingerprints``: the content's fingerprints
        under earlier definitions, looked for too (see :meth:`holds_older_fingerprints`). No
        charge is made."""
        if new_dataset_for_same_data:
            self._refuse_unapproved_same_data(dataset)
        with self._connect() as con:
            checks.refuse_foreign_input(
                con,
                dataset,
                fingerprint,
                new_dataset_for_same_data,
                self.path,
                family_of(con, dataset)[1],
                older_fingerprints,
            )
            checks.refuse_known_people(
                con,
                dataset,
                people,
                new_dataset_for_same_data,
                self.path,
                family_of(con, dataset)[1],
            )

    def holds_older_fingerprints(self, dataset: str, rows: int | None = None) -> bool:
        """Whether a dataset outside ``dataset``'s family was charged for an input of
        ``rows`` rows fingerprinted under an earlier definition
        (:mod:`privmob.data.fingerprint`): then a release of ``dataset`` must compute its
        input's older fingerprints too, so that the same content is still refused under
        another name after an upgrade."""
        with self._connect() as con:
            family = family_of(con, dataset)[1]
            return checks.holds_older_fingerprints(con, dataset, family, rows)

    def _refuse_unapproved_same_data(self, dataset: str) -> None:
        if self.role() == trust.CUSTODIAN or self.approved_same_data(dataset):
            return
        raise BudgetError(
            f"refused: a separate budget for data another dataset holds needs the custodian's "
            f"approval of '{dataset}' in {self.path}; nothing was charged",
            hint=f"the custodian runs: privmob ledger approve-same-data {dataset} "
            f"--ledger {self.path}",
        )

    def charge(
        self,
        dataset: str,
        cost: Cost,
        *,
        kind: str,
        description: str = "",
        **facts: Unpack[ReleaseFacts],
    ) -> Entry:
        """Charge a release of one part atomically, or raise :class:`BudgetError` and charge
        nothing (``facts``: as :meth:`charge_parts` takes them)."""
        return self.charge_parts(dataset, [(description, cost)], kind=kind, **facts)[0]

    def charge_parts(
        self,
        dataset: str,
        parts: list[tuple[str, Cost]],
        *,
        kind: str,
        params: Mapping[str, object] | None = None,
        group_size: int | None = None,
        for_publication: bool = True,
        input_fingerprint: str | None = None,
        input_rows: int | None = None,
        older_fingerprints: Sequence[str] = (),
        output_dir: str | os.PathLike[str] | None = None,
        output_hashes: dict[str, str] | None = None,
        new_dataset_for_same_data: bool = False,
        within: Callable[[Con, list[Entry]], None] | None = None,
        people: PeopleSketch | None = None,
    ) -> list[Entry]:
        """Charge several parts of one release (e.g. one per period) in one transaction:
        all entries are written, or none is.

        ``input_fingerprint``/``input_rows`` identify the input (see
        :func:`privmob.data.sources.validate`); ``output_dir``/``output_hashes`` (file name ->
        SHA-256) the output, when known at charge time. An input whose fingerprint (or one of
        its ``older_fingerprints``, never recorded) another dataset holds is refused unless
        ``new_dataset_for_same_data`` (recorded). ``within``
        runs inside the transaction after the entries are inserted (the release publication
        records its staged files there, ``releases/publish.py``); if it raises, nothing is
        charged."""
        if not parts:
            raise ConfigError("nothing to charge")
        if params and PEOPLE_PARAM in params:
            raise ConfigError(
                f"'{PEOPLE_PARAM}' is not a release parameter: the ledger records there the "
                "people sketch a charge merged"
            )
        # a recorded programme refuses releases outside it (privmob.privacy.programme_ledger)
        from privmob.privacy.programme_ledger import check_release, use_allowance

        outside_programme = check_release(self, dataset, kind, parts)
        provenance = entry_provenance(
            input_fingerprint, input_rows, output_dir, output_hashes, new_dataset_for_same_data
        )
        with self._connect() as con:
            self.store.begin_write(con, dataset)
            try:
                meta = self.store.read_meta(con)
                schema.refuse_broken_head(con, meta, self.path)
                count = int(meta.get("head_count", "0"))
                ring = trust.key_ring(con, self.ledger_id)
                signer = require_role(
                    self._signer(),
                    ring,
                    count,
                    (trust.CUSTODIAN, trust.ANALYST),
                    f"charge '{dataset}'",
                    self,
                )
                # fail closed: the accounts come from a verified position and verified entries
                try:
                    head = trust.start_of_charge(con, self.ledger_id, ring, signer)
                    seen = witness.disagreement(con, self.ledger_id, ring.root, self.location)
                    if seen:  # behind or forked from a head this user witnessed, or re-rooted
                        raise trust.Untrusted(seen)
                    vouched = trust.vouched_now(con, self.ledger_id, ring)
                    root, members = self._verified_family(con, ring, dataset, vouched)
                    row = budget_row(con, root)
                    problem = row and trust.budget_row_problem(ring, self.ledger_id, row)
                    if (
                        row
                        and not problem
                        and not trust.is_vouched(ring, text(row["signer"]), "budgets", row, vouched)
                    ):
                        problem = f"budget of '{root}': signed by a revoked key, after it"
                    if problem:
                        raise trust.Untrusted(problem)
                except trust.Untrusted as exc:
                    raise _refusal(self.path, str(exc)) from None
                if row is None:
                    raise BudgetError(
                        f"no privacy budget is set for dataset '{dataset}'",
                        hint=f"privmob ledger init {dataset} --epsilon E",
                    )
                b = _budget(row)
                role = ring.role(signer.key_id, count)
                if new_dataset_for_same_data and role != trust.CUSTODIAN:
                    approvals, _ = trust.records(
                        con, self.ledger_id, ring, "same_data_approvals", vouched
                    )
                    if dataset not in approvals:
                        self._refuse_unapproved_same_data(dataset)
                checks.refuse_foreign_input(
                    con,
                    dataset,
                    input_fingerprint,
                    new_dataset_for_same_data,
                    self.path,
                    members,
                    older_fingerprints,
                )
                checks.refuse_known_people(
                    con, dataset, people, new_dataset_for_same_data, self.path, members
                )
                charged = [checks.to_budget_unit(c, b.unit, group_size) for _, c in parts]
                total = charged[0]
                for c in charged[1:]:
                    total = total + c
                after = accounts(
                    trust.account_rows(head.totals, members)
                    + [(c.epsilon, c.delta, c.rho) for c in charged],
                    b.epsilon,
                    b.delta,
                )
                checks.refuse_if_over(b, after, total, self.path)
                # who it holds: the merged sketch, which its entries name (signed, chained)
                merged = checks.merged_people(con, dataset, people, self.path)
                if merged is not None:
                    params = {**(params or {}), PEOPLE_PARAM: governance.sketch_digest(merged)}
                prev = meta.get("head_hash") or chain.genesis(self.ledger_id)
                entries = insert_entries(
                    self.store,
                    con,
                    prev,
                    dataset,
                    kind,
                    parts,
                    charged,
                    group_size=group_size,
                    for_publication=for_publication,
                    params=params,
                    provenance=provenance,
                    created=_now(),
                    signer=signer,
                    ledger_id=self.ledger_id,
                )
                totals = {d: list(t) for d, t in head.totals.items()}
                for e in entries:
                    trust.add_to(totals, dataset, e.cost.epsilon, e.cost.delta, e.cost.rho)
                end = trust.Position(
                    entries[-1].id, head.count + len(entries), entries[-1].row_hash, totals
                )
                self.store.set_head(con, end.count, end.head_hash)
                if role == trust.CUSTODIAN:  # an earlier ledger gets its governance chain
                    migrate_governance(con, self.ledger_id, signer)
                if role == trust.CUSTODIAN and _due_checkpoint(con, end):
                    trust.add_checkpoint(con, self.ledger_id, signer, end, _now())
                head_now, head_signature = signed_head(signer, self.ledger_id, end, ring.root)
                entries[-1] = replace(entries[-1], head=head_now, head_signature=head_signature)
                checks.store_people(self.store, con, dataset, merged, _now())
                if outside_programme:
                    use_allowance(con, dataset, kind)
                if within is not None:
                    within(con, entries)
                checkpoint_now = witness.latest_checkpoint(con)
                try:
                    con.execute("COMMIT")
                except LedgerUnavailable as exc:  # lost at the commit: made or not, unknown
                    raise ChargeOutcomeUnknown(
                        f"the ledger {self.path} was lost while this charge was committed: "
                        "it may or may not have been made",
                        hint=exc.hint,
                    ) from exc
                COMMITTED.append(dataset)
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        if ring.root is not None:
            trust.cache_position(self.ledger_id, signer, end, ring.root)
        if self.witnessed:
            witness.record(
                self.ledger_id,
                ring.root,
                witness.Head(end.count, end.last_id, end.head_hash),
                self.location,
                checkpoint_now,
            )
        return entries

    def _verified_family(
        self,
        con: Con,
        ring: trust.KeyRing,
        dataset: str,
        vouched: frozenset[str],
    ) -> tuple[str, list[str]]:
        """(the dataset whose budget pays, all datasets charged to it) by signed links only."""
        links, bad = trust.records(con, self.ledger_id, ring, "dataset_links", vouched)
        if bad:
            raise trust.Untrusted(bad[0])
        root = str(links.get(dataset, {}).get("family", dataset))
        return root, [root, *sorted(d for d, v in links.items() if v["family"] == root)]


def _refusal(path: Path | str, why: str) -> BudgetError:
    return BudgetError(
        f"refused: the privacy ledger {path} does not verify ({why}); nothing was charged; "
        f"see everything with: privmob ledger verify --ledger {path}"
    )


def _due_checkpoint(con: Con, end: trust.Position) -> bool:
    row = one(con.execute("SELECT max(entry_count) FROM checkpoints"))
    return end.count - as_int(row[0] or 0) >= trust.CHECKPOINT_EVERY


def _budget(row: Record) -> Budget:
    return Budget.of(cast(BudgetRow, tuple(row[k] for k in BUDGET_FIELDS)))


def _read_budget(con: Con, dataset: str) -> Budget | None:
    row = cast(
        "BudgetRow | None",
        con.execute(
            f"SELECT {', '.join(BUDGET_FIELDS)} FROM budgets WHERE dataset = ?", (dataset,)
        ).fetchone(),
    )
    return None if row is None else Budget.of(row)


class LedgerMigrated(UserWarning):
    """An older ledger file was upgraded on open (columns added, existing entries chained)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
