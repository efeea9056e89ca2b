"""Benchmark: how a floor is read changes what the engine computes.

The suite's floors (benchmarks/suite.py) used to be read as ``SELECT count(*) FROM (floor)``:
the number of groups only. An optimizer may then drop the work of counts nobody reads (Spark
turned the density floor's out-of-week branch into a bare scan, without its per-user distinct
hours). They are now read as ``SELECT count(*), sum(n) FROM (floor)``: every count computed,
as privmob computes (and fetches) every count. This script times both readings of the same
floor on the same engine, alternating (groups, summed, groups, summed) and keeping each
side's faster run, and prints the ratio summed / groups-only: by how much the old floor was
too cheap.

    uv run python benchmarks/bench_floor_method.py --engine duckdb --tessellation taxi-zones \
        --input csv --releases od-trips population report --size 1e7
    PRIVMOB_SPARK_CONF=spark.driver.memory=4g uv run python benchmarks/bench_floor_method.py \
        --engine spark --size 1e7
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from suite import FLOORS, RELEASES, data_for, make_engine_for  # noqa: E402

READINGS = {
    "groups only": "SELECT count(*) AS groups FROM ({sql}) AS g_",
    "every count": "SELECT count(*) AS groups, sum(n) AS total FROM ({sql}) AS g_",
}


def timed(eng: object, release: str, path: Path, cells: Path | None, tess: Path, how: str) -> float:
    t0 = time.perf_counter()
    sql = FLOORS[release](eng, str(path), str(cells or ""), str(tess))
    eng.fetch(READINGS[how].format(sql=sql))  # type: ignore[attr-defined]
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb")
    ap.add_argument("--releases", nargs="+", default=list(RELEASES), choices=RELEASES)
    ap.add_argument("--size", type=float, default=1e7)
    ap.add_argument("--tessellation", choices=("grid", "taxi-zones"), default="grid")
    ap.add_argument("--input", choices=("parquet", "csv"), default="parquet")
    args = ap.parse_args()
    eng = make_engine_for(args.engine, "")
    print(f"| release | {' | '.join(READINGS)} | ratio |\n|---|---:|---:|---:|")
    for release in args.releases:
        path, cells, tess = data_for(
            release, int(args.size), HERE / "out", args.tessellation, args.input
        )
        best = dict.fromkeys(READINGS, float("inf"))
        for _ in range(2):
            for how in READINGS:
                best[how] = min(best[how], timed(eng, release, path, cells, tess, how))
        old, new = best["groups only"], best["every count"]
        print(f"| {release} | {old:.1f} s | {new:.1f} s | {new / old:.2f} |", flush=True)
    print(f"({args.engine}, {int(args.size):,} records, {args.tessellation}, {args.input}; "
          f"load average {os.getloadavg()[0]:.1f} at the end)")  # fmt: skip


if __name__ == "__main__":
    main()
