"""DP population counts (SPEC 4.4; seed 003): users per home zone, over every zone, a kind of the
count template (:mod:`privmob.releases.counts`).

Data flow: events -> home per user (most frequent night tile, ``privmob.prepare.homes``) ->
exact counts over the public domain (every zone, plus "home outside the zones" and "unknown
home" for users without a night event) -> noise on every cell -> clamp at 0 -> ledger ->
output. With ``zone_mapping="voronoi"`` homes are found per tower and the noisy tower counts are
split over the zones by the towers' Voronoi area shares (post-processing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, cast

from privmob.domain import Period
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import np, pd
from privmob.prepare.homes import homes_sql
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.counts import (
    CountDomain,
    EnforcedBound,
    Step,
    count_draft,
    count_release,
    exact_cells,
)
from privmob.releases.dimensions import Dimension
from privmob.releases.gate import Draft
from privmob.releases.plan import Plan, PlannedOnce, domain_memory
from privmob.releases.release import Release
from privmob.releases.tiles import check_input
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.data.tessellation import Tessellation
    from privmob.engine.dialect import Dialect

#: Engine memory per input event of the home step (for the user buckets). Homes are an
#: aggregate per (user, tile), which DuckDB spills, and a window over those aggregates, not
#: over events: one pass over 1.27B events peaked at 1.30 GB (~0.8 B per event above the
#: 0.3 GB base; docs/benchmarks.md), so 4 B per event keeps a 4-5x margin. Buckets cost a
#: partitioning pass (1.27B events in 2 buckets: 294 s instead of 207 s), so none where
#: the memory does not ask for them.
HOME_BYTES_PER_ROW = 4

OUTSIDE = "home outside the zones"
UNKNOWN = "unknown home (no night event in the period)"
#: how homes become zones: the tile of each event ("contain": a tower's zone), or homes per
#: tower split over the zones by the towers' Voronoi area shares ("voronoi")
ZONE_MAPPINGS = ("contain", "voronoi")


def _home_cell(_time: str, _dialect: Dialect, k: int) -> str:
    """A user's home cell: a tile 0..k-1, ``k`` (outside the tiles) or ``k + 1`` (unknown)."""
    return f"CASE WHEN tile IS NULL THEN {k + 1} WHEN tile < 0 THEN {k} ELSE tile END"


@dataclass(frozen=True)
class HomeRows:
    """One record per user: their home tile among ``k`` (NULL: no night event), from the
    events inside the declared ``period``; the template counts them in :func:`home_domain`."""

    k: int
    night: tuple[int, int] = (20, 6)
    period: Period | None = None
    records: str = "homes"

    def rows_sql(self, part: Loaded) -> str:
        d = part.engine.dialect
        where = "TRUE"
        if self.period is not None and self.period.declared:
            where = f"({self.period.bin_sql('time', d)}) >= 0"
        homes = homes_sql(part.view, d, night=self.night, where=where)
        return (
            f"(SELECT u.uid, h.tile FROM (SELECT DISTINCT uid FROM {part.view} AS all_) AS u "
            f"LEFT JOIN ({homes}) AS h ON u.uid = h.uid)"
        )

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        return ("uid", "time", "tile"), HOME_BYTES_PER_ROW

    def domain(self, labels: Sequence[object]) -> CountDomain:
        """``labels`` of the k tiles, then "outside" and "unknown": every user in one cell."""
        home = Dimension("zone", (*labels, OUTSIDE, UNKNOWN), _home_cell)
        return CountDomain((home,), "time", self.k, None, None)


class CountsHomes:
    """What the count template asks of a population kind about its records: one home per
    user (no bound to enforce), read as :attr:`rows` says."""

    records = "homes"
    #: no value is summed beside a population kind's counts
    value: ClassVar[None] = None

    @property
    def rows(self) -> HomeRows:
        raise NotImplementedError

    def per_user(self, group_size: int | None) -> EnforcedBound | None:
        return None  # one home per user by construction

    def rows_sql(self, part: Loaded) -> str:
        return self.rows.rows_sql(part)

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        return self.rows.bucket_columns(data)


def exact_home_counts(
    events: Loaded,
    k: int,
    *,
    night: tuple[int, int] = (20, 6),
    period: Period | None = None,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
) -> npt.NDArray[np.int64]:
    """Exact users per home cell (k zones, outside, unknown). Never publish these.

    Out of core: with a memory limit on the engine (DuckDB ``--memory-limit``) the users are
    split into hash buckets (:mod:`privmob.engine.buckets`); a user's home depends on their own
    events only, so the summed bucket counts equal the single-pass counts.
    """
    rows = HomeRows(k, night, period)
    domain = rows.domain(list(range(k)))
    return exact_cells(events, rows, domain, None, resolve(None), buckets=buckets, step=step)


@dataclass(frozen=True)
class PopulationSpec(CountsHomes, PlannedOnce):
    """Users per home zone (a kind of the count template; see :func:`population_counts`).

    ``zone_mapping="voronoi"``: homes per tower of the towers table ``cells`` (``cell_id, lat,
    lng``; the events carry ``cell_id``), the noisy tower counts split over the zones by the
    towers' Voronoi area shares (:class:`TowerHomes`; zone values are fractional)."""

    tessellation: Tessellation
    epsilon: float
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    night: tuple[int, int] = (20, 6)
    period: Period = field(default_factory=Period)
    kind: str = "population"
    zone_mapping: str = "contain"
    cells: str | Path | None = None
    unit: ClassVar[PrivacyUnit] = PrivacyUnit.USER  # one home per user
    same_tile_rule: ClassVar[None] = None

    def public_period(self) -> JSONObject:
        """The declared period (public)."""
        return self.period.to_dict()

    @cached_property
    def calibrated(self) -> tuple[Noise, Cost]:
        if self.night[0] == self.night[1]:
            raise ConfigError("the night window is empty")
        if self.zone_mapping not in ZONE_MAPPINGS:
            raise ConfigError(
                f"unknown zone mapping '{self.zone_mapping}'", hint="contain or voronoi"
            )
        # each user is in exactly one cell: L1 = L2 sensitivity 1
        return calibrate(
            self.noise, self.epsilon, l1_sensitivity=1, l2_sensitivity=1, delta=self.delta
        )

    def make_plan(self) -> Plan:
        dist, cost = self.calibrated
        self._towers_given()
        cells = self.tessellation.k + 2
        return Plan(
            kind=self.kind,
            cost=cost,
            cells=cells,
            memory_bytes=domain_memory(cells, cells),
            output_rows=cells,
            margin_of_error_95=float(dist.margin_of_error(0.95)),
            noise=str(dist.kind),
        )

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Step
    ) -> Draft:
        kind: PopulationSpec | TowerHomes = self
        if self.zone_mapping == "voronoi":  # the towers (public) read on the input's engine
            self._towers_given()
            kind = TowerHomes.read(self, cast("Loaded", data), progress)
        return count_draft(data, kind, accountant, rng=rng, step=progress)

    def _towers_given(self) -> None:
        if self.zone_mapping == "voronoi" and self.cells is None:
            raise ConfigError(
                "the Voronoi zone mapping needs the towers table",
                hint=spelled("pass --cells towers.csv", 'pass Session(..., cells="towers.csv")'),
            )

    # -- what the count template asks of its kinds (releases/counts.py: CountKind) -------------
    @property
    def rows(self) -> HomeRows:
        return HomeRows(self.tessellation.k, self.night, self.period)

    def count_domain(self) -> CountDomain:
        return self.rows.domain([str(t) for t in self.tessellation.tile_ids])

    def counted(self, data: object) -> Loaded:
        check_input(
            data,
            self.tessellation,
            "events",
            "population release",
            "load located events (or trip points) with privmob.data.load_events, or use "
            "privmob.Session",
        )
        return cast("Loaded", data)

    def publish(
        self,
        noisy: npt.NDArray[np.int64] | None,
        noise: Noise,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        k = self.tessellation.k
        counts = None if noisy is None else np.maximum(noisy, 0).astype(np.int64)  # post-proc.
        return self._release(counts, noise, cost, r, {}, {}), f"population counts over {k} zones"

    def _release(
        self,
        counts: npt.NDArray[np.int64] | npt.NDArray[np.float64] | None,
        noise: Noise,
        cost: Cost,
        r: Randomness,
        params: JSONObject,
        domain: JSONObject,
    ) -> Release:
        k = self.tessellation.k
        tables = {}
        if counts is not None:  # None: the header (the gate charges it before the noise)
            ids = [str(t) for t in self.tessellation.tile_ids]
            tables["population"] = pd.DataFrame(
                {
                    "zone": [*ids, OUTSIDE, UNKNOWN],
                    "tile_id": typed_tile_ids(self.tessellation.tile_ids, extra=2),
                    "kind": ["zone"] * k + ["outliers", "outliers"],
                    "count": counts,
                }
            )
        return Release(
            kind="population",
            cost=cost,
            unit=PrivacyUnit.USER,
            bounds={"homes_per_user": 1},
            noise={
                **noise.to_dict(),
                "l1_sensitivity": 1,
                "margin_of_error_95": noise.margin_of_error(),
            },
            params={
                "epsilon": self.epsilon,
                "delta": self.delta,
                "night_hours": list(self.night),
                "period": self.period.to_dict(),
                **(params or {"post_processing": "negative counts set to 0"}),
            },
            domain={**domain, "zones": k, "outlier_cells": [OUTSIDE, UNKNOWN]},
            tables=tables,
            for_publication=r.for_publication,
        )


@dataclass(frozen=True)
class TowerHomes(CountsHomes):
    """Population through the towers' Voronoi area shares (SPEC section 2): homes found per
    tower (the most frequent tower at night), users per home tower (plus "at no known tower"
    and "unknown home") counted and noised by the template exactly as the zones of
    :class:`PopulationSpec` (sensitivity 1), then the noisy tower counts, clamped at 0, split
    over the zones by the public area-share matrix (post-processing: no extra cost)."""

    spec: PopulationSpec
    #: the public towers table (``cell_key, lat, lng``), in the order of their cells
    towers: pd.DataFrame = field(compare=False)
    #: (towers, zones + 1) area shares; the last column: outside every zone
    shares: npt.NDArray[np.float64] = field(compare=False)

    @classmethod
    def read(
        cls, spec: PopulationSpec, events: Loaded, step: Callable[[str], None] | None = None
    ) -> TowerHomes:
        """The towers table ``spec.cells`` (public) read on the events' engine."""
        from privmob.data.sources import load_cells

        eng, tess = events.engine, spec.tessellation
        view = load_cells(spec.cells, engine=eng, tessellation=tess)
        return cls.of(spec, eng.fetch(f"SELECT * FROM {view}"), step)

    @classmethod
    def of(
        cls, spec: PopulationSpec, towers: pd.DataFrame, step: Callable[[str], None] | None = None
    ) -> TowerHomes:
        from privmob.prepare.voronoi import tower_zone_shares

        if step is not None:
            step("building the towers' Voronoi cells and area shares")
        lng, lat = towers["lng"].to_numpy(), towers["lat"].to_numpy()
        return cls(spec, towers, tower_zone_shares(lng, lat, spec.tessellation))

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def calibrated(self) -> tuple[Noise, Cost]:
        return self.spec.calibrated

    @property
    def rows(self) -> HomeRows:
        return HomeRows(len(self.towers), self.spec.night, self.spec.period)

    def count_domain(self) -> CountDomain:
        return self.rows.domain(self.towers["cell_key"].astype(str).tolist())

    def counted(self, data: object) -> Loaded:
        """The events with the index of their tower as ``tile`` (-1: no known tower)."""
        import pyarrow as pa

        from privmob.engine.relation import new_name

        events = cast("Loaded", data)
        if "cell_id" not in events.columns:
            raise ConfigError(
                "Voronoi shares need events with cell ids",
                hint=f"load the events with {spelled('--cells', 'cells=')}",
            )
        eng = events.engine
        mapping = new_name("towerindex")
        keys = self.towers["cell_key"].astype(str).tolist()
        eng.register(
            mapping,
            pa.table(
                {
                    "cell_key": pa.array(keys, pa.string()),
                    "tower": pa.array(np.arange(len(keys), dtype=np.int32)),
                }
            ),
        )
        view = new_name("tower_events")
        eng.create_view(
            view,
            f"SELECT e.uid, e.time, COALESCE(m.tower, -1) AS tile FROM {events.view} AS e "
            f"LEFT JOIN {mapping} AS m ON CAST(e.cell_id AS VARCHAR) = m.cell_key",
        )
        return Loaded(view, events.source, "events", eng, ["uid", "time", "tile"])

    def publish(
        self,
        noisy: npt.NDArray[np.int64] | None,
        noise: Noise,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        from privmob.prepare.voronoi import apply_shares

        n, k = len(self.towers), self.spec.tessellation.k
        params: JSONObject = {
            "zone_mapping": "voronoi area shares of noisy tower counts",
            "post_processing": "negative tower counts set to 0, then split by area shares",
        }
        values = None
        if noisy is not None:
            counts = np.maximum(noisy, 0)
            zones = apply_shares(counts[:n], self.shares)  # k zones + outside
            zones[k] += counts[n]  # homes at no known tower (unknown cell ids): outside
            values = np.append(zones, float(counts[n + 1]))
        release = self.spec._release(values, noise, cost, r, params, {"towers": n})
        return release, f"population over {k} zones via {n} towers"


def population_counts(
    events: Loaded,
    *,
    tessellation: Tessellation,
    epsilon: float,
    accountant: Accountant,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    night: tuple[int, int] = (20, 6),
    period: Period | None = None,
    rng: RandomnessLike = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Differentially private number of users whose home is in each zone.

    Guarantee: user-level epsilon-DP (discrete Laplace / laplace-rounded, scale 1/epsilon) or
    (epsilon, delta)-DP (discrete Gaussian). Each user has exactly one cell (a zone, "outside"
    or "unknown home"), so adding or removing a user changes one count by 1 (L1 = L2
    sensitivity 1) whatever their events. Every cell of the public domain gets noise; clamping
    negative values to 0 is post-processing. When ``period`` is declared homes come from the
    events inside it; a user with no night event inside it (e.g. seen only outside the period)
    is counted in the "unknown home" outliers cell (SPEC 1.1); the period itself is public.
    """
    spec = PopulationSpec(tessellation, epsilon, noise, delta, night, period or Period())
    return count_release(events, spec, accountant, rng=rng, step=step)


def typed_tile_ids(tile_ids: Sequence[int | str], extra: int) -> pd.Series[int] | pd.Series[str]:
    """The tile ids with their type (nullable Int64 or string), then ``extra`` missing values
    for the outliers rows: ``zone`` holds text for every row, ``tile_id`` merges with the
    tessellation."""
    ints = [t for t in tile_ids if isinstance(t, int)]
    if len(ints) == len(tile_ids):
        return pd.Series(pd.array([*ints, *[None] * extra], dtype="Int64"))
    return pd.Series(pd.array([*map(str, tile_ids), *[None] * extra], dtype="string"))
