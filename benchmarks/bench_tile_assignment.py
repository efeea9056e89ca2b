"""Benchmark: point-to-tile assignment (``Tessellation.assign``) on real polygons.

Usage: uv run python benchmarks/bench_tile_assignment.py [--points 1000000]

Cases (each in a fresh child process, so its peak memory is its own): the 263 NYC taxi zones,
the 41 San Francisco neighbourhoods and the 10,000-cell Milan grid read as polygons (loaded
with ``load_tessellation``: it has no grid fast path, the cells are swept as any polygon).
For each case the child times, on the same points:

* privmob: ``Tessellation.assign`` (a longitude sweep against the prepared tile polygons, in
  chunks swept on every core from 1M points on: 2 here);
* baseline, in the same process: plain shapely 2, ``STRtree(tiles).query(points,
  predicate="intersects")`` with the smallest tile index per point (the same border rule),
  on all the points in one call (one core: shapely does not split a query); its result must
  equal privmob's (checked).

Points: uniform in the tessellation's bounding box, and the same number drawn from 10,000
distinct places (stops, towers: privmob then queries each place once). Printed per row:
load time of the tessellation, privmob's and the baseline's time and points/s, the ratio
(baseline time / privmob time: > 1 means privmob is faster), peak memory (VmHWM) after
privmob's assignment and after the baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import peak_rss_mb, run_child

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
CASES = {
    "nyc-taxi-zones": SHARED / "nyc_taxi_zones" / "taxi_zones.geojson",
    "sf-neighborhoods": SHARED / "sf_neighborhoods" / "sf_neighborhoods.geojson",
    "milan-grid-polygons": SHARED / "milan_grid" / "milano-grid.geojson",
}


def baseline_assign(geoms: object, lng: object, lat: object) -> object:
    """Plain shapely 2: one STRtree query with the intersects predicate, smallest tile wins."""
    import numpy as np
    import shapely

    tree = shapely.STRtree(geoms)
    inp, tile = tree.query(shapely.points(lng, lat), predicate="intersects")
    none = np.iinfo(np.int64).max
    best = np.full(len(lng), none, dtype=np.int64)  # type: ignore[arg-type]
    np.minimum.at(best, inp, tile)
    best[best == none] = -1
    return best.astype(np.int32)


def child(case: str, n: int, repeated: bool) -> dict:
    import numpy as np

    from privmob.data.tessellation_input import load_tessellation

    t0 = time.perf_counter()
    tess = load_tessellation(CASES[case])
    load_s = time.perf_counter() - t0
    assert tess.grid is None, "the benchmark must use the polygon path"
    rng = np.random.default_rng(0)
    x0, y0, x1, y1 = tess.bounds
    if repeated:
        places = rng.uniform((x0, y0), (x1, y1), size=(10_000, 2))
        pick = rng.integers(0, len(places), n)
        lng, lat = places[pick, 0].copy(), places[pick, 1].copy()
    else:
        lng, lat = rng.uniform(x0, x1, n), rng.uniform(y0, y1, n)
    t0 = time.perf_counter()
    tiles = tess.assign(lng, lat)
    secs = time.perf_counter() - t0
    peak_privmob = peak_rss_mb()
    geoms = tess.gdf.geometry.values
    t0 = time.perf_counter()
    base = baseline_assign(geoms, lng, lat)
    base_s = time.perf_counter() - t0
    return {
        "case": case + (" (10k places)" if repeated else ""),
        "k": tess.k,
        "points": n,
        "load_s": load_s,
        "assign_s": secs,
        "baseline_s": base_s,
        "equal": bool((base == tiles).all()),
        "inside": float((tiles >= 0).mean()),
        "peak_privmob_mb": peak_privmob,
        "peak_after_baseline_mb": peak_rss_mb(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.points, args.child[1] == "1")))
        return
    print(
        f"{'case':34} {'tiles':>6} {'points':>10} {'load s':>6} {'privmob s':>9} "
        f"{'pts/s':>11} {'STRtree s':>9} {'pts/s':>11} {'ratio':>6} {'same':>5} "
        f"{'peak MB':>7} {'+base MB':>8}"
    )
    for case, path in CASES.items():
        if not path.exists():
            print(f"{case}: skipped, {path} not found")
            continue
        for repeated in ("0", "1"):
            r = run_child(Path(__file__), case, repeated, "--points", str(args.points))
            print(
                f"{r['case']:34} {r['k']:>6} {r['points']:>10,} {r['load_s']:>6.2f} "
                f"{r['assign_s']:>9.3f} {r['points'] / r['assign_s']:>11,.0f} "
                f"{r['baseline_s']:>9.3f} {r['points'] / r['baseline_s']:>11,.0f} "
                f"{r['baseline_s'] / r['assign_s']:>5.1f}x {r['equal']!s:>5} "
                f"{r['peak_privmob_mb']:>7.0f} {r['peak_after_baseline_mb']:>8.0f}"
            )


if __name__ == "__main__":
    main()
