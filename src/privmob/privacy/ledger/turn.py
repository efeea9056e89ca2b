"""Charges of an SQLite ledger take their turns in the order they asked.

SQLite serializes writers with a lock on the file that a waiting writer polls: 1 ms apart at
first, then up to 100 ms apart. A charge that has waited a while polls rarely, and a charge
that has just started takes the lock from under it: with 32 processes charging one ledger the
slowest charge waited 3.9 s while the median waited 22 ms (benchmarks/bench_ledger_charge.py,
100,000 entries). A :class:`Turn` queues in the kernel instead: a blocking ``flock`` on a file
beside the ledger (``<ledger>-turn``), held from the start of the write transaction until its
connection closes, wakes the next waiter as soon as the holder is done.

Only fairness rests on it. The lock that makes two charges exclusive is still SQLite's
(``BEGIN IMMEDIATE``): whoever deletes the turn file, or a platform without ``flock``, or a
folder where the file cannot be made (another user's 0600 file, a read-only folder), just
charges as before, in SQLite's order. A turn that is not given within the store's timeout is
given up on (the charge goes on to SQLite's own wait, which says when the ledger stayed
locked), never waited for without end.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from types import ModuleType

try:
    import fcntl as _fcntl

    fcntl: ModuleType | None = _fcntl
except ImportError:  # Windows: no flock; charges wait in SQLite's order
    fcntl = None

SUFFIX = "-turn"

#: the turns this process holds, by ledger (a second connection of the same process that
#: writes while the first is open goes on without queueing behind its own process)
_HELD: dict[str, Turn] = {}
_HELD_LOCK = threading.Lock()


def _forget_in_child() -> None:
    """A forked child shares its parent's open turn files, and a flock lasts until every copy
    is closed: the child closes its copies at once, so that the parent's turn ends when the
    parent gives it, not when a long-lived child exits."""
    for turn in _HELD.values():
        fd, turn._fd = turn._fd, None
        if fd is not None:
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def turn_file(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + SUFFIX)


class Turn:
    """One write transaction's place in the queue of an SQLite ledger's writers."""

    def __init__(self, ledger: Path, timeout: float) -> None:
        self._ledger = ledger
        self._timeout = timeout
        self._fd: int | None = None
        self._abandoned = False
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Wait for this transaction's turn; True when it holds it (False: no turn file could
        be used, or the wait outlasted the timeout; the caller goes on to SQLite's lock)."""
        if fcntl is None:
            return False
        with _HELD_LOCK:
            if str(self._ledger) in _HELD:
                return False
        fd = self._open()
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._wait(fd)
        except OSError:
            os.close(fd)
            return False
        self._hold(fd)
        return True

    def _hold(self, fd: int) -> None:
        self._fd = fd
        with _HELD_LOCK:
            _HELD[str(self._ledger)] = self

    def give(self) -> None:
        """End the turn (closing the file releases the lock)."""
        with self._lock:
            fd, self._fd = self._fd, None
            self._abandoned = True  # a waiter thread still blocked gives its turn back at once
        if fd is not None:
            with _HELD_LOCK:
                _HELD.pop(str(self._ledger), None)
            os.close(fd)

    def _open(self) -> int | None:
        path = turn_file(self._ledger)
        try:  # readable and writable by whoever can write the ledger (a team's shared file)
            mode = stat.S_IMODE(os.stat(self._ledger).st_mode) & 0o666
        except OSError:
            mode = 0o600
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(path, flags, mode)
        except OSError:
            return None

    def _wait(self, fd: int) -> bool:
        """A blocking flock in a thread of its own, so that the wait can end at the timeout:
        the thread then keeps the file and gives the turn back as soon as it gets it."""
        got = threading.Event()

        def queue() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # type: ignore[union-attr]
            except OSError:
                os.close(fd)
                return
            with self._lock:
                if not self._abandoned:
                    self._hold(fd)
                    got.set()
                    return
            os.close(fd)  # too late: the charge went on without its turn

        threading.Thread(target=queue, name="privmob-ledger-turn", daemon=True).start()
        if got.wait(self._timeout):
            return True
        with self._lock:
            if got.is_set():  # given between the timeout and now
                return True
            self._abandoned = True
        return False
