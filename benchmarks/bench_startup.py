"""Benchmark: the fixed cost of every release command, as an operator runs it.

Each release command runs as a fresh process (the venv's ``privmob`` script, as ``uv run
privmob`` starts it) on a tiny CSV input (about 2,000 records, cached in benchmarks/out/), so
that its wall time is nearly all fixed cost. From the command's own step lines on stderr
(``✓ step (0.42s)``) it prints:

* ``--help``: ``privmob <command> --help`` (interpreter and the CLI's imports);
* ``wall``: the whole release (median of ``--repeat`` runs);
* ``start-up``: wall minus the sum of the timed steps (interpreter, imports, engine start,
  planning, writing the files and exit), as issue 15 defines it;
* ``tessellation``: the step reading and checking the tessellation (the issue counts it in
  the start-up too), and ``start-up + tessellation``;
* the steps that depend on the public domain's size rather than on the input (e.g. density's
  Voronoi cells of the towers) are listed apart, not counted as start-up.

Tessellations: the 263 NYC taxi-zone polygons (../shared/data/nyc_taxi_zones, 4 MB of
GeoJSON) and the 263-cell square grid.

    uv run python benchmarks/bench_startup.py
    uv run python benchmarks/bench_startup.py --tessellations grid --repeat 5
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
from suite import END, START, data_for  # noqa: E402

N = 2000  # records: small enough that the wall time is the fixed cost
STEP = re.compile(r"✓ (.*) \((\d+\.\d+)s\)")
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
    }


def timed(argv: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr}")
    return seconds, res.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessellations", nargs="+", default=["taxi-zones", "grid"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    script = Path(sys.executable).with_name("privmob")
    uv = shutil.which("uv")
    print(f"privmob: {script}", flush=True)
    timed([str(script), "--help"])  # a first run writes the byte code of a fresh venv
    helps = [timed([str(script), "--help"])[0] for _ in range(args.repeat)]
    print(f"privmob --help: min {min(helps):.2f} s, median {statistics.median(helps):.2f} s")
    if uv:
        uvs = [timed([uv, "run", "--no-sync", "privmob", "--help"])[0] for _ in range(args.repeat)]
        print(f"uv run --no-sync privmob --help: min {min(uvs):.2f} s")
    rows = []
    for tessellation in args.tessellations:
        for name, (kind, _) in commands(Path()).items():
            data, cells, tess = data_for(kind, N, OUT, tessellation, "csv")
            argv = commands(tess)[name][1]
            argv = [a.replace("{data}", str(data)).replace("{cells}", str(cells)) for a in argv]
            help_s = timed([str(script), argv[0], "--help"])[0]
            runs = []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    out = Path(tmp) / ("report.html" if argv[0] == "report" else "out")
                    run = [*argv, "-o", str(out), "--ledger", str(Path(tmp) / "l.sqlite")]
                    wall, err = timed([str(script), *run, "--budget", "100"])
                steps = {m[1]: float(m[2]) for m in STEP.finditer(err)}
                tess_s = sum(
                    v for k, v in steps.items() if k.startswith("reading the tessellation")
                )
                domain = sum(v for k, v in steps.items() if k.startswith(DOMAIN_STEPS))
                runs.append((wall, wall - sum(steps.values()), tess_s, domain))
            wall, gap, tess_s, domain = (statistics.median(r[i] for r in runs) for i in range(4))
            rows.append((name, tessellation, help_s, wall, gap, tess_s, gap + tess_s, domain))
            print(
                f"{name:<14} {tessellation:<10} --help {help_s:4.2f} s  wall {wall:4.2f} s  "
                f"start-up {gap:4.2f} s  tessellation {tess_s:4.2f} s  "
                f"sum {gap + tess_s:4.2f} s"
                + (f"  domain steps {domain:4.2f} s" if domain else ""),
                flush=True,
            )
    print(
        "\n| release | tessellation | `--help` | wall | start-up (wall - steps) | tessellation "
        "| start-up + tessellation |\n|---|---|---:|---:|---:|---:|---:|"
    )
    for name, tessellation, help_s, wall, gap, tess_s, total, _ in rows:
        print(
            f"| {name} | {tessellation} | {help_s:.2f} s | {wall:.2f} s | {gap:.2f} s "
            f"| {tess_s:.2f} s | {total:.2f} s |"
        )
    print(f"(about {N:,} records of CSV; medians of {args.repeat} runs; steps from the command's "
          "own step lines)")  # fmt: skip


if __name__ == "__main__":
    main()
