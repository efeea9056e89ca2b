"""Private origin-destination matrices (SPEC 4.1; seed 003, Algorithm 1), a kind of the count
template (:mod:`privmob.releases.counts`).

Data flow: trips -> (user-level) keep at most T trips per user -> exact counts over the public
domain (every ordered pair of tiles in every period, plus outliers cells) -> noise on every
released cell, zeros included (the diagonal, trips within one tile, is released only with
``same_tile="include"``) -> (optional) suppress below tau -> charge the ledger -> output. The
template runs it; :class:`OdSpec` supplies what is the OD release's own: its dimensions
(period, origin, destination), the outliers cell of each period, the same-tile rule, the
bound (per release, per period, or a trip-level group size) and its tables and metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, cast

from privmob.domain import Period
from privmob.engine.buckets import root
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import np, pd
from privmob.privacy.bound_choice import BoundChoice
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.postprocess import check_tau, suppress
from privmob.privacy.postprocess import describe as describe_post
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.privacy.signal import expected_signal, signal_check
from privmob.releases.base import Accountant
from privmob.releases.bound_choice import checked_choice, chosen_plan
from privmob.releases.counts import (
    CountDomain,
    EnforcedBound,
    count_release,
    exact_cells,
    template_draft,
)
from privmob.releases.dimensions import dimension
from privmob.releases.gate import Draft
from privmob.releases.kinds import SAME_TILE_RULES, same_tile_flag
from privmob.releases.plan import Plan, PlannedOnce, domain_memory
from privmob.releases.release import Release
from privmob.releases.tiles import check_input
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.data.tessellation import Tessellation
    from privmob.releases.hierarchy import LevelsNoise, LevelsNoisy, OdTree, ZoneLevels

Step = Callable[[str], None]


@dataclass(frozen=True)
class ODDomain:
    """The public domain: ``n_periods`` x k x k OD cells, one outliers cell per period (an end
    outside the tessellation) and one for trips outside the declared study period. Fixed from
    public parameters only. ``same_tile``: the diagonal (trips that start and end in one tile)
    is released; by default it is not (:data:`SAME_TILE_RULES`)."""

    k: int
    n_periods: int
    same_tile: bool = False

    @property
    def od_cells(self) -> int:
        """The released OD cells (without the outliers cells)."""
        return self.n_periods * self.k * (self.k - (0 if self.same_tile else 1))

    @property
    def od_size(self) -> int:
        return self.n_periods * self.k * self.k

    @property
    def size(self) -> int:
        return self.od_size + self.n_periods + 1

    @property
    def released_cells(self) -> int:
        return self.od_cells + self.n_periods + 1

    def count_domain(self, period: Period, tile_ids: list[object] | None = None) -> CountDomain:
        """This domain in the count template's terms: dimensions period x origin x
        destination (row-major), the outliers cells split by period, the diagonal not
        released unless ``same_tile``."""
        ids = list(range(self.k)) if tile_ids is None else tile_ids
        dims = tuple(dimension(name, ids, period) for name in ("period", "origin", "destination"))
        diagonal = None if self.same_tile else ("origin", "destination")
        return CountDomain(dims, "start_time", self.k, None, 1, diagonal)


@dataclass(frozen=True)
class TripRows:
    """The trips an OD release counts, as the template's cell SQL reads them: each trip's
    user, id, start time, ends and period bin (the bound per period partitions by it)."""

    period: Period
    records: str = "trips"

    def rows_sql(self, part: Loaded) -> str:
        d = part.engine.dialect
        return (
            f"(SELECT uid, tid, start_time, origin, destination, "
            f"{self.period.bin_sql('start_time', d)} AS period FROM {part.view})"
        )

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        # trips from events need only these event columns (the spilled buckets hold no more)
        return (("uid", "time", "tile") if root(data).shape == "events" else None), None


@dataclass(frozen=True)
class OdSpec(PlannedOnce):
    """An origin-destination matrix over ``tessellation`` (a kind of the count template; see
    :func:`od_matrix` for the guarantee)."""

    tessellation: Tessellation
    epsilon: float
    unit: PrivacyUnit = PrivacyUnit.USER
    max_trips: int | str | None = None
    tau: int | None = None
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    period: Period = field(default_factory=Period)
    bound_per: str = "release"
    kind: str = "od"
    same_tile: str = "exclude"
    #: each (origin, destination) counted at most once per user and period
    unique: bool = False
    #: coarser public levels of the tiles, coarsest first: columns of the tessellation (a
    #: zone's ``borough``) or ``h3:<resolution>`` (:mod:`privmob.releases.hierarchy`)
    hierarchy: tuple[str, ...] = ()
    #: the budget's weight of each level (``tile``: the finest); empty: the default split
    hierarchy_weights: tuple[tuple[str, float], ...] = ()
    #: how ``max_trips="auto"`` is chosen, and the rescale (:mod:`privmob.releases.bound_choice`)
    bound_choice: BoundChoice | None = None

    records: ClassVar[str] = "trips"

    @cached_property
    def choice(self) -> BoundChoice | None:
        """The bound's choice or rescale (``None``: a fixed bound, as given)."""
        bc = checked_choice(
            self.max_trips, self.bound_choice, unit=self.unit, noise=self.noise,
            delta=self.delta, per=self.bound_per, value=None,
        )  # fmt: skip
        if bc is not None and self.hierarchy:  # the levels' noise is fixed before the charge
            raise ConfigError(
                "a bound chosen privately or rescaled counts are not offered with a "
                "hierarchy of zones yet",
                hint=spelled(
                    "give a fixed --max-trips, or leave out --hierarchy",
                    "give a fixed max_trips=, or leave out hierarchy=",
                ),
            )
        return bc

    @property
    def fixed_bound(self) -> int | None:
        return None if self.max_trips in (None, "auto") else int(self.max_trips)

    def concrete(self, bound: int, epsilon: float) -> OdSpec:
        """This release with ``bound`` trips per user and ``epsilon`` (no choice)."""
        return replace(self, max_trips=bound, epsilon=epsilon, bound_choice=None)

    def public_period(self) -> JSONObject:
        """The declared period and its bins (public; ``metadata.json`` ``definitions``)."""
        return self.period.to_dict()

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile."""
        return SAME_TILE_RULES[self.same_tile]

    @cached_property
    def od_plan(self) -> ODPlan:
        return plan_od(self)

    @cached_property
    def zone_levels(self) -> ZoneLevels | None:
        """The public groups of the tiles (``hierarchy``), from the tessellation alone."""
        if not self.hierarchy:
            return None
        from privmob.releases.hierarchy import zone_levels

        return zone_levels(self.tessellation, self.hierarchy)

    @cached_property
    def od_tree(self) -> OdTree:
        """The public tree of the released cells over the levels (with ``hierarchy``)."""
        from privmob.releases.hierarchy import od_tree

        assert self.zone_levels is not None
        d = self.domain
        return od_tree(self.zone_levels, d.k, d.n_periods, d.same_tile)

    @cached_property
    def domain(self) -> ODDomain:
        return ODDomain(self.tessellation.k, self.period.n_bins, same_tile_flag(self.same_tile))

    def make_plan(self) -> Plan:
        if self.choice is not None:
            return chosen_plan(self, self.choice)
        p, domain = self.od_plan, self.domain
        rows = domain.od_cells
        notes: tuple[str, ...] = ()
        if p.levels:
            from privmob.releases.hierarchy import split_note

            assert self.zone_levels is not None
            split = split_note(self.zone_levels, p.shares, p.levels)
            notes = (f"hierarchy: epsilon split across the levels, {split}; charged once",)
        return Plan(
            kind=self.kind,
            cost=p.total,
            cells=domain.released_cells,
            memory_bytes=domain_memory(domain.size, rows),
            output_rows=rows,
            margin_of_error_95=float(p.noise.margin_of_error(0.95)),
            noise=str(p.noise.kind),
            parts=len(p.parts),
            notes=notes,
        )

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Step
    ) -> Draft:
        return template_draft(data, self, accountant, rng=rng, progress=progress)

    # -- what the count template asks of its kinds (releases/counts.py: CountKind) -------------
    @property
    def calibrated(self) -> tuple[Noise | LevelsNoise, Cost]:
        if self.od_plan.levels:
            from privmob.releases.hierarchy import LevelsNoise

            return LevelsNoise(self.od_plan.levels, self.od_tree), self.od_plan.total
        return self.od_plan.noise, self.od_plan.total

    def count_domain(self) -> CountDomain:
        return self.domain.count_domain(self.period, list(self.tessellation.tile_ids))

    def per_user(self, group_size: int | None) -> EnforcedBound | None:
        """T trips per user (per period with ``bound_per="period"``); trip level: none, or the
        stated group size enforced (so a charge by group privacy rests on a real bound)."""
        if self.od_plan.unit is PrivacyUnit.TRIP:
            if group_size is None:
                return None
            if int(group_size) != group_size or group_size < 1:
                raise ConfigError(f"--group-size must be a whole number >= 1, got {group_size}")
            return EnforcedBound(int(group_size))
        partition = ("period",) if self.bound_per == "period" else ()
        return EnforcedBound(self.od_plan.t_bound, partition=partition)

    #: no value is summed beside this kind's counts
    value: ClassVar[None] = None

    def counted(self, data: object) -> Loaded:
        check_input(
            data,
            self.tessellation,
            "trips",
            "OD matrix",
            "build trips first: privmob.prepare.inputs.load_trips_any (any shape) or "
            "trips_from_points, or use privmob.Session, which resolves the input's shape once",
        )
        if self.unique:
            from privmob.prepare.unique import unique_trips

            return unique_trips(cast("Loaded", data), self.period)
        return cast("Loaded", data)

    def rows_sql(self, part: Loaded) -> str:
        return TripRows(self.period).rows_sql(part)

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        return TripRows(self.period).bucket_columns(data)

    def publish(
        self,
        noisy: npt.NDArray[np.int64] | LevelsNoisy | None,
        noise: Noise | LevelsNoise,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        p, domain, tau = self.od_plan, self.domain, self.tau
        unit, t_bound = p.unit, p.t_bound
        noise = p.noise  # the finest level's with a hierarchy
        group = bound.bound if bound is not None and unit is PrivacyUnit.TRIP else None
        margin = noise.margin_of_error(0.95)
        release = Release(
            kind="od",
            cost=cost,
            unit=unit,
            bounds={
                "max_trips_per_user": t_bound if unit is PrivacyUnit.USER else None,
                "bound_per": self.bound_per if unit is PrivacyUnit.USER else None,
                **({"group_size_enforced": group} if group is not None else {}),
            },
            noise={**noise.to_dict(), "l1_sensitivity": t_bound, "margin_of_error_95": margin},
            params={
                "epsilon": self.epsilon,
                "delta": self.delta,
                "tau": tau,
                "post_processing": describe_post(noise, tau, domain.od_cells),
                "expected_signal": expected_signal(noise).to_dict(),
                "period": self.period.to_dict(),
                "epsilon_per_part": p.cost_each.epsilon,
            },
            domain={
                "tiles": domain.k,
                "periods": domain.n_periods,
                "od_cells": domain.od_cells,
                "outlier_cells": domain.n_periods + 1,
                "diagonal": "released" if domain.same_tile else "not released",
            },
            tables={},
            for_publication=r.for_publication,
            cost_parts=p.parts,
        )
        if self.zone_levels is not None:
            self._describe_levels(release)
        from privmob.releases.hierarchy import LevelsNoisy  # here: after the plan (issue 43)

        if isinstance(noisy, LevelsNoisy):
            self._levels_tables(release, noisy)
        elif noisy is not None:
            mask = self.count_domain().released_mask()
            published = suppress(noisy, tau) * mask
            # from the published (noisy) OD cells and the public margin only: post-processing
            signal = signal_check(
                published[: domain.od_size][mask[: domain.od_size]], margin, unit, noise
            )
            labels = self.period.labels()
            od = published[: domain.od_size].reshape(domain.n_periods, domain.k, domain.k)
            release.params["signal"] = signal.to_dict()
            release.tables = {
                "od": od_table(od, self.tessellation.tile_ids, labels, same_tile=domain.same_tile),
                "outliers": outliers_table(published[domain.od_size :], labels),
            }
        return release, f"OD matrix, {domain.n_periods} period(s)"

    def _describe_levels(self, release: Release) -> None:
        """The hierarchy's parameters and post-processing in the release's metadata."""
        from privmob.releases.hierarchy import METHOD, describe, od_tree

        assert self.zone_levels is not None
        p, d = self.od_plan, self.domain
        release.params["hierarchy"] = describe(
            self.zone_levels,
            p.shares,
            p.levels,
            self.epsilon,
            od_tree(self.zone_levels, d.k, 1, d.same_tile),  # every period's tree is the same
            bool(self.hierarchy_weights),
            d.n_periods,
        )
        release.params["post_processing"] = {
            "rule": METHOD,
            "tau": None,
            "note": "every level sums exactly to the level above; no value is negative",
        }

    def _levels_tables(self, release: Release, noisy: LevelsNoisy) -> None:
        """The tables of a release over a hierarchy: every level's consistent non-negative
        estimates with their margins (post-processing of the noisy levels)."""
        from privmob.releases.hierarchy import estimate, level_tables

        assert self.zone_levels is not None
        p, domain = self.od_plan, self.domain
        est = estimate(noisy, p.levels, self.od_tree)
        labels = self.period.labels()
        zeros = np.zeros((domain.n_periods, domain.k, domain.k), dtype=np.int64)
        od = od_table(zeros, self.tessellation.tile_ids, labels, same_tile=domain.same_tile)
        od["count"] = est.values[-1]
        od["margin_95"] = est.margins[-1]
        od["least_squares"] = est.least_squares[-1]
        margin = p.noise.margin_of_error(0.95)
        release.params["signal"] = signal_check(est.values[-1], margin, p.unit, p.noise).to_dict()
        release.tables = {
            "od": od,
            **level_tables(est, self.zone_levels, labels),
            "outliers": outliers_table(noisy.fine[domain.od_size :], labels),
        }


def od_matrix(
    trips: Loaded,
    *,
    tessellation: Tessellation,
    epsilon: float,
    accountant: Accountant,
    unit: PrivacyUnit | str = PrivacyUnit.USER,
    max_trips: int | None = None,
    tau: int | None = None,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    period: Period | None = None,
    bound_per: str = "release",
    rng: RandomnessLike = None,
    step: Step | None = None,
    buckets: int | None = None,
    same_tile: str = "exclude",
) -> Release:
    """A differentially private origin-destination matrix, per period (:class:`OdSpec` on
    the count template).

    Guarantee: with ``unit="user"`` each user keeps at most ``max_trips`` trips (uniformly at
    random, by a keyed hash with a fresh key), so adding or removing one user changes the
    counts by at most T in L1 (and L2) norm; every cell of the public domain gets independent
    noise of scale T/epsilon (discrete Laplace: epsilon-DP; discrete Gaussian: (epsilon,
    delta)-DP via zCDP). With ``bound_per="release"`` (default) the bound T holds over the whole
    release and the whole release costs epsilon. With ``bound_per="period"`` each user keeps T
    trips in every period; each period (and the out-of-period outliers cell) then costs epsilon
    and the ledger is charged once per period. With ``unit="trip"`` the guarantee is per trip
    (a user with g trips loses g x epsilon); if the accountant states a ``group_size`` g (to
    charge g x epsilon to a user-level budget), each user keeps at most g trips (same keyed
    sampling), so that charge rests on an enforced bound, not on a claim about the data.
    Suppression below ``tau`` reads only noisy values (post-processing). Default (``tau``
    None): the noisy integers as drawn, negative values kept, so every cell and every total is
    unbiased; ``tau = 0`` clamps negative counts to 0 and ``tau > 0`` suppresses below tau,
    both of which inflate totals (the expected bias is stated in ``params.post_processing``).
    ``same_tile``: trips within one tile are left out (``"exclude"``, default) or released on
    the diagonal (``"include"``); the same rule as the report's ``od_flows``.

    Out of core: ``buckets`` (default: sized to the engine's memory limit) splits the users by
    a hash of the user id and sums the bucket counts; bounding stays exact per user.
    """
    spec = OdSpec(
        tessellation,
        epsilon,
        PrivacyUnit(unit),
        max_trips,
        tau,
        noise,
        delta,
        period or Period(),
        bound_per,
        same_tile=same_tile,
    )
    return count_release(trips, spec, accountant, rng=rng, step=step, buckets=buckets)


@dataclass(frozen=True)
class ODPlan:
    """What an OD release will cost, from its public parameters only."""

    unit: PrivacyUnit
    t_bound: int
    noise: Noise
    cost_each: Cost
    parts: list[tuple[str, Cost]]
    total: Cost
    #: with a hierarchy: each level's noise (coarsest first; ``noise`` is the finest's) and
    #: its share of the budget
    levels: tuple[Noise, ...] = ()
    shares: tuple[float, ...] = ()


def plan_od(spec: OdSpec) -> ODPlan:
    """Check the public parameters of ``spec`` and compute its noise and ledger parts (no
    data is read; the spec's tessellation is not consulted)."""
    unit, max_trips, bound_per = PrivacyUnit(spec.unit), spec.max_trips, spec.bound_per
    if unit not in (PrivacyUnit.USER, PrivacyUnit.TRIP):
        raise ConfigError(f"the OD release protects a user or a trip, not a {unit}")
    if max_trips == "auto" or isinstance(max_trips, str):
        raise ConfigError(  # a chosen bound is planned by releases/bound_choice.py
            f"--max-trips {max_trips}: a bound chosen privately needs user-level privacy",
            hint=spelled("use --unit user", 'use unit="user"'),
        )
    if unit is PrivacyUnit.USER:
        if max_trips is None:
            raise ConfigError(
                "user-level privacy needs --max-trips T, the most trips counted per user",
                hint="T is a public bound, never taken from the data; it sets the noise scale",
            )
        if int(max_trips) != max_trips or max_trips < 1:
            raise ConfigError(f"--max-trips must be a whole number >= 1, got {max_trips}")
        t_bound = int(max_trips)
    else:
        if max_trips not in (None, 1):
            raise ConfigError(
                "trip-level releases count every trip once (T = 1)",
                hint=spelled(
                    "drop --max-trips or use --unit user", 'drop max_trips= or use unit="user"'
                ),
            )
        t_bound = 1
    if bound_per not in ("release", "period"):
        raise ConfigError(f"unknown bound scope '{bound_per}'", hint="use release or period")
    check_tau(spec.tau)
    noise_dist, cost_each = calibrate(
        spec.noise,
        spec.epsilon,
        l1_sensitivity=t_bound,
        l2_sensitivity=t_bound,
        delta=spec.delta,
        unit=unit,
    )
    levels: tuple[Noise, ...] = ()
    shares: tuple[float, ...] = ()
    if spec.hierarchy_weights and not spec.hierarchy:
        raise ConfigError(
            "the hierarchy's weights split the budget across its levels: there are none",
            hint=spelled("add --hierarchy borough", 'add hierarchy="borough"')
            + " (a column of the tessellation), or leave out the weights",
        )
    if spec.zone_levels is not None:
        from privmob.releases.hierarchy import level_noises, level_shares

        if spec.tau is not None:
            raise ConfigError(
                "a hierarchy's estimates are already non-negative and consistent: no --tau",
                hint=spelled("leave out --tau", "leave out tau=") + " with a hierarchy",
            )
        shares = level_shares(
            spec.zone_levels,
            spec.tessellation.k,
            same_tile_flag(spec.same_tile),
            NoiseKind(spec.noise),
            dict(spec.hierarchy_weights),
        )
        levels, cost_each = level_noises(
            spec.noise, spec.epsilon, spec.delta, t_bound, shares, unit
        )
        noise_dist = levels[-1]
    if bound_per == "period" and unit is PrivacyUnit.USER:
        parts = [(f"period {lab}", cost_each) for lab in spec.period.labels()]
        if spec.period.declared:  # undeclared: no trip can be outside, that cell reads no data
            parts.append(("trips outside the study period (outliers)", cost_each))
    else:
        parts = [("all periods", cost_each)]
    total = parts[0][1]
    for _, c in parts[1:]:
        total = total + c
    return ODPlan(unit, t_bound, noise_dist, cost_each, parts, total, levels, shares)


def exact_counts(
    trips: Loaded,
    *,
    domain: ODDomain,
    period: Period,
    unit: PrivacyUnit,
    max_trips: int,
    bound_per: str = "release",
    rng: Randomness | None = None,
    buckets: int | None = None,
    step: Step | None = None,
) -> npt.NDArray[np.int64]:
    """Exact bounded counts over the flat domain, the cells not released at 0 (no noise:
    never publish these); the count template's counting step (:func:`exact_cells`).

    Users are split into ``buckets`` hash buckets (default: as many as the engine's memory
    limit needs, see :mod:`privmob.engine.buckets`); each user lies in one bucket, so the sum
    of bucket counts equals the single-pass counts.
    """
    cells = domain.count_domain(period)
    bound = None
    if unit is PrivacyUnit.USER:
        bound = EnforcedBound(max_trips, partition=("period",) if bound_per == "period" else ())
    counts = exact_cells(
        trips, TripRows(period), cells, bound, resolve(rng), buckets=buckets, step=step
    )
    released: npt.NDArray[np.int64] = counts * cells.released_mask()
    return released


def od_table(
    od: npt.NDArray[np.int64], tile_ids: list[object], labels: list[str], *, same_tile: bool = False
) -> pd.DataFrame:
    """Long table (period, origin, destination, count) over every off-diagonal cell (and the
    diagonal with ``same_tile``).

    ``origin`` and ``destination`` hold the tile ids with their type (int64 or string).

    Rows are ordered by period, origin, destination. The label columns are built by Arrow
    ``take`` from the public labels (pandas' string dtype is Arrow-backed): a daily 263-zone
    matrix has 1.9M rows, and converting 3 x 1.9M Python strings cost seconds.
    """
    import pyarrow as pa

    n, k, _ = od.shape
    o, dst = np.divmod(np.arange(k * k, dtype=np.int64), k)
    off = np.ones(k * k, dtype=bool) if same_tile else o != dst
    per_period = int(off.sum())
    index = {
        "period": np.repeat(np.arange(n, dtype=np.int64), per_period),
        "origin": np.tile(o[off], n),
        "destination": np.tile(dst[off], n),
    }
    # tile ids keep their type (int ids stay int64, so a merge with the tessellation works)
    ids = pa.array(tile_ids) if tile_ids else pa.array([], pa.large_string())
    if pa.types.is_string(ids.type):
        ids = ids.cast(pa.large_string())
    names = {"period": pa.array([str(x) for x in labels], pa.large_string()), "origin": ids}
    names["destination"] = names["origin"]
    columns: dict[str, pd.Series[str] | npt.NDArray[np.int64]] = {
        col: pd.Series(names[col].take(pa.array(idx)).to_pandas()) for col, idx in index.items()
    }
    columns["count"] = od.reshape(n, k * k)[:, off].ravel().astype(np.int64)
    return pd.DataFrame(columns)


def outliers_table(values: npt.NDArray[np.int64], labels: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "period": [*labels, "outside study period"],
            "cell": ["end outside the tessellation"] * len(labels) + ["start outside the period"],
            "count": values.astype(np.int64),
        }
    )
