"""``privmob evaluate density``: the density scheme vs LPA over epsilons (not private)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.density_options import OldMaxTripsOpt, visits_bound
from privmob.cli.evaluate import RepetitionsOpt
from privmob.data.csv_cells import write_csv
from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.engine.base import Engine


def density_eval(
    events: Annotated[
        Path | None, typer.Argument(help="events (uid, datetime, cell_id); omit with --synthetic")
    ] = None,
    cells: Annotated[Path | None, typer.Option("--cells", help="cells: cell_id, lat, lng")] = None,
    tessellation: Annotated[
        Path | None, o.tessellation("zones (GeoJSON, GeoParquet, Shapefile)")
    ] = None,
    start: Annotated[str | None, o.start("start of the public week, in --timezone")] = None,
    synthetic: Annotated[
        int | None, typer.Option("--synthetic", help="use a synthetic city with this many users")
    ] = None,
    towers: Annotated[int, typer.Option("--towers", help="synthetic: towers")] = 300,
    grid: Annotated[int, typer.Option("--grid", help="synthetic: grid x grid zones")] = 16,
    commute_spread: Annotated[
        float,
        typer.Option(
            "--commute-spread",
            help="synthetic: spread (hours) of each user's office hours; 0: all at 9:00-18:00",
        ),
    ] = 0.0,
    epsilons: Annotated[str, typer.Option("--epsilons", help="comma-separated")] = (
        "0.1,0.3,0.5,1.0"
    ),
    repetitions: RepetitionsOpt = 5,
    max_visits: Annotated[
        int, typer.Option("--max-visits", "-T", help="visits per user kept in the week (l)")
    ] = 30,
    max_trips: OldMaxTripsOpt = None,
    delta: Annotated[float, typer.Option("--delta", help="> 0 adds EFPAG")] = 2e-6,
    emd_hours: Annotated[
        str, typer.Option("--emd-hours", help="hours of the week for EMD (comma-separated, '')")
    ] = "10,34,58,82,106,130,154",
    tile_id: o.TileIdOpt = None,
    timezone: o.TimezoneOpt = "UTC",
    output: Annotated[Path, typer.Option("--output", "-o")] = Path("privmob-density-eval"),
    quiet: c.QuietOpt = False,
) -> None:
    """Run the scheme (EFPA, EFPAG, EFPAG without improvements) and LPA over several epsilons
    and repetitions; write a table (CSV) and a plot (PNG) like Acs and Castelluccia's Figures 7-9.

    The output compares private results with the exact data and is NOT private.
    """
    from privmob.evaluate.density_eval import evaluate_density, plot_summary, summarise
    from privmob.evaluate.notice import write_notice
    from privmob.prepare.presample import density_counts
    from privmob.releases.density_inputs import load_density_inputs

    max_visits = visits_bound(max_visits, max_trips)
    eps = [float(e) for e in epsilons.split(",") if e.strip()]
    hours = [int(h) for h in emd_hours.split(",") if h.strip()]
    with c.Steps(quiet) as step:
        if synthetic:
            from privmob.data.density_synth import synthetic_city
            from privmob.engine import DuckDBEngine
            from privmob.releases.density import density_geometry

            step(f"synthetic city: {synthetic} users, {towers} towers, {grid * grid} zones")
            city = synthetic_city(synthetic, towers, grid, seed=1, commute_spread_h=commute_spread)
            geometry = density_geometry(
                city.towers.lng.to_numpy(), city.towers.lat.to_numpy(), city.zones
            )
            eng: Engine = DuckDBEngine()
            eng.register("pm_synth_events", city.events[["uid", "time", "tile"]])
            view, week_start = "pm_synth_events", city.week_start
        else:
            if events is None or cells is None or tessellation is None or start is None:
                raise ConfigError(
                    "give EVENTS with --cells, --tessellation and --start, or --synthetic N",
                    hint="privmob evaluate density --synthetic 100000",
                )
            inp = load_density_inputs(
                events,
                cells,
                tessellation,
                zone_id=tile_id,
                week=start,
                cover=True,
                timezone=timezone,
                columns=None,
                step=step,
            )
            eng, view, geometry, week_start = inp.engine, inp.events, inp.geometry, inp.week_start
        step("pre-sampling and exact counts")
        counts = density_counts(
            eng, view, geometry.n_towers, week_start, max_visits, 1, with_truth=True
        )
        table = evaluate_density(
            counts,
            geometry,
            eps,
            repetitions,
            delta=delta,
            emd_hours=hours,
            first_hour=week_start.hour,
            progress=step,
        )
        step("writing the table and the plot")
        output.mkdir(parents=True, exist_ok=True)
        write_csv(table, output / "runs.csv")
        summary = summarise(table)
        write_csv(summary, output / "summary.csv")
        plot_summary(summary, output / "density_eval.png")
        write_notice(output)
    c.console.print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    names = "runs.csv, summary.csv, density_eval.png, NOT_PRIVATE.txt"
    c.console.print(f"written to {output}/ ({names})")
    c.console.print("[yellow]not a private output[/]: it compares with the exact data")
