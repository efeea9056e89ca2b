"""The ``--format`` option shared by od, population, density and series-counts, and the
options of its map layers (``--max-layer-size``, ``--all-flows``)."""

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

MaxLayerSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--max-layer-size",
        help="largest map layer file written, e.g. 500MB (default 200MB); a larger one is "
        "refused with its estimated size before anything is written or charged",
    ),
]

AllFlowsOpt = Annotated[
    bool,
    typer.Option(
        "--all-flows",
        help="OD layers keep every non-zero cell (default: only the flows above the noise "
        "floor; the Parquet tables always keep every cell)",
    ),
]
