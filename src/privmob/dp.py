"""The typed vocabulary of differential privacy used by :class:`privmob.Session`.

Budgets (:class:`PureDP`, :class:`ApproxDP`, :class:`RhoZCDP`), the privacy unit
(:class:`~privmob.privacy.costs.PrivacyUnit`: user, trip, event or landmark), the per-user
contribution bound (:class:`PerUser`; the typed bounds ``MaxTripsPerUser`` ... are its earlier
spellings, deprecated) and the public study :class:`~privmob.domain.Period` (one type, defined
with the other public domains). Every value here is public: it is fixed before any
data is read and never derived from the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from privmob.domain import Period as Period
from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, zcdp_to_epsilon
from privmob.privacy.costs import PrivacyUnit as PrivacyUnit


@dataclass(frozen=True)
class PureDP:
    """A total budget of epsilon-DP."""

    epsilon: float

    def as_cost(self) -> Cost:
        return Cost.pure(self.epsilon)


@dataclass(frozen=True)
class ApproxDP:
    """A total budget of (epsilon, delta)-DP."""

    epsilon: float
    delta: float

    def as_cost(self) -> Cost:
        return Cost.approx(self.epsilon, self.delta)


@dataclass(frozen=True)
class RhoZCDP:
    """A total budget of rho-zCDP, kept in the ledger as (epsilon, delta)-DP at ``delta``."""

    rho: float
    delta: float = 1e-9

    def as_cost(self) -> Cost:
        if not self.delta > 0:
            raise ConfigError("a rho-zCDP budget needs delta > 0 to be stated as (epsilon, delta)")
        return Cost(zcdp_to_epsilon(self.rho, self.delta), self.delta, rho=self.rho)


Budget = PureDP | ApproxDP | RhoZCDP


def budget_cost(budget: Budget | float | None) -> Cost | None:
    """The total budget as a :class:`Cost` (a bare number is pure epsilon-DP)."""
    if budget is None:
        return None
    if isinstance(budget, PureDP | ApproxDP | RhoZCDP):
        return budget.as_cost()
    if isinstance(budget, int | float) and not isinstance(budget, bool):
        return Cost.pure(float(budget))
    raise ConfigError(
        f"cannot use {type(budget).__name__} as a budget", hint="use pm.PureDP(10) or a number"
    )


# -- contribution bounds -------------------------------------------------------------------
#: what a user contributes units of (:class:`PerUser`): the records a release bounds
UNITS = ("trips", "records", "trip-points", "events", "visits")


@dataclass(frozen=True)
class PerUser:
    """The most one user contributes to a release: ``bound`` units, enforced before counting
    (a keyed random sample), the one bound of every release (``per_user=`` of each
    :class:`~privmob.session.Session` method; the command line's ``-T`` is this bound in the
    kind's unit). ``bound``: a whole number >= 1, or ``"auto"`` where the release chooses it
    privately (``od``, ``counts``). ``unit``: one of :data:`UNITS`, the one the release
    bounds: ``"trips"`` (``od``, ``report``), ``"records"`` or what ``counts`` counts
    (``"trips"``, ``"trip-points"``, ``"events"``), ``"visits"`` ((tower, hour) visits in
    ``density``'s week), ``"events"`` (per time bin of ``series_counts``). Public: fixed
    before any data is read, stated in ``metadata.json``'s ``privacy.bounds``."""

    bound: int | Literal["auto"]
    unit: str

    def __post_init__(self) -> None:
        b = self.bound
        if b != "auto" and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise ConfigError(
                f"a per-user bound is a whole number >= 1 or 'auto', got {b!r}",
                hint='e.g. pm.PerUser(10, "trips")',
            )
        if self.unit not in UNITS:
            raise ConfigError(
                f"unknown unit of a per-user bound {self.unit!r}",
                hint=f"one of {', '.join(UNITS)}",
            )


@dataclass(frozen=True)
class _Bound:
    value: int
    #: the release option this bound sets
    name = ""

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or int(self.value) != self.value or self.value < 1:
            raise ConfigError(
                f"{type(self).__name__} must be a whole number >= 1, got {self.value}"
            )


@dataclass(frozen=True)
class MaxTripsPerUser(_Bound):
    """Most trips counted per user (OD matrix: over the release, or per period)."""

    name = "max_trips"


@dataclass(frozen=True)
class MaxVisitsPerHour(_Bound):
    """Most visits counted per user and hour (``series_counts``' ``max_per_bin`` for hourly
    bins)."""

    name = "max_per_bin"


@dataclass(frozen=True)
class MaxVisitsPerWeek(_Bound):
    """Most (tower, hour) visits counted per user in the week (``density``' ``max_visits``)."""

    name = "max_visits"


@dataclass(frozen=True)
class MaxEventsPerBin(_Bound):
    """Most events counted per user and time bin (zone series)."""

    name = "max_per_bin"


def bound_value(bound: _Bound | int | None, expected: type[_Bound]) -> int | None:
    """The integer of a typed bound; a bound of another type is refused (it means another thing)."""
    if bound is None:
        return None
    if isinstance(bound, _Bound):
        if not isinstance(bound, expected):
            raise ConfigError(
                f"{type(bound).__name__} does not bound this release",
                hint=f"use {expected.__name__}",
            )
        return int(bound.value)
    return int(expected(bound).value)


# -- the public study period ---------------------------------------------------------------
def as_period(period: Period | None) -> Period:
    if period is None:
        return Period()
    if not isinstance(period, Period):
        raise ConfigError(
            f"cannot use {type(period).__name__} as a period",
            hint='use pm.Period("2024-01-01", "2024-02-01", bin="day")',
        )
    return period
