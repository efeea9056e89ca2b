"""Benchmark: `privmob od` against a bare DuckDB bounded group-by on the same Parquet file.

For each size, synthetic trips (263-ish tiles, ~20 trips per user) are generated once into
benchmarks/out/, then two child processes run:

* baseline: one DuckDB query keeping T trips per user (row_number over a hash) and counting
  OD pairs — the floor for any bounded OD count;
* privmob: the full release (validation, tile mapping, bounding, dense counts over the public
  domain, secure noise on every cell, ledger charge, Parquet + JSON output).

Prints wall time, peak memory (VmHWM of each child) and the ratio privmob / baseline.

    uv run python benchmarks/bench_od.py --sizes 1000000 10000000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import answer_child, peak_rss_gb, run_child
from suite import data_for

OUT = Path(__file__).resolve().parent / "out"
T = 10


def child_baseline(path: str) -> dict[str, float]:
    import duckdb

    con = duckdb.connect()
    t0 = time.perf_counter()
    n = con.execute(f"""
        SELECT count(*) FROM (
          SELECT origin, destination, count(*) AS n FROM (
            SELECT origin, destination, row_number() OVER (
                PARTITION BY uid ORDER BY hash(uid, tid, 12345)) AS r
            FROM read_parquet('{path}')) WHERE r <= {T}
          GROUP BY origin, destination)""").fetchone()[0]
    return {"seconds": time.perf_counter() - t0, "groups": n, "peak_gb": peak_rss_gb()}


def child_privmob(path: str, tess_path: str) -> dict[str, float]:
    from privmob.data import load_trips
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import DuckDBEngine
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant, write_release
    from privmob.releases.od import od_matrix

    t0 = time.perf_counter()
    tess = load_tessellation(tess_path)
    with tempfile.TemporaryDirectory() as tmp, DuckDBEngine() as engine:
        acct = Accountant(Ledger(Path(tmp) / "l.sqlite"), "bench", budget=10.0)
        trips = load_trips(path, engine=engine, tessellation=tess)
        rel = od_matrix(trips, tessellation=tess, epsilon=1.0, accountant=acct, max_trips=T)
        write_release(rel, Path(tmp) / "od")
    return {
        "seconds": time.perf_counter() - t0,
        "cells": len(rel.tables["od"]),
        "peak_gb": peak_rss_gb(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if answer_child(args.child, {"baseline": child_baseline, "privmob": child_privmob}):
        return
    rows = []
    for n in args.sizes:
        print(f"size {n:,}")
        path, _, tess = data_for("od-trips", n, OUT)
        base = run_child(Path(__file__), "baseline", str(path))
        pm = run_child(Path(__file__), "privmob", str(path), str(tess))
        rows.append((n, base, pm))
        print(
            f"  baseline {base['seconds']:.2f}s ({base['peak_gb']:.2f} GB) | privmob "
            f"{pm['seconds']:.2f}s ({pm['peak_gb']:.2f} GB) | ratio "
            f"{pm['seconds'] / base['seconds']:.2f}"
        )
    print("\n| trips | bare bounded group-by | privmob od | ratio | privmob peak memory |")
    print("|---:|---:|---:|---:|---:|")
    for n, b, p in rows:
        print(
            f"| {n:,} | {b['seconds']:.2f} s | {p['seconds']:.2f} s | "
            f"{p['seconds'] / b['seconds']:.2f} | {p['peak_gb']:.2f} GB |"
        )


if __name__ == "__main__":
    main()
