"""Benchmark: the fixed cost of every release command, as an operator runs it.

Each release command runs as a fresh process (the venv's ``privmob`` script, as ``uv run
privmob`` starts it) on a tiny CSV input (about 2,000 records, cached in benchmarks/out/), so
that its wall time is nearly all fixed cost. From the command's own step lines on stderr
(``✓ step (0.42s)``) it prints:

* ``--help``: ``privmob <command> --help`` (interpreter and the CLI's imports);
* ``plan``: seconds from starting the process to its ``plan:`` line on stderr (issue 43: at
  most 0.3 s; the minimum of the runs, the least disturbed by other processes);
* ``wall``: the whole release (median of ``--repeat`` runs), and ``CPU``: its user + system
  seconds (all threads; a loaded machine inflates it far less than the wall time);
* ``start-up``: wall minus the sum of the timed steps (interpreter, imports, engine start,
  planning, writing the files and exit), as issues 15 and 29 define the fixed cost;
* ``tessellation``: the step reading and checking the tessellation (issue 15 counts it in
  the start-up too), and ``start-up + tessellation``;
* the commands: od (trips, and daily events with --bin day), population, series-counts,
  density, the report, ``counts --records trip-points --by tile,hour`` and ``series`` (a
  168-hour series, one value an hour; it reads no tessellation, so it runs once);
* the steps that depend on the public domain's size rather than on the input (e.g. density's
  Voronoi cells of the towers) are listed apart, not counted as start-up.

Byte code: the site-packages and privmob's sources are byte-compiled once before the runs,
untimed, as ``pip install`` does (uv installs without .pyc files, and this machine sets
PYTHONDONTWRITEBYTECODE=1: without this every command compiled some 800 modules from source,
about 1.8 CPU seconds, which is what the start-up of 1.7-2.0 s of issue 29 measured). What a
command costs without byte code is printed once (``od``, ``--no-bytecode`` line).

``--breakdown`` runs every command once more in-process (``_startup_probe.py``) and prints
where its fixed cost goes, in CPU seconds: the interpreter, the imports outside the steps per
package, and the rest (options, ledger open, planning, printing); and in wall seconds the
interpreter's exit after the command returns.

``--against SRC`` compares with another source tree of privmob (e.g. ``git worktree add
/tmp/before <commit>``; its ``src`` folder is put first on ``PYTHONPATH``), in the same run,
the two taking turns (``--repeat`` runs each per command, on a loaded machine the fairest
comparison): per command the plan line's wall time and the CPU seconds of the process up to
its plan line (a run that stops at the plan line, without ``--breakdown``'s import hook; the
cycle collector set as the ``privmob`` script sets it); medians and minimums.

Tessellations: the 263 NYC taxi-zone polygons (../shared/data/nyc_taxi_zones, 4 MB of
GeoJSON) and the 263-cell square grid.

    uv run python benchmarks/bench_startup.py
    uv run python benchmarks/bench_startup.py --tessellations grid --repeat 5 --breakdown
    uv run python benchmarks/bench_startup.py --tessellations taxi-zones --commands od report
    uv run python benchmarks/bench_startup.py --tessellations taxi-zones --commands od report \
        --repeat 9 --against /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
from _measure import compile_bytecode  # noqa: E402
from suite import END, START, data_for  # noqa: E402

N = 2000  # records: small enough that the wall time is the fixed cost
STEP = re.compile(r"✓ (.*) \((\d+\.\d+)s\)")
SERIES, SERIES_HOURS = "series", 168  # privmob series: a week of hourly values
SERIES_END = (datetime.fromisoformat(START) + timedelta(hours=SERIES_HOURS)).date().isoformat()
#: steps whose time grows with the public domain (zones x hours, towers), not with start-up
DOMAIN_STEPS = ("Voronoi cells",)


def commands(tess: Path) -> dict[str, tuple[str, list[str]]]:
    """Release command -> (benchmark data kind, its arguments after the input)."""
    period = ["--start", START, "--end", END]
    return {
        "od": ("od-trips", ["od", "{data}", "-t", str(tess), "-e", "1", "-T", "10"]),
        "od --bin day": (
            "od-daily-events",
            [
                "od",
                "{data}",
                "--cells",
                "{cells}",
                "-t",
                str(tess),
                "-e",
                "1",
                "-T",
                "10",
                "--bin",
                "day",
                *period,
            ],
        ),
        "population": (
            "population",
            ["population", "{data}", "--cells", "{cells}", "-t", str(tess), "-e", "1"],
        ),
        "series-counts": (
            "report",  # trip points are events with coordinates
            ["series-counts", "{data}", "-t", str(tess), "-e", "1", *period],
        ),
        "density": (
            "density",
            [
                "density",
                "{data}",
                "--cells",
                "{cells}",
                "--zones",
                str(tess),
                "--epsilon",
                "1",
                "--start",
                START,
            ],
        ),
        "report": ("report", ["report", "{data}", "-t", str(tess), "-e", "1", "-T", "10", *period]),
        "counts": (
            "report",  # trip points
            [
                "counts",
                "{data}",
                "-t",
                str(tess),
                "-e",
                "1",
                "--records",
                "trip-points",
                "--by",
                "tile,hour",
                *period,
            ],
        ),
        "series": (
            SERIES,  # a series file, no tessellation
            [
                "series",
                "{data}",
                "-e",
                "1",
                "--sensitivity",
                "1",
                "--start",
                START,
                "--end",
                SERIES_END,
                "--bin",
                "1h",
            ],
        ),
    }


def series_input(out: Path) -> Path:
    """A 168-hour series (one value an hour over the week from START) as CSV, cached in
    ``out``: the input of ``privmob series``."""
    path = out / "series_168h.csv"
    if not path.exists():
        out.mkdir(exist_ok=True)
        hours = [datetime.fromisoformat(START) + timedelta(hours=h) for h in range(SERIES_HOURS)]
        path.write_text("time,value\n" + "".join(f"{t.isoformat()},{i % 50}\n"
                                                  for i, t in enumerate(hours)))  # fmt: skip
    return path


def inputs_for(kind: str, tessellation: str) -> tuple[Path, Path | None, Path]:
    """(input, cells, tessellation) of a command's benchmark data kind."""
    if kind == SERIES:
        return series_input(OUT), None, data_for("report", N, OUT, tessellation, "csv")[2]
    return data_for(kind, N, OUT, tessellation, "csv")


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run ``argv``: its wall seconds, its CPU seconds (user + system) and its stderr."""
    seconds, cpu, err, _ = timed_plan(argv, env)
    return seconds, cpu, err


def timed_plan(
    argv: list[str], env: dict[str, str] | None = None
) -> tuple[float, float, str, float]:
    """Run ``argv``: its wall seconds, its CPU seconds (user + system), its stderr and the
    seconds from its start to its ``plan:`` line on stderr (NaN without one), read as the
    line arrives."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    plan = float("nan")
    lines = []
    with subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if plan != plan and line.startswith("plan:"):
                plan = time.perf_counter() - t0
            lines.append(line)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    err = "".join(lines)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    return seconds, cpu, err, plan


#: run by ``--against``: the release up to its plan line, then the process's CPU seconds on
#: stdout and an immediate exit (the gc threshold as privmob.cli.entry sets it)
TO_THE_PLAN = """
import gc, os, sys, time
gc.set_threshold(50_000, *gc.get_threshold()[1:])
import privmob.cli.run as run
shown = run.print_plan
def print_plan(plan):
    shown(plan)
    sys.stdout.write(f"{time.process_time()}\\n")
    sys.stdout.flush()
    os._exit(0)
run.print_plan = print_plan
from privmob.cli import main
sys.argv = ["privmob", *sys.argv[1:]]
main()
"""


def cpu_to_plan(argv: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds of a process that runs the release ``argv`` up to its plan line."""
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            [sys.executable, "-c", TO_THE_PLAN, *release_argv(argv, Path(tmp))],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    return float(res.stdout.strip().splitlines()[-1])


def compare(argv: list[str], name: str, script: Path, against: Path, repeat: int) -> str:
    """``argv``'s plan line (wall, from the start) and CPU to it, this tree and ``against``
    taking turns: one line per tree (medians and minimums)."""
    other = {**os.environ, "PYTHONPATH": str(against / "src")}
    got: dict[str, list[tuple[float, float]]] = {"against": [], "this": []}
    for _ in range(repeat):
        for which, env in (("against", other), ("this", None)):
            with tempfile.TemporaryDirectory() as tmp:
                plan = timed_plan([str(script), *release_argv(argv, Path(tmp))], env)[3]
            got[which].append((plan, cpu_to_plan(argv, env)))
    lines = []
    for which, label in (("against", f"{against}"), ("this", "this tree")):
        plans, cpus = [r[0] for r in got[which]], [r[1] for r in got[which]]
        lines.append(
            f"    {name:<8} {label}: plan line median {statistics.median(plans):.3f} s, min "
            f"{min(plans):.3f} s; CPU to the plan line median {statistics.median(cpus):.3f} s, "
            f"min {min(cpus):.3f} s ({repeat} runs each, taking turns)"
        )
    return "\n".join(lines)


def release_argv(argv: list[str], tmp: Path) -> list[str]:
    """The release's arguments with its output and a fresh ledger in ``tmp``."""
    out = tmp / ("report.html" if argv[0] == "report" else "out")
    return [*argv, "-o", str(out), "--ledger", str(tmp / "l.sqlite"), "--budget", "100"]


def breakdown(argv: list[str]) -> str:
    """One in-process run of the release (``_startup_probe.py``): where its fixed cost goes."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = [sys.executable, str(HERE / "_startup_probe.py"), *release_argv(argv, Path(tmp))]
        t0 = time.perf_counter()
        res = subprocess.run(probe, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
    got = json.loads(res.stdout.strip().splitlines()[-1])
    in_process = got["outside"] + sum(got["steps"].values())
    imports = got["imports_outside"]
    top = ", ".join(f"{k} {v:.3f}" for k, v in list(imports.items())[:6])
    rest = sum(list(imports.values())[6:])
    plan = (
        f"    plan line at {got['plan']:.2f} s, CPU {got['cpu_plan']:.2f} s; imported by then: "
        f"{', '.join(got['plan_modules'])}\n"
        if "plan" in got
        else ""
    )
    return plan + (
        f"    CPU outside the steps {got['cpu_outside']:.2f} s = interpreter "
        f"{got['cpu_interpreter']:.2f} + imports {sum(imports.values()):.2f} ({top}, "
        f"{len(imports) - 6} more {rest:.3f}) + the rest {got['other_outside']:.2f}; "
        f"wall: start {got['interpreter']:.2f} s, outside the steps {got['outside']:.2f} s, "
        f"exit {max(0.0, wall - got['interpreter'] - in_process):.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessellations", nargs="+", default=["taxi-zones", "grid"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--commands", nargs="+", default=None, help="only these (e.g. od report; default: all)"
    )
    ap.add_argument(
        "--breakdown", action="store_true", help="where each command's fixed cost goes (CPU)"
    )
    ap.add_argument("--no-cold", action="store_true", help="skip the one run without byte code")
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another privmob source tree: its plan line and CPU to it, taking turns with this one",
    )
    args = ap.parse_args()
    import privmob

    script = Path(sys.executable).with_name("privmob")
    uv = shutil.which("uv")
    load = os.getloadavg()
    print(f"privmob: {script}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}",
          flush=True)  # fmt: skip
    compile_bytecode(sys.executable, str(Path(privmob.__file__).parent))
    if args.against is not None:
        compile_bytecode(sys.executable, str(args.against / "src"))
    helps = [timed([str(script), "--help"])[0] for _ in range(args.repeat)]
    print(f"privmob --help: min {min(helps):.2f} s, median {statistics.median(helps):.2f} s")
    if uv:
        uvs = [timed([uv, "run", "--no-sync", "privmob", "--help"])[0] for _ in range(args.repeat)]
        print(f"uv run --no-sync privmob --help: min {min(uvs):.2f} s")
    rows: list[tuple[str, str, float, float, float, float, float, float, float, float]] = []
    for tessellation in args.tessellations:
        for name, (kind, _) in commands(Path()).items():
            if args.commands and name not in args.commands:
                continue
            if kind == SERIES and tessellation != args.tessellations[0]:
                continue  # no tessellation: once
            data, cells, tess = inputs_for(kind, tessellation)
            argv = commands(tess)[name][1]
            argv = [a.replace("{data}", str(data)).replace("{cells}", str(cells)) for a in argv]
            help_s = timed([str(script), argv[0], "--help"])[0]
            if not rows and not args.no_cold:  # once: the command without byte code
                with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as pyc:
                    cold_env = {
                        **os.environ,
                        "PYTHONDONTWRITEBYTECODE": "1",
                        "PYTHONPYCACHEPREFIX": pyc,  # an empty byte-code cache
                    }
                    wall, cpu, _ = timed([str(script), *release_argv(argv, Path(tmp))], cold_env)
                print(f"{name} --no-bytecode: wall {wall:.2f} s, CPU {cpu:.2f} s (one run)")
            runs, plans = [], []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    wall, cpu, err, plan = timed_plan([str(script), *release_argv(argv, Path(tmp))])
                plans.append(plan)
                steps = {m[1]: float(m[2]) for m in STEP.finditer(err)}
                tess_s = sum(
                    v for k, v in steps.items() if k.startswith("reading the tessellation")
                )
                domain = sum(v for k, v in steps.items() if k.startswith(DOMAIN_STEPS))
                runs.append((wall, wall - sum(steps.values()), tess_s, domain, cpu))
            wall, gap, tess_s, domain, cpu = (
                statistics.median(r[i] for r in runs) for i in range(5)
            )
            shown = "none" if kind == SERIES else tessellation
            rows.append(
                (name, shown, help_s, min(plans), wall, gap, tess_s, gap + tess_s, domain, cpu)
            )
            print(
                f"{name:<14} {shown:<10} --help {help_s:4.2f} s  plan {min(plans):4.2f} s  "
                f"wall {wall:4.2f} s  "
                f"CPU {cpu:4.2f} s  start-up {gap:4.2f} s  tessellation {tess_s:4.2f} s  "
                f"sum {gap + tess_s:4.2f} s"
                + (f"  domain steps {domain:4.2f} s" if domain else ""),
                flush=True,
            )
            if args.breakdown:
                print(breakdown(argv), flush=True)
            if args.against is not None:
                print(compare(argv, name, script, args.against, args.repeat), flush=True)
    print(
        "\n| release | tessellation | `--help` | plan line (min) | wall | CPU "
        "| start-up (wall - steps) | tessellation | start-up + tessellation |"
        "\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for name, tessellation, help_s, plan, wall, gap, tess_s, total, _, cpu in rows:
        print(
            f"| {name} | {tessellation} | {help_s:.2f} s | {plan:.2f} s | {wall:.2f} s "
            f"| {cpu:.2f} s "
            f"| {gap:.2f} s | {tess_s:.2f} s | {total:.2f} s |"
        )
    load = os.getloadavg()
    print(f"(about {N:,} records of CSV; medians of {args.repeat} runs, the plan line their "
          "minimum; steps from the command's "
          f"own step lines; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the "
          "end)")  # fmt: skip


if __name__ == "__main__":
    main()
