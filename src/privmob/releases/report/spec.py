"""The report's release spec: its public parameters (:class:`~.config.ReportConfig`) and the
public tessellation, with the plan computed from them alone and the run of
:func:`~.build.report_draft` (the one signature of :mod:`privmob.releases.specs`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, cast

from privmob.engine.dialect import DUCKDB
from privmob.engine.relation import Loaded
from privmob.json_types import JSONObject
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.l2_bounds import capped_l2_squared, l2_of
from privmob.privacy.mechanisms import calibrate
from privmob.releases.base import Accountant
from privmob.releases.bound_choice import choice_notes
from privmob.releases.gate import Draft
from privmob.releases.kinds import SAME_TILE_RULES
from privmob.releases.specs import Plan, Progress, domain_memory
from privmob.releases.tiles import check_tessellation

from .analyses import sensitivity
from .build import composition_of, report_cost, report_draft, time_bins
from .config import ReportConfig
from .inputs import Tiles
from .split import target_notes
from .sql import queries

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation
    from privmob.privacy.samplers import RandomnessLike
    from privmob.releases.hierarchy import ZoneLevels

    from .levels import OdLevels

#: Memory the report needs per released cell beyond :func:`domain_memory` (calibrated on the
#: OD matrix's long table): every noisy count is also a Python int in the report's JSON
#: document, which is written and rendered to HTML from those lists. Measured on 2,000
#: Voronoi cells (4 million OD cells) at 780 MB, just above the minimum the plan then said (774 MB):
#: peak 850 MB, 0.70 GB above the process's baseline where 0.56 GB (the domain) and 64 MB
#: (the engine's floor) were set aside; with these 24 B a cell the minimum is about 0.1 GB
#: higher and the peak at it within the limit (`privmob report`, 10,000 points, 2026-12-02).
REPORT_DOCUMENT_BYTES_PER_CELL = 24


def _released(counted: str, cfg: ReportConfig) -> bool:
    """Whether the count vector ``counted`` is noised: its analysis is selected (dataset
    statistics are the users and the trip kinds)."""
    statistics = counted in ("users", "trip_kinds")
    return (statistics and "dataset_statistics" in cfg.selected) or counted in cfg.selected


def omitted_note(cfg: ReportConfig) -> tuple[str, ...]:
    """The plan's line on the analyses a report leaves out (none: no line)."""
    if not cfg.omitted:
        return ()
    left = ", ".join(a.replace("_", " ") for a in cfg.omitted)
    reason = next(iter(cfg.omitted.values()))
    return (
        f"left out: {left} ({reason}), before the budget is split: epsilon "
        f"{cfg.epsilon:g} goes to the {len(cfg.selected)} other analyses",
    )


def cell_cap_note(cfg: ReportConfig) -> tuple[str, ...]:
    """The plan's line on the OD cell cap (none without one)."""
    cap = cfg.od_cell_cap
    if cap is None:
        return ()
    return (
        f"od_flows: at most {cap} trips of one user counted in any one OD cell (enforced before "
        f"counting; a user's trips above it in a cell are dropped): L1 sensitivity "
        f"{cfg.max_trips} stays, L2 {l2_of(capped_l2_squared(cfg.max_trips, cap)):.4g} instead "
        f"of {cfg.max_trips}",
    )


@dataclass(frozen=True)
class ReportSpec:
    """A mobility report (see :func:`~.build.mobility_report`); ``config`` is a
    :class:`~.config.ReportConfig` (epsilon, M, declared period, analyses)."""

    tessellation: Tessellation
    config: ReportConfig
    kind: str = "report"
    records: ClassVar[str] = "trips"

    @property
    def unit(self) -> PrivacyUnit:
        """The report's unit of privacy (its config's)."""
        return self.config.unit

    def public_period(self) -> JSONObject:
        """The declared period (public)."""
        start, end = self.config.period
        return {"start": str(start), "end": str(end), "bin": "time windows and weekdays"}

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile (od_flows)."""
        return SAME_TILE_RULES[self.config.same_tile]

    @cached_property
    def zone_levels(self) -> ZoneLevels | None:
        """The public groups of the tiles (``config.hierarchy``), from the tessellation alone
        (a missing column: a ConfigError here, before any data is read)."""
        if not self.config.hierarchy:
            return None
        from privmob.releases.hierarchy import zone_levels

        return zone_levels(self.tessellation, self.config.hierarchy)

    @cached_property
    def od_levels(self) -> OdLevels | None:
        """od_flows' levels, split and noise (none without a hierarchy)."""
        if self.zone_levels is None:
            return None
        from .levels import OdLevels

        return OdLevels.plan(self.config, self.zone_levels, self.tessellation.k)

    @cached_property
    def _plan(self) -> Plan:
        cfg = self.config
        levels = self.od_levels
        counted = queries(cfg, self.tessellation.k, len(time_bins(cfg)), DUCKDB)
        cells = sum(size for name, (_sql, size) in counted.items() if _released(name, cfg))
        if levels is not None:  # the coarser levels' cells
            cells += sum(levels.tree.tree.sizes[:-1])
        plan = composition_of(cfg)
        margins = [] if plan is None else [float(c.margin) for c in plan.choices]
        for name in cfg.selected if plan is None else ():
            eps = cfg.epsilon_for(name)
            if eps > 0:
                dist, _ = calibrate(
                    cfg.noise_kind, eps, l1_sensitivity=sensitivity(name, cfg, "trips")
                )
                if levels is not None and name == "od_flows":  # its finest level's noise
                    dist = levels.noises[-1]
                margins.append(float(dist.margin_of_error(0.95)))
        largest = max(margins, default=0.0)
        chosen = (
            ()
            if cfg.bound_choice is None
            else choice_notes(cfg.bound_choice, cfg.bound_epsilon, largest)
        )
        return Plan(
            kind=self.kind,
            cost=report_cost(cfg, plan),
            cells=cells,
            memory_bytes=domain_memory(cells, cells) + cells * REPORT_DOCUMENT_BYTES_PER_CELL,
            output_rows=cells,
            margin_of_error_95=largest,
            noise=str(cfg.noise_kind)
            if plan is None or not plan.gaussian
            else "discrete-laplace and discrete-gaussian (zCDP composition)",
            parts=len(cfg.selected),
            notes=(
                *chosen,
                *omitted_note(cfg),
                *cell_cap_note(cfg),
                *(() if levels is None else (levels.note(),)),
                *(target_notes(cfg) if cfg.target_margins else ()),
                *(plan.notes() if plan is not None else ()),
            ),
        )

    def plan(self) -> Plan:
        """``margin_of_error_95`` is the largest over the selected analyses."""
        return self._plan

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Progress
    ) -> Draft:
        check_tessellation(data, self.tessellation)
        points = cast(Loaded, data)  # the trip points its load step reads
        return report_draft(
            points.engine,
            points,
            Tiles.from_tessellation(self.tessellation),
            self.config,
            accountant,
            rng=rng,
            progress=progress,
            levels=self.od_levels,
        )
