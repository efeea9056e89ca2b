"""``privmob synth``: write realistic synthetic trips, trip points or events to Parquet."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from privmob.cli import options as o
from privmob.cli.common import OverwriteOpt, QuietOpt, console
from privmob.data.synth import (
    SynthConfig,
    default_cells_path,
    default_tessellation,
    write_synthetic,
)
from privmob.data.synth_model import DEFAULT_GRID_CELLS
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError


class SynthKind(StrEnum):
    trips = "trips"
    trip_points = "trip-points"
    events = "events"


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


def synth(
    kind: Annotated[SynthKind, typer.Argument(help="trips, trip-points or events")],
    output: Annotated[Path, o.output("Parquet file to write")],
    users: Annotated[int, typer.Option("--users", help="number of users")] = 10_000,
    days: Annotated[int, typer.Option("--days", help="length of the study period in days")] = 28,
    start: Annotated[
        datetime, typer.Option("--start", formats=["%Y-%m-%d"], help="first day (YYYY-MM-DD)")
    ] = datetime(2024, 1, 1),
    trips_per_user: Annotated[
        float, typer.Option("--trips-per-user", help="mean trips per user over the whole period")
    ] = 20.0,
    tessellation: Annotated[
        Path | None, o.tessellation("tiles (GeoJSON, GeoParquet, Shapefile); default a grid")
    ] = None,
    tile_id: o.TileIdOpt = None,
    grid: Annotated[
        int,
        typer.Option(
            "--grid", help="without --tessellation: about N square cells over central NYC"
        ),
    ] = DEFAULT_GRID_CELLS,
    tiles_out: Annotated[
        Path | None,
        typer.Option("--tiles-out", help="also write the tessellation used as GeoJSON here"),
    ] = None,
    coordinates: Annotated[
        bool, typer.Option("--coordinates", help="trips: add origin/destination lat/lng")
    ] = False,
    towers: Annotated[
        int | None,
        typer.Option("--towers", help="events: number of cell towers (default 2 per tile)"),
    ] = None,
    cells: Annotated[
        Path | None,
        typer.Option("--cells", help="events: cells table path (default <output>.cells.parquet)"),
    ] = None,
    timezone: Annotated[
        str, o.timezone("local time zone of the daily rhythm (stored as UTC)")
    ] = "UTC",
    seed: Annotated[int, typer.Option("--seed", help="seed of the generator (synthetic data)")] = 0,
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Generate realistic synthetic mobility data, streamed to Parquet in chunks of users.

    Users have home and work anchors, heavy-tailed trip counts, commute peaks around 08:00
    and 18:00 and quieter weekends. This is test input, not a private release.
    """
    if kind is SynthKind.events and cells is None:
        cells = default_cells_path(output)
    for target in (output, cells, tiles_out):
        if target is not None and target.exists() and not overwrite:
            raise ConfigError(
                f"{target} exists", hint="pass --overwrite to replace it, or choose another path"
            )
    tess = (
        load_tessellation(tessellation, id_column=tile_id)
        if tessellation is not None
        else default_tessellation(grid)
    )
    cfg = SynthConfig(
        n_users=users,
        start=start.date(),
        days=days,
        mean_trips_per_user=trips_per_user,
        tessellation=tess,
        seed=seed,
        timezone=timezone,
        coordinates=coordinates,
        n_towers=towers,
    ).validated()
    if tiles_out is not None:
        tiles_out.parent.mkdir(parents=True, exist_ok=True)
        tiles_out.write_text(json.dumps(tess.to_geojson_dict()))

    with Progress(
        TextColumn(f"[bold]synth {kind.value}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("users · {task.fields[rows]:,} rows"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as bar:
        task = bar.add_task("synth", total=users, rows=0)
        summary = write_synthetic(
            kind.value,
            output,
            cfg,
            cells_path=cells,
            progress=lambda done, rows: bar.update(task, completed=done, rows=rows),
        )
    if quiet:
        return
    console.print(
        f"wrote {summary.rows:,} {kind.value} rows of {summary.users:,} users to "
        f"{summary.path} ({_human(summary.bytes)}, {summary.chunks} chunk(s)) in "
        f"{summary.seconds:.1f} s ({summary.rows_per_second:,.0f} rows/s)"
    )
    console.print(
        f"period {summary.start} to {summary.end} (exclusive), {summary.tiles} tiles, seed {seed}"
        + (f"; tessellation written to {tiles_out}" if tiles_out else "")
    )
    if summary.cells_path is not None:
        console.print(f"cells table: {summary.cells:,} towers in {summary.cells_path}")


def register(app: typer.Typer) -> None:
    """Add ``privmob synth`` to the app."""
    app.command("synth", cls=o.with_aliases(tile_id=("--id-column",)))(synth)
