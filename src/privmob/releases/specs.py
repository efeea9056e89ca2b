"""Release specifications: the public parameters of one release, its :class:`Plan` (from those
parameters only, before any data is read) and the one release signature of the library,
:func:`release` ``(data, spec, accountant, *, rng, progress)``.

Each spec is a thin typed wrapper over an existing release function (``releases/od.py``,
``releases/population.py``): the privacy semantics are theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from privmob.domain import StudyPeriod
from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness
from privmob.releases.base import Accountant
from privmob.releases.release import Release

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

Progress = Callable[[str], None]

#: bytes per cell of a dense count domain: exact counts, noisy values, published values (int64)
#: and the released-cells mask
BYTES_PER_CELL = 3 * 8 + 1
#: bytes per row of a long output table (period, origin, destination, count in pandas and
#: Arrow, with the copies made while the table is built). With BYTES_PER_CELL, calibrated on
#: OD matrices (benchmarks/bench_plan_memory.py: 0.3M, 4.9M and 25M cells grew the process by
#: 127-130 bytes per cell, plus about 40 MB at any size)
BYTES_PER_ROW = 104
#: memory a release takes beyond its domain (engine buffers, Arrow results, the noise sampler)
RELEASE_BASE_BYTES = 40 * 2**20


def domain_memory(cells: int, rows: int) -> int:
    """The memory a release needs for ``cells`` dense domain cells and ``rows`` output rows."""
    return RELEASE_BASE_BYTES + cells * BYTES_PER_CELL + rows * BYTES_PER_ROW


@dataclass(frozen=True)
class Plan:
    """What a release will cost and need, from public parameters only (no data is read).

    ``cells``: noisy cells of the public domain; ``memory_bytes``: estimate of the dense domain
    and output table in memory; ``output_rows``: rows of the main table; ``margin_of_error_95``:
    half-width of the 95% interval of the noise on one cell.
    """

    kind: str
    cost: Cost
    cells: int
    memory_bytes: int
    output_rows: int
    margin_of_error_95: float
    noise: str
    parts: int = 1
    #: more lines said with the plan (the layer files' sizes, set by the session)
    notes: tuple[str, ...] = ()

    def check_memory(
        self, memory_limit: int | None, baseline: int = 0, *, guard: bool = False
    ) -> None:
        """Refuse, with what to change, a plan that would not fit in ``memory_limit`` bytes for
        the whole process, of which ``baseline`` bytes are already in use (Python and the
        libraries; ``privmob.engine.memory``). ``guard``: the limit is the default guard (what
        the machine has available), not a ``--memory-limit``."""
        if memory_limit is None or self.memory_bytes <= memory_limit - baseline:
            return
        used = f" on top of the {baseline / 1e9:.2f} GB the process uses" if baseline else ""
        over = (
            f"more than the {memory_limit / 1e9:.2f} GB this machine has available"
            if guard
            else f"over the memory limit of {memory_limit / 1e9:.2f} GB"
        )
        from privmob.engine.memory import ENGINE_FLOOR

        need = -(-(baseline + self.memory_bytes + ENGINE_FLOOR) // 10**6)  # and the engine's
        raise ConfigError(
            f"this {self.kind} release needs about {self.memory_bytes / 1e9:.2f} GB for "
            f"{self.cells:,} cells{used}, {over}",
            hint="use a coarser tessellation, fewer periods (a longer bin or a shorter study "
            + (
                "period), or free memory on this machine"
                if guard
                else f"period) or a memory limit of at least {need}MB"
            ),
        )

    def signal_needed(self) -> str:
        """What the 95% margin means for a cell, from public parameters only: the true count
        a cell must exceed to be told from an empty one, and the count for a +-50% error."""
        m = self.margin_of_error_95
        if m != m:  # NaN: no single per-cell margin (density)
            return "no single per-cell margin (the noise is not added cell by cell)"
        if m < 1:
            return "a cell of 1 is told from an empty one"
        return (
            f"a cell is told from an empty one only above {m:,.0f} and has a +-50% error at "
            f"{2 * m:,.0f}; a smaller expected count per cell is noise (--max-margin refuses "
            "such a plan before reading)"
        )

    def check_margin(self, max_margin: float | None) -> None:
        """Refuse, before any data is read, a plan whose 95% margin of error per cell is above
        ``max_margin`` (the expected signal per cell, stated by the user)."""
        if max_margin is None:
            return
        m = self.margin_of_error_95
        if m != m:
            raise ConfigError(
                f"a {self.kind} release has no single 95% margin per cell to compare with "
                "the maximum margin",
                hint="leave out --max-margin (Python: max_margin=) for this release",
            )
        if m > max_margin:
            raise ConfigError(
                f"this {self.kind} release's 95% margin of error is +/-{m:,.1f} per cell, above "
                f"the maximum margin {max_margin:,.1f}: its cells would be noise; nothing was "
                "read or charged",
                hint="raise epsilon, lower the bound (-T), use coarser zones or periods (more "
                "per cell), or raise --max-margin",
            )

    def summary(self) -> str:
        text = (
            f"{self.kind}: cost {self.cost.describe()}, {self.cells:,} cells, "
            f"~{self.memory_bytes / 1e6:,.1f} MB, {self.output_rows:,} rows, "
            f"95% margin of error +/-{self.margin_of_error_95:,.1f} per cell"
        )
        return "; ".join([text, self.signal_needed(), *self.notes])

    @property
    def warning(self) -> str | None:
        """A warning from public parameters, shown before anything is read or charged
        (:func:`privmob.privacy.signal.low_epsilon_warning`)."""
        from privmob.privacy.signal import low_epsilon_warning

        return low_epsilon_warning(self.cost.epsilon, self.margin_of_error_95)

    def _repr_html_(self) -> str:
        """The plan as a table in a notebook (what :meth:`summary` says, one row a figure)."""
        from html import escape

        rows = [
            ("plan", self.kind),
            ("privacy cost", self.cost.describe()),
            ("noisy cells", f"{self.cells:,}"),
            ("memory", f"~{self.memory_bytes / 1e6:,.1f} MB"),
            ("output rows", f"{self.output_rows:,}"),
            ("95% margin of error", f"+/-{self.margin_of_error_95:,.1f} per cell"),
            ("noise", self.noise),
        ]
        if self.parts > 1:
            rows.append(("ledger entries", str(self.parts)))
        body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        warning = f"<p><b>warning</b>: {escape(self.warning)}</p>" if self.warning else ""
        return (
            f"<table>{body}</table>{warning}"
            "<p>No data is read and nothing is charged by a plan.</p>"
        )


class Spec(Protocol):
    @property
    def kind(self) -> str: ...

    def plan(self) -> Plan: ...

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release: ...


@dataclass(frozen=True)
class OdSpec:
    """An origin-destination matrix over ``tessellation`` (see
    :func:`privmob.releases.od.od_matrix`)."""

    tessellation: Tessellation
    epsilon: float
    unit: Unit = Unit.USER
    max_trips: int | None = None
    tau: int | None = None
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    period: StudyPeriod = field(default_factory=StudyPeriod)
    bound_per: str = "release"
    kind: str = "od"
    same_tile: str = "exclude"
    #: each (origin, destination) counted at most once per user and period
    unique: bool = False

    def public_period(self) -> dict[str, object]:
        """The declared period and its bins (public; ``metadata.json`` ``definitions``)."""
        return self.period.to_dict()

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile."""
        from privmob.releases.kinds import SAME_TILE_RULES

        return SAME_TILE_RULES[self.same_tile]

    @cached_property
    def od_plan(self) -> Any:
        from privmob.releases.od import plan_od

        return plan_od(
            epsilon=self.epsilon,
            unit=self.unit,
            max_trips=self.max_trips,
            tau=self.tau,
            noise=self.noise,
            delta=self.delta,
            period=self.period,
            bound_per=self.bound_per,
        )

    @cached_property
    def _plan(self) -> Plan:
        from privmob.releases.kinds import same_tile_flag
        from privmob.releases.od import ODDomain

        p = self.od_plan
        domain = ODDomain(self.tessellation.k, self.period.n_bins, same_tile_flag(self.same_tile))
        rows = domain.od_cells
        return Plan(
            kind=self.kind,
            cost=p.total,
            cells=domain.released_cells,
            memory_bytes=domain_memory(domain.size, rows),
            output_rows=rows,
            margin_of_error_95=float(p.noise.margin_of_error(0.95)),
            noise=str(p.noise.kind),
            parts=len(p.parts),
        )

    def plan(self) -> Plan:
        return self._plan

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release:
        from privmob.releases.od import od_matrix

        if self.unique:
            from privmob.prepare.unique import unique_trips

            data = unique_trips(data, self.period)
        return od_matrix(
            data,
            tessellation=self.tessellation,
            epsilon=self.epsilon,
            accountant=accountant,
            unit=self.unit,
            max_trips=self.max_trips,
            tau=self.tau,
            noise=self.noise,
            delta=self.delta,
            period=self.period,
            bound_per=self.bound_per,
            rng=rng,
            step=progress,
            plan=self.od_plan,
            same_tile=self.same_tile,
        )


@dataclass(frozen=True)
class PopulationSpec:
    """Users per home zone (see :func:`privmob.releases.population.population_counts`)."""

    tessellation: Tessellation
    epsilon: float
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    night: tuple[int, int] = (20, 6)
    period: StudyPeriod = field(default_factory=StudyPeriod)
    kind: str = "population"

    def public_period(self) -> dict[str, object]:
        """The declared period (public)."""
        return self.period.to_dict()

    @cached_property
    def _plan(self) -> Plan:
        if self.night[0] == self.night[1]:
            raise ConfigError("the night window is empty")
        dist, cost = calibrate(
            self.noise, self.epsilon, l1_sensitivity=1, l2_sensitivity=1, delta=self.delta
        )
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

    def plan(self) -> Plan:
        return self._plan

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release:
        from privmob.releases.population import population_counts

        return population_counts(
            data,
            tessellation=self.tessellation,
            epsilon=self.epsilon,
            accountant=accountant,
            noise=self.noise,
            delta=self.delta,
            night=self.night,
            period=self.period,
            rng=rng,
            step=progress,
        )


@dataclass(frozen=True)
class ReportSpec:
    """A mobility report (see :func:`privmob.releases.report.mobility_report`); ``config`` is a
    :class:`~privmob.releases.report.ReportConfig` (epsilon, M, declared period, analyses)."""

    tessellation: Tessellation
    config: Any
    kind: str = "report"

    def public_period(self) -> dict[str, object]:
        """The declared period (public)."""
        start, end = self.config.period
        return {"start": str(start), "end": str(end), "bin": "time windows and weekdays"}

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile (od_flows)."""
        from privmob.releases.kinds import SAME_TILE_RULES

        return SAME_TILE_RULES[self.config.same_tile]

    @cached_property
    def _plan(self) -> Plan:
        from privmob.engine.dialect import DUCKDB
        from privmob.releases.report.analyses import sensitivity
        from privmob.releases.report.build import report_cost, time_bins
        from privmob.releases.report.sql import queries

        cfg = self.config
        cells = sum(
            size
            for _sql, size in queries(
                cfg, self.tessellation.k, len(time_bins(cfg)), DUCKDB
            ).values()
        )
        margins = []
        for name in cfg.selected:
            eps = cfg.epsilon_for(name)
            if eps > 0:
                dist, _ = calibrate(
                    cfg.noise_kind, eps, l1_sensitivity=sensitivity(name, cfg, "trips")
                )
                margins.append(float(dist.margin_of_error(0.95)))
        return Plan(
            kind=self.kind,
            cost=report_cost(cfg),
            cells=cells,
            memory_bytes=domain_memory(cells, cells),
            output_rows=cells,
            margin_of_error_95=max(margins, default=0.0),
            noise=str(cfg.noise_kind),
            parts=len(cfg.selected),
        )

    def plan(self) -> Plan:
        """``margin_of_error_95`` is the largest over the selected analyses."""
        return self._plan

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release:
        from privmob.releases.report import Tiles, mobility_report
        from privmob.releases.tiles import check_tessellation

        check_tessellation(data, self.tessellation)
        return mobility_report(
            data.engine,
            data,
            Tiles.from_tessellation(self.tessellation),
            self.config,
            accountant,
            rng=rng,
            progress=progress,
        )


@dataclass(frozen=True)
class DensitySpec:
    """Users per zone and hour of one week (see :func:`privmob.releases.density.density_release`);
    ``config`` is a :class:`~privmob.releases.density.DensityConfig`, ``week`` the public
    start of the week. ``run`` takes the density inputs (events, tower geometry)."""

    tessellation: Tessellation
    config: Any
    week: Any
    kind: str = "density"

    def public_period(self) -> dict[str, object]:
        """The declared week (public): 168 hours from ``week``."""
        return {"start": str(self.week), "bin": "1h", "bins": 168}

    @cached_property
    def _plan(self) -> Plan:
        from privmob.releases.density import HOURS_PER_WEEK

        cells = self.tessellation.k * HOURS_PER_WEEK + 2  # + outliers and out-of-domain
        return Plan(
            kind=self.kind,
            cost=self.config.cost(),
            cells=cells,
            memory_bytes=domain_memory(cells, cells),
            output_rows=self.tessellation.k * HOURS_PER_WEEK,
            # noise is added to Fourier coefficients of clusters chosen from noisy totals: no
            # fixed per-cell margin is known before the release
            margin_of_error_95=float("nan"),
            noise="fourier-perturbation" if self.config.method == "scheme" else "laplace",
            parts=2,
        )

    def plan(self) -> Plan:
        """``margin_of_error_95`` is NaN: the noise is on Fourier coefficients of clusters."""
        return self._plan

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release:
        from privmob.releases.density import density_release

        return density_release(
            data.engine, data.loaded, data.geometry, self.config, data.week_start, accountant,
            rng, progress,
        )  # fmt: skip


@dataclass(frozen=True)
class SeriesSpec:
    """An aggregated series (a file with one row per timestamp, and zone) published under
    landmark privacy (see :func:`privmob.releases.landmark.publish_series`). The time domain
    (``start``, ``end``, ``freq``) and the ``zones`` are public and declared; the file must
    hold exactly that grid. ``None`` for all three: the grid is the file's own (not protected;
    ``privmob series --domain-from-data``): the plan then knows no cells before reading."""

    epsilon: float
    sensitivity: float
    start: str | None
    end: str | None
    freq: str | None
    value_column: str = "value"
    time_column: str = "time"
    zone_column: str | None = None
    zones: tuple[str, ...] | None = None
    landmarks: tuple[int, ...] = ()
    scheme: str = "uniform"
    integer: bool | None = None
    value_bounds: tuple[float, float] | None = None
    kind: str = "series"

    def public_period(self) -> dict[str, object]:
        """The declared grid (public), or ``None`` values when read from the file."""
        return {"start": self.start, "end": self.end, "bin": self.freq}

    @cached_property
    def grid(self) -> Any:
        from privmob.domain import time_grid

        if self.start is None and self.end is None and self.freq is None:
            return None  # the file's own grid (not protected)
        return time_grid(str(self.start), str(self.end), str(self.freq))

    @cached_property
    def _plan(self) -> Plan:
        from privmob.releases.landmark import SCHEME_UNIT, Scheme, scheme_budgets

        if (self.zone_column is None) != (self.zones is None):
            raise ConfigError(
                "a series per zone needs both zone_column and the public zones",
                hint="pass zones=[...] (declared, never taken from the file)",
            )
        if not (self.sensitivity > 0 and math.isfinite(self.sensitivity)):
            raise ConfigError(
                f"the sensitivity must be a finite number > 0, got {self.sensitivity}"
            )
        scheme = Scheme(self.scheme)
        bins = 0 if self.grid is None else len(self.grid)
        smallest = self.epsilon
        if bins:  # the grid is known: the smallest budget of a bin under the scheme
            budgets = scheme_budgets(scheme, bins, list(self.landmarks), self.epsilon)
            smallest = float(budgets[budgets > 0].min()) if (budgets > 0).any() else smallest
        dist, _ = calibrate(
            NoiseKind.DISCRETE_LAPLACE, smallest, l1_sensitivity=max(1, round(self.sensitivity))
        )
        cells = bins * (len(self.zones) if self.zones else 1)
        return Plan(
            kind=self.kind,
            cost=Cost.pure(self.epsilon, SCHEME_UNIT[scheme]),
            cells=cells,
            memory_bytes=domain_memory(cells, cells),
            output_rows=cells,
            margin_of_error_95=float(dist.margin_of_error(0.95)) if bins else float("nan"),
            noise=str(dist.kind),
        )

    def plan(self) -> Plan:
        """``margin_of_error_95``: a bin with the scheme's smallest budget (discrete Laplace)."""
        return self._plan

    def load(self, source: Any) -> Any:
        """The series file read against the declared domain and bound to its content
        (:class:`~privmob.data.series_input.SeriesInput`)."""
        from pathlib import Path

        from privmob.data.series_input import check_time_domain, load_series

        path = Path(str(source))
        zones = list(self.zones) if self.zones is not None else None
        series = load_series(path, self.value_column, self.time_column, self.zone_column, zones)
        check_time_domain(series.labels, self.start, self.end, self.freq, path)
        return series

    def run(
        self, data: Any, accountant: Accountant, *, rng: Randomness | int | None, progress: Progress
    ) -> Release:
        from privmob.data.series_input import SeriesInput
        from privmob.releases.landmark import publish_series

        series = data if isinstance(data, SeriesInput) else self.load(data)
        values, labels, zone_labels = series
        progress("adding noise and charging the ledger")
        return publish_series(
            values,
            list(self.landmarks),
            self.epsilon,
            self.scheme,
            sensitivity=self.sensitivity,
            accountant=accountant,
            rng=rng,
            timestamps=labels,
            zones=zone_labels,
            integer=self.integer,
            value_bounds=self.value_bounds,
        )


def release(
    data: Any,
    spec: Spec,
    accountant: Accountant,
    *,
    rng: Randomness | int | None = None,
    progress: Progress | None = None,
    memory_limit: int | None = None,
) -> Release:
    """Run ``spec`` on ``data``: plan (public parameters only), refuse a plan over
    ``memory_limit`` or over the budget before any data is read, bind the budget to the
    input's content (refused if another dataset holds it), then count, add noise and charge
    the ledger (by the release function the spec wraps). :class:`privmob.Session` runs the
    same steps and publishes the release (``output=``)."""
    plan = spec.plan()
    plan.check_memory(memory_limit)
    accountant.precheck(plan.cost)
    accountant.bind_input(data)  # as the session does: the budget is bound to the data
    return spec.run(data, accountant, rng=rng, progress=progress or (lambda _m: None))
