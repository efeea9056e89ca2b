"""Tessellations made from public parameters: metric square grids and H3 cells.

The area is *declared* (a bounding box or a polygon file, e.g. city boundaries), never taken
from the private records. Every generated tessellation records how it was made (kind, cell
size or H3 resolution, the declared area, the number of cells and the privmob version): in a
GeoJSON file as the top-level member ``privmob_tessellation``, in a GeoParquet file as the
schema metadata key ``privmob_tessellation``, and next to a Shapefile (which has no metadata)
in ``<name>.privmob.json``. :func:`read_provenance` reads it back.

H3 needs the optional ``h3`` package (``pip install 'privmob[h3]'``); it is imported only
when an H3 tessellation is asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import shapely

from privmob.data.grids import square_grid
from privmob.data.tessellation import Tessellation
from privmob.data.tessellation_input import read_geo_file
from privmob.errors import ConfigError, InputError

#: The metadata key (GeoJSON member, GeoParquet schema key) holding the provenance.
PROVENANCE_KEY = "privmob_tessellation"
#: Most cells a generated tessellation may have (same cap as :func:`square_grid`).
MAX_CELLS = 5_000_000
WRITE_SUFFIXES = (".geojson", ".json", ".parquet", ".geoparquet", ".shp")


@dataclass(frozen=True)
class DeclaredArea:
    """A public area (one (multi)polygon in EPSG:4326) and how it was declared."""

    geometry: shapely.Geometry
    declared: dict[str, Any]

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        b = self.geometry.bounds
        return (float(b[0]), float(b[1]), float(b[2]), float(b[3]))


def bbox_area(bbox: Sequence[float]) -> DeclaredArea:
    """The area of a bounding box (min_lng, min_lat, max_lng, max_lat) in degrees."""
    try:
        x0, y0, x1, y1 = (float(b) for b in bbox)
    except (TypeError, ValueError):
        raise ConfigError(
            f"bbox must be min_lng,min_lat,max_lng,max_lat, got {bbox!r}",
            hint="e.g. --bbox -122.52,37.70,-122.35,37.83",
        ) from None
    if not (-180 <= x0 < x1 <= 180 and -90 <= y0 < y1 <= 90):
        raise ConfigError(
            f"bbox must be min_lng,min_lat,max_lng,max_lat in degrees, got {list(bbox)!r}",
            hint="west < east and south < north, longitudes in [-180, 180], latitudes in [-90, 90]",
        )
    return DeclaredArea(shapely.box(x0, y0, x1, y1), {"bbox": [x0, y0, x1, y1]})


def file_area(path: str | Path) -> DeclaredArea:
    """The union of the polygons of a public file (GeoJSON, GeoParquet, Shapefile, GeoPackage).

    The provenance records the file name and its SHA-256, so the area can be checked later.
    """
    p = Path(path)
    gdf = read_geo_file(p)
    if gdf.crs is not None and not gdf.crs.equals("EPSG:4326"):
        gdf = gdf.to_crs(4326)
    polys = gdf.geometry[gdf.geometry.geom_type.isin(["Polygon", "MultiPolygon"])]
    if polys.empty:
        raise InputError(
            "the area file has no polygons",
            source=str(p),
            hint="give a file of (multi)polygons, or use --bbox",
        )
    geom = shapely.make_valid(shapely.union_all(shapely.make_valid(polys.to_numpy())))
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    return DeclaredArea(geom, {"file": p.name, "sha256": digest})


def metric_grid(area: DeclaredArea, cell_size_m: float) -> tuple[Tessellation, dict[str, Any]]:
    """Square cells of ``cell_size_m`` metres over ``area``, and the provenance.

    A bbox area gives the full grid of :func:`square_grid` (tile id = row * ncols + col, row 0
    south). A polygon area keeps the cells of that grid that intersect the area (whole squares,
    not clipped, so every cell has the stated size); their ids stay ``row * ncols + col``.
    """
    grid = square_grid(area.bounds, cell_size_m)
    if "bbox" not in area.declared:
        keep = shapely.intersects(grid.gdf.geometry.to_numpy(), area.geometry)
        grid = Tessellation(grid.gdf[keep].reset_index(drop=True))
    spec = grid.grid
    params: dict[str, Any] = {"kind": "square-grid", "cell_size_m": float(cell_size_m)}
    if spec is not None:
        params |= {"nrows": spec.nrows, "ncols": spec.ncols}
    return grid, _provenance(params, area, grid.k)


def h3_cells(area: DeclaredArea, resolution: int) -> tuple[Tessellation, dict[str, Any]]:
    """The H3 cells at ``resolution`` whose centre lies in ``area``, and the provenance.

    Tile ids are the H3 cell indexes as strings (e.g. ``'88283082b9fffff'``); cells are the
    hexagons (and 12 pentagons world-wide) of the H3 grid, which do not overlap.
    """
    h3 = _import_h3()
    if not (isinstance(resolution, int) and 0 <= resolution <= 15):
        raise ConfigError(f"H3 resolution must be an integer 0..15, got {resolution!r}")
    cells: set[str] = set()
    for poly in _polygons(area.geometry):
        cells.update(h3.geo_to_cells(poly, resolution))
    if not cells:
        raise ConfigError(
            f"no H3 cell of resolution {resolution} has its centre in the declared area",
            hint="use a finer resolution (a larger number) or a larger area",
        )
    if len(cells) > MAX_CELLS:
        raise ConfigError(
            f"{len(cells):,} H3 cells at resolution {resolution} (max {MAX_CELLS:,})",
            hint="use a coarser resolution (a smaller number)",
        )
    ids = sorted(cells)
    geoms = [shapely.Polygon([(lng, lat) for lat, lng in h3.cell_to_boundary(c)]) for c in ids]
    gdf = gpd.GeoDataFrame({"tile_id": ids}, geometry=geoms, crs=4326)
    params = {"kind": "h3", "resolution": resolution, "h3_version": h3.__version__}
    return Tessellation(gdf), _provenance(params, area, len(ids))


def _import_h3() -> Any:
    from privmob.extras import require

    return require("h3", "an H3 tessellation")


def _polygons(geom: shapely.Geometry) -> list[shapely.Polygon]:
    if isinstance(geom, shapely.Polygon):
        return [geom]
    if isinstance(geom, shapely.MultiPolygon | shapely.GeometryCollection):
        return [p for g in geom.geoms for p in _polygons(g)]
    return []


def _provenance(params: dict[str, Any], area: DeclaredArea, k: int) -> dict[str, Any]:
    from privmob import __version__

    return {**params, "area": area.declared, "cells": k, "made_by": f"privmob {__version__}"}


def write_tessellation(tess: Tessellation, path: str | Path, provenance: dict[str, Any]) -> Path:
    """Write ``tess`` (tile_id [, tile_name], geometry; EPSG:4326) with its provenance.

    The format follows the suffix: .geojson/.json, .parquet/.geoparquet or .shp.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in WRITE_SUFFIXES:
        raise ConfigError(
            f"cannot write a tessellation as '{suffix or p.name}'",
            hint="end the output name with .geojson, .parquet (GeoParquet) or .shp",
        )
    p.parent.mkdir(parents=True, exist_ok=True)
    gdf = tess.gdf
    if suffix in (".geojson", ".json"):
        doc = json.loads(gdf.to_json(drop_id=True))
        doc[PROVENANCE_KEY] = provenance
        p.write_text(json.dumps(doc), encoding="utf-8")
    elif suffix in (".parquet", ".geoparquet"):
        import pyarrow.parquet as pq

        gdf.to_parquet(p)
        table = pq.read_table(p)
        meta = dict(table.schema.metadata or {})
        meta[PROVENANCE_KEY.encode()] = json.dumps(provenance).encode()
        pq.write_table(table.replace_schema_metadata(meta), p)
    else:
        gdf.to_file(p, driver="ESRI Shapefile")
        _sidecar(p).write_text(json.dumps(provenance, indent=1), encoding="utf-8")
    return p


def read_provenance(path: str | Path) -> dict[str, Any] | None:
    """How a tessellation file was made (see the module docstring); None if not recorded."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".geojson", ".json"):
        doc = json.loads(p.read_text(encoding="utf-8"))
        value = doc.get(PROVENANCE_KEY) if isinstance(doc, dict) else None
        return value if isinstance(value, dict) else None
    if suffix in (".parquet", ".geoparquet"):
        import pyarrow.parquet as pq

        meta = pq.read_schema(p).metadata or {}
        raw = meta.get(PROVENANCE_KEY.encode())
        return json.loads(raw) if raw else None
    side = _sidecar(p)
    return json.loads(side.read_text(encoding="utf-8")) if side.exists() else None


def _sidecar(shp: Path) -> Path:
    return shp.with_name(shp.stem + ".privmob.json")


def cell_count_summary(tess: Tessellation) -> str:
    """One line for the CLI: number of cells and their median area."""
    med = float(np.median(tess.areas_m2())) if tess.k else 0.0
    return f"{tess.k:,} cells, median area {med / 1e6:,.3f} km2"
