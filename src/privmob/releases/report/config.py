"""Public parameters of a DP mobility report (SPEC 4.2): everything that shapes the output is
declared here, before any data is read — the study period, the histogram ranges, the time
windows, the contribution bound M, the unit of privacy and the budget split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Required, TypedDict

from privmob.domain import check_order, parse_date
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.privacy.bound_choice import BoundChoice
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind
from privmob.privacy.quantiles import Bins
from privmob.releases.kinds import same_tile_flag
from privmob.surface import spelled

from .compositions import resolve_composition


class BuildOptions(TypedDict, total=False):
    """The keywords of :meth:`ReportConfig.build` (``epsilon``, ``max_trips`` and ``period``
    required)."""

    epsilon: Required[float]
    max_trips: Required[int | str | None]
    period: Required[tuple[str | date | datetime | None, str | date | datetime | None] | None]
    unit: PrivacyUnit | str
    analyses: Sequence[str] | None
    weights: Mapping[str, float] | None
    ranges: Mapping[str, tuple[float, float, float]] | None
    time_windows: Sequence[int] | None
    noise_kind: NoiseKind | str
    quantile_share: float
    same_tile: str
    composition: str
    delta: float | None
    od_cell_cap: int | None
    bound_choice: BoundChoice | None
    hierarchy: str | Sequence[str] | None
    hierarchy_weights: Mapping[str, float] | None


# analyses that release a histogram over declared bins plus a DP five-number summary
DISTRIBUTIONS: tuple[str, ...] = (
    "travel_time",
    "jump_length",
    "trips_per_user",
    "time_between_trips",
    "radius_of_gyration",
    "user_tile_count",
    "mobility_entropy",
)

# the 15 analyses of dp_mobility_report, in report order: the count vectors, then the
# distributions
ANALYSES: tuple[str, ...] = (
    "dataset_statistics",
    "missing_values",
    "trips_over_time",
    "trips_per_weekday",
    "trips_per_hour",
    "visits_per_tile",
    "visits_per_time_tile",
    "od_flows",
    *DISTRIBUTIONS,
)

# documented default histogram ranges (lo, hi, width) and their units
DEFAULT_RANGES: dict[str, tuple[float, float, float]] = {
    "travel_time": (0.0, 180.0, 5.0),  # minutes
    "jump_length": (0.0, 30.0, 1.0),  # km
    "time_between_trips": (0.0, 72.0, 2.0),  # hours
    "radius_of_gyration": (0.0, 30.0, 1.0),  # km
    "mobility_entropy": (0.0, 1.0, 0.05),  # normalised Shannon entropy
}
UNITS: dict[str, str] = {
    "travel_time": "minutes",
    "jump_length": "km",
    "time_between_trips": "hours",
    "radius_of_gyration": "km",
    "mobility_entropy": "normalised entropy",
    "trips_per_user": "trips",
    "user_tile_count": "tiles",
}

#: analyses of a person's own trips (their number, the gaps between them, where and how widely
#: the person moves): a trip-level report leaves them out before the budget is split, from the
#: public unit alone (nothing about the data), and says why (:attr:`ReportConfig.omitted`)
PER_USER_ANALYSES: tuple[str, ...] = (
    "trips_per_user",
    "time_between_trips",
    "radius_of_gyration",
    "user_tile_count",
    "mobility_entropy",
)
#: why a trip-level report leaves out :data:`PER_USER_ANALYSES`
NEEDS_A_RIDER = "needs a rider id; this report's unit is the trip"

DEFAULT_TIME_WINDOWS: tuple[int, ...] = (2, 6, 10, 14, 18, 22)
MISSING_COLUMNS: tuple[str, ...] = ("datetime", "lat", "lng")


def _to_datetime(value: str | date | datetime | None) -> datetime:
    parsed = parse_date(value)
    if parsed is None:
        raise ConfigError(
            "the mobility report needs a declared study period: a start and an end date",
            hint='--start 2024-01-01 --end 2024-02-01, or period=pm.Period("2024-01-01", '
            '"2024-02-01") (public dates, never taken from the data)',
        )
    return parsed


def _number(value: object, what: str) -> float:
    try:
        return float(value)  # type: ignore[arg-type]  # refused below when not a number
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the {what}: {value!r}") from exc


def _whole(value: object, what: str) -> int:
    number = _number(value, what)
    if not number.is_integer():
        raise ConfigError(f"the {what} must be a whole number, got {value!r}")
    return int(number)


def _range(name: str, value: Sequence[float]) -> tuple[float, float, float]:
    """A declared histogram range ``(lo, hi, width)``."""
    if isinstance(value, str) or len(value) != 3:
        raise ConfigError(
            f"the range of {name} is (lo, hi, width), got {value!r}", hint="e.g. (0, 120, 5)"
        )
    lo, hi, width = (_number(x, f"range of {name}") for x in value)
    return lo, hi, width


def _fixed(max_trips: int | str | None) -> int | None:
    """A bound given as a number (``"auto"`` is :class:`BoundChoice`'s)."""
    return None if max_trips is None else _whole(max_trips, "bound per user")


def _levels(hierarchy: str | Sequence[str] | None) -> tuple[str, ...]:
    """``hierarchy`` as the config holds it (the hierarchy's modules only when there is one:
    not before a report's plan without it)."""
    if not hierarchy:
        return ()
    from privmob.releases.hierarchy import spellings

    return spellings(hierarchy)


def report_bound(max_trips: int | None, unit: PrivacyUnit) -> int:
    """The most trips kept per user (M): required for user-level privacy (it sets the noise
    scale), 1 at trip level when not given."""
    if max_trips is not None:
        return int(max_trips)
    if unit is PrivacyUnit.USER:
        raise ConfigError(
            "user-level privacy needs max_trips (-T/--max-trips), the most trips counted per user",
            hint="a public bound, never taken from the data; it sets the noise scale "
            "(or unit trip: each trip protected, no bound needed)",
        )
    return 1


@dataclass(frozen=True)
class ReportConfig:
    """Declared parameters of a mobility report.

    ``period`` is [start, end): trips starting outside it go to the outliers cell of
    *trips over time* and are left out of the other analyses. ``max_trips`` (M) is enforced by
    sampling before aggregation; there is no data-dependent default. ``weights`` split epsilon
    over the selected analyses (missing weights count 1); at trip level the per-user analyses
    (:data:`PER_USER_ANALYSES`) are left out first (:attr:`omitted`), so the whole epsilon goes
    to the others. ``quantile_share`` is the share of a
    distribution analysis' epsilon spent on its five-number summary.
    """

    epsilon: float
    max_trips: int
    period: tuple[datetime, datetime]
    unit: PrivacyUnit = PrivacyUnit.USER
    analyses: tuple[str, ...] = ANALYSES
    weights: dict[str, float] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    time_windows: tuple[int, ...] = DEFAULT_TIME_WINDOWS
    noise_kind: NoiseKind = NoiseKind.DISCRETE_LAPLACE
    quantile_share: float = 0.5
    confidence: float = 0.95
    #: trips within one tile in od_flows: the rule of ``od`` (privmob.releases.kinds)
    same_tile: str = "exclude"
    #: 95% margins asked per analysis, solved into ``weights`` (:func:`.split.build_config`)
    target_margins: dict[str, float] = field(default_factory=dict)
    #: "auto" (zCDP with a delta, pure without), "pure" or "zcdp" (:mod:`.composition`)
    composition: str = "auto"
    delta: float = 0.0
    #: the most trips of one user counted in any one OD cell of od_flows (None: no cap of its
    #: own); enforced before counting, it lowers od_flows' L2 sensitivity (zCDP only)
    od_cell_cap: int | None = None
    #: M chosen privately (``max_trips="auto"``): how (:mod:`privmob.privacy.bound_choice`),
    #: and the epsilon of the choice; ``epsilon`` is then the analyses' rest of the total and
    #: ``max_trips`` the largest candidate until the bound is chosen (:meth:`at_bound`)
    bound_choice: BoundChoice | None = None
    bound_epsilon: float = 0.0
    #: coarser public levels of the tiles for od_flows, coarsest first (a column of the
    #: tessellation such as ``borough``, or ``h3:<resolution>``): od_flows' epsilon is split
    #: across the levels and the consistent estimates released (:mod:`.levels`); () none
    hierarchy: tuple[str, ...] = ()
    #: the weight of each level in od_flows' split (``tile``: the finest); () the default split
    hierarchy_weights: tuple[tuple[str, float], ...] = ()

    @classmethod
    def build(
        cls,
        *,
        epsilon: float,
        max_trips: int | str | None,
        period: tuple[str | date | datetime | None, str | date | datetime | None] | None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        analyses: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
        ranges: Mapping[str, tuple[float, float, float]] | None = None,
        time_windows: Sequence[int] | None = None,
        noise_kind: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        quantile_share: float = 0.5,
        same_tile: str = "exclude",
        composition: str = "auto",
        delta: float | None = None,
        od_cell_cap: int | None = None,
        bound_choice: BoundChoice | None = None,
        hierarchy: str | Sequence[str] | None = None,
        hierarchy_weights: Mapping[str, float] | None = None,
    ) -> ReportConfig:
        """The config from plain values (the Session's keywords and the command's options):
        ``max_trips`` None is 1 at trip level and refused at user level; ``period`` is
        ``(start, end)``; ``weights`` per analysis (missing: 1); ``ranges`` per histogram
        ``(lo, hi, width)``; ``time_windows`` the hours that start the windows (with target
        margins: :func:`~.split.build_config`); ``max_trips="auto"``: chosen privately as
        ``bound_choice`` says (default :class:`~privmob.privacy.bound_choice.BoundChoice`)."""
        from privmob.releases.bound_choice import chosen

        start, end = period if period is not None else (None, None)
        unit = PrivacyUnit(unit)
        choice = chosen(max_trips, bound_choice)
        if choice is not None and not choice.auto:
            raise ConfigError(
                "the mobility report does not rescale its counts",
                hint=spelled("leave out --rescale", "leave out rescale="),
            )
        eps_choice, _, eps_rest = choice.epsilons(float(epsilon)) if choice else (0.0, 0.0, 0.0)
        return cls(
            epsilon=eps_rest if choice else float(epsilon),
            bound_choice=choice,
            bound_epsilon=eps_choice,
            max_trips=choice.max_bound if choice else report_bound(_fixed(max_trips), unit),
            period=(_to_datetime(start), _to_datetime(end)),
            unit=unit,
            analyses=tuple(analyses) if analyses else ANALYSES,
            weights={
                str(a): _number(w, f"budget weight of {a}") for a, w in (weights or {}).items()
            },
            ranges={str(a): _range(a, r) for a, r in (ranges or {}).items()},
            time_windows=tuple(int(h) for h in (time_windows or DEFAULT_TIME_WINDOWS)),
            noise_kind=NoiseKind(noise_kind),
            quantile_share=float(quantile_share),
            same_tile=same_tile,
            composition=str(composition),
            delta=_number(delta or 0.0, "delta"),
            od_cell_cap=None if od_cell_cap is None else _whole(od_cell_cap, "OD cell cap"),
            hierarchy=_levels(hierarchy),
            hierarchy_weights=tuple(
                (str(k), _number(v, f"weight of level {k}"))
                for k, v in (hierarchy_weights or {}).items()
            ),
        )

    def __post_init__(self) -> None:
        same_tile_flag(self.same_tile)  # a known rule
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if self.max_trips < 1:
            raise ConfigError(
                "max trips per user (M) must be declared and >= 1",
                hint="there is no data-dependent default: pass "
                + spelled("--max-trips", "max_trips="),
            )
        if self.unit not in (PrivacyUnit.USER, PrivacyUnit.TRIP):
            raise ConfigError(f"a mobility report protects a user or a trip, not {self.unit}")
        check_order(*self.period)
        unknown = [a for a in self.analyses if a not in ANALYSES]
        if unknown or not self.analyses:
            raise ConfigError(
                f"unknown analyses: {unknown}", hint="choose from: " + ", ".join(ANALYSES)
            )
        if not self.selected:
            raise ConfigError(
                f"every analysis asked for ({', '.join(self.analyses)}) {NEEDS_A_RIDER}",
                hint="choose from: " + ", ".join(a for a in ANALYSES if a not in PER_USER_ANALYSES),
            )
        bad_w = [a for a, w in self.weights.items() if a not in ANALYSES or not w > 0]
        if bad_w:
            raise ConfigError(f"budget weights must name analyses and be > 0: {bad_w}")
        tw = self.time_windows
        if len(tw) < 2 or list(tw) != sorted(set(tw)) or tw[0] < 0 or tw[-1] > 23:
            raise ConfigError("time windows must be increasing hours in 0..23, at least two")
        if self.noise_kind.traits.zcdp:
            raise ConfigError("the mobility report uses Laplace noise (pure epsilon-DP)")
        if not 0 < self.quantile_share < 1:
            raise ConfigError("quantile_share must be in (0, 1)")
        for name in self.ranges:
            if name not in DEFAULT_RANGES:
                raise ConfigError(f"no declared range for {name!r}")
        resolve_composition(self.composition, self.delta)  # known, with a delta it can use
        self._check_od_cell_cap()
        self._check_hierarchy()
        if self.bound_choice is not None and self.unit is not PrivacyUnit.USER:
            raise ConfigError(
                "a bound chosen privately (auto) needs user-level privacy",
                hint="use --unit user (a trip-level report keeps one trip per unit)",
            )

    @property
    def total_epsilon(self) -> float:
        """The whole report's epsilon: the analyses' and, with a chosen bound, the choice's
        (they add up to the epsilon given, exactly: :meth:`BoundChoice.epsilons`)."""
        return self.bound_epsilon + self.epsilon

    def at_bound(self, max_trips: int) -> ReportConfig:
        """This config with the bound chosen (``max_trips``, 1..the largest candidate)."""
        if self.bound_choice is None or not 1 <= max_trips <= self.bound_choice.max_bound:
            raise ValueError(f"no bound to choose, or {max_trips} is not a candidate")
        return replace(self, max_trips=int(max_trips))

    def _check_od_cell_cap(self) -> None:
        """A per-cell cap of od_flows only where it lowers a sensitivity the noise uses: user
        level, od_flows released, zCDP composition (pure epsilon noise reads the L1 bound,
        which the cap leaves at M: there it would only drop trips)."""
        cap = self.od_cell_cap
        if cap is None:
            return
        flag = spelled("--od-cell-cap", "od_cell_cap=")
        if cap < 1:
            raise ConfigError(f"the OD cell cap ({flag}) must be a whole number >= 1, got {cap}")
        if self.unit is not PrivacyUnit.USER:
            raise ConfigError(
                f"{flag} caps one user's trips per OD cell: it needs user-level privacy",
                hint="a trip-level report counts each trip once already",
            )
        if "od_flows" not in self.selected:
            raise ConfigError(f"{flag} caps od_flows, which this report does not release")
        if resolve_composition(self.composition, self.delta)[0] == "pure":
            raise ConfigError(
                f"{flag} lowers od_flows' L2 sensitivity, which only Gaussian noise under zCDP "
                "composition uses; with pure epsilon it would only drop trips",
                hint=spelled("add --delta (e.g. 1e-6)", "add delta= (e.g. 1e-6)"),
            )

    def _check_hierarchy(self) -> None:
        """od_flows over a hierarchy: od_flows released, pure epsilon composition (its
        Laplace noise split across the levels), a fixed bound, the split given as weights.
        From public parameters alone; the levels themselves are read from the tessellation
        by the plan (:meth:`~.spec.ReportSpec.plan`), before any data."""
        if self.hierarchy_weights and not self.hierarchy:
            raise ConfigError(
                "the hierarchy's weights split od_flows' budget across its levels: there are none",
                hint=spelled("add --hierarchy borough", 'add hierarchy="borough"')
                + " (a column of the tessellation), or leave out the weights",
            )
        if not self.hierarchy:
            return
        flag = spelled("--hierarchy", "hierarchy=")
        if "od_flows" not in self.selected:
            raise ConfigError(f"{flag} releases od_flows at coarser levels: this report has none")
        if resolve_composition(self.composition, self.delta)[0] != "pure":
            raise ConfigError(
                f"{flag} splits od_flows' Laplace noise across the levels: not offered under "
                "zCDP composition yet (nor with --od-cell-cap, which needs it)",
                hint=spelled(
                    "leave out --delta and --composition zcdp, or leave out --hierarchy",
                    'leave out delta= and composition="zcdp", or leave out hierarchy=',
                ),
            )
        if self.bound_choice is not None:
            raise ConfigError(
                f"a bound chosen privately is not offered with {flag} yet",
                hint=spelled(
                    "give a fixed --max-trips, or leave out --hierarchy",
                    "give a fixed per_user=, or leave out hierarchy=",
                ),
            )
        if self.target_margins:
            raise ConfigError(
                f"target margins are not solved with {flag} yet (od_flows' margin then "
                "depends on the split across the levels)",
                hint=spelled(
                    "give the split as --budget-split, or leave out --hierarchy",
                    "give the split as weights=, or leave out hierarchy=",
                ),
            )

    # -- derived public parameters ----------------------------------------------------
    @property
    def selected(self) -> tuple[str, ...]:
        """The analyses released, in report order: those asked for, less :attr:`omitted`."""
        return tuple(a for a in ANALYSES if a in self.analyses and a not in self.omitted)

    @property
    def omitted(self) -> dict[str, str]:
        """The analyses asked for but left out, with the reason: at trip level the per-user
        ones (:data:`PER_USER_ANALYSES`), decided from the public unit alone."""
        if self.unit is not PrivacyUnit.TRIP:
            return {}
        return {a: NEEDS_A_RIDER for a in ANALYSES if a in self.analyses and a in PER_USER_ANALYSES}

    def epsilon_for(self, analysis: str) -> float:
        total = sum(self.weights.get(a, 1.0) for a in self.selected)
        return self.epsilon * self.weights.get(analysis, 1.0) / total

    def bins(self, analysis: str) -> Bins:
        if analysis == "trips_per_user":
            return Bins(1.0, float(self.max_trips + 1), 1.0)
        if analysis == "user_tile_count":
            return Bins(1.0, float(2 * self.max_trips + 1), 1.0)
        lo, hi, width = self.ranges.get(analysis, DEFAULT_RANGES[analysis])
        return Bins(float(lo), float(hi), float(width))

    @property
    def time_resolution(self) -> str:
        """Bins of *trips over time*: chosen from the declared period length only."""
        days = (self.period[1] - self.period[0]).total_seconds() / 86400
        if days <= 92:
            return "day"
        if days <= 2 * 366:
            return "week"
        return "month"

    @property
    def window_labels(self) -> list[str]:
        tw = self.time_windows
        return [f"{tw[i]:02d}-{tw[(i + 1) % len(tw)]:02d}" for i in range(len(tw))]

    def _composition_dict(self) -> JSONObject:
        """zCDP only (a pure report's parameters are what they were before zCDP existed)."""
        how, delta = resolve_composition(self.composition, self.delta)
        cap: JSONObject = {} if self.od_cell_cap is None else {"od_cell_cap": self.od_cell_cap}
        return {"composition": how, "delta": delta, **cap} if how == "zcdp" else {}

    def to_dict(self) -> JSONObject:
        omitted: JSONObject = (
            {
                "omitted_analyses": dict(self.omitted),
                "budget_split": "the budget is split over the released analyses only; the left-out "
                "ones take none of it",
            }
            if self.omitted
            else {}
        )
        chosen: JSONObject = (
            {}
            if self.bound_choice is None
            else {"bound_choice": self.bound_choice.to_dict(self.total_epsilon)}
        )
        return {
            "epsilon": self.total_epsilon,
            "max_trips_per_user": self.max_trips,
            "unit": self.unit.value,
            "period": [self.period[0].isoformat(), self.period[1].isoformat()],
            "analyses": list(self.selected),
            "weights": {a: self.weights.get(a, 1.0) for a in self.selected},
            "time_windows": list(self.time_windows),
            "noise": self.noise_kind.value,
            "quantile_share": self.quantile_share,
            "confidence": self.confidence,
            "time_resolution": self.time_resolution,
            "ranges": {a: self.bins(a).to_dict() for a in DISTRIBUTIONS},
            "same_tile": self.same_tile,
            **({"target_margins": dict(self.target_margins)} if self.target_margins else {}),
            **omitted,
            **self._composition_dict(),
            **chosen,
            **({"hierarchy": list(self.hierarchy)} if self.hierarchy else {}),
            **(
                {"hierarchy_weights": dict(self.hierarchy_weights)}
                if self.hierarchy_weights
                else {}
            ),
        }
