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
alternated, best of ``--rounds``) on the same parsed relation, without the rest of a release.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_breakdown import Recorder, TimedConnection, _release  # noqa: E402
from suite import data_for  # noqa: E402

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


def statement_pair(path: Path, release: str, cells: Path | None, tess: Path, rounds: int) -> None:
    """The validation statement of each definition, run again on one parsed relation."""
    from privmob.engine import make_engine

    sqls: dict[str, str] = {}
    eng = make_engine("duckdb", memory_limit="4GB")
    timed = eng.con = TimedConnection(eng.con)
    for version in ("v2", "v3"):
        with definition(version):
            _release(release, str(path), str(cells or ""), str(tess), eng, Recorder())
        assert timed.validation is not None
        sqls[version] = timed.validation
    best = {"v2": float("inf"), "v3": float("inf")}
    for _ in range(rounds):
        for version in ("v2", "v3", "v3", "v2"):
            t0 = time.perf_counter()
            timed.con.execute(sqls[version]).fetchall()
            best[version] = min(best[version], time.perf_counter() - t0)
    eng.close()
    print(f"  validation statement alone (best of {2 * rounds}): v2 {best['v2']:.2f} s, "
          f"v3 {best['v3']:.2f} s, v3/v2 {best['v3'] / best['v2']:.2f}", flush=True)  # fmt: skip


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
    a = ap.parse_args()
    for release in a.releases:
        for n in (int(x) for x in a.sizes):
            for fmt in a.input:
                path, cells, tess = data_for(release, n, a.out, a.tessellation, fmt)
                print(f"\n{release}, {n:,} records, {fmt}, {a.tessellation}, load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
                if a.statement_only:
                    statement_pair(path, release, cells, tess, a.rounds)
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
