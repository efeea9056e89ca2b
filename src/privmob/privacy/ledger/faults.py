"""What can go wrong with a ledger's store, for both stores (:mod:`privmob.privacy.ledger.store`,
:mod:`privmob.privacy.ledger.pg`): a server lost (before or during a charge's commit), a damaged
file; and the hook a new ledger's custodian key is registered by."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from privmob.errors import BudgetError
from privmob.privacy.ledger.rows import Con


class LedgerUnavailable(BudgetError):
    """The ledger's server could not be reached, or the connection was lost mid-charge
    (nothing was charged)."""


class ChargeOutcomeUnknown(LedgerUnavailable):
    """The connection was lost while the charge was being committed: it may have been made.
    The release stays staged; ``privmob ledger recover`` settles it from the ledger."""


#: registers a new ledger's custodian key (``Ledger._establish``), given its connection and id
Establish = Callable[[Con, str], None]


def is_disk_full(path: Path, exc: BaseException) -> bool:
    """Whether ``exc`` (from SQLite or the OS, on the ledger at ``path``) is a full disk: SQLite
    says so (SQLITE_FULL), the OS does (ENOSPC, EDQUOT), or an I/O error happened where the
    file system has no space left."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        return True
    if code is not None and code & 0xFF in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN):
        try:
            return os.statvfs(path.parent).f_bavail == 0
        except (OSError, AttributeError):  # no statvfs (Windows)
            return False
    return False


def disk_full(path: Path | str, exc: BaseException) -> BudgetError:
    """The ledger could not be written for want of space: nothing was charged (SQLite rolls a
    transaction it cannot write back) and the ledger is not damaged."""
    return BudgetError(
        f"the disk under the ledger {path} is full ({exc}); nothing was charged and the ledger "
        "is unchanged",
        hint=f"free space on the file system of {Path(path).parent} and run it again (the "
        "ledger needs no repair: do not replace it with a backup)",
    )


def damaged(path: Path | str, exc: Exception) -> BudgetError:
    return BudgetError(
        f"ledger damaged: {path} cannot be read as a privacy ledger ({exc}); nothing was charged",
        hint=f"restore it from a backup; check it with: privmob ledger verify --ledger {path}",
    )
