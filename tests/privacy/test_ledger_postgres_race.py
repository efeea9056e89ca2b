"""The last of a budget raced for on a real PostgreSQL server: 32 processes, 20 rounds."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

ROUNDS, PROCESSES = 20, 32
BUDGET, EACH = 1.0, 0.1  # ten charges fit each round's budget


def _releaser(url: str, rounds: int, barrier, results) -> None:
    led = Ledger(url)  # one connection setup per process, as a long-running releaser
    for r in range(rounds):
        barrier.wait()
        try:
            e = led.charge(f"round-{r}", Cost.pure(EACH), kind="race")
            results.put((r, e.id))
        except BudgetError as exc:
            results.put((r, "refused" if "refused" in str(exc) else repr(exc)))


def race(url: str, rounds: int, processes: int) -> dict[int, list[int]]:
    """Each round: ``processes`` releasers charge one dataset at once; the charged ids."""
    custodian = Ledger(url)
    for r in range(rounds):
        custodian.set_budget(f"round-{r}", BUDGET)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_releaser, args=(url, rounds, barrier, results))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=900) for _ in range(rounds * processes)]
    for p in procs:
        p.join(120)
    errors = [o for _, o in outcomes if isinstance(o, str) and o != "refused"]
    assert not errors, errors[:3]
    charged: dict[int, list[int]] = {r: [] for r in range(rounds)}
    for r, o in outcomes:
        if isinstance(o, int):
            charged[r].append(o)
    return charged


def _check(url: str, charged: dict[int, list[int]]) -> None:
    led = Ledger(url)
    fits = round(BUDGET / EACH)
    for r, ids in charged.items():
        entries = led.entries(f"round-{r}")
        assert len(ids) == fits, f"round {r}: {len(ids)} charges succeeded"  # 0 overspend
        assert sorted(e.id for e in entries) == sorted(ids)  # 0 lost, 0 unreported entries
        assert led.spent(f"round-{r}").epsilon <= BUDGET * (1 + 1e-9)
    assert led.verify() == []


@pytest.mark.slow
def test_racing_releasers_never_overspend_on_postgresql(pg_url):
    """20 rounds x 32 processes for the last of a budget: exactly the charges that fit
    succeed, every success is in the ledger, the chain verifies."""
    _check(pg_url, race(pg_url, ROUNDS, PROCESSES))
