"""A tessellation given by the user, read and validated.

:func:`load_tessellation` takes a GeoJSON, GeoParquet, Shapefile (also zipped) or GeoPackage
file, or a GeoDataFrame; it picks the tile id and name columns, normalises the ids, and
refuses empty files, null or duplicate ids, missing, non-polygon or invalid geometries and
overlapping tiles, each with one :class:`~privmob.errors.InputError` naming the file, the
column and an example tile. A tessellation whose tiles are exactly the cells of a lng/lat grid
gets the arithmetic assignment (:func:`privmob.data.grids.detect_grid`).

A plain GeoJSON file (and a cached tessellation, :mod:`privmob.data.tessellation_cache`) is
read with ``json`` and shapely alone: pandas and GeoPandas (about a second of imports on a
small machine) are imported only for the other formats, for a GeoDataFrame given as the
source, or when a GeoJSON file is not plain (a legacy CRS, unusual geometry).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from privmob.data import tessellation_cache
from privmob.data.grids import detect_grid
from privmob.data.tessellation import Tessellation
from privmob.errors import InputError
from privmob.lazy_imports import lazy_module
from privmob.surface import spelled

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
if TYPE_CHECKING:
    import geopandas as gpd
    import numpy as np
    import shapely

    #: what a tessellation can be given as (:func:`load_tessellation` reads it): a file's
    #: path, a GeoDataFrame or a :class:`Tessellation`
    TessellationSource: TypeAlias = str | Path | gpd.GeoDataFrame | Tessellation
else:
    np = lazy_module("numpy")
    shapely = lazy_module("shapely")
    TessellationSource: TypeAlias = Any

#: Columns tried, in order, as the human-readable tile name (case-insensitive).
NAME_CANDIDATES = ("tile_name", "zone", "name", "nhood", "neighborhood", "label")

_SUFFIXES = (".geojson", ".json", ".parquet", ".geoparquet", ".shp", ".zip", ".gpkg")


class Features(NamedTuple):
    """A file's features as read, unchecked: attribute columns (name -> one value per
    feature, None where missing), the geometries (shapely, EPSG:4326) and the name of the
    geometry column (for messages)."""

    columns: dict[str, list[Any]]
    geometries: np.ndarray
    geometry_name: str = "geometry"


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
    if isinstance(source, str | Path):
        key = tessellation_cache.entry_key(Path(source), (id_column, name_column, repair))
        path = Path(source)

        def read_again() -> Tessellation:  # a damaged entry: the file read and checked anew
            return _checked(read_features(path), str(path), id_column, name_column, repair, key)

        cached = None if key is None else tessellation_cache.read_entry(key, read_again)
        if cached is not None:  # this very file, read and checked by an earlier run
            _require_lonlat(cached.bounds, str(source), declared=True)  # an older check's
            return cached if cached.is_deferred else _with_grid(cached)  # deferred: no grid
        return _checked(read_features(path), str(source), id_column, name_column, repair, key)
    label = "tessellation (GeoDataFrame)"
    return _checked(_features_of(source.copy(), label), label, id_column, name_column, repair, None)


def _checked(
    features: Features,
    label: str,
    id_column: str | None,
    name_column: str | None,
    repair: bool,
    key: str | None,
) -> Tessellation:
    """The tiles of ``features`` read from ``label``, every check of
    :func:`load_tessellation` passed; kept in the cache under ``key``."""
    id_col = _pick_id_column(features, id_column, label)
    ids = _normalise_ids(features.columns[id_col], id_col, label)
    name_col = _pick_name_column(features, name_column, id_col, label)
    geoms = _check_geometries(features, ids, id_col, label, repair)
    names = None if name_col is None else [str(v) for v in features.columns[name_col]]
    _check_overlaps(geoms, ids, id_col, label)
    others = {c: v for c, v in features.columns.items() if c != id_col}
    tess = _with_grid(Tessellation.from_tiles(ids, geoms, names, attributes=others))
    if key is not None:
        tessellation_cache.write_entry(key, tess)  # with whether it is a grid
    return tess


def _require_lonlat(bounds: Sequence[float] | np.ndarray, label: str, *, declared: bool) -> None:
    """Refuse tiles whose coordinates cannot be longitude/latitude (metres of a projected CRS
    read as degrees would make every record an outlier, and the release would still be
    charged). ``bounds``: the tiles' (min x, min y, max x, max y); ``declared``: the file
    names a geographic CRS (GeoJSON: EPSG:4326 by default)."""
    min_x, min_y, max_x, max_y = (float(v) for v in bounds)
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
    spec = detect_grid(tess.geometries)
    return tess if spec is None else tess.with_grid(spec)


def _no_features(label: str) -> InputError:
    return InputError(
        "the tessellation has no features",
        source=label,
        hint="give a file with at least one polygon",
    )


def read_features(path: Path) -> Features:
    """The features of a tessellation file, unchecked, in EPSG:4326: a plain GeoJSON file
    with ``json`` and shapely (:func:`_plain_features`), any other through GeoPandas
    (:func:`read_geo_file`); an InputError when the file is missing, empty, of another
    format, unreadable or has no features, or when its coordinates cannot be lng/lat."""
    _check_file(path)
    if path.suffix.lower() in (".geojson", ".json"):
        plain = _plain_features(_plain_geojson(path))
        if plain is not None:  # EPSG:4326, as GeoJSON is
            _require_lonlat(shapely.total_bounds(plain.geometries), str(path), declared=True)
            return plain
    return _features_of(read_geo_file(path), str(path))


def _features_of(gdf: gpd.GeoDataFrame, label: str) -> Features:
    """The features of a GeoDataFrame, in EPSG:4326 (reprojected when it declares another
    CRS, refused when it declares none or a geographic one and its numbers are not lng/lat)."""
    if len(gdf) == 0:
        raise _no_features(label)
    if gdf.crs is None or gdf.crs.is_geographic:
        # no CRS, or a geographic one (GeoJSON is read as EPSG:4326 whatever its numbers):
        # refused, before any data is read, when the numbers cannot be degrees
        _require_lonlat(gdf.total_bounds, label, declared=gdf.crs is not None)
    if gdf.crs is not None and not gdf.crs.equals("EPSG:4326"):
        gdf = gdf.to_crs(4326)
    name = gdf.geometry.name
    columns = {
        str(c): gdf[c].astype(object).where(gdf[c].notna(), None).tolist()
        for c in gdf.columns
        if c != name
    }
    return Features(columns, np.asarray(gdf.geometry.values, dtype=object), str(name))


def _check_file(path: Path) -> None:
    """An InputError when ``path`` is missing, of a format not read, or empty."""
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


def read_geo_file(path: Path) -> gpd.GeoDataFrame:
    """A file of features (GeoJSON, GeoParquet, Shapefile, GeoPackage) as it is, unchecked;
    an InputError when it is missing, empty, of another format or unreadable."""
    import geopandas as gpd

    _check_file(path)
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".geoparquet"):
            return gpd.read_parquet(path)
        if suffix in (".geojson", ".json"):
            feats = _plain_geojson(path)
            if feats is not None:
                try:
                    return gpd.GeoDataFrame.from_features(feats, crs=4326)
                except Exception:  # unusual geometry or properties: let GDAL read (report) it
                    pass
        return gpd.read_file(path)
    except Exception as exc:  # pyogrio / pyarrow errors: report the reader's message
        raise InputError(
            f"cannot read the tessellation: {exc}",
            source=str(path),
            hint="is it a valid GeoJSON / GeoParquet / Shapefile?",
        ) from None


def _plain_geojson(path: Path) -> list[dict[str, Any]] | None:
    """The features of a plain RFC 7946 FeatureCollection (WGS84, no legacy ``crs`` member
    but lng/lat WGS84, at least one feature, properties objects); None for anything else,
    which GDAL then reads (less memory and start-up time than GDAL for the plain ones)."""
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
    return feats


def _plain_features(feats: list[dict[str, Any]] | None) -> Features | None:
    """The features of a plain FeatureCollection's ``feats`` as GeoPandas' ``from_features``
    reads them (a missing geometry is None, a property missing from a feature is None), with
    shapely alone; None when a geometry is not one shapely reads (GDAL then reads the file)."""
    if feats is None:
        return None
    from shapely.geometry import shape

    columns: dict[str, list[Any]] = {}
    geoms: list[Any] = []
    for i, feat in enumerate(feats):
        geometry = feat.get("geometry")
        try:
            geoms.append(shape(geometry) if geometry else None)
        except Exception:  # unusual geometry: let GDAL read (and report) it
            return None
        for k, v in (feat.get("properties") or {}).items():
            if k == "geometry":  # from_features would take it for the geometry
                return None
            columns.setdefault(k, [None] * i).append(v)
        for values in columns.values():
            if len(values) == i:  # not in this feature's properties
                values.append(None)
    return Features(columns, np.asarray(geoms, dtype=object))


def _named_column(
    features: Features,
    column: str,
    role: str,
    label: str,
    *,
    seen: list[str],
    hint: str | None = None,
) -> str:
    """The column the user named for the tiles' ``role`` (id, name), refused with the columns
    ``seen`` unless the tessellation has it."""
    if column not in features.columns:
        raise InputError(
            f"{role} column not found; columns seen: {seen}", source=label, column=column, hint=hint
        )
    return column


def _pick_id_column(features: Features, id_column: str | None, label: str) -> str:
    attrs = list(features.columns)
    if id_column is not None:
        hint = f"pass {spelled('--tile-id', 'tile_id=')} with one of the columns above"
        return _named_column(features, id_column, "id", label, seen=attrs, hint=hint)
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
        hint=f"pass {spelled('--tile-id', 'tile_id=')} naming the column with the tile ids",
    )


def _pick_name_column(
    features: Features, name_column: str | None, id_col: str, label: str
) -> str | None:
    if name_column is not None:
        seen = [*features.columns, features.geometry_name]
        return _named_column(features, name_column, "name", label, seen=seen)
    lower = {c.lower(): c for c in features.columns if c != id_col}
    return next((lower[c.lower()] for c in NAME_CANDIDATES if c.lower() in lower), None)


def _is_null(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _id_values(values: list[Any]) -> np.ndarray:
    """Ids as a column of a table types them: integers (int64) when every id is an integer
    or an integral float, else strings (non-integral numbers as floats: ``2.5``, ``1.0``)."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numbers and all(float(v).is_integer() for v in values):
        try:
            return np.array([int(v) for v in values], dtype=np.int64)
        except OverflowError:
            pass
    strs = [str(float(v)) for v in values] if numbers else [str(v) for v in values]
    return np.array(strs, dtype=object)


def _normalise_ids(col: list[Any], name: str, label: str) -> np.ndarray:
    null = [i for i, v in enumerate(col) if _is_null(v)]
    if null:
        raise InputError(
            f"{len(null)} tile(s) have no id",
            source=label,
            column=name,
            example=f"feature #{null[0]}",
            hint="every tile needs a unique id",
        )
    values = _id_values([_py(v) for v in col])
    counts = Counter(values.tolist())
    dup = [i for i, v in enumerate(values.tolist()) if counts[v] > 1]
    if dup:
        first = _py(values[dup[0]])
        where = np.flatnonzero(values == first)[:2].tolist()
        raise InputError(
            f"duplicate tile id {first!r} (features #{where[0]} and #{where[1]}); "
            f"{sum(1 for n in counts.values() if n > 1)} id(s) are duplicated",
            source=label,
            column=name,
            example=first,
            hint="tile ids must be unique; pick another --tile-id or fix the file",
        )
    return values


def _check_geometries(
    features: Features, ids: np.ndarray, id_col: str, label: str, repair: bool
) -> np.ndarray:
    geoms = features.geometries

    def refuse(bad: np.ndarray, message: Callable[[int, Any], str], hint: str) -> None:
        """An InputError naming the first tile of ``bad``: ``message(how many, its geometry)``."""
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                message(int(bad.sum()), geoms[i]),
                source=label,
                column=features.geometry_name,
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
                f"fix the file, or pass {spelled('--repair', 'repair=True')} to apply make_valid",
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


def _check_overlaps(geoms: np.ndarray, tile_ids: np.ndarray, id_col: str, label: str) -> None:
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
        ids = tile_ids.tolist()
        raise InputError(
            f"{int(over.sum())} pair(s) of tiles overlap; e.g. tiles {ids[a[j]]!r} and "
            f"{ids[b[j]]!r} share {rel[j]:.2%} of the smaller tile's area "
            f"(tolerance {OVERLAP_TOLERANCE:.2%})",
            source=label,
            column=id_col,
            example=f"{id_col}={ids[a[j]]!r} / {id_col}={ids[b[j]]!r}",
            hint="tiles must not overlap (a point must belong to one tile); fix the polygons",
        )
