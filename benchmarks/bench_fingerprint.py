"""Benchmark: the content fingerprint's v3 (a 1-in-17 sample of row hashes, exact sums of the
canonical integers; privmob.data.fingerprint) against v2 (every row's MD5), paired.

For each release, size and format (benchmarks/suite.py's data, NYC taxi zones by default), the
whole release runs in this one process under ``--memory-limit``, alternately with the v2 and
the v3 definition in the order v2, v3, v3, v2 (``--rounds`` such blocks), so that a machine
loaded by others and its drift weigh on both alike. Each run times the whole release (from
reading the tessellation to the written files) and the validation pass (the one aggregate
statement that also computes the fingerprint; for CSV the parse-once write before it is not in
it). Prints every run and, per pair, the ratio v3 / v2 (median over the runs).

    uv run python benchmarks/bench_fingerprint.py --releases population od-trips \\
        --sizes 1e7 --input parquet csv
    uv run python benchmarks/bench_fingerprint.py --releases report --sizes 1e6 --input csv

``--statement-only`` runs, for each input, its validation statement again (v2 and v3
alternated, best of ``--rounds``) on the same parsed relation, without the rest of a release;
with ``--engine spark`` on Spark in local mode (local[2], as benchmarks/suite.py starts it),
with ``--engine spark-cluster`` on the standalone cluster of bench_spark_cluster.py. It also
times the statement without the fingerprint (the checks and the row count alone):

    uv run --all-extras python benchmarks/bench_fingerprint.py --statement-only --engine spark \\
        --releases population od-trips --sizes 1e6 --input parquet --tessellation grid --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_breakdown import Recorder, TimedConnection, _release, without_fingerprint  # noqa: E402
from suite import data_for, make_engine_for  # noqa: E402

VALIDATION = "validation checks and content fingerprint (one aggregate)"


@contextmanager
def definition(version: str) -> Iterator[None]:
    """The validation pass computes the fingerprint of ``version`` (v2: the previous
    definition, every row's MD5 summed; v3: the current one)."""
    from privmob.data import fingerprint, validation

    saved = validation.content_fingerprint, validation.fingerprint_text
    if version == "v2":
        validation.content_fingerprint = fingerprint.legacy_content_fingerprint
        validation.fingerprint_text = fingerprint.legacy_fingerprint_text
    try:
        yield
    finally:
        validation.content_fingerprint, validation.fingerprint_text = saved


def one_run(release: str, path: Path, cells: Path | None, tess: Path, limit: str, version: str):
    """(whole release seconds, validation statement seconds, the validation SQL)."""
    from privmob.engine import make_engine

    with definition(version):
        rec = Recorder()
        t0 = time.perf_counter()
        eng = make_engine("duckdb", memory_limit=limit)
        timed = eng.con = TimedConnection(eng.con)
        _release(release, str(path), str(cells or ""), str(tess), eng, rec)
        total = time.perf_counter() - t0
        validation = sum(s for label, s in timed.times if label == VALIDATION)
        eng.close()
    return total, validation, timed.validation


class ValidationFetch:
    """The engine's ``fetch``, keeping the last validation statement (Spark: the statement
    DuckDB's :class:`TimedConnection` keeps)."""

    def __init__(self, eng: Any) -> None:
        self.fetch = eng.fetch
        self.validation: str | None = None
        eng.fetch = self

    def __call__(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if "AS pm_fingerprint" in sql:
            self.validation = sql
        return self.fetch(sql, *args, **kwargs)


def statement_pair(
    path: Path, release: str, cells: Path | None, tess: Path, rounds: int, engine: str = "duckdb"
) -> None:
    """The validation statement of each definition, and without the fingerprint, run again on
    one parsed relation (``engine``: duckdb; spark, local mode as benchmarks/suite.py starts
    it, local[2]; spark-cluster, the standalone cluster of bench_spark_cluster.py, two
    one-core workers of 3 GB)."""
    with ExitStack() as stack:
        _statement_pair(stack, path, release, cells, tess, rounds, engine)


def _statement_pair(
    stack: ExitStack, path: Path, release: str, cells: Path | None, tess: Path, rounds: int,
    engine: str,
) -> None:  # fmt: skip
    from privmob.engine import make_engine

    sqls: dict[str, str] = {}
    if engine == "spark-cluster":
        from privmob.engine.spark_cluster import StandaloneCluster

        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privmob-bench-fp-")))
        cluster = stack.enter_context(
            StandaloneCluster(tmp / "cluster", workers=2, cores=1, memory="3g")
        )
        conf = cluster.client_conf() | {"spark.local.dir": str(tmp / "driver")}
        eng = make_engine("spark", master=cluster.url, conf=conf, memory_limit="3g")
    elif engine == "spark":
        eng = make_engine_for("spark", "4GB")
    else:
        eng = make_engine("duckdb", memory_limit="4GB")
    if engine != "duckdb":
        spy = ValidationFetch(eng)
        run: Callable[[str], Any] = spy.fetch
    else:
        spy = eng.con = TimedConnection(eng.con)
        run = lambda sql: spy.con.execute(sql).fetchall()  # noqa: E731
    for version in ("v2", "v3"):
        with definition(version):
            _release(release, str(path), str(cells or ""), str(tess), eng, Recorder())
        assert spy.validation is not None
        sqls[version] = spy.validation
    sqls["none"] = without_fingerprint(sqls["v3"])  # the checks and the row count alone
    best = {"v2": float("inf"), "v3": float("inf"), "none": float("inf")}
    for _ in range(rounds):
        for version in ("v2", "v3", "none", "v3", "v2"):
            t0 = time.perf_counter()
            run(sqls[version])
            best[version] = min(best[version], time.perf_counter() - t0)
    eng.close()
    print(f"  validation statement alone (best of {2 * rounds}): v2 {best['v2']:.2f} s, "
          f"v3 {best['v3']:.2f} s, v3/v2 {best['v3'] / best['v2']:.2f}; without the "
          f"fingerprint (best of {rounds}) {best['none']:.2f} s ({engine})",
          flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=["population", "od-trips"])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6])
    ap.add_argument("--input", nargs="+", default=["parquet", "csv"])
    ap.add_argument("--tessellation", default="taxi-zones", choices=("grid", "taxi-zones"))
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--rounds", type=int, default=1, help="blocks of v2, v3, v3, v2")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--statement-only", action="store_true")
    ap.add_argument(
        "--engine",
        default="duckdb",
        choices=("duckdb", "spark", "spark-cluster"),
        help="with --statement-only: the engine (spark: local[2]; spark-cluster: a standalone "
        "cluster of two one-core workers, as bench_spark_cluster.py starts it)",
    )
    a = ap.parse_args()
    if a.engine != "duckdb" and not a.statement_only:
        ap.error("--engine spark times the validation statement only: add --statement-only")
    for release in a.releases:
        for n in (int(x) for x in a.sizes):
            for fmt in a.input:
                path, cells, tess = data_for(release, n, a.out, a.tessellation, fmt)
                print(f"\n{release}, {n:,} records, {fmt}, {a.tessellation}, load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
                if a.statement_only:
                    statement_pair(path, release, cells, tess, a.rounds, a.engine)
                    continue
                runs: dict[str, list[tuple[float, float]]] = {"v2": [], "v3": []}
                for _ in range(a.rounds):
                    for version in ("v2", "v3", "v3", "v2"):
                        total, validation, _ = one_run(
                            release, path, cells, tess, a.memory_limit, version
                        )
                        runs[version].append((total, validation))
                        print(f"  {version}: release {total:7.2f} s, validation pass "
                              f"{validation:6.2f} s", flush=True)  # fmt: skip
                med: dict[str, Any] = {
                    v: [statistics.median(x[i] for x in r) for i in (0, 1)] for v, r in runs.items()
                }
                print(f"  median v2: release {med['v2'][0]:.2f} s, validation {med['v2'][1]:.2f} s;"
                      f" v3: release {med['v3'][0]:.2f} s, validation {med['v3'][1]:.2f} s;"
                      f" v3/v2: release {med['v3'][0] / med['v2'][0]:.2f}, validation "
                      f"{med['v3'][1] / med['v2'][1]:.2f}; load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
