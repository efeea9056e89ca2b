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
5. the release runs: bounds, counts, noise, then stage -> charge -> rename when it has an
   output (``releases/publish.py``), or the charge alone (write it later with ``write``).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privmob.dp import Budget, PrivacyUnit, budget_cost
from privmob.errors import ConfigError
from privmob.releases.specs import Plan, Spec
from privmob.results import ReleaseResult
from privmob.session.ledger_view import SessionLedger

Progress = Callable[[str], None]
#: reads the input of a release from the session (e.g. ``Session.load_trips``) -> loaded data
Load = Callable[[Any], Any]
#: runs a spec on loaded data: (spec, data, accountant, progress) -> release
Execute = Callable[[Any, Any, Any, Progress], Any]
#: a file written beside the tables: (release, folder, tessellation) -> paths
Writer = Callable[[Any, Path, Any], Any]


def _quiet(_message: str) -> None:
    return None


def _with_tiles(writer: Writer, tess: Any, release: Any, folder: Path) -> Any:
    return writer(release, folder, tess)


class SessionBase:
    """Differentially private releases of one mobility dataset (see :class:`Session`)."""

    def __init__(
        self,
        data: Any,
        *,
        tessellation: Any = None,
        budget: Budget | float | None = None,
        ledger: str | Path | None = None,
        dataset: str | None = None,
        engine: Any = "duckdb",
        memory_limit: str | int | None = None,
        spill_dir: str | Path | None = None,
        spark_master: str | None = None,
        spark_conf: Sequence[str] | Mapping[str, str] | None = None,
        shape: str = "auto",
        columns: dict[str, str] | None = None,
        delimiter: str | None = None,
        names: Sequence[str] | None = None,
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
    ) -> None:
        from privmob.data import SHAPES
        from privmob.data.times import clock
        from privmob.engine.buckets import parse_memory
        from privmob.privacy.ledger import Ledger
        from privmob.releases.base import Accountant
        from privmob.releases.stamp import test_mode_mark

        if shape not in SHAPES:
            raise ConfigError(f"unknown input shape '{shape}'", hint=f"use one of {SHAPES}")
        self.data = data
        self.shape = shape
        self.columns = columns
        self.delimiter = delimiter
        self.names = None if names is None else [str(n).strip() for n in names]
        # the zone of days, hours and bins; naive timestamps are read in input_timezone
        self.timezone = clock(timezone, input_timezone)
        self.cells = cells
        self.trip_rule = trip_rule
        self.stay_distance = stay_distance
        self.stay_minutes = stay_minutes
        self.seed = seed
        self.progress: Progress = progress or _quiet
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
                    hint="pass budget=pm.PureDP(10), or ledger='ledger.sqlite' for a kept one",
                )
            self._tmpdir = tempfile.mkdtemp(prefix="privmob-ledger-")  # mode 0700
            # removed on close(), when the session is collected, or at exit (whichever first)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
            ledger = Path(self._tmpdir) / "ledger.sqlite"
        if dataset is None:
            if not isinstance(data, str | Path):
                raise ConfigError(
                    "name the dataset whose budget is charged",
                    hint='pass dataset="trips-2024" (a table has no file name to use)',
                )
            from privmob.data.reading import dataset_name

            dataset = dataset_name(None, data)
        led = Ledger(ledger)
        cost = budget_cost(budget)
        if cost is not None:
            # set once in the budget's unit; a different budget already there is refused
            led.set_budget(dataset, cost.epsilon, cost.delta, PrivacyUnit(unit))
        self._accountant = Accountant(
            led,
            dataset,
            group_size=group_size,
            annotate=[test_mode_mark(seed)] if test_mode else [],
            new_dataset_for_same_data=new_dataset_for_same_data,
        )
        self.ledger = SessionLedger(led, dataset)
        self._engine_arg = engine
        self._engine: Any = None
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

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def accountant(self) -> Any:
        """Who pays: the ledger and the dataset (:class:`~privmob.releases.base.Accountant`)."""
        return self._accountant

    @property
    def engine(self) -> Any:
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
        load: Load,
        *,
        output: str | Path | Any = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        writers: Sequence[Writer] = (),
        marks: Sequence[Callable[[Any], None]] = (),
        execute: Execute | None = None,
        engine: bool = True,
        on_plan: Callable[[Plan], None] | None = None,
    ) -> ReleaseResult:
        """Run one release through the lifecycle (see the module's docstring) and return it.

        ``spec``: the release's public parameters (``privmob.releases.specs``); ``load``:
        session -> the input, read and validated (``Session.load_trips``,
        ``Session.load_events``, ``Session.load_trip_points`` or your own); ``output``:
        a folder (or a :class:`~privmob.releases.publish.Output`) where the release is
        published atomically once charged; ``formats``: map layers written beside the tables
        (``geoparquet``, ``geojson``, ``csv``); ``writers``: more files staged with them;
        ``marks``: applied to the release before it is charged (e.g. not for publication);
        ``execute``: runs the spec on the data (default ``spec.run``); ``engine``: ``False``
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
        if on_plan is not None:
            on_plan(plan)
        self._accountant.precheck(plan.cost)  # what the budget cannot pay, before reading
        if out is not None:
            out.require_space(plan.output_rows)  # the public domain, before the data
            tess = self.tessellation
            for writer in writers:
                out.extra.append(functools.partial(_with_tiles, writer, tess))
            if formats is not None and tess is not None:
                from privmob.render.layers import write_layers

                wanted = list(formats)
                out.extra.append(lambda rel, d: write_layers(rel, tess, d, wanted))
        if engine and self._engine is None and self.memory_limit and self._engine_arg == "duckdb":
            # before the engine starts: a limit too small for this release (its domain
            # included) is refused naming the minimum that would do
            import privmob.engine.duckdb  # noqa: F401  (its libraries count, as when it starts)
            from privmob.engine.memory import ProcessMemory, rss_bytes

            before = ProcessMemory(int(self.memory_limit), rss_bytes())
            if before.available >= before.minimum - before.baseline:  # the process can start:
                plan.check_memory(before.limit, baseline=before.baseline)  # the domain alone
            before.engine_memory(plan.memory_bytes)  # below the minimum: names it
        eng = self.engine if engine else None
        # the plan against what the process leaves of the memory limit, measured by the engine
        # once its libraries are loaded (it refused a limit below its own minimum already)
        mem = getattr(eng, "process_memory", None)
        if mem is not None and eng is not None:
            plan.check_memory(mem.limit, baseline=mem.baseline)
            eng.reserve(plan.memory_bytes)  # the domain's share; the engine: the rest
        elif self.memory_limit is not None:
            plan.check_memory(int(self.memory_limit))
        else:  # no limit given: the default guard, what the machine has available
            from privmob.engine.memory import default_guard

            guard = default_guard()
            plan.check_memory(guard.limit, baseline=guard.baseline, guard=True)
        data = load(self)
        acct = dataclasses.replace(
            self._accountant, output=out, annotate=[*self._accountant.annotate, *marks]
        )
        acct.bind_input(data)  # the budget is bound to the data's content
        if execute is None:
            release = spec.run(data, acct, rng=self.seed, progress=self.progress)
        else:
            release = execute(spec, data, acct, self.progress)
        return ReleaseResult(release, self.tessellation, written=out.written if out else [])

    # -- the input, read and validated once per shape ----------------------------------------------
    def _shape(self) -> str:
        if self.shape == "auto":
            from privmob.data import detect_shape

            self.shape = detect_shape(self.engine, self.data, columns=self.columns)
        return self.shape

    def _tiles(self) -> Any:
        if self.tessellation is None:
            raise ConfigError(
                "this release counts over tiles: the session has no tessellation",
                hint="pass tessellation= (a path, a GeoDataFrame or a Tessellation)",
            )
        return self.tessellation

    def load_trips(self, uid_per_trip: bool = False) -> Any:
        """The input as trips (one-row trips as they are, trip points by their ends, events by
        the session's ``trip_rule``, GPS traces between stay points), read and validated once.
        ``uid_per_trip``: one-row trips without a uid column make each trip its own unit (for
        trip-level releases only)."""
        key = f"trips {uid_per_trip}"
        if key not in self._loaded:
            from privmob.prepare.inputs import load_trips_any

            self.progress("reading and validating the input")
            self._loaded[key] = load_trips_any(
                self.data,
                engine=self.engine,
                tessellation=self._tiles(),
                shape=self._shape(),
                cells=self.cells,
                columns=self.columns,
                timezone=self.timezone,
                delimiter=self.delimiter,
                trip_rule=self.trip_rule,
                stay_distance=self.stay_distance,
                stay_minutes=self.stay_minutes,
                uid_per_trip=uid_per_trip,
            )
        return self._loaded[key]

    def load_events(self) -> Any:
        """The input as located events (``uid, time, tile``), read and validated once."""
        if "events" not in self._loaded:
            from privmob.data import load_events

            if self._shape() == "trips":
                raise ConfigError(
                    "this release needs located events (uid, datetime, lat, lng or tile_id); "
                    "the session's input holds one-row trips",
                    hint="give events or trip points (GPS points) to the session",
                )
            self.progress("reading and validating the events")
            self._loaded["events"] = load_events(
                self.data,
                engine=self.engine,
                tessellation=self._tiles(),
                cells=self.cells,
                columns=self.columns,
                timezone=self.timezone,
                delimiter=self.delimiter,
                header=self.names is None,
                names=self.names,
            )
        return self._loaded["events"]

    def load_trip_points(self) -> Any:
        """The input as trip points (``uid, tid, time, lat, lng, tile``; GPS traces by stay
        points), read and validated once."""
        if "trip_points" not in self._loaded:
            shape = self._shape()
            if shape not in ("trip-points", "gps"):
                raise ConfigError(
                    f"the mobility report needs trip points (uid, tid, datetime, lat, lng); "
                    f"the session's input holds {shape}",
                    hint="give the session trip points, or use od_matrix for trips",
                )
            self.progress("reading and validating the trip points")
            common = {
                "engine": self.engine,
                "tessellation": self._tiles(),
                "columns": self.columns,
                "timezone": self.timezone,
                "delimiter": self.delimiter,
            }
            if shape == "gps":
                from privmob.prepare.inputs import load_gps_points

                points = load_gps_points(self.data, self.stay_distance, self.stay_minutes, **common)
            else:
                from privmob.data import load_trip_points

                points = load_trip_points(self.data, **common)
            self._loaded["trip_points"] = points
        return self._loaded["trip_points"]

    def load_density_inputs(self, week: str, cover: bool) -> Any:
        """The density release's inputs for the week starting ``week``: the zones, tower sites,
        Voronoi shares and cover (public), then the session's events validated against the
        towers table (``cells``), read once per week and cover."""
        from privmob.releases.density_inputs import load_density_inputs

        if self.cells is None:
            raise ConfigError(
                "the density release needs the towers table",
                hint="pass cells='cells.csv' (cell_id, lat, lng) to the Session",
            )
        key = f"density {week} {cover}"
        if key not in self._loaded:
            self._loaded[key] = load_density_inputs(
                self.data,
                self.cells,
                self._tiles(),  # a Tessellation passes through
                zone_id=None,
                week=week,
                cover=cover,
                timezone=self.timezone,
                columns=self.columns,
                step=self.progress,
                engine=self.engine,
            )
        return self._loaded[key]
