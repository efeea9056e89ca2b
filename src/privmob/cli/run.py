"""The one path every release command takes (``od``, ``population``, ``report``, ``density``,
``series-counts``, ``series``): a command parses its own options into a release spec
(:mod:`privmob.releases.specs`) and a loader for its input, and hands them here; this module
turns the shared options into a :class:`privmob.Session` and runs the release through the
session's lifecycle (:meth:`privmob.session.base.SessionBase.run`), the same as from Python.

What the command line adds to the session: the output is checked before the session touches
the ledger (a release that cannot be written costs nothing, not even a budget line), the
budget rule (``--budget`` sets the dataset's budget once, a different one is refused), test
mode (``--seed`` only with ``--test-mode``: a throw-away ledger, "not for publication" marks),
the plan printed before anything is read, the steps shown as they run, and what was written
and what it cost printed at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.cli import common as c
from privmob.privacy.costs import PrivacyUnit

if TYPE_CHECKING:
    from privmob.data.tessellation_input import TessellationSource
    from privmob.session.options import EngineOptions

#: what a command gives to read its input: the session -> loaded data (``Session._load_trips``,
#: ``Session._load_events``, ``Session._load_trip_points``, ``Session._load_density_inputs``)
Load = Callable[[Any], Any]


@dataclass(frozen=True)
class RunOptions:
    """The options every release command passes through unchanged (same names in each)."""

    output: Path
    ledger: str | None = None
    dataset: str | None = None
    new_dataset: bool = False
    budget: float | None = None
    engine: str = "duckdb"
    memory_limit: str | None = None
    spill_dir: Path | None = None
    spark_master: str | None = None
    spark_conf: list[str] | None = None
    seed: int | None = None
    test_mode: bool = False
    overwrite: bool = False
    output_format: list[str] | None = None
    quiet: bool = False
    group_size: int | None = None
    max_margin: float | None = None
    yes: bool = False
    max_layer_size: str | None = None
    all_flows: bool = False

    @classmethod
    def of(cls, params: dict[str, Any]) -> RunOptions:
        """The run options among a command's parsed parameters (``ctx.params``)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    def engine_options(self) -> EngineOptions:
        """The session's engine group (:class:`~privmob.session.options.EngineOptions`): its
        fields are run options of the same names."""
        from privmob.session.options import EngineOptions

        return EngineOptions(**{f.name: getattr(self, f.name) for f in fields(EngineOptions)})


def input_options(params: dict[str, Any], shape: str | None = None) -> dict[str, Any]:
    """How the session reads the input, from the input options a command has (same names in
    each: ``--input-shape``, ``--columns``, ``--delimiter``, ``--names``, ``--no-header``,
    ``--uid-from-filename``, ``--timezone``,
    ``--input-timezone``, ``--cells``, ``--trip-rule``, ``--stay-distance``,
    ``--stay-minutes``); ``shape`` when the command reads one shape only."""
    names = params.get("names")
    return {
        "shape": shape or params.get("input_shape") or "auto",
        "columns": c.parse_columns(params.get("columns")),
        "delimiter": params.get("delimiter"),
        "names": names.split(",") if names else None,
        "header": not params.get("no_header", False),
        "uid_from_filename": bool(params.get("uid_from_filename", False)),
        "timezone": params.get("timezone") or "UTC",
        "input_timezone": params.get("input_timezone"),
        "cells": params.get("cells"),
        "trip_rule": params.get("trip_rule") or "events",
        "stay_distance": params.get("stay_distance"),
        "stay_minutes": params.get("stay_minutes"),
    }


def memory_bytes(memory_limit: str | None) -> int | None:
    if memory_limit is None:
        return None
    from privmob.engine.buckets import parse_memory

    return int(parse_memory(memory_limit))


def print_plan(plan: Any) -> None:
    """The plan, on stderr (stdout keeps what was written)."""
    text = plan.summary()
    if plan.cells == 0:  # a domain read from the data (series --domain-from-data)
        text = (
            f"{plan.kind}: cost {plan.cost.describe()}; the domain is read from the file "
            "(its size is unknown before reading)"
        )
    if plan.warning:  # said with the plan, before anything is read (refused without --yes)
        text += f"; warning: {plan.warning}"
    c.console_err.print(f"plan: {text}", markup=False, highlight=False)


def run_release(
    ctx: Any,
    *,
    data: str | Path,
    tessellation: TessellationSource | None,
    spec: Callable[[Any], Any],
    load: Load | None = None,
    shape: str | None = None,
    tile_id: str | None = None,
    output: Callable[[], Any] | None = None,
    layers: bool = True,
    writers: list[Callable[[Any, Path, Any], Any]] | None = None,
    budget_delta: float = 0.0,
    budget_unit: PrivacyUnit | str | None = None,
    marks: list[Callable[[Any], None]] | None = None,
    summary: Callable[[Any, list[Path], Any], None] | None = None,
    engine: bool = True,
) -> Any:
    """Run one release command (see the module's docstring) and return the release.

    ``ctx``: the command's context (its parsed options give the :class:`RunOptions`);
    ``data``: the input (it names the dataset); ``tessellation``: a path (read here with
    ``tile_id``, default the command's ``--tile-id``) or ``None``; ``spec``: tessellation ->
    the release spec (e.g. ``functools.partial(OdSpec, epsilon=...)``); ``load``: session ->
    the input, read and validated (default: by what the spec counts,
    :meth:`~privmob.session.base.SessionBase._load_for`; the session reads it as the
    command's input options say, :func:`input_options`; ``shape`` for a command that reads
    one shape only); ``output``: makes the
    :class:`~privmob.releases.publish.Output` when it is not the ``--output`` folder (the
    report's files); ``layers``: write the ``--format`` layers;
    ``writers``: more files staged with the tables (release, folder, tessellation) -> paths;
    ``summary``: what is printed at the end (default: the files and the cost); ``engine``:
    ``False`` for an input read without an engine; ``budget_unit``: the unit of a budget set
    by ``--budget`` (default: the release's own, :func:`release_unit`).
    """
    from privmob.cli.test_mode import check_test_mode
    from privmob.dp import ApproxDP, PureDP
    from privmob.privacy.ledger import default_ledger_location
    from privmob.releases.publish import Output
    from privmob.session import Session
    from privmob.session.options import Input, LedgerOptions

    if tile_id is None:
        tile_id = ctx.params.get("tile_id")  # an input option (common.INPUT_OPTIONS)
    if ctx.meta.get(PLAN_ONLY):  # privmob plan <release>: the plan alone, nothing read
        return show_plan(ctx, tessellation, tile_id, spec)
    opts = RunOptions.of(ctx.params)
    check_test_mode(opts.ledger, opts.seed, opts.test_mode)
    # before anything is read or charged: a release that cannot be written must cost nothing
    out = (output() if output else Output(opts.output, overwrite=opts.overwrite)).check()
    formats = None
    if layers:
        from privmob.render.layers import parse_formats

        formats = parse_formats(opts.output_format)  # layers beside the tables, staged with them
    budget = None
    if opts.budget is not None and not opts.test_mode:
        budget = ApproxDP(opts.budget, budget_delta) if budget_delta else PureDP(opts.budget)
    with c.Steps(opts.quiet) as step:
        tiles: Any = tessellation
        if isinstance(tessellation, str | Path):  # public: read before the spec needs it
            from privmob.data.tessellation_input import load_tessellation

            step("reading the tessellation")
            tiles = load_tessellation(tessellation, id_column=tile_id)
        the_spec = spec(tiles)
        session = Session(
            data,
            tessellation=tiles,
            input=Input(tile_id=tile_id, **input_options(ctx.params, shape)),
            ledger=LedgerOptions(
                None if opts.test_mode else (opts.ledger or default_ledger_location()),
                dataset=c.dataset_name(opts.dataset, data),
                budget=budget,
                unit=budget_unit or release_unit(the_spec, opts.group_size),
                group_size=opts.group_size,
                new_dataset_for_same_data=opts.new_dataset,
            ),
            engine=opts.engine_options(),
            seed=opts.seed,
            test_mode=opts.test_mode,
            progress=step,
            max_margin=opts.max_margin,
            max_layer_size=opts.max_layer_size,
            all_flows=opts.all_flows,
            warn=c.print_warning,
            confirm=opts.yes,
        )
        with session:
            if opts.test_mode:  # the throw-away ledger pays what this release costs
                test_mode_budget(session, the_spec.plan().cost, opts.budget, budget_delta)
            result = session.run(
                the_spec,
                load,
                output=out,
                formats=formats,
                writers=writers or (),
                marks=marks or (),
                engine=engine,
                on_plan=None if opts.quiet else print_plan,
            )
            (summary or c.print_release_summary)(
                result.release, result.written, session._accountant
            )
    return result.release


def release_unit(spec: Any, group_size: int | None) -> PrivacyUnit:
    """The unit of privacy a budget set for ``spec``'s release protects: the release's own
    (rides without a rider id released per trip get a trip-level budget), or the user when a
    group size converts a finer release to users (``--group-size``)."""
    if group_size is not None:
        return PrivacyUnit.USER
    return PrivacyUnit(spec.plan().cost.unit)


def test_mode_budget(session: Any, cost: Any, epsilon: float | None, delta: float) -> None:
    """Set the throw-away ledger's budget of a test-mode run in the release's own unit and
    with the delta it spends (``--budget``, or the release's epsilon), so that every noise and
    unit can run in test mode (a pure budget in users refused Gaussian and trip-level
    releases, exit 3)."""
    acct = session._accountant
    eps = cost.epsilon if epsilon is None else epsilon
    acct.ledger.set_budget(acct.dataset, eps, max(delta, cost.delta), cost.unit)


#: ``ctx.meta`` key set by ``privmob plan <release>``: run_release shows the plan and stops
PLAN_ONLY = "privmob.plan_only"

#: options of a release that only matter once data is read or a release is written: left out
#: of ``privmob plan <release>``
RUN_ONLY = frozenset(
    {
        "output", "ledger", "dataset", "new_dataset", "budget", "engine", "spill_dir",
        "spark_master", "spark_conf", "seed", "test_mode", "overwrite", "output_format",
        "quiet", "columns", "delimiter", "names", "cells", "input_shape", "stay_distance",
        "stay_minutes", "trip_rule", "unique", "zone_mapping", "input_timezone", "group_size",
        "max_layer_size", "all_flows", "yes", "offline_maps",
        "no_header", "uid_from_filename",
    }
)  # fmt: skip


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


def show_plan(
    ctx: Any,
    tessellation: TessellationSource | None,
    tile_id: str | None,
    spec: Callable[[Any], Any],
) -> Any:
    """Print the plan of a release from its public parameters (the tessellation is public);
    refuse it when it needs more than ``--memory-limit``. Reads no data, charges nothing."""
    tess = None
    if tessellation is not None:
        from privmob.data.tessellation_input import load_tessellation

        tess = load_tessellation(tessellation, id_column=tile_id)
    plan = spec(tess).plan()
    margin = plan.margin_of_error_95
    c.console.print(f"{plan.kind} plan (reads no data, spends nothing)", markup=False)
    for label, value in (
        ("cells", f"{plan.cells:,}"),
        ("memory", f"~{_size(plan.memory_bytes)}"),
        ("output rows", f"{plan.output_rows:,}"),
        ("95% margin of error", "n/a" if margin != margin else f"+/-{margin:,.1f} per cell"),
        ("cost", plan.cost.describe()),
    ):
        c.console.print(f"  {label}: {value}", markup=False, highlight=False)
    c.console.print(f"plan: {plan.summary()}", markup=False, highlight=False)
    if plan.warning:
        c.print_warning(plan.warning)
    plan.check_memory(memory_bytes(ctx.params.get("memory_limit")))
    plan.check_margin(ctx.params.get("max_margin"))
    return plan


def plan_command(release: Any, name: str) -> Any:
    """``privmob plan <name>``: the release command's own options minus the input and what
    only matters once data is read; it runs the release's own code up to its plan."""
    fn = release.callback.__wrapped__  # the command's function (typer keeps it)
    kept = [
        p
        for p in release.params
        if p.param_type_name == "option" and p.name not in RUN_ONLY and p.expose_value
    ]
    defaults = {p.name: p.default for p in release.params}

    class PlanCommand(type(release)):  # type: ignore[misc]  # the release's class: its aliases
        def invoke(self, ctx: Any) -> Any:
            ctx.meta[PLAN_ONLY] = True
            return fn(ctx=ctx, **{**defaults, **ctx.params})

    return PlanCommand(
        name=name,
        params=kept,
        help=f"The plan of `privmob {name}`: cells, memory, output size, 95% margin of error "
        "and cost, from public parameters only (reads no data, spends nothing).",
    )
