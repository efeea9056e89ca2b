"""Where the density scheme's error comes from (issue 40 item 6): the scheme beside its
noise-free floor on privmob's synthetic phone-record city. NOT a private output.

For EFPAG and EFPA at seed 004's settings (epsilon 0.3, l = 30, delta 2e-6), the MRE and
Pearson correlation of each zone's 168 hours, averaged over zones (as the paper), of:

* the scheme itself (``perturb_density``, the mechanism of ``Session.density``);
* the same clusters with NO noise at all: each cell gets its true weekly total times the exact
  (unbounded) weekly shape of its cluster. Nothing the mechanism does after clustering can do
  better than this on average, so it is the floor that the clustering and the data set;
* the same with the noisy totals of the run (the totals' share of the error).

Also the events per user (distinct tower-hours), the mean true count per zone-hour and the
number of clusters, to compare with the Paris data of seed 004 (1,992,846 users, 1,303 towers,
989 IRIS zones; events per user mean 13.55, standard deviation 18.33, maximum 732; mean count
91 per zone-hour).

    uv run --all-extras python benchmarks/bench_density_floor.py                   # 200k users
    uv run --all-extras python benchmarks/bench_density_floor.py --users 2000000 \\
        --grid 31 --towers 1303 --commute-spread 1                                  # Paris scale
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=200_000)
    ap.add_argument("--grid", type=int, default=10, help="grid x grid zones")
    ap.add_argument("--towers", type=int, default=300)
    ap.add_argument("--commute-spread", type=float, default=0.0, help="hours (density_synth)")
    ap.add_argument("--repetitions", "-r", type=int, default=2)
    ap.add_argument("--epsilon", type=float, default=0.3)
    args = ap.parse_args()

    import numpy as np

    from privmob.data.density_synth import synthetic_city
    from privmob.engine import DuckDBEngine
    from privmob.evaluate.density_metrics import mre, pearson
    from privmob.prepare.presample import density_counts
    from privmob.releases.density import DensityConfig, density_geometry, perturb_density
    from privmob.releases.density.mechanism import with_outliers

    t0 = time.perf_counter()
    city = synthetic_city(
        args.users, args.towers, args.grid, seed=1, commute_spread_h=args.commute_spread
    )
    ev = city.events
    hours = (ev.time - np.datetime64(city.week_start)).dt.total_seconds() // 3600
    per_user = ev.assign(h=hours).drop_duplicates(["uid", "h", "tile"]).groupby("uid").size()
    geo = density_geometry(city.towers.lng.to_numpy(), city.towers.lat.to_numpy(), city.zones)
    eng = DuckDBEngine()
    eng.register("floor_events", ev[["uid", "time", "tile"]])
    week_start: datetime = city.week_start
    del city, ev
    counts = density_counts(eng, "floor_events", geo.n_towers, week_start, 30, 1, with_truth=True)
    assert counts.hourly is not None
    cmap = geo.cmap
    n_c = cmap.size
    ext = with_outliers(cmap)
    truth = np.asarray(geo.voronoi.shares.T @ counts.hourly)
    cover_true = np.asarray(ext @ counts.hourly)[:n_c]
    cover_totals = cover_true.sum(axis=1)
    print(
        f"{args.users:,} users, {args.towers} towers, {truth.shape[0]} zones, "
        f"{n_c} cover cells, commute spread {args.commute_spread:g} h: events per user "
        f"(distinct tower-hours) mean {per_user.mean():.2f}, sd {per_user.std():.2f}, max "
        f"{per_user.max()}; share of hourly visits beyond l = 30: "
        f"{np.maximum(per_user - 30, 0).sum() / per_user.sum():.3f}; mean true count per "
        f"zone-hour {truth.mean():.1f} ({time.perf_counter() - t0:.0f}s)",
        flush=True,
    )

    def score(est: np.ndarray) -> str:
        est = np.maximum(np.rint(est), 0)
        return f"{mre(truth, est).mean():.3f} / {np.nanmean(pearson(truth, est)):.3f}"

    def floor(labels: np.ndarray, totals: np.ndarray) -> str:
        stack = np.zeros((int(labels.max()) + 1, cover_true.shape[1]))
        np.add.at(stack, labels, cover_true)
        shape = stack / np.maximum(stack.sum(axis=1, keepdims=True), 1e-12)
        return score(np.asarray(cmap.to_zones @ (totals[:, None] * shape[labels])))

    print("| method | run | clusters | k | scheme MRE / PC | floor: true totals | noisy totals |")
    print("|---|---:|---:|---:|---|---|---|")
    for name, cfg in (
        ("EFPAG", DensityConfig(args.epsilon, 30, 2e-6)),
        ("EFPA", DensityConfig(args.epsilon, 30)),
    ):
        for rep in range(args.repetitions):
            res = perturb_density(counts, cmap, geo.centroids, cfg, 300 + 1000 * rep)
            assert res.clusters is not None and res.noisy_totals is not None
            step = next(s for s in res.steps if "clusters" in s)
            print(
                f"| {name} | {rep + 1} | {step['clusters']} | {step.get('k')} | "
                f"{score(res.zones)} | {floor(res.clusters, cover_totals)} | "
                f"{floor(res.clusters, res.noisy_totals[:n_c])} |",
                flush=True,
            )
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
