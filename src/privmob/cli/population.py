"""``privmob population``: DP counts of users per home zone from events."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.run_options import with_run_options
from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind


@with_run_options()
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
    cells: o.CellsOpt = None,
    zone_mapping: Annotated[
        str,
        typer.Option(
            "--zone-mapping",
            help="with --cells: 'contain' (tower's zone) or 'voronoi' (area shares of the "
            "towers' Voronoi cells, applied to noisy tower counts)",
        ),
    ] = "contain",
    tile_id: o.TileIdOpt = None,
    columns: c.ColumnsOpt = None,
    delimiter: c.DelimiterOpt = None,
    names: c.NamesOpt = None,
    no_header: c.NoHeaderOpt = False,
    uid_from_filename: c.UidFromFilenameOpt = False,
    timezone: o.TimezoneOpt = "UTC",
    input_timezone: o.InputTimezoneOpt = None,
) -> None:
    """Release DP counts of users per home zone.

    Home = most frequent zone at night; every zone plus 'outside' and 'unknown home' cells get
    noise; user-level epsilon-DP with sensitivity 1.
    """
    seed = ctx.params.get("seed")  # a run option (privmob.cli.run_options)
    from privmob.cli.run import run_release
    from privmob.domain import Period
    from privmob.releases.specs import PopulationSpec

    if zone_mapping not in ("contain", "voronoi"):
        raise ConfigError(f"unknown zone mapping '{zone_mapping}'", hint="contain or voronoi")
    if zone_mapping == "voronoi" and cells is None:
        raise ConfigError("--zone-mapping voronoi needs --cells (the towers table)")
    study = Period.parse("all", start, end)

    def spec(tess: Any) -> PopulationSpec:
        return PopulationSpec(tess, epsilon, noise, delta, (night_start, night_end), study)

    def by_tower_shares(the_spec: PopulationSpec, events: Any, acct: Any, step: Any) -> Any:
        from privmob.data.sources import load_cells
        from privmob.releases.population import population_by_tower_shares

        eng, tess = events.engine, the_spec.tessellation
        towers = eng.fetch(f"SELECT * FROM {load_cells(cells, engine=eng, tessellation=tess)}")
        return population_by_tower_shares(
            events,
            towers=towers,
            tessellation=tess,
            epsilon=epsilon,
            accountant=acct,
            noise=noise,
            delta=delta,
            night=(night_start, night_end),
            period=study,
            rng=seed,
            step=step,
        )

    run_release(
        ctx,
        data=data,
        tessellation=tessellation,
        tile_id=tile_id,
        spec=spec,
        load=lambda session: session.load_events(),
        shape="events",
        run=by_tower_shares if zone_mapping == "voronoi" else None,
    )


def register(app: typer.Typer) -> None:
    app.command("population")(population)
