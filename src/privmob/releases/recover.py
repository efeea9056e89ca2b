"""``privmob ledger recover``: finish or discard releases a crash left staged after their charge.

The charge is committed before the noise is drawn (``releases/gate.py``), so a process killed
after it leaves a paid release that may be complete or not. A *sealed* one (every file written
and fsync'd, their hashes in the seal beside the staging directory: ``releases/publish.py``) is
finished by the rename the crashed process did not do, when its files still match the seal. An
unsealed one cannot be finished (its noise died with the process): it is removed. Discarding
(``--discard``, or an unsealed release) removes the staged files and records it; the ledger
entries stay (the budget was spent).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.privacy.staging import (
    ABANDONED,
    CHARGED,
    DISCARDED,
    PUBLISHED,
    Staged,
    StagingTable,
    has_staging_table,
)
from privmob.releases.publish import PublishError, place, seal_path, seal_problem, unseal

if TYPE_CHECKING:
    from privmob.privacy.ledger.store import Store


def recover_staged(ledger_path: Path | str | Store, *, discard: bool = False) -> list[str]:
    """Finish (or with ``discard`` remove) every charged staged release of the ledger, and
    remove the uncharged staging of dead processes. Returns one line per release handled."""
    if not has_staging_table(ledger_path):
        return []
    table = StagingTable(ledger_path)
    for s in table.rows((CHARGED,)):  # killed after the rename: its seal is left beside it
        if s.owner_dead() and s.in_place():
            unseal(s.staging)
    table.settle()  # killed after the rename, before the state was set: published
    lines = []
    for s in table.pending():
        if s.state != CHARGED:  # uncharged, its process dead: never published, never charged
            shutil.rmtree(s.staging, ignore_errors=True)
            table.set_state(s.id, ABANDONED)
            lines.append(f"removed uncharged staging of a killed run: {s.staging}")
            continue
        if not s.owner_dead():
            lines.append(f"staged release #{s.id} is still being published by process {s.pid}")
            continue
        problem = None if discard else seal_problem(s.staging)
        if discard or (problem is not None and not _was_sealed(s.staging)):
            shutil.rmtree(s.staging, ignore_errors=True)
            unseal(s.staging)
            table.set_state(s.id, DISCARDED)
            why = "" if discard else f": {problem}"
            lines.append(
                f"discarded staged release #{s.id} of '{s.dataset}' ({s.staging}){why}; it was "
                f"charged {s.spent}, which stays spent"
            )
            continue
        if problem is not None:  # sealed, but its files changed since: never published
            raise PublishError(
                f"staged release #{s.id} in {s.staging}: {problem}; it is not published",
                hint="look at what changed it, then discard it: privmob ledger recover --discard",
            )
        _finish(s)
        unseal(s.staging)
        table.set_state(s.id, PUBLISHED)
        lines.append(
            f"published staged release #{s.id} of '{s.dataset}' into {s.target} (charged {s.spent})"
        )
    return lines


def _finish(s: Staged) -> None:
    missing = [src for src, final in s.moves if not src.exists() and not final.exists()]
    if missing:
        raise PublishError(
            f"staged release #{s.id}: {missing[0]} is gone; it cannot be finished",
            hint="discard it: privmob ledger recover --discard",
        )
    try:  # the old output is replaced only if the release was asked to (--overwrite)
        place(s.moves, s.replaced)
    except OSError as exc:
        raise PublishError(
            f"staged release #{s.id} could not be moved into {s.target}: "
            f"{exc.strerror or exc}; it stays staged in {s.staging}",
            hint="move what is at the target away, then run privmob ledger recover again; or "
            "discard it with --discard",
        ) from exc


def _was_sealed(staging: Path) -> bool:
    return seal_path(staging).exists()
