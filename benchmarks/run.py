"""Benchmark suite: every release on synthetic data, DuckDB and Spark, against the floor.

Releases: od-daily-events, od-trips, population, series-counts, density, report, and
report-complete (the report against the floor of its whole relational work); see
benchmarks/suite.py for what each runs and what its floor computes. For each release and
size, three child processes on the same Parquet file (cached in benchmarks/out/):

* ``floor``: a bare DuckDB query doing the same bounded group-by by hand (same bounding rule,
  same group-by, same tile assignment), without validation, dense domain, noise, ledger or
  output -- the least work any bounded count needs;
* ``privmob`` on DuckDB: the full release through its Python API (validation, tiles,
  bounding, dense counts over the public domain, secure noise on every cell, ledger charge,
  output files);
* ``privmob`` on Spark local mode (sizes in ``--spark-sizes``), with the same floor as a bare
  Spark SQL job in the same session (floor, release, floor, release; each side's faster run
  kept): the Spark ratio is privmob on Spark / the Spark floor; the ratio of privmob's first
  run (its query shapes not yet compiled by the JVM) is printed beside it.

It prints and writes a Markdown table (``--out``, default docs/benchmarks.md) with wall time,
peak memory (VmHWM of the child and, for Spark, its JVM) and the ratio to the floor.

    uv run python benchmarks/run.py                                  # 1M and 10M, Spark 1M
    uv run python benchmarks/run.py --sizes 1e6 1e7 1e8 1e9 --spark-sizes 1e6 1e7 \
        --memory-limit 12GB
    uv run python benchmarks/run.py --tessellation taxi-zones --input csv \
        --releases od-trips population report --sizes 1e6 1e7 --spark-sizes 1e6 1e7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
from _measure import answer_child  # noqa: E402
from suite import DAYS, RELEASES, SPARK, T, data_for, run_floor, timed_privmob  # noqa: E402

# -- children -----------------------------------------------------------------------------------


def peak_gb(include_children: bool = False) -> float:
    """VmHWM of this process (and of its live descendants, e.g. Spark's JVM)."""
    pids = [os.getpid()]
    if include_children:
        todo = [os.getpid()]
        while todo:
            p = todo.pop()
            kids = Path(f"/proc/{p}/task/{p}/children")
            if kids.exists():
                found = [int(x) for x in kids.read_text().split()]
                pids += found
                todo += found
    kb = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    kb += int(line.split()[1])
        except OSError:
            pass
    return kb / 1024**2


def child_floor(release: str, path: str, cells: str, tess_path: str) -> dict[str, float]:
    return {**run_floor(release, path, cells, tess_path), "peak_gb": peak_gb()}


def child_privmob(
    release: str, path: str, cells: str, tess_path: str, engine_name: str, memory_limit: str
) -> dict[str, float]:
    res = timed_privmob(release, path, cells, tess_path, engine_name, memory_limit)
    return {**res, "peak_gb": peak_gb(True)}


def run_child(*args: str) -> dict[str, float]:
    # cached bytecode, as any installed package has (this sandbox sets PYTHONDONTWRITEBYTECODE,
    # which recompiles pandas, geopandas, ... on every start of floor and privmob alike)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", *args],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        return {"error": " / ".join(tail)[:200]}  # type: ignore[dict-item]
    return json.loads(res.stdout.strip().splitlines()[-1])


# -- driver -------------------------------------------------------------------------------------


def best_of(n: int, *runs: tuple[str, ...]) -> list[dict[str, float]]:
    """Run each child (``run_child`` arguments) ``n`` times, alternating, and keep each one's
    fastest run (on a shared machine the minimum is the least disturbed measurement)."""
    results: list[list[dict[str, float]]] = [[] for _ in runs]
    for _ in range(max(1, n)):
        for out, run in zip(results, runs, strict=True):
            out.append(run_child(*run))
    return [min(rs, key=lambda r: r.get("seconds", float("inf"))) for rs in results]


def fmt(r: dict[str, float] | None, base: dict[str, float] | None) -> str:
    if r is None:
        return "| – | – | – "
    if "error" in r:
        return f"| failed: {r['error']} | – | – "
    ratio = f"{r['seconds'] / base['seconds']:.2f}" if base and "seconds" in base else "–"
    return f"| {r['seconds']:.1f} s | {r['peak_gb']:.2f} GB | {ratio} "


def fmt_spark(r: dict[str, float] | None) -> str:
    """Spark floor (same session), privmob on Spark (the faster of its two runs), its peak, the
    ratio of the two, and the ratio of privmob's first run (JVM compiling its query shapes)."""
    if r is None:
        return "| – " + fmt(None, None) + "| – "
    if "floor_seconds" not in r:
        return "| – " + fmt(r, None) + "| – "
    first = f"| {r['first_seconds'] / r['floor_seconds']:.2f} " if "first_seconds" in r else "| – "
    return f"| {r['floor_seconds']:.1f} s " + fmt(r, {"seconds": r["floor_seconds"]}) + first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    ap.add_argument("--spark-sizes", type=float, nargs="*", default=[1e6])
    ap.add_argument("--releases", nargs="+", default=list(RELEASES), choices=RELEASES)
    ap.add_argument("--memory-limit", default="", help="DuckDB memory limit (buckets), e.g. 12GB")
    ap.add_argument(
        "--tessellation",
        choices=("grid", "taxi-zones"),
        default="grid",
        help="263 square cells, or the 263 NYC taxi-zone polygons (point in polygon)",
    )
    ap.add_argument("--input", choices=("parquet", "csv"), default="parquet")
    ap.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks.md")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs of floor and privmob, alternating; fastest kept"
    )
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if answer_child(args.child, {"floor": child_floor, "privmob": child_privmob}):
        return
    lines = [
        "| release | records | floor (bare DuckDB) | privmob DuckDB | peak | ratio "
        "| Spark floor (same session) | privmob Spark local | peak | ratio | ratio, first run |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for release in args.releases:
        for n in sorted({int(x) for x in args.sizes + args.spark_sizes}):
            print(f"{release} {n:,} records", flush=True)
            path, cells, tess = data_for(release, n, OUT, args.tessellation, args.input)
            common = (release, str(path), str(cells or ""), str(tess))
            floor, duck = best_of(
                args.repeat,
                ("floor", *common),
                ("privmob", *common, "duckdb", args.memory_limit),
            )
            spark = None
            if n in {int(x) for x in args.spark_sizes} and release in SPARK:
                spark = run_child("privmob", *common, "spark", "")
            floor_txt = (
                f"{floor['seconds']:.1f} s"
                if "seconds" in floor
                else f"failed: {floor.get('error', '?')[-90:]}"
            )
            line = f"| {release} | {n:,} | {floor_txt} {fmt(duck, floor)}{fmt_spark(spark)}|"
            print("  " + line, flush=True)
            lines.append(line)
    load = os.getloadavg()
    header = (
        f"\n## Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
        f"{os.cpu_count()} cores, {platform.machine()}, load average {load[0]:.1f} at the end; "
        f"T = {T} trips per user, 263 tiles ({args.tessellation}), {args.input} input, "
        f"{DAYS} days, epsilon 1, DuckDB memory limit "
        f"{args.memory_limit or 'default'}; fastest of {args.repeat} run(s) each.\n\n"
    )
    table = header + "\n".join(lines) + "\n"
    print(table)
    if not args.out.exists():
        args.out.write_text(
            "# Benchmarks\n\nWritten by `uv run python benchmarks/run.py` (see its docstring). "
            "Ratio = privmob time / floor time on the same file.\n"
        )
    with args.out.open("a") as fh:
        fh.write(table)


if __name__ == "__main__":
    main()
