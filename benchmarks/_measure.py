"""Run a benchmark step in a child process; report wall time and the child's peak memory."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def run_child(script: Path, *args: str) -> dict[str, float]:
    """Run ``python script --child ... args``; the child prints a JSON dict on its last line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(script), "--child", *args], check=True, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    # ru_maxrss of children is the max over all children so far: report it when it grew
    result["peak_rss_gb"] = max(peak_kb, before) / 1024**2
    return result


def peak_rss_gb() -> float:
    """This process's peak resident memory (GB), read in the child itself."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024**2
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def peak_rss_mb() -> float:
    """This process's peak resident memory (MB), read in the child itself."""
    return peak_rss_gb() * 1024


def answer_child(child: list[str] | None, steps: Mapping[str, Callable[..., Any]]) -> bool:
    """In a child process of :func:`run_child` (``--child KIND ARGS...``): run the step
    ``steps[KIND]`` with ARGS and print its result as JSON on the last line. Whether this
    process is such a child (then the benchmark does nothing else)."""
    if not child:
        return False
    kind, *args = child
    print(json.dumps(steps[kind](*args)))
    return True


COMPILE = """
import compileall, re, sys, sysconfig
dirs = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")} | set(sys.argv[1:])
ok = all(compileall.compile_dir(d, quiet=1, workers=0, rx=re.compile(r"/tests?/")) for d in dirs)
"""


def compile_bytecode(python: str, *extra: str) -> None:
    """Byte-compile an interpreter's site-packages (and ``extra`` folders) once, as
    ``pip install`` does.

    uv installs without .pyc files and this machine sets PYTHONDONTWRITEBYTECODE=1, so every
    timed run would otherwise compile pandas & co. from source (~2-5 s per run, for both
    tools alike). Done untimed, before the runs; later runs only check the mtimes.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([python, "-c", COMPILE, *extra], env=env, capture_output=True, check=False)
