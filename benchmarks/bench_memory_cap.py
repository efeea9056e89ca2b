"""Benchmark: does ``--memory-limit L`` cap the whole process? Peak RSS / L for every release.

Each release command (``od``, ``population``, ``series-counts``, ``density`` on call records
with a cells table; ``od-trips``: ``od`` on one-row trips; ``report`` on trip points) runs as
its own ``privmob`` process with ``--memory-limit L``; its peak resident memory is measured
from outside, by the parent, from the child's resource usage when it ends (``os.wait4``: the
maximum resident set of that one process, converted to bytes for the platform). Linux carries
the maximum resident set over ``exec``, so a child forked from a large parent would report at
least the parent's size: the inputs are generated in a separate process and this parent stays
small (its own resident memory at the end is printed). Inputs (``benchmarks/out``, generated
on first use by ``benchmarks/suite.py``): Parquet with about ``--records`` rows and CSV with
about ``--csv-records`` rows, drawn inside each ``--tessellation`` (by default the polygon
layers users have: the 263 NYC taxi zones, the 117 SF neighbourhoods and 2,000 irregular
Voronoi cells; ``grid``: 263 square cells, the easy case). The target (issues 30 and 43): peak
<= 1.1 x L for every run, and a larger limit never fails where a smaller one succeeds.

    uv run python benchmarks/bench_memory_cap.py                       # 5M Parquet, 1.5M CSV
    uv run python benchmarks/bench_memory_cap.py --records 500000 --csv-records 0 \
        --limits 512MB --releases od report
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from suite import START, TESSELLATIONS, data_for  # noqa: E402

OUT = HERE / "out"
LIMITS = ["512MB", "1GB", "2GB", "4GB"]
RELEASES = ["od", "od-trips", "population", "series-counts", "density", "report"]
END = "2024-01-29"


def command(release: str, n: int, fmt: str, tessellation: str = "grid") -> list[str]:
    """The release's arguments (input, options) on the suite's synthetic data."""
    kind = "report" if release == "report" else "population"  # trip points / call records
    kind = "od-trips" if release == "od-trips" else kind  # one-row trips
    path, cells, tess = data_for(kind, n, OUT, tessellation, fmt)
    period = ["--start", START, "--end", END]
    if release == "od-trips":  # on taxi zones the trips give coordinates only
        return ["od", str(path), "-t", str(tess), "-e", "1", "-T", "10", *period]
    if release == "report":
        return ["report", str(path), "-t", str(tess), "-e", "1", "-T", "10", *period]
    if release == "density":
        return ["density", str(path), "--cells", str(cells), "--zones", str(tess), "-e", "1",
                "--delta", "1e-6", "-T", "30", "--week", START]  # fmt: skip
    args = [release, str(path), "--cells", str(cells), "-t", str(tess), "-e", "1"]
    if release == "od":  # one matrix over the 28 days (daily matrices need 0.33 GB more)
        return [*args, "-T", "10", *period]
    if release == "series-counts":  # no cells table: the events with their coordinates
        return ["series-counts", str(located(path, cells)), "-t", str(tess), "-e", "1", *period]
    return args


def located(events: Path, cells: Path | None) -> Path:
    """The call records with the coordinates of their cell (``uid, datetime, lat, lng``),
    written once beside them in the same format."""
    import duckdb

    path = events.with_name(events.stem + "_located" + events.suffix)
    if not path.exists():
        fmt = "csv, HEADER" if events.suffix == ".csv" else "parquet"
        duckdb.sql(
            f"COPY (SELECT e.uid, e.datetime, c.lat, c.lng FROM '{events}' e "
            f"JOIN '{cells}' c USING (cell_id)) TO '{path}' (FORMAT {fmt})"
        )
    return path


def prepared(release: str, n: int, fmt: str, tessellation: str) -> list[str]:
    """``command`` run in a child process (generating a missing input takes memory that the
    measured children would otherwise inherit as their starting maximum)."""
    out = subprocess.run(
        [sys.executable, __file__, "--prepare", release, str(n), fmt, tessellation],
        check=True,
        capture_output=True,
        text=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def run_one(args: list[str], limit: str) -> dict[str, object]:
    """One privmob process; its exit code, wall time, peak RSS (bytes) and last stderr line."""
    from privmob.engine.memory import maxrss_bytes

    exe = Path(sys.executable).with_name("privmob")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("report.html" if args[0] == "report" else "out")
        argv = [str(exe), *args, "--memory-limit", limit, "--spill-dir", tmp, "-o", str(out)]
        argv += ["--test-mode", "--seed", "1", "--budget", "100", "--quiet"]
        t0 = time.perf_counter()
        with open(Path(tmp) / "stderr", "w+") as err:
            child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            lines = [line.strip() for line in err if line.strip()]
    return {
        "code": child.returncode,
        "seconds": time.perf_counter() - t0,
        "peak": maxrss_bytes(usage.ru_maxrss),
        "message": lines[0] if lines else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000, help="Parquet rows (0: none)")
    ap.add_argument("--csv-records", type=int, default=1_500_000, help="CSV rows (0: none)")
    ap.add_argument("--limits", nargs="+", default=LIMITS)
    ap.add_argument("--releases", nargs="+", default=RELEASES, choices=RELEASES)
    ap.add_argument(
        "--tessellation",
        nargs="+",
        choices=TESSELLATIONS,
        default=["taxi-zones", "sf-neighbourhoods", "voronoi-2000"],
        help="polygon layers by default (what users have); grid: the 263 square cells",
    )
    ap.add_argument("--prepare", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.prepare:
        release, n, fmt, tessellation = a.prepare
        print(json.dumps(command(release, int(n), fmt, tessellation)))
        return
    from privmob.engine.buckets import parse_memory
    from privmob.engine.memory import rss_bytes

    inputs = [(n, fmt) for n, fmt in ((a.records, "parquet"), (a.csv_records, "csv")) if n]
    print(f"{'tessellation':<17} {'release':<14} {'input':<14} {'limit':>6} {'exit':>4} "
          f"{'peak MB':>8} {'peak/limit':>10} {'seconds':>8}", flush=True)  # fmt: skip
    worst, broken = 0.0, []
    runs = [(t, n, fmt, r) for t in a.tessellation for n, fmt in inputs for r in a.releases]
    for tessellation, n, fmt, release in runs:
        args = prepared(release, n, fmt, tessellation)
        ok_below = False
        for limit in sorted(a.limits, key=parse_memory):
            r = run_one(args, limit)
            ratio = int(r["peak"]) / parse_memory(limit)  # type: ignore[call-overload]
            worst = max(worst, ratio)
            print(
                f"{tessellation:<17} {release:<14} {f'{n:,} {fmt}':<14} {limit:>6} "
                f"{r['code']:>4} "
                f"{int(r['peak']) / 1e6:>8.0f} {ratio:>10.2f} "  # type: ignore[call-overload]
                f"{float(r['seconds']):>8.1f}",  # type: ignore[arg-type]
                flush=True,
            )
            if r["code"]:
                print(f"{'':<16}{r['message'][:150]}", flush=True)
                if ok_below:
                    broken.append(f"{tessellation} {release} {fmt} {limit}")
            ok_below = ok_below or r["code"] == 0
    print(f"largest peak/limit: {worst:.2f} (target <= 1.10)")
    print(f"this parent's resident memory: {rss_bytes() / 1e6:.0f} MB (a floor of every peak)")
    print("a larger limit failed where a smaller one succeeded: " + (", ".join(broken) or "none"))


if __name__ == "__main__":
    main()
