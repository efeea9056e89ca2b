"""The release protocol (check, stage, fsync, charge, rename) under faults, with real processes.

Each fault here made the old code charge the ledger and then fail with a traceback or a torn
output (the output was written after the charge, straight into its folder)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash import (
    KILL_BEFORE_RENAME,
    ROOT,
    classify,
    complete_release,
    kill_od_at,
    kill_od_in_publication,
    make_inputs,
    od_args,
    run_od,
    run_privmob,
)

from privmob.privacy.ledger import Ledger
from privmob.privacy.staging import CHARGED, StagingTable


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("publish")
    make_inputs(w)
    return w


def _flat(text: str) -> str:
    """Console text with its line wrapping undone."""
    return " ".join(text.split())


def _spent(work: Path) -> int:
    return len(Ledger(work / "ledger.sqlite").entries("d"))


def _refused_before_charge(work: Path, out: Path, res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 4, res.stderr
    assert "Traceback" not in _flat(res.stderr) and "nothing was" in _flat(res.stderr), res.stderr


def test_existing_file_where_the_folder_goes(work: Path) -> None:
    out = work / "a-file"
    out.write_text("not a folder")
    before = _spent(work)
    res = run_od(work, out)
    _refused_before_charge(work, out, res)
    assert "is a file" in _flat(res.stderr)
    assert _spent(work) == before and out.read_text() == "not a folder"


def test_proc_is_refused_before_charge(work: Path) -> None:
    before = _spent(work)
    res = run_od(work, Path("/proc/privmob-od"))
    _refused_before_charge(work, Path("/proc/privmob-od"), res)
    assert _spent(work) == before


def test_symlink_at_the_output_is_not_followed(work: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = work / "link-out"
    link.symlink_to(elsewhere)
    before = _spent(work)
    res = run_od(work, link)
    _refused_before_charge(work, link, res)
    assert "symbolic link" in _flat(res.stderr)
    assert _spent(work) == before and not any(elsewhere.iterdir())


def test_read_only_directory(work: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)]).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        before = _spent(work)
        res = run_od(work, ro / "out")
        _refused_before_charge(work, ro / "out", res)
        assert _spent(work) == before
    finally:
        subprocess.run(["umount", str(ro)])


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))
from privmob.cli import main
main(sys.argv[1:])
"""


def test_full_disk_while_writing_is_charged_and_said(tmp_path: Path) -> None:
    """A disk that fills while the release is written (a file-size limit in the child), after
    the room was checked: the charge was committed before the noise existed (the one gate),
    so the failed write costs its budget; one line says what was spent, exit 4, no output and
    nothing staged left."""
    work = tmp_path / "w"
    make_inputs(work, users=3000, k=24)  # 331,776 OD cells: well above 150 kB of Parquet
    out = work / "out"
    res = run_od(work, out, script=FULL_DISK)
    assert res.returncode == 4, res.stderr
    said = _flat(res.stderr)
    assert "Traceback" not in said and "budget stays spent" in said, res.stderr
    assert "charged epsilon=0.5" in said and "nothing was published" in said
    assert _spent(work) == 1 and not out.exists()
    assert not [p for p in work.iterdir() if p.name.startswith(".out")]
    assert StagingTable(work / "ledger.sqlite").pending() == []  # settled: discarded


#: a child that dies (SIGKILL) after the charge, while its files are written (before the seal)
KILL_BEFORE_SEAL = """
import os, signal, sys
from privmob.releases import publish
publish.seal = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
from privmob.cli import main
main(sys.argv[1:])
"""


def test_kill_before_the_seal_is_removed_by_recover(work: Path) -> None:
    """SIGKILL after the charge, before the staged files were sealed: the release cannot be
    finished (its noise died with the process): ``ledger recover`` removes it, says why, and
    the budget stays spent; a staged release that was never sealed is never published."""
    out = work / "unsealed"
    before = _spent(work)
    assert run_od(work, out, script=KILL_BEFORE_SEAL).returncode == -9
    assert _spent(work) == before + 1 and not out.exists()
    [staged] = [s for s in StagingTable(work / "ledger.sqlite").pending() if s.target == out]
    assert staged.state == CHARGED and staged.staging.exists()
    led = str(work / "ledger.sqlite")
    show = subprocess.run(
        [sys.executable, "-m", "privmob", "ledger", "show", "--ledger", led],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert "never written whole" in _flat(show.stdout), show.stdout
    res = subprocess.run(
        [sys.executable, "-m", "privmob", "ledger", "recover", "--ledger", led],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr
    said = _flat(res.stdout)
    assert "never sealed" in said and "stays spent" in said, said
    assert not staged.staging.exists() and not out.exists()
    assert _spent(work) == before + 1


def test_a_sealed_release_changed_on_disk_is_not_published(work: Path) -> None:
    out = work / "tampered"
    assert run_od(work, out, script=KILL_BEFORE_RENAME).returncode == -9
    [staged] = [s for s in StagingTable(work / "ledger.sqlite").pending() if s.target == out]
    (staged.staging / "od.parquet").write_bytes(b"not the release")
    led = str(work / "ledger.sqlite")
    res = subprocess.run(
        [sys.executable, "-m", "privmob", "ledger", "recover", "--ledger", led],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode != 0 and "differ from its seal" in _flat(res.stderr), res.stderr
    assert not out.exists()
    discard = subprocess.run(
        [sys.executable, "-m", "privmob", "ledger", "recover", "--discard", "--ledger", led],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert discard.returncode == 0 and not staged.staging.exists()


def test_kill_between_charge_and_rename_is_recoverable(work: Path) -> None:
    """SIGKILL after the charge committed, before the rename: the release is staged, complete;
    ``ledger show`` reports it and ``ledger recover`` moves it into place."""
    out = work / "killed"
    before = _spent(work)
    res = run_od(work, out, script=KILL_BEFORE_RENAME)
    assert res.returncode == -9
    assert _spent(work) == before + 1 and not out.exists()
    [staged] = [s for s in StagingTable(work / "ledger.sqlite").pending() if s.target == out]
    assert staged.state == CHARGED
    new = {e.id for e in Ledger(work / "ledger.sqlite").entries("d")[before:]}
    complete_release(staged.staging, new)
    ledger_cli = [sys.executable, "-m", "privmob", "ledger"]
    led = ["--ledger", str(work / "ledger.sqlite")]
    show = subprocess.run([*ledger_cli, "show", *led], capture_output=True, text=True, cwd=ROOT)
    assert "staged release" in show.stdout and str(staged.staging) in _flat(show.stdout)
    rec = subprocess.run([*ledger_cli, "recover", *led], capture_output=True, text=True, cwd=ROOT)
    assert rec.returncode == 0, rec.stderr
    complete_release(out, new)
    assert not staged.staging.exists()


def test_kill_then_discard_keeps_the_charge(work: Path) -> None:
    out = work / "discarded"
    before = _spent(work)
    assert run_od(work, out, script=KILL_BEFORE_RENAME).returncode == -9
    [staged] = [s for s in StagingTable(work / "ledger.sqlite").pending() if s.target == out]
    led = str(work / "ledger.sqlite")
    res = subprocess.run(
        [sys.executable, "-m", "privmob", "ledger", "recover", "--discard", "--ledger", led],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 0 and "stays spent" in _flat(res.stdout)
    assert not staged.staging.exists() and not out.exists()
    assert _spent(work) == before + 1  # the epsilon was spent: the noisy release existed


def test_overwrite_replaces_a_release_in_one_rename(work: Path) -> None:
    out = work / "twice"
    assert run_od(work, out).returncode == 0
    first = (out / "metadata.json").read_text()
    res = run_privmob(work, *od_args(work, out, "--overwrite"))
    assert res.returncode == 0, res.stderr
    assert (out / "metadata.json").read_text() != first
    assert not [p for p in work.iterdir() if ".privmob-" in p.name]
    # a published release has the user's usual permissions, not the private 0600 of staging
    mask = os.umask(0o022)  # the child's umask (inherited)
    os.umask(mask)
    assert (out / "od.parquet").stat().st_mode & 0o777 == 0o666 & ~mask
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask


def test_overwrite_never_replaces_a_folder_that_is_not_a_release(work: Path) -> None:
    out = work / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    before = _spent(work)
    res = run_privmob(work, *od_args(work, out, "--overwrite"))
    assert res.returncode == 4 and "not a privmob release" in _flat(res.stderr)
    assert (out / "notes.txt").read_text() == "keep me" and _spent(work) == before


def test_kill_at_random_points(work: Path) -> None:
    """kill -9 at random moments of a release (4 runs here; benchmarks/bench_crash.py runs
    50+): each ends with no charge and no output, a charge and a complete output, a charge
    and a sealed staged release that recover completes, or a charge and an unsealed one that
    recover removes; never a torn file."""
    rng = random.Random(14)
    for i in range(4):
        out = work / f"random-{i}"
        before = _spent(work)
        if i % 2:  # in the window of writing, fsync, charge and rename
            kill_od_in_publication(work, out, rng.uniform(0.0, 0.1))
        else:
            kill_od_at(work, out, rng.uniform(0.5, 6.0))
        assert classify(work, out, before) in {"nothing", "published", "staged", "unsealed"}
