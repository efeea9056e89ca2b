"""The per-person cost of a release programme (SPEC section 5, seeds 002 and 003).

A programme is a sequence of releases of one dataset. What a person loses is the sum over the
releases of each release's cost *for that person*:

* a user-level release costs its epsilon;
* a trip-level (or event-level) release costs, by group privacy, g x epsilon for a person with
  at most g trips in it (delta becomes g e^{(g-1) epsilon} delta); without a stated maximum
  there is no per-person guarantee at all;
* noise plus thresholding on a *private* key set (seed 002's Laplace on present cells, drop
  noisy counts < tau) is (epsilon, delta)-DP per cell with delta = 0.5 exp(-epsilon (tau - 1));
* with a 50% prior the membership posterior after an epsilon-DP programme is at most
  e^epsilon / (1 + e^epsilon).

Everything here is arithmetic on public parameters; it reads no data. It reuses
:class:`privmob.privacy.costs.Cost` for all composition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from privmob.errors import ConfigError
from privmob.privacy.costs import (
    Cost,
    Unit,
    membership_posterior_bound,
    sequential,
    thresholding_delta,
)
from privmob.privacy.ledger import Ledger


@dataclass(frozen=True)
class ProgrammeLine:
    """One row of a programme's cost statement."""

    label: str
    release_cost: Cost  # as the release states it
    group_size: int | None  # most units of the release one person can have
    user_cost: Cost  # per person
    cumulative: Cost

    @property
    def posterior_bound(self) -> float:
        return membership_posterior_bound(self.cumulative.epsilon)


def per_user(cost: Cost, group_size: int | None) -> Cost:
    """The cost of one release for one person (group privacy for finer units)."""
    if cost.unit == Unit.USER:
        return cost
    if group_size is None:
        raise ConfigError(
            f"a {cost.unit}-level release gives no per-person guarantee without the most "
            f"{cost.unit}s one person can have",
            hint="state it, e.g. --max-trips 70 (seed 002's conservative week)",
        )
    return cost.for_group(group_size, Unit.USER)


def programme(items: Iterable[tuple[str, Cost, int | None]]) -> list[ProgrammeLine]:
    """Cost statement for releases given as (label, release cost, group size)."""
    lines: list[ProgrammeLine] = []
    total: Cost | None = None
    for label, cost, g in items:
        uc = per_user(cost, g)
        total = uc if total is None else total + uc
        lines.append(ProgrammeLine(label, cost, g, uc, total))
    if not lines:
        raise ConfigError("the programme has no releases")
    return lines


def repeated(
    epsilon: float,
    releases: int,
    *,
    unit: Unit = Unit.TRIP,
    max_units: int | None = None,
    tau: float | None = None,
) -> list[ProgrammeLine]:
    """``releases`` identical releases (e.g. 52 weekly OD matrices), each epsilon per ``unit``.

    ``tau`` (seed 002's private-key-set thresholding) adds the per-cell delta
    0.5 exp(-epsilon (tau - 1)) to each release before group privacy.
    """
    if releases < 1:
        raise ConfigError("releases must be >= 1")
    delta = thresholding_delta(epsilon, tau) if tau is not None else 0.0
    one = Cost(epsilon, delta, None, unit)
    return programme([(f"release {i + 1}", one, max_units) for i in range(releases)])


def trips_over_releases(epsilon: float, trips_per_release: Sequence[int]) -> Cost:
    """Per-person cost of trip-level releases given that person's trips in each release.

    Seed 003: 14 trips over 305 daily releases at epsilon 0.5 cost 7 (releases with no trip of
    the person cost nothing for them).
    """
    if any(t < 0 for t in trips_per_release):
        raise ConfigError("trip counts must be >= 0")
    costs = [Cost.pure(epsilon, Unit.TRIP).for_group(t, Unit.USER) for t in trips_per_release if t]
    return sequential(costs) if costs else Cost.pure(0.0)


def ledger_programme(
    ledger: Ledger, dataset: str, *, max_units: int | None = None
) -> list[ProgrammeLine]:
    """Cost statement for every release of ``dataset`` recorded in a privmob ledger.

    Each entry's release cost is converted with the group size recorded at charge time, or
    ``max_units`` when the entry has none.
    """
    entries = ledger.entries(dataset)
    if not entries:
        raise ConfigError(
            f"no releases of '{dataset}' in the ledger {ledger.path}",
            hint="see what is there with: privmob ledger show",
        )
    items = []
    for e in entries:
        g = e.group_size if e.group_size is not None else max_units
        items.append((f"#{e.id} {e.kind}", e.release_cost, g))
    return programme(items)
