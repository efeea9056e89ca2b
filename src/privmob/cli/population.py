"""``privmob population``: DP counts of users per home zone from events."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.run_options import with_run_options
from privmob.privacy.mechanisms import NoiseKind


@with_run_options()
@c.with_input_options(without=c.TRIP_OPTIONS)
def population(
    ctx: typer.Context,
    data: Annotated[
        str, typer.Argument(help=c.INPUT_HELP.format("events: uid, datetime, lat/lng or cell_id"))
    ],
    tessellation: Annotated[Path, o.tessellation("zones (GeoJSON, GeoParquet, Shapefile)")],
    epsilon: Annotated[float, o.epsilon("privacy budget (each user counts once: at home)")],
    output: Annotated[Path, o.output()] = Path("privmob-population"),
    noise: o.NoiseOpt = NoiseKind.DISCRETE_LAPLACE,
    delta: o.DeltaOpt = 0.0,
    night_start: Annotated[int, typer.Option("--night-start", help="night from (hour)")] = 20,
    night_end: Annotated[int, typer.Option("--night-end", help="night until (hour)")] = 6,
    start: Annotated[str | None, o.start()] = None,
    end: Annotated[str | None, o.end()] = None,
    zone_mapping: Annotated[
        str,
        typer.Option(
            "--zone-mapping",
            help="with --cells: 'contain' (tower's zone) or 'voronoi' (area shares of the "
            "towers' Voronoi cells, applied to noisy tower counts)",
        ),
    ] = "contain",
) -> None:
    """Release DP counts of users per home zone.

    Home = most frequent zone at night; every zone plus 'outside' and 'unknown home' cells get
    noise; user-level epsilon-DP with sensitivity 1.
    """
    from privmob.cli.run import run_release
    from privmob.domain import Period
    from privmob.releases.population import PopulationSpec

    spec = functools.partial(
        PopulationSpec,
        epsilon=epsilon,
        noise=noise,
        delta=delta,
        night=(night_start, night_end),
        period=Period.parse("all", start, end),
        zone_mapping=zone_mapping,
        cells=ctx.params.get("cells"),  # an input option (common.INPUT_OPTIONS)
    )
    run_release(ctx, data=data, tessellation=tessellation, spec=spec, shape="events")


def register(app: typer.Typer) -> None:
    app.command("population")(population)
