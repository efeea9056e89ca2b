"""Benchmark: the engine-neutral content fingerprint and the people sketch against the old
engine-specific fingerprint, on the same parsed input (issue 30 item 2, issue 27 item 4).

The trips CSV of bench_fingerprint.py (synthetic, ``--size`` rows) is parsed once into a
Parquet file, as privmob's validation pass does; then, in rounds that alternate the variants
(so a load spike hits them alike; best of ``--rounds``), one DuckDB query each:

* ``scan``: ``count(*)`` and the checks' kind of work only (the floor of the pass);
* ``old``: the engine-specific row-hash sum (DuckDB ``hash`` of the canonical values);
* ``new``: :func:`privmob.data.fingerprint.content_fingerprint` (MD5 of the canonical text);
* ``people``: the people sketch (one query over the distinct user ids).

    uv run python benchmarks/bench_fingerprint_canonical.py --size 10000000 --rounds 3

Timings on a shared, loaded machine are not trustworthy in absolute terms; the ratios of
alternating runs are the figure to quote.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.argv.append("csv")  # bench_fingerprint.data_for writes the CSV only when asked
    from bench_fingerprint import OUT, data_for
    from privmob.data.fingerprint import content_fingerprint, identity_text, time_text
    from privmob.data.validation import people_source
    from privmob.engine import make_engine

    _, csv, _ = data_for(args.size)
    eng = make_engine("duckdb")
    parsed = OUT / f"parsed_{args.size}.parquet"
    if not parsed.exists():
        eng.con.execute(
            f"COPY (SELECT uid, tid, CAST(start_time AS TIMESTAMP) AS _p_start_time, "
            f"CAST(end_time AS TIMESTAMP) AS _p_end_time, origin, destination "
            f"FROM read_csv('{csv}')) TO '{parsed}' (FORMAT parquet)"
        )
    eng.create_view("t", f"SELECT * FROM read_parquet('{parsed}')")
    content = {
        "uid": identity_text("uid"),
        "start_time": time_text(eng, "_p_start_time"),
        "end_time": time_text(eng, "_p_end_time"),
        "tid": identity_text("tid"),
        "origin": identity_text("origin"),
        "destination": identity_text("destination"),
    }
    ids = [identity_text(c) for c in ("uid", "tid", "origin", "destination")]
    old_cols = ", ".join([ids[0], "_p_start_time", "_p_end_time", *ids[1:]])
    variants = {
        "scan": "SELECT count(*), count_if(uid IS NULL) FROM t",
        "old": "SELECT count(*), CAST(sum(CAST(hash(CAST(0 AS BIGINT), "
        f"{old_cols}) AS DECIMAL(38, 0))) AS VARCHAR) FROM t",
        "new": f"SELECT count(*), {content_fingerprint(eng, content)} FROM t",
    }
    sketch = people_source(eng, "t", identity_text("uid"))
    best = dict.fromkeys([*variants, "people"], float("inf"))
    for _ in range(args.rounds):
        for name, sql in variants.items():
            t = time.perf_counter()
            eng.fetch(sql)
            best[name] = min(best[name], time.perf_counter() - t)
        t = time.perf_counter()
        sketch(os.urandom(32))
        best["people"] = min(best["people"], time.perf_counter() - t)
    load = os.getloadavg()[0]
    print(f"{args.size:,} rows (parsed Parquet), best of {args.rounds}, load average {load:.1f}:")
    for name, secs in best.items():
        extra = "" if name == "scan" else f"  (+{secs - best['scan']:.2f} s over the scan)"
        print(f"  {name:7} {secs:7.2f} s{extra}")
    over = {name: best[name] - best["scan"] for name in ("old", "new")}
    print(f"  new / old (above the scan): {over['new'] / max(over['old'], 1e-9):.2f}")


if __name__ == "__main__":
    main()
