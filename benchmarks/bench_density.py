"""Benchmark of the density release (SPEC 4.3) on a synthetic week of phone records.

Default: 2M users, 1,000 towers, 32 x 32 = 1,024 zones (a Paris-like scale, ~2,000 users per
zone). The work runs in a child process; the parent prints wall time per stage, the child's
peak memory (ru_maxrss) and the utility table (MRE, Pearson, EMD) of EFPAG, EFPA and LPA at the
chosen epsilon, plus the ratio of the mechanism time to the LPA baseline in the same process.

    uv run python benchmarks/bench_density.py                 # full size
    uv run python benchmarks/bench_density.py --users 200000  # reduced
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def child(args: argparse.Namespace) -> dict:
    import numpy as np

    from privmob.data.density_synth import synthetic_city
    from privmob.engine import DuckDBEngine
    from privmob.evaluate.density_metrics import mre, pearson, spatial_emd
    from privmob.prepare.presample import density_counts
    from privmob.releases.density import DensityConfig, density_geometry, perturb_density

    t: dict[str, float] = {}
    t0 = time.perf_counter()
    city = synthetic_city(args.users, args.towers, args.grid, seed=args.seed)
    t["generate events"] = time.perf_counter() - t0
    n_events = len(city.events)

    t0 = time.perf_counter()
    geo = density_geometry(city.towers.lng.to_numpy(), city.towers.lat.to_numpy(), city.zones)
    t["Voronoi shares + minimum cover"] = time.perf_counter() - t0

    eng = DuckDBEngine(threads=args.threads)
    eng.register("ev", city.events[["uid", "time", "tile"]])
    t0 = time.perf_counter()
    counts = density_counts(
        eng, "ev", geo.n_towers, city.week_start, args.max_visits, 7, with_truth=True
    )
    t["engine: pre-sampling + counts"] = time.perf_counter() - t0
    del city
    truth = np.asarray(geo.voronoi.shares.T @ counts.hourly)

    rows = []
    configs = {
        "EFPAG": DensityConfig(args.epsilon, args.max_visits, args.delta),
        "EFPA": DensityConfig(args.epsilon, args.max_visits),
        "EFPAG- (no improvements)": DensityConfig(
            args.epsilon, args.max_visits, args.delta, totals="sampled", smoothing=False
        ),
        "LPA": DensityConfig(args.epsilon, args.max_visits, method="lpa"),
    }
    hours = np.arange(10, 168, 24)
    mech_time = {}
    for name, cfg in configs.items():
        vals = {"mre": [], "pearson": [], "emd_m": []}
        for rep in range(args.repetitions):
            t0 = time.perf_counter()
            res = perturb_density(counts, geo.cmap, geo.centroids, cfg, 100 + rep)
            mech_time.setdefault(name, []).append(time.perf_counter() - t0)
            est = np.maximum(np.rint(res.zones), 0)
            vals["mre"].append(float(mre(truth, est).mean()))
            vals["pearson"].append(float(np.nanmean(pearson(truth, est))))
            if rep == 0:
                e = spatial_emd(truth, est, geo.voronoi.zone_centroids, hours=hours)
                vals["emd_m"].append(float(e.per_hour.mean()))
                stretch = e.stretch
            clusters = next((s.get("clusters") for s in res.steps if "clusters" in s), None)
        rows.append(
            {
                "method": name,
                "mre": float(np.mean(vals["mre"])),
                "mre_std": float(np.std(vals["mre"])),
                "pearson": float(np.mean(vals["pearson"])),
                "emd_m": float(np.mean(vals["emd_m"])),
                "clusters": clusters,
                "seconds": float(np.mean(mech_time[name])),
            }
        )
    return {
        "events": n_events,
        "hourly_visits": counts.total_visits,
        "sampled_visits": float(counts.sampled.sum()),
        "cover_cells": geo.cmap.size,
        "zones": int(truth.shape[0]),
        "towers": geo.n_towers,
        "mean_true_count": float(truth.mean()),
        "emd_stretch_bound": stretch,
        "timings": t,
        "utility": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--users", type=int, default=2_000_000)
    p.add_argument("--towers", type=int, default=1000)
    p.add_argument("--grid", type=int, default=32)
    p.add_argument("--epsilon", type=float, default=0.3)
    p.add_argument("--delta", type=float, default=2e-6)
    p.add_argument("--max-visits", type=int, default=30)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *sys.argv[1:]],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(proc.returncode)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    print(
        f"density benchmark: {args.users:,} users, {out['events']:,} events, "
        f"{out['towers']} towers, {out['zones']} zones, {out['cover_cells']} cover cells"
    )
    print(
        f"hourly visits {out['hourly_visits']:,}, kept after l={args.max_visits}: "
        f"{out['sampled_visits']:,.0f}; mean true count per zone-hour {out['mean_true_count']:.1f}"
    )
    print(f"wall time (whole child process): {wall:.1f} s; peak memory: {peak_gb:.2f} GB")
    for stage, secs in out["timings"].items():
        print(f"  {stage:<34} {secs:7.1f} s")
    lpa = next(r for r in out["utility"] if r["method"] == "LPA")["seconds"]
    print(f"\nutility at epsilon={args.epsilon}, delta={args.delta} (EFPAG), l={args.max_visits}:")
    print(f"{'method':<26}{'MRE':>8}{'±':>7}{'Pearson':>9}{'EMD m':>9}{'clusters':>9}{'s':>7}")
    for r in out["utility"]:
        print(
            f"{r['method']:<26}{r['mre']:8.3f}{r['mre_std']:7.3f}{r['pearson']:9.3f}"
            f"{r['emd_m']:9.0f}{r['clusters']!s:>9}{r['seconds']:7.2f}"
            f"  ({r['seconds'] / max(lpa, 1e-9):.1f}x LPA)"
        )
    print(f"(EMD on 7 hours; k-NN graph transport, stretch bound {out['emd_stretch_bound']:.2f})")


if __name__ == "__main__":
    main()
