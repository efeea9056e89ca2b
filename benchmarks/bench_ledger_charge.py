"""Benchmark: the latency of a signed, fail-closed ledger charge on SQLite (and PostgreSQL).

1. Charge latency p50/p99 with 1, 8 and 32 concurrent releasers on a ledger of ``--entries``
   entries that the custodian checkpointed (real processes, each an analyst whose key is new to
   the ledger, so its first charge verifies from the checkpoint; ``--charges`` charges each,
   all at once; a copy of the big ledger for each count).
2. The cost of verify-on-charge on a ledger of ``--entries`` entries (100,000 by default):
   a charge right after a custodian checkpoint, one with ``CHECKPOINT_EVERY`` entries to verify
   after it, one with no checkpoint at all (everything verified: why checkpoints exist), and a
   full ``ledger verify``. Target: under 50 ms per charge. And what checkpoints cost there: the
   first (all entries verified), one every ``CHECKPOINT_EVERY`` entries (``ledger
   checkpoint``), and a custodian's charge with and without the checkpoint it signs when due.
3. What the user's witness store adds to each charge (compare with the head witnessed, record
   the new one).

    uv run python benchmarks/bench_ledger_charge.py            # 100,000 entries
    uv run python benchmarks/bench_ledger_charge.py --entries 20000 --charges 20
    uv run python benchmarks/bench_ledger_charge.py --sqlite-order   # turns against SQLite's order
    uv run python benchmarks/bench_ledger_charge.py --witness-only   # the witness store's cost
    uv run python benchmarks/bench_ledger_charge.py --checkpoint-only  # a checkpoint every N
    # the same on PostgreSQL: a private cluster started for the run (tests/pg_cluster.py)
    uv run --all-extras python benchmarks/bench_ledger_charge.py --postgres auto

Times on a shared, loaded machine are indicative only; the ledger file goes to a temporary
folder (removed at the end).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import peak_rss_gb


def _sketch(seed: int) -> object:
    """A full people sketch of random users (``--people``)."""
    import random

    from privmob.privacy.people import SKETCH_SIZE, PeopleSketch

    rng = random.Random(seed)
    return PeopleSketch.of(rng.getrandbits(64) for _ in range(2 * SKETCH_SIZE))


def _releaser(
    path: str, key: str, n: int, barrier: object, out: object, people: bool, turns: bool
) -> None:
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger import turn as ledger_turn

    if not turns:  # SQLite's own order, as where flock is missing (the baseline of the turns)
        ledger_turn.fcntl = None

    led = Ledger(path, key=key)
    sketch = _sketch(os.getpid()) if people else None
    barrier.wait()  # type: ignore[attr-defined]
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        led.charge_parts("d", [("", Cost.pure(1e-6))], kind="bench", people=sketch)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    out.put(times)  # type: ignore[attr-defined]


def concurrent(
    folder: Path,
    releasers: int,
    charges: int,
    location: str | os.PathLike[str],
    custodian: object,
    people: int = 0,
    turns: bool = True,
) -> list[float]:
    """``releasers`` processes charging the ledger at ``location`` at once, each an analyst
    whose key is new to it (so each one's first charge verifies from the custodian's latest
    checkpoint: "any analyst charging first"); the times of all their charges. ``people``:
    that many other datasets hold a full people sketch, and each charge carries one (the
    check of every stored sketch against the digest its entries name, then the merge)."""
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger.keys import generate

    led = Ledger(location, key=custodian)  # type: ignore[arg-type]
    for i in range(people):
        if not led.has_budget(f"p{i}"):
            led.set_budget(f"p{i}", 1e6)
            led.charge_parts(
                f"p{i}",
                [("", Cost.pure(1e-6))],
                kind="bench",
                people=_sketch(10_000 + i),  # type: ignore[arg-type]
            )
    keys = []
    for i in range(releasers):
        ana = generate(folder / f"ana-{releasers}-{i}-{time.monotonic_ns()}.pem")
        led.grant("analyst", f"bench{i}", ana.public_hex)
        keys.append(ana)
    led.checkpoint()  # where the custodian's cron leaves it
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(releasers), ctx.Queue()
    procs = [
        ctx.Process(
            target=_releaser,
            args=(str(location), str(k.path), charges, barrier, out, people > 0, turns),
        )
        for k in keys
    ]
    for p in procs:
        p.start()
    times = [t for _ in procs for t in out.get(timeout=1800)]
    for p in procs:
        p.join()
    return times


def big_ledger(
    folder: Path, entries: int, location: str | None = None, *, checkpointed: bool = False
) -> tuple[Path | str, object, object]:
    """A ledger of ``entries`` signed entries (written in bulk by the same code a charge uses;
    ``location``: a PostgreSQL URL, default a new file in ``folder``); ``checkpointed``: with
    the custodian's checkpoint at its end, signed in the same bulk write (as where the
    custodian checkpointed all along)."""
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger import chain as chain
    from privmob.privacy.ledger import trust as trust
    from privmob.privacy.ledger.entries import entry_provenance, insert_entries
    from privmob.privacy.ledger.keys import generate

    cus = generate(folder / "cus-big.pem")
    ana = generate(folder / "ana-big.pem")
    path = location or folder / "big.sqlite"
    led = Ledger(path, key=cus)
    led.grant("analyst", "bench", ana.public_hex)
    led.set_budget("d", 1e6)
    prov = entry_provenance(None, None, None, None, False)
    with led._connect() as con:
        led.store.begin_write(con, "d")
        prev = chain.genesis(led.ledger_id)
        done = 0
        totals: dict = {}
        while done < entries:
            n = min(1000, entries - done)
            parts = [("", Cost.pure(1e-6))] * n
            made = insert_entries(
                led.store,
                con,
                prev,
                "d",
                "bench",
                parts,
                [c for _, c in parts],
                group_size=None,
                for_publication=True,
                params={},
                provenance=prov,
                created="2026-01-01T00:00:00",
                signer=ana,
                ledger_id=led.ledger_id,
            )
            prev = made[-1].row_hash
            done += n
            for e in made:
                trust.add_to(totals, "d", e.cost.epsilon, e.cost.delta, e.cost.rho)
        led.store.set_head(con, entries, prev)
        if checkpointed:
            pos = trust.Position(made[-1].id, entries, prev, totals)
            trust.add_checkpoint(con, led.ledger_id, cus, pos, "2026-01-01T00:00:00")
        con.execute("COMMIT")
    return path, cus, ana


def timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def verify_on_charge(path: Path | str, cus: object, ana: object) -> dict[str, float]:
    """On the big ledger just built (no checkpoint yet)."""
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger import trust as trust

    analyst = Ledger(path, key=ana.path)  # type: ignore[attr-defined]
    custodian = Ledger(path, key=cus)  # type: ignore[arg-type]
    res: dict[str, float] = {}
    res["charge_no_checkpoint_s"] = timed(lambda: analyst.charge("d", Cost.pure(1e-6), kind="b"))
    res["checkpoint_s"] = timed(custodian.checkpoint)
    after = [timed(lambda: analyst.charge("d", Cost.pure(1e-6), kind="b")) for _ in range(20)]
    res["charge_after_checkpoint_p50_s"] = statistics.median(after)
    for _ in range(trust.CHECKPOINT_EVERY - 20):
        analyst.charge("d", Cost.pure(1e-6), kind="b")
    res["charge_64_behind_s"] = timed(lambda: analyst.charge("d", Cost.pure(1e-6), kind="b"))
    # the checkpoint made every CHECKPOINT_EVERY entries: it verifies those since the last one
    res["checkpoint_every_n_s"] = timed(custodian.checkpoint)
    for _ in range(trust.CHECKPOINT_EVERY - 1):
        analyst.charge("d", Cost.pure(1e-6), kind="b")
    # the custodian's charge that falls due signs the checkpoint in its own transaction
    res["custodian_charge_with_checkpoint_s"] = timed(
        lambda: custodian.charge("d", Cost.pure(1e-6), kind="b")
    )
    res["custodian_charge_s"] = timed(lambda: custodian.charge("d", Cost.pure(1e-6), kind="b"))
    res["full_verify_s"] = timed(lambda: analyst.verify())
    return res


def checkpoint_cost(folder: Path, entries: int, repeats: int = 3) -> dict[str, float]:
    """On a checkpointed ledger of ``entries`` entries: the checkpoint signed every
    ``CHECKPOINT_EVERY`` entries (after that many analyst charges: ``ledger checkpoint``), and
    a custodian's charge that falls due and signs it (medians of ``repeats``)."""
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger import trust as trust

    t0 = time.perf_counter()
    path, cus, ana = big_ledger(folder, entries, checkpointed=True)
    res = {"build_s": time.perf_counter() - t0}
    analyst = Ledger(path, key=ana.path)  # type: ignore[attr-defined]
    custodian = Ledger(path, key=cus)  # type: ignore[arg-type]
    every, due, plain = [], [], []
    for _ in range(repeats):
        for _ in range(trust.CHECKPOINT_EVERY):
            analyst.charge("d", Cost.pure(1e-6), kind="b")
        every.append(timed(custodian.checkpoint))
        for _ in range(trust.CHECKPOINT_EVERY - 1):
            analyst.charge("d", Cost.pure(1e-6), kind="b")
        due.append(timed(lambda: custodian.charge("d", Cost.pure(1e-6), kind="b")))
        plain.append(timed(lambda: custodian.charge("d", Cost.pure(1e-6), kind="b")))
    res["checkpoint_every_n_s"] = statistics.median(every)
    res["custodian_charge_with_checkpoint_s"] = statistics.median(due)
    res["custodian_charge_s"] = statistics.median(plain)
    return res


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(folder: Path, args: argparse.Namespace, database: object = None) -> None:
    """Both measures on one store: SQLite files in ``folder``, or (``database``: a callable
    giving a new database's URL, or with a template a copy of that database) PostgreSQL."""
    import shutil

    where = "PostgreSQL" if database else "SQLite"
    url = database() if database else None  # type: ignore[operator]
    t0 = time.perf_counter()
    path, cus, ana = big_ledger(folder, args.entries, url)
    print(
        f"{where}: ledger of {args.entries:,} signed entries built in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    res = verify_on_charge(path, cus, ana)
    for k in (
        "charge_no_checkpoint_s",
        "checkpoint_s",
        "charge_after_checkpoint_p50_s",
        "charge_64_behind_s",
        "checkpoint_every_n_s",
        "custodian_charge_s",
        "custodian_charge_with_checkpoint_s",
        "full_verify_s",
    ):
        print(f"  {k[:-2].replace('_', ' '):<36} {1000 * res[k]:9.1f} ms", flush=True)
    orders = [True] if database or not args.sqlite_order else [True, False]
    for r in (int(x) for x in args.releasers.split(",")):
        for turns in orders:
            # each copy is the same ledger: witnessed apart (a copy behind another is refused)
            os.environ["XDG_DATA_HOME"] = str(folder / f"data-{r}-{turns}")
            if database:  # a copy of the big ledger's database for each count
                copy: Path | str = database(template=url)  # type: ignore[operator]
            else:
                copy = folder / f"copy-{r}-{turns}.sqlite"
                shutil.copyfile(path, copy)
            t = concurrent(folder, r, args.charges, copy, cus, args.people, turns)
            how = "row locks" if database else "write lock"
            if not database:
                how += ", in turns" if turns else ", in SQLite's order"
            if args.people:
                how += f"; with people sketches, {args.people} other datasets hold one"
            print(
                f"{where}: {r:>3} concurrent releasers x {args.charges} charges on "
                f"{args.entries:,} entries: p50 {1000 * pct(t, 0.5):7.1f} ms  "
                f"p99 {1000 * pct(t, 0.99):7.1f} ms  max {1000 * max(t):7.1f} ms  (each a new "
                f"analyst; the wait included: {how})",
                flush=True,
            )


def postgres(folder: Path, args: argparse.Namespace) -> None:
    """The PostgreSQL side: ``--postgres auto`` starts a private cluster for the run (as the
    tests do) and stops it; ``--postgres URL`` uses that database (once: give one release count
    per run, e.g. --releasers 8)."""
    if args.postgres != "auto":
        sys.exit("--postgres auto only (the copies of the big ledger are new databases)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg_cluster import PgCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        sys.exit("no PostgreSQL binaries found (install postgresql-15)")
    cluster = PgCluster(bindir)
    made = []
    try:
        cluster.start()
        cluster.sql("CREATE ROLE custodian LOGIN CREATEDB CREATEROLE")

        def database(template: str | None = None) -> str:
            made.append(f"bench_{len(made)}")
            like = f" TEMPLATE {template.rsplit('/', 1)[1]}" if template else ""
            cluster.sql(f"CREATE DATABASE {made[-1]} OWNER custodian{like}")
            return cluster.url("custodian", made[-1])

        report(folder, args, database)
    finally:
        cluster.remove()


def witness_cost(folder: Path, repeats: int = 500) -> tuple[float, float]:
    """What this user's witness adds to a charge (privacy/ledger/witness.py): the comparison
    with the head witnessed and the record of the new head, timed directly (medians, seconds)
    on a ledger of 100 entries."""
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger
    from privmob.privacy.ledger import witness as witness
    from privmob.privacy.ledger.keys import generate

    led = Ledger(folder / "witness.sqlite", key=generate(folder / "witness.pem"))
    led.set_budget("d", 1e6)
    for _ in range(100):
        last = led.charge("d", Cost.pure(1e-6), kind="bench")
    root = led.key_ring().root
    real = witness.Head(100, last.id, last.row_hash)
    compare, record = [], []
    with led.store.connect() as con:
        for i in range(repeats):
            t0 = time.perf_counter()
            assert witness.disagreement(con, led.ledger_id, root, led.location) is None
            t1 = time.perf_counter()
            witness.record(led.ledger_id, root, witness.Head(101 + i, 0, ""), led.location)
            record.append(time.perf_counter() - t1)
            compare.append(t1 - t0)
            witness.witness_file(led.ledger_id).unlink()  # back to the real head
            witness.record(led.ledger_id, root, real, led.location)
    return statistics.median(compare), statistics.median(record)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--charges", type=int, default=30, help="charges per releaser")
    ap.add_argument("--releasers", default="1,8,32")
    ap.add_argument(
        "--sqlite-order",
        action="store_true",
        help="SQLite: also measure the releasers without their turns (SQLite's own order of "
        "waiting writers, as where flock is missing), each count beside the turns",
    )
    ap.add_argument(
        "--people",
        type=int,
        default=0,
        metavar="N",
        help="the releasers' charges carry a people sketch, and N other datasets hold one",
    )
    ap.add_argument(
        "--witness-only",
        action="store_true",
        help="only what the witness store adds to a charge (compare and record)",
    )
    ap.add_argument(
        "--checkpoint-only",
        action="store_true",
        help="only what a checkpoint costs every N entries on a checkpointed ledger of "
        "--entries entries (SQLite)",
    )
    ap.add_argument(
        "--postgres",
        metavar="auto",
        help="measure a PostgreSQL ledger instead of SQLite files: 'auto' (a private cluster "
        "for the run)",
    )
    args = ap.parse_args()
    print("timings on a shared machine are indicative only")
    with tempfile.TemporaryDirectory(prefix="privmob-bench-ledger-") as tmp:
        # the releasers' position notes go here, never to the user's own data directory
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        compare, record = witness_cost(Path(tmp))
        print(
            f"witness per charge: compare {compare * 1e3:.2f} ms, record {record * 1e3:.2f} ms "
            "(medians of 500)"
        )
        if args.witness_only:
            return
        if args.checkpoint_only:
            from privmob.privacy.ledger import trust as trust

            res = checkpoint_cost(Path(tmp), args.entries)
            print(
                f"SQLite: ledger of {args.entries:,} entries, checkpointed, built in "
                f"{res.pop('build_s'):.1f} s (N = {trust.CHECKPOINT_EVERY})"
            )
            for k, v in res.items():
                print(f"  {k[:-2].replace('_', ' '):<36} {1000 * v:9.1f} ms")
            return
        if args.postgres:
            postgres(Path(tmp), args)
        else:
            report(Path(tmp), args)
    print(f"peak memory {peak_rss_gb():.2f} GB")


if __name__ == "__main__":
    main()
