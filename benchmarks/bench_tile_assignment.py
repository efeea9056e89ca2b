"""Benchmark: point-to-tile assignment (``Tessellation.assign``).

Usage: uv run python benchmarks/bench_tile_assignment.py [--points 2000000]

For the NYC taxi zones (263 polygons), the Milan grid (10,000 cells, read as polygons) and a
generated square grid (arithmetic path) it times ``assign`` on uniform random points in the
tessellation's bounding box, and on the same number of points drawn from 10,000 distinct
places (the deduplicated path). Baseline, in the same process: shapely 2's
``STRtree.query(points, predicate="intersects")`` on a 200,000-point subset, the textbook
vectorised approach. Each case runs in a fresh subprocess so its peak memory (VmHWM) is its
own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
CASES = {
    "nyc-taxi-zones": SHARED / "nyc_taxi_zones" / "taxi_zones.geojson",
    "milan-grid": SHARED / "milan_grid" / "milano-grid.geojson",
    "square-grid": None,
}


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(case: str, n: int, repeated: bool) -> dict:
    import numpy as np
    import shapely

    from privmob.data.tessellation import load_tessellation, square_grid

    t0 = time.perf_counter()
    if CASES[case] is None:
        tess = square_grid((-74.05, 40.60, -73.75, 40.90), 250)  # ~16,000 cells
    else:
        tess = load_tessellation(CASES[case])
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    x0, y0, x1, y1 = tess.bounds
    if repeated:
        places = rng.uniform((x0, y0), (x1, y1), size=(10_000, 2))
        pick = rng.integers(0, len(places), n)
        lng, lat = places[pick, 0], places[pick, 1]
    else:
        lng, lat = rng.uniform(x0, x1, n), rng.uniform(y0, y1, n)
    t0 = time.perf_counter()
    tiles = tess.assign(lng, lat)
    secs = time.perf_counter() - t0
    # baseline: STRtree with the intersects predicate, smallest tile per point
    m = min(n, 200_000)
    t0 = time.perf_counter()
    tree = shapely.STRtree(tess.gdf.geometry.values)
    inp, tile = tree.query(shapely.points(lng[:m], lat[:m]), predicate="intersects")
    base = np.full(m, 1 << 40, dtype=np.int64)
    np.minimum.at(base, inp, tile)
    base[base == 1 << 40] = -1
    base_s = time.perf_counter() - t0
    return {
        "case": case + (" (10k places)" if repeated else ""),
        "k": tess.k,
        "points": n,
        "load_s": load_s,
        "assign_s": secs,
        "points_per_s": n / secs,
        "inside": float((tiles >= 0).mean()),
        "baseline_points_per_s": m / base_s,
        "peak_mb": peak_mb(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.points, args.child[1] == "1")))
        return
    print(
        f"{'case':28} {'tiles':>6} {'points':>10} {'time s':>7} {'points/s':>12} "
        f"{'STRtree pts/s':>14} {'speed-up':>8} {'peak MB':>8}"
    )
    for case, path in CASES.items():
        if path is not None and not path.exists():
            print(f"{case}: skipped, {path} not found")
            continue
        for repeated in ("0", "1"):
            out = subprocess.run(
                [sys.executable, __file__, "--points", str(args.points), "--child", case, repeated],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out)
            print(
                f"{r['case']:28} {r['k']:>6} {r['points']:>10,} {r['assign_s']:>7.2f} "
                f"{r['points_per_s']:>12,.0f} {r['baseline_points_per_s']:>14,.0f} "
                f"{r['points_per_s'] / r['baseline_points_per_s']:>7.1f}x {r['peak_mb']:>8.0f}"
            )


if __name__ == "__main__":
    main()
