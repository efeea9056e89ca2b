"""``privmob evaluate``: what an epsilon costs in downstream quality (a command group).

Subcommands attach to ``evaluate_app`` (other modules may add theirs: import ``evaluate_app``
from here and decorate with ``@evaluate_app.command(...)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import Progress

from privmob.cli import options as o
from privmob.cli.common import (
    ColumnsOpt,
    DelimiterOpt,
    NamesOpt,
    NoHeaderOpt,
    OverwriteOpt,
    QuietOpt,
    SeedOpt,
    console,
)
from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind

if TYPE_CHECKING:
    from privmob.evaluate.decision_grid import Scenario

evaluate_app = typer.Typer(
    help="Simulate decisions with private vs exact statistics (for the data holder; not a "
    "release).",
    no_args_is_help=True,
)


#: how many times each simulation runs (``decisions``, ``density``)
RepetitionsOpt = Annotated[int, typer.Option("--repetitions", "-r")]


def _floats(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"--epsilons must be comma-separated numbers, got {text!r}") from exc
    if not vals or any(v <= 0 for v in vals):
        raise ConfigError("--epsilons needs at least one epsilon > 0")
    return vals


@evaluate_app.command("decisions")
def decisions(
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory")] = Path(
        "evaluate-decisions"
    ),
    epsilons: Annotated[str, typer.Option("--epsilons", help="comma-separated grid")] = "0.1,0.5,1",
    repetitions: RepetitionsOpt = 5,
    max_trips: Annotated[int, o.max_trips("trips per user (1 = trip level)")] = 1,
    tau: Annotated[int, typer.Option("--tau", help="suppression threshold")] = 15,
    noise: o.NoiseOpt = NoiseKind.DISCRETE_LAPLACE,
    regions: Annotated[int, typer.Option("--regions", help="synthetic: number of regions")] = 40,
    days: Annotated[int, typer.Option("--days", help="synthetic: days of OD matrices")] = 60,
    sim_days: Annotated[int, typer.Option("--sim-days", help="SIR days (cycles the OD)")] = 300,
    shock_region: Annotated[
        int | None, typer.Option("--shock-region", help="aid targeting origin (index)")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k")] = 3,
    events: Annotated[
        Path | None,
        typer.Option("--events", help="exact inputs from these events (else synthetic)"),
    ] = None,
    tessellation: Annotated[Path | None, o.tessellation("zones, with --events")] = None,
    cells: Annotated[Path | None, typer.Option("--cells", help="towers, with --events")] = None,
    start: Annotated[str | None, o.start("study period start")] = None,
    end: Annotated[str | None, o.end("study period end (exclusive)")] = None,
    trip_rule: Annotated[str, typer.Option("--trip-rule")] = "events",
    columns: ColumnsOpt = None,
    delimiter: DelimiterOpt = None,
    names: NamesOpt = None,
    no_header: NoHeaderOpt = False,
    timezone: o.TimezoneOpt = "UTC",
    seed: SeedOpt = None,
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Kohli, Aiken and Blumenstock's Tables 2 and 3 over an epsilon grid: SIR intervention
    decisions (I/N >= 20%) and aid targeting after a shock, private vs exact, plus a plot of
    error vs epsilon.

    Runs on a synthetic gravity-model country, or on exact daily OD matrices and home counts
    computed from --events over a declared period. The results compare private with exact
    values, so they are NOT differentially private and spend no budget: use them on
    pre-program or synthetic data, never publish them.
    """
    from privmob.evaluate.decision_grid import run_grid, synthetic_scenario, write_grid
    from privmob.evaluate.notice import NOT_PRIVATE

    eps = _floats(epsilons)
    if events is None:
        scenario = synthetic_scenario(regions, days, seed=0 if seed is None else seed)
    else:
        scenario = _events_scenario(
            events,
            tessellation,
            cells,
            start,
            end,
            max_trips,
            trip_rule,
            columns,
            delimiter,
            timezone,
            names.split(",") if names else None,
            no_header,
        )
    with Progress(console=console, disable=quiet, transient=True) as prog:
        task = prog.add_task("simulating", total=len(eps) * repetitions)
        t2, t3 = run_grid(
            scenario,
            eps,
            repetitions=repetitions,
            T=max_trips,
            tau=tau,
            kind=noise,
            shock_region=shock_region,
            top_k=top_k,
            sim_days=sim_days,
            seed=seed,
            progress=lambda i, n: prog.update(task, completed=i),
        )
    paths = write_grid(t2, t3, out, overwrite=overwrite)
    if not quiet:
        console.print((out / "decisions_table2.md").read_text())
        console.print((out / "aid_table3.md").read_text())
    console.print(f"wrote {', '.join(str(p) for p in paths)}")
    console.print(f"[yellow]{NOT_PRIVATE}[/]", highlight=False)


def _events_scenario(
    events: Path,
    tessellation: Path | None,
    cells: Path | None,
    start: str | None,
    end: str | None,
    max_trips: int,
    trip_rule: str,
    columns: str | None,
    delimiter: str | None,
    timezone: str,
    names: list[str] | None = None,
    no_header: bool = False,
) -> Scenario:
    from privmob.cli.common import parse_columns
    from privmob.data.reading import as_csv_files
    from privmob.data.sources import load_events
    from privmob.data.tessellation_input import load_tessellation
    from privmob.domain import Period
    from privmob.engine import DuckDBEngine
    from privmob.evaluate.decision_grid import scenario_from_events

    if tessellation is None or start is None or end is None:
        raise ConfigError(
            "--events needs --tessellation, --start and --end (a public study period)"
        )
    tess = load_tessellation(tessellation)
    source = as_csv_files(events, header=not no_header, names=names)
    loaded = load_events(
        source, engine=DuckDBEngine(), tessellation=tess, cells=cells,
        columns=parse_columns(columns), timezone=timezone, delimiter=delimiter,
    )  # fmt: skip
    period = Period.parse("day", start, end)
    return scenario_from_events(loaded, tess, period, max_trips=max_trips, trip_rule=trip_rule)


def register(app: typer.Typer) -> None:
    app.add_typer(evaluate_app, name="evaluate")
