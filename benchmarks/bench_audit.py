"""LRT membership attack throughput: 10,000 trials x 71 values of k (k = 0..70).

Each release style runs in a fresh subprocess (peak memory = its own VmHWM). The baseline,
run in the same child, is bare numpy: draw the same number of Laplace values and sum them per
trial (no likelihoods, no thresholds, no tie handling); the ratio column is audit / baseline.

    uv run python benchmarks/bench_audit.py                  # 10,000 trials, k = 0..70
    uv run python benchmarks/bench_audit.py --trials 2000    # quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
from privmob.audit.lrt import ReleaseConfig, simulate
style, noise, trials, kmax = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = ReleaseConfig(0.66, 100, noise, style, bound=70)
simulate(cfg, [1], 10, rng=0)  # warm-up (imports)
t0 = time.perf_counter()
res = simulate(cfg, range(kmax + 1), trials, rng=1)
dt = time.perf_counter() - t0
gen = np.random.default_rng(2)
t1 = time.perf_counter()
for k in range(kmax + 1):
    gen.laplace(0, 1 / 0.66, (trials, k)).sum(axis=1)
base = time.perf_counter() - t1
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "baseline": base, "peak_mb": int(hwm) / 1024,
                  "acc70": float(res.accuracy[-1]), "cells": int(trials * sum(
                      cfg.cells(k) for k in range(kmax + 1)))}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--k-max", type=int, default=70)
    args = ap.parse_args()
    print(f"{args.trials} trials x {args.k_max + 1} values of k; peak = VmHWM of the worker")
    head = ("style", "noise", "cells", "sec", "baseline s", "x base", "peak MB", "acc(k=max)")
    print("{:5} {:17} {:>11} {:>7} {:>10} {:>7} {:>8} {:>10}".format(*head))
    for style, noise in (
        ("trip", "laplace"),
        ("trip", "discrete-laplace"),
        ("user", "discrete-laplace"),
    ):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, style, noise, str(args.trials), str(args.k_max)],
            check=True,
            capture_output=True,
            text=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{style:5} {noise:17} {r['cells']:>11,} {r['seconds']:7.2f} {r['baseline']:10.2f}"
            f" {r['seconds'] / r['baseline']:7.1f} {r['peak_mb']:8.0f} {r['acc70']:10.3f}"
        )


if __name__ == "__main__":
    main()
