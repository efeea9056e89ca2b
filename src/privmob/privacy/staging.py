"""Staged releases: where each release being published is, kept in the ledger (its SQLite file,
or its PostgreSQL database, where an analyst's role writes through functions,
:mod:`privmob.privacy.ledger.pg_schema`).

A release is recorded here before the ledger is charged, and written into a private staging
directory beside its target once the charge is committed and its noise drawn
(``releases/gate.py``, ``releases/publish.py``). This table records each staging directory and
its state:

* ``writing``: nothing is charged and no noise exists yet. If the process dies here, the row is
  settled by the next publication or by ``privmob ledger recover`` (state ``abandoned``).
* ``charged``: set in the same transaction as the ledger entries; the noise is drawn and the
  files written after it, then sealed (a seal file beside the staging directory). If the
  process dies before the rename, ``privmob ledger show`` lists it and ``privmob ledger
  recover`` moves a sealed release into place (``published``), or removes an unsealed one or,
  with ``--discard``, any (``discarded``; the budget stays spent in the ledger).
* ``published``: renamed into place.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from privmob.privacy.ledger.rows import Con
    from privmob.privacy.ledger.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS staged_releases (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset     TEXT NOT NULL,
    staging     TEXT NOT NULL,
    moves       TEXT NOT NULL,
    replaced    TEXT,
    pid         INTEGER NOT NULL,
    host        TEXT NOT NULL,
    state       TEXT NOT NULL,
    entry_ids   TEXT,
    spent       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
"""

WRITING, CHARGED, PUBLISHED, DISCARDED, ABANDONED = (
    "writing",
    "charged",
    "published",
    "discarded",
    "abandoned",
)


@dataclass(frozen=True)
class Staged:
    """One staged release."""

    id: int
    dataset: str
    staging: Path
    #: (staged path, final path) renames that publish it, in order
    moves: list[tuple[Path, Path]]
    #: where replaced outputs (``--overwrite``) are moved aside before the rename
    replaced: list[Path]
    pid: int
    host: str
    state: str
    entry_ids: list[int]
    spent: str
    created_at: str

    @property
    def target(self) -> Path:
        return self.moves[0][1] if len(self.moves) == 1 else self.moves[0][1].parent

    def in_place(self) -> bool:
        """True when every rename was done (killed after the rename, before its state was
        set): the release is published."""
        return all(not os.path.lexists(src) and os.path.lexists(final) for src, final in self.moves)

    def owner_dead(self) -> bool:
        """True when the process that wrote it (on this host) is gone."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class StagingTable:
    """The ``staged_releases`` table of a ledger (``path``: its file or database URL, or its
    open :class:`~privmob.privacy.ledger.store.Store`)."""

    def __init__(self, path: str | os.PathLike[str] | Store, *, timeout: float = 60.0) -> None:
        from privmob.privacy.ledger.store import SqliteStore

        self.store = _store(path, timeout)
        self.in_file = isinstance(self.store, SqliteStore)
        if isinstance(self.store, SqliteStore):
            with self.store.connect() as con:
                con.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[Con]:
        with self.store.connect() as con:
            yield con

    def begin(
        self,
        dataset: str,
        staging: Path,
        moves: list[tuple[Path, Path]],
        replaced: list[Path],
    ) -> int:
        """Record a staging directory before anything is written into it (state ``writing``)."""
        now = _now()
        with self._connect() as con:
            if not self.in_file:
                row = {
                    "dataset": dataset,
                    "staging": str(staging),
                    "moves": json.dumps([[str(a), str(b)] for a, b in moves]),
                    "replaced": json.dumps([str(p) for p in replaced]),
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "created_at": now,
                    "updated_at": now,
                }
                got = con.execute("SELECT stage_begin(?::jsonb)", (json.dumps(row),))
                return int(cast("tuple[int]", got.fetchone())[0])  # the new row's id
            cur = con.execute(
                "INSERT INTO staged_releases (dataset, staging, moves, replaced, pid, host, state,"
                " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    dataset,
                    str(staging),
                    json.dumps([[str(a), str(b)] for a, b in moves]),
                    json.dumps([str(p) for p in replaced]),
                    os.getpid(),
                    socket.gethostname(),
                    WRITING,
                    now,
                    now,
                ),
            )
            return int(cast(sqlite3.Cursor, cur).lastrowid or 0)  # (a file: SQLite's cursor)

    def mark_charged(self, con: Con, row: int, entry_ids: list[int], spent: str) -> None:
        """Inside the ledger's charge transaction (``con``): the release is charged."""
        if not self.in_file:
            con.execute(
                "SELECT stage_update(?, ?, ?, ?, ?, ?)",
                (row, CHARGED, json.dumps(entry_ids), spent, WRITING, _now()),
            )
            return
        con.execute(
            "UPDATE staged_releases SET state = ?, entry_ids = ?, spent = ?, updated_at = ? "
            "WHERE id = ? AND state = ?",
            (CHARGED, json.dumps(entry_ids), spent, _now(), row, WRITING),
        )

    def set_state(self, row: int, state: str) -> None:
        with self._connect() as con:
            if not self.in_file:
                con.execute("SELECT stage_update(?, ?, NULL, NULL, NULL, ?)", (row, state, _now()))
                return
            con.execute(
                "UPDATE staged_releases SET state = ?, updated_at = ? WHERE id = ?",
                (state, _now(), row),
            )

    def rows(self, states: tuple[str, ...] = (WRITING, CHARGED)) -> list[Staged]:
        marks = ",".join("?" for _ in states)
        with self._connect() as con:
            rows = cast(  # the columns' types (SCHEMA)
                "Sequence[tuple[int, str, str, str, str | None, int, str, str, str | None, "
                "str | None, str]]",
                con.execute(
                    "SELECT id, dataset, staging, moves, replaced, pid, host, state, entry_ids,"
                    f" spent, created_at FROM staged_releases WHERE state IN ({marks}) ORDER BY id",
                    states,
                ).fetchall(),
            )
        return [
            Staged(
                r[0],
                r[1],
                Path(r[2]),
                [(Path(a), Path(b)) for a, b in json.loads(r[3])],
                [Path(p) for p in json.loads(r[4] or "[]")],
                int(r[5]),
                r[6],
                r[7],
                json.loads(r[8] or "[]"),
                r[9] or "",
                r[10],
            )
            for r in rows
        ]

    def pending(self) -> list[Staged]:
        """Charged releases still staged, and uncharged staging left by dead processes."""
        return [
            s
            for s in self.rows()
            if (s.state == CHARGED and not (s.owner_dead() and s.in_place()))
            or (s.state == WRITING and s.owner_dead())
        ]

    def settle(self) -> None:
        """Mark published the charged rows of dead processes whose renames were all done."""
        for s in self.rows((CHARGED,)):
            if s.owner_dead() and s.in_place():
                self.set_state(s.id, PUBLISHED)


def _store(where: str | os.PathLike[str] | Store, timeout: float = 60.0) -> Store:
    from privmob.privacy.ledger.store import open_store

    if isinstance(where, str | os.PathLike):
        return open_store(where, timeout=timeout)
    return where


def has_staging_table(path: str | os.PathLike[str] | Store) -> bool:
    """Whether a ledger has the table (without creating it)."""
    from privmob.privacy.ledger.store import SqliteStore

    store = _store(path)
    if not isinstance(store, SqliteStore):
        return store.has_table("staged_releases")
    p = store.path
    if not p.exists():
        return False
    con = sqlite3.connect(p)
    try:
        row = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'staged_releases'"
        ).fetchone()
    finally:
        con.close()
    return row is not None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
