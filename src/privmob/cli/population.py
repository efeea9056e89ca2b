"""``privmob population``: DP counts of users per home zone from events."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import common as c
from privmob.cli import options as o
from privmob.cli.formats import FormatOpt
from privmob.cli.test_mode import TestModeOpt, ledger_for, test_mode_marks
from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind


def population(
    data: Annotated[
        str, typer.Argument(help=c.INPUT_HELP.format("events: uid, datetime, lat/lng or cell_id"))
    ],
    tessellation: Annotated[Path, o.tessellation("zones (GeoJSON, GeoParquet, Shapefile)")],
    epsilon: Annotated[float, o.epsilon("privacy budget (each user counts once: at home)")],
    output: Annotated[Path, o.output()] = Path("privmob-population"),
    noise: Annotated[NoiseKind, typer.Option("--noise")] = NoiseKind.DISCRETE_LAPLACE,
    delta: Annotated[float, typer.Option("--delta", help="for discrete-gaussian")] = 0.0,
    night_start: Annotated[int, typer.Option("--night-start", help="night from (hour)")] = 20,
    night_end: Annotated[int, typer.Option("--night-end", help="night until (hour)")] = 6,
    start: Annotated[str | None, o.start()] = None,
    end: Annotated[str | None, o.end()] = None,
    cells: Annotated[
        str | None, typer.Option("--cells", help="cells table for events with cell_id")
    ] = None,
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
    """Release DP counts of users per home zone.

    Home = most frequent zone at night; every zone plus 'outside' and 'unknown home' cells get
    noise; user-level epsilon-DP with sensitivity 1.
    """
    from privmob.data.sources import load_events
    from privmob.data.tessellation import load_tessellation
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.periods import StudyPeriod
    from privmob.releases.population import population_counts
    from privmob.releases.publish import Output
    from privmob.render.layers import parse_formats, write_layers

    if zone_mapping not in ("contain", "voronoi"):
        raise ConfigError(f"unknown zone mapping '{zone_mapping}'", hint="contain or voronoi")
    if zone_mapping == "voronoi" and cells is None:
        raise ConfigError("--zone-mapping voronoi needs --cells (the towers table)")
    study = StudyPeriod.parse("all", start, end)
    # before anything is read or charged: a release that cannot be written must cost nothing
    out = Output(output, overwrite=overwrite).check()  # stage -> charge -> rename, at charge
    formats = parse_formats(output_format)  # layers beside the tables, staged with them
    acct = Accountant(
        Ledger(ledger_for(ledger, seed, test_mode)),
        c.dataset_name(dataset, data),
        budget=budget,
        output=out,
        annotate=test_mode_marks(seed, test_mode),
        new_dataset_for_same_data=new_dataset,
    )
    with c.Steps(quiet) as step:
        step("reading the tessellation")
        tess = load_tessellation(tessellation, id_column=tile_id)
        out.extra.append(lambda rel, d: write_layers(rel, tess, d, formats))
        out.require_space(tess.k)  # the public domain, before the data
        eng = c.open_engine(
            engine, memory_limit, spark_master, spark_conf, step, spill_dir=spill_dir
        )
        step("reading and validating the events")
        events = load_events(
            data,
            engine=eng,
            tessellation=tess,
            cells=cells,
            columns=c.parse_columns(columns),
            timezone=timezone,
            delimiter=delimiter,
        )
        acct.bind_input(events)  # the budget is bound to the data's content
        if zone_mapping == "voronoi":
            from privmob.data.sources import load_cells
            from privmob.releases.population import population_by_tower_shares

            towers = eng.fetch(f"SELECT * FROM {load_cells(cells, engine=eng, tessellation=tess)}")
            release = population_by_tower_shares(
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
        else:
            release = population_counts(
                events,
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
        paths = out.written
    c.print_release_summary(release, paths, acct)


def register(app: typer.Typer) -> None:
    app.command("population")(population)
