"""A tessellation given by the user, read and validated.

:func:`load_tessellation` takes a GeoJSON, GeoParquet, Shapefile (also zipped) or GeoPackage
file, or a GeoDataFrame; it picks the tile id and name columns, normalises the ids, and
refuses empty files, null or duplicate ids, missing, non-polygon or invalid geometries and
overlapping tiles, each with one :class:`~privmob.errors.InputError` naming the file, the
column and an example tile. A tessellation whose tiles are exactly the cells of a lng/lat grid
gets the arithmetic assignment (:func:`privmob.data.grids.detect_grid`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from privmob.data import tessellation_cache
from privmob.data.grids import detect_grid
from privmob.data.tessellation import Tessellation
from privmob.errors import InputError

#: Overlap tolerance: two tiles "overlap" when the area of their intersection exceeds this
#: fraction of the smaller tile's area. Digitising slivers along shared borders are below it
#: (NYC taxi zones: largest sliver 0.7 m2, 2e-7 of the smaller zone).
OVERLAP_TOLERANCE = 1e-4

#: Columns tried, in order, as the tile id when ``id_column`` is not given (case-insensitive).
ID_CANDIDATES = (
    "tile_id",
    "LocationID",
    "location_id",
    "cellId",
    "cell_id",
    "tile",
    "zone_id",
    "GEOID",
    "id",
)
#: Columns tried, in order, as the human-readable tile name (case-insensitive).
#: what a tessellation can be given as (:func:`load_tessellation` reads it): a file's path, a
#: GeoDataFrame or a :class:`Tessellation`
TessellationSource: TypeAlias = str | Path | gpd.GeoDataFrame | Tessellation

NAME_CANDIDATES = ("tile_name", "zone", "name", "nhood", "neighborhood", "label")

_SUFFIXES = (".geojson", ".json", ".parquet", ".geoparquet", ".shp", ".zip", ".gpkg")


def load_tessellation(
    source: TessellationSource,
    id_column: str | None = None,
    name_column: str | None = None,
    *,
    repair: bool = False,
) -> Tessellation:
    """Read and validate a tessellation.

    ``source``: a path to GeoJSON (.geojson/.json), GeoParquet (.parquet/.geoparquet),
    Shapefile (.shp, or a .zip holding one) or GeoPackage (.gpkg); a GeoDataFrame; or a
    Tessellation (returned as is). The file is only read, never modified.

    Tile id column: ``id_column`` if given; else the first column present among
    :data:`ID_CANDIDATES` (``tile_id``, ``LocationID``, ``location_id``, ``cellId``,
    ``cell_id``, ``tile``, ``zone_id``, ``GEOID``, ``id``; case-insensitive); else, if the
    file has exactly one attribute column, that column (e.g. ``nhood`` names); else an
    InputError listing the columns. Ids are kept as given: integers (integral floats become
    ints) or strings. ``name_column`` (optional, default: first of :data:`NAME_CANDIDATES`
    other than the id) becomes ``tile_name``.

    CRS: reprojected to EPSG:4326 when the file declares another CRS; assumed EPSG:4326 when
    it declares none.

    Checks (each an InputError naming the file, the column and an example tile): empty file,
    missing id column, null or duplicate ids, null or empty geometry, non-polygon geometry,
    invalid polygons (with GEOS' reason; ``repair=True`` applies ``shapely.make_valid`` to a
    copy in memory instead), and overlapping tiles: an overlap whose area exceeds
    :data:`OVERLAP_TOLERANCE` (1e-4) of the smaller tile's area. Shared borders and slivers
    below the tolerance are not overlaps.
    """
    if isinstance(source, Tessellation):
        return source
    key = None
    if isinstance(source, gpd.GeoDataFrame):
        gdf, label = source.copy(), "tessellation (GeoDataFrame)"
    else:
        key = tessellation_cache.entry_key(Path(source), (id_column, name_column, repair))
        cached = None if key is None else tessellation_cache.read_entry(key)
        if cached is not None:  # this very file, read and checked by an earlier run
            _require_lonlat(cached, str(source), declared=True)  # an entry of an older check
            return _with_grid(Tessellation(cached))
        gdf, label = read_geo_file(Path(source)), str(source)
    if len(gdf) == 0:
        raise InputError(
            "the tessellation has no features",
            source=label,
            hint="give a file with at least one polygon",
        )
    if gdf.crs is None or gdf.crs.is_geographic:
        # no CRS, or a geographic one (GeoJSON is read as EPSG:4326 whatever its numbers):
        # refused, before any data is read, when the numbers cannot be degrees
        _require_lonlat(gdf, label, declared=gdf.crs is not None)
        if gdf.crs is None:
            gdf = gdf.set_crs(4326)  # longitude/latitude values: WGS84, as GeoJSON is
    if not gdf.crs.equals("EPSG:4326"):
        gdf = gdf.to_crs(4326)

    id_col = _pick_id_column(gdf, id_column, label)
    ids = _normalise_ids(gdf[id_col], id_col, label)
    name_col = _pick_name_column(gdf, name_column, id_col, label)
    geoms = _check_geometries(gdf, ids, id_col, label, repair)
    out = gpd.GeoDataFrame({"tile_id": ids}, geometry=geoms, crs=4326)
    if name_col is not None:
        out["tile_name"] = gdf[name_col].astype(str).to_numpy()
    _check_overlaps(out, id_col, label)
    tess = Tessellation(out)
    if key is not None:
        tessellation_cache.write_entry(key, tess.gdf)
    return _with_grid(tess)


def _require_lonlat(gdf: gpd.GeoDataFrame, label: str, *, declared: bool) -> None:
    """Refuse tiles whose coordinates cannot be longitude/latitude (metres of a projected CRS
    read as degrees would make every record an outlier, and the release would still be
    charged). ``declared``: the file names a geographic CRS (GeoJSON: EPSG:4326 by default)."""
    min_x, min_y, max_x, max_y = (float(v) for v in gdf.total_bounds)
    if -180 <= min_x <= max_x <= 180 and -90 <= min_y <= max_y <= 90:
        return
    said = (
        "declares longitude/latitude (EPSG:4326, GeoJSON's default)"
        if declared
        else "has no coordinate reference system"
    )
    raise InputError(
        f"the tessellation {said} but its coordinates cannot be longitude/latitude "
        f"(x from {min_x:,.0f} to {max_x:,.0f}, y from {min_y:,.0f} to {max_y:,.0f}: "
        "projected units such as metres); nothing was read or charged",
        source=label,
        hint="reproject it to EPSG:4326 (GeoPandas: gdf.set_crs('EPSG:<its code>')"
        ".to_crs(4326); ogr2ogr -s_srs EPSG:<its code> -t_srs EPSG:4326 out.geojson in), or "
        "declare its CRS (a Shapefile: its .prj file; GeoParquet: its metadata)",
    )


def _with_grid(tess: Tessellation) -> Tessellation:
    """``tess``, with the arithmetic assignment when its tiles are the cells of a grid."""
    spec = detect_grid(tess.gdf)
    return tess if spec is None else Tessellation(tess.gdf, grid=spec)


def read_geo_file(path: Path) -> gpd.GeoDataFrame:
    """A file of features (GeoJSON, GeoParquet, Shapefile, GeoPackage) as it is, unchecked;
    an InputError when it is missing, empty, of another format or unreadable."""
    if not path.exists():
        raise InputError(
            "file not found", source=str(path), hint="check the path of the tessellation file"
        )
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise InputError(
            f"unsupported tessellation format '{suffix}'",
            source=str(path),
            hint="use GeoJSON (.geojson), GeoParquet (.parquet), Shapefile (.shp/.zip) or .gpkg",
        )
    if path.stat().st_size == 0:
        raise InputError("the file is empty", source=str(path), hint="give a non-empty file")
    try:
        if suffix in (".parquet", ".geoparquet"):
            return gpd.read_parquet(path)
        if suffix in (".geojson", ".json"):
            plain = _read_plain_geojson(path)
            if plain is not None:
                return plain
        return gpd.read_file(path)
    except Exception as exc:  # pyogrio / pyarrow errors: report the reader's message
        raise InputError(
            f"cannot read the tessellation: {exc}",
            source=str(path),
            hint="is it a valid GeoJSON / GeoParquet / Shapefile?",
        ) from None


def _read_plain_geojson(path: Path) -> gpd.GeoDataFrame | None:
    """A plain RFC 7946 FeatureCollection (WGS84, no legacy ``crs`` member) read without GDAL
    (less memory and start-up time); None for anything else, which GDAL then reads."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        return None
    if "crs" in doc:  # legacy member: only lng/lat WGS84 (as GDAL writes it) is read here
        crs = doc["crs"]
        name = crs.get("properties", {}).get("name") if isinstance(crs, dict) else None
        if name not in ("urn:ogc:def:crs:OGC:1.3:CRS84", "OGC:CRS84"):
            return None
    feats = doc.get("features")
    if not isinstance(feats, list) or not feats:
        return None
    if not all(
        isinstance(f, dict) and isinstance(f.get("properties", {}), dict | None) for f in feats
    ):
        return None
    try:
        return gpd.GeoDataFrame.from_features(feats, crs=4326)
    except Exception:  # unusual geometry or properties: let GDAL read (and report) it
        return None


def _named_column(
    gdf: gpd.GeoDataFrame,
    column: str,
    role: str,
    label: str,
    *,
    seen: list[str],
    hint: str | None = None,
) -> str:
    """The column the user named for the tiles' ``role`` (id, name), refused with the columns
    ``seen`` unless the tessellation has it."""
    if column not in gdf.columns:
        raise InputError(
            f"{role} column not found; columns seen: {seen}", source=label, column=column, hint=hint
        )
    return column


def _pick_id_column(gdf: gpd.GeoDataFrame, id_column: str | None, label: str) -> str:
    attrs = [c for c in gdf.columns if c != gdf.geometry.name]
    if id_column is not None:
        hint = "pass --tile-id with one of the columns above"
        return _named_column(gdf, id_column, "id", label, seen=attrs, hint=hint)
    lower = {c.lower(): c for c in attrs}
    for cand in ID_CANDIDATES:
        if cand.lower() in lower:
            return lower[cand.lower()]
    if len(attrs) == 1:
        return attrs[0]
    raise InputError(
        f"no tile id column found (tried {list(ID_CANDIDATES)}); columns seen: {attrs}",
        source=label,
        column="tile_id",
        hint="pass --tile-id (Python: Session(tile_id=...)) naming the column with the tile ids",
    )


def _pick_name_column(
    gdf: gpd.GeoDataFrame, name_column: str | None, id_col: str, label: str
) -> str | None:
    if name_column is not None:
        return _named_column(gdf, name_column, "name", label, seen=list(gdf.columns))
    lower = {c.lower(): c for c in gdf.columns if c not in (id_col, gdf.geometry.name)}
    return next((lower[c.lower()] for c in NAME_CANDIDATES if c.lower() in lower), None)


def _normalise_ids(col: pd.Series, name: str, label: str) -> np.ndarray:
    null = col.isna().to_numpy()
    if null.any():
        i = int(np.flatnonzero(null)[0])
        raise InputError(
            f"{int(null.sum())} tile(s) have no id",
            source=label,
            column=name,
            example=f"feature #{i}",
            hint="every tile needs a unique id",
        )
    values = col.to_numpy()
    integral = pd.api.types.is_float_dtype(col) and bool(np.all(np.mod(values, 1) == 0))
    if integral or pd.api.types.is_integer_dtype(col):
        values = values.astype(np.int64)
    else:
        values = col.astype(str).to_numpy(dtype=object)
    dup = pd.Series(values).duplicated(keep=False).to_numpy()
    if dup.any():
        first = _py(values[np.flatnonzero(dup)[0]])
        where = np.flatnonzero(values == first)[:2].tolist()
        raise InputError(
            f"duplicate tile id {first!r} (features #{where[0]} and #{where[1]}); "
            f"{int(pd.Series(values[dup]).nunique())} id(s) are duplicated",
            source=label,
            column=name,
            example=first,
            hint="tile ids must be unique; pick another --tile-id or fix the file",
        )
    return values


def _check_geometries(
    gdf: gpd.GeoDataFrame, ids: np.ndarray, id_col: str, label: str, repair: bool
) -> np.ndarray:
    geoms = np.asarray(gdf.geometry.values, dtype=object)

    def refuse(bad: np.ndarray, message: Callable[[int, Any], str], hint: str) -> None:
        """An InputError naming the first tile of ``bad``: ``message(how many, its geometry)``."""
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                message(int(bad.sum()), geoms[i]),
                source=label,
                column=gdf.geometry.name,
                example=f"{id_col}={_py(ids[i])!r}",
                hint=hint,
            )

    missing = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    refuse(missing, lambda n, _: f"{n} tile(s) have no geometry", "every tile needs a polygon")
    bad = ~np.isin(shapely.get_type_id(geoms), (3, 6))  # Polygon, MultiPolygon
    refuse(
        bad,
        lambda n, first: f"{n} tile(s) are not polygons (e.g. a {first.geom_type})",
        "a tessellation holds Polygon or MultiPolygon features only",
    )
    valid = shapely.is_valid(geoms)
    if not valid.all():
        if not repair:
            refuse(
                ~valid,
                lambda n, first: f"{n} invalid polygon(s): {shapely.is_valid_reason(first)}",
                "fix the file, or pass --repair (Python: repair=True) to apply make_valid",
            )
        geoms = geoms.copy()
        fixed = shapely.make_valid(geoms[~valid])
        # make_valid may return collections; keep their polygonal part
        polys = [shapely.union_all(shapely.get_parts(g)[_is_poly(g)]) for g in fixed]
        geoms[~valid] = polys
    return geoms


def _py(v: Any) -> Any:
    """A numpy scalar as a plain Python value (for readable messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _is_poly(g: shapely.Geometry) -> np.ndarray:
    return np.isin(shapely.get_type_id(shapely.get_parts(g)), (3, 6))


def _check_overlaps(gdf: gpd.GeoDataFrame, id_col: str, label: str) -> None:
    geoms = gdf.geometry.values
    tree = shapely.STRtree(geoms)
    a, b = tree.query(geoms, predicate="intersects")
    keep = a < b
    a, b = a[keep], b[keep]
    if not len(a):
        return
    # interiors meet: candidates for an overlap (shared borders fail this test)
    arr = np.asarray(geoms, dtype=object)
    inner = shapely.relate_pattern(arr[a], arr[b], "T********")
    a, b = a[inner], b[inner]
    if not len(a):
        return
    # relative areas are nearly projection-free at tile scale: compute them in degrees
    area = shapely.area(arr)
    inter = shapely.area(shapely.intersection(arr[a], arr[b]))
    rel = inter / np.maximum(np.minimum(area[a], area[b]), 1e-300)
    over = rel > OVERLAP_TOLERANCE
    if over.any():
        j = int(np.argmax(np.where(over, rel, -1)))
        ids = gdf["tile_id"].tolist()
        raise InputError(
            f"{int(over.sum())} pair(s) of tiles overlap; e.g. tiles {ids[a[j]]!r} and "
            f"{ids[b[j]]!r} share {rel[j]:.2%} of the smaller tile's area "
            f"(tolerance {OVERLAP_TOLERANCE:.2%})",
            source=label,
            column=id_col,
            example=f"{id_col}={ids[a[j]]!r} / {id_col}={ids[b[j]]!r}",
            hint="tiles must not overlap (a point must belong to one tile); fix the polygons",
        )
