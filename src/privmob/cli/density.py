"""``privmob density``: hourly users per zone over a week (SPEC 4.3), and ``privmob
density-eval``: the scheme against the LPA baseline over several epsilons (seed 004 Figs 7-9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from privmob.cli import common as c
from privmob.cli.formats import FormatOpt
from privmob.cli.test_mode import TestModeOpt, ledger_for, test_mode_marks
from privmob.releases.density_inputs import load_density_inputs, parse_week

EventsArg = Annotated[
    str, typer.Argument(help=c.INPUT_HELP.format("events: uid, datetime, cell_id"))
]
CellsOpt = Annotated[str, typer.Option("--cells", help="cells table: cell_id, lat, lng")]
ZonesOpt = Annotated[Path, typer.Option("--zones", help="zones (GeoJSON, GeoParquet, Shapefile)")]
ZoneIdOpt = Annotated[str | None, typer.Option("--zone-id", help="zone id column")]
MaxVisitsOpt = Annotated[
    int, typer.Option("--max-visits", "-l", help="hourly visits kept per user per week (l)")
]
WeekOpt = Annotated[
    str, typer.Option("--week", help="start of the week, local time (e.g. 2007-09-10)")
]


def density(
    events: EventsArg,
    cells: CellsOpt,
    zones: ZonesOpt,
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="privacy budget")],
    week: WeekOpt,
    output: Annotated[Path, typer.Option("--output", "-o", help="output folder")] = Path(
        "privmob-density"
    ),
    delta: Annotated[
        float, typer.Option("--delta", help="> 0: EFPAG ((epsilon, delta)-DP); 0: EFPA (pure)")
    ] = 0.0,
    max_visits: MaxVisitsOpt = 30,
    method: Annotated[str, typer.Option("--method", help="scheme or lpa (baseline)")] = "scheme",
    cover: Annotated[bool, typer.Option("--cover/--no-cover", help="minimum cover step")] = True,
    totals: Annotated[
        str, typer.Option("--totals", help="one-visit (seed 5.4.1), rescaled, sampled")
    ] = "one-visit",
    clustering: Annotated[bool, typer.Option("--clustering/--no-clustering")] = True,
    tau: Annotated[
        float | None, typer.Option("--tau", help="minimum noisy cluster total (default: seed)")
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
    zone_id: ZoneIdOpt = None,
    columns: c.ColumnsOpt = None,
    timezone: c.TimezoneOpt = "UTC",
    ledger: c.LedgerOpt = None,
    dataset: c.DatasetOpt = None,
    new_dataset: c.NewDatasetOpt = False,
    budget: c.BudgetOpt = None,
    engine: c.EngineOpt = "duckdb",
    memory_limit: c.MemoryLimitOpt = None,
    spill_dir: c.SpillDirOpt = None,
    spark_master: c.SparkMasterOpt = None,
    spark_conf: c.SparkConfOpt = None,
    seed: c.SeedOpt = None,
    test_mode: TestModeOpt = False,
    overwrite: c.OverwriteOpt = False,
    output_format: FormatOpt = None,
    quiet: c.QuietOpt = False,
) -> None:
    """Release the number of users per zone and hour of a week (SPEC 4.3, seed 004)."""
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.density import DensityConfig, density_release
    from privmob.releases.publish import Output
    from privmob.render.layers import parse_formats, write_layers

    parse_week(week)  # parameters are checked before the ledger is touched
    out = Output(output, overwrite=overwrite).check()  # stage -> charge -> rename, at charge
    formats = parse_formats(output_format)  # layers beside the tables, staged with them
    config = DensityConfig(
        epsilon,
        max_visits,
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
    acct = Accountant(
        Ledger(ledger_for(ledger, seed, test_mode)),
        c.dataset_name(dataset, events),
        budget=budget,
        budget_delta=delta if budget is not None else 0.0,
        output=out,
        annotate=test_mode_marks(seed, test_mode),
        new_dataset_for_same_data=new_dataset,
    )
    acct.precheck(config.cost())
    with c.Steps(quiet) as step:
        inp = load_density_inputs(
            events,
            cells,
            zones,
            zone_id=zone_id,
            week=week,
            cover=cover,
            timezone=timezone,
            columns=c.parse_columns(columns),
            step=step,
            engine=c.open_engine(
                engine, memory_limit, spark_master, spark_conf, step, spill_dir=spill_dir
            ),
        )
        out.extra.append(lambda rel, d: [write_geojson(rel, inp.zones, d / "density.geojson")])
        out.extra.append(lambda rel, d: write_layers(rel, inp.zones, d, formats))
        acct.bind_input(inp.loaded)  # the budget is bound to the data's content
        step("pre-sampling, noise and post-processing")
        release = density_release(
            inp.engine, inp.loaded, inp.geometry, config, inp.week_start, acct, seed, step
        )
        paths = out.written
    c.print_release_summary(release, paths, acct)


def write_geojson(release: Any, zones: Any, path: Path) -> Path:
    """Zones with their 168 released counts (``counts``), mean and peak hour (noisy values)."""
    tab = release.tables["density"]
    wide = tab.pivot(index="zone", columns="hour", values="count")
    gdf = zones.gdf.copy()
    values = wide.reindex(gdf["tile_id"]).to_numpy()
    feats = json.loads(gdf[["tile_id", "geometry"]].to_json())
    for f, row in zip(feats["features"], values, strict=True):
        f["properties"] = {
            "zone": f["properties"]["tile_id"],
            "mean": float(np.mean(row)),
            "peak_hour": int(np.argmax(row)),
            "counts": [int(v) for v in row],
        }
    from privmob.releases.stamp import json_stamp

    feats["privmob"] = json_stamp(release)  # with the warning when not for publication
    path.write_text(json.dumps(feats))
    return path


def register(app: typer.Typer) -> None:
    from privmob.cli.density_eval import density_eval
    from privmob.cli.evaluate import evaluate_app

    app.command("density")(density)
    evaluate_app.command("density")(density_eval)
    app.command("density-eval", hidden=True)(density_eval)  # older name, kept as an alias
