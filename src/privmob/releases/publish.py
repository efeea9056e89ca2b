"""Publishing a release: one protocol, in one place.

::

    check the target (before any data is read)
      -> write every file into a private staging directory beside the target (0700), fsync
      -> charge the ledger; the staged release is recorded in the same transaction, and the
         files that name the ledger entries (metadata.json) are written inside it
      -> rename the staging directory into place (with --overwrite the old output is moved
         aside first and removed after), fsync the parent directory

A crash leaves one of: nothing charged and no output; a charged, complete output; a charged
release, complete in its staging directory, that ``privmob ledger show`` lists and
``privmob ledger recover`` moves into place (or discards, the epsilon staying spent). A file is
never torn: readers see the folder only after its rename. An uncharged staging directory left by
a killed process is removed by the next publication to the same ledger.

:class:`Output` is what a release command publishes to; :class:`~privmob.releases.base.
Accountant` carries it and runs the protocol in its ``charge``, so each release function keeps
charging once. :func:`publish_charged` writes a release that was charged before (same staging
and rename, no charge).
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
from typing import TYPE_CHECKING, Any

from privmob.errors import OutputError

if TYPE_CHECKING:
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger_entries import Entry
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

    # -- 2-4. stage, charge, rename ----------------------------------------------------------
    def publish(
        self,
        release: Release,
        charge: Callable[[Callable[[Any, list[Entry]], None]], list[Entry]] | None,
        ledger: Ledger | None = None,
        dataset: str = "",
        progress: Callable[[str], None] | None = None,
    ) -> list[Path]:
        """Stage ``release``'s files, charge (``charge(within)`` runs the ledger transaction; None
        for a release charged before), rename into place. Returns the published paths.
        ``progress`` is told the charge and the move as such (the writers name their files)."""
        step = progress or (lambda _message: None)
        from privmob.privacy.ledger_store import ChargeOutcomeUnknown, LedgerUnavailable
        from privmob.privacy.staging import ABANDONED, PUBLISHED, StagingTable

        if not self.checked:
            self.check()
        token = secrets.token_hex(6)
        staging = self.parent / f".{self.target.name}{STAGING_MARK}{token}"
        moves = self._moves(staging)
        # with --overwrite: where the old outputs are moved aside (recorded: recover replays it)
        replaced = [_replaced_path(final, token) for _, final in moves] if self.overwrite else []
        table = None
        row = 0
        ledger_at = ledger.path if ledger is not None else ""
        if ledger is not None and charge is not None:
            try:
                table = StagingTable(ledger.store)
                cleanup_abandoned(table)
                row = table.begin(dataset, staging, moves, replaced)
            except sqlite3.Error as exc:
                raise PublishError(
                    f"cannot record the release in the ledger {ledger.path}: {exc}; nothing "
                    "was charged or published",
                    hint="check the room and permissions of the ledger's disk",
                ) from exc
        charged = False
        try:
            try:
                self.parent.mkdir(parents=True, exist_ok=True)
                os.mkdir(staging, 0o700)
                assert self.data is not None and self.meta is not None
                for writer in [self.data, *self.extra]:
                    for path in writer(release, staging):
                        if path.is_file():
                            name = str(path.relative_to(staging))
                            self.staged_hashes[name] = _sha256(path)
                if charge is None:
                    self.meta(release, staging)
                _fsync_tree(staging)
            except OSError as exc:
                raise PublishError(
                    f"cannot write the release beside {self.target}: {_reason(exc)}; nothing was "
                    "charged or published",
                    hint="free some room or choose another --output",
                ) from exc
            if charge is not None:
                assert table is not None

                def within(con: Any, entries: list[Entry]) -> None:
                    release.ledger_entries = entries
                    release.ledger_entry = entries[-1]
                    try:
                        assert self.meta is not None
                        self.meta(release, staging)
                        _fsync_tree(staging)
                    except BaseException:
                        release.ledger_entries = []
                        release.ledger_entry = None
                        raise
                    spent = _spent_text(entries)
                    table.mark_charged(con, row, [e.id for e in entries], spent)

                step("charging the privacy ledger")
                try:
                    charge(within)
                except (OSError, sqlite3.Error) as exc:  # rolled back: nothing charged
                    raise PublishError(
                        f"cannot write the release beside {self.target}: {_reason(exc)}; "
                        "nothing was charged or published",
                        hint="free some room or choose another --output",
                    ) from exc
                charged = True
        except BaseException as exc:
            if not charged and isinstance(exc, ChargeOutcomeUnknown):
                # the server went away while committing: the charge may or may not be made;
                # the staged release stays for `ledger recover` (published if charged, else
                # removed), never published now and never removed while it may be paid for
                raise PublishError(
                    f"{exc.message}; the release stays staged in {staging}",
                    hint=f"when the ledger is back: privmob ledger recover --ledger {ledger_at}",
                ) from exc
            if not charged:
                shutil.rmtree(staging, ignore_errors=True)
                if table is not None:
                    # the ledger may be what failed: the row is settled by the next release
                    # or `ledger recover` (its process is dead by then)
                    with contextlib.suppress(LedgerUnavailable, sqlite3.Error):
                        table.set_state(row, ABANDONED)
            raise
        step("moving the release into place")
        try:
            place(moves, replaced)
        except OSError as exc:
            entries = release.ledger_entries
            spent = _spent_text(entries) if entries else "nothing"
            where = f" to '{dataset}' in {ledger.path}" if ledger is not None else ""
            raise PublishError(
                f"charged {spent}{where} but could not move the release into {self.target}: "
                f"{_why(exc)}; the complete release is staged in {staging}",
                hint="finish it with: privmob ledger recover"
                + (f" --ledger {ledger.path}" if ledger is not None else ""),
            ) from exc
        if table is not None:
            # published and charged; if the ledger is unreachable now, the row is settled
            # later (`ledger recover`, the next release: renames done, process dead)
            with contextlib.suppress(LedgerUnavailable, sqlite3.Error):
                table.set_state(row, PUBLISHED)
        self.written = self._published(release)
        return self.written

    def _moves(self, staging: Path) -> list[tuple[Path, Path]]:
        if self.items is None:
            return [(staging, self.target)]
        return [(staging / name, self.parent / name) for name in self.items]

    def _published(self, release: Release) -> list[Path]:
        if self.items is None:
            return sorted(p for p in self.target.iterdir())
        return self.finals()


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
    return output.publish(release, None)


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
        hint="choose another --output (or pass --overwrite to replace an earlier release)",
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
        _refuse(f"{final} is a folder that is not a privmob release; --overwrite replaces only one")


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


def _spent_text(entries: list[Entry]) -> str:
    eps = sum(e.cost.epsilon for e in entries)
    delta = sum(e.cost.delta for e in entries)
    unit = entries[0].cost.unit if entries else ""
    ids = ", ".join(f"#{e.id}" for e in entries)
    which = "entry" if len(entries) == 1 else "entries"
    return f"epsilon={eps:.6g}, delta={delta:.3g} per {unit} (ledger {which} {ids})"
