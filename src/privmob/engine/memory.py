"""``--memory-limit`` as a cap on the whole process.

The limit a user gives is for the process (what ``top`` and a container's cgroup see), not for
the engine alone: Python and the libraries privmob imports already take a few hundred MB before
any record is read. So the engine's working memory is what is left:

    available = limit - baseline RSS (measured when the engine starts)

The release's own arrays (its dense domain and output table: the plan's estimate) are set aside
from ``available`` once the plan is known (:meth:`ProcessMemory.engine_memory`); DuckDB's own
``memory_limit`` and the user buckets (:mod:`privmob.engine.buckets`) are planned within the
rest. Without a limit, :func:`default_guard` (what the machine and its cgroup have available)
only refuses a plan that cannot fit. Below :data:`ENGINE_FLOOR` of engine memory nothing can
run (DuckDB needs buffers per thread to read a file): such a limit is refused before the input
is read, with the minimum for this release (baseline + domain + floor), instead of failing
later with a read error.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module
from privmob.surface import option

if TYPE_CHECKING:
    import psutil
else:  # read when memory is measured, after the plan line (issue 43)
    psutil = lazy_module("psutil")

try:  # POSIX only (not on Windows)
    import resource
except ImportError:  # pragma: no cover - exercised in a subprocess without it
    resource = None  # type: ignore[assignment]

MB = 10**6
#: engine working memory below which a release cannot be held to its limit: DuckDB's buffers
#: to read and partition a file, the bucket spill writer, Arrow results and the dense domain
#: vectors. Measured (od on 1.26M call records, 263 zones, docs/memory.md): with 23 MB left
#: the bucket writer ran out of memory; with 38 MB it ran but peaked 19% above the limit; with
#: 79 MB (a 256 MB limit) 6% above it.
ENGINE_FLOOR = 64 * MB
#: below this much engine memory DuckDB runs one thread (one set of buffers)
TIGHT = 200 * MB


def rss_bytes() -> int:
    """This process's resident memory now (bytes), on every platform psutil supports."""
    return int(psutil.Process().memory_info().rss)


def maxrss_bytes(ru_maxrss: int, platform: str | None = None) -> int:
    """``ru_maxrss`` of :func:`resource.getrusage` / :func:`os.wait4` in bytes: the kernel
    reports kilobytes on Linux and the BSDs, bytes on macOS."""
    return int(ru_maxrss) * (1 if (platform or sys.platform) == "darwin" else 1024)


#: where Linux states a process's own peak resident memory (``VmHWM``)
PROC_STATUS = Path("/proc/self/status")


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (bytes): ``VmHWM`` on Linux, else
    ``ru_maxrss`` where the platform has :mod:`resource`, else the peak working set psutil
    reads on Windows, else the resident memory now (a lower bound).

    Linux carries ``ru_maxrss`` over ``fork`` and ``exec``: a process started by a parent that
    once held 5 GB reports at least 5 GB however little it used itself (a benchmark generating
    its input before starting the measured process read 1.39x its limit that way, issue 43).
    ``VmHWM`` belongs to the process's own memory map and starts again at ``exec``."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, ValueError):
            for line in PROC_STATUS.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    if resource is not None:
        return maxrss_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    info = psutil.Process().memory_info()
    return int(getattr(info, "peak_wset", info.rss))


#: cgroup v2 and v1 memory limit and usage files, as seen from inside a container (a
#: Kubernetes or Docker memory limit); privmob.cores reads the CPU quota the same way
CGROUP_MAX = Path("/sys/fs/cgroup/memory.max")
CGROUP_CURRENT = Path("/sys/fs/cgroup/memory.current")
CGROUP_V1_LIMIT = Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")
CGROUP_V1_USAGE = Path("/sys/fs/cgroup/memory/memory.usage_in_bytes")
#: a cgroup v1 "limit" at or above this is no limit (the kernel prints a page-rounded 2**63)
_NO_V1_LIMIT = 2**60


def cgroup_memory_left(
    limit_file: Path = CGROUP_MAX,
    usage_file: Path = CGROUP_CURRENT,
    v1_limit: Path = CGROUP_V1_LIMIT,
    v1_usage: Path = CGROUP_V1_USAGE,
) -> int | None:
    """Bytes this process's cgroup may still take (its memory limit minus its usage: v2
    ``memory.max`` / ``memory.current``, else v1 ``memory.limit_in_bytes`` /
    ``memory.usage_in_bytes``); None without a limit or off Linux."""
    for limit_path, usage_path in ((limit_file, usage_file), (v1_limit, v1_usage)):
        try:
            text = limit_path.read_text().strip()
            if text == "max":
                return None
            limit = int(text)
            if limit >= _NO_V1_LIMIT:
                return None
            return max(0, limit - int(usage_path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return None


def available_memory() -> int:
    """Memory the machine can still give this process (bytes): what the system has available
    (psutil's ``virtual_memory().available``: free memory plus what the kernel can reclaim),
    capped by what the process's cgroup (a container's limit) leaves."""
    free = int(psutil.virtual_memory().available)
    left = cgroup_memory_left()
    return free if left is None else min(free, left)


def default_guard() -> ProcessMemory:
    """The memory guard when no ``--memory-limit`` is given: the process may grow by what the
    machine has available now (:func:`available_memory`) above what it already uses. A release
    whose planned domain does not fit is refused before any data is read."""
    rss = rss_bytes()
    return ProcessMemory(rss + available_memory(), rss)


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised from is a lack of memory (Python's
    :class:`MemoryError`, DuckDB's out-of-memory error, a JVM's ``OutOfMemoryError``), however
    a layer above worded it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = f"{type(exc).__name__} {exc}".lower().replace(" ", "")
        if isinstance(exc, MemoryError) or "outofmemory" in text:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def memory_advice(limit_text: str | None) -> tuple[str, str]:
    """(message, hint) for a run that ran out of memory under ``--memory-limit limit_text``
    (None: no limit was given): the limit to try next."""
    if limit_text:
        try:
            from privmob.engine.buckets import parse_memory

            twice = f"{math.ceil(2 * parse_memory(limit_text) / MB)}MB"
        except ConfigError:
            twice = "twice that"
        return (
            f"the run ran out of memory under {option('memory_limit', limit_text)}",
            f"give it more memory, e.g. {option('memory_limit', twice)}; the limit sizes the user "
            "buckets, so a larger limit also means fewer passes",
        )
    left = available_memory()
    return (
        f"the run ran out of memory (no {option('memory_limit')} was given)",
        f"pass {option('memory_limit', f'{max(1, int(0.8 * left / MB))}MB')} (80% of the "
        f"{left / 1e9:.1f} GB this machine has available): privmob then counts in user "
        "buckets that fit",
    )


@dataclass(frozen=True)
class ProcessMemory:
    """A process-wide memory limit split into the baseline and the engine's share."""

    limit: int
    baseline: int

    @property
    def available(self) -> int:
        return self.limit - self.baseline

    @property
    def minimum(self) -> int:
        """The smallest limit this process can run a release under."""
        return self.baseline + ENGINE_FLOOR

    def engine_memory(self, reserved: int = 0) -> int:
        """What the engine may use once ``reserved`` bytes are set aside for the release's own
        arrays (its dense domain and output table); a limit that leaves less than
        :data:`ENGINE_FLOOR` is refused, naming the smallest limit that would do."""
        left = self.available - reserved
        if left < ENGINE_FLOOR:
            need = math.ceil((self.minimum + reserved) / MB)
            raise ConfigError(
                f"{option('memory_limit', f'{self.limit / MB:.0f}MB')}: the limit is below the "
                "minimum of "
                f"{need} MB for this release",
                hint=f"the limit caps the whole process: Python and the libraries use "
                f"{self.baseline / MB:.0f} MB and the release's domain needs about "
                f"{reserved / MB:.0f} MB; give at least {option('memory_limit', f'{need}MB')}",
            )
        return left


def process_memory(
    limit: int, text: str | None = None, baseline: int | None = None
) -> ProcessMemory:
    """Split ``limit`` (bytes, for the whole process) with the baseline measured now; refuse a
    limit below the minimum (the baseline plus :data:`ENGINE_FLOOR`)."""
    mem = ProcessMemory(limit, rss_bytes() if baseline is None else baseline)
    if mem.available < ENGINE_FLOOR:
        need = math.ceil(mem.minimum / MB)
        raise ConfigError(
            f"{option('memory_limit', text or f'{limit / MB:.0f}MB')}: the limit is below the "
            "minimum "
            f"of {need} MB for this release",
            hint=f"the limit caps the whole process: Python and the libraries already use "
            f"{mem.baseline / MB:.0f} MB; give at least {option('memory_limit', f'{need}MB')}",
        )
    return mem


#: DuckDB settings on every engine, limited or not: the allocator hands freed memory back to
#: the system once a task has freed 8 MiB (its defaults wait for 128 MB, and 512 MB after a bulk
#: free). Without them the parsed CSV written once and then the bounded trips stacked two such
#: caches on the report's peak: 0.62 GB at 1M trips on the grid, 0.54-0.57 GB with them
#: (benchmarks/bench_report.py); population at 10M 0.45 -> 0.30 GB. The cost: the report at
#: 10M on the taxi zones 12.5-12.7 s without them, 12.7-13.3 s with them (two runs each).
#: A setting an older DuckDB lacks is skipped.
FREED_MEMORY_SETTINGS = {
    "allocator_flush_threshold": "'8MiB'",
    "allocator_bulk_deallocation_flush_threshold": "'8MiB'",
}


#: Under a memory limit, the allocator keeps up to this share of the engine's memory freed in
#: bulk before handing it back (at least :data:`FREED_MEMORY_SETTINGS`' 8 MiB, at most DuckDB's
#: default 512 MiB). At 8 MiB the partitioned writes (a CSV parsed into user parts, the user
#: buckets) hand memory back all the time: 127M events from CSV parsed into 4 parts took 20.3 s
#: at 8 MiB, 16.6 s at 32 MiB, 16.2 s at 128 MiB (the same COPY, DuckDB 2.0, 2 threads).
BULK_FREE_SHARE = 1 / 64


def limited_settings(available: int) -> dict[str, str]:
    """DuckDB settings that keep its resident memory near its limit when ``available`` bytes
    are all the engine has (besides :data:`FREED_MEMORY_SETTINGS`): a partitioned write
    (``PARTITION_BY``: an input parsed into user parts) flushes each thread's rows after a few
    MB instead of half a million rows (the user-bucket writer sets its own threshold from the
    number of buckets: :func:`privmob.engine.buckets.writer_flush_rows`); memory freed in bulk
    goes back to the system after :data:`BULK_FREE_SHARE` of ``available``."""
    bulk = min(512 * 2**20, max(8 * 2**20, int(available * BULK_FREE_SHARE)))
    settings = {
        "partitioned_write_flush_threshold": str(max(8192, min(524_288, available // 800))),
        "allocator_bulk_deallocation_flush_threshold": f"'{bulk // 2**20}MiB'",
    }
    if available < TIGHT:  # each thread holds its own read and write buffers
        settings["threads"] = "1"
    return settings
