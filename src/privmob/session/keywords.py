"""The keywords a release method of :class:`~privmob.session.Session` shares with its plan
(``od`` and ``plan_od``, ...), typed once for both; each is documented on the release method.
A keyword left out takes its default (in the comments), as it does on the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from privmob.domain import Period
from privmob.dp import MaxEventsPerBin, MaxVisitsPerHour, PerUser, PrivacyUnit
from privmob.lazy_imports import lazy_module
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.values import Mean

if TYPE_CHECKING:
    from privmob.releases import landmark
else:  # the landmark modules on first use, not before another release's plan (issue 43);
    # typing.get_type_hints reads ``landmark.Scheme`` through it
    landmark = lazy_module("privmob.releases.landmark")


class OdOptions(TypedDict, total=False):
    """``Session.od`` / ``Session.plan_od`` besides ``epsilon`` and ``per_user``."""

    period: Period | None  # None: the whole data as one period
    unit: PrivacyUnit | str  # "user"
    tau: int | None  # None: counts as drawn
    noise: NoiseKind | str  # discrete Laplace
    delta: float  # 0.0
    bound_per: str  # "release"
    same_tile: str  # "exclude"
    unique: bool  # False
    hierarchy: str | Sequence[str]  # (): no coarser levels; "borough": a tessellation column
    hierarchy_weights: Mapping[str, float] | None  # None: the default split across levels
    bound_quantile: float  # with PerUser("auto", "trips"): the quantile of trips per user (0.9)
    bound_share: float  # with PerUser("auto", "trips"): the epsilon's share for the choice (0.1)
    bound_max: int  # the largest candidate bound and the rescale's cap (100)
    rescale: bool  # False; True: counts times a noisy (trips up to bound_max) / (trips kept)
    rescale_share: float  # with rescale: the epsilon's share for its totals (0.05)


class PopulationOptions(TypedDict, total=False):
    """``Session.population`` / ``Session.plan_population`` besides ``epsilon``."""

    period: Period | None  # None: the whole data as one period
    night: tuple[int, int]  # (20, 6)
    noise: NoiseKind | str  # discrete Laplace
    delta: float  # 0.0
    zone_mapping: str  # "contain"


class ReportConfigOptions(TypedDict, total=False):
    """The keywords of ``Session.report`` that its config takes as they are (all of
    :class:`ReportOptions` but the bound's choice)."""

    unit: PrivacyUnit | str  # "user"
    analyses: Sequence[str] | None  # None: all 15
    same_tile: str  # "exclude"
    weights: Mapping[str, float] | None  # None: every analysis weighs 1
    target_margins: Mapping[str, float] | None  # 95% margins asked, solved into the weights
    ranges: Mapping[str, tuple[float, float, float]] | None  # None: the default ranges
    time_windows: Sequence[int] | None  # None: 2, 6, 10, 14, 18, 22
    composition: str  # "auto": zCDP with a delta, pure epsilon without
    delta: float  # 0.0 (pure); with composition="zcdp" and none: 1e-9
    od_cell_cap: int | None  # None; c: at most c trips of a user per OD cell (zCDP only)
    hierarchy: str | Sequence[str] | None  # None; "borough": od_flows at a tessellation column too
    hierarchy_weights: Mapping[str, float] | None  # None: the default split of od_flows' levels


class ReportOptions(ReportConfigOptions, total=False):
    """``Session.report`` / ``Session.plan_report`` besides ``epsilon``, ``period`` and
    ``per_user``."""

    bound_quantile: float  # with PerUser("auto", "trips"): the quantile of trips per user (0.9)
    bound_share: float  # with PerUser("auto", "trips"): the epsilon's share for the choice (0.1)
    bound_max: int  # with PerUser("auto", "trips"): the largest candidate bound (100)


class CountOptions(TypedDict, total=False):
    """``Session.counts`` / ``Session.plan_counts`` besides ``epsilon`` and ``by``."""

    records: str  # "trips"
    per_user: PerUser  # PerUser(1, "records"); PerUser("auto", ...): chosen privately
    max_records: int | str  # deprecated: per_user=PerUser(n, "records")
    bound_quantile: float  # with PerUser("auto", ...): the quantile of records per user (0.9)
    bound_share: float  # with PerUser("auto", ...): the epsilon's share for the choice (0.1)
    bound_max: int  # the largest candidate bound and the rescale's cap (100)
    rescale: bool  # False; True: counts times a noisy (records up to bound_max) / (records kept)
    rescale_share: float  # with rescale: the epsilon's share for its totals (0.05)
    unit: PrivacyUnit | str  # "user"; "trip": each trip once (trips only)
    noise: NoiseKind | str  # discrete Laplace
    delta: float  # 0.0
    period: Period | None  # None: the whole data as one period
    kind: str  # "counts"
    value: Mean | None  # None: counts alone; pm.Mean("duration", 0, 180): and the mean


class ZoneSeriesOptions(TypedDict, total=False):
    """``Session.series_counts`` / ``Session.plan_series_counts`` besides ``epsilon`` and
    ``period``."""

    freq: str  # "1h"
    per_user: PerUser  # PerUser(1, "events"): per user and bin
    max_per_bin: MaxEventsPerBin | MaxVisitsPerHour | int  # deprecated: per_user=
    landmarks: Sequence[int | str | datetime]  # ()
    scheme: landmark.Scheme | str  # uniform
    outliers_epsilon: float | None  # None: 0.1 x epsilon


def refuse_unknown(release: str, given: Mapping[str, object], known: type) -> None:
    """A keyword that ``known`` (one of the typed dicts above) does not name is refused, as
    Python refuses it for a method that lists its keywords."""
    unknown = sorted(set(given) - set(known.__annotations__))
    if unknown:
        raise TypeError(
            f"Session.{release}() or plan_{release}() got an unexpected keyword argument "
            f"{unknown[0]!r}"
        )
