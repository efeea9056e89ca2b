"""Publishing a release: one protocol, in one place.

::

    check the target and its room (before any data is read)
      -> record the staging directory in the ledger (state writing)
      -> charge the ledger; the staged release is marked charged in the same transaction
         (releases/gate.py: only then is the noise drawn)
      -> write every file into a private staging directory beside the target (0700): the
         tables, the map layers, metadata.json naming the ledger entries; fsync
      -> seal: the files' SHA-256 written atomically beside the staging directory
      -> rename the staging directory into place (with --overwrite the old output is moved
         aside first and removed after), fsync the parent directory, remove the seal

A crash leaves one of: nothing charged and no output; a charged, complete output; a charged,
sealed release in its staging directory, that ``privmob ledger show`` lists and
``privmob ledger recover`` moves into place (or discards, the budget staying spent); a charged
release that was never sealed, which ``privmob ledger recover`` removes (its budget stays
spent). A write that fails in the process removes what was staged and says what was charged.
A file is never torn: readers see the folder only after its rename.

:class:`Output` is what a release command publishes to; the one gate
(:func:`privmob.releases.gate.settle`) runs the protocol with it. :func:`publish_charged`
writes a release that was charged before (same staging, seal and rename, no charge).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.errors import OutputError
from privmob.surface import option

if TYPE_CHECKING:
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.entries import Entry
    from privmob.privacy.ledger.rows import Con
    from privmob.privacy.staging import StagingTable
    from privmob.releases.release import Release

#: a writer puts some of a release's files into a directory and returns their paths
Writer = Callable[["Release", Path], list[Path]]

STAGING_MARK = ".privmob-staging-"
REPLACED_MARK = ".privmob-replaced-"
#: bytes assumed per released cell (Parquet, metadata) when estimating the room an output needs
BYTES_PER_CELL = 64
#: room always asked for (metadata, the HTML of a report, file-system blocks)
MIN_FREE_BYTES = 4 * 2**20


class PublishError(OutputError):
    """The output cannot be written (exit code 4). The message says whether anything was
    charged and where a staged release is."""


@dataclass
class Output:
    """Where a release is published: a folder (``items`` None: the staging directory becomes
    the folder) or named files beside ``target`` (a report: ``report.html``, ``report.json``,
    ``report_tables``), each renamed from the staging directory.

    ``data`` writes the files that do not depend on the ledger entries (before the charge);
    ``meta`` those that name them (inside the charge's transaction); ``extra`` more writers
    (e.g. a GeoJSON layer) run with ``data``.
    """

    target: Path
    overwrite: bool = False
    data: Writer | None = None
    meta: Writer | None = None
    items: tuple[str, ...] | None = None
    extra: list[Writer] = field(default_factory=list)
    #: the published paths, once done
    written: list[Path] = field(default_factory=list)
    #: True once the target was checked
    checked: bool = False
    #: SHA-256 of each data file staged (relative name -> hex), recorded in the ledger entries
    staged_hashes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.target = Path(os.path.abspath(self.target))
        if self.data is None or self.meta is None:
            from privmob.releases.files import write_metadata_file, write_tables

            self.data = self.data or write_tables
            self.meta = self.meta or write_metadata_file

    @property
    def parent(self) -> Path:
        return self.target.parent

    def finals(self) -> list[Path]:
        """The paths the release will occupy."""
        if self.items is None:
            return [self.target]
        return [self.parent / name for name in self.items]

    # -- 1. check, before any data is read ------------------------------------------------------
    def check(self, cells: int | None = None) -> Output:
        """Refuse (:class:`PublishError`, nothing read or charged) a target that cannot be
        created and written: an existing file where a folder is wanted, an existing output
        without ``overwrite``, a symbolic link, a parent that is a file or not writable (a
        read-only mount, /proc), too little free space for ``cells`` released cells."""
        ancestor = self.parent
        while not ancestor.exists():
            if ancestor.is_symlink():
                _refuse(f"{ancestor} is a dangling symbolic link")
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            _refuse(f"{ancestor} is a file, not a folder; cannot create {self.target} under it")
        for final in self.finals():
            _check_final(final, self.overwrite, folder=self.items is None)
        _probe(ancestor)  # the parent is created at publication, not before (nothing left)
        self.require_space(cells, ancestor)
        self.checked = True
        return self

    def require_space(self, cells: int | None = None, where: Path | None = None) -> None:
        """Refuse when the target's file system has less room than the release needs (estimated
        from the public domain size: ``cells`` released cells)."""
        need = MIN_FREE_BYTES + BYTES_PER_CELL * int(cells or 0)
        where = where or self.parent
        while not where.exists():
            where = where.parent
        try:
            free = shutil.disk_usage(where).free  # statvfs f_bavail x f_frsize; also Windows
        except OSError:
            return
        if free < need:
            _refuse(
                f"the disk of {where} has {free / 2**20:.1f} MiB free; the release needs "
                f"about {need / 2**20:.1f} MiB"
            )

    # -- 2-5. stage, charge, draw, seal, rename ------------------------------------------------
    def begin(self, ledger: Ledger | None = None, dataset: str = "") -> Staging:
        """Choose the private staging directory beside the target and, with a ``ledger``,
        record it (state ``writing``) before anything is charged or written; the uncharged
        staging of dead processes is removed first."""
        if not self.checked:
            self.check()
        from privmob.privacy.staging import StagingTable

        token = secrets.token_hex(6)
        staging = self.parent / f".{self.target.name}{STAGING_MARK}{token}"
        moves = self._moves(staging)
        # with --overwrite: where the old outputs are moved aside (recorded: recover replays it)
        replaced = [_replaced_path(final, token) for _, final in moves] if self.overwrite else []
        handle = Staging(staging, moves, replaced, ledger, dataset)
        if ledger is None:
            return handle
        try:
            handle.table = StagingTable(ledger.store)
            cleanup_abandoned(handle.table)
            handle.row = handle.table.begin(dataset, staging, moves, replaced)
        except sqlite3.Error as exc:
            raise PublishError(
                f"cannot record the release in the ledger {ledger.path}: {exc}; nothing "
                "was charged or published",
                hint="check the room and permissions of the ledger's disk",
            ) from exc
        return handle

    def write(self, release: Release, handle: Staging) -> None:
        """Write every file of ``release`` (its tables, the ``extra`` writers' files such as
        map layers, then ``metadata.json``) into the staging directory, fsync them, and seal
        the staged release (:func:`seal`): from then on ``ledger recover`` can finish it."""
        staging = handle.staging
        self.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(staging, 0o700)
        assert self.data is not None and self.meta is not None
        for writer in [self.data, *self.extra]:
            writer(release, staging)
        self.meta(release, staging)
        _fsync_tree(staging)
        self.staged_hashes = seal(staging)

    def place(self, release: Release, handle: Staging) -> list[Path]:
        """Rename the sealed release into place (the last step), mark it published."""
        from privmob.privacy.ledger.store import LedgerUnavailable
        from privmob.privacy.staging import PUBLISHED

        try:
            place(handle.moves, handle.replaced)
        except OSError as exc:
            entries = release.ledger_entries
            spent = spent_text(entries) if entries else "nothing"
            ledger = handle.ledger
            where = f" to '{handle.dataset}' in {ledger.path}" if ledger is not None else ""
            raise PublishError(
                f"charged {spent}{where} but could not move the release into {self.target}: "
                f"{_why(exc)}; the complete release is staged in {handle.staging}",
                hint="finish it with: privmob ledger recover"
                + (f" --ledger {ledger.path}" if ledger is not None else ""),
            ) from exc
        unseal(handle.staging)
        if handle.table is not None:
            # published and charged; if the ledger is unreachable now, the row is settled
            # later (`ledger recover`, the next release: renames done, process dead)
            with contextlib.suppress(LedgerUnavailable, sqlite3.Error):
                handle.table.set_state(handle.row, PUBLISHED)
        self.written = self._published(release)
        return self.written

    def publish(self, release: Release) -> list[Path]:
        """Stage, seal and rename a release charged before (no ledger involved)."""
        handle = self.begin()
        try:
            self.write(release, handle)
        except OSError as exc:
            handle.remove()
            raise PublishError(
                f"cannot write the release beside {self.target}: {_reason(exc)}; nothing was "
                "published",
                hint=f"free some room or choose another {option('output')}",
            ) from exc
        except BaseException:
            handle.remove()
            raise
        return self.place(release, handle)

    def _moves(self, staging: Path) -> list[tuple[Path, Path]]:
        if self.items is None:
            return [(staging, self.target)]
        return [(staging / name, self.parent / name) for name in self.items]

    def _published(self, release: Release) -> list[Path]:
        if self.items is None:
            return sorted(p for p in self.target.iterdir())
        return self.finals()


@dataclass
class Staging:
    """One release being published: its private staging directory, the renames that publish
    it, where replaced outputs go, and its row in the ledger's staging table (with a ledger)."""

    staging: Path
    moves: list[tuple[Path, Path]]
    replaced: list[Path]
    ledger: Ledger | None = None
    dataset: str = ""
    table: StagingTable | None = None
    row: int = 0

    def mark_charged(self, con: Con, entries: list[Entry]) -> None:
        """Inside the charge's transaction (``con``: the ledger's connection, passed along): the
        release is paid for (state ``charged``)."""
        if self.table is not None:
            ids = [e.id for e in entries]
            self.table.mark_charged(con, self.row, ids, spent_text(entries))

    def remove(self) -> None:
        """Remove the staged files and their seal."""
        shutil.rmtree(self.staging, ignore_errors=True)
        unseal(self.staging)

    def settle(self, state: str) -> None:
        """Remove the staged files and record ``state`` (``abandoned``: never charged;
        ``discarded``: charged, never published). The ledger may be what failed: then the row
        is settled by the next release or ``ledger recover``."""
        from privmob.privacy.ledger.store import LedgerUnavailable

        self.remove()
        if self.table is not None:
            with contextlib.suppress(LedgerUnavailable, sqlite3.Error):
                self.table.set_state(self.row, state)


#: the seal of a staged release: a file beside its staging directory, written once every file
#: is fsync'd, naming each file's SHA-256 (``ledger recover`` publishes only a sealed release
#: whose files still match it)
SEAL_SUFFIX = ".sealed"


def seal_path(staging: Path) -> Path:
    return staging.parent / f"{staging.name}{SEAL_SUFFIX}"


def staged_files(staging: Path) -> dict[str, str]:
    """SHA-256 of every file under ``staging`` (relative name -> hex)."""
    return {
        str(p.relative_to(staging)): _sha256(p)
        for p in sorted(staging.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def seal(staging: Path) -> dict[str, str]:
    """Seal a complete, fsync'd staged release: its files' hashes, written atomically beside
    it. Returns the hashes."""
    import json

    hashes = staged_files(staging)
    final = seal_path(staging)
    tmp = final.with_name(final.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
    try:
        os.write(fd, json.dumps(hashes, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, final)
    _fsync_dir(final.parent)
    return hashes


def seal_problem(staging: Path) -> str | None:
    """Why the staged release in ``staging`` cannot be published (``None``: it is sealed and
    its files match the seal)."""
    import json

    path = seal_path(staging)
    if not path.is_file():
        return (
            "it was never sealed (the process stopped after the charge, before every file "
            "was written)"
        )
    try:
        sealed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its seal cannot be read ({exc})"
    if staged_files(staging) != sealed:
        return "its files differ from its seal"
    return None


def unseal(staging: Path) -> None:
    """Remove the seal of ``staging`` (published or removed)."""
    for p in (seal_path(staging), seal_path(staging).with_name(seal_path(staging).name + ".tmp")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def publish_charged(release: Release, output: Output) -> list[Path]:
    """Write a release charged before: check, stage, fsync, rename (no ledger involved)."""
    from privmob.errors import ConfigError

    if release.ledger_entry is None:
        raise ConfigError("a release must be charged to the ledger before it is written")
    return output.publish(release)


def place(moves: list[tuple[Path, Path]], replaced: list[Path]) -> None:
    """Rename each staged path into place, open them up to the user's usual permissions, fsync
    the parents. ``replaced`` (``--overwrite``; empty otherwise): where an existing output is
    moved aside first, removed after. Idempotent: a move already done is skipped (``ledger
    recover`` replays it)."""
    from privmob.engine.rundir import original_umask

    mask = original_umask()
    for i, (src, final) in enumerate(moves):
        if not os.path.lexists(src):
            continue  # moved before a crash
        _open_up(src, mask)
        if os.path.lexists(final) and not _empty_dir(final):  # an empty one: the rename replaces it
            if not replaced:
                raise FileExistsError(errno.EEXIST, "the output exists", str(final))
            os.rename(final, replaced[i])
        os.rename(src, final)
        _fsync_dir(final.parent)
    for aside in replaced:
        if os.path.isdir(aside) and not os.path.islink(aside):
            shutil.rmtree(aside, ignore_errors=True)
        elif os.path.lexists(aside):
            os.unlink(aside)
    staging_dirs = {src.parent for src, _ in moves if STAGING_MARK in src.parent.name}
    for d in staging_dirs:
        with contextlib.suppress(OSError):
            os.rmdir(d)


def cleanup_abandoned(table: StagingTable) -> list[Path]:
    """Remove the staging directories of uncharged releases whose process died."""
    from privmob.privacy.staging import ABANDONED, WRITING

    removed = []
    for s in table.rows((WRITING,)):
        if s.owner_dead():
            shutil.rmtree(s.staging, ignore_errors=True)
            table.set_state(s.id, ABANDONED)
            removed.append(s.staging)
    return removed


# -- helpers -----------------------------------------------------------------------------------


def _refuse(message: str) -> None:
    raise PublishError(
        f"{message}; nothing was read, charged or written",
        hint=f"choose another {option('output')} (or pass {option('overwrite')} to replace an "
        "earlier release)",
    )


def _reason(exc: BaseException) -> str:
    return _why(exc) if isinstance(exc, OSError) else str(exc)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _check_final(final: Path, overwrite: bool, *, folder: bool) -> None:
    try:
        st = os.lstat(final)
    except FileNotFoundError:
        return
    except OSError as exc:
        _refuse(f"cannot inspect {final}: {_why(exc)}")
    if stat.S_ISLNK(st.st_mode):
        _refuse(f"{final} is a symbolic link; privmob does not write through links")
    is_dir = stat.S_ISDIR(st.st_mode)
    if folder and not is_dir:
        _refuse(f"{final} exists and is a file; the output is a folder")
    if folder and is_dir and not any(final.iterdir()):
        return  # an empty folder: replaced by the rename
    if not overwrite:
        _refuse(f"output {final} exists")
    if folder and not (final / "metadata.json").is_file():
        _refuse(
            f"{final} is a folder that is not a privmob release; {option('overwrite')} replaces "
            "only one"
        )


#: do not follow a symbolic link when creating the probe (POSIX; Windows has no such flag)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _probe(directory: Path) -> None:
    """Create, write, fsync and remove a file in ``directory``: the honest test of a place
    (read-only mounts, /proc and ACLs defeat ``os.access``)."""
    probe = directory / f".privmob-probe-{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        try:
            os.write(fd, b"privmob")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(probe)
        _refuse(f"cannot write in {directory}: {_why(exc)}")


def _empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _replaced_path(final: Path, token: str) -> Path:
    return final.parent / f".{final.name}{REPLACED_MARK}{token}"


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_up(path: Path, mask: int) -> None:
    """The staged files are 0600 in a 0700 folder; a published release gets the permissions
    the user's umask gives (it is charged and public)."""
    paths = [path] + (list(path.rglob("*")) if path.is_dir() else [])
    for p in paths:
        if p.is_symlink():
            continue
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def spent_text(entries: list[Entry]) -> str:
    eps = sum(e.cost.epsilon for e in entries)
    delta = sum(e.cost.delta for e in entries)
    unit = entries[0].cost.unit if entries else ""
    ids = ", ".join(f"#{e.id}" for e in entries)
    which = "entry" if len(entries) == 1 else "entries"
    return f"epsilon={eps:.6g}, delta={delta:.3g} per {unit} (ledger {which} {ids})"
