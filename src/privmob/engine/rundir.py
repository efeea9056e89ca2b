"""One private working directory per run, and nothing of it left behind.

Everything privmob writes while it computes (the user buckets of ``engine/buckets.py``, DuckDB's
``temp_directory``, Spark's local dir when it runs locally) holds personal records. It goes into
one directory per process, created by :func:`tempfile.mkdtemp` (mode 0700) under a per-user base
(``<parent>/privmob-<uid>``, mode 0700, owned by this user: checked, never trusted), while the
process umask is 0077 so that every file in it is 0600 from the start.

The directory is removed on normal exit (:mod:`atexit`), on an exception (the ``with`` block /
:func:`close_run_dir`), and on SIGINT and SIGTERM (handlers that unwind the stack by raising
:class:`SystemExit`, so that ``finally`` blocks run). A process killed with SIGKILL cannot clean
up: its directory records the pid and host that own it, and the next run removes the
directories of dead processes before it starts and reports them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TypeAlias

from privmob.errors import ConfigError
from privmob.surface import option

#: prefix of a run directory under the per-user base
RUN_PREFIX = "run-"
#: the file in a run directory that names its owner process
OWNER_FILE = "owner.json"
#: POSIX owners and modes (Linux, macOS); on Windows the per-user temporary directory is
#: private to its user already and ``os.geteuid`` does not exist
_POSIX = hasattr(os, "geteuid")
#: what ``signal.signal`` returns and takes back: a handler, ``SIG_DFL``/``SIG_IGN``, or None
#: (a handler set outside Python)
SignalHandler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def base_dir(parent: str | os.PathLike[str] | None = None) -> Path:
    """The per-user base ``<parent>/privmob-<uid>`` (parent: ``--spill-dir`` or the system temp
    directory), created 0700; refused if it is not a directory owned by this user with no access
    for others (a shared or planted directory would expose the run's records)."""
    root = Path(parent) if parent else Path(tempfile.gettempdir())
    base = root / f"privmob-{_user_id()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            base.mkdir(mode=0o700)
        st = os.lstat(base)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the private working directory under {root}: {exc.strerror or exc}",
            hint=f"pass {option('spill_dir')} with a writable directory on a disk with room "
            "for the input",
        ) from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ConfigError(
            f"{base} is not a directory (a symbolic link or a file); refusing to put records there",
            hint=f"remove it, or pass {option('spill_dir')} with a private directory",
        )
    if _POSIX and st.st_uid != os.geteuid():
        raise ConfigError(
            f"{base} belongs to another user (uid {st.st_uid}); refusing to put records there",
            hint=f"remove it, or pass {option('spill_dir')} with a private directory",
        )
    if _POSIX and st.st_mode & 0o077:
        os.chmod(base, 0o700)  # ours: close it
    return base


def _user_id() -> str:
    """This user's id for the base directory's name: the effective uid, or on Windows the
    login name (the base is under the user's own temporary directory there)."""
    if _POSIX:
        return str(os.geteuid())
    import getpass

    return "".join(ch for ch in getpass.getuser() if ch.isalnum() or ch in "-_") or "user"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (any user's). psutil, not ``os.kill(pid, 0)``: on
    Windows signal 0 is CTRL_C_EVENT."""
    import psutil

    return bool(psutil.pid_exists(pid))


def stale_run_dirs(base: Path) -> list[Path]:
    """Run directories under ``base`` whose owner process (on this host) is dead."""
    import socket  # when the engine starts, not before a release's plan line (issue 43)

    host = socket.gethostname()
    stale = []
    for path in sorted(base.glob(f"{RUN_PREFIX}*")):
        try:
            owner = json.loads((path / OWNER_FILE).read_text())
            pid, owner_host = int(owner["pid"]), str(owner["host"])
        except (OSError, ValueError, KeyError, TypeError):
            # no owner file: created and killed before it was written (or not ours): its
            # mtime tells whether a live process could still be writing it
            try:
                if os.lstat(path).st_mtime > _now() - 60:
                    continue
            except OSError:
                continue
            stale.append(path)
            continue
        if owner_host == host and pid != os.getpid() and not _alive(pid):
            stale.append(path)
    return stale


def _now() -> float:
    import time

    return time.time()


def remove_stale(base: Path) -> list[Path]:
    """Remove the run directories of dead processes; returns what was removed."""
    removed = []
    for path in stale_run_dirs(base):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


@dataclass
class RunDir:
    """This process's private working directory (see the module docstring)."""

    path: Path
    base: Path
    removed_stale: list[Path] = field(default_factory=list)
    original_umask: int = 0o022
    _previous_handlers: dict[int, SignalHandler] = field(default_factory=dict)

    def sub(self, name: str) -> Path:
        """A subdirectory (0700) for one use: ``duckdb``, ``buckets``, ``spark``."""
        p = self.path / name
        p.mkdir(mode=0o700, exist_ok=True)
        return p

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


_CURRENT: RunDir | None = None
#: the signal that stopped the run, if one did
_RECEIVED: list[int] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # remove the records first, then unwind: finally blocks and context managers run
    _RECEIVED.append(signum)
    close_run_dir()
    raise SystemExit(128 + signum)


#: the signals that stop a run with its directory removed: SIGTERM and SIGINT everywhere,
#: SIGHUP (the terminal closed) where the platform has it (not on Windows)
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


def interrupted() -> int | None:
    """The signal that stopped this run, if one did (its error is then not the input's)."""
    return _RECEIVED[0] if _RECEIVED else None


def interruption_message(signum: int, charged: bool) -> str:
    """The one line printed when a signal stopped the run."""
    name = signal.Signals(signum).name
    if charged:
        return (
            f"privmob: interrupted by {name} after the release was charged to the ledger; "
            "its working directory was removed (privmob ledger recover completes a staged "
            "release)"
        )
    return (
        f"privmob: interrupted by {name}; nothing was charged to the ledger and its working "
        "directory was removed"
    )


@contextmanager
def exit_on_signal(charged: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Around a command: when a signal stopped the run, exit with 128 + its number and one line
    (``charged``: whether this process charged the ledger), whatever the unwinding turned it
    into (DuckDB reports an interrupted query as an error)."""
    try:
        yield
    except BaseException:
        if not _RECEIVED:
            raise
        print(interruption_message(_RECEIVED[0], charged()), file=sys.stderr)
        raise SystemExit(128 + _RECEIVED[0]) from None


def open_run_dir(parent: str | os.PathLike[str] | None = None, *, report: bool = True) -> RunDir:
    """This process's run directory, created on first use (removing the run directories of dead
    processes first, reported on stderr). ``parent``: ``--spill-dir``."""
    global _CURRENT
    if _CURRENT is not None and _CURRENT.path.exists():
        if parent is None or _CURRENT.base == base_dir(parent):
            return _CURRENT
        close_run_dir()
    base = base_dir(parent)
    removed = remove_stale(base)
    if removed and report:
        print(
            f"privmob: removed {len(removed)} working director"
            f"{'y' if len(removed) == 1 else 'ies'} left by killed runs under {base}",
            file=sys.stderr,
        )
    old_umask = os.umask(0o077)  # every file of the run is 0600 from the start
    path = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=base))
    import socket

    owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now()}
    (path / OWNER_FILE).write_text(json.dumps(owner))
    run = RunDir(path, base, removed, old_umask)
    _CURRENT = run
    atexit.register(close_run_dir)
    try:
        for sig in STOP_SIGNALS:
            run._previous_handlers[sig] = signal.signal(sig, _on_signal)
    except ValueError:  # not the main thread: signals stay as they are; atexit still cleans
        pass
    return run


def current_run_dir() -> RunDir | None:
    """The run directory if one is open."""
    return _CURRENT


def original_umask() -> int:
    """The umask the process had before the run directory closed it to 0077 (for outputs)."""
    if _CURRENT is not None:
        return _CURRENT.original_umask
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def close_run_dir() -> None:
    """Remove this process's run directory and restore the umask and signal handlers."""
    global _CURRENT
    run, _CURRENT = _CURRENT, None
    if run is None:
        return
    run.remove()
    os.umask(run.original_umask)
    for sig, handler in run._previous_handlers.items():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
