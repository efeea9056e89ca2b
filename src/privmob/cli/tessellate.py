"""``privmob tessellate``: a tessellation from public parameters (metric grid or H3 cells)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import common as c
from privmob.errors import ConfigError


def tessellate(
    output: Annotated[
        Path, typer.Argument(help="output file: .geojson, .parquet (GeoParquet) or .shp")
    ],
    area: Annotated[
        Path | None,
        typer.Option("--area", help="public polygon file declaring the area (GeoJSON, ...)"),
    ] = None,
    bbox: Annotated[
        str | None,
        typer.Option("--bbox", help="declared area as min_lng,min_lat,max_lng,max_lat"),
    ] = None,
    cell_size: Annotated[
        float | None, typer.Option("--cell-size", help="square grid: cell side in metres")
    ] = None,
    h3_resolution: Annotated[
        int | None, typer.Option("--h3", help="H3 cells at this resolution (0..15)")
    ] = None,
) -> None:
    """Write a square grid (--cell-size) or H3 cells (--h3) over a declared public area.

    The area is declared (--area file or --bbox), never taken from the data. The file records
    how it was made (parameters, area, cell count).
    """
    from privmob.data import tessellate as t

    if (area is None) == (bbox is None):
        raise ConfigError(
            "declare the area with exactly one of --area FILE or --bbox W,S,E,N",
            hint="e.g. --bbox -122.52,37.70,-122.35,37.83",
        )
    if (cell_size is None) == (h3_resolution is None):
        raise ConfigError(
            "choose exactly one of --cell-size METRES (square grid) or --h3 RESOLUTION",
            hint="e.g. --cell-size 500 or --h3 8",
        )
    if bbox is not None:
        parts = bbox.split(",")
        try:
            values = [float(v) for v in parts]
        except ValueError:
            raise ConfigError(
                f"--bbox must be four numbers min_lng,min_lat,max_lng,max_lat, got {bbox!r}"
            ) from None
        declared = t.bbox_area(values)
    else:
        assert area is not None
        declared = t.file_area(area)
    if cell_size is not None:
        tess, provenance = t.metric_grid(declared, cell_size)
    else:
        assert h3_resolution is not None
        tess, provenance = t.h3_cells(declared, h3_resolution)
    path = t.write_tessellation(tess, output, provenance)
    c.console.print(f"wrote {path} ({t.cell_count_summary(tess)})", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("tessellate")(tessellate)
