"""``privmob series-utility``: MAE of the landmark schemes over landmark shares."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.progress import Progress

from privmob.cli import options as o
from privmob.cli.common import QuietOpt, console
from privmob.data.csv_cells import write_csv
from privmob.errors import ConfigError, InputError
from privmob.evaluate.landmark_utility import (
    DEFAULT_SHARES,
    gowalla_hourly_counts,
    plot_utility,
    synthetic_series,
    to_markdown,
    utility_table,
)
from privmob.evaluate.notice import NOT_PRIVATE, write_notice

DEFAULT_SHARES_TEXT = ",".join(str(share) for share in DEFAULT_SHARES)
GOWALLA_FILE = Path("gowalla_nyc") / "gowalla_nyc_events.csv.gz"


def default_gowalla() -> Path:
    """$PRIVMOB_SHARED_DATA/gowalla_nyc/... or ../shared/data/gowalla_nyc/..."""
    root = os.environ.get("PRIVMOB_SHARED_DATA")
    return (Path(root) if root else Path("..") / "shared" / "data") / GOWALLA_FILE


def series_utility(
    output: Annotated[Path, o.output("output directory")],
    gowalla: Annotated[
        Path | None,
        typer.Option("--gowalla", help="Gowalla NYC events TSV (default ../shared/data/...)"),
    ] = None,
    epsilon: Annotated[float, o.epsilon("epsilon of the release")] = 1.0,
    shares: Annotated[
        str, typer.Option("--shares", help="landmark shares, comma-separated")
    ] = DEFAULT_SHARES_TEXT,
    trials: Annotated[int, typer.Option("--trials")] = 5,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    max_per_hour: Annotated[
        int, typer.Option("--max-per-hour", help="check-ins kept per user per hour (= sensitivity)")
    ] = 1,
    quiet: QuietOpt = False,
) -> None:
    """Writes utility.csv, utility.md and utility.png (synthetic and Gowalla Manhattan).

    The MAE compares private series with the exact ones: NOT private, never charged, not
    for publication (the files say so).
    """
    try:
        grid = [float(s) for s in shares.split(",") if s.strip()]
    except ValueError as exc:
        raise ConfigError(f"--shares expects numbers in [0, 1]: {exc}") from exc
    if not grid or any(not 0 <= s <= 1 for s in grid):
        raise ConfigError("--shares expects numbers in [0, 1]")
    source = gowalla if gowalla is not None else default_gowalla()
    if not source.is_file():
        raise InputError(
            "the Gowalla NYC check-ins were not found",
            source=str(source),
            hint="pass --gowalla PATH/gowalla_nyc_events.csv.gz or set PRIVMOB_SHARED_DATA",
        )
    series = {"synthetic (daily cycle, 720 h)": (synthetic_series(720, seed), 1.0)}
    real = gowalla_hourly_counts(source, max_per_hour=max_per_hour)
    series["Gowalla Manhattan, hourly check-ins, Sep 2010"] = (real.to_numpy(), max_per_hour)
    output.mkdir(parents=True, exist_ok=True)
    tables = {}
    with Progress(console=console, disable=quiet, transient=True) as bar:
        task = bar.add_task("utility", total=len(series))
        for name, (values, sens) in series.items():
            tables[name] = utility_table(
                values, epsilon=epsilon, sensitivity=sens, shares=grid, trials=trials, seed=seed
            ).assign(series=name)
            bar.advance(task)
    write_csv(pd.concat(tables.values()), output / "utility.csv")
    md = f"> {NOT_PRIVATE}\n\n" + "".join(
        f"### {name} (epsilon = {epsilon:g})\n\n{to_markdown(t)}\n" for name, t in tables.items()
    )
    (output / "utility.md").write_text(md)
    plot_utility(tables, output / "utility.png")
    write_notice(output)
    if not quiet:
        console.print(md, highlight=False)
        console.print(
            f"wrote {output / 'utility.csv'}, utility.md, utility.png, NOT_PRIVATE.txt",
            highlight=False,
        )
    console.print(f"[yellow]{NOT_PRIVATE}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("series-utility")(series_utility)
