"""The per-person cost of a release programme (SPEC section 5, seeds 002 and 003).

A programme is a sequence of releases of one dataset. What a person loses is the sum over the
releases of each release's cost *for that person*:

* a user-level release costs its epsilon;
* a trip-level (or event-level) release costs, by group privacy, g x epsilon for a person with
  at most g trips in it (delta becomes g e^{(g-1) epsilon} delta); without a stated maximum
  there is no per-person guarantee at all;
* when the release is one independent mechanism per cell and a person adds at most 1 to each
  of at most c cells (seed 002: unique trips, at most 70 a week), per-cell composition gives
  (c epsilon, c delta) (rho: c rho), far tighter in delta than group privacy's
  g e^{(g-1) epsilon} delta; both rules are computed and the tighter one is used;
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
    ALMOST_ONE,
    Cost,
    PrivacyUnit,
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
    user_cost: Cost  # per person: the tighter of the rules below
    cumulative: Cost
    cells: int | None = None  # most cells one person touches (at most once each)
    group_rule: Cost | None = None  # group privacy over group_size units
    cell_rule: Cost | None = None  # per-cell composition over `cells` cells

    @property
    def posterior_bound(self) -> float:
        return membership_posterior_bound(self.cumulative.epsilon)


def per_user(cost: Cost, group_size: int | None) -> Cost:
    """The cost of one release for one person (group privacy for finer units)."""
    if cost.unit == PrivacyUnit.USER:
        return cost
    if group_size is None:
        raise ConfigError(
            f"a {cost.unit}-level release gives no per-person guarantee without the most "
            f"{cost.unit}s one person can have",
            hint="state it, e.g. --max-trips 70 (seed 002's conservative week)",
        )
    return cost.for_group(group_size, PrivacyUnit.USER)


def per_cell(cost: Cost, cells: int) -> Cost:
    """Per-cell composition: the cost for one person of a release made of independent
    per-cell mechanisms, each ``cost`` for a change of 1 in its cell, when the person adds at
    most 1 to each of at most ``cells`` cells: (c epsilon, c delta), rho c rho (basic
    composition over the cells they touch; the other cells do not depend on them)."""
    if cells < 1:
        raise ConfigError(f"cells per person must be >= 1, got {cells}")
    c = int(cells)
    rho = cost.rho * c if cost.rho is not None else None
    return Cost(cost.epsilon * c, min(cost.delta * c, ALMOST_ONE), rho, PrivacyUnit.USER)


def per_user_rules(
    cost: Cost, group_size: int | None, cells: int | None = None
) -> tuple[Cost, Cost | None, Cost | None]:
    """(tighter, group-privacy rule, per-cell rule) for one release and one person.

    Both rules are valid guarantees, so the one with the smaller (epsilon, delta) is used.
    A user-level release already states its per-person cost (both rules are None).
    """
    if cost.unit == PrivacyUnit.USER:
        return cost, None, None
    cell = per_cell(cost, cells) if cells is not None else None
    group = per_user(cost, group_size) if group_size is not None or cell is None else None
    rules = [r for r in (group, cell) if r is not None]
    best = min(rules, key=lambda r: (r.epsilon, r.delta))
    return best, group, cell


def programme(
    items: Iterable[tuple[str, Cost, int | None]], *, cells: int | None = None
) -> list[ProgrammeLine]:
    """Cost statement for releases given as (label, release cost, group size); ``cells``:
    the most cells one person touches per release, at most once each (per-cell rule)."""
    lines: list[ProgrammeLine] = []
    total: Cost | None = None
    for label, cost, g in items:
        uc, group, cell = per_user_rules(cost, g, cells)
        total = uc if total is None else total + uc
        lines.append(ProgrammeLine(label, cost, g, uc, total, cells, group, cell))
    if not lines:
        raise ConfigError("the programme has no releases")
    return lines


def repeated(
    epsilon: float,
    releases: int,
    *,
    unit: PrivacyUnit = PrivacyUnit.TRIP,
    max_units: int | None = None,
    tau: float | None = None,
    cells: int | None = None,
) -> list[ProgrammeLine]:
    """``releases`` identical releases (e.g. 52 weekly OD matrices), each epsilon per ``unit``.

    ``tau`` (seed 002's private-key-set thresholding) adds the per-cell delta
    0.5 exp(-epsilon (tau - 1)) to each release before group privacy.
    """
    if releases < 1:
        raise ConfigError("releases must be >= 1")
    delta = thresholding_delta(epsilon, tau) if tau is not None else 0.0
    one = Cost(epsilon, delta, None, unit)
    items = [(f"release {i + 1}", one, max_units) for i in range(releases)]
    return programme(items, cells=cells)


def trips_over_releases(epsilon: float, trips_per_release: Sequence[int]) -> Cost:
    """Per-person cost of trip-level releases given that person's trips in each release.

    Seed 003: 14 trips over 305 daily releases at epsilon 0.5 cost 7 (releases with no trip of
    the person cost nothing for them).
    """
    if any(t < 0 for t in trips_per_release):
        raise ConfigError("trip counts must be >= 0")
    costs = [
        Cost.pure(epsilon, PrivacyUnit.TRIP).for_group(t, PrivacyUnit.USER)
        for t in trips_per_release
        if t
    ]
    return sequential(costs) if costs else Cost.pure(0.0)


def ledger_programme(
    ledger: Ledger, dataset: str, *, max_units: int | None = None, cells: int | None = None
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
    return programme(items, cells=cells)
