"""``privmob density``: hourly users per zone over a week (Acs and Castelluccia's scheme), and
``privmob density-eval``: the scheme against the LPA baseline over several epsilons (their
Figures 7-9)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.density_options import OldMaxTripsOpt, visits_bound
from privmob.cli.run_options import with_run_options
from privmob.releases.density_inputs import parse_week

EventsArg = Annotated[
    str, typer.Argument(help=c.INPUT_HELP.format("events: uid, datetime, cell_id"))
]
CellsOpt = Annotated[str, typer.Option("--cells", help="cells table: cell_id, lat, lng")]
ZonesOpt = Annotated[Path, o.tessellation("zones (GeoJSON, GeoParquet, Shapefile)")]
#: the bound's one name (privmob.releases.kinds: ``max_visits``), with every release's ``-T``
MaxVisitsOpt = Annotated[
    int,
    typer.Option(
        "--max-visits",
        "-T",
        help="visits per user: the most (tower, hour) visits kept per user in the week (l)",
    ),
]
WeekOpt = Annotated[
    str, o.start("start of the public week, in --timezone (e.g. 2007-09-10); 168 hours")
]
#: the older spellings, still accepted (hidden from --help)
DENSITY_ALIASES = {
    "tessellation": ("--zones",),
    "tile_id": ("--zone-id",),
    "max_visits": ("-l",),
    "start": ("--week",),
}


@with_run_options()
def density(
    ctx: typer.Context,
    events: EventsArg,
    cells: CellsOpt,
    tessellation: ZonesOpt,
    epsilon: Annotated[float, o.epsilon("privacy budget")],
    start: WeekOpt,
    output: Annotated[Path, o.output()] = Path("privmob-density"),
    delta: Annotated[
        float, typer.Option("--delta", help="> 0: EFPAG ((epsilon, delta)-DP); 0: EFPA (pure)")
    ] = 0.0,
    max_visits: MaxVisitsOpt = 30,
    method: Annotated[str, typer.Option("--method", help="scheme or lpa (baseline)")] = "scheme",
    cover: Annotated[bool, typer.Option("--cover/--no-cover", help="minimum cover step")] = True,
    totals: Annotated[
        str,
        typer.Option(
            "--totals", help="one-visit (Acs and Castelluccia, Section 5.4.1), rescaled, sampled"
        ),
    ] = "one-visit",
    clustering: Annotated[bool, typer.Option("--clustering/--no-clustering")] = True,
    tau: Annotated[
        float | None,
        typer.Option("--tau", help="minimum noisy cluster total (default: Acs and Castelluccia's)"),
    ] = None,
    fourier: Annotated[bool, typer.Option("--fourier/--no-fourier", help="EFPA(G) step")] = True,
    smoothing: Annotated[bool, typer.Option("--smoothing/--no-smoothing")] = True,
    outliers_epsilon: Annotated[
        float | None,
        typer.Option(
            "--outliers-epsilon",
            help="budget of the noisy cell of visits outside the week or at unknown towers, "
            "charged on top of --epsilon (default: 0.1 x --epsilon)",
        ),
    ] = None,
    tile_id: o.TileIdOpt = None,
    columns: c.ColumnsOpt = None,
    timezone: o.TimezoneOpt = "UTC",
    input_timezone: o.InputTimezoneOpt = None,
    max_trips: OldMaxTripsOpt = None,
) -> None:
    """Release the number of users per zone and hour of a week (Acs and Castelluccia)."""
    from privmob.cli.run import run_release
    from privmob.releases.density import DensityConfig
    from privmob.releases.density.files import FILES
    from privmob.releases.specs import DensitySpec

    week = start
    parse_week(week)  # parameters are checked before the ledger is touched
    config = DensityConfig(
        epsilon,
        visits_bound(max_visits, max_trips),
        delta,
        method=method,
        cover=cover,
        totals=totals,
        clustering=clustering,
        tau=tau,
        fourier=fourier,
        smoothing=smoothing,
        outliers_epsilon=outliers_epsilon,
    )
    run_release(
        ctx,
        data=events,
        tessellation=tessellation,
        tile_id=tile_id,
        spec=lambda tess: DensitySpec(tess, config, week),
        load=lambda session: session._load_density_inputs(week, cover),
        budget_delta=delta,
        writers=list(FILES),
    )


def register(app: typer.Typer) -> None:
    from privmob.cli.density_eval import density_eval
    from privmob.cli.evaluate import evaluate_app

    app.command("density", cls=o.with_aliases(**DENSITY_ALIASES))(density)
    aliased = o.with_aliases(**DENSITY_ALIASES)
    evaluate_app.command("density", cls=aliased)(density_eval)
    app.command("density-eval", hidden=True, cls=aliased)(density_eval)  # older name
