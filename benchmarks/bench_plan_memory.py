"""Benchmark: the plan's memory estimate against the measured peak of the release.

Every release states, before it reads data, the memory its public domain needs
(``Plan.memory_bytes``, ``privmob.releases.specs``); ``--memory-limit`` refuses a plan over the
limit. This checks the estimate: for OD matrices over square grids of several sizes (daily
bins over a month, so the domain grows as k^2 x 31), one child process per size runs
``Session.od_matrix`` on a small input (the domain, not the input, is what the plan sizes) and
reports the growth of its resident memory during the release (VmHWM at the end minus the
resident memory after loading the input) next to the plan's estimate.

    uv run python benchmarks/bench_plan_memory.py
    uv run python benchmarks/bench_plan_memory.py --tiles 100 400 800 --trips 20000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import peak_rss_gb

TILES = [100, 400, 800]
DAYS = 31


def rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024**2
    return peak_rss_gb()


def child(tiles: int, trips: int) -> dict[str, float]:
    import math

    import numpy as np
    import pandas as pd

    import privmob as pm
    from privmob.data.grids import square_grid

    side = math.isqrt(tiles)
    # a side x side grid of 500 m cells around Manhattan (the declared public bounds)
    lng0, lat0 = -74.0, 40.7
    dlat = side * 500 / 111_320
    dlng = dlat / math.cos(math.radians(lat0))
    tess = square_grid((lng0, lat0, lng0 + dlng, lat0 + dlat), 500)
    rng = np.random.default_rng(1)
    ids = np.asarray(tess.tile_ids)
    start = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, DAYS * 86400, trips), "s")
    df = pd.DataFrame(
        {
            "uid": rng.integers(0, trips // 5 + 1, trips),
            "tid": np.arange(trips),
            "start_time": start,
            "end_time": start + pd.Timedelta(minutes=20),
            "origin": rng.choice(ids, trips),
            "destination": rng.choice(ids, trips),
        }
    )
    s = pm.Session(df, tessellation=tess, budget=pm.PureDP(10), dataset="bench")
    period = pm.Period("2024-01-01", "2024-02-01", bin="day")
    plan = s.plan_od_matrix(epsilon=1, max_trips=5, period=period)
    s._trips()  # the input loaded and validated: what follows is the release itself
    before = rss_gb()
    od = s.od_matrix(epsilon=1, max_trips=5, period=period)
    assert len(od.to_pandas()) == plan.output_rows
    grown = peak_rss_gb() - before
    s.close()
    return {
        "tiles": tess.k,
        "cells": plan.cells,
        "plan_gb": plan.memory_bytes / 1024**3,
        "measured_gb": grown,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, nargs="+", default=TILES)
    ap.add_argument("--trips", type=int, default=20_000)
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    print("| tiles | cells (31 days) | plan | measured growth | plan / measured |")
    print("|---:|---:|---:|---:|---:|")
    for tiles in args.tiles:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(tiles), str(args.trips)],
            check=True,
            capture_output=True,
            text=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ratio = r["plan_gb"] / r["measured_gb"]
        print(
            f"| {r['tiles']:,} | {r['cells']:,} | {r['plan_gb']:.2f} GB | "
            f"{r['measured_gb']:.2f} GB | {ratio:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
