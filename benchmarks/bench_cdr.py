"""Benchmark: call-detail records to daily private OD matrices (issue 3).

N synthetic events (default 100M: 1M users, 500 towers, 30 days) → trips (seed 003's rule:
consecutive events in different zones) → 30 daily OD matrices over 263 zones (NYC taxi zones
when ../shared/data is present, else a 263-cell grid), user level with T trips per user per day,
each day charged to a throw-away ledger.

Each measured step runs in a fresh subprocess; the parent prints wall time and the child's own
peak resident memory (its ru_maxrss) and the ratio to a baseline: the same trip counting written as
one plain DuckDB query (no validation, no bounding, no noise, no ledger).

    uv run python benchmarks/bench_cdr.py --events 10_000_000 --users 100_000
    uv run python benchmarks/bench_cdr.py            # 100M events, 1M users
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZONES = REPO.parent / "shared" / "data" / "nyc_taxi_zones" / "taxi_zones.geojson"
START = "2024-01-01"
DAYS = 30


def generate(workdir: Path, n_events: int, n_users: int, n_towers: int, seed: int) -> None:
    """Synthetic CDR as Parquet (events) and CSV (towers), made inside DuckDB."""
    import duckdb
    import numpy as np

    from privmob.data.grids import square_grid
    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(ZONES) if ZONES.exists() else None
    if tess is None:
        tess = square_grid((-74.05, 40.55, -73.75, 40.90), 2500)
    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = tess.bounds
    lng, lat, got = [], [], 0
    while got < n_towers:  # towers inside the zones
        cx, cy = rng.uniform(x0, x1, 4 * n_towers), rng.uniform(y0, y1, 4 * n_towers)
        inside = tess.assign(cx, cy) >= 0
        lng += cx[inside].tolist()
        lat += cy[inside].tolist()
        got = len(lng)
    import pandas as pd

    pd.DataFrame(
        {"cell_id": np.arange(n_towers), "lat": lat[:n_towers], "lng": lng[:n_towers]}
    ).to_csv(workdir / "towers.csv", index=False)
    con = duckdb.connect()
    con.execute(f"SELECT setseed({(seed % 1000) / 1000})")
    per_user = max(1, n_events // n_users)
    con.execute(
        f"""COPY (SELECT i // {per_user} AS uid,
              TIMESTAMP '{START}' + to_seconds(CAST(floor(random() * {DAYS * 86400}) AS BIGINT))
                AS datetime,
              CASE WHEN random() < 0.7 THEN CAST(hash(i // {per_user}) % {n_towers} AS INT)
                   ELSE CAST(floor(random() * {n_towers}) AS INT) END AS cell_id
            FROM range({n_events}) t(i))
        TO '{workdir / "events.parquet"}' (FORMAT parquet)"""
    )
    con.close()


def run_privmob(workdir: Path, max_trips: int, memory_limit: str) -> dict[str, float]:
    from privmob.data.grids import square_grid
    from privmob.data.sources import load_events
    from privmob.data.tessellation_input import load_tessellation
    from privmob.domain import Period
    from privmob.engine import DuckDBEngine
    from privmob.prepare.trips import consecutive_event_trips
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix

    t0 = time.perf_counter()
    tess = load_tessellation(ZONES) if ZONES.exists() else None
    if tess is None:
        tess = square_grid((-74.05, 40.55, -73.75, 40.90), 2500)
    eng = DuckDBEngine(memory_limit=memory_limit)
    events = load_events(
        str(workdir / "events.parquet"),
        engine=eng,
        tessellation=tess,
        cells=str(workdir / "towers.csv"),
    )
    t_load = time.perf_counter()
    trips = consecutive_event_trips(events)
    period = Period.parse("day", START, f"2024-01-{DAYS + 1:02d}")
    acct = Accountant(Ledger(workdir / "ledger.sqlite"), "bench", budget=1e9)
    rel = od_matrix(
        trips,
        tessellation=tess,
        epsilon=1.0,
        accountant=acct,
        max_trips=max_trips,
        tau=0,
        period=period,
        bound_per="period",
        rng=None,
    )
    t_end = time.perf_counter()
    return {
        "load_validate_s": t_load - t0,
        "od_s": t_end - t_load,
        "total_s": t_end - t0,
        "periods": float(period.n_bins),
        "zones": float(tess.k),
        "cells_released": float(len(rel.tables["od"])),
        "ledger_entries": float(len(rel.ledger_entries)),
    }


def run_baseline(workdir: Path, memory_limit: str) -> dict[str, float]:
    """The same trip counting as one plain DuckDB query (towers to zone by a join)."""
    import duckdb
    import numpy as np
    import pandas as pd

    from privmob.data.grids import square_grid
    from privmob.data.tessellation_input import load_tessellation

    t0 = time.perf_counter()
    tess = load_tessellation(ZONES) if ZONES.exists() else None
    if tess is None:
        tess = square_grid((-74.05, 40.55, -73.75, 40.90), 2500)
    towers = pd.read_csv(workdir / "towers.csv")
    towers["tile"] = np.asarray(tess.assign(towers.lng.to_numpy(), towers.lat.to_numpy()))
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.register("towers", towers)
    df = con.execute(
        f"""SELECT day, o, d, count(*) AS n FROM (
              SELECT CAST(floor(epoch(datetime - TIMESTAMP '{START}') / 86400) AS INT) AS day,
                     tile AS o, LEAD(tile) OVER (PARTITION BY uid ORDER BY datetime, tile) AS d
              FROM read_parquet('{workdir / "events.parquet"}') e JOIN towers USING (cell_id))
            WHERE d IS NOT NULL AND d <> o GROUP BY ALL"""
    ).df()
    return {"total_s": time.perf_counter() - t0, "groups": float(len(df))}


def child(args: argparse.Namespace) -> None:
    wd = Path(args.workdir)
    if args.child == "generate":
        generate(wd, args.events, args.users, args.towers, args.seed)
        out: dict[str, float] = {}
    elif args.child == "privmob":
        out = run_privmob(wd, args.max_trips, args.memory_limit)
    else:
        out = run_baseline(wd, args.memory_limit)
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
    print(json.dumps(out))


def measured(
    step: str, args: argparse.Namespace, workdir: Path
) -> tuple[dict[str, float], float, float]:
    """Run one step in a fresh subprocess: (its output, wall seconds, peak RSS in GB)."""
    cmd = [sys.executable, __file__, "--child", step, "--workdir", str(workdir)]
    cmd += ["--events", str(args.events), "--users", str(args.users), "--towers", str(args.towers)]
    cmd += ["--seed", str(args.seed), "--max-trips", str(args.max_trips)]
    cmd += ["--memory-limit", args.memory_limit]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{step} failed:\n{res.stderr[-4000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return out, wall, out["peak_rss_gb"]  # VmHWM of that child alone


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100_000_000)
    p.add_argument("--users", type=int, default=1_000_000)
    p.add_argument("--towers", type=int, default=500)
    p.add_argument("--max-trips", type=int, default=10)
    p.add_argument("--memory-limit", default="5GB")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default=None)
    p.add_argument("--skip-baseline", action="store_true", help="do not run the baseline")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    tmp = tempfile.TemporaryDirectory(prefix="privmob-bench-")
    wd = Path(args.workdir or tmp.name)
    wd.mkdir(parents=True, exist_ok=True)
    print(f"{args.events:,} events, {args.users:,} users, {args.towers} towers, {DAYS} days")
    _, gen_s, _ = measured("generate", args, wd)
    print(f"generated in {gen_s:.1f} s (not part of the measurement)")
    base_s = float("nan")
    if not args.skip_baseline:
        _, base_s, base_gb = measured("baseline", args, wd)
        print(f"baseline (one plain DuckDB query): {base_s:.1f} s wall, peak RSS {base_gb:.2f} GB")
    out, wall, gb = measured("privmob", args, wd)
    print(
        f"privmob: {wall:.1f} s wall (load+validate {out['load_validate_s']:.1f} s, "
        f"trips+bound+count+noise+ledger {out['od_s']:.1f} s), peak RSS {gb:.2f} GB; "
        f"{int(out['periods'])} daily matrices over {int(out['zones'])} zones, "
        f"{int(out['ledger_entries'])} ledger entries"
    )
    print(f"ratio privmob / baseline wall time: {wall / base_s:.2f}")


if __name__ == "__main__":
    main()
