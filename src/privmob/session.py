"""``privmob.Session``: one front door over loading, the tessellation, the engine and the ledger.

A session holds the input (a path, a folder, or a pandas / Polars / Arrow table), the public
tessellation (a path, a GeoDataFrame or a ``Tessellation``, read once), the engine and the
accountant. The input is read and validated once, on the first release that needs it; its
shape (trips, trip points, events) is resolved once and every release accepts every shape it
can use. ``plan_*`` methods read no data.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import pandas as pd

from privmob.domain import StudyPeriod
from privmob.dp import (
    Budget,
    MaxEventsPerBin,
    MaxTripsPerUser,
    MaxVisitsPerHour,
    PrivacyUnit,
    as_period,
    bound_value,
    budget_cost,
)
from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.specs import (
    DensitySpec,
    OdSpec,
    Plan,
    PopulationSpec,
    ReportSpec,
    SeriesSpec,
    Spec,
    ZoneSeriesSpec,
    release,
)
from privmob.results import ReleaseResult


class SessionLedger:
    """The session's view of its ledger: what was spent on the dataset, what remains."""

    def __init__(self, ledger: Any, dataset: str) -> None:
        self._ledger = ledger
        self.dataset = dataset

    @property
    def path(self) -> Path:
        return Path(self._ledger.path)

    def remaining(self) -> float:
        return float(self._ledger.remaining(self.dataset).epsilon)

    def spent(self) -> float:
        return float(self._ledger.spent(self.dataset).epsilon)

    def to_pandas(self) -> pd.DataFrame:
        """One row per ledger entry of the dataset (kind, description, epsilon, delta) with the
        epsilon spent so far and what remains of the budget after it."""
        budget = self._ledger.budget(self.dataset)
        rows = []
        spent = 0.0
        for e in self._ledger.entries(self.dataset):
            spent += e.cost.epsilon
            rows.append(
                {
                    "id": e.id,
                    "created_at": e.created_at,
                    "kind": e.kind,
                    "description": e.description,
                    "epsilon": e.cost.epsilon,
                    "delta": e.cost.delta,
                    "for_publication": e.for_publication,
                    "spent": spent,
                    "remaining": max(0.0, budget.epsilon - spent),
                }
            )
        columns = [
            "id", "created_at", "kind", "description", "epsilon", "delta",
            "for_publication", "spent", "remaining",
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str:
        return (
            f"<p>ledger {self.path}: dataset '{self.dataset}' spent epsilon={self.spent():.6g}, "
            f"remaining {self.remaining():.6g}</p>" + self.to_pandas().to_html(index=False)
        )


class Session:
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
    ``seed``: TESTS ONLY, fixed noise, outputs stamped "not for publication".
    """

    def __init__(
        self,
        data: Any,
        *,
        tessellation: Any,
        budget: Budget | float | None = None,
        ledger: str | Path | None = None,
        dataset: str | None = None,
        engine: Any = "duckdb",
        memory_limit: str | int | None = None,
        shape: str = "auto",
        columns: dict[str, str] | None = None,
        timezone: str = "UTC",
        input_timezone: str | None = None,
        tile_id: str | None = None,
        group_size: int | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        cells: str | Path | None = None,
        seed: int | None = None,
        progress: Any = None,
    ) -> None:
        from privmob.data import SHAPES
        from privmob.data.tessellation_input import load_tessellation
        from privmob.engine.buckets import parse_memory
        from privmob.privacy.ledger import Ledger
        from privmob.releases.base import Accountant

        if shape not in SHAPES:
            raise ConfigError(f"unknown input shape '{shape}'", hint=f"use one of {SHAPES}")
        self.data = data
        self.shape = shape
        self.columns = columns
        from privmob.data.times import clock

        # the zone of days, hours and bins; naive timestamps are read in input_timezone
        self.timezone = clock(timezone, input_timezone)
        self.seed = seed
        self.cells = cells
        self.progress = progress
        self.tessellation = load_tessellation(tessellation, id_column=tile_id)
        self.memory_limit = (
            parse_memory(memory_limit) if isinstance(memory_limit, str) else memory_limit
        )
        self._tmpdir: str | None = None
        if seed is not None and ledger is not None:
            raise ConfigError(
                "a fixed seed makes the noise predictable: it never charges a kept ledger",
                hint="leave ledger out with seed= (tests: a throw-away ledger), or drop seed",
            )
        if ledger is None:
            if budget is None:
                raise ConfigError(
                    "an in-memory ledger needs a total budget",
                    hint="pass budget=pm.PureDP(10), or ledger='ledger.sqlite' for a kept one",
                )
            self._tmpdir = tempfile.mkdtemp(prefix="privmob-ledger-")
            # removed on close(), when the session is collected, or at exit (whichever first)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
            ledger = Path(self._tmpdir) / "ledger.sqlite"
        if dataset is None:
            if isinstance(data, str | Path):
                from privmob.data.reading import dataset_name

                dataset = dataset_name(None, data)
            else:
                raise ConfigError(
                    "name the dataset whose budget is charged",
                    hint='pass dataset="trips-2024" (a table has no file name to use)',
                )
        cost = budget_cost(budget)
        led = Ledger(ledger)
        if cost is not None:
            # set once in the budget's unit; a different budget already there is refused
            led.set_budget(dataset, cost.epsilon, cost.delta, PrivacyUnit(unit))
        from privmob.releases.stamp import test_mode_mark

        self._accountant = Accountant(
            led,
            dataset,
            group_size=group_size,
            annotate=[test_mode_mark(seed)] if seed is not None else [],
        )
        self.ledger = SessionLedger(self._accountant.ledger, dataset)
        self._engine_arg = engine
        self._engine: Any = None
        self._memory_text = memory_limit
        self._loaded: dict[str, Any] = {}

    # -- life cycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the engine and remove an in-memory ledger."""
        if self._engine is not None and isinstance(self._engine_arg, str):
            self._engine.close()
        self._engine = None
        if self._tmpdir is not None:
            self._cleanup()
            self._tmpdir = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def engine(self) -> Any:
        if self._engine is None:
            from privmob.engine import make_engine

            options = {}
            if self._memory_text is not None and isinstance(self._engine_arg, str):
                options["memory_limit"] = str(self._memory_text)
            self._engine = make_engine(self._engine_arg, **options)
        return self._engine

    # -- inputs, resolved once --------------------------------------------------------------
    def _shape(self) -> str:
        if self.shape == "auto":
            from privmob.data import detect_shape

            self.shape = detect_shape(self.engine, self.data, columns=self.columns)
        return self.shape

    def _trips(self) -> Any:
        if "trips" not in self._loaded:
            from privmob.prepare.inputs import load_trips_any

            self._loaded["trips"] = load_trips_any(
                self.data,
                engine=self.engine,
                tessellation=self.tessellation,
                shape=self._shape(),
                columns=self.columns,
                timezone=self.timezone,
            )
        return self._loaded["trips"]

    def _events(self) -> Any:
        if "events" not in self._loaded:
            from privmob.data import load_events

            if self._shape() == "trips":
                raise ConfigError(
                    "this release needs located events (uid, datetime, lat, lng or tile_id); "
                    "the session's input holds one-row trips",
                    hint="give events or trip points (GPS points) to the session",
                )
            self._loaded["events"] = load_events(
                self.data,
                engine=self.engine,
                tessellation=self.tessellation,
                columns=self.columns,
                timezone=self.timezone,
            )
        return self._loaded["events"]

    def _run(self, spec: Spec, data: Any) -> ReleaseResult:
        # the budget is bound to the data's content (refused if another dataset holds it)
        self._accountant.bind_input(data)
        out = release(
            data,
            spec,
            self._accountant,
            rng=self.seed,
            progress=self.progress,
            memory_limit=self.memory_limit,
        )
        return ReleaseResult(out, self.tessellation)

    def _checked(self, spec: Spec) -> Spec:
        # refuse before reading: memory over the limit, cost over the budget
        plan = spec.plan()
        if self.memory_limit is not None:  # a cap on the whole process, as on the CLI
            from privmob.engine.memory import process_memory

            mem = process_memory(int(self.memory_limit), str(self._memory_text))
            plan.check_memory(int(self.memory_limit), baseline=mem.baseline)
        self._accountant.precheck(plan.cost)
        return spec

    # -- OD matrix --------------------------------------------------------------------------
    def _od_spec(
        self,
        epsilon: float,
        max_trips: MaxTripsPerUser | int | None,
        period: StudyPeriod | None,
        unit: PrivacyUnit | str,
        tau: int | None,
        noise: NoiseKind | str,
        delta: float,
        bound_per: str,
    ) -> OdSpec:
        return OdSpec(
            self.tessellation,
            epsilon,
            unit=PrivacyUnit(unit),
            max_trips=bound_value(max_trips, MaxTripsPerUser),
            tau=tau,
            noise=noise,
            delta=delta,
            period=as_period(period),
            bound_per=bound_per,
        )

    def plan_od_matrix(
        self,
        *,
        epsilon: float,
        max_trips: MaxTripsPerUser | int | None = None,
        period: StudyPeriod | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        tau: int | None = None,
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
        bound_per: str = "release",
    ) -> Plan:
        """The plan of :meth:`od_matrix` with these parameters (reads no data, charges nothing)."""
        return self._od_spec(epsilon, max_trips, period, unit, tau, noise, delta, bound_per).plan()

    def od_matrix(
        self,
        *,
        epsilon: float,
        max_trips: MaxTripsPerUser | int | None = None,
        period: StudyPeriod | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        tau: int | None = None,
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
        bound_per: str = "release",
    ) -> ReleaseResult:
        """A private origin-destination matrix per period, from trips, trip points or events.

        Guarantee (``unit="user"``): each user keeps at most ``max_trips`` trips (keyed random
        sampling), every cell of the public domain (every ordered pair of distinct tiles in
        every bin of ``period``, plus outliers cells) gets noise of scale T/epsilon: epsilon-DP
        per user (discrete Laplace) or (epsilon, delta)-DP (discrete Gaussian). With
        ``bound_per="period"`` the bound and the cost are per period. ``unit="trip"``: per
        trip. Counts are published as drawn (unbiased, may be negative); ``tau=0`` clamps
        negatives to 0 and ``tau > 0`` suppresses below tau (post-processing, biased).
        """
        spec = self._checked(
            self._od_spec(epsilon, max_trips, period, unit, tau, noise, delta, bound_per)
        )
        return self._run(spec, self._trips())

    # -- population -------------------------------------------------------------------------
    def plan_population(
        self,
        *,
        epsilon: float,
        period: StudyPeriod | None = None,
        night: tuple[int, int] = (20, 6),
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
    ) -> Plan:
        """The plan of :meth:`population` (reads no data, charges nothing)."""
        return PopulationSpec(
            self.tessellation, epsilon, noise, delta, night, as_period(period)
        ).plan()

    def population(
        self,
        *,
        epsilon: float,
        period: StudyPeriod | None = None,
        night: tuple[int, int] = (20, 6),
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
    ) -> ReleaseResult:
        """Users per home zone (home = most frequent zone in the ``night`` hours), from events
        or trip points.

        Guarantee: user-level epsilon-DP (discrete Laplace, scale 1/epsilon) or (epsilon,
        delta)-DP (discrete Gaussian): each user has exactly one cell (a zone, "outside" or
        "unknown home"), so the L1 sensitivity is 1; every zone gets noise; negative counts
        become 0 (post-processing).
        """
        spec = self._checked(
            PopulationSpec(self.tessellation, epsilon, noise, delta, night, as_period(period))
        )
        return self._run(spec, self._events())

    # -- mobility report ---------------------------------------------------------------------
    def _report_spec(
        self,
        epsilon: float,
        max_trips: MaxTripsPerUser | int | None,
        period: StudyPeriod | None,
        unit: PrivacyUnit | str,
        analyses: list[str] | None,
    ) -> ReportSpec:
        from privmob.releases.report import ReportConfig

        study = as_period(period)
        if study.start is None or study.end is None:
            raise ConfigError(
                "the mobility report needs a declared study period",
                hint='pass period=pm.Period("2024-01-01", "2024-02-01")',
            )
        unit = PrivacyUnit(unit)
        bound = bound_value(max_trips, MaxTripsPerUser)
        if bound is None:
            if unit is PrivacyUnit.USER:
                raise ConfigError(
                    "user-level privacy needs max_trips, the most trips counted per user",
                    hint="a public bound, never taken from the data; it sets the noise scale",
                )
            bound = 1
        cfg = ReportConfig.build(
            epsilon=epsilon,
            max_trips=bound,
            period=(study.start, study.end),
            unit=unit,
            analyses=analyses,
        )
        return ReportSpec(self.tessellation, cfg)

    def plan_mobility_report(
        self,
        *,
        epsilon: float,
        period: StudyPeriod,
        max_trips: MaxTripsPerUser | int | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        analyses: list[str] | None = None,
    ) -> Plan:
        """The plan of :meth:`mobility_report` (reads no data, charges nothing)."""
        return self._report_spec(epsilon, max_trips, period, unit, analyses).plan()

    def mobility_report(
        self,
        *,
        epsilon: float,
        period: StudyPeriod,
        max_trips: MaxTripsPerUser | int | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        analyses: list[str] | None = None,
    ) -> ReleaseResult:
        """A mobility report (trip counts over time and space, OD flows, trip length and
        duration, visits per user, ...) from trip points.

        Guarantee: ``epsilon``-DP (pure) per user with at most ``max_trips`` trips (enforced by
        sampling), or per trip with ``unit="trip"``; the budget is split over the analyses,
        every analysis is released over domains built from public parameters only.
        ``ReleaseResult.write_html(path)`` writes the HTML report.
        """
        spec = self._checked(self._report_spec(epsilon, max_trips, period, unit, analyses))
        return self._run(spec, self._trip_points())

    def _trip_points(self) -> Any:
        if "trip_points" not in self._loaded:
            from privmob.data import load_trip_points

            if self._shape() != "trip-points":
                raise ConfigError(
                    f"the mobility report needs trip points (uid, tid, datetime, lat, lng); "
                    f"the session's input holds {self._shape()}",
                    hint="give the session trip points, or use od_matrix for trips",
                )
            self._loaded["trip_points"] = load_trip_points(
                self.data,
                engine=self.engine,
                tessellation=self.tessellation,
                columns=self.columns,
                timezone=self.timezone,
            )
        return self._loaded["trip_points"]

    # -- zone series (series-counts) ----------------------------------------------------------
    def _zone_series_spec(
        self,
        epsilon: float,
        period: StudyPeriod,
        freq: str,
        max_per_bin: MaxEventsPerBin | MaxVisitsPerHour | int,
        landmarks: tuple[int, ...] | list[int],
        scheme: str,
        outliers_epsilon: float | None,
    ) -> ZoneSeriesSpec:
        study = as_period(period)
        if study.start is None or study.end is None:
            raise ConfigError(
                "a zone series needs a declared study period",
                hint='pass period=pm.Period("2024-01-01", "2024-01-08")',
            )
        if isinstance(max_per_bin, MaxVisitsPerHour):
            if freq not in ("1h", "h", "60min"):
                raise ConfigError(
                    f"MaxVisitsPerHour bounds hourly bins, not bins of {freq}",
                    hint="use MaxEventsPerBin, or freq='1h'",
                )
            bound = int(max_per_bin.value)
        else:
            bound = int(bound_value(max_per_bin, MaxEventsPerBin) or 1)
        return ZoneSeriesSpec(
            self.tessellation,
            epsilon,
            study.start.isoformat(sep=" "),
            study.end.isoformat(sep=" "),
            freq,
            bound,
            tuple(int(i) for i in landmarks),
            str(scheme),
            outliers_epsilon,
        )

    def plan_zone_series(
        self,
        *,
        epsilon: float,
        period: StudyPeriod,
        freq: str = "1h",
        max_per_bin: MaxEventsPerBin | MaxVisitsPerHour | int = 1,
        landmarks: tuple[int, ...] | list[int] = (),
        scheme: str = "uniform",
        outliers_epsilon: float | None = None,
    ) -> Plan:
        """The plan of :meth:`zone_series` (reads no data, charges nothing)."""
        return self._zone_series_spec(
            epsilon, period, freq, max_per_bin, landmarks, scheme, outliers_epsilon
        ).plan()

    def zone_series(
        self,
        *,
        epsilon: float,
        period: StudyPeriod,
        freq: str = "1h",
        max_per_bin: MaxEventsPerBin | MaxVisitsPerHour | int = 1,
        landmarks: tuple[int, ...] | list[int] = (),
        scheme: str = "uniform",
        outliers_epsilon: float | None = None,
    ) -> ReleaseResult:
        """Events per zone and time bin (``privmob series-counts``), from events or trip points.

        Guarantee: each user keeps at most ``max_per_bin`` events per bin (enforced), the
        series is published under landmark epsilon-privacy by ``scheme`` (uniform, skip,
        adaptive: per landmark; event; user) with ``landmarks`` as bin positions (public); the
        events outside the period get one noisy cell costing ``outliers_epsilon`` (default
        0.1 x epsilon) on top. The ledger is charged epsilon + outliers_epsilon in the
        scheme's unit: give the session ``unit=`` to match (e.g. ``pm.PrivacyUnit.LANDMARK``).
        """
        spec = self._checked(
            self._zone_series_spec(
                epsilon, period, freq, max_per_bin, landmarks, scheme, outliers_epsilon
            )
        )
        return self._run(spec, self._events())

    # -- density -----------------------------------------------------------------------------
    def _density_spec(
        self, epsilon: float, week: str, max_visits: int, delta: float, options: dict[str, Any]
    ) -> DensitySpec:
        from privmob.releases.density import DensityConfig

        cfg = DensityConfig(epsilon, max_visits, delta, **options)
        return DensitySpec(self.tessellation, cfg, week)

    def plan_density(
        self, *, epsilon: float, week: str, max_visits: int = 30, delta: float = 0.0, **options: Any
    ) -> Plan:
        """The plan of :meth:`density` (reads no data, charges nothing)."""
        return self._density_spec(epsilon, week, max_visits, delta, options).plan()

    def density(
        self, *, epsilon: float, week: str, max_visits: int = 30, delta: float = 0.0, **options: Any
    ) -> ReleaseResult:
        """Users per zone and hour of the week starting ``week`` (public), from phone events
        with a ``cell_id`` and the session's ``cells`` table (tower positions).

        Guarantee: each user keeps at most ``max_visits`` (cell, hour) visits in the week
        (pre-sampling, enforced); EFPA noise on the Fourier coefficients of clusters of tower
        cells (``method="scheme"``) or Laplace noise on every cell (``"lpa"``), epsilon-DP per
        user (or (epsilon, delta) with ``delta``), plus the outliers cell's share; counts are
        then spread over the zones by public Voronoi area shares (post-processing).
        ``options``: the other :class:`~privmob.releases.density.DensityConfig` fields.
        """
        from privmob.releases.density_inputs import load_density_inputs, parse_week

        parse_week(week)
        spec = self._density_spec(epsilon, week, max_visits, delta, options)
        self._checked(spec)
        if self.cells is None:
            raise ConfigError(
                "the density release needs the towers table",
                hint="pass cells='cells.csv' (cell_id, lat, lng) to the Session",
            )
        key = f"density {week} {spec.config.cover}"
        if key not in self._loaded:
            self._loaded[key] = load_density_inputs(
                self.data,
                self.cells,
                self.tessellation,  # type: ignore[arg-type]  # a Tessellation passes through
                zone_id=None,
                week=week,
                cover=spec.config.cover,
                timezone=self.timezone,
                columns=None,
                step=self.progress or (lambda _m: None),
                engine=self.engine,
            )
        return self._run(spec, self._loaded[key])

    # -- an aggregated series ----------------------------------------------------------------
    def _series_spec(self, epsilon: float, sensitivity: float, period: StudyPeriod, freq: str,
                     options: dict[str, Any]) -> SeriesSpec:  # fmt: skip
        study = as_period(period)
        if study.start is None or study.end is None:
            raise ConfigError(
                "a series needs a declared study period",
                hint='pass period=pm.Period("2024-01-01", "2024-01-08") and freq="1h"',
            )
        zones = options.pop("zones", None)
        landmarks = options.pop("landmarks", ())
        return SeriesSpec(
            epsilon,
            sensitivity,
            study.start.isoformat(sep=" "),
            study.end.isoformat(sep=" "),
            freq,
            zones=None if zones is None else tuple(str(z) for z in zones),
            landmarks=tuple(int(i) for i in landmarks),
            **options,
        )

    def plan_programme(self, schedule: Any) -> Any:
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
        self, *, epsilon: float, sensitivity: float, period: StudyPeriod, freq: str,
        **options: Any,
    ) -> Plan:  # fmt: skip
        """The plan of :meth:`series` (reads no data, charges nothing)."""
        return self._series_spec(epsilon, sensitivity, period, freq, dict(options)).plan()

    def series(
        self, source: str | Path, *, epsilon: float, sensitivity: float, period: StudyPeriod,
        freq: str, **options: Any,
    ) -> ReleaseResult:  # fmt: skip
        """Publish an aggregated series of this dataset (``source``: CSV / Parquet, one row per
        timestamp of the declared grid, and per zone with ``zone_column`` and ``zones``), as
        ``privmob series`` does.

        Guarantee (schemes ``uniform``, ``skip``, ``adaptive``): landmark epsilon-privacy with
        the public ``landmarks`` (positions in the grid), each event changing the value at its
        timestamp by at most ``sensitivity`` (L1 over zones; the bound must hold for how the
        series was made); ``event``: per event; ``user``: the whole series. ``options``:
        ``value_column``, ``time_column``, ``zone_column``, ``zones``, ``landmarks``,
        ``scheme``, ``integer``, ``value_bounds`` (an enforced clamp).
        """
        spec = self._series_spec(epsilon, sensitivity, period, freq, dict(options))
        self._checked(spec)
        return self._run(spec, source)

    def __repr__(self) -> str:
        return (
            f"Session(dataset={self.ledger.dataset!r}, tiles={self.tessellation.k}, "
            f"shape={self.shape!r}, ledger={str(self.ledger.path)!r})"
        )
