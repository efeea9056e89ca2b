"""``privmob report`` (DP mobility report) and ``privmob compare`` (report comparison)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privmob.cli import bound_options as b
from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.run_options import with_run_options
from privmob.data.csv_cells import write_csv
from privmob.errors import ConfigError, InputError
from privmob.privacy.costs import PrivacyUnit

if TYPE_CHECKING:
    from privmob.releases.publish import Output
    from privmob.releases.release import Release


def _pairs(text: str | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ConfigError(f"cannot read {what} {part!r}", hint="write name=value,name=value")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise ConfigError(f"cannot read the {what} {text!r}") from exc


def _hour(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise ConfigError(
            f"cannot read the time window hour {text!r}", hint="e.g. --time-windows 2,6,10,14,18,22"
        ) from exc


def _range(text: str) -> tuple[float, float, float]:
    parts = text.split(":")
    if len(parts) != 3:
        raise ConfigError(f"cannot read the range {text!r}", hint="write lo:hi:width")
    lo, hi, width = (_float(x, "range") for x in parts)
    return lo, hi, width


def study_period(
    start: str | None, end: str | None, period: tuple[str, str] | None
) -> tuple[str | None, str | None]:
    """The declared study period from ``--start``/``--end`` (or the older ``--period S E``)."""
    if period is not None:
        if start is not None or end is not None:
            raise ConfigError("give --start and --end (--period START END is their older form)")
        return period
    return start, end


def report_files(output: Path, overwrite: bool, basemap: bool = True) -> Output:
    """Where the report is published (``-o`` names its HTML; its JSON and tables beside);
    ``basemap=False`` (``--offline-maps``): its maps draw no web tiles."""
    from privmob.render.report_files import report_output

    if not output.suffix.lower().startswith(".htm"):
        raise InputError(f"-o should name an .html file, got {output}")
    return report_output(output, overwrite=overwrite, basemap=basemap)


def print_report_summary(release: Release, paths: list[Path], _accountant: object) -> None:
    """What was written and what it cost (stdout); the signal warning (stderr)."""
    from privmob.render.report_files import report_paths

    html, js, tables = report_paths(paths[0]).values()
    e = release.ledger_entry
    if e is not None:
        # a zCDP report has two entries (its pure part and its rho part): their sum
        entries = release.ledger_entries or [e]
        eps = sum(x.cost.epsilon for x in entries)
        delta = sum(x.cost.delta for x in entries)
        ids = [f"#{x.id}" for x in entries]
        c.console.print(
            f"report written: {html} (+ {js.name}, {tables.name}/); charged epsilon="
            f"{eps:.6g}" + (f", delta={delta:.3g}" if delta else "") + f" per {e.cost.unit} to "
            f"'{e.dataset}' (ledger entr{'ies' if len(ids) > 1 else 'y'} {', '.join(ids)})",
            markup=False,
            highlight=False,
        )
    if not release.for_publication:
        c.console.print("[bold red]NOT FOR PUBLICATION[/]: made with --seed")
    from privmob.releases.metadata import json_object

    no_signal = json_object(release.extra.get("signal")).get("warning")
    if no_signal:  # from noisy values only (privmob.privacy.signal)
        c.console_err.print(f"[bold yellow]warning[/]: {no_signal}", highlight=False)


@with_run_options(without=("output_format",))
@c.with_input_options(without=("cells", "trip_rule"))
@b.with_bound_choice_options(without=b.RESCALE_OPTIONS)
def report(
    ctx: typer.Context,
    data: Annotated[
        str,
        typer.Argument(
            help=c.INPUT_HELP.format(
                "trip points: uid, tid, datetime, lat, lng (or raw GPS with --input-shape gps)"
            )
        ),
    ],
    tessellation: Annotated[Path, o.tessellation()],
    epsilon: Annotated[float, o.epsilon("total epsilon of the report")],
    output: Annotated[Path, o.output("report.html (JSON and tables beside)")],
    max_trips: Annotated[
        int | None,
        o.max_trips_or_auto(
            "trips per user (M): the most trips kept per user; needed for --unit user, "
            "1 for --unit trip; auto: chosen privately (--bound-quantile, --bound-share, "
            "--bound-max)"
        ),
    ] = None,
    start: Annotated[str | None, o.start("start of the declared study period (required)")] = None,
    end: Annotated[str | None, o.end("end of the declared study period (excluded)")] = None,
    period: Annotated[
        tuple[str, str] | None, typer.Option("--period", hidden=True)  # older: START END
    ] = None,
    unit: Annotated[PrivacyUnit, o.unit()] = PrivacyUnit.USER,
    analyses: Annotated[
        str | None, typer.Option("--analyses", help="comma-separated subset (default: all 15)")
    ] = None,
    budget_split: Annotated[
        str | None,
        typer.Option("--budget-split", help="weights, e.g. od_flows=3,visits_per_tile=2"),
    ] = None,
    target_margin: Annotated[
        str | None,
        typer.Option(
            "--target-margin",
            help="95% margins asked per analysis, solved into the budget split before "
            "reading (the plan says which are met), e.g. od_flows=50,visits_per_tile=100",
        ),
    ] = None,
    ranges: Annotated[
        str | None,
        typer.Option("--range", help="histogram ranges lo:hi:width, e.g. travel_time=0:120:5"),
    ] = None,
    time_windows: Annotated[
        str, typer.Option("--time-windows", help="hours starting the time windows")
    ] = "2,6,10,14,18,22",
    input_shape: Annotated[
        str,
        typer.Option(
            "--input-shape",
            help="auto (from the columns), trip-points, trips (one row per trip with start "
            "and end coordinates, as od reads them) or gps (raw traces uid, datetime, lat, "
            "lng: trips between stays)",
        ),
    ] = "auto",
    same_tile: o.SameTileOpt = "exclude",
    group_size: Annotated[
        int | None,
        o.group_size("trip level only: most trips of one user, to charge a user-level budget"),
    ] = None,
    composition: Annotated[
        str,
        typer.Option(
            "--composition",
            help="auto (zCDP with --delta, pure epsilon without), pure or zcdp: with zCDP each "
            "analysis gets discrete Gaussian noise where that lowers its margin (the plan says "
            "which and why)",
        ),
    ] = "auto",
    delta: Annotated[
        float | None,
        typer.Option(
            "--delta",
            help="delta of the report's (epsilon, delta) under zCDP composition (zcdp without "
            "it: 1e-9); far below 1 / the number of users",
        ),
    ] = None,
    od_cell_cap: Annotated[
        int | None,
        typer.Option(
            "--od-cell-cap",
            help="with --delta: count at most this many trips of one user in any one OD cell "
            "(enforced before counting; extra trips dropped), so od_flows' L2 sensitivity is "
            "about sqrt(M * cap) instead of M and its Gaussian noise smaller",
        ),
    ] = None,
    hierarchy: Annotated[
        str | None,
        typer.Option(
            "--hierarchy",
            help="od_flows at coarser public zones too, made consistent: a column of the "
            "tessellation (borough), or h3:<resolution> for H3 cells; several, coarsest "
            "first: borough,district. od_flows' epsilon is split across the levels (pure "
            "epsilon, a fixed -T); each coarser level is a table od_flows_by_<level>",
        ),
    ] = None,
    hierarchy_weights: Annotated[
        str | None,
        typer.Option(
            "--hierarchy-weights",
            help="with --hierarchy: the split of od_flows' epsilon across the levels, e.g. "
            "borough=1,tile=3 (tile: the tessellation's own tiles). Default: chosen from "
            "public sizes, as od's",
        ),
    ] = None,
    offline_maps: Annotated[
        bool,
        typer.Option(
            "--offline-maps",
            help="no web basemap under the maps: the HTML names no external address (by "
            "default the viewer's browser fetches OpenStreetMap tiles when online)",
        ),
    ] = False,
) -> None:
    """A differentially private mobility report: 15 analyses, one offline HTML + JSON."""
    from privmob.cli.od import weights
    from privmob.cli.run import run_release
    from privmob.releases.report import ReportSpec, load_report_input
    from privmob.releases.report.composition import resolved
    from privmob.releases.report.split import build_config

    if input_shape not in ("auto", "trip-points", "trips", "gps"):
        raise ConfigError(
            f"unknown input shape '{input_shape}' for the report",
            hint="use auto, trip-points, trips or gps",
        )
    cfg = build_config(
        epsilon=epsilon,
        max_trips=max_trips,
        period=study_period(start, end, period),
        unit=unit,
        analyses=[a.strip() for a in analyses.split(",")] if analyses else None,
        weights={k: _float(v, "budget weight") for k, v in _pairs(budget_split, "weight").items()},
        target_margins={
            k: _float(v, "target margin") for k, v in _pairs(target_margin, "margin").items()
        },
        ranges={k: _range(v) for k, v in _pairs(ranges, "range").items()},
        time_windows=[_hour(h) for h in time_windows.split(",")],
        same_tile=same_tile,
        composition=composition,
        delta=delta,
        od_cell_cap=od_cell_cap,
        bound_choice=b.choice_of_params(ctx.params),
        hierarchy=hierarchy,
        hierarchy_weights=dict(weights(hierarchy_weights)),
    )
    run_release(
        ctx,
        data=data,
        tessellation=tessellation,
        spec=partial(ReportSpec, config=cfg),
        load=partial(load_report_input, cfg.unit),
        # a taken or unwritable output must not burn epsilon; stage -> charge -> rename
        output=partial(
            report_files, output, bool(ctx.params.get("overwrite")), basemap=not offline_maps
        ),
        layers=False,
        summary=print_report_summary,
        budget_delta=resolved(cfg)[1],  # --budget with a zCDP report: (epsilon, delta)
    )


def compare(
    a: Annotated[Path, typer.Argument(help="reference report JSON")],
    b: Annotated[Path, typer.Argument(help="report JSON to compare")],
    output: Annotated[Path | None, o.output("compare.html")] = None,
    overwrite: c.OverwriteOpt = False,
) -> None:
    """Similarity of two reports per analysis (SMAPE, JS base 2, KL, EMD, Kendall, top-n)."""
    from rich.table import Table

    from privmob.evaluate.report_comparison import compare_reports
    from privmob.render.compare_html import COLUMNS, render_compare_html
    from privmob.render.report_files import read_report

    table = compare_reports(read_report(a), read_report(b))
    t = Table(title=f"{a.name} vs {b.name} (JS and KL in bits)")
    t.add_column("analysis")
    for col in COLUMNS.values():
        t.add_column(col, justify="right")
    for r in table.to_dict("records"):
        t.add_row(r["analysis"], *(_show(r[c]) for c in COLUMNS))
    c.console.print(t)
    if output is not None:
        if output.exists() and not overwrite:
            raise InputError(f"{output} exists; nothing was written", hint="pass --overwrite")
        output.write_text(render_compare_html(table, str(a), str(b)), encoding="utf-8")
        write_csv(table, output.with_suffix(".csv"))
        c.console.print(
            f"comparison written: {output} (+ {output.with_suffix('.csv').name})", markup=False
        )


def _show(v: object) -> str:
    if v is None or v != v:  # None or NaN
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def register(app: typer.Typer) -> None:
    app.command("report", cls=o.with_aliases(max_trips=("-M",)))(report)
    app.command("compare")(compare)
