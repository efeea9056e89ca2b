"""privmob's own threads follow the cores the process may use: its CPU affinity, capped by a
cgroup CPU quota (a container's CPU limit), never the host's core count."""

import os
import subprocess
import sys

import pytest

from privmob.cores import cgroup_quota, usable_cores


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_pinned_to_one_core_uses_one():
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from privmob.cores import usable_cores; from privmob.privacy import samplers, "
        "exact_noise; print(usable_cores(), samplers._threads(), exact_noise._threads())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1", "1"]
    assert 1 <= usable_cores() <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("cpu_max", "v1", "cores"),
    [
        ("max 100000\n", None, None),
        ("150000 100000\n", None, 2),  # a limit of 1.5 cores: two threads
        ("50000 100000\n", None, 1),
        ("400000 100000\n", ("100000", "100000"), 4),  # v2 first
        (None, ("-1", "100000"), None),  # v1 without a quota
        (None, ("200000", "100000"), 2),
        (None, None, None),  # no cgroup files: no quota
        ("garbage\n", None, None),
    ],
)
def test_cgroup_cpu_quota(tmp_path, cpu_max, v1, cores):
    paths = tmp_path / "cpu.max", tmp_path / "cfs_quota_us", tmp_path / "cfs_period_us"
    if cpu_max is not None:
        paths[0].write_text(cpu_max)
    if v1 is not None:
        paths[1].write_text(v1[0])
        paths[2].write_text(v1[1])
    assert cgroup_quota(*paths) == cores
