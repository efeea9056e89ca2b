"""Benchmark: where privmob's time goes against its floor, step by step, for od-trips,
population and the report (issue 30: 100M records, CSV and Parquet, NYC taxi zones,
``--memory-limit 4GB``).

For one release and size, two child processes on the same file (benchmarks/suite.py's data,
floors and release calls):

* ``floor``: the bare DuckDB query doing the same bounded group-by (``suite.FLOORS``);
* ``privmob``: the release through its Python API under ``--memory-limit``, each step timed
  from the release's own progress messages (the ones ``privmob`` prints): reading the
  tessellation; reading the input (for CSV: parsing it once into a private Parquet file) with
  its validation, tile assignment and content fingerprint in one aggregate pass; writing the
  user buckets; each bucket's bounding and counting (one query per bucket); the dense counts;
  noise; the ledger charge; writing the files. Then, in the same process, for a CSV parsed
  once, the same reading and parsing with nothing written (each parsed column's count of
  values: the floor of the parse-once step, whose rest is the writing), and a bare scan of the
  input (each column's count of values, as text for CSV).

Prints one table per release and size: step, seconds, share of privmob's time, and the ratio to
the floor; the peak resident memory (VmHWM of the child, psutil / ru_maxrss) against the limit.

    uv run python benchmarks/bench_breakdown.py --releases od-trips --sizes 1e7 --input csv
    uv run python benchmarks/bench_breakdown.py --sizes 1e8 --input csv parquet   # idle machine

``--out DIR`` puts the generated inputs elsewhere than benchmarks/out (the 100M CSV of trips is
14 GB); ``--floor-duckdb-limit`` gives the floor's DuckDB a memory limit (it spills above it;
default none: DuckDB's 80% of RAM). The floor's peak and the load average at the start of each
run are printed too (timings on a loaded machine are not trustworthy; peaks are).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
from suite import END, EPSILON, START, T, data_for, run_floor  # noqa: E402

#: ``report-complete``: the report run again, against the floor of its whole relational work
#: (suite.floor_report_complete; ``report``'s floor is a lower bound: 3 of its 16 vectors)
RELEASES = ("od-trips", "population", "report", "report-complete")


class Recorder:
    """A progress callback that timestamps each step; ``steps()`` gives (step, seconds)."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = []

    def __call__(self, message: str) -> None:
        self.marks.append((message, time.perf_counter()))

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        self(name)
        return fn()

    def steps(self, end: float) -> list[tuple[str, float]]:
        out = []
        for (name, t0), (_, t1) in zip(self.marks, [*self.marks[1:], ("", end)], strict=True):
            out.append((name, t1 - t0))
        return out


def _release(release: str, path: str, cells: str, tess_path: str, eng: Any, rec: Recorder) -> None:
    from privmob.data.tessellation_input import load_tessellation
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant, write_release

    with tempfile.TemporaryDirectory() as tmp:
        acct = Accountant(Ledger(Path(tmp) / "l.sqlite"), "bench", budget=1e6)
        tess = rec.timed("reading the tessellation", lambda: load_tessellation(tess_path))
        reading = "reading, parsing, validating, tiles and fingerprint (one pass)"
        if release == "od-trips":
            from privmob.domain import Period
            from privmob.prepare.inputs import load_trips_any
            from privmob.releases.od import od_matrix

            trips = rec.timed(reading, lambda: load_trips_any(
                path, engine=eng, tessellation=tess, shape="trips"))  # fmt: skip
            rel = od_matrix(trips, tessellation=tess, epsilon=EPSILON, accountant=acct,
                            max_trips=T, period=Period(), step=rec)  # fmt: skip
            rec("writing the files")
            write_release(rel, Path(tmp) / "out")
        elif release == "population":
            from privmob.data import load_events
            from privmob.releases.population import population_counts

            events = rec.timed(reading, lambda: load_events(
                path, engine=eng, tessellation=tess, cells=cells or None))  # fmt: skip
            rel = population_counts(events, tessellation=tess, epsilon=EPSILON,
                                    accountant=acct, step=rec)  # fmt: skip
            rec("writing the files")
            write_release(rel, Path(tmp) / "out")
        else:
            from privmob.data.sources import load_trip_points
            from privmob.releases.report import ReportConfig, Tiles, mobility_report
            from privmob.render.report_files import write_report

            points = rec.timed(reading, lambda: load_trip_points(
                path, engine=eng, tessellation=tess))  # fmt: skip
            cfg = ReportConfig.build(epsilon=EPSILON, max_trips=T, period=(START, END))
            rep = mobility_report(eng, points, Tiles.from_tessellation(tess), cfg, acct,
                                  progress=rec)  # fmt: skip
            rec("writing the files")
            write_report(rep, Path(tmp) / "report.html")


#: the engine statements timed inside privmob's steps: (label, text that marks the statement)
STATEMENTS = (
    ("parsing the CSV once into the private Parquet file", "privmob-parsed-"),
    ("validation checks and content fingerprint (one aggregate)", "AS pm_fingerprint"),
    ("distinct coordinates for point in polygon", "SELECT DISTINCT lng, lat"),
    ("writing the user buckets", "AS pm_bucket"),
)


class TimedConnection:
    """The engine's DuckDB connection, timing the statements of :data:`STATEMENTS`."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.times: list[tuple[str, float]] = []
        self.validation: str | None = None  # the validation statement, for --fingerprint-share
        self.parsing: str | None = None  # the query the parse-once step writes, for its floor

    def execute(self, sql: str, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.con.execute(sql, *args)
        finally:
            for label, mark in STATEMENTS:
                if mark in sql and (mark != "privmob-parsed-" or sql.startswith("COPY")):
                    self.times.append((label, time.perf_counter() - t0))
                    if mark == "AS pm_fingerprint":
                        self.validation = sql
                    elif mark == "privmob-parsed-":
                        self.parsing = sql[len("COPY (") : sql.rindex(") TO '")]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def without_fingerprint(sql: str) -> str:
    """The validation statement ``sql`` without its content fingerprint term."""
    head, _, tail = sql.partition(" AS pm_fingerprint")
    # the fingerprint's term: v3's concat_ws('/', ...) of sums (v2's: one CAST(sum(...)))
    marker = ", concat_ws('/', " if ", concat_ws('/', " in head else ", CAST(sum("
    return head[: head.rindex(marker)] + tail


def fingerprint_share(con: Any, sql: str) -> tuple[float, float]:
    """Seconds of the validation statement ``sql`` run again, with and without its content
    fingerprint term (the rest: the checks and the row count over the same relation)."""
    out = []
    for text in (sql, without_fingerprint(sql)):
        t0 = time.perf_counter()
        con.execute(text).fetchall()
        out.append(time.perf_counter() - t0)
    return out[0], out[1]


def child_privmob(
    release: str, path: str, cells: str, tess_path: str, limit: str, share: str = ""
) -> dict[str, Any]:
    import duckdb

    import privmob.data.tessellation_input  # noqa: F401  (the floor imports these too)
    from privmob.engine import make_engine
    from privmob.engine.memory import peak_rss_bytes

    t0 = time.perf_counter()
    rec = Recorder()
    eng = rec.timed("starting the engine", lambda: make_engine("duckdb", memory_limit=limit))
    timed = eng.con = TimedConnection(eng.con)
    _release(release, path, cells, tess_path, eng, rec)
    end = time.perf_counter()
    peak = peak_rss_bytes()
    shares = fingerprint_share(timed.con, timed.validation) if share and timed.validation else None
    parse_seconds = None
    if timed.parsing is not None:  # the same reading and parsing, nothing written
        p0 = time.perf_counter()
        timed.con.execute(f"SELECT count(COLUMNS(*)) FROM ({timed.parsing}) AS p_").fetchall()
        parse_seconds = time.perf_counter() - p0
    eng.close()
    scan = "read_csv('{}', all_varchar = true)" if path.endswith(".csv") else "'{}'"
    s0 = time.perf_counter()
    # every column read: each one's count of values (the maxima under a count(*), as before,
    # were dropped by DuckDB, which then only counted the rows)
    duckdb.sql(f"SELECT count(COLUMNS(*)) FROM {scan.format(path)}").fetchall()
    return {
        "seconds": end - t0,
        "steps": rec.steps(end),
        "statements": timed.times,
        "fingerprint_share": shares,
        "scan_seconds": time.perf_counter() - s0,
        "parse_seconds": parse_seconds,
        "peak": peak,
    }


def run_child(*args: str) -> dict:
    res = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if res.returncode:
        return {"error": " / ".join(res.stderr.strip().splitlines()[-3:])[:300]}
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def merge(steps: list[list[Any]]) -> list[tuple[str, float, int]]:
    """Steps with the same kind (each user bucket, ...) summed: (step, seconds, times)."""
    out: dict[str, list[float]] = {}
    for name, seconds in steps:
        key = name.split(": user bucket")[0] + (": user buckets" if "user bucket " in name else "")
        out.setdefault(key, []).append(seconds)
    return [(k, sum(v), len(v)) for k, v in out.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=list(RELEASES[:3]), choices=RELEASES)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e7])
    ap.add_argument("--input", nargs="+", default=["csv"], choices=("csv", "parquet"))
    ap.add_argument("--tessellation", default="taxi-zones", choices=("grid", "taxi-zones"))
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--out", type=Path, default=OUT, help="where the inputs are generated")
    ap.add_argument("--floor-duckdb-limit", default="", help="the floor's DuckDB memory_limit")
    ap.add_argument(
        "--fingerprint-share",
        action="store_true",
        help="run the validation statement again with and without the fingerprint",
    )
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args()
    if a.child:
        kind, *rest = a.child
        if kind == "floor":
            from privmob.engine.memory import peak_rss_bytes

            print(json.dumps({**run_floor(*rest), "peak": peak_rss_bytes()}))
        else:
            print(json.dumps(child_privmob(*rest)))
        return
    from privmob.engine.buckets import parse_memory

    for release in a.releases:
        for n in (int(x) for x in a.sizes):
            for fmt in a.input:
                path, cells, tess = data_for(release, n, a.out, a.tessellation, fmt)
                common = (release, str(path), str(cells or ""), str(tess))
                load = os.getloadavg()[0]
                floor = run_child("floor", *common, a.floor_duckdb_limit)
                share = "share" if a.fingerprint_share else ""
                run = run_child("privmob", *common, a.memory_limit, share)
                print(f"\n{release}, {n:,} records, {fmt}, {a.tessellation}, "
                      f"--memory-limit {a.memory_limit}, load average {load:.1f} at the start, "
                      f"{os.getloadavg()[0]:.1f} at the end")  # fmt: skip
                if "error" in run or "error" in floor:
                    print(f"  failed: {run.get('error') or floor.get('error')}")
                    continue
                total, fl = float(run["seconds"]), float(floor["seconds"])
                print(f"  {'step':<66} {'seconds':>8} {'share':>6}")
                for name, secs, times in merge(run["steps"]):
                    label = name if times == 1 else f"{name} (x{times})"
                    print(f"  {label[:66]:<66} {secs:>8.1f} {secs / total:>6.0%}")
                for name, secs, times in merge(run["statements"]):
                    label = "  of which " + (name if times == 1 else f"{name} (x{times})")
                    print(f"  {label[:66]:<66} {secs:>8.1f} {secs / total:>6.0%}")
                print(f"  {'privmob, whole release':<66} {total:>8.1f}")
                if run.get("fingerprint_share"):
                    full, bare = run["fingerprint_share"]
                    print(f"  validation statement run again: {full:.1f} s, without the "
                          f"fingerprint {bare:.1f} s: the fingerprint {full - bare:.1f} s = "
                          f"{(full - bare) / total:.0%} of the release")  # fmt: skip
                print(f"  {'floor (bare bounded group-by)':<66} {fl:>8.1f}  ratio {total / fl:.2f}"
                      f"  (floor peak {float(floor['peak']) / 1e9:.2f} GB)")  # fmt: skip
                print(f"  {'bare scan of the input, every column (a floor of reading)':<66} "
                      f"{float(run['scan_seconds']):>8.1f}")  # fmt: skip
                if run.get("parse_seconds") is not None:
                    print(f"  {'the parse-once step reading and parsing, nothing written':<66} "
                          f"{float(run['parse_seconds']):>8.1f}")  # fmt: skip
                peak = float(run["peak"])
                print(f"  peak {peak / 1e9:.2f} GB = {peak / parse_memory(a.memory_limit):.2f} "
                      "x the limit")  # fmt: skip


if __name__ == "__main__":
    main()
