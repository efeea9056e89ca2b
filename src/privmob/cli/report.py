"""``privmob report`` (DP mobility report) and ``privmob compare`` (report comparison)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli.common import (
    BudgetOpt,
    DatasetOpt,
    LedgerOpt,
    OverwriteOpt,
    QuietOpt,
    SeedOpt,
    console,
    dataset_name,
)
from privmob.errors import ConfigError, InputError
from privmob.privacy.costs import Unit


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


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(":"))
    except ValueError as exc:
        raise ConfigError(f"cannot read {what} {text!r}", hint="write lo:hi:width") from exc


def report(
    data: Annotated[
        Path, typer.Argument(help="trip points: CSV or Parquet with uid, tid, datetime, lat, lng")
    ],
    tessellation: Annotated[Path, typer.Option("--tessellation", "-t", help="GeoJSON tiles")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="total epsilon of the report")],
    max_trips: Annotated[int, typer.Option("--max-trips", help="M: trips kept per user")],
    period: Annotated[
        tuple[str, str],
        typer.Option("--period", help="declared study period START END (ISO dates, END excluded)"),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html (JSON beside)")],
    unit: Annotated[Unit, typer.Option("--unit", help="user or trip")] = Unit.USER,
    analyses: Annotated[
        str | None, typer.Option("--analyses", help="comma-separated subset (default: all 15)")
    ] = None,
    budget_split: Annotated[
        str | None,
        typer.Option(
            "--budget-split", help="weights, e.g. od_flows=3,visits_per_tile=2 (others 1)"
        ),
    ] = None,
    ranges: Annotated[
        str | None,
        typer.Option(
            "--range", help="declared histogram ranges, e.g. travel_time=0:120:5,jump_length=0:20:1"
        ),
    ] = None,
    time_windows: Annotated[str, typer.Option("--time-windows")] = "2,6,10,14,18,22",
    tile_id: Annotated[str | None, typer.Option("--tile-id", help="tile id column")] = None,
    group_size: Annotated[
        int | None,
        typer.Option(
            "--group-size",
            help="trip level: most trips one user can have (to charge a user "
            "budget by group privacy)",
        ),
    ] = None,
    ledger: LedgerOpt = None,
    dataset: DatasetOpt = None,
    budget: BudgetOpt = None,
    seed: SeedOpt = None,
    quiet: QuietOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """A differentially private mobility report: 15 analyses, one offline HTML + JSON."""
    import duckdb
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from privmob.privacy.ledger import Ledger
    from privmob.privacy.samplers import Randomness
    from privmob.releases.base import Accountant
    from privmob.releases.report import (
        ReportConfig,
        Tiles,
        mobility_report,
        read_tessellation,
        register_trip_points,
    )
    from privmob.releases.report.inputs import read_trip_points
    from privmob.render.report_files import write_report

    weights = {k: float(v) for k, v in _pairs(budget_split, "budget weight").items()}
    rng_ = {k: _floats(v, "range") for k, v in _pairs(ranges, "range").items()}
    cfg = ReportConfig.build(
        epsilon=epsilon,
        max_trips=max_trips,
        period=period,
        unit=unit,
        analyses=[a.strip() for a in analyses.split(",")] if analyses else None,
        weights=weights,
        ranges=rng_,  # type: ignore[arg-type]
        time_windows=[int(h) for h in time_windows.split(",")],
    )
    if not output.suffix.lower().startswith(".htm"):
        raise InputError(f"-o should name an .html file, got {output}")
    acc = Accountant(Ledger(ledger), dataset_name(dataset, data), group_size, budget)
    from privmob.releases.report.build import report_cost

    acc.precheck(report_cost(cfg))  # refuse before reading anything
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        disable=quiet,
        console=console,
        transient=True,
    ) as prog:
        task = prog.add_task("reading the tessellation and trip points")
        gdf = read_tessellation(tessellation, tile_id)
        tiles = Tiles.from_geodataframe(gdf)
        con = duckdb.connect()
        register_trip_points(con, read_trip_points(data), gdf)
        rel = mobility_report(
            con,
            "pm_points",
            tiles,
            cfg,
            acc,
            rng=Randomness.for_tests(seed) if seed is not None else None,
            progress=lambda msg: prog.update(task, description=msg),
        )
        prog.update(task, description="writing")
        paths = write_report(rel, output, overwrite=overwrite)
    if not quiet:
        e = rel.ledger_entry
        console.print(
            f"report written: {paths['html']} (+ {paths['json'].name}, {paths['tables'].name}/); "
            f"charged epsilon={e.cost.epsilon:.6g} per {e.cost.unit} to '{e.dataset}' "
            f"(entry #{e.id})"
            if e
            else ""
        )
        if not rel.for_publication:
            console.print("[bold red]NOT FOR PUBLICATION[/]: made with --seed")


def compare(
    a: Annotated[Path, typer.Argument(help="reference report JSON")],
    b: Annotated[Path, typer.Argument(help="report JSON to compare")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="compare.html")] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Similarity of two reports per analysis (SMAPE, JS base 2, KL, EMD, Kendall, top-n)."""
    from rich.table import Table

    from privmob.evaluate.benchmark import compare_reports
    from privmob.render.compare_html import COLUMNS, render_compare_html
    from privmob.render.report_files import read_report

    table = compare_reports(read_report(a), read_report(b))
    t = Table(title=f"{a.name} vs {b.name} (JS and KL in bits)")
    t.add_column("analysis")
    for c in COLUMNS.values():
        t.add_column(c, justify="right")
    for r in table.to_dict("records"):
        t.add_row(r["analysis"], *(_show(r[c]) for c in COLUMNS))
    console.print(t)
    if output is not None:
        if output.exists() and not overwrite:
            raise InputError(f"{output} exists; nothing was written", hint="pass --overwrite")
        output.write_text(render_compare_html(table, str(a), str(b)), encoding="utf-8")
        table.to_csv(output.with_suffix(".csv"), index=False)
        console.print(f"comparison written: {output} (+ {output.with_suffix('.csv').name})")


def _show(v: object) -> str:
    if v is None or v != v:  # None or NaN
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("compare")(compare)
