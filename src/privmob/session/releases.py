"""One typed method per release of :class:`Session`, each with its ``plan_*`` twin (which reads
no data and charges nothing). Every method builds the release's spec from its arguments and
hands it to the one lifecycle, :meth:`~privmob.session.base.SessionBase.run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Unpack, cast

from privmob.domain import Period
from privmob.dp import (
    MaxTripsPerUser,
    MaxVisitsPerWeek,
    PerUser,
    PrivacyUnit,
    as_period,
    bound_value,
)
from privmob.privacy.bound_choice import CHOICE_KEYWORDS, choice_of
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.kinds import KINDS, Kind, deprecated
from privmob.releases.specs import (
    DensitySpec,
    OdSpec,
    Plan,
    SeriesSpec,
)
from privmob.results import ReleaseResult
from privmob.session.base import DEPRECATED
from privmob.session.bounds import fixed_per_user_bound, per_user_bound
from privmob.session.counts import SessionCounts
from privmob.session.keywords import (
    OdOptions,
    PopulationOptions,
    ReportOptions,
    refuse_unknown,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from privmob.evaluate.programme import Programme, ProgrammePlan
    from privmob.releases.density import DensityOptions
    from privmob.releases.landmark import SeriesOptions
    from privmob.releases.population import PopulationSpec
    from privmob.releases.report import ReportSpec
    from privmob.session.keywords import ReportConfigOptions


class Session(SessionCounts):
    """Differentially private releases of one mobility dataset.

    ``data``: a CSV / Parquet path or folder, or a pandas / Polars / Arrow table (trips, trip
    points or events; ``shape`` is detected from the columns unless given). ``tessellation``:
    a path, a GeoDataFrame or a Tessellation (public, read once). ``budget``: the dataset's
    total budget (``PureDP``, ``ApproxDP``, ``RhoZCDP`` or a number = pure epsilon), set in the
    ledger if it has none and refused if it has another. ``ledger``: a SQLite ledger path; when
    omitted, an in-memory ledger for exploration (a private temporary file removed on
    :meth:`close` or at exit; it needs a ``budget``). ``unit``: what the budget protects
    (user by default; landmark or event for series). ``group_size``: charge trip- or
    event-level releases to a user budget by group privacy (enforced where the release can).
    ``engine``: ``"duckdb"`` (default), ``"spark"`` or an engine object. ``memory_limit``:
    e.g. ``"8GB"``; a release whose plan needs more is refused before it reads data.
    ``timezone``: the zone of the releases' days, hours and bins; ``input_timezone``: the zone
    that timestamps without an offset are read in (default: ``timezone``), e.g. ``"UTC"`` for
    logs in UTC released in local time.
    ``cells``: the towers table (``cell_id, lat, lng``) of phone events (density).
    Files as they are published (the CLI's ``--delimiter``, ``--names``, ``--no-header``,
    ``--uid-from-filename``): ``delimiter``; ``names`` (the columns of files without header
    row, in order); ``header=False`` (no header row: ``column0, ...`` unless ``names``);
    ``uid_from_filename`` (per-user files: the user id is each file's name without its
    extensions, e.g. Cabspotting's ``new_abboip.txt``). Files of an input folder that are not
    data (hidden, LICENSE, README, notes, ...) are skipped with a
    :class:`~privmob.errors.PrivmobWarning`.
    ``warn``: how warnings for the operator before a charge are given (default: a
    :class:`~privmob.errors.PrivmobWarning`); never recorded in a release.
    ``confirm``: release all the same what a plan warns about (an epsilon below 0.1: its
    cells are mostly noise; more than 10 million cells); without it such a release is refused
    before anything is read or charged (the CLI's ``--yes``).
    ``seed``: TESTS ONLY, fixed noise, outputs stamped "not for publication".
    ``max_margin``: refuse, before any data is read, a release whose 95% margin of error per
    cell is above it (the count you expect per cell: a larger margin makes the cells noise).
    ``max_layer_size``: the largest map layer file written (e.g. ``"500MB"``; default 200 MB,
    ``privmob.render.layers.MAX_LAYER_BYTES``); ``all_flows``: OD layers keep every non-zero
    cell instead of the flows above the noise floor only.
    ``offline_maps``: the maps of notebook displays and of the report's HTML draw no web
    basemap (OpenStreetMap tiles fetched by the browser that shows them, by default): the
    HTML then names no external address (:mod:`privmob.render.basemap`).
    The keywords of the input, the engine and the ledger are given in their three typed groups
    (:mod:`privmob.session.options`): ``input=pm.Input(shape=, columns=, delimiter=, names=,
    header=, uid_from_filename=, timezone=, input_timezone=, tile_id=, cells=, trip_rule=,
    stay_distance=, stay_minutes=)``, ``engine=pm.EngineOptions(engine, memory_limit=,
    spill_dir=, spark_master=, spark_conf=)``, ``ledger=pm.LedgerOptions(ledger, dataset=,
    budget=, unit=, group_size=, new_dataset_for_same_data=)``; given as the constructor's own
    keywords they still work for one minor version, with a :class:`DeprecationWarning`.

    Public: the release methods and their ``plan_*`` twins, :meth:`plan_programme`,
    :meth:`run` (the lifecycle, for a spec built by hand), :meth:`close` and ``ledger``; the
    loaders, the engine and the accountant are the session's own (their earlier public names
    warn).
    """

    # -- OD matrix --------------------------------------------------------------------------
    def _od_spec(
        self,
        epsilon: float,
        per_user: PerUser | None,
        max_trips: MaxTripsPerUser | int | str | None,
        options: OdOptions,
    ) -> OdSpec:
        refuse_unknown("od", options, OdOptions)
        max_trips = per_user_bound("od", per_user, max_trips)
        return OdSpec(
            self._tiles(),
            epsilon,
            unit=PrivacyUnit(options.get("unit", PrivacyUnit.USER)),
            max_trips=(
                max_trips if isinstance(max_trips, str) else bound_value(max_trips, MaxTripsPerUser)
            ),
            tau=options.get("tau"),
            noise=options.get("noise", NoiseKind.DISCRETE_LAPLACE),
            delta=options.get("delta", 0.0),
            period=as_period(options.get("period")),
            bound_per=options.get("bound_per", "release"),
            same_tile=options.get("same_tile", "exclude"),
            unique=options.get("unique", False),
            hierarchy=_levels(options.get("hierarchy", ())),
            hierarchy_weights=tuple((options.get("hierarchy_weights") or {}).items()),
            bound_choice=choice_of(options),
        )

    def plan_od(
        self,
        *,
        epsilon: float,
        per_user: PerUser | None = None,
        max_trips: MaxTripsPerUser | int | str | None = None,
        **options: Unpack[OdOptions],
    ) -> Plan:
        """The plan of :meth:`od` with these parameters (reads no data, charges nothing)."""
        return self._od_spec(epsilon, per_user, max_trips, options).plan()

    def od(
        self,
        *,
        epsilon: float,
        per_user: PerUser | None = None,
        max_trips: MaxTripsPerUser | int | str | None = None,
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        **options: Unpack[OdOptions],
    ) -> ReleaseResult:
        """A private origin-destination matrix per period, from trips, trip points or events.

        Guarantee (``unit="user"``): each user keeps at most ``per_user=pm.PerUser(T,
        "trips")`` trips (keyed random sampling; ``max_trips=T`` is its deprecated spelling),
        every cell of the public domain (every ordered pair of distinct tiles in every bin of
        ``period``, plus outliers cells) gets noise of scale T/epsilon: epsilon-DP
        per user (discrete Laplace) or (epsilon, delta)-DP (discrete Gaussian). With
        ``bound_per="period"`` the bound and the cost are per period. ``unit="trip"``: per
        trip. Counts are published as drawn (unbiased, may be negative); ``tau=0`` clamps
        negatives to 0 and ``tau > 0`` suppresses below tau (post-processing, biased).
        ``same_tile``: trips within one tile are left out (``"exclude"``) or released on the
        diagonal (``"include"``), the same rule as the report's. ``options``
        (:class:`~privmob.session.keywords.OdOptions`, shared with :meth:`plan_od`):
        ``period``, ``unit``, ``tau``, ``noise``, ``delta``, ``bound_per``, ``same_tile``,
        ``unique``.

        ``per_user=pm.PerUser("auto", "trips")``: the bound is chosen privately, the DP
        ``bound_quantile`` (0.9) of trips per user over the public candidates 1..``bound_max``
        (100), by the exponential mechanism from ``bound_share`` (0.1) of epsilon; the counts
        get the rest. ``rescale=True``: the cells are multiplied by a noisy (trips up to
        ``bound_max`` per user) / (trips kept), from ``rescale_share`` (0.05) of epsilon, its
        error stated in ``params.rescale``. Every part is charged at once, before any noise;
        the parts add up to ``epsilon`` (:mod:`privmob.releases.bound_choice`).

        ``output``: a folder where the release is published atomically (staged, charged,
        renamed into place; refused before anything is read if it cannot be written), with
        map layers in ``formats`` (``geoparquet``, ``geojson``, ``csv``) beside its tables.
        Without it the release is charged and returned; write it later with ``write``.
        """
        spec = self._od_spec(epsilon, per_user, max_trips, options)
        return self.run(spec, output=output, overwrite=overwrite, formats=formats)

    # -- population -------------------------------------------------------------------------
    def _population_spec(self, epsilon: float, options: PopulationOptions) -> PopulationSpec:
        from privmob.releases.population import PopulationSpec  # on first use (issue 43)

        refuse_unknown("population", options, PopulationOptions)
        return PopulationSpec(
            self._tiles(),
            epsilon,
            options.get("noise", NoiseKind.DISCRETE_LAPLACE),
            options.get("delta", 0.0),
            options.get("night", (20, 6)),
            as_period(options.get("period")),
            zone_mapping=options.get("zone_mapping", "contain"),
            cells=self.cells,
        )

    def plan_population(self, *, epsilon: float, **options: Unpack[PopulationOptions]) -> Plan:
        """The plan of :meth:`population` (reads no data, charges nothing)."""
        return self._population_spec(epsilon, options).plan()

    def population(
        self,
        *,
        epsilon: float,
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        **options: Unpack[PopulationOptions],
    ) -> ReleaseResult:
        """Users per home zone (home = most frequent zone in the ``night`` hours), from events
        or trip points.

        Guarantee: user-level epsilon-DP (discrete Laplace, scale 1/epsilon) or (epsilon,
        delta)-DP (discrete Gaussian): each user has exactly one cell (a zone, "outside" or
        "unknown home"), so the L1 sensitivity is 1; every zone gets noise; negative counts
        become 0 (post-processing). ``zone_mapping="voronoi"`` (phone events with a
        ``cell_id`` and the session's ``cells``, the towers table): homes are found per tower
        and the noisy tower counts are split over the zones by the towers' Voronoi area shares
        (post-processing; fractional values), as ``privmob population --zone-mapping voronoi``.
        ``options`` (:class:`~privmob.session.keywords.PopulationOptions`, shared with
        :meth:`plan_population`): ``period``, ``night``, ``noise``, ``delta``,
        ``zone_mapping``.

        ``output``: a folder where the release is published atomically (staged, charged,
        renamed into place; refused before anything is read if it cannot be written), with
        map layers in ``formats`` (``geoparquet``, ``geojson``, ``csv``) beside its tables.
        Without it the release is charged and returned; write it later with ``write``.
        """
        spec = self._population_spec(epsilon, options)
        return self.run(spec, output=output, overwrite=overwrite, formats=formats)

    # -- mobility report ---------------------------------------------------------------------
    def _report_spec(
        self,
        epsilon: float,
        period: Period,
        per_user: PerUser | None,
        max_trips: MaxTripsPerUser | int | str | None,
        options: ReportOptions,
    ) -> ReportSpec:
        from privmob.releases.report import ReportSpec  # on first use (issue 43)
        from privmob.releases.report.split import build_config

        refuse_unknown("report", options, ReportOptions)
        bound = per_user_bound("report", per_user, max_trips)
        study = as_period(period)
        rest = {k: v for k, v in options.items() if k not in CHOICE_KEYWORDS}
        cfg = build_config(
            epsilon=epsilon,
            max_trips=bound if isinstance(bound, str) else bound_value(bound, MaxTripsPerUser),
            period=(study.start, study.end),
            bound_choice=choice_of(options),
            **cast("ReportConfigOptions", rest),
        )
        return ReportSpec(self._tiles(), cfg)

    def plan_report(
        self,
        *,
        epsilon: float,
        period: Period,
        per_user: PerUser | None = None,
        max_trips: MaxTripsPerUser | int | str | None = None,
        **options: Unpack[ReportOptions],
    ) -> Plan:
        """The plan of :meth:`report` (reads no data, charges nothing)."""
        return self._report_spec(epsilon, period, per_user, max_trips, options).plan()

    def report(
        self,
        *,
        epsilon: float,
        period: Period,
        per_user: PerUser | None = None,
        max_trips: MaxTripsPerUser | int | str | None = None,
        output: str | Path | None = None,
        overwrite: bool = False,
        **options: Unpack[ReportOptions],
    ) -> ReleaseResult:
        """A mobility report (trip counts over time and space, OD flows, trip length and
        duration, visits per user, ...) from trip points, raw GPS traces or one-row trips with
        start and end coordinates (as :meth:`od` reads them).

        Guarantee: ``epsilon``-DP (pure) per user with at most ``per_user=pm.PerUser(T,
        "trips")`` trips (enforced by sampling; ``max_trips=T`` is its deprecated spelling),
        or per trip with ``unit="trip"``; the budget is split over the analyses, every analysis
        is released over domains built from public parameters only.
        The command's options, as keywords (``unit`` and these:
        :class:`~privmob.session.keywords.ReportOptions`, shared with :meth:`plan_report`):
        ``analyses`` (a subset, default all 15),
        ``weights`` (the budget split: ``{"od_flows": 3}``, missing analyses weigh 1),
        ``target_margins`` (the split from what you need: 95% margins per analysis,
        ``{"od_flows": 50}``, solved into weights before reading with the noise each analysis
        gets under the composition; the plan's notes say each analysis's expected margin and
        which targets this epsilon cannot meet),
        ``ranges`` (histogram ranges ``{"travel_time": (0, 120, 5)}``: lo, hi, width),
        ``time_windows`` (the hours that start the windows, default 2, 6, 10, 14, 18, 22),
        ``same_tile`` (trips within one tile in ``od_flows``: ``"exclude"`` or ``"include"``),
        ``delta`` and ``composition`` (``"auto"``: with a ``delta`` > 0 the analyses compose by
        zCDP, each count vector getting discrete Gaussian noise where that lowers its margin
        and no analysis's margin grows, and the report is ``(epsilon, delta)``-DP; without a
        delta pure epsilon as before; ``"pure"`` or ``"zcdp"`` to insist, ``"zcdp"`` with no
        delta takes 1e-9; the plan's notes say each part's mechanism and why),
        ``od_cell_cap`` (zCDP only: at most that many trips of one user counted in any one OD
        cell, enforced before counting, so ``od_flows``' L2 sensitivity is about
        ``sqrt(T * od_cell_cap)`` instead of ``T``; refused without a ``delta``),
        ``hierarchy`` (``"borough"``: ``od_flows`` released at coarser public zones too, as
        :meth:`od`'s ``hierarchy``: its epsilon split across the levels, the consistent
        estimates released, each coarser level as the table ``od_flows_by_<level>``; pure
        epsilon and a fixed bound only; the cost is unchanged; ``hierarchy_weights``
        ``{"borough": 1, "tile": 3}``: the split across the levels, as :meth:`od`'s).
        ``per_user=pm.PerUser("auto", "trips")``: T chosen privately, as :meth:`od` chooses
        it (``bound_quantile``, ``bound_share``, ``bound_max``), charged with the analyses
        before any noise; the analyses share the rest of ``epsilon`` under either composition
        (no ``target_margins``, no rescale).
        ``output``: the path of the HTML report, published atomically with ``report.json``
        and its tables beside it once charged; without it, ``ReleaseResult.write_html(path)``
        writes them later.
        """
        from functools import partial

        from privmob.releases.report import load_report_input

        spec = self._report_spec(epsilon, period, per_user, max_trips, options)
        out = None
        if output is not None:
            from privmob.render.report_files import report_output

            out = report_output(Path(output), overwrite=overwrite, basemap=not self.offline_maps)
        return self.run(spec, partial(load_report_input, spec.config.unit), output=out)

    # -- density -----------------------------------------------------------------------------
    def _density_spec(
        self,
        epsilon: float,
        week: str,
        per_user: PerUser | None,
        max_visits: MaxVisitsPerWeek | int | None,
        options: DensityOptions,
    ) -> DensitySpec:
        from privmob.releases.density import DensityConfig
        from privmob.releases.density_inputs import parse_week

        parse_week(week)  # a public parameter, checked before anything else
        given = fixed_per_user_bound("density", per_user, max_visits)
        bound = int(bound_value(30 if given is None else given, MaxVisitsPerWeek) or 0)
        cfg = DensityConfig(epsilon, bound, **options)
        return DensitySpec(self._tiles(), cfg, week)

    def plan_density(
        self,
        *,
        epsilon: float,
        week: str,
        per_user: PerUser | None = None,
        max_visits: MaxVisitsPerWeek | int | None = None,
        **options: Unpack[DensityOptions],
    ) -> Plan:
        """The plan of :meth:`density` (reads no data, charges nothing)."""
        return self._density_spec(epsilon, week, per_user, max_visits, options).plan()

    def density(
        self,
        *,
        epsilon: float,
        week: str,
        per_user: PerUser | None = None,
        max_visits: MaxVisitsPerWeek | int | None = None,
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        **options: Unpack[DensityOptions],
    ) -> ReleaseResult:
        """Users per zone and hour of the week starting ``week`` (public), from phone events
        with a ``cell_id`` and the session's ``cells`` table (tower positions).

        Guarantee: each user keeps at most ``per_user=pm.PerUser(n, "visits")`` (cell, hour)
        visits in the week (pre-sampling, enforced; default 30; ``max_visits=n`` is its
        deprecated spelling); EFPA noise on the Fourier coefficients of clusters of tower
        cells (``method="scheme"``) or Laplace noise on every cell (``"lpa"``), epsilon-DP per
        user (or (epsilon, delta) with ``delta``), plus the outliers cell's share; counts are
        then spread over the zones by public Voronoi area shares (post-processing).
        ``options``: the other :class:`~privmob.releases.density.DensityConfig` fields
        (``delta``, ``method``, ``cover``, ``totals``, ``clustering``, ``tau``, ``fourier``,
        ``smoothing``, ``outliers_epsilon``).

        ``output``: a folder where the release is published atomically (staged, charged,
        renamed into place; refused before anything is read if it cannot be written): its
        tables, ``metadata.json``, ``density.geojson`` (each zone with its 168 counts, as
        ``privmob density`` writes it) and map layers in ``formats`` (``geoparquet``,
        ``geojson``, ``csv``). Without it the release is charged and returned; write it later
        with ``write``.
        """
        from privmob.releases.density.files import FILES

        spec = self._density_spec(epsilon, week, per_user, max_visits, options)
        return self.run(
            spec,
            lambda s: s._load_density_inputs(week, spec.config.cover),
            output=output,
            overwrite=overwrite,
            formats=formats,
            writers=FILES,
        )

    # -- an aggregated series ----------------------------------------------------------------
    def _series_spec(
        self,
        epsilon: float,
        sensitivity: float,
        period: Period | None,
        freq: str | None,
        domain_from_data: bool,
        options: SeriesOptions,
    ) -> SeriesSpec:
        return SeriesSpec.over(
            epsilon, sensitivity, period, freq, domain_from_data=domain_from_data, **options
        )

    def plan_programme(
        self, schedule: Programme | Mapping[str, object] | str | Path
    ) -> ProgrammePlan:
        """Plan a programme of releases under one per-person budget (reads no data, charges
        nothing): per-release epsilon, contribution bound and tau meeting each entry's
        accuracy target, the total under pure, approximate and zCDP composition next to the
        naive per-trip accounting, and what would make an infeasible programme fit.

        ``schedule``: a :class:`~privmob.evaluate.programme.Programme` of
        :class:`~privmob.evaluate.programme.ScheduleEntry` (``pm.Programme``,
        ``pm.ScheduleEntry``), the same document as a dict, or the path of a schedule file
        (what ``privmob plan programme`` reads); size an entry by this session's
        tessellation with ``zones=session.tessellation.k``. Returns a
        :class:`~privmob.evaluate.programme.ProgrammePlan` (``to_dict()`` is the CLI's
        ``--json``)."""
        from privmob.evaluate.programme import plan_programme

        return plan_programme(schedule)

    def plan_series(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        period: Period | None = None,
        freq: str | None = None,
        domain_from_data: bool = False,
        **options: Unpack[SeriesOptions],
    ) -> Plan:
        """The plan of :meth:`series` (reads no data, charges nothing)."""
        return self._series_spec(
            epsilon, sensitivity, period, freq, domain_from_data, options
        ).plan()

    def series(
        self,
        source: str | Path,
        *,
        epsilon: float,
        sensitivity: float,
        period: Period | None = None,
        freq: str | None = None,
        domain_from_data: bool = False,
        output: str | Path | None = None,
        overwrite: bool = False,
        **options: Unpack[SeriesOptions],
    ) -> ReleaseResult:
        """Publish an aggregated series of this dataset (``source``: CSV / Parquet, one row per
        timestamp of the declared grid ``period`` every ``freq``, and per zone with
        ``zone_column`` and ``zones``), as ``privmob series`` does.

        Guarantee (schemes ``uniform``, ``skip``, ``adaptive``): landmark epsilon-privacy with
        the public ``landmarks`` (positions in the grid, or its timestamps), each event
        changing the value at its timestamp by at most ``sensitivity`` (L1 over zones; the
        bound must hold for how the series was made); ``event``: per event; ``user``: the
        whole series. ``options`` (:class:`~privmob.releases.landmark.SeriesOptions`):
        ``value_column``, ``time_column``, ``zone_column``, ``zones``, ``landmarks``,
        ``scheme``, ``integer``, ``value_bounds`` (an enforced clamp), ``rule`` (the adaptive
        scheme's :class:`~privmob.releases.landmark.AdaptiveRule`), ``fill_value`` (the
        public value before the first release). ``domain_from_data=True`` instead of
        ``period`` and ``freq``: the grid is the file's timestamps (not protected: the
        release is stamped not for publication).

        ``output``: a folder where ``series.parquet``, ``budgets.parquet`` and
        ``metadata.json`` are published atomically once charged (refused before anything is
        read if it cannot be written); without it, write the release later with ``write``.
        """
        spec = self._series_spec(epsilon, sensitivity, period, freq, domain_from_data, options)
        return self.run(
            spec,
            spec.loader(source),  # bound to the series' content
            output=output,
            overwrite=overwrite,
            marks=spec.marks,
            engine=False,
        )

    def __repr__(self) -> str:
        return (
            f"Session(dataset={self.ledger.dataset!r}, "
            f"tiles={None if self.tessellation is None else self.tessellation.k}, "
            f"shape={self.shape!r}, ledger={str(self.ledger.path)!r})"
        )


def _levels(hierarchy: str | Sequence[str]) -> tuple[str, ...]:
    """``hierarchy=`` as the spec holds it: one level's name, or several, coarsest first."""
    from privmob.releases.hierarchy import spellings

    return spellings(hierarchy)


class _EarlierName(Protocol):
    """A deprecated ``Session`` method (:func:`_earlier_name`)."""

    def __call__(self, session: Session, /, **kwargs: object) -> object: ...


def _earlier_name(old: str, new: str) -> _EarlierName:
    """``Session.<old>``: deprecated, calls ``Session.<new>`` (the kind's one name)."""

    def method(self: Session, /, **kwargs: object) -> object:
        deprecated(f"Session.{old}", f"Session.{new}")
        return getattr(self, new)(**kwargs)

    method.__name__, method.__doc__ = old, f"Deprecated: :meth:`{new}`."
    return method


# the earlier names of the kinds' methods (privmob.releases.kinds: Kind.old_methods)
for _kind in KINDS:
    DEPRECATED.update(n for _old in _kind.old_methods for n in (_old, f"plan_{_old}"))
    for _old in _kind.old_methods:
        setattr(Session, _old, _earlier_name(_old, _kind.method))
        setattr(Session, f"plan_{_old}", _earlier_name(f"plan_{_old}", f"plan_{_kind.method}"))


def register_kind(kind: Kind) -> Kind:
    """``pm.register_kind``: add ``kind``, a kind declared as data
    (``privmob.releases.kinds.count_kind``), to the registry and return it; from then on, in
    this process, it is ``Session.<method>`` and ``plan_<method>``, ``privmob <name>`` and
    ``privmob plan <name>``, and its releases are charged, recorded and published as every
    kind's (:func:`privmob.releases.kinds.register`). Refused, adding nothing: a spec that is
    not the count template's (imported now, not at the kind's first release) and a method
    name one of the Session's members has."""
    from privmob.errors import ConfigError
    from privmob.releases.counts import CountSpec
    from privmob.releases.kinds import register

    hint = "declare it with privmob.releases.kinds.count_kind(name, summary, records, *by)"
    if kind.counts is not None and not issubclass(kind.spec_type, CountSpec):
        raise ConfigError(f"{kind.spec} is not the count template's spec", hint=hint)
    for name in (kind.method, f"plan_{kind.method}"):
        if hasattr(Session, name):
            raise ConfigError(
                f"Session.{name} exists: the kind {kind.name!r} would replace it",
                hint="choose another name for the kind",
            )
    return register(kind)
