"""Benchmark: real processes racing for the last of a budget, on SQLite and on PostgreSQL.

Each round makes a new ledger (custodian key, one analyst key, budget ``--budget`` on dataset
``d``), starts ``--racers`` processes (spawned, each signing with the analyst's key; on
PostgreSQL connected as an analyst's database role), lets them
wait for each other and charge ``--epsilon`` each at once. A round passes when:

- **0 overspend**: what the ledger says was spent is at most the budget, and exactly the charges
  that reported success times ``--epsilon``;
- **0 lost entries**: one entry per charge that succeeded, none for one that was refused;
- **verify clean**: ``ledger verify`` (with the custodian key) reports nothing.

With the defaults (budget 1.0, epsilon 0.3) exactly 3 of the 32 racers can be paid.

    uv run python benchmarks/bench_ledger_race.py                       # SQLite, 20 x 32
    uv run --all-extras python benchmarks/bench_ledger_race.py --postgres auto
    uv run python benchmarks/bench_ledger_race.py --rounds 5 --racers 16   # a loaded machine

Prints one line per round and a summary; exits 1 if any round failed.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import peak_rss_gb


def _racer(location: str, key: str, epsilon: float, barrier: Any, out: Any) -> None:
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    led = Ledger(location, key=key)
    barrier.wait()
    t0 = time.perf_counter()
    try:
        led.charge("d", Cost.pure(epsilon), kind="race")
        out.put((True, time.perf_counter() - t0))
    except BudgetError:
        out.put((False, time.perf_counter() - t0))


def one_round(
    folder: Path, location: str, racers: int, budget: float, epsilon: float
) -> dict[str, Any]:
    """One race on a new ledger at ``location``; what it shows."""
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.keys import generate

    tag = len(list(folder.glob("cus-*.pem")))
    cus = generate(folder / f"cus-{tag}.pem")
    ana = generate(folder / f"ana-{tag}.pem")
    led = Ledger(location, key=cus)
    led.grant("analyst", "racer", ana.public_hex)
    led.set_budget("d", budget)
    racing_at = location
    if location.startswith("postgresql://"):  # the racers connect as an analyst's role
        led.store.grant("racer", "analyst")  # type: ignore[attr-defined]
        racing_at = location.replace("custodian@", "racer@", 1)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(racers), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(racing_at, str(ana.path), epsilon, barrier, out))
        for _ in range(racers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=900) for _ in procs]
    for p in procs:
        p.join(60)
    paid = sum(ok for ok, _ in results)
    entries = Ledger(location, key=cus).entries("d")
    spent = Ledger(location, key=cus).spent("d").epsilon
    problems = Ledger(location, key=cus).verify()
    return {
        "paid": paid,
        "entries": len(entries),
        "spent": spent,
        "overspend": max(0.0, spent - budget * (1 + 1e-9)),
        "lost": paid - len(entries),
        "verify": problems,
        "ok": (
            spent <= budget * (1 + 1e-9)
            and len(entries) == paid
            and math.isclose(spent, paid * epsilon, rel_tol=1e-9)
            and paid == int(budget / epsilon + 1e-9)
            and not problems
        ),
        "seconds": max(t for _, t in results),
    }


def run(
    folder: Path, where: str, new_location: Callable[[], str], args: argparse.Namespace
) -> bool:
    failed = 0
    overspend = lost = 0.0
    t0 = time.perf_counter()
    for i in range(args.rounds):
        r = one_round(folder, new_location(), args.racers, args.budget, args.epsilon)
        overspend += r["overspend"]
        lost += abs(r["lost"])
        failed += not r["ok"]
        print(
            f"{where} round {i + 1:>2}: {args.racers} racers, {r['paid']} paid, "
            f"{r['entries']} entries, spent {r['spent']:.6g} of {args.budget:g}, "
            f"verify {'clean' if not r['verify'] else r['verify'][0]}, "
            f"slowest charge {1000 * r['seconds']:.0f} ms{'' if r['ok'] else '  FAILED'}",
            flush=True,
        )
    print(
        f"{where}: {args.rounds} rounds x {args.racers} processes: overspend {overspend:g}, "
        f"lost entries {lost:g}, rounds failed {failed} ({time.perf_counter() - t0:.0f} s)"
    )
    return failed == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--racers", type=int, default=32)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--epsilon", type=float, default=0.3)
    ap.add_argument(
        "--postgres",
        metavar="auto",
        help="race on PostgreSQL too: 'auto' starts a private cluster for the run "
        "(tests/pg_cluster.py)",
    )
    args = ap.parse_args()
    print("timings on a shared machine are indicative only")
    ok = True
    with tempfile.TemporaryDirectory(prefix="privmob-bench-race-") as tmp:
        folder = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(folder / "data")  # witnesses: never the user's own
        files = iter(range(10**6))
        ok &= run(folder, "SQLite", lambda: str(folder / f"race-{next(files)}.sqlite"), args)
        if args.postgres:
            ok &= _postgres(folder, args)
    print(f"peak memory {peak_rss_gb():.2f} GB")
    sys.exit(0 if ok else 1)


def _postgres(folder: Path, args: argparse.Namespace) -> bool:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg_cluster import PgCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        sys.exit("no PostgreSQL binaries found (install postgresql-15)")
    cluster = PgCluster(bindir)
    made: list[str] = []
    try:
        cluster.start()
        cluster.sql("CREATE ROLE custodian LOGIN CREATEDB CREATEROLE")
        cluster.sql("CREATE ROLE racer LOGIN")  # the racers' database role: an analyst

        def database() -> str:
            made.append(f"race_{len(made)}")
            cluster.sql(f"CREATE DATABASE {made[-1]} OWNER custodian")
            return cluster.url("custodian", made[-1])

        return run(folder, "PostgreSQL", database, args)
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
