"""Benchmark: ``--memory-limit`` caps the whole process (peak RSS vs the limit).

For each limit, one child process runs ``privmob od`` on the same synthetic call records
(``uid, datetime, cell_id`` + a cells table; trips from consecutive events in different zones,
T trips per user) with ``--memory-limit``; the child reports its own peak resident memory
(VmHWM: Python, the libraries, DuckDB and the spill writer together) and its exit code. A
limit below the process's minimum is refused before the input is read (exit 2).

    uv run python benchmarks/bench_memory_limit.py --records 5000000
    uv run python benchmarks/bench_memory_limit.py --records 1000000 --limits 256MB 512MB
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import peak_rss_gb
from suite import data_for

OUT = Path(__file__).resolve().parent / "out"
LIMITS = ["256MB", "512MB", "1GB", "4GB"]


def child(limit: str, events: str, cells: str, tess: str) -> dict[str, object]:
    from privmob.cli import main

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        args = ["od", events, "--cells", cells, "-t", tess, "-e", "1", "-T", "10"]
        args += ["--memory-limit", limit, "--spill-dir", tmp, "--test-mode", "--seed", "1"]
        args += ["--budget", "10", "-o", str(Path(tmp) / "out"), "--quiet"]
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return {"code": code, "seconds": time.perf_counter() - t0, "peak_gb": peak_rss_gb()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--limits", nargs="*", default=LIMITS)
    ap.add_argument("--child", nargs=4, metavar=("LIMIT", "EVENTS", "CELLS", "TESS"))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return
    events, cells, tess = data_for("od-daily-events", a.records, OUT)  # events and cells
    print(f"{a.records:,} records; peak RSS of the whole process vs --memory-limit")
    print(f"{'limit':>8} {'exit':>4} {'peak MB':>8} {'peak/limit':>10} {'seconds':>8}")
    from privmob.engine.buckets import parse_memory

    for limit in a.limits:
        out = subprocess.run(
            [sys.executable, __file__, "--child", limit, str(events), str(cells), str(tess)],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = out.stdout.strip().splitlines()
        if not lines:
            print(f"{limit:>8} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(lines[-1])
        peak = float(r["peak_gb"]) * 1024**3
        ratio = peak / parse_memory(limit)
        print(
            f"{limit:>8} {r['code']:>4} {peak / 1e6:>8.0f} {ratio:>10.2f} "
            f"{float(r['seconds']):>8.1f}"
        )
        if r["code"]:
            print("         " + " ".join(out.stderr.strip().splitlines()[:2]))


if __name__ == "__main__":
    main()
