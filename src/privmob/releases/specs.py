"""Release specifications: the public parameters of one release, its :class:`Plan` (from those
parameters only, before any data is read) and the one release signature of the library,
:func:`release` ``(data, spec, accountant, *, rng, progress)``: every spec's ``draft``
goes through the one gate (:mod:`privmob.releases.gate`).

The count kinds' specs live with their kind and run on the count template
(:mod:`privmob.releases.counts`): :class:`~privmob.releases.od.OdSpec`,
:class:`~privmob.releases.population.PopulationSpec` (re-exported here); the other specs are
thin typed wrappers over their release functions, whose privacy semantics are theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Protocol, Unpack, cast

from privmob.domain import Period
from privmob.errors import BudgetError, ConfigError
from privmob.json_types import JSONObject
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.releases import gate
from privmob.releases.base import Accountant
from privmob.releases.gate import Draft
from privmob.releases.od import OdSpec as OdSpec  # the count kinds' specs, with their kinds
from privmob.releases.plan import Plan as Plan
from privmob.releases.plan import PlannedOnce
from privmob.releases.plan import domain_memory as domain_memory
from privmob.releases.release import Release
from privmob.surface import option, spelled

if TYPE_CHECKING:
    import pandas as pd

    from privmob.data.series_input import SeriesInput
    from privmob.data.tessellation import Tessellation
    from privmob.privacy.samplers import RandomnessLike
    from privmob.releases.density import DensityConfig
    from privmob.releases.density_inputs import DensityInputs
    from privmob.releases.landmark import AdaptiveRule, Landmark
    from privmob.releases.landmark.options import SeriesFields
    from privmob.releases.loaded import LoadedInput
    from privmob.releases.population import PopulationSpec as PopulationSpec

Progress = Callable[[str], None]


def __getattr__(name: str) -> object:
    """:class:`~privmob.releases.population.PopulationSpec`, re-exported here, imported on
    first use: not before the plan of another release (issue 43)."""
    if name == "PopulationSpec":
        from privmob.releases.population import PopulationSpec

        return PopulationSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: what a spec's ``records`` may say it counts: trips (one-row trips, or made from events or
#: traces), trip points, located events, homes (one per user, from events), a published series
RECORDS = ("trips", "trip-points", "events", "homes", "series")


class Spec(Protocol):
    """A release kind's spec: its public parameters, its plan, and its draft (exact values
    and the mechanism; the lifecycle charges it, then draws the noise: ``releases/gate.py``).

    Everything the lifecycle reads of a spec is named here (no attribute is looked up by
    name): ``records``, what it counts (:data:`RECORDS`: the session's default loader reads the
    input as that); ``unit``, its unit of privacy; ``public_period()``, the declared period
    (``metadata.json`` ``definitions``; ``None`` values when the input gives it);
    ``same_tile_rule``, what happens to a trip within one tile (``None``: the kind counts no
    trips)."""

    @property
    def kind(self) -> str: ...

    @property
    def records(self) -> str: ...

    @property
    def unit(self) -> PrivacyUnit | str: ...

    @property
    def same_tile_rule(self) -> str | None: ...

    def public_period(self) -> JSONObject: ...

    def plan(self) -> Plan: ...

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Progress
    ) -> Draft: ...


class LandmarkGuarantee:
    """A spec released under a landmark ``scheme`` (or event-level): its unit of privacy is
    that scheme's; it counts no trips (no same-tile rule)."""

    scheme: str
    same_tile_rule: ClassVar[None] = None

    @property
    def unit(self) -> str:
        """The unit of its scheme's guarantee (a landmark scheme's, or event-level)."""
        from privmob.releases.landmark import SCHEME_UNIT, Scheme

        return SCHEME_UNIT[Scheme(self.scheme)]


class Telling(Protocol):
    """What a load step tells as it reads (the session's ``tell`` and ``progress``)."""

    @property
    def tell(self) -> Progress: ...

    @property
    def progress(self) -> Progress: ...


@dataclass(frozen=True)
class DensitySpec(PlannedOnce):
    """Users per zone and hour of one week (see :func:`privmob.releases.density.density_release`);
    ``config`` is a :class:`~privmob.releases.density.DensityConfig`, ``week`` the public
    start of the week. ``run`` takes the density inputs (events, tower geometry)."""

    tessellation: Tessellation
    config: DensityConfig
    week: str
    kind: str = "density"
    records: ClassVar[str] = "events"
    unit: ClassVar[PrivacyUnit] = PrivacyUnit.USER
    same_tile_rule: ClassVar[None] = None

    def public_period(self) -> JSONObject:
        """The declared week (public): 168 hours from ``week``."""
        return {"start": str(self.week), "bin": "1h", "bins": 168}

    def make_plan(self) -> Plan:
        """``margin_of_error_95`` is NaN: the noise is on Fourier coefficients of clusters."""
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

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Progress
    ) -> Draft:
        from privmob.releases.density.release import density_draft

        progress("pre-sampling")
        inputs = cast("DensityInputs", data)  # what its load step gives (the lifecycle's)
        return density_draft(
            inputs.engine, inputs.loaded, inputs.geometry, self.config, inputs.week_start,
            accountant, rng, progress,
        )  # fmt: skip


@dataclass(frozen=True)
class SeriesSpec(LandmarkGuarantee, PlannedOnce):
    """An aggregated series (a file with one row per timestamp, and zone) published under
    landmark privacy (see :func:`privmob.releases.landmark.publish_series`). The time domain
    (``start``, ``end``, ``freq``) and the ``zones`` are public and declared; the file must
    hold exactly that grid. ``None`` for all three: the grid is the file's own (not protected;
    ``privmob series --domain-from-data``): the plan then knows no cells before reading, and
    the release is stamped not for publication (:attr:`marks`). ``landmarks``: positions in
    the grid or its timestamps (:func:`~privmob.releases.landmark.resolve_landmarks`);
    ``rule``: the adaptive scheme's sampling-rate rule; ``fill_value``: the public value
    before the first release (skip, adaptive)."""

    epsilon: float
    sensitivity: float
    start: str | None
    end: str | None
    freq: str | None
    value_column: str = "value"
    time_column: str = "time"
    zone_column: str | None = None
    zones: tuple[str, ...] | None = None
    landmarks: tuple[Landmark, ...] = ()
    scheme: str = "uniform"
    integer: bool | None = None
    value_bounds: tuple[float, float] | None = None
    kind: str = "series"
    rule: AdaptiveRule | None = None
    fill_value: float = 0.0
    records: ClassVar[str] = "series"

    @classmethod
    def over(
        cls,
        epsilon: float,
        sensitivity: float,
        period: Period | None,
        freq: str | None,
        *,
        domain_from_data: bool = False,
        zones: Sequence[str] | None = None,
        landmarks: Sequence[Landmark] = (),
        **options: Unpack[SeriesFields],
    ) -> SeriesSpec:
        """The spec of a series on the grid of ``period`` every ``freq`` (both declared), or
        on the file's own timestamps with ``domain_from_data`` (neither given); ``options``:
        the other fields (``Session.series``' :class:`~privmob.releases.landmark.SeriesOptions`).
        """
        if domain_from_data:
            if period is not None or freq is not None:
                raise ConfigError(
                    "--domain-from-data reads the time grid from the file: it replaces the "
                    "period (--start, --end) and --bin",
                    hint="declare the grid, or read it from the file (not for publication)",
                )
            start = end = None
        else:
            study = period or Period()
            if study.start is None or study.end is None or freq is None:
                raise ConfigError(
                    "a series needs the public time grid: a declared period and its bin",
                    hint='e.g. period=pm.Period("2024-01-01", "2024-02-01"), freq="1h" '
                    "(--start, --end, --bin); or domain_from_data=True (--domain-from-data: "
                    "the file's timestamps, not for publication)",
                )
            start, end = study.start.isoformat(sep=" "), study.end.isoformat(sep=" ")
        return cls(
            epsilon,
            sensitivity,
            start,
            end,
            freq,
            zones=None if zones is None else tuple(str(z) for z in zones),
            landmarks=tuple(landmarks),
            **options,
        )

    def public_period(self) -> JSONObject:
        """The declared grid (public), or ``None`` values when read from the file."""
        return {"start": self.start, "end": self.end, "bin": self.freq}

    @cached_property
    def grid(self) -> pd.DatetimeIndex | None:
        from privmob.domain import time_grid

        if self.start is None and self.end is None and self.freq is None:
            return None  # the file's own grid (not protected)
        return time_grid(str(self.start), str(self.end), str(self.freq))

    def positions(self, labels: Sequence[object]) -> list[int]:
        """The landmarks' positions in a grid of time ``labels``."""
        from privmob.releases.landmark import resolve_landmarks

        return resolve_landmarks(self.landmarks, labels)

    @property
    def marks(self) -> tuple[Callable[[Release], None], ...]:
        """What the lifecycle applies before the charge: not for publication when the time
        domain is the file's own."""
        from privmob.releases.landmark import mark_domain_from_data

        return () if self.grid is not None else (mark_domain_from_data,)

    def make_plan(self) -> Plan:
        """``margin_of_error_95``: a bin with the scheme's smallest budget (discrete Laplace)."""
        from privmob.releases.landmark import SCHEME_UNIT, Scheme, scheme_budgets

        if (self.zone_column is None) != (self.zones is None):
            raise ConfigError(
                "a series per zone needs both its zone column and the public zones",
                hint="pass "
                + spelled("--zone-column and --zones a,b", "zone_column= and zones=[...]")
                + ": the zones are declared, never taken from the file",
            )
        if not (self.sensitivity > 0 and math.isfinite(self.sensitivity)):
            raise ConfigError(
                f"the sensitivity must be a finite number > 0, got {self.sensitivity}"
            )
        scheme = Scheme(self.scheme)
        bins = 0 if self.grid is None else len(self.grid)
        smallest = self.epsilon
        if bins:  # the grid is known: the smallest budget of a bin under the scheme
            assert self.grid is not None  # bins > 0: the grid is declared
            marks = self.positions(list(self.grid))
            budgets = scheme_budgets(scheme, bins, marks, self.epsilon)
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

    def load(
        self,
        source: object,
        *,
        warn: Progress | None = None,
        progress: Progress | None = None,
    ) -> SeriesInput:
        """The series file read against the declared domain (its timestamps checked in file
        order) and bound to its content (:class:`~privmob.data.series_input.SeriesInput`);
        ``warn`` is told when the domain is the file's own."""
        from pathlib import Path

        from privmob.data.series_input import check_time_domain, load_series

        if progress is not None:
            progress("reading the series")
        path = Path(str(source))
        zones = list(self.zones) if self.zones is not None else None
        series = load_series(
            path, self.value_column, self.time_column, self.zone_column, zones, grid=self.grid
        )
        check_time_domain(series.labels, self.start, self.end, self.freq, path, warn=warn)
        return series

    def loader(self, source: object) -> Callable[[Telling], SeriesInput]:
        """The lifecycle's load step for the file ``source``: read with the session's
        warnings and steps."""
        return lambda session: self.load(source, warn=session.tell, progress=session.progress)

    def draft(
        self, data: object, accountant: Accountant, *, rng: RandomnessLike, progress: Progress
    ) -> Draft:
        from privmob.data.series_input import SeriesInput
        from privmob.releases.landmark.release import series_draft

        series = data if isinstance(data, SeriesInput) else self.load(data)
        values, labels, zone_labels = series
        return series_draft(
            values,
            self.positions(labels),
            self.epsilon,
            self.scheme,
            sensitivity=self.sensitivity,
            accountant=accountant,
            rng=rng,
            timestamps=labels,
            zones=zone_labels,
            integer=self.integer,
            rule=self.rule,
            fill_value=self.fill_value,
            value_bounds=self.value_bounds,
        )


def before_reading(
    plan: Plan,
    accountant: Accountant,
    *,
    max_margin: float | None = None,
    warn: Callable[[str], None] | None = None,
) -> None:
    """What every release's lifecycle refuses, from public parameters, before any data is
    read: a 95% margin over ``max_margin``, then a cost the budget cannot pay (the one budget
    precheck, :meth:`Accountant.precheck`); ``warn`` is told the plan's warning between."""
    plan.check_margin(max_margin)  # the expected signal
    if plan.warning and warn is not None:
        warn(plan.warning)
    check_unit(plan.cost, accountant)
    accountant.precheck(plan.cost)


def check_unit(cost: Cost, accountant: Accountant) -> None:
    """Refuse, before any data is read and with the command that leads on, a release whose
    unit of privacy the dataset's budget does not take: a trip-level release on a budget per
    user without a group size (rides without a rider id need a trip-level budget of their
    own), a user-level release on a budget per trip. Other pairs are left to the ledger's
    own check (:meth:`Accountant.precheck`), as is a dataset without a budget."""
    ledger, dataset = accountant.ledger, accountant.dataset
    if not ledger.has_budget(dataset):
        return
    unit, released = PrivacyUnit(ledger.budget(dataset).unit), PrivacyUnit(cost.unit)
    if released is PrivacyUnit.TRIP and unit is PrivacyUnit.USER:
        if accountant.group_size is not None:
            return  # charged by group privacy, the group size enforced
        raise BudgetError(
            f"dataset '{dataset}' has a budget per user in {ledger.path}: a trip-level release "
            "is charged to it only by group privacy, with the most trips one user can have",
            hint="rides without a rider id (bike-share files) need a trip-level budget of "
            "their own, under another dataset name: "
            + spelled(
                f"privmob ledger init {dataset}-trips --epsilon 5 --unit trip, then --dataset "
                f"{dataset}-trips; with a rider id: --group-size N (the most trips of one "
                "user), or --unit user -T N",
                f'pm.Session(..., dataset="{dataset}-trips", budget=pm.PureDP(5)) and '
                'unit="trip" on the release (the budget is made per trip); with a rider id: '
                'pm.Session(..., group_size=N) (the most trips of one user), or unit="user" '
                "with a bound",
            ),
        )
    if released is PrivacyUnit.USER and unit is PrivacyUnit.TRIP:
        raise ConfigError(
            f"dataset '{dataset}' has a budget per trip in {ledger.path} (each trip its own "
            "unit, as for rides without a rider id): a user-level release cannot be charged "
            "to it",
            hint=f"release per trip: {option('unit', 'trip')} (od, counts, trips-per-hour, "
            "report); a user-level release needs rider ids and a dataset whose budget is per "
            "user",
        )


def release(
    data: LoadedInput,
    spec: Spec,
    accountant: Accountant,
    *,
    rng: RandomnessLike = None,
    progress: Progress | None = None,
    memory_limit: int | None = None,
) -> Release:
    """Run ``spec`` on ``data``: plan (public parameters only), refuse a plan over
    ``memory_limit`` or over the budget before any data is read, bind the budget to the
    input's content (refused if another dataset holds it), then the spec's draft (exact
    values), the charge and the noise (the one gate, :func:`privmob.releases.gate.run`).
    :class:`privmob.Session` runs the same steps and publishes the release (``output=``)."""
    plan = spec.plan()
    plan.check_memory(memory_limit)
    before_reading(plan, accountant)
    accountant.bind_input(data)  # as the session does: the budget is bound to the data
    step = progress or (lambda _m: None)
    return gate.run(lambda: spec.draft(data, accountant, rng=rng, progress=step), accountant)
