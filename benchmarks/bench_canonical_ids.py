"""Benchmark: the canonical id text (privmob.data.fingerprint.identity_text) where it is
computed for every row: the people sketch's ``SELECT DISTINCT`` over the user ids
(privmob.data.validation.people_source). In the fingerprint itself an id is read only in the
sampled rows (about 1 in 17).

Per id type (text ``u123``, float ``123.0``, integer), the statement with the engine's plain
text of the id (``CAST(x AS VARCHAR)``, before) and with the canonical id text (after), best
of ``--rounds``, on DuckDB, over ``--rows`` rows of ``--users`` distinct ids:

    uv run python benchmarks/bench_canonical_ids.py --rows 2000000 --users 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import duckdb

from privmob.data.fingerprint import identity_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE ids AS SELECT 'u' || CAST(i % {args.users} AS VARCHAR) AS s, "
        f"CAST(i % {args.users} AS DOUBLE) AS f, i % {args.users} AS b "
        f"FROM range({args.rows}) AS r(i)"
    )
    cases = [
        ("text", "s", "VARCHAR"),
        ("float", "f", "DOUBLE"),
        ("integer", "b", "BIGINT"),
    ]
    for name, column, kind in cases:
        for label, expr in (("before", f"CAST({column} AS VARCHAR)"), ("after", None)):
            sql = expr or identity_text(column, kind)
            best = float("inf")
            for _ in range(args.rounds):
                start = time.perf_counter()
                con.execute(f"SELECT count(*) FROM (SELECT DISTINCT {sql} AS u FROM ids)")
                con.fetchall()
                best = min(best, time.perf_counter() - start)
            print(f"{name:8s} {label:6s} {best:.3f} s")


if __name__ == "__main__":
    main()
