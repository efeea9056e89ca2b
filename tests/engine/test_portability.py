"""privmob on macOS and Windows, tested on Linux with those platforms' answers substituted: the
unit of ``ru_maxrss`` (bytes on macOS, kilobytes on Linux), no :mod:`resource` module, no
SIGHUP, no ``os.geteuid`` / ``os.statvfs`` / ``os.O_NOFOLLOW`` (Windows). Where a module must
be absent, the check runs in a fresh interpreter in which importing it fails."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import psutil  # imported for real before a test pretends to be macOS
import pytest

from privmob.engine import memory
from privmob.engine.memory import MB, maxrss_bytes, peak_rss_bytes, process_memory, rss_bytes


def test_ru_maxrss_is_kilobytes_on_linux_and_bytes_on_macos() -> None:
    assert maxrss_bytes(300_000, "linux") == 300_000 * 1024
    assert maxrss_bytes(300_000 * 1024, "darwin") == 300_000 * 1024
    assert maxrss_bytes(300_000, "freebsd14") == 300_000 * 1024


def test_the_peak_on_macos_is_not_taken_1024_times_too_large(monkeypatch) -> None:
    """macOS answers getrusage's ru_maxrss in bytes: the peak (and a limit checked against it)
    must come out the same as on Linux, not 1024x larger."""
    linux_peak = peak_rss_bytes()
    in_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    mac = SimpleNamespace(
        RUSAGE_SELF=resource.RUSAGE_SELF,
        getrusage=lambda who: SimpleNamespace(ru_maxrss=in_bytes),
    )
    monkeypatch.setattr(memory, "resource", mac)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert abs(peak_rss_bytes() - linux_peak) < 50 * MB
    assert peak_rss_bytes() < 8000 * MB
    assert process_memory(8000 * MB, "8GB").baseline < 4000 * MB  # accepted, not refused


def test_without_resource_the_peak_comes_from_psutil(monkeypatch) -> None:
    monkeypatch.setattr(memory, "resource", None)
    now = rss_bytes()
    assert now - 50 * MB < peak_rss_bytes() < 8000 * MB


# a fresh interpreter with Windows' answers: no resource module, no SIGHUP, no geteuid,
# statvfs or O_NOFOLLOW; then privmob is imported, the demo runs and a release runs
WINDOWS_LIKE = textwrap.dedent(
    """
    import json, os, signal, sys
    import psutil  # its Linux backend needs resource; on Windows psutil has its own backend
    import shutil
    _statvfs = os.statvfs

    def disk_usage(path):  # Windows' shutil.disk_usage asks nt._getdiskusage, not statvfs
        st = _statvfs(path)
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        return shutil._ntuple_diskusage(total, total - st.f_bfree * st.f_frsize, free)

    shutil.disk_usage = disk_usage
    sys.modules["resource"] = None  # `import resource` now raises ImportError
    del signal.SIGHUP
    for name in ("geteuid", "statvfs", "O_NOFOLLOW"):
        delattr(os, name)
    import privmob
    from privmob.cli import main
    from privmob.engine import memory, rundir
    codes = {}
    for name, argv in json.loads(sys.argv[1]).items():
        try:
            main(argv)
            codes[name] = 0
        except SystemExit as exc:
            codes[name] = exc.code
    print(json.dumps({
        "codes": codes,
        "resource": memory.resource is None,
        "signals": [s.name for s in rundir.STOP_SIGNALS],
        "peak_mb": memory.peak_rss_bytes() / 1e6,
    }))
    """
)


def test_import_demo_and_a_release_without_posix_only_parts(tmp_path: Path) -> None:
    from tests.crash import make_inputs, od_args, run_child

    make_inputs(tmp_path, users=300, k=3)
    runs = {
        "demo": ["demo", "-o", str(tmp_path / "demo"), "--users", "300", "--quiet"],
        "od": od_args(tmp_path, tmp_path / "out", "--memory-limit", "4GB"),
    }
    res = run_child(tmp_path, "-c", WINDOWS_LIKE, json.dumps(runs), timeout=600)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["codes"] == {"demo": 0, "od": 0}, res.stderr
    assert got["resource"] and got["signals"] == ["SIGTERM", "SIGINT"]
    assert 10 < got["peak_mb"] < 8000
    assert (tmp_path / "out" / "metadata.json").is_file()
    assert any((tmp_path / "demo").iterdir())
    tmp = tmp_path / "tmp"  # the run directories were removed (named by login name here)
    assert [p for p in tmp.rglob("run-*")] == []


@pytest.mark.parametrize(
    "files, left",
    [
        ({"memory.max": "max\n", "memory.current": "100\n"}, None),
        ({"memory.max": "1000000000\n", "memory.current": "300000000\n"}, 700_000_000),
        ({"memory.max": "100\n", "memory.current": "300\n"}, 0),
        ({"limit": "9223372036854771712\n", "usage": "5\n"}, None),  # v1: no limit
        ({"limit": "2000000000\n", "usage": "500000000\n"}, 1_500_000_000),  # v1
        ({}, None),  # no cgroup files (macOS, Windows)
    ],
)
def test_the_cgroup_memory_left(tmp_path: Path, files: dict[str, str], left: int | None) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    got = memory.cgroup_memory_left(
        tmp_path / "memory.max", tmp_path / "memory.current", tmp_path / "limit",
        tmp_path / "usage",
    )  # fmt: skip
    assert got == left


def test_the_default_guard_is_what_the_machine_has_available(monkeypatch) -> None:
    guard = memory.default_guard()
    free = psutil.virtual_memory().available
    assert abs(guard.available - free) < 200 * MB and abs(guard.baseline - rss_bytes()) < 50 * MB
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: 123 * MB)  # a container's limit
    assert memory.available_memory() == 123 * MB


def test_the_peak_is_the_process_own_not_its_parents() -> None:
    """Linux carries ru_maxrss over fork and exec: a child of a parent that held 600 MB read
    at least 600 MB as its peak (a benchmark's input generation, done in the parent, showed as
    1.39x the limit of the release it then measured in a child). The peak is the child's own."""
    if not sys.platform.startswith("linux"):
        pytest.skip("ru_maxrss carried over exec is Linux's behaviour; VmHWM is Linux's")
    script = (
        "import subprocess, sys\n"
        "held = bytearray(600 * 10**6)\n"  # touched: zero pages are not resident
        "for i in range(0, len(held), 4096): held[i] = 1\n"
        "child = 'from privmob.engine.memory import peak_rss_bytes; print(peak_rss_bytes())'\n"
        "print(subprocess.run([sys.executable, '-c', child], capture_output=True, text=True,"
        " check=True).stdout)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    child_peak = int(out.stdout.split()[0])
    assert child_peak < 300 * MB, f"the child read {child_peak / MB:.0f} MB, its parent's peak"
