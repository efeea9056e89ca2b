"""``privmob ledger recover``: finish or discard releases a crash left staged after their charge.

A staged release is complete (its files were fsync'd before the charge committed), so finishing
it is only the rename the crashed process did not do (``releases/publish.py``). Discarding removes
the staged files and records it; the ledger entries stay (the epsilon was spent: the noisy
release existed on disk).
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
from privmob.releases.publish import PublishError, place

if TYPE_CHECKING:
    from privmob.privacy.ledger_store import Store


def recover_staged(ledger_path: Path | str | Store, *, discard: bool = False) -> list[str]:
    """Finish (or with ``discard`` remove) every charged staged release of the ledger, and
    remove the uncharged staging of dead processes. Returns one line per release handled."""
    if not has_staging_table(ledger_path):
        return []
    table = StagingTable(ledger_path)
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
        if discard:
            shutil.rmtree(s.staging, ignore_errors=True)
            table.set_state(s.id, DISCARDED)
            lines.append(
                f"discarded staged release #{s.id} of '{s.dataset}' ({s.staging}); it was "
                f"charged {s.spent}, which stays spent"
            )
            continue
        _finish(s)
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
