"""The session's machinery: the input read and validated once, the public tessellation, the
engine, the accountant, and the one release lifecycle every release goes through
(:meth:`SessionBase.run`), from Python as from the command line.

The lifecycle, in this order (nothing is read before the plan is accepted, nothing is
published before it is charged):

1. the output, when there is one, is checked (a release that cannot be written costs nothing);
2. the plan is computed once from public parameters, shown, and refused if the budget cannot
   pay it; the output's disk must hold the public domain;
3. the engine starts; the plan is refused if it needs more than what the process leaves of
   the memory limit;
4. the input is read and validated (once per session and shape) and the budget bound to its
   content;
5. the kind computes its exact values and declares its mechanism (a draft: no noise can be
   drawn yet); the one gate (``releases/gate.py``) commits the charge, then draws the noise,
   then stages, seals and renames the release when it has an output
   (``releases/publish.py``) (write one without an output later with ``write``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self, cast

from privmob.dp import Budget, PrivacyUnit, budget_cost
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.releases import gate
from privmob.releases.specs import Plan, Spec, before_reading
from privmob.results import ReleaseResult
from privmob.session.ledger_view import SessionLedger
from privmob.surface import option, spelled

if TYPE_CHECKING:
    from privmob.data.reading import Reading
    from privmob.data.tessellation import Tessellation
    from privmob.data.tessellation_input import TessellationSource
    from privmob.engine.base import Engine
    from privmob.engine.relation import Loaded
    from privmob.releases.density_inputs import DensityInputs
    from privmob.releases.loaded import LoadedInput
    from privmob.releases.publish import Output
    from privmob.releases.release import Release
    from privmob.session.options import EngineOptions, Input, LedgerOptions

    class SessionReading(Reading):
        """How the session reads its input: the loaders' keywords (:meth:`SessionBase._reading`)."""

        engine: Engine
        tessellation: Tessellation


Progress = Callable[[str], None]
#: reads the input of a release from the session (e.g. ``Session._load_trips``) -> loaded data
Load = Callable[["SessionBase"], "LoadedInput"]
#: a file written beside the tables: (release, folder, tessellation) -> paths
Writer = Callable[["Release", Path, "Tessellation"], list[Path]]


def _quiet(_message: str) -> None:
    return None


def _python_warning(message: str) -> None:
    from privmob.errors import PrivmobWarning
    from privmob.surface import warn_caller

    warn_caller(message, PrivmobWarning)  # at the caller's line (the cell), not privmob's


class PlanWarning:
    """What the lifecycle does with a plan's warning (from public parameters, e.g. an epsilon
    below 0.1 or more than 10 million cells: :attr:`~privmob.releases.plan.Plan.warning`),
    which it is given before anything is read or charged: a release the operator has
    confirmed (``confirm=True``, the CLI's ``--yes``) goes on, the warning told to ``tell``; any
    other is refused there, so a warning is never followed by a charge nobody agreed to. The
    session's ``warn`` attribute."""

    def __init__(self, tell: Callable[[str], None], confirm: bool) -> None:
        self.tell = tell
        self.confirm = confirm

    def __call__(self, message: str) -> None:
        if not self.confirm:
            raise ConfigError(
                f"refused before reading: {message} Nothing was read or charged.",
                hint=f"release it all the same with {option('yes')}, or change what the warning "
                f"names ({option('epsilon')}, the bound or the tiles; the plan says what a cell "
                "needs)",
            )
        self.tell(message)


def _with_tiles(
    writer: Writer, tess: Tessellation | None, release: Release, folder: Path
) -> list[Path]:
    assert tess is not None, "a writer beside the tables is given the session's tiles"
    return writer(release, folder, tess)


def trip_definition(shape: str, rule: str) -> str | None:
    """What a trip is for a release on input of ``shape`` (``rule``: the events' trip rule)."""
    return {
        "trips": "one row per trip (its start time, origin and destination)",
        "trip-points": "the first and last point of each trip id",
        "gps": "the points between two stay points",
        "events": {
            "events": "two consecutive events of a user in different zones",
            "hourly": "a change of the user's modal zone between consecutive hours with events",
            "hourly-consecutive": "a change of the user's modal zone between adjacent hours",
        }.get(rule, rule),
    }.get(shape)


def stay_definition(shape: str, distance: float | None, minutes: float | None) -> JSONObject | None:
    """The stay-point thresholds used to cut raw GPS traces into trips (``None`` otherwise)."""
    if shape != "gps":
        return None
    from privmob.prepare.staypoints import STAY_DISTANCE_M, STAY_MINUTES

    return {
        "distance_m": STAY_DISTANCE_M if distance is None else float(distance),
        "minutes": STAY_MINUTES if minutes is None else float(minutes),
    }


class SessionBase:
    """Differentially private releases of one mobility dataset (see :class:`Session`)."""

    def __init__(
        self,
        data: object,
        *,
        tessellation: TessellationSource | None = None,
        budget: Budget | float | None = None,
        ledger: LedgerOptions | str | Path | None = None,
        dataset: str | None = None,
        engine: str | Engine | EngineOptions = "duckdb",
        memory_limit: str | int | None = None,
        spill_dir: str | Path | None = None,
        spark_master: str | None = None,
        spark_conf: Sequence[str] | Mapping[str, str] | None = None,
        shape: str = "auto",
        columns: dict[str, str] | None = None,
        delimiter: str | None = None,
        names: Sequence[str] | None = None,
        header: bool = True,
        uid_from_filename: bool = False,
        timezone: str = "UTC",
        input_timezone: str | None = None,
        tile_id: str | None = None,
        group_size: int | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
        cells: str | Path | None = None,
        trip_rule: str = "events",
        stay_distance: float | None = None,
        stay_minutes: float | None = None,
        new_dataset_for_same_data: bool = False,
        seed: int | None = None,
        test_mode: bool = False,
        progress: Progress | None = None,
        max_margin: float | None = None,
        max_layer_size: str | int | None = None,
        all_flows: bool = False,
        offline_maps: bool = False,
        input: Input | None = None,
        warn: Callable[[str], None] | None = None,
        confirm: bool = False,
    ) -> None:
        from privmob.session.options import GROUPS, EngineOptions, flat_keywords, spread

        keywords = {k: v for k, v in locals().items() if k in _DEFAULTS}
        if not self.__dict__.pop("_spread", False):  # the caller's keywords, not our own
            flat_keywords(keywords, _DEFAULTS)  # a group's field given alone: a warning
        given = {"input": input, "engine": engine, "ledger": ledger}
        if any(isinstance(given[g], cls) for g, cls in GROUPS.items()):
            # the typed groups (session/options.py) spread into the keywords, once
            grouped = spread(keywords, _DEFAULTS)
            del grouped["input"]
            self._spread = True
            SessionBase.__init__(self, data, **grouped)
            return
        from privmob.data import SHAPES
        from privmob.data.times import clock
        from privmob.engine.buckets import parse_memory
        from privmob.privacy.ledger import Ledger
        from privmob.privacy.ledger.keys import Signer
        from privmob.releases.base import Accountant
        from privmob.releases.stamp import test_mode_mark

        if shape not in SHAPES:
            raise ConfigError(f"unknown input shape '{shape}'", hint=f"use one of {SHAPES}")
        from privmob.data.reading import as_csv_files

        self.shape = shape
        self._shape_declared = shape != "auto"
        self.columns = columns
        self.delimiter = delimiter
        self.names = None if names is None else [str(n).strip() for n in names]
        # a file's layout (no header row, its column names, the user id in its name) goes
        # with it to every reader
        self.data = as_csv_files(
            data, header=header, names=self.names, uid_from_filename=uid_from_filename
        )
        # the zone of days, hours and bins; naive timestamps are read in input_timezone
        self.timezone = clock(timezone, input_timezone)
        self.cells = cells
        self.trip_rule = trip_rule
        self.stay_distance = stay_distance
        self.stay_minutes = stay_minutes
        self.seed = seed
        self.progress: Progress = progress or _quiet
        #: refuse, before reading, a release whose 95% margin per cell is above this
        self.max_margin = max_margin
        #: the largest map layer file written (bytes; default render.layers.MAX_LAYER_BYTES)
        self.max_layer_bytes = (
            parse_memory(max_layer_size) if isinstance(max_layer_size, str) else max_layer_size
        )
        #: OD layers keep every non-zero cell, not only the flows above the noise floor
        self.all_flows = all_flows
        #: maps (notebook displays, the report's HTML) draw no web basemap: no request leaves
        self.offline_maps = offline_maps
        #: how the operator is told things before a charge (Python: a PrivmobWarning; the CLI:
        #: a line on stderr); never recorded in a release
        self.tell: Callable[[str], None] = warn or _python_warning
        #: what a plan's warning does before anything is read: refuse the release unless the
        #: operator confirmed it (``confirm``; :class:`PlanWarning`)
        self.warn: Callable[[str], None] = PlanWarning(self.tell, confirm)
        self.tessellation = None
        if tessellation is not None:
            from privmob.data.tessellation_input import load_tessellation

            if isinstance(tessellation, str | Path):
                self.progress("reading the tessellation")
            self.tessellation = load_tessellation(tessellation, id_column=tile_id)
        self.memory_limit = (
            parse_memory(memory_limit) if isinstance(memory_limit, str) else memory_limit
        )
        self._memory_text = memory_limit
        self._engine_options = {
            "spill_dir": None if spill_dir is None else Path(spill_dir),
            "spark_master": spark_master,
            "spark_conf": spark_conf,
        }
        # a fixed seed makes the noise predictable: tests only, never a kept ledger
        test_mode = test_mode or seed is not None
        self._tmpdir: str | None = None
        if test_mode and ledger is not None:
            raise ConfigError(
                "a fixed seed makes the noise predictable: it never charges a kept ledger",
                hint="leave ledger out with seed= (tests: a throw-away ledger), or drop seed",
            )
        if ledger is None:
            if budget is None and not test_mode:
                raise ConfigError(
                    "an in-memory ledger needs a total budget",
                    hint="pass ledger=pm.LedgerOptions(budget=pm.PureDP(10)), or "
                    "pm.LedgerOptions('ledger.sqlite', ...) for a kept one",
                )
            self._tmpdir = tempfile.mkdtemp(prefix="privmob-ledger-")  # mode 0700
            # removed on close(), when the session is collected, or at exit (whichever first)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
            ledger = Path(self._tmpdir) / "ledger.sqlite"
        if dataset is None:
            if not isinstance(data, str | Path):
                raise ConfigError(
                    "name the dataset whose budget is charged",
                    hint='pass ledger=pm.LedgerOptions(dataset="trips-2024") (a table has no '
                    "file name to use)",
                )
            from privmob.data.reading import dataset_name

            dataset = dataset_name(None, data)
        # a throw-away ledger is signed by a throw-away key (never the user's own)
        where = cast("str | Path", ledger)  # a LedgerOptions was spread above
        led = Ledger(where, key=Signer.ephemeral() if self._tmpdir else None)
        cost = budget_cost(budget)
        # the budget, set once in its unit (a different budget already there is refused), is
        # the accountant's: releases/base.py says when it is written to the ledger
        self._accountant = Accountant(
            led,
            dataset,
            budget=None if cost is None else cost.epsilon,
            budget_delta=0.0 if cost is None else cost.delta,
            budget_unit=PrivacyUnit(unit),
            group_size=group_size,
            annotate=[test_mode_mark(seed)] if test_mode else [],
            new_dataset_for_same_data=new_dataset_for_same_data,
        )
        self.ledger = SessionLedger(led, dataset, self._accountant)
        assert not isinstance(engine, EngineOptions)  # a group is spread into its fields above
        self._engine_arg = engine
        self._engine: Engine | None = None
        self._loaded: dict[str, Loaded] = {}
        self._density: dict[str, DensityInputs] = {}

    # -- life cycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the engine and remove an in-memory ledger."""
        if self._engine is not None and isinstance(self._engine_arg, str):
            self._engine.close()
        self._engine = None
        if self._tmpdir is not None:
            self._cleanup()
            self._tmpdir = None

    def __enter__(self) -> Self:
        return self

    def __dir__(self) -> list[str]:
        """The public surface: the deprecated names work but are not offered."""
        return [n for n in super().__dir__() if n not in DEPRECATED]

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _started_engine(self) -> Engine:
        """The engine, started on first use (DuckDB unless the session names another)."""
        if self._engine is None:
            from privmob.engine import open_engine

            memory = self._memory_text if isinstance(self._engine_arg, str) else None
            self._engine = open_engine(
                self._engine_arg,
                memory_limit=None if memory is None else str(memory),
                progress=self.progress,
                **self._engine_options,  # type: ignore[arg-type]
            )
        return self._engine

    # -- the release lifecycle ----------------------------------------------------------------
    def run(
        self,
        spec: Spec,
        load: Load | None = None,
        *,
        output: str | Path | Output | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        writers: Sequence[Writer] = (),
        marks: Sequence[Callable[[Release], None]] = (),
        engine: bool = True,
        on_plan: Callable[[Plan], None] | None = None,
    ) -> ReleaseResult:
        """Run one release through the lifecycle (see the module's docstring) and return it.

        ``spec``: the release's public parameters (``privmob.releases.specs``); ``load``:
        session -> the input, read and validated (``Session._load_trips``,
        ``Session._load_events``, ``Session._load_trip_points`` or your own; default
        :meth:`_load_for`, by what the spec counts); ``output``:
        a folder (or a :class:`~privmob.releases.publish.Output`) where the release is
        published atomically once charged; ``formats``: map layers written beside the tables
        (``geoparquet``, ``geojson``, ``csv``); ``writers``: more files staged with them;
        ``marks``: applied to the release before it is charged (e.g. not for publication);
        ``engine``: ``False``
        for an input read without one; ``on_plan``: shown the plan before anything is read.
        """
        from privmob.releases.publish import Output

        out = None
        if output is not None:  # before anything is read or charged
            out = (
                output if isinstance(output, Output) else Output(Path(output), overwrite=overwrite)
            )
            if not out.checked:
                out.check()
        plan = spec.plan()  # once, from public parameters only
        layers = self._layer_plan(spec, plan, formats if out is not None else None)
        plan = dataclasses.replace(plan, notes=(*plan.notes, *layers))
        if on_plan is not None:
            on_plan(plan)
        define = functools.partial(self._define, spec)  # what was counted, in metadata.json
        acct = dataclasses.replace(  # this release's: its output, marks and budget check
            self._accountant,
            output=out,
            annotate=[*self._accountant.annotate, *marks, define],
            progress=self.progress,
        )
        # the memory first: a plan the limit cannot hold is refused whatever else it needs
        # (a confirmation of its size, the budget)
        if engine and self._engine is None and self.memory_limit and self._engine_arg == "duckdb":
            # before the engine starts: a limit too small for this release (its domain
            # included) is refused naming the minimum that would do
            import privmob.engine.duckdb  # noqa: F401  (its libraries count, as when it starts)
            from privmob.engine.memory import ProcessMemory, rss_bytes

            before = ProcessMemory(int(self.memory_limit), rss_bytes())
            if before.available >= before.minimum - before.baseline:  # the process can start:
                plan.check_memory(before.limit, baseline=before.baseline)  # the domain alone
            before.engine_memory(plan.memory_bytes)  # below the minimum: names it
        eng = self._started_engine if engine else None
        # the plan against what the process leaves of the memory limit, measured by the engine
        # once its libraries are loaded (it refused a limit below its own minimum already)
        mem = getattr(eng, "process_memory", None)
        if mem is not None and eng is not None:
            plan.check_memory(mem.limit, baseline=mem.baseline)
            # the domain's share; the engine: the rest (an engine with a memory guard: DuckDB's)
            getattr(eng, "reserve")(plan.memory_bytes)  # noqa: B009
        elif self.memory_limit is not None:
            plan.check_memory(int(self.memory_limit))
        else:  # no limit given: the default guard, what the machine has available
            from privmob.engine.memory import default_guard

            guard = default_guard()
            plan.check_memory(guard.limit, baseline=guard.baseline, guard=True)
        # the margin, the warning and the budget, before anything is read or charged
        before_reading(plan, acct, max_margin=self.max_margin, warn=self.warn)
        if out is not None:
            out.require_space(plan.output_rows)  # the public domain, before the data
            tess = self.tessellation
            for writer in writers:
                out.extra.append(functools.partial(_with_tiles, writer, tess))
            if formats is not None and tess is not None:
                from privmob.render.layers import write_layers

                wanted = list(formats)
                keep, limit, step = self.all_flows, self.max_layer_bytes, self.progress
                out.extra.append(
                    lambda rel, d: write_layers(
                        rel, tess, d, wanted, keep_all=keep, max_bytes=limit, progress=step
                    )
                )
        data = self._load_for(spec) if load is None else load(self)
        acct.bind_input(data)  # the budget is bound to the data's content
        # the one gate: the kind's draft (exact values), the charge, then the noise
        release = gate.run(
            lambda: spec.draft(data, acct, rng=self.seed, progress=self.progress), acct
        )
        written = out.written if out else []
        return ReleaseResult(release, self.tessellation, written, basemap=not self.offline_maps)

    def _layer_plan(self, spec: Spec, plan: Plan, formats: Sequence[str] | None) -> list[str]:
        """The map layers' estimated sizes, said with the plan; a release without a layer
        (a count table by no tile) is refused here, before reading; a layer whose size is
        known before reading (tiles, or every OD cell with ``all_flows``) is refused here
        above the limit. An OD layer of the flows above the noise floor is never refused:
        once the release is charged and drawn, it is cut to the largest flows that fit
        (:func:`privmob.render.layers.cut_to_fit`, stated in the metadata)."""
        tess = self.tessellation
        if not formats or tess is None:
            return []
        from privmob.releases.counts import CountSpec
        from privmob.releases.dimensions import spelling
        from privmob.render.layers import (
            check_layer_size,
            layer_of,
            layer_paths,
            layer_size,
            no_layer,
            parse_formats,
            planned_features,
        )

        wanted = [f for f in parse_formats(formats) if f != "parquet"]
        if not wanted:
            return []
        # a count table's dimensions, as their layer reads them (their spellings)
        by = [spelling(b) for b in spec.by] if isinstance(spec, CountSpec) else None
        layer = layer_of(plan.kind, by)
        if layer is None:  # refused before reading, not once counted
            raise no_layer(plan.kind, by)
        features = planned_features(layer, tess, plan.output_rows)
        lines = layer.key is None
        if not lines or self.all_flows:
            check_layer_size(layer, features, tess, wanted, self.max_layer_bytes)
        sizes = [layer_size(layer, tess, features, f) for f in wanted]
        paths = layer_paths(layer, ".", wanted)
        what = "at most " if lines and not self.all_flows else ""
        said = ", ".join(
            f"{p.name} {what}~{s / 1e6:,.1f} MB" for p, s in zip(paths, sizes, strict=True)
        )
        if lines and not self.all_flows:
            said += (
                " (only the flows above the noise floor are drawn, the largest that fit "
                "the layer size limit)"
            )
        return [f"map layers: {said}"] if said else []

    def _define(self, spec: Spec, release: Release) -> None:
        """Record in ``release`` what it counted (when it is charged: the input was read,
        its shape is known)."""
        release.extra["definitions"] = self._definitions(spec)

    def _definitions(self, spec: Spec) -> JSONObject:
        """What a release of ``spec`` counted, from public parameters and the session's input
        options (``metadata.json`` ``definitions``; the keys its kind lists in the registry,
        :mod:`privmob.releases.kinds`, and the declared period)."""
        from privmob.data.times import naive_zone
        from privmob.releases.kinds import BY_ANY_NAME

        kind = BY_ANY_NAME.get(spec.kind)
        out: JSONObject = {"period": spec.public_period()}
        if kind is None:
            return out
        shape = self.shape if self.shape != "auto" or len(kind.shapes) != 1 else kind.shapes[0]
        values: JSONObject = {
            "input_shape": shape,
            "timezone": str(self.timezone),
            "input_timezone": naive_zone(self.timezone),
            "trip_rule": trip_definition(shape, self.trip_rule),
            "stay_points": stay_definition(shape, self.stay_distance, self.stay_minutes),
            "same_tile_trips": spec.same_tile_rule,
        }
        if spec.records != "trips":  # a count of points or events
            values["trip_rule"] = values["same_tile_trips"] = None
        out.update({key: values[key] for key in kind.definitions})
        return out

    # -- the input, read and validated once per shape ----------------------------------------------
    def _shape(self) -> str:
        if self.shape == "auto":
            from privmob.data import detect_shape

            self.shape = detect_shape(self._started_engine, self.data, columns=self.columns)
        return self.shape

    def _tiles(self) -> Tessellation:
        if self.tessellation is None:
            raise ConfigError(
                "this release counts over tiles: the session has no tessellation",
                hint="pass tessellation= (a path, a GeoDataFrame or a Tessellation)",
            )
        return self.tessellation

    def _load_for(self, spec: Spec) -> Loaded:
        """The input of a release of ``spec``, read as what it counts (its ``records``):
        ``trips`` (one-row trips without a rider id are each their own unit in a trip-level
        release that states no group size), ``trip-points``, else located events (homes, ...)."""
        if spec.records == "trips":
            trip_level = PrivacyUnit(spec.unit) is PrivacyUnit.TRIP
            return self._load_trips(trip_level and self._accountant.group_size is None)
        if spec.records == "trip-points":
            return self._load_trip_points()
        if spec.records in ("events", "homes"):
            return self._load_events()
        raise ConfigError(
            f"a release of {spec.records} has no default loader",
            hint="pass load= (session -> its input), e.g. the spec's own loader",
        )

    def _load_trips(
        self, uid_per_trip: bool = False, *, carry: Sequence[str] = (), coordinates: bool = False
    ) -> Loaded:
        """The input as trips (one-row trips as they are, trip points by their ends, events by
        the session's ``trip_rule``, GPS traces between stay points), read and validated once.
        ``uid_per_trip``: one-row trips without a uid column make each trip its own unit (for
        trip-level releases only). ``carry``: more input columns kept (one-row trips only);
        ``coordinates``: keep the ends' coordinates where the input gives them (one-row trips with
        coordinates, trip points, GPS traces)."""
        key = f"trips {uid_per_trip} {tuple(carry)} {coordinates}"
        if key not in self._loaded:
            from privmob.prepare.inputs import load_trips_any

            self.progress("reading and validating the input")
            reading = self._reading()
            self._loaded[key] = load_trips_any(
                self.data,
                shape=self._shape(),
                cells=self.cells,
                trip_rule=self.trip_rule,
                stay_distance=self.stay_distance,
                stay_minutes=self.stay_minutes,
                uid_per_trip=uid_per_trip,
                shape_detected=not self._shape_declared,
                keep_coordinates=coordinates,
                carry=tuple(carry),
                **reading,
            )
        return self._loaded[key]

    def _load_events(self, *, carry: Sequence[str] = ()) -> Loaded:
        """The input as located events (``uid, time, tile``), read and validated once;
        ``carry``: more input columns kept under their own names."""
        key = "events" if not carry else f"events {tuple(carry)}"
        if key not in self._loaded:
            from privmob.data import load_events

            if self._shape() == "trips":
                raise ConfigError(
                    "this release needs located events (uid, datetime, lat, lng or tile_id); "
                    "the session's input holds one-row trips",
                    hint="give events or trip points (GPS points) to the session",
                )
            self.progress("reading and validating the events")
            self._loaded[key] = load_events(
                self.data, cells=self.cells, carry=tuple(carry), **self._reading()
            )
        return self._loaded[key]

    def _load_trip_points(self, uid_per_trip: bool = False, *, carry: Sequence[str] = ()) -> Loaded:
        """The input as trip points (``uid, tid, time, lat, lng, tile``; GPS traces by stay
        points; one-row trips with start and end coordinates by their two ends), read and
        validated once. ``uid_per_trip``: one-row trips without a uid column make each trip
        its own unit (trip-level releases only). ``carry``: more input columns kept (trip points
        read as they are only)."""
        key = f"trip_points {uid_per_trip}" + (f" {tuple(carry)}" if carry else "")
        if key not in self._loaded:
            shape = self._shape()
            if carry and shape != "trip-points":
                raise ConfigError(
                    f"the column {carry[0]!r} is kept on trip points read as they are; "
                    f"points built from {shape} have no value of their own in it",
                    hint="give trip points (uid, tid, datetime, lat, lng and the column)",
                )
            if shape not in ("trip-points", "gps", "trips"):
                raise ConfigError(
                    f"the mobility report needs trip points (uid, tid, datetime, lat, lng), "
                    f"raw GPS traces or one-row trips with coordinates; the session's input "
                    f"holds {shape}",
                    hint="raw GPS traces (uid, datetime, lat, lng): "
                    + spelled("--input-shape gps", 'input=pm.Input(shape="gps")'),
                )
            self.progress("reading and validating the trip points")
            common = self._reading()
            if shape == "gps":
                from privmob.prepare.inputs import load_gps_points

                points = load_gps_points(self.data, self.stay_distance, self.stay_minutes, **common)
            elif shape == "trips":
                from privmob.data.sources import load_trips, trip_points_from_trips

                trips = load_trips(self.data, uid_per_trip=uid_per_trip, coordinates=True, **common)
                points = trip_points_from_trips(trips)
            else:
                from privmob.data import load_trip_points

                points = load_trip_points(self.data, carry=tuple(carry), **common)
            self._loaded[key] = points
        return self._loaded[key]

    def _reading(self) -> SessionReading:
        """How the session reads its input, as the loaders' keywords: its engine, its tiles,
        the column mapping, the time zone of naive timestamps and the CSV delimiter."""
        return {
            "engine": self._started_engine,
            "tessellation": self._tiles(),
            "columns": self.columns,
            "timezone": self.timezone,
            "delimiter": self.delimiter,
        }

    def _load_density_inputs(self, week: str, cover: bool) -> DensityInputs:
        """The density release's inputs for the week starting ``week``: the zones, tower sites,
        Voronoi shares and cover (public), then the session's events validated against the
        towers table (``cells``), read once per week and cover."""
        from privmob.releases.density_inputs import load_density_inputs

        if self.cells is None:
            raise ConfigError(
                "the density release needs the towers table",
                hint="pass input=pm.Input(cells='cells.csv') (cell_id, lat, lng) to the Session",
            )
        key = f"density {week} {cover}"
        if key not in self._density:
            self._density[key] = load_density_inputs(
                self.data,
                self.cells,
                self._tiles(),
                zone_id=None,
                week=week,
                cover=cover,
                timezone=self.timezone,
                columns=self.columns,
                step=self.progress,
                engine=self._started_engine,
            )
        return self._density[key]


def internal(cls: type, old: str, new: str, what: str) -> None:
    """``Session.<old>``, now the internal ``Session.<new>`` (of ``cls``): kept one minor
    version, with a :class:`DeprecationWarning` at the caller's line (once per line, Python's
    default), and left out of ``dir()``."""
    from privmob.surface import warn_caller

    def said() -> None:
        warn_caller(
            f"Session.{old} is deprecated and will be removed in the next minor version: "
            f"{what} is internal (a release method reads what it needs; s.ledger says what was "
            "spent)",
            DeprecationWarning,
        )

    DEPRECATED.add(old)
    if not callable(getattr(cls, new, None)):  # an attribute or a property

        def read(self: SessionBase) -> object:
            said()
            return getattr(self, new)

        setattr(cls, old, property(read, doc=f"Deprecated: internal ({what})."))
        return

    def method(self: SessionBase, *args: object, **kwargs: object) -> object:
        said()
        result: object = getattr(self, new)(*args, **kwargs)
        return result

    method.__name__, method.__doc__ = old, f"Deprecated: internal ({what})."
    setattr(cls, old, method)


#: the Session's deprecated names (earlier names of its methods, its plumbing made internal):
#: they work and warn, and ``dir(session)`` leaves them out
DEPRECATED: set[str] = set()
#: the earlier public names of the session's loaders and plumbing -> (internal name, what it is)
INTERNAL = {
    "accountant": ("_accountant", "the session's accountant"),
    "engine": ("_started_engine", "the session's engine"),
    **{  # the loaders: the same name behind an underscore
        name: (f"_{name}", "the session's reading of its input")
        for name in (
            "load_for",
            "load_trips",
            "load_events",
            "load_trip_points",
            "load_density_inputs",
        )
    },
}
for _old, (_new, _what) in INTERNAL.items():
    internal(SessionBase, _old, _new, _what)


#: the constructor's keywords and their defaults (for the typed groups of session/options.py)
_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(SessionBase.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}
