"""A run stopped by SIGTERM or SIGINT while it reads or counts says so in one line, with the
exit code of the signal (143, 130) and nothing charged; a damaged ``.csv.gz`` input is an input
error naming the file (exit 2). Real processes, real signals, real files."""

from __future__ import annotations

import gzip
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
from tests.crash import DATASET, make_inputs, minimum_memory_mb, od_args, run_privmob, start_privmob

from privmob.privacy.ledger import Ledger


def _exists(base: Path, pattern: str) -> bool:
    try:
        return any(base.glob(pattern))
    except FileNotFoundError:  # a directory removed while it was listed
        return False


def _stop_when(work: Path, args: list[str], pattern: str, sig: signal.Signals) -> str:
    """Run ``privmob args``; send ``sig`` once a file matching ``pattern`` exists in its run
    directory (the step it is in); its stderr."""
    proc = start_privmob(work, *args)
    user_base = work / "spill" / f"privmob-{os.geteuid()}"
    while proc.poll() is None and not _exists(user_base, pattern):
        pass
    assert proc.poll() is None, f"the release ended before {pattern} was written"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    return err


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("stop")
    make_inputs(work, users=250_000, k=4)  # ~1.1M trips
    pd.read_parquet(work / "trips.parquet").to_csv(work / "trips.csv", index=False)
    return work


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize(
    "step, pattern",
    [("reading", "run-*/**/privmob-parsed-*/*"), ("counting", "run-*/buckets/privmob-buckets-*/*")],
)
def test_a_signal_while_reading_or_counting_says_interrupted_and_charges_nothing(
    work: Path, sig: signal.Signals, step: str, pattern: str
) -> None:
    """Before: 'error: ... cannot be read: Query interrupted' / 'check the file format' was
    printed first (the exit code was already right)."""
    out = work / f"out-{step}-{sig.name}"
    args = od_args(work, out, "--spill-dir", str(work / "spill"))
    if step == "reading":  # a CSV is parsed once into the run directory: the reading step
        args[1] = str(work / "trips.csv")
    else:  # just above the minimum limit: user buckets, the counting step
        args += ["--memory-limit", f"{minimum_memory_mb(work) + 16}MB"]
    err = _stop_when(work, args, pattern, sig)
    lines = [line for line in err.splitlines() if line.strip() and "✓" not in line]
    assert lines == [
        f"privmob: interrupted by {sig.name}; nothing was charged to the ledger and its "
        "working directory was removed"
    ], err
    assert "cannot be read" not in err and "file format" not in err and "Traceback" not in err
    assert Ledger(work / "ledger.sqlite").entries(DATASET) == []
    assert not out.exists()


def test_a_truncated_gzip_input_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    """Before: 'Aborted.' and exit 1 (Python's gzip raised EOFError while the file's encoding
    was checked). Truncated deep in the file (90%), past what the CSV sniffer reads."""
    work = tmp_path
    make_inputs(work, users=40_000, k=4)
    data = gzip.compress(pd.read_parquet(work / "trips.parquet").to_csv(index=False).encode())
    bad = work / "trips.csv.gz"
    bad.write_bytes(data[: int(len(data) * 0.9)])
    args = od_args(work, work / "out")
    args[1] = str(bad)
    res = run_privmob(work, *args)
    assert res.returncode == 2, res.stderr
    assert f"error: {bad}: the gzip file is truncated" in res.stderr
    assert "Aborted" not in res.stderr and "internal error" not in res.stderr
    assert Ledger(work / "ledger.sqlite").entries(DATASET) == [] and not (work / "out").exists()
