"""privmob on a real Spark standalone cluster against a bare Spark SQL job on the same cluster.

Starts a standalone master and workers on this machine (privmob.engine.spark_cluster, the
code the cluster tests use: pyspark's own spark-class, loopback only, private directories),
then for each release and size, in ONE driver session on that cluster: the floor of
benchmarks/suite.py (the same bounded group-by as a bare Spark SQL job), privmob's release
through its Python API (suite.run_privmob: validation, tiles, bounding, dense counts over the
public domain, secure noise, ledger, output files), the floor again, the release again; each
side's faster run is kept (the first run of each pays the JVM compiling its query shapes).

Prints the ratio privmob / floor and where privmob's time goes: the wall time of each engine
call (grouped by the privmob function that made it: the validation and fingerprint pass, the
cached tables, the dense counts, ...) and the rest, which is driver-side Python (tessellation,
public domain, noise, ledger, output files).

    uv run --all-extras --group dev python benchmarks/bench_spark_cluster.py            # 1M
    uv run --all-extras --group dev python benchmarks/bench_spark_cluster.py \
        --sizes 1e6 1e7 --worker-memory 4g
    # the report against the floor of its complete relational work (any suite release works)
    uv run --all-extras --group dev python benchmarks/bench_spark_cluster.py \
        --releases report-complete

Inputs are the suite's Parquet files in benchmarks/out/ (generated when missing); the
executors read them from the same local paths, as they are on this machine.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from suite import RELEASES as ALL_RELEASES  # noqa: E402
from suite import data_for, run_privmob, timed_floor  # noqa: E402

OUT = HERE / "out"
RELEASES = ("od-trips", "population", "report")
ENGINE_CALLS = (
    "fetch",
    "materialize",
    "append",
    "cache_once",
    "create_view",
    "register",
    "read_parquet",
    "read_csv",
)


class CallTimes:
    """Wall time of the engine's calls, by (method, calling privmob function)."""

    def __init__(self, eng: Any) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.depth = 0
        for name in ENGINE_CALLS:
            setattr(eng, name, self._wrap(name, getattr(eng, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:  # a call made by another engine call is counted in that one
                return method(*args, **kwargs)
            caller = sys._getframe(1)
            module = caller.f_globals.get("__name__", "?").removeprefix("privmob.")
            label = f"{name} ({module}.{caller.f_code.co_name})"
            self.depth += 1
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.depth -= 1
                self.seconds[label] += time.perf_counter() - t0

        return timed

    def take(self) -> dict[str, float]:
        out, self.seconds = dict(self.seconds), defaultdict(float)
        return out


def measure(release: str, n: int, eng: Any, calls: CallTimes, repeat: int) -> dict[str, Any]:
    path, cells, tess = data_for(release, n, OUT)
    args = (release, str(path), str(cells or ""), str(tess))
    floors, runs = [], []
    for _ in range(repeat):
        floors.append(timed_floor(*args, eng))
        calls.take()
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            run_privmob(*args, eng, Path(tmp))
            seconds = time.perf_counter() - t0
        runs.append((seconds, calls.take()))
    best, parts = min(runs, key=lambda r: r[0])
    return {"floor": min(floors), "privmob": best, "first": runs[0][0], "parts": parts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6])
    ap.add_argument("--releases", nargs="+", default=list(RELEASES), choices=ALL_RELEASES)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--worker-memory", default="2g", help="memory per worker (= per executor)")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--repeat", type=int, default=2, help="floor/privmob pairs; fastest kept")
    args = ap.parse_args()

    from privmob.engine import make_engine
    from privmob.engine.spark_cluster import StandaloneCluster

    with tempfile.TemporaryDirectory(prefix="privmob-bench-cluster-") as tmp:
        cluster = StandaloneCluster(
            Path(tmp) / "cluster", workers=args.workers, cores=args.cores, memory=args.worker_memory
        )
        t0 = time.perf_counter()
        with cluster:
            print(
                f"cluster {cluster.url}: {args.workers} workers x {args.cores} core(s), "
                f"{args.worker_memory} each, up in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            conf = cluster.client_conf() | {"spark.local.dir": str(Path(tmp) / "driver")}
            eng = make_engine(
                "spark", master=cluster.url, conf=conf, memory_limit=args.driver_memory
            )
            calls = CallTimes(eng)
            rows = []
            try:
                for release in args.releases:
                    for n in sorted({int(x) for x in args.sizes}):
                        print(f"{release} {n:,} records", flush=True)
                        r = measure(release, n, eng, calls, args.repeat)
                        rows.append((release, n, r))
                        report(release, n, r)
            finally:
                eng.close()
    load = os.getloadavg()
    print(
        "\n| release | records | Spark floor (same cluster, same session) | privmob "
        "| ratio | ratio, first run |\n|---|---:|---:|---:|---:|---:|"
    )
    for release, n, r in rows:
        print(
            f"| {release} | {n:,} | {r['floor']:.1f} s | {r['privmob']:.1f} s "
            f"| {r['privmob'] / r['floor']:.2f} | {r['first'] / r['floor']:.2f} |"
        )
    print(f"\nload average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")


def report(release: str, n: int, r: dict[str, Any]) -> None:
    total = r["privmob"]
    print(
        f"  floor {r['floor']:.1f} s, privmob {total:.1f} s (first run {r['first']:.1f} s), "
        f"ratio {total / r['floor']:.2f}"
    )
    engine_s = sum(r["parts"].values())
    for label, s in sorted(r["parts"].items(), key=lambda kv: -kv[1]):
        if s >= 0.05:
            print(f"    {s:6.1f} s  {100 * s / total:4.0f}%  {label}")
    rest = total - engine_s
    print(f"    {rest:6.1f} s  {100 * rest / total:4.0f}%  driver-side Python (no engine call)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
