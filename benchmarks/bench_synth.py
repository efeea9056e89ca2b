"""Benchmark: synthetic trip generation (``privmob.data.synth``) streamed to Parquet.

Usage: uv run python benchmarks/bench_synth.py [--trips 1000000 10000000] [--kind trips]

Each size runs in a fresh subprocess (so peak memory, VmHWM, is its own) and prints wall
time, CPU time, rows/s and peak memory. Baseline, in the same subprocess: writing the same
number of rows of the same schema filled with plain uniform random numbers (the Parquet
write floor), so the ratio shows what the model itself costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import peak_rss_mb, run_child


def child(kind: str, trips: int, outdir: Path) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privmob.data.synth import SynthConfig, write_synthetic

    mean = 20.0
    cfg = SynthConfig(n_users=max(1, int(trips / mean)), mean_trips_per_user=mean, seed=1)
    out = outdir / f"{kind}.parquet"
    c0, t0 = time.process_time(), time.perf_counter()
    s = write_synthetic(kind, out, cfg)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gen_peak = peak_rss_mb()
    # baseline: same rows and schema, uniform random values, same chunking and compression
    schema = pq.read_schema(out)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    with pq.ParquetWriter(outdir / "base.parquet", schema, compression="zstd") as w:
        step = 1_000_000
        for lo in range(0, s.rows, step):
            n = min(step, s.rows - lo)
            cols = []
            for f in schema:
                if pa.types.is_floating(f.type):
                    cols.append(pa.array(rng.random(n)))
                else:
                    cols.append(pa.array(rng.integers(0, 1 << 30, n)).cast(f.type))
            w.write_table(pa.Table.from_arrays(cols, schema=schema))
    base = time.perf_counter() - t0
    return {
        "kind": kind,
        "rows": s.rows,
        "users": s.users,
        "wall_s": wall,
        "cpu_s": cpu,
        "rows_per_s": s.rows / wall,
        "mb": s.bytes / 1e6,
        "peak_mb": gen_peak,
        "baseline_s": base,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trips", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--kind", default="trips", choices=["trips", "trip-points", "events"])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--outdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.kind, args.child, Path(args.outdir))))
        return
    print(
        f"{'kind':12} {'users':>10} {'rows':>12} {'wall s':>7} {'cpu s':>7} {'rows/s':>11} "
        f"{'file MB':>8} {'peak MB':>8} {'write-only s':>12} {'ratio':>6}"
    )
    for n in args.trips:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_child(Path(__file__), str(n), "--outdir", tmp, "--kind", args.kind)
        print(
            f"{r['kind']:12} {r['users']:>10,} {r['rows']:>12,} {r['wall_s']:>7.1f} "
            f"{r['cpu_s']:>7.1f} {r['rows_per_s']:>11,.0f} {r['mb']:>8.0f} {r['peak_mb']:>8.0f} "
            f"{r['baseline_s']:>12.1f} {r['wall_s'] / r['baseline_s']:>5.1f}x"
        )


if __name__ == "__main__":
    main()
