"""Nothing left behind: one private working directory per run, removed on exit and on signals,
and by the next run when the process was killed (real processes, real signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash import ROOT, child_env, minimum_memory_mb, run_child, start_privmob, wait_for
from tests.helpers import random_trips

from privmob.engine.rundir import RUN_PREFIX, base_dir, close_run_dir, open_run_dir
from privmob.errors import ConfigError

#: a child that splits users into 4 buckets, reports its run directory, then waits in a bucket
IN_BUCKETS = """
import json, os, sys, time
from pathlib import Path
from privmob.data import load_trips
from privmob.engine import DuckDBEngine
from privmob.engine.buckets import bucketed_counts
from privmob.engine.rundir import current_run_dir
from tests.helpers import box_grid

work = Path(sys.argv[1])
eng = DuckDBEngine(memory_limit="1GB")
trips = load_trips(work / "trips.parquet", engine=eng, tessellation=box_grid(4))
run = current_run_dir()

def count(part):
    files = {str(p): oct(p.stat().st_mode & 0o777) for p in run.path.rglob("*")}
    mask = os.umask(0o077)
    (work / "ready.tmp").write_text(json.dumps({"run": str(run.path), "files": files,
                                                "umask": mask}))
    os.rename(work / "ready.tmp", work / "ready.json")
    time.sleep(600)

bucketed_counts(trips, count, 4)
"""


def _in_buckets(work: Path) -> tuple[subprocess.Popen, dict]:
    random_trips(500, 16, seed=2).to_parquet(work / "trips.parquet")
    proc = subprocess.Popen(
        [sys.executable, "-c", IN_BUCKETS, str(work)],
        env=child_env(work),
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(work / "ready.json")
    except TimeoutError:
        proc.kill()
        raise AssertionError(proc.communicate()[1]) from None
    return proc, json.loads((work / "ready.json").read_text())


def _next_run(work: Path) -> str:
    """Another privmob process on the same base: it removes dead runs' directories."""
    res = run_child(work, "-c", "from privmob.engine.rundir import open_run_dir; open_run_dir()")
    assert res.returncode == 0, res.stderr
    return res.stderr


def _left(work: Path) -> list[Path]:
    base = work / "tmp" / f"privmob-{os.geteuid()}"
    return sorted(base.rglob("*")) if base.exists() else []


def test_bucket_files_are_private_from_the_start(tmp_path: Path) -> None:
    proc, seen = _in_buckets(tmp_path)
    proc.kill()
    proc.wait()
    assert seen["umask"] == 0o077  # files are 0600 when created, not chmod-ed afterwards
    parts = [f for f in seen["files"] if f.endswith(".parquet")]
    assert parts, seen  # the user buckets are in the run directory
    for name, mode in seen["files"].items():
        assert mode in ("0o600", "0o700"), (name, mode)
    assert oct(os.stat(Path(seen["run"]).parent).st_mode & 0o777) == "0o700"


def test_sigterm_mid_bucket_removes_the_run_directory(tmp_path: Path) -> None:
    proc, seen = _in_buckets(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not Path(seen["run"]).exists()
    _next_run(tmp_path)
    assert _left(tmp_path) == []


def test_sigkill_mid_bucket_is_cleaned_by_the_next_run(tmp_path: Path) -> None:
    proc, seen = _in_buckets(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert Path(seen["run"]).exists()  # a killed process cannot clean up ...
    err = _next_run(tmp_path)  # ... the next run does, and says so
    assert "removed 1 working directory left by killed runs" in err
    assert _left(tmp_path) == []


def test_a_base_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to plant a directory owned by another user")
    planted = tmp_path / f"privmob-{os.geteuid()}"
    planted.mkdir(mode=0o777)
    os.chown(planted, 65534, 65534)
    with pytest.raises(ConfigError, match="belongs to another user"):
        base_dir(tmp_path)


def test_a_shared_base_is_closed_and_a_link_refused(tmp_path: Path) -> None:
    shared = tmp_path / "a"
    (shared / f"privmob-{os.geteuid()}").mkdir(parents=True, mode=0o755)
    os.chmod(shared / f"privmob-{os.geteuid()}", 0o755)
    assert base_dir(shared).stat().st_mode & 0o777 == 0o700
    linked = tmp_path / "b"
    linked.mkdir()
    (linked / f"privmob-{os.geteuid()}").symlink_to(tmp_path)
    with pytest.raises(ConfigError, match="symbolic link"):
        base_dir(linked)


def test_duckdb_temp_files_go_to_the_private_run_directory(tmp_path: Path) -> None:
    from privmob.engine import DuckDBEngine

    close_run_dir()
    run = open_run_dir(tmp_path)
    try:
        with DuckDBEngine() as eng:
            assert Path(eng.temp_directory).is_relative_to(run.path)
            assert Path(eng.spill_dir).is_relative_to(run.path)
            setting = eng.fetch("SELECT current_setting('temp_directory') AS t")["t"].iloc[0]
            assert Path(setting).is_relative_to(run.path)
        assert run.path.name.startswith(RUN_PREFIX)
    finally:
        close_run_dir()
    assert not run.path.exists()


def _stop_cli_when(
    work: Path, args: list[str], base: Path, pattern: str, sig: signal.Signals
) -> None:
    """Run ``privmob args`` (its run directories under ``base``), send ``sig`` as soon as a file
    matching ``pattern`` exists in its run directory, and check that no file of that directory
    remains once one later run has started (after SIGTERM: none at once)."""
    proc = start_privmob(work, *args)
    user_base = base / f"privmob-{os.geteuid()}"
    while proc.poll() is None and not any(user_base.glob(pattern)):
        pass
    assert proc.poll() is None, f"the release ended before {pattern} was written"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (128 + sig, -sig), err
    if sig == signal.SIGTERM:
        assert "Traceback" not in err and sorted(user_base.rglob("*")) == []
    opener = "from privmob.engine.rundir import open_run_dir as o; o()"
    res = run_child(work, "-c", opener, env={**child_env(work), "TMPDIR": str(base)})
    assert res.returncode == 0, res.stderr
    assert sorted(user_base.rglob("*")) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_cli_stopped_in_user_buckets_leaves_nothing_after_the_next_run(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """``privmob od --memory-limit`` on a small file (forced into user buckets), stopped by
    SIGTERM or SIGKILL while the buckets exist: after one later run, no file of its working
    directory remains (SIGTERM: none remains at once)."""
    from tests.crash import make_inputs, od_args

    make_inputs(tmp_path, users=250_000, k=4)  # ~1.1M trips: >= 2 buckets near the minimum
    base = tmp_path / "spill"
    limit = f"{minimum_memory_mb(tmp_path, asks=2) + 16}MB"  # ~80 MB for the engine: buckets
    args = od_args(tmp_path, tmp_path / "out", "--memory-limit", limit, "--spill-dir", str(base))
    _stop_cli_when(tmp_path, args, base, "run-*/buckets/privmob-buckets-*/*", sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_cli_stopped_with_the_parsed_csv_on_disk_leaves_nothing(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A CSV input is parsed once into a private file of the run directory (records on disk):
    ``privmob od`` stopped by SIGTERM or SIGKILL while that file is being written leaves no
    file of its working directory after one later run (SIGTERM: none at once)."""
    import pandas as pd
    from tests.crash import make_inputs, od_args

    make_inputs(tmp_path, users=250_000, k=4)  # ~1.1M trips
    csv = tmp_path / "trips.csv"
    pd.read_parquet(tmp_path / "trips.parquet").to_csv(csv, index=False)
    base = tmp_path / "spill"
    args = od_args(tmp_path, tmp_path / "out", "--spill-dir", str(base))
    args[1] = str(csv)
    _stop_cli_when(tmp_path, args, base, "run-*/**/privmob-parsed-*/*", sig)
    assert not (tmp_path / "out").exists()
