"""``privmob od``: a private origin-destination matrix from trips, trip points or events."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import typer

from privmob.cli import bound_options as b
from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.run_options import with_run_options
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind


@with_run_options()
@c.with_input_options()
def od(
    ctx: typer.Context,
    data: Annotated[str, typer.Argument(help=c.INPUT_HELP.format("trips, trip points or events"))],
    tessellation: Annotated[Path, o.tessellation()],
    epsilon: Annotated[
        float, o.epsilon("privacy budget of the release (per period with --bound-per period)")
    ],
    output: Annotated[Path, o.output()] = Path("privmob-od"),
    unit: Annotated[PrivacyUnit, o.unit()] = PrivacyUnit.USER,
    max_trips: Annotated[
        int | None,
        o.max_trips_or_auto(
            "trips per user: the most trips counted per user (a random sample of more); auto: "
            "chosen privately (--bound-quantile, --bound-share, --bound-max)"
        ),
    ] = None,
    tau: Annotated[
        int | None,
        typer.Option(
            "--tau",
            help="post-processing: noisy counts below tau become 0 (0: clamp negatives); "
            "inflates totals. Default: noisy counts as drawn (unbiased, may be negative)",
        ),
    ] = None,
    noise: o.NoiseOpt = NoiseKind.DISCRETE_LAPLACE,
    delta: o.DeltaOpt = 0.0,
    bin: Annotated[str, o.bin("one OD matrix per: all (the whole period), day or week")] = "all",
    start: Annotated[str | None, o.start()] = None,
    end: Annotated[str | None, o.end()] = None,
    bound_per: Annotated[
        str,
        typer.Option(
            "--bound-per", help="release: T trips per user in all; period: T per user per period"
        ),
    ] = "release",
    unique: Annotated[
        bool,
        typer.Option(
            "--unique",
            help="count each (origin, destination) at most once per user per period",
        ),
    ] = False,
    same_tile: o.SameTileOpt = "exclude",
    bound_quantile: b.BoundQuantileOpt = None,
    bound_share: b.BoundShareOpt = None,
    bound_max: b.BoundMaxOpt = None,
    rescale: b.RescaleOpt = False,
    rescale_share: b.RescaleShareOpt = None,
    group_size: Annotated[
        int | None,
        typer.Option(
            "--group-size",
            help="trip-level only: most trips of one user, to charge a user-level "
            "budget by group privacy (enforced: each user keeps at most this many trips)",
        ),
    ] = None,
) -> None:
    """Release a differentially private origin-destination matrix."""
    from privmob.cli.run import run_release
    from privmob.domain import Period
    from privmob.releases.od import OdSpec

    spec = functools.partial(
        OdSpec,
        epsilon=epsilon,
        unit=unit,
        max_trips=max_trips,
        bound_choice=b.choice_options(
            bound_quantile, bound_share, bound_max, rescale, rescale_share
        ),
        tau=tau,
        noise=noise,
        delta=delta,
        period=Period.parse(bin, start, end),
        bound_per=bound_per,
        same_tile=same_tile,
        unique=unique,
    )
    run_release(ctx, data=data, tessellation=tessellation, spec=spec, summary=summary)


def summary(release: Any, paths: list[Path], accountant: Any) -> None:
    """What was written and what it cost, and what a series of such releases would cost."""
    from privmob.releases.od_series_cost import series_cost_lines

    c.print_release_summary(release, paths, accountant)
    for line in series_cost_lines(release, accountant.group_size):
        c.console.print(line)


def register(app: typer.Typer) -> None:
    app.command("od", cls=o.with_aliases(bin=("--period",)))(od)
