"""How many cores this process may use, for privmob's own threads (noise sampling, tile
assignment); DuckDB and Spark size their own thread pools."""

from __future__ import annotations

import math
import os
from pathlib import Path

#: cgroup v2 and v1 CPU quota files, as seen from inside a container (Kubernetes CPU limits)
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CFS_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CFS_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: ``taskset``, cpusets; else every
    core), capped by a CPU quota of its cgroup (a Kubernetes CPU limit of 1.5 gives 2): at least
    1. ``os.cpu_count()`` alone counts the host's cores: a container limited to 2 cores on a
    64-core host would start as many threads as the callers' caps allow (8 noise samplers)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cgroup_quota(CPU_MAX, CFS_QUOTA, CFS_PERIOD)
    return max(1, min(cores or 1, quota or cores or 1))


def cgroup_quota(cpu_max: Path, cfs_quota: Path, cfs_period: Path) -> int | None:
    """Cores allowed by a cgroup v2 ``cpu.max`` ("quota period", or "max ...") or cgroup v1
    ``cfs_quota_us`` / ``cfs_period_us`` (quota -1: none), rounded up; None without a quota."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(cfs_quota.read_text())
        period_us = int(cfs_period.read_text())
    except (OSError, ValueError):
        return None
    return math.ceil(quota_us / period_us) if quota_us > 0 and period_us > 0 else None
