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
@b.with_bound_choice_options()
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
    hierarchy: Annotated[
        str | None,
        typer.Option(
            "--hierarchy",
            help="coarser public zones released too and made consistent: a column of the "
            "tessellation (borough), or h3:<resolution> for H3 cells; several, coarsest "
            "first: borough,district. The budget is split across the levels",
        ),
    ] = None,
    hierarchy_weights: Annotated[
        str | None,
        typer.Option(
            "--hierarchy-weights",
            help="the split of the budget across the levels, e.g. borough=1,tile=3 (tile: "
            "the tessellation's own tiles). Default: chosen from public sizes (metadata.json)",
        ),
    ] = None,
    top: Annotated[
        int,
        typer.Option(
            "--top", help="print the N largest flows of every level with their 95% margins"
        ),
    ] = 10,
    group_size: Annotated[
        int | None,
        o.group_size(
            "trip-level only: most trips of one user, to charge a user-level "
            "budget by group privacy (enforced: each user keeps at most this many trips)"
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
        bound_choice=b.choice_of_params(ctx.params),
        tau=tau,
        noise=noise,
        delta=delta,
        period=Period.parse(bin, start, end),
        bound_per=bound_per,
        same_tile=same_tile,
        unique=unique,
        hierarchy=levels(hierarchy),
        hierarchy_weights=weights(hierarchy_weights),
    )
    shown = functools.partial(summary, top=top if hierarchy else 0)
    run_release(ctx, data=data, tessellation=tessellation, spec=spec, summary=shown)


def levels(text: str | None) -> tuple[str, ...]:
    """``--hierarchy borough,district`` as the spec holds it."""
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


def weights(text: str | None) -> tuple[tuple[str, float], ...]:
    """``--hierarchy-weights borough=1,tile=3`` as the spec holds it."""
    from privmob.errors import ConfigError

    out = []
    for item in levels(text):
        name, eq, value = item.partition("=")
        try:
            out.append((name.strip(), float(value)))
        except ValueError:
            eq = ""
        if not eq:
            raise ConfigError(
                f"--hierarchy-weights: {item!r} is not level=weight",
                hint="e.g. --hierarchy-weights borough=1,tile=3",
            )
    return tuple(out)


def summary(release: Any, paths: list[Path], accountant: Any, top: int = 0) -> None:
    """What was written and what it cost, and what a series of such releases would cost;
    with ``top``, the largest flows of every level with their margins."""
    from privmob.releases.od_series_cost import series_cost_lines

    c.print_release_summary(release, paths, accountant)
    for line in series_cost_lines(release, accountant.group_size):
        c.console.print(line)
    if top > 0:
        print_top_flows(release, top)


def print_top_flows(release: Any, n: int) -> None:
    """The ``n`` largest flows of every level of a hierarchy, with their 95% margins."""
    from privmob.releases.hierarchy import FINEST, table_name, top_flows

    for level in release.params["hierarchy"]["levels"]:
        name = level["level"]
        table = release.tables["od" if name == FINEST else table_name(name)]
        c.console.print(f"largest flows between {name}s (count ± 95% margin):")
        for row in top_flows(table, n).itertuples():
            period = "" if row.period == "all" else f"{row.period}  "
            c.console.print(
                f"  {row.rank:>3}. {period}{row.origin} -> {row.destination}: "
                f"{row.count:,.0f} ± {row.margin_95:,.0f}"
            )


def register(app: typer.Typer) -> None:
    app.command("od", cls=o.with_aliases(bin=("--period",)))(od)
