"""Crash injection with real processes: a release run as ``python -m privmob od`` in a child
process, killed, and what it left classified (used by tests/releases/test_publish_crash.py and
benchmarks/bench_crash.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger.keys import generate
from privmob.privacy.staging import CHARGED, StagingTable, has_staging_table
from privmob.releases.publish import REPLACED_MARK, STAGING_MARK, seal_problem
from privmob.releases.recover import recover_staged
from tests.helpers import box_grid, random_trips

ROOT = Path(__file__).resolve().parents[1]
DATASET = "d"
#: the files of a complete OD release
OD_FILES = {"metadata.json", "od.parquet", "outliers.parquet"}

#: a child that dies (SIGKILL) right after the ledger is charged, before the rename
KILL_BEFORE_RENAME = """
import os, signal, sys
from privmob.releases import publish
publish.place = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
from privmob.cli import main
main(sys.argv[1:])
"""


def make_inputs(work: Path, users: int = 3000, k: int = 8) -> Path:
    """Trips, a k x k grid and a ledger with a large budget in ``work``; the ledger path."""
    work.mkdir(parents=True, exist_ok=True)
    random_trips(users, k * k, seed=1).to_parquet(work / "trips.parquet")
    box_grid(k).gdf.to_file(work / "grid.geojson", driver="GeoJSON")
    ledger = work / "ledger.sqlite"
    # the ledger's custodian key lives with it: the children sign with it (child_env)
    key = work / "custodian.pem"
    if not key.exists():
        generate(key)
    Ledger(ledger, key=key).set_budget(DATASET, 1e6)
    StagingTable(ledger)  # its table exists, as after any earlier release
    return ledger


def od_args(work: Path, out: Path, *extra: str, ledger: str | None = None) -> list[str]:
    return [
        "od",
        str(work / "trips.parquet"),
        "-t",
        str(work / "grid.geojson"),
        "-e",
        "0.5",
        "-T",
        "4",
        "--dataset",
        DATASET,
        "--ledger",
        ledger or str(work / "ledger.sqlite"),
        "-o",
        str(out),
        "--quiet",
        *extra,
    ]


def child_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(work / "tmp")  # the run directories of the children, to inspect
    (work / "tmp").mkdir(exist_ok=True)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if (work / "custodian.pem").exists():  # the key of make_inputs's ledger
        env["PRIVMOB_KEY"] = str(work / "custodian.pem")
    return env


def run_child(
    work: Path, *argv: str, env: dict[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """``python argv`` in a child process with the environment of ``work`` (:func:`child_env`,
    or ``env``), from the repository, to its end; its output captured as text."""
    return subprocess.run(
        [sys.executable, *argv],
        env=env or child_env(work),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_privmob(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``privmob args`` in a child process of ``work`` (:func:`run_child`), to its end."""
    return run_child(work, "-m", "privmob", *args)


def start_privmob(work: Path, *args: str, quiet: bool = False) -> subprocess.Popen[str]:
    """``privmob args`` started in a child process of ``work`` (:func:`child_env`), its error
    output piped as text (``quiet``: all its output discarded)."""
    return subprocess.Popen(
        [sys.executable, "-m", "privmob", *args],
        env=child_env(work),
        cwd=ROOT,
        stdout=subprocess.DEVNULL if quiet else None,
        stderr=subprocess.DEVNULL if quiet else subprocess.PIPE,
        text=True,
    )


def run_od(work: Path, out: Path, *, script: str | None = None) -> subprocess.CompletedProcess[str]:
    """One release in a child process, to its end."""
    if script:
        return run_child(work, "-c", script, *od_args(work, out))
    return run_privmob(work, *od_args(work, out))


def minimum_memory_mb(work: Path, asks: int = 1) -> int:
    """The smallest ``--memory-limit`` a release of ``work``'s inputs accepts here (privmob
    names it when refusing a smaller one). Asked ``asks`` times, the largest kept: the first
    run reads and caches the tessellation, later ones read the cache, and the process's
    baseline differs by a few MB between the two paths."""
    minimum = 0
    for _ in range(asks):
        res = run_privmob(work, *od_args(work, work / "never", "--memory-limit", "1MB"))
        found = re.search(r"minimum of (\d+) MB", res.stderr)
        assert res.returncode == 2 and found, res.stderr
        minimum = max(minimum, int(found.group(1)))
    return minimum


def kill_od_at(work: Path, out: Path, seconds: float) -> int:
    """Start a release and SIGKILL it after ``seconds`` (or let it end first); its return code."""
    proc = start_privmob(work, *od_args(work, out), quiet=True)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return proc.returncode


def kill_od_in_publication(work: Path, out: Path, after: float) -> int:
    """Start a release and SIGKILL it ``after`` seconds once its staging directory appears
    (the window of writing, charging and renaming); its return code."""
    proc = start_privmob(work, *od_args(work, out), quiet=True)
    pattern = f".{out.name}{STAGING_MARK}*"
    while proc.poll() is None and not any(out.parent.glob(pattern)):
        time.sleep(0.002)
    if proc.poll() is None:
        time.sleep(after)
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.returncode


def complete_release(folder: Path, entry_ids: set[int]) -> None:
    """Assert ``folder`` holds a whole OD release charged by ``entry_ids`` (no torn file)."""
    names = {p.name for p in folder.iterdir()}
    assert names == OD_FILES, f"{folder}: {sorted(names)}"
    meta = json.loads((folder / "metadata.json").read_text())
    assert {e["id"] for e in meta["ledger_entries"]} == entry_ids
    for name in ("od", "outliers"):
        assert len(pd.read_parquet(folder / f"{name}.parquet")) > 0


def classify(work: Path, out: Path, entries_before: int, ledger: str | Path | None = None) -> str:
    """What a killed release left: ``nothing`` (no charge, no output), ``published`` (charge
    and complete output), ``staged`` (charge and a sealed staged release that recover
    completes) or ``unsealed`` (charge and a staged release killed before its seal, which
    recover removes: the budget stays spent).
    Anything else (a torn file, a charge without output, output without charge) fails.
    ``ledger``: default the file in ``work`` (a PostgreSQL URL for the team ledger)."""
    ledger = ledger or work / "ledger.sqlite"
    entries = Ledger(ledger).entries(DATASET)
    new = {e.id for e in entries[entries_before:]}
    staged = (
        [s for s in StagingTable(ledger).pending() if s.state == CHARGED]
        if has_staging_table(ledger)
        else []
    )
    staged = [s for s in staged if s.target == out]
    if out.exists():
        assert not staged, "a published release is still listed as staged"
        complete_release(out, new)
        state = "published"
    elif staged:
        assert len(staged) == 1 and set(staged[0].entry_ids) == new
        if seal_problem(staged[0].staging) is None:  # sealed: complete, recover publishes it
            complete_release(staged[0].staging, new)
            recover_staged(ledger)  # the crashed process is dead: recover moves it into place
            complete_release(out, new)
            state = "staged"
        else:  # killed after the charge, before the seal: recover removes it, budget spent
            recover_staged(ledger)
            assert not out.exists() and not staged[0].staging.exists()
            state = "unsealed"
    else:
        assert not new, f"charged {new} but no output, staged or published"
        state = "nothing"
    recover_staged(ledger)  # removes the uncharged staging of dead processes
    left = [p for p in out.parent.iterdir() if STAGING_MARK in p.name or REPLACED_MARK in p.name]
    assert not left, f"left beside the output: {left}"
    return state


def wait_for(path: Path, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(path)
        time.sleep(0.05)
