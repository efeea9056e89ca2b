"""Counts per zone and time bin from raw events, for landmark-private publication.

The engine bins each event into the public grid of time bins [start, end) and the public
tessellation, keeps at most ``max_per_bin`` events per user per bin (a keyed-hash sample:
the choice for one user depends only on that user's records and a fresh key), and counts.
That bound, enforced here before aggregation, is the sensitivity per timestamp of the series
(L1 over zones): one user's events at one timestamp change the column by at most
``max_per_bin``. Events outside the tessellation are counted in an extra ``outside`` zone.

Events outside the declared period (SPEC 1, invariant 1) are summed into ONE noisy
``outliers`` cell. They are bounded like a bin: all of a user's out-of-period events form one
extra group, of which at most ``max_per_bin`` are kept (keyed hash), so one user changes the
cell by at most ``max_per_bin`` whatever they did outside the period. The cell has its own
budget ``outliers_epsilon`` (public, default ``OUTLIERS_SHARE`` x epsilon) and is composed
sequentially with the series: the series alone still satisfies the landmark theorem with
epsilon (checked on its per-timestamp budgets), and the release costs
epsilon + outliers_epsilon in the scheme's unit, charged as two ledger entries. The driver
sees only the dense zones x bins matrix and the one outliers count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, cast

from privmob.domain import Period, time_grid
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import np, pd
from privmob.privacy.costs import Cost
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.counts import (
    CountDomain,
    CountSpec,
    EnforcedBound,
    count_draft,
    count_release,
    exact_cells,
)
from privmob.releases.gate import Draft
from privmob.releases.landmark import AdaptiveRule, Scheme, scheme_budgets
from privmob.releases.landmark.release import (
    LandmarkNoise,
    NoisySeries,
    series_header,
    series_release,
)
from privmob.releases.release import Release
from privmob.releases.specs import LandmarkGuarantee, Plan, Progress
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.data.tessellation import Tessellation

OUTSIDE = "outside"
OUTLIERS_SHARE = 0.1  # default budget of the outliers cell, as a share of epsilon


def outliers_epsilon_for(epsilon: float, outliers_epsilon: float | None) -> float:
    """The outliers cell's budget: the given one (> 0) or ``OUTLIERS_SHARE`` x epsilon."""
    value = OUTLIERS_SHARE * epsilon if outliers_epsilon is None else float(outliers_epsilon)
    if not (value > 0 and np.isfinite(value)):
        raise ConfigError(
            f"the outliers cell needs a budget > 0, got {value}",
            hint=f"{spelled('--outliers-epsilon', 'outliers_epsilon=')} must be a positive "
            "number (SPEC 1: it is always released)",
        )
    return value


def zone_counts_spec(
    tile_ids: Sequence[object], grid: pd.DatetimeIndex, max_per_bin: int, epsilon: float = 1.0
) -> CountSpec:
    """The count template's spec of a zone series: events counted by ``zone`` (the tiles and
    ``outside``) x ``bin`` (the bins of ``grid``), at most ``max_per_bin`` per user and bin
    (the events outside the period: one more group, the outliers cell). Its domain is the
    series' (and its plan's cells and memory); its noise is not used: the series is published
    under its landmark scheme (:func:`publish_series`)."""
    if len(grid) < 2:
        raise ConfigError("a series needs at least two time bins")
    width = grid[1] - grid[0]
    period = Period(grid[0].to_pydatetime(), (grid[-1] + width).to_pydatetime())
    from pandas.tseries.frequencies import to_offset

    from privmob.releases.dimensions import Named, TimeBins

    length = to_offset(width).freqstr
    return CountSpec(
        cast("Tessellation", _Zones(list(tile_ids))),  # all the template reads of the tiles
        epsilon,
        "events",
        (Named("zone"), TimeBins(length)),
        max_per_bin,
        period=period,
        kind="series-counts",
        bound_per="bin",
    )


@dataclass(frozen=True)
class _Zones:
    """The tiles a zone series counts over (what the count template reads of a tessellation)."""

    tile_ids: list[object]

    @property
    def k(self) -> int:
        return len(self.tile_ids)


@dataclass(frozen=True)
class _LandmarkCells:
    """The landmark series mechanism as the count template's noise step: the zone x bin
    cells as a series per zone, then the outliers cell (its own budget)."""

    mechanism: LandmarkNoise

    @property
    def kind(self) -> str:
        return self.mechanism.description

    def start(
        self, domain: CountDomain, r: Randomness
    ) -> Callable[[npt.NDArray[np.int64]], NoisySeries]:
        def finish(exact: npt.NDArray[np.int64]) -> NoisySeries:
            return self.mechanism.noised(exact[:-1].reshape(domain.shape), int(exact[-1]), r)

        return finish


@dataclass(frozen=True)
class ZoneSeries:
    """The zone series as a kind of the count template (:func:`count_release`): events by
    zone x time bin (``grid``), at most ``max_per_bin`` per user and bin (one key for every
    user bucket), noised by the landmark mechanism (:class:`_LandmarkCells`) and published
    as :func:`~privmob.releases.landmark.publish_series` does; its cost has two parts (the
    series, the outliers cell). See :func:`publish_zone_counts` for its guarantee."""

    tile_ids: tuple[object, ...]
    grid: pd.DatetimeIndex
    max_per_bin: int
    landmarks: tuple[int, ...] = ()
    epsilon: float = 1.0
    scheme: Scheme = Scheme.UNIFORM
    rule: AdaptiveRule | None = None
    outliers_epsilon: float | None = None
    kind: str = "series-counts"
    records: str = "events"

    @cached_property
    def counts(self) -> CountSpec:
        """Its domain and bound as the count template's spec."""
        return zone_counts_spec(self.tile_ids, self.grid, self.max_per_bin, self.epsilon)

    @cached_property
    def calibrated(self) -> tuple[_LandmarkCells, Cost]:
        mechanism = LandmarkNoise(
            self.landmarks,
            self.epsilon,
            Scheme(self.scheme),
            float(self.max_per_bin),
            integer=True,
            rule=self.rule,
            outliers_epsilon=outliers_epsilon_for(self.epsilon, self.outliers_epsilon),
        )
        return _LandmarkCells(mechanism), mechanism.cost

    def count_domain(self) -> CountDomain:
        return self.counts.count_domain()

    def per_user(self, group_size: int | None) -> EnforcedBound:
        return dataclasses.replace(self.counts.user_bound(), one_key=True)

    #: no value is summed beside this kind's counts
    value: ClassVar[None] = None

    def counted(self, data: object) -> Loaded:
        return cast("Loaded", data)

    def rows_sql(self, part: Loaded) -> str:
        return self.counts.rows_sql(part)

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        return ("uid", "time", "tile"), None  # user buckets keep what the series reads

    def publish(
        self,
        noisy: NoisySeries | None,
        noise: _LandmarkCells,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        m = self.max_per_bin
        note = (
            f"each user keeps at most {m} event(s) per time bin (keyed-hash sample), "
            f"enforced by the engine before counting; at most {m} event(s) per user "
            "outside the period in all (outliers cell)"
        )
        zones = [*(str(t) for t in self.tile_ids), OUTSIDE]  # one type for Parquet
        if noisy is None:  # integer counts: discrete Laplace (the mechanism's integer=True)
            release = series_header(
                noise.mechanism,
                r,
                NoiseKind.DISCRETE_LAPLACE,
                len(self.grid),
                len(zones),
                sensitivity_note=note,
                kind=self.kind,
            )
        else:
            release = series_release(
                noisy,
                noise.mechanism,
                r,
                timestamps=list(self.grid),
                zones=zones,
                kind=self.kind,
                sensitivity_note=note,
            )
        return release, noise.mechanism.description


def bounded_zone_counts(
    events: Loaded,
    *,
    tiles: int,
    grid: pd.DatetimeIndex,
    max_per_bin: int,
    rng: Randomness | None = None,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
) -> tuple[npt.NDArray[np.int64], int]:
    """Exact bounded counts, shape (tiles + 1, bins) (the last row is ``outside``), and the
    bounded number of events outside the period (at most ``max_per_bin`` per user in all):
    the count template's counting step (:func:`privmob.releases.counts.exact_cells`) of
    :class:`ZoneSeries`.

    Never publish these: they are the input of the noise. Out of core: with a memory limit on
    the engine the users are split into hash buckets (:mod:`privmob.engine.buckets`); the
    bounding is per user and bin with one key, so the summed bucket counts equal the
    single-pass counts.
    """
    kind = ZoneSeries(tuple(range(tiles)), grid, max_per_bin)
    domain = kind.count_domain()
    dense = exact_cells(
        events, kind, domain, kind.per_user(None), resolve(rng), buckets=buckets, step=step
    )
    return dense[:-1].reshape(domain.shape), int(dense[-1])


def publish_zone_counts(
    events: Loaded,
    *,
    tile_ids: Sequence[object],
    grid: pd.DatetimeIndex,
    max_per_bin: int,
    landmarks: Sequence[int],
    epsilon: float,
    scheme: Scheme | str,
    accountant: Accountant,
    rng: RandomnessLike = None,
    rule: AdaptiveRule | None = None,
    outliers_epsilon: float | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Counts per zone and time bin, published under landmark epsilon-privacy, plus one noisy
    cell of the events outside the period: :class:`ZoneSeries` run by the count template.

    Guarantee: the series as :func:`privmob.releases.landmark.publish_series` with sensitivity
    ``max_per_bin``, which the engine enforces per user and bin before counting (landmark
    epsilon-privacy; the theorem is checked on the budgets). The outliers cell (events outside
    the period, at most ``max_per_bin`` per user in all) gets discrete Laplace noise of scale
    max_per_bin / outliers_epsilon: outliers_epsilon-DP for all of a user's out-of-period
    events. By sequential composition the release satisfies landmark
    (epsilon + outliers_epsilon)-privacy in the scheme's unit, which is what the ledger is
    charged (two entries). Landmarks are positions in ``grid`` (public). Zones: the
    tessellation's tiles plus ``outside``.
    """
    kind = ZoneSeries(
        tuple(tile_ids), grid, max_per_bin, tuple(landmarks), epsilon, Scheme(scheme), rule,
        outliers_epsilon,
    )  # fmt: skip
    return count_release(events, kind, accountant, rng=rng, step=step)


@dataclass(frozen=True)
class ZoneSeriesSpec(LandmarkGuarantee):
    """Counts per zone and time bin under landmark privacy (see :func:`publish_zone_counts`):
    bins of ``freq`` over the public ``[start, end)``, landmarks as positions in that grid
    (:meth:`declared` takes them as timestamps too)."""

    tessellation: Tessellation
    epsilon: float
    start: str
    end: str
    freq: str = "1h"
    max_per_bin: int = 1
    landmarks: tuple[int, ...] = ()
    scheme: str = "uniform"
    outliers_epsilon: float | None = None
    kind: str = "series-counts"
    records: ClassVar[str] = "events"

    @classmethod
    def declared(
        cls,
        tessellation: Tessellation,
        *,
        epsilon: float,
        start: str,
        end: str,
        freq: str = "1h",
        max_per_bin: int = 1,
        landmarks: Sequence[int | str | datetime] = (),
        scheme: Scheme | str = Scheme.UNIFORM,
        outliers_epsilon: float | None = None,
    ) -> ZoneSeriesSpec:
        """The spec of ``Session.series_counts`` and ``privmob series-counts``: ``landmarks``
        as positions in the grid (integers) or as its timestamps (text or datetimes)."""
        grid = time_grid(start, end, freq)
        marks = landmark_positions(landmarks, grid)
        return cls(
            tessellation, epsilon, start, end, freq, int(max_per_bin), marks,
            Scheme(scheme).value, outliers_epsilon,
        )  # fmt: skip

    def public_period(self) -> JSONObject:
        """The declared period and its bins (public)."""
        return {"start": self.start, "end": self.end, "bin": self.freq, "bins": len(self.grid)}

    @cached_property
    def grid(self) -> pd.DatetimeIndex:
        return time_grid(self.start, self.end, self.freq)

    def zone_series(self) -> ZoneSeries:
        """The kind of the count template that runs it."""
        return ZoneSeries(
            tuple(self.tessellation.tile_ids), self.grid, self.max_per_bin, self.landmarks,
            self.epsilon, Scheme(self.scheme), outliers_epsilon=self.outliers_epsilon,
        )  # fmt: skip

    def plan(self) -> Plan:
        """``margin_of_error_95`` is that of a bin with the scheme's smallest budget."""
        scheme = Scheme(self.scheme)
        kind = self.zone_series()
        bins = len(self.grid)
        budgets = scheme_budgets(scheme, bins, list(self.landmarks), self.epsilon)
        smallest = float(budgets[budgets > 0].min()) if (budgets > 0).any() else self.epsilon
        dist, _ = calibrate(NoiseKind.DISCRETE_LAPLACE, smallest, l1_sensitivity=self.max_per_bin)
        domain: Plan = kind.counts.plan()
        return dataclasses.replace(  # the template's domain, cells and memory; landmark noise
            domain,
            cost=kind.calibrated[1],
            margin_of_error_95=float(dist.margin_of_error(0.95)),
            noise=str(dist.kind),
            parts=2,
        )

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Progress
    ) -> Draft:
        from privmob.releases.tiles import check_tessellation

        check_tessellation(data, self.tessellation)
        return count_draft(data, self.zone_series(), accountant, rng=rng, step=progress)


def landmark_positions(
    landmarks: Sequence[int | str | datetime], grid: pd.DatetimeIndex
) -> tuple[int, ...]:
    """Landmarks as positions in ``grid``: an integer is a position, text or a datetime a
    timestamp of the grid (public: the grid is declared)."""
    at = {ts: i for i, ts in enumerate(grid)}
    out = []
    for mark in landmarks:
        if isinstance(mark, int | np.integer):
            out.append(int(mark))
            continue
        try:
            i = at.get(pd.Timestamp(mark))
        except (ValueError, TypeError):
            i = None
        if i is None:
            raise ConfigError(
                f"landmark '{mark}' is not a bin of the declared period",
                hint="give the start of a bin (e.g. 2024-01-01 06:00), or positions with "
                + spelled("--landmark-positions", "integers in landmarks="),
            )
        out.append(i)
    return tuple(out)
