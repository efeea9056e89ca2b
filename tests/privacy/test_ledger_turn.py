"""Charges of an SQLite ledger wait in the order they asked (privmob.privacy.ledger.turn), with
real processes: a writer ahead in the queue is waited for, a turn that is not given within the
timeout is given up on, and a turn file that cannot be used (a folder, a symbolic link) changes
nothing but the order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger import turn as ledger_turn
from privmob.privacy.ledger.keys import generate

pytestmark = pytest.mark.skipif(ledger_turn.fcntl is None, reason="flock is POSIX only")

#: a process that takes the turn of the ledger given, says so on stdout, holds it for the given
#: seconds, then prints the time it gave it back
HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1] + "-turn", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
given = time.time()
os.close(fd)
print(given, flush=True)
"""


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    led = Ledger(tmp_path / "ledger.sqlite", key=generate(tmp_path / "custodian.pem"))
    led.set_budget("d", 10.0)
    return led


def _holder(ledger: Ledger, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ledger.path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_charge_waits_for_the_writer_ahead_of_it(ledger: Ledger) -> None:
    """SQLite's lock is free (the holder has only its turn): without the queue the charge
    would be made at once, before the holder gave its turn back."""
    holder = _holder(ledger, 1.0)
    ledger.charge("d", Cost.pure(0.5), kind="turn")
    made = time.time()
    out, _ = holder.communicate(timeout=30)
    assert made >= float(out.strip())
    assert ledger.spent("d").epsilon == pytest.approx(0.5)
    assert not (ledger.path.parent / "ledger.sqlite-turn").stat().st_size  # nothing written


def test_a_turn_not_given_within_the_timeout_is_given_up_on(ledger: Ledger, tmp_path: Path) -> None:
    holder = _holder(ledger, 60.0)
    try:
        impatient = Ledger(ledger.path, key=tmp_path / "custodian.pem", timeout=1.0)
        t0 = time.monotonic()
        impatient.charge("d", Cost.pure(0.5), kind="turn")
        assert time.monotonic() - t0 < 30  # made without waiting for the holder's 60 s
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    assert ledger.spent("d").epsilon == pytest.approx(0.5)


@pytest.mark.parametrize("what", ["folder", "symlink"])
def test_a_turn_file_that_cannot_be_used_changes_nothing_but_the_order(
    ledger: Ledger, tmp_path: Path, what: str
) -> None:
    turn = ledger_turn.turn_file(ledger.path)
    victim = tmp_path / "victim"
    turn.unlink()  # made by the budget's write
    if what == "folder":
        turn.mkdir()
    else:  # another user's link in a shared folder: never followed, nothing made at its end
        turn.symlink_to(victim)
    ledger.charge("d", Cost.pure(0.5), kind="turn")
    ledger.charge("d", Cost.pure(0.5), kind="turn")
    assert ledger.spent("d").epsilon == pytest.approx(1.0)
    assert not victim.exists()


def test_without_flock_charges_wait_in_sqlite_order(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_turn, "fcntl", None)
    ledger_turn.turn_file(ledger.path).unlink()  # made by the budget's write
    ledger.charge("d", Cost.pure(0.5), kind="turn")
    assert ledger.spent("d").epsilon == pytest.approx(0.5)
    assert not ledger_turn.turn_file(ledger.path).exists()


def test_the_turn_file_is_as_private_as_the_ledger(ledger: Ledger) -> None:
    ledger.charge("d", Cost.pure(0.5), kind="turn")
    mode = ledger_turn.turn_file(ledger.path).stat().st_mode & 0o777
    assert mode == ledger.path.stat().st_mode & 0o666


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_child_forked_during_a_charge_does_not_keep_its_turn(ledger: Ledger) -> None:
    """A flock lasts while any copy of its file is open: a child forked inside the charge's
    transaction (a worker pool, say) and still alive must not hold the next charge back."""
    children: list[int] = []

    def fork_a_sleeper(con: object, entries: object) -> None:
        pid = os.fork()
        if pid == 0:  # the child: lives on after its parent's charge
            time.sleep(30)
            os._exit(0)
        children.append(pid)

    try:
        ledger.charge_parts("d", [("", Cost.pure(0.5))], kind="turn", within=fork_a_sleeper)
        probe = subprocess.run(
            [sys.executable, "-c", PROBE, str(ledger.path)], capture_output=True, text=True
        )
        assert probe.stdout.strip() == "free", probe.stderr
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


#: whether another process could take the turn now
PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1] + "-turn", os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("held")
"""
