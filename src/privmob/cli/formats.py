"""The ``--format`` option shared by od, population, density and series-counts."""

from __future__ import annotations

from typing import Annotated

import typer

FormatOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--format",
        help="parquet (the tables, always written), geoparquet, geojson, csv: map layers "
        "joined to the tessellation; repeat or separate with commas",
    ),
]
