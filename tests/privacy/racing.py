"""Real processes racing for one ledger's budget (tests/privacy/test_ledger.py and
test_ledger_roles.py): each opens the ledger, waits for all the others, then charges."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

#: what each racer charges to dataset ``d``
RACE_EPSILON = 0.3


def _charge_once(path: str, key: str | None, barrier: Any, results: Any) -> None:
    led = Ledger(path, key=key)
    barrier.wait()
    try:
        led.charge("d", Cost.pure(RACE_EPSILON), kind="race")
        results.put(True)
    except BudgetError:
        results.put(False)


def race_for_budget(
    path: str, racers: int, *, key: str | None = None, join_seconds: float = 600
) -> list[bool]:
    """``racers`` real (spawned) processes open the ledger at ``path`` (signing with ``key``),
    wait for each other, and each charges epsilon :data:`RACE_EPSILON` to dataset ``d``;
    whether each one's charge landed."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(racers), ctx.Queue()
    procs = [
        ctx.Process(target=_charge_once, args=(path, key, barrier, results)) for _ in range(racers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(join_seconds)
    return [results.get(timeout=60) for _ in procs]
