"""A recorded programme in the privacy ledger: progress, and refusal of releases outside it.

The operator records a planned programme (privmob.evaluate.programme) for a dataset; from then
on the ledger refuses a release whose kind is not in the programme, or whose kind has used all
its planned releases, or whose epsilon exceeds the planned per-release epsilon, unless the
operator allows it beforehand (``allow``: one allowance per release, consumed when used).
Tables of their own in the ledger (file or database); the ledger calls :func:`check_release` before
it charges. The check reads ledger rows only, never data.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict, cast

from privmob.errors import BudgetError, ConfigError

if TYPE_CHECKING:
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger.entries import Entry
    from privmob.privacy.ledger.rows import Con
    from privmob.privacy.ledger.store import Store

# schedule kind -> the kinds its releases record in the ledger: the registry's name
# (privmob.releases.kinds) and the earlier names older ledgers hold; "series" covers both
# landmark series (series and series-counts, recorded alike as landmark-series before)
LEDGER_KINDS: dict[str, tuple[str, ...]] = {
    "od": ("od", "od-matrix"),
    "population": ("population",),
    "density": ("density",),
    "report": ("report", "mobility_report"),
    "series": ("series", "series-counts", "landmark-series"),
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS programmes (
    dataset TEXT PRIMARY KEY,
    recorded_at TEXT NOT NULL,
    since_entry INTEGER NOT NULL,
    plan TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS programme_allowances (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL
);
"""
EPS_SLACK = 1e-9


class Ledger(Protocol):
    """What this module needs of a :class:`privmob.privacy.ledger.Ledger` (which calls
    :func:`check_release` from its charge): its store and its entries."""

    store: Store

    def entries(self, dataset: str | None = None) -> list[Entry]: ...

    def require_custodian(self, what: str) -> None: ...


@contextmanager
def _connect(ledger: Ledger, *, create: bool = False) -> Iterator[Con]:
    """A connection to the ledger; in a file the programme tables are created only by writers,
    so a ledger without a programme is left as it is (a PostgreSQL ledger has them from its
    creation, :mod:`privmob.privacy.ledger.pg_schema`)."""
    with ledger.store.connect() as con:
        if create and isinstance(con, sqlite3.Connection):
            con.executescript(SCHEMA)
        yield con


def _has_tables(ledger: Ledger) -> bool:
    return ledger.store.has_table("programmes") and ledger.store.has_table("programme_allowances")


@dataclass(frozen=True)
class Progress:
    """One schedule entry against the releases charged since the programme was recorded."""

    kind: str
    planned: int
    released: int
    epsilon_each: float
    epsilon_spent: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


class PlannedProgramme(Protocol):
    """What the ledger keeps of a plan (:class:`privmob.evaluate.programme.ProgrammePlan`)."""

    feasible: bool

    def to_dict(self) -> Mapping[str, object]: ...


class ScheduledRelease(TypedDict):
    """One entry of a recorded programme's ``releases`` (as :meth:`PlannedProgramme.to_dict`
    writes it)."""

    kind: str
    count: int
    epsilon_per_release: float


class RecordedProgramme(TypedDict):
    """What the ledger reads of a recorded programme."""

    releases: list[ScheduledRelease]


def record(ledger: Ledger, dataset: str, plan: PlannedProgramme) -> None:
    """Record a feasible programme for ``dataset`` (replaces a previous one)."""
    if not plan.feasible:
        raise ConfigError(
            "this programme does not meet its targets within its budget; nothing recorded",
            hint="see privmob plan programme for what would work",
        )
    from datetime import UTC, datetime

    ledger.require_custodian(f"record a programme for '{dataset}'")
    doc = plan.to_dict()
    last = max((e.id for e in ledger.entries(dataset)), default=0)
    with _connect(ledger, create=True) as con:
        con.execute(
            "INSERT INTO programmes (dataset, recorded_at, since_entry, plan) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (dataset) DO UPDATE SET recorded_at = excluded.recorded_at, "
            "since_entry = excluded.since_entry, plan = excluded.plan",
            (dataset, datetime.now(UTC).isoformat(), last, json.dumps(doc)),
        )


def recorded(ledger: Ledger, dataset: str) -> tuple[int, RecordedProgramme] | None:
    if not _has_tables(ledger):
        return None
    with _connect(ledger) as con:
        row = cast(  # since_entry INTEGER, plan TEXT (JSON), both NOT NULL
            "tuple[int, str] | None",
            con.execute(
                "SELECT since_entry, plan FROM programmes WHERE dataset = ?", (dataset,)
            ).fetchone(),
        )
    return None if row is None else (int(row[0]), json.loads(row[1]))


def progress(ledger: Ledger, dataset: str) -> list[Progress]:
    """Planned and charged releases per entry, since the programme was recorded."""
    rec = recorded(ledger, dataset)
    if rec is None:
        raise ConfigError(
            f"no programme recorded for '{dataset}'",
            hint="record one with: privmob ledger programme record SCHEDULE --dataset NAME",
        )
    since, plan = rec
    entries = [e for e in ledger.entries(dataset) if e.id > since]
    out = []
    for r in plan["releases"]:
        kinds = LEDGER_KINDS[r["kind"]]
        mine = [e for e in entries if e.kind in kinds]
        releases = len({e.created_at for e in mine})  # parts of one release share a time
        spent = sum(e.release_cost.epsilon for e in mine)
        out.append(Progress(r["kind"], r["count"], releases, r["epsilon_per_release"], spent))
    return out


def allow(ledger: Ledger, dataset: str, kind: str, reason: str) -> None:
    """Let the next release of ``kind`` through once, whatever the programme says."""
    if not reason.strip():
        raise ConfigError("say why the release is outside the programme (--reason)")
    ledger.require_custodian(f"allow a release outside the programme of '{dataset}'")
    with _connect(ledger, create=True) as con:
        con.execute(
            "INSERT INTO programme_allowances (dataset, kind, reason) VALUES (?, ?, ?)",
            (dataset, kind, reason),
        )


def _allowance_left(ledger: Ledger, dataset: str, kind: str) -> bool:
    if not _has_tables(ledger):
        return False
    with _connect(ledger) as con:
        row = con.execute(
            "SELECT 1 FROM programme_allowances WHERE dataset = ? AND kind IN (?, ?) LIMIT 1",
            (dataset, kind, _schedule_kind(kind)),
        ).fetchone()
    return row is not None


def use_allowance(con: Con, dataset: str, kind: str) -> None:
    """Inside the charge's transaction (``con``, after its entries): use one allowance of the
    dataset for ``kind`` (PostgreSQL: the server's ``use_allowance``, which an analyst's role
    can call only in a charge of that dataset), or refuse the charge when another release used
    the last one meanwhile."""
    if not isinstance(con, sqlite3.Connection):
        used = con.execute(
            "SELECT use_allowance(?, ?, ?)", (dataset, kind, _schedule_kind(kind))
        ).fetchone()
        found = bool(cast("tuple[object]", used)[0])  # the server's use_allowance: one row
    else:
        row = con.execute(
            "SELECT id FROM programme_allowances WHERE dataset = ? AND kind IN (?, ?) "
            "ORDER BY id LIMIT 1",
            (dataset, kind, _schedule_kind(kind)),
        ).fetchone()
        if row is not None:
            con.execute("DELETE FROM programme_allowances WHERE id = ?", (row[0],))
        found = row is not None
    if not found:
        raise BudgetError(
            f"the allowance for a {kind} release of '{dataset}' outside its programme was used "
            "by another release; nothing was charged or published",
            hint=f"privmob ledger programme allow --dataset {dataset} "
            f"--kind {_schedule_kind(kind)} --reason '...'",
        )


def _schedule_kind(ledger_kind: str) -> str:
    return next((k for k, v in LEDGER_KINDS.items() if ledger_kind in v), ledger_kind)


def check_release(ledger: Ledger, dataset: str, kind: str, parts: list[tuple[str, Cost]]) -> bool:
    """Refuse a release outside the recorded programme (no programme: nothing to check) unless
    an allowance lets it through; True when it needs that allowance, which the charge uses
    (:func:`use_allowance`)."""
    rec = recorded(ledger, dataset)
    if rec is None:
        return False
    planned = {k: r for r in rec[1]["releases"] for k in LEDGER_KINDS[r["kind"]]}
    reason = None
    entry = planned.get(kind)
    if entry is None:
        reason = f"a {kind} release is not in the programme recorded for '{dataset}'"
    else:
        done = next(p for p in progress(ledger, dataset) if kind in LEDGER_KINDS[p.kind])
        eps = max(c.epsilon for _, c in parts)
        if done.released >= done.planned:
            reason = f"all {done.planned} planned {kind} releases of '{dataset}' are done"
        elif eps > entry["epsilon_per_release"] * (1 + EPS_SLACK):
            reason = (
                f"epsilon {eps:g} exceeds the programme's {entry['epsilon_per_release']:.6g} "
                f"per {kind} release"
            )
    if reason is not None and not _allowance_left(ledger, dataset, kind):
        raise BudgetError(
            f"{reason}; nothing was charged or published",
            hint=f"if it is intended: privmob ledger programme allow --dataset {dataset} "
            f"--kind {_schedule_kind(kind)} --reason '...'",
        )
    return reason is not None
