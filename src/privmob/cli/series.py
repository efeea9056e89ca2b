"""``privmob series`` / ``series-counts`` (landmark-private series) and ``privmob tpl``
(temporal privacy loss under correlation)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from privmob.cli import options as o
from privmob.cli.common import (
    INPUT_HELP,
    ColumnsOpt,
    DelimiterOpt,
    NamesOpt,
    NoHeaderOpt,
    UidFromFilenameOpt,
    console,
    console_err,
)
from privmob.cli.run_options import ENGINE_OPTIONS, with_run_options
from privmob.data.series_input import split_list as _tokens
from privmob.data.transition_input import read_transition_matrix
from privmob.errors import ConfigError
from privmob.privacy.temporal import (
    backward_loss,
    forward_loss,
    landmark_loss,
    max_budget_for_target,
    temporal_loss,
)
from privmob.releases.landmark import SCHEME_UNIT, AdaptiveRule, Scheme
from privmob.releases.metadata import json_list
from privmob.releases.release import Release

#: the landmark options of ``series`` and ``series-counts``
LandmarksOpt = Annotated[
    str,
    typer.Option(
        "--landmarks", help="public landmark timestamps (starts of time bins): a list or a file"
    ),
]
LandmarkPositionsOpt = Annotated[
    bool, typer.Option("--landmark-positions", help="--landmarks are 0-based positions")
]
SchemeOpt = Annotated[Scheme, typer.Option("--scheme")]


def resolve_landmarks(spec: str, labels: list[object], positions: bool) -> list[int]:
    """Landmark positions from ``--landmarks`` (timestamps matched to the time labels, or
    positions with ``--landmark-positions``): the library's
    :func:`~privmob.releases.landmark.resolve_landmarks`."""
    from privmob.releases.landmark import landmark_tokens
    from privmob.releases.landmark import resolve_landmarks as resolve

    return resolve(landmark_tokens(spec, positions), labels)


@with_run_options(without=(*ENGINE_OPTIONS, "output_format"))
def series_command(
    ctx: typer.Context,
    input: Annotated[Path, typer.Argument(help="series file (CSV or Parquet)")],
    epsilon: Annotated[float, o.epsilon("landmark epsilon")],
    sensitivity: Annotated[
        float,
        typer.Option(
            "--sensitivity",
            help="enforced bound: how much one event changes the value at one timestamp "
            "(L1 over zones), e.g. c for counts with at most c contributions per person per "
            "timestamp",
        ),
    ],
    output: Annotated[Path, o.output()],
    value_column: Annotated[str, typer.Option("--value-column")] = "value",
    time_column: Annotated[str, typer.Option("--time-column")] = "time",
    zone_column: Annotated[
        str | None, typer.Option("--zone-column", help="one series per zone (counts per zone)")
    ] = None,
    zones_spec: Annotated[
        str | None,
        typer.Option(
            "--zones", help="with --zone-column: the public zones (a list or a file, one a line)"
        ),
    ] = None,
    landmarks: LandmarksOpt = "",
    landmark_positions: LandmarkPositionsOpt = False,
    scheme: SchemeOpt = Scheme.UNIFORM,
    integer: Annotated[
        bool | None,
        typer.Option("--integer/--real", help="discrete Laplace (counts) or Laplace (reals)"),
    ] = None,
    value_min: Annotated[float | None, typer.Option("--value-min", help="clamp below")] = None,
    value_max: Annotated[float | None, typer.Option("--value-max", help="clamp above")] = None,
    start: Annotated[str | None, o.start("public period start (with --end, --bin)")] = None,
    end: Annotated[str | None, o.end("public period end, excluded")] = None,
    bin: Annotated[
        str | None, o.bin("time step, e.g. 1h, 30min, 1D: the file must hold every step")
    ] = None,
    domain_from_data: Annotated[
        bool,
        typer.Option(
            "--domain-from-data",
            help="instead of --start/--end/--bin: take the file's timestamps as the domain "
            "(they are not protected: the release is stamped NOT FOR PUBLICATION)",
        ),
    ] = False,
    fill_value: Annotated[
        float, typer.Option("--fill-value", help="public value before the first release")
    ] = 0.0,
    initial_rate: Annotated[float, typer.Option("--initial-rate")] = 1.0,
    rate_step: Annotated[float, typer.Option("--rate-step")] = 0.1,
    min_rate: Annotated[float, typer.Option("--min-rate")] = 0.1,
    group_size: Annotated[int | None, o.group_size()] = None,
    budget: o.SeriesBudgetOpt = None,
) -> None:
    """Publish a series under landmark epsilon-privacy (uniform, skip, adaptive) or at the
    event / user level; writes series.parquet, budgets.parquet and metadata.json."""
    quiet = bool(ctx.params.get("quiet"))  # a run option
    if domain_from_data == any(x is not None for x in (start, end, bin)):
        raise ConfigError(
            "--domain-from-data reads the time grid from the file: it replaces --start, --end "
            "and --bin"
            if domain_from_data
            else "privmob series needs the public time grid: --start, --end and --bin",
            hint="declare the grid (e.g. --start 2024-01-01 --end 2024-02-01 --bin 1h); "
            "--domain-from-data reads it from the file and stamps the release not for "
            "publication",
        )
    if not domain_from_data and None in (start, end, bin):
        raise ConfigError("give --start, --end and --bin together")
    from privmob.cli.run import run_release
    from privmob.domain import Period
    from privmob.releases.landmark import landmark_tokens
    from privmob.releases.specs import SeriesSpec

    bounds = None
    if value_min is not None or value_max is not None:
        if value_min is None or value_max is None:
            raise ConfigError("give both --value-min and --value-max")
        bounds = (value_min, value_max)
    spec = SeriesSpec.over(
        epsilon,
        sensitivity,
        None if domain_from_data else Period.parse("all", start, end),
        bin,
        domain_from_data=domain_from_data,
        value_column=value_column,
        time_column=time_column,
        zone_column=zone_column,
        zones=_tokens(zones_spec) if zones_spec else None,
        landmarks=landmark_tokens(landmarks, landmark_positions) if landmarks else (),
        scheme=scheme.value,
        integer=integer,
        value_bounds=bounds,
        rule=AdaptiveRule(initial_rate=initial_rate, step=rate_step, min_rate=min_rate),
        fill_value=fill_value,
    )
    run_release(
        ctx,
        data=input,
        tessellation=None,
        spec=lambda _tess: spec,
        load=spec.loader(input),
        layers=False,
        engine=False,
        budget_unit=SCHEME_UNIT[scheme],
        marks=list(spec.marks),
        summary=lambda release, paths, _acct: _summary(release, paths, quiet),
    )


def _summary(release: Release, paths: list[Path], quiet: bool) -> None:
    n_marks = len(json_list(release.params["landmarks"]))  # the public landmarks, as resolved
    for note in json_list(release.extra["warnings"]):
        console_err.print(f"[yellow]warning:[/] {note}", highlight=False)
    if not quiet:
        b = release.tables["budgets"]
        console.print(
            f"{release.params['scheme']}: {release.cost.describe()}; {len(b)} timestamps, "
            f"{n_marks} landmarks, {int(b['published'].sum())} fresh releases; "
            f"max over t of sum_(L u t) eps_i = {release.extra['max_landmark_spend']:.6g}; "
            + (
                f"outliers cell (outside the period): epsilon={out:.6g}; "
                if (out := release.extra.get("outliers_epsilon")) is not None
                else ""
            )
            + f"wrote {', '.join(str(p) for p in paths)}",
            highlight=False,
        )


@with_run_options()
def series_counts_command(
    ctx: typer.Context,
    events: Annotated[
        str, typer.Argument(help=INPUT_HELP.format("events: uid, datetime, lat, lng"))
    ],
    tessellation: Annotated[Path, o.tessellation("zones (GeoJSON, GeoParquet, Shapefile)")],
    start: Annotated[str, o.start("public period start, in --timezone")],
    end: Annotated[str, o.end("public period end, excluded")],
    epsilon: Annotated[float, o.epsilon("landmark epsilon")],
    output: Annotated[Path, o.output()],
    bin: Annotated[str, o.bin("time bin length, e.g. 1h, 30min, 1D")] = "1h",
    max_trips: Annotated[
        int,
        o.max_trips(
            "events per user and bin: the most events kept per user in one bin (= the sensitivity)"
        ),
    ] = 1,
    landmarks: LandmarksOpt = "",
    landmark_positions: LandmarkPositionsOpt = False,
    scheme: SchemeOpt = Scheme.UNIFORM,
    outliers_epsilon: Annotated[
        float | None,
        typer.Option(
            "--outliers-epsilon",
            help="budget of the noisy cell of events outside the period, charged on top of "
            "--epsilon (default: 0.1 x --epsilon)",
        ),
    ] = None,
    tile_id: o.TileIdOpt = None,
    columns: ColumnsOpt = None,
    names: NamesOpt = None,
    no_header: NoHeaderOpt = False,
    uid_from_filename: UidFromFilenameOpt = False,
    delimiter: DelimiterOpt = None,
    timezone: o.TimezoneOpt = "UTC",
    input_timezone: o.InputTimezoneOpt = None,
    budget: o.SeriesBudgetOpt = None,
    group_size: Annotated[int | None, o.group_size()] = None,
) -> None:
    """Counts per zone and time bin from raw events (at most -T per user and bin, enforced),
    published under landmark epsilon-privacy."""
    from privmob.cli.run import run_release
    from privmob.releases.landmark import landmark_tokens
    from privmob.releases.landmark_counts import ZoneSeriesSpec
    from privmob.session import Session

    marks = landmark_tokens(landmarks, landmark_positions) if landmarks else []
    run_release(
        ctx,
        data=events,
        tessellation=tessellation,
        tile_id=tile_id,
        spec=functools.partial(
            ZoneSeriesSpec.declared,
            epsilon=epsilon,
            start=start,
            end=end,
            freq=bin,
            max_per_bin=max_trips,
            landmarks=marks,
            scheme=scheme,
            outliers_epsilon=outliers_epsilon,
        ),
        load=Session._load_events,
        shape="events",
        budget_unit=SCHEME_UNIT[scheme],
        summary=functools.partial(_series_counts_summary, quiet=bool(ctx.params.get("quiet"))),
    )


def _series_counts_summary(
    release: Release, paths: list[Path], _accountant: object, *, quiet: bool
) -> None:
    _summary(release, paths, quiet)


#: the older spellings, still accepted (hidden from --help)
SERIES_COUNTS_ALIASES = {
    "bin": ("--freq",),
    "max_trips": ("--max-per-bin", "--bound"),
    "tile_id": ("--id-column",),
}


def tpl_command(
    matrix: Annotated[
        str | None, typer.Option("--matrix", help="transition matrix for both directions")
    ] = None,
    backward: Annotated[
        str | None, typer.Option("--backward", help="backward matrix P(l_t-1 | l_t), or none")
    ] = None,
    forward: Annotated[
        str | None, typer.Option("--forward", help="forward matrix P(l_t+1 | l_t), or none")
    ] = None,
    epsilon_t: Annotated[float, typer.Option("--epsilon-t", help="budget per timestamp")] = 0.1,
    budgets: Annotated[
        str | None, typer.Option("--budgets", help="per-timestamp budgets (list or file)")
    ] = None,
    length: Annotated[int, typer.Option("--T", "--length", help="number of timestamps")] = 10,
    landmarks: Annotated[
        str, typer.Option("--landmarks", help="0-based landmark positions (list or file)")
    ] = "",
    target: Annotated[float | None, typer.Option("--target", help="loss not to exceed")] = None,
    search: Annotated[
        bool, typer.Option("--search", help="search the largest budget keeping max loss <= target")
    ] = False,
) -> None:
    """Temporal privacy loss under a Markov correlation (Cao et al.): per timestamp and max."""
    if matrix is None and backward is None and forward is None:
        raise ConfigError("give --matrix, or --backward and/or --forward")
    pb = read_transition_matrix(backward if backward is not None else matrix or "none")
    pf = read_transition_matrix(forward if forward is not None else matrix or "none")
    if budgets:
        try:
            eps = np.array([float(t) for t in _tokens(budgets)])
        except ValueError as exc:
            raise ConfigError(f"--budgets expects numbers: {exc}") from exc
        length = eps.size
    else:
        eps = np.full(length, float(epsilon_t))
    marks = [int(t) for t in _tokens(landmarks)] if landmarks else None
    bpl = backward_loss(pb, eps)
    fpl = forward_loss(pf, eps)
    tpl = temporal_loss(pb, pf, eps)
    lml = landmark_loss(pb, pf, eps, marks) if marks is not None else None
    table = Table(
        title="temporal privacy loss (event-level release"
        + (", and landmark release)" if marks is not None else ")")
    )
    for col in ("t", "eps_t", "BPL", "FPL", "TPL"):
        table.add_column(col, justify="right")
    if lml is not None:
        table.add_column("landmark loss", justify="right")
    for t in range(length):
        row = [str(t), f"{eps[t]:.6f}", f"{bpl[t]:.6f}", f"{fpl[t]:.6f}", f"{tpl[t]:.6f}"]
        if lml is not None:
            row.append(f"{lml[t]:.6f}" + (" *" if t in marks else ""))  # type: ignore[operator]
        table.add_row(*row)
    console.print(table)
    console.print(f"max TPL (event-level) = {tpl.max():.6f}", highlight=False)
    if lml is not None:
        console.print(f"max landmark loss = {lml.max():.6f}", highlight=False)
    console.print(f"user-level loss = {eps.sum():.6f}", highlight=False)
    if search:
        if target is None:
            raise ConfigError("--search needs --target")
        c = max_budget_for_target(
            target,
            backward=pb,
            forward=pf,
            length=length,
            landmarks=marks,
            profile=eps if budgets else None,
        )
        what = "multiple of the --budgets profile" if budgets else "per-timestamp budget"
        console.print(
            f"largest {what} keeping the max "
            f"{'landmark loss' if marks is not None else 'TPL'} <= {target:g}: {c:.6f}",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command("series", cls=o.with_aliases(bin=("--freq",)))(series_command)
    app.command("series-counts", cls=o.with_aliases(**SERIES_COUNTS_ALIASES))(series_counts_command)
    app.command("tpl")(tpl_command)
