"""``privmob counts``: a count table you define (the count template), and one command per kind
of the count template in the registry (``privmob trips-per-hour`` ...), the same command with
what the kind declares: its records, dimensions and value."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import bound_options as b
from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.run_options import with_run_options
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.kinds import every_kind


@with_run_options()
@c.with_input_options()
def counts(
    ctx: typer.Context,
    data: Annotated[str, typer.Argument(help=c.INPUT_HELP.format("trips, trip points or events"))],
    tessellation: Annotated[Path, o.tessellation()],
    epsilon: Annotated[float, o.epsilon("privacy budget of the release")],
    output: Annotated[Path, o.output()] = Path("privmob-counts"),
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="public dimensions, comma-separated: origin, destination (trips), tile, zone "
            "(trip points, events), period, bin:LENGTH (e.g. bin:1h), hour, weekday, "
            "duration:EDGES (minutes, e.g. duration:0,5,15,60), distance:EDGES (km, trips), "
            "COLUMN:VALUES (a column of the input with its declared values, e.g. "
            "usertype:Subscriber,Customer)",
        ),
    ] = None,
    records: Annotated[
        str | None, typer.Option("--records", help="what is counted: trips, trip-points, events")
    ] = None,
    unit: Annotated[
        PrivacyUnit,
        o.unit(
            "user, or trip: each trip counted once, its own unit (rides without a rider id; "
            "trips only)"
        ),
    ] = PrivacyUnit.USER,
    max_trips: Annotated[
        int,
        o.max_trips_or_auto(
            "records per user: the most records counted per user (a random sample); auto: "
            "chosen privately (--bound-quantile, --bound-share, --bound-max)"
        ),
    ] = 1,
    noise: o.NoiseOpt = NoiseKind.DISCRETE_LAPLACE,
    delta: o.DeltaOpt = 0.0,
    bin: Annotated[str, o.bin("the period dimension's bins: all, day or week")] = "all",
    start: Annotated[str | None, o.start()] = None,
    end: Annotated[str | None, o.end()] = None,
    bound_quantile: b.BoundQuantileOpt = None,
    bound_share: b.BoundShareOpt = None,
    bound_max: b.BoundMaxOpt = None,
    rescale: b.RescaleOpt = False,
    rescale_share: b.RescaleShareOpt = None,
    mean: Annotated[
        str | None,
        typer.Option(
            "--mean",
            help="also the mean of a value per cell, clamped to a declared range: VALUE:LO:HI "
            "with VALUE duration (minutes), distance (km) or a numeric column of the input, "
            "e.g. duration:0:180 (half the budget on the counts, half on the sums)",
        ),
    ] = None,
) -> None:
    """Release noisy counts of trips, trip points or events by public dimensions."""
    from privmob.cli.run import run_release
    from privmob.domain import Period
    from privmob.errors import ConfigError
    from privmob.releases.counts import CountSpec
    from privmob.releases.dimensions import parse_dimensions
    from privmob.releases.kinds import kind as kind_named
    from privmob.releases.values import Mean
    from privmob.session import Session

    kind = kind_named(ctx.info_name or "counts")
    preset = kind.counts
    if preset is not None and (by is not None or records is not None):
        raise ConfigError(f"privmob {kind.name} counts {preset.records} by {preset.spelled_by}")
    if preset is None and by is None:
        raise ConfigError("name the dimensions to count by", hint="e.g. --by origin,hour")
    dims = preset.by if preset else parse_dimensions(str(by))  # the text read here, once
    what = preset.records if preset else (records or "trips")
    value = None if mean is None else Mean.parse(mean)
    if preset is not None and preset.value is not None:  # the kind declares its value
        if mean is not None:
            raise ConfigError(f"privmob {kind.name} releases the mean of {preset.value}")
        value = preset.mean
    spec: type[CountSpec] = kind.spec_type  # the template's, or a subclass of it
    run_release(
        ctx,
        data=data,
        tessellation=tessellation,
        spec=functools.partial(
            spec,
            epsilon=epsilon,
            records=what,
            by=dims,
            bound=max_trips,
            bound_choice=b.choice_options(
                bound_quantile, bound_share, bound_max, rescale, rescale_share
            ),
            noise=noise,
            delta=delta,
            period=Period.parse(bin, start, end),
            kind=kind.name,
            unit=unit,
            value=value,
        ),
        load=functools.partial(
            Session._load_counted, records=what, by=dims, value=value, unit=unit
        ),
    )


def register(app: typer.Typer) -> None:
    for k in every_kind():
        if k.cli_module == __name__:
            app.command(k.name, help=k.cli_help)(counts)
