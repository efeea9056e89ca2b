"""Where the fixed cost of one release command goes: run it in this process and print a JSON
breakdown on the last line of stdout (used by ``bench_startup.py --breakdown``).

    python benchmarks/_startup_probe.py od data.csv -t zones.geojson -e 1 -o out ...

It watches, without changing anything the command does:

* the command's steps (``privmob.cli.common.Steps``): when each starts and ends, so that every
  import and every second is known to fall inside or outside a timed step;
* every import (the interpreter's ``_find_and_load``, the hook ``-X importtime`` measures):
  its own CPU time (of the importing thread, children excluded: a loaded machine does not
  inflate it), added to its top-level package (``pandas``, ``numpy``, ...; ``privmob`` for
  privmob's own modules, ``stdlib`` for the standard library).

Printed (seconds): ``plan`` and ``cpu_plan`` (from the process's start to its ``plan:`` line,
wall and CPU: what issue 43 asks to be at most 0.3 s; ``plan_modules``: the top-level packages
imported by then), ``interpreter`` (from the process's start to this script's first line,
read from the kernel's start time of the process), ``outside`` (the time outside the steps
from then to the end of the command, before the interpreter exits), ``imports_outside`` per
package (CPU), ``steps`` per step, ``other_outside`` (what is outside the steps and is not an
import, in CPU: option parsing, opening the ledger, planning, printing); and the same in CPU seconds
of the process (``cpu_interpreter``, ``cpu_outside`` with the interpreter's, ``cpu_steps``),
which a loaded machine inflates far less than wall time.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

T0 = time.perf_counter()
CPU0 = time.process_time()  # the interpreter's start-up included (the process's CPU so far)


def _process_age() -> float:
    """Seconds since the kernel started this process (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


AGE = _process_age()  # measured first: jiffies (10 ms) resolution


def _top(name: str) -> str:
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top.startswith("_"):
        return "stdlib" if top not in ("_duckdb",) else "duckdb"
    return top


class Watch:
    """Step intervals and import self-times, split into inside and outside the steps."""

    def __init__(self) -> None:
        self.in_step = False
        self.steps: dict[str, float] = {}
        self.step_started = 0.0
        self.step_cpu = 0.0  # CPU seconds of the process (all its threads) inside the steps
        self._cpu_started = 0.0
        self.imports: dict[tuple[str, bool], float] = {}
        self._stack: list[float] = []  # children's time of each open import
        self.modules: dict[str, float] = {}  # outside the steps: module -> its own time

    def wrap_import(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def find_and_load(name: str, import_: Any) -> Any:
            inside = self.in_step
            self._stack.append(0.0)
            t = time.thread_time()
            try:
                return real(name, import_)
            finally:
                spent = time.thread_time() - t
                children = self._stack.pop()
                if self._stack:
                    self._stack[-1] += spent
                key = (_top(name), inside)
                self.imports[key] = self.imports.get(key, 0.0) + spent - children
                if not inside:
                    self.modules[name] = spent - children

        return find_and_load

    def watch_steps(self, steps_cls: Any) -> None:
        call, finish = steps_cls.__call__, steps_cls._finish_current
        watch = self

        def start(self: Any, message: str) -> None:
            call(self, message)
            if not self.quiet:
                watch.in_step, watch.step_started = True, time.perf_counter()
                watch._cpu_started = time.process_time()

        def end(self: Any) -> None:
            current = self._current
            finish(self)
            if current is not None:
                watch.steps[current] = (
                    watch.steps.get(current, 0.0) + time.perf_counter() - watch.step_started
                )
                watch.step_cpu += time.process_time() - watch._cpu_started
                watch.in_step = False

        steps_cls.__call__, steps_cls._finish_current = start, end


def watch_plan(seen: dict[str, Any]) -> None:
    """Record in ``seen`` when the command prints its plan line (``privmob.cli.run``)."""
    import privmob.cli.run as run

    shown = run.print_plan

    def print_plan(plan: Any) -> None:
        shown(plan)
        seen["plan"] = AGE + time.perf_counter() - T0
        seen["cpu_plan"] = time.process_time()
        seen["plan_modules"] = sorted({_top(m) for m in sys.modules} - {"stdlib"})

    run.print_plan = print_plan


def main() -> None:
    bootstrap: Any = sys.modules["_frozen_importlib"]  # importlib's core, as -X importtime
    watch = Watch()
    bootstrap._find_and_load = watch.wrap_import(bootstrap._find_and_load)
    import privmob.cli.common as common

    watch.watch_steps(common.Steps)
    seen: dict[str, Any] = {}
    watch_plan(seen)
    from privmob.cli import main as privmob_main

    sys.argv = ["privmob", *sys.argv[1:]]
    code: Any = 0
    try:
        privmob_main()
    except SystemExit as e:
        code = e.code
    total = time.perf_counter() - T0
    cpu = time.process_time()
    outside = total - sum(watch.steps.values())
    imports_out = {k: v for (k, inside), v in watch.imports.items() if not inside}
    result = {
        "exit": code,
        **seen,
        "interpreter": AGE,
        "outside": outside,
        "cpu_interpreter": CPU0,
        "cpu_outside": cpu - watch.step_cpu,
        "cpu_steps": watch.step_cpu,
        "imports_outside": dict(sorted(imports_out.items(), key=lambda kv: -kv[1])),
        "imports_inside": sum(v for (_, inside), v in watch.imports.items() if inside),
        "other_outside": cpu - watch.step_cpu - CPU0 - sum(imports_out.values()),
        "steps": watch.steps,
        "slowest_modules": dict(sorted(watch.modules.items(), key=lambda kv: -kv[1])[:40]),
    }
    print(json.dumps(result))
    from privmob.cli.entry import quick_exit

    quick_exit(code)  # as the privmob script exits


if __name__ == "__main__":
    main()
