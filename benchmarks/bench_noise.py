"""Secure noise throughput: OpenDP (threaded chunks) vs privmob's vectorised exact sampler.

Each (backend, kind, size) runs in a fresh subprocess so that peak memory (VmHWM) is its own.
Prints values/s, wall time and peak RSS; the ratio column is fast / OpenDP at the same size.

    uv run python benchmarks/bench_noise.py                 # sizes 1e5, 1e6, 1e7
    uv run python benchmarks/bench_noise.py --sizes 100000 --opendp-max 1000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
from privmob.privacy import samplers
backend, kind, n, scale = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
fn = samplers.secure_discrete_laplace if kind == "laplace" else samplers.secure_discrete_gaussian
fn(np.zeros(1000, np.int64), scale, backend=backend)  # warm-up (imports, platform check)
values = np.zeros(n, np.int64)
t0 = time.perf_counter()
out = fn(values, scale, backend=backend)
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "peak_mb": int(hwm) / 1024, "std": float(out.std())}))
"""


def run(backend: str, kind: str, n: int, scale: float) -> dict[str, float]:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, backend, kind, str(n), str(scale)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6, 10**7])
    ap.add_argument("--opendp-max", type=int, default=10**6, help="skip OpenDP above this size")
    ap.add_argument("--scale", type=float, default=10.0, help="b (Laplace) and sigma (Gaussian)")
    args = ap.parse_args()
    print(f"scale = {args.scale}; values/s in millions; peak = VmHWM of the worker process")
    head = ("kind", "n", "backend", "M/s", "sec", "peak MB", "x OpenDP")
    print("{:9} {:>10} {:7} {:>7} {:>7} {:>8} {:>8}".format(*head))
    for kind in ("laplace", "gaussian"):
        for n in args.sizes:
            base = None
            for backend in ("opendp", "numpy"):
                if backend == "opendp" and n > args.opendp_max:
                    continue
                r = run(backend, kind, n, args.scale)
                rate = n / r["seconds"] / 1e6
                if backend == "opendp":
                    base = rate
                ratio = f"{rate / base:8.1f}" if base and backend == "numpy" else f"{'':8}"
                print(
                    f"{kind:9} {n:>10} {backend:7} {rate:7.2f} {r['seconds']:7.2f}"
                    f" {r['peak_mb']:8.0f} {ratio}"
                )


if __name__ == "__main__":
    main()
