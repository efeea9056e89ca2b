"""Tessellations: the public spatial domain of every release.

A :class:`Tessellation` is a set of non-overlapping polygons (tiles) in EPSG:4326, each with a
``tile_id`` kept exactly as the user gave it (int or str). Tiles are sorted by ``tile_id`` so
that the *tile index* 0..k-1 is deterministic; the engine works with tile indexes and the
releases map them back to ids. The tessellation is public information: it is never derived
from the private records.

:func:`load_tessellation` reads GeoJSON, GeoParquet, Shapefile (also zipped) or GeoPackage and
validates it (see its docstring for the rules); :func:`square_grid` builds a regular grid whose
point assignment is pure arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from privmob.errors import ConfigError, InputError

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
NAME_CANDIDATES = ("tile_name", "zone", "name", "nhood", "neighborhood", "label")

_SUFFIXES = (".geojson", ".json", ".parquet", ".geoparquet", ".shp", ".zip", ".gpkg")
_CHUNK = 4_000_000  # points per sweep (bounds the memory of one pass)
#: The sweep's cost has a part per tile (a Python step for each tile); with fewer than this
#: many points per tile an STRtree query is faster (measured on the 10,000 Milan cells: equal
#: at 10-20 points per tile, the sweep 3x faster at 100).
_SWEEP_MIN_PER_TILE = 20


def _mostly_repeated(x: np.ndarray, y: np.ndarray, sample: int = 100_000) -> bool:
    """True when a prefix sample has < 50% distinct coordinates (then deduplicate first)."""
    if len(x) < 2 * sample:
        return False
    xy = np.column_stack([x[:sample], y[:sample]]).view(np.complex128).ravel()
    return len(pd.unique(xy)) < sample // 2


@dataclass(frozen=True)
class GridSpec:
    """A regular lng/lat grid: cell (row, col) spans lng_edges[col:col+2] x lat_edges[row:row+2].

    The tile id (and index) of cell (row, col) is ``row * ncols + col``; row 0 is the south.
    """

    lng_edges: np.ndarray
    lat_edges: np.ndarray

    @property
    def nrows(self) -> int:
        return len(self.lat_edges) - 1

    @property
    def ncols(self) -> int:
        return len(self.lng_edges) - 1

    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Arithmetic point-in-cell; a point on a shared edge goes to the lower row/column."""
        col = _edge_bin(self.lng_edges, lng)
        row = _edge_bin(self.lat_edges, lat)
        out = row.astype(np.int64) * self.ncols + col
        out[(col < 0) | (row < 0)] = -1
        return out.astype(np.int32)


def _edge_bin(edges: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bin of x among sorted edges: bin i is (edges[i], edges[i+1]], bin 0 closed; -1 outside.

    A value equal to an inner edge falls into the lower bin (the smaller tile index), as in
    the polygon path; the edges are the same floats the cell polygons are built from.
    """
    b = np.searchsorted(edges, x, side="left") - 1
    b[x == edges[0]] = 0
    b[(b < 0) | (b >= len(edges) - 1) | np.isnan(x)] = -1
    return b


def local_metric_crs(bounds: tuple[float, float, float, float] | np.ndarray) -> str:
    """A metric CRS for geometry inside lng/lat ``bounds`` (minx, miny, maxx, maxy): Lambert
    azimuthal equal-area centred on the box (areas exact, distances within 0.1% over a few
    hundred km). Built from its PROJ string, without a CRS database search (geopandas'
    ``estimate_utm_crs`` costs 0.12-0.23 s per call idle)."""
    x0, y0, x1, y1 = (float(v) for v in bounds)
    return f"+proj=laea +lat_0={(y0 + y1) / 2} +lon_0={(x0 + x1) / 2} +datum=WGS84 +units=m"


class Tessellation:
    """Tiles (polygons in EPSG:4326) with ids, in a deterministic index order.

    Build one with :func:`load_tessellation` (validates) or :func:`square_grid`. The
    constructor itself only normalises: sorts by ``tile_id``, resets the index, sets the CRS.
    """

    def __init__(self, gdf: gpd.GeoDataFrame, *, grid: GridSpec | None = None) -> None:
        if "tile_id" not in gdf.columns:
            raise ConfigError("a Tessellation needs a 'tile_id' column")
        gdf = gdf.copy()
        if gdf.crs is None:
            gdf = gdf.set_crs(4326)
        elif not gdf.crs.equals("EPSG:4326"):
            gdf = gdf.to_crs(4326)
        if grid is None:
            gdf = gdf.sort_values("tile_id", kind="stable")
        gdf = gdf.reset_index(drop=True)
        cols = ["tile_id"] + (["tile_name"] if "tile_name" in gdf.columns else [])
        self._gdf = gpd.GeoDataFrame(gdf[cols], geometry=gdf.geometry.values, crs=4326)
        self._grid = grid
        self._prepared: tuple[np.ndarray, np.ndarray] | None = None
        self._index: dict[Any, int] | None = None
        self._fingerprint: str | None = None

    # -- basic properties -------------------------------------------------------------------
    @classmethod
    def from_grid(cls, spec: GridSpec) -> Tessellation:
        """The tessellation of a regular grid; :meth:`assign` then uses arithmetic."""
        lng0, lng1 = spec.lng_edges[:-1], spec.lng_edges[1:]
        lat0, lat1 = spec.lat_edges[:-1], spec.lat_edges[1:]
        rows, cols = np.divmod(np.arange(spec.nrows * spec.ncols), spec.ncols)
        geoms = shapely.box(lng0[cols], lat0[rows], lng1[cols], lat1[rows])
        gdf = gpd.GeoDataFrame(
            {"tile_id": np.arange(len(geoms), dtype=np.int64)}, geometry=geoms, crs=4326
        )
        return cls(gdf, grid=spec)

    @property
    def gdf(self) -> gpd.GeoDataFrame:
        """Columns tile_id [, tile_name], geometry; row i is tile index i."""
        return self._gdf

    @property
    def k(self) -> int:
        """Number of tiles."""
        return len(self._gdf)

    @property
    def tile_ids(self) -> list[Any]:
        """Tile ids in index order (Python ints or strs)."""
        return self._gdf["tile_id"].tolist()

    @property
    def fingerprint(self) -> str:
        """A digest of the tile ids and geometries (in index order): two tessellations with
        the same fingerprint assign every point to the same tile index."""
        if self._fingerprint is None:
            import hashlib

            h = hashlib.sha256()
            for tid, geom in zip(self.tile_ids, self._gdf.geometry.to_wkb(), strict=True):
                h.update(repr(tid).encode())
                h.update(geom)
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    @property
    def tile_names(self) -> list[str] | None:
        return self._gdf["tile_name"].astype(str).tolist() if "tile_name" in self._gdf else None

    @property
    def grid(self) -> GridSpec | None:
        """The grid spec when this is a regular grid (fast arithmetic assignment)."""
        return self._grid

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(min_lng, min_lat, max_lng, max_lat) of all tiles."""
        b = self._gdf.total_bounds
        return (float(b[0]), float(b[1]), float(b[2]), float(b[3]))

    def index_of(self, tile_id: Any) -> int:
        """The tile index of ``tile_id``; InputError if unknown."""
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.tile_ids)}
        try:
            return self._index[tile_id]
        except KeyError:
            raise InputError(
                f"unknown tile id {tile_id!r}",
                column="tile_id",
                example=self.tile_ids[:5],
                hint="tile ids must match the tessellation's ids (shown: the first five)",
            ) from None

    def indexes_of(self, tile_ids: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Vectorised :meth:`index_of`: int32 indexes, -1 for ids not in the tessellation."""
        ids = pd.Index(self._gdf["tile_id"])
        return ids.get_indexer(pd.Index(np.asarray(tile_ids))).astype(np.int32)

    # -- geometry ---------------------------------------------------------------------------
    def centroids(self) -> np.ndarray:
        """(k, 2) array of tile centroids as lng, lat (computed in a local metric projection)."""
        local = self._gdf.geometry.to_crs(self._local_crs())
        c = local.centroid.to_crs(4326)
        return np.column_stack([c.x.to_numpy(), c.y.to_numpy()])

    def areas_m2(self) -> np.ndarray:
        """Tile areas in square metres (Lambert azimuthal equal-area centred on the tiles)."""
        return self._gdf.geometry.to_crs(self._local_crs()).area.to_numpy()

    def _local_crs(self) -> str:
        return local_metric_crs(self.bounds)

    def to_geojson_dict(self) -> dict[str, Any]:
        """A GeoJSON FeatureCollection with properties tile_id, tile_index [, tile_name]."""
        g = self._gdf.copy()
        g.insert(1, "tile_index", np.arange(self.k))
        return json.loads(g.to_json(drop_id=True))

    # -- point assignment -------------------------------------------------------------------
    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Tile index (int32) of each point; -1 when outside all tiles or NaN.

        A point on a border shared by several tiles goes to the smallest tile index among
        them (deterministic). Vectorised: a regular grid uses arithmetic; otherwise distinct
        coordinates (deduplicated when they repeat a lot) are swept against the prepared tile
        polygons in chunks of 4M points (one idle core: ~2M points/s for the 263 NYC taxi
        zones, ~1M points/s for the 10,000 Milan cells), or, with fewer than 20 points per
        tile, queried in one STRtree query. ``benchmarks/bench_tile_assignment.py`` compares
        the sweep with shapely's ``STRtree.query(points, predicate="intersects")``.
        """
        lng = np.ascontiguousarray(lng, dtype=np.float64)
        lat = np.ascontiguousarray(lat, dtype=np.float64)
        if lng.shape != lat.shape:
            raise ConfigError("assign: lng and lat must have the same shape")
        if self._grid is not None:
            return self._grid.assign(lng, lat)
        out = np.full(lng.shape, -1, dtype=np.int32)
        ok = ~(np.isnan(lng) | np.isnan(lat))
        if not ok.any():
            return out
        x, y = lng[ok], lat[ok]
        inverse = None
        if _mostly_repeated(x, y):  # stops, towers, centroids: query each place once
            codes, uniq = pd.factorize(np.column_stack([x, y]).view(np.complex128).ravel())
            u = np.asarray(uniq, dtype=np.complex128)
            x, y, inverse = u.real.copy(), u.imag.copy(), codes
        tiles = np.empty(len(x), dtype=np.int32)
        query = self._query if len(x) < _SWEEP_MIN_PER_TILE * self.k else self._sweep
        for s in range(0, len(x), _CHUNK):
            tiles[s : s + _CHUNK] = query(x[s : s + _CHUNK], y[s : s + _CHUNK])
        out[ok] = tiles if inverse is None else tiles[inverse]
        return out

    def _query(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Point-in-polygon by one STRtree query (few points per tile): the same rule as
        :meth:`_sweep`, borders inside and the smallest tile index for a shared border."""
        tree = shapely.STRtree(self._gdf.geometry.values)
        point, tile = tree.query(shapely.points(x, y), predicate="intersects")
        none = np.iinfo(np.int32).max
        res = np.full(len(x), none, dtype=np.int32)
        np.minimum.at(res, point, tile.astype(np.int32))
        res[res == none] = -1
        return res

    def _sweep(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Point-in-polygon by a sweep over longitude-sorted points.

        For each tile (in index order) the points inside its bounding box are a contiguous
        slice of the sorted longitudes filtered on latitude; those are tested with the
        prepared polygon (GEOS ``intersects_xy``: borders count as inside). A point already
        matched keeps its smaller tile index.
        """
        if self._prepared is None:
            geoms = np.asarray(self._gdf.geometry.values, dtype=object).copy()
            shapely.prepare(geoms)
            self._prepared = (geoms, shapely.bounds(geoms))
        geoms, b = self._prepared
        order = np.argsort(x, kind="stable")
        sx, sy = x[order], y[order]
        res = np.full(len(x), -1, dtype=np.int32)
        lo = np.searchsorted(sx, b[:, 0], side="left")
        hi = np.searchsorted(sx, b[:, 2], side="right")
        for j in np.flatnonzero(hi > lo):
            s = lo[j]
            ys = sy[s : hi[j]]
            idx = np.flatnonzero((ys >= b[j, 1]) & (ys <= b[j, 3])) + s
            idx = idx[res[idx] < 0]
            if len(idx):
                res[idx[shapely.intersects_xy(geoms[j], sx[idx], sy[idx])]] = j
        out = np.empty(len(x), dtype=np.int32)
        out[order] = res
        return out

    def __repr__(self) -> str:
        kind = "grid" if self._grid is not None else "polygons"
        return f"Tessellation(k={self.k}, {kind}, bounds={tuple(round(b, 5) for b in self.bounds)})"


# -- grids --------------------------------------------------------------------------------
_M_PER_DEG_LAT = 111_320.0


def square_grid(bounds: Sequence[float], cell_size_m: float) -> Tessellation:
    """A regular grid of ~square cells of ``cell_size_m`` metres covering ``bounds``.

    ``bounds`` = (min_lng, min_lat, max_lng, max_lat). Cells are rectangles in lng/lat whose
    sides measure ``cell_size_m`` at the grid's middle latitude (spherical approximation).
    Tile ids are integers ``row * ncols + col`` (row 0 = south, col 0 = west), equal to the
    tile index, so :meth:`Tessellation.assign` is arithmetic (tens of millions of points/s).
    The grid starts at (min_lng, min_lat) and may extend past max_lng/max_lat by < 1 cell.
    """
    try:
        x0, y0, x1, y1 = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ConfigError(
            f"bounds must be (min_lng, min_lat, max_lng, max_lat), got {bounds!r}"
        ) from None
    if not (-180 <= x0 < x1 <= 180 and -90 <= y0 < y1 <= 90):
        raise ConfigError(
            f"bounds must be (min_lng, min_lat, max_lng, max_lat) in degrees, got {bounds!r}"
        )
    if not cell_size_m > 0:
        raise ConfigError(f"cell_size_m must be > 0, got {cell_size_m!r}")
    dlat = cell_size_m / _M_PER_DEG_LAT
    dlng = dlat / np.cos(np.radians((y0 + y1) / 2))
    ncols = max(1, int(np.ceil((x1 - x0) / dlng - 1e-9)))
    nrows = max(1, int(np.ceil((y1 - y0) / dlat - 1e-9)))
    if ncols * nrows > 5_000_000:
        raise ConfigError(
            f"a {cell_size_m} m grid over {bounds} has {ncols * nrows:,} cells (max 5,000,000)",
            hint="use a larger cell size",
        )
    spec = GridSpec(x0 + dlng * np.arange(ncols + 1), y0 + dlat * np.arange(nrows + 1))
    return Tessellation.from_grid(spec)


def grid_with_about(bounds: Sequence[float], n_cells: int) -> Tessellation:
    """A :func:`square_grid` over ``bounds`` with a cell size chosen to give ~``n_cells``."""
    x0, y0, x1, y1 = bounds
    w = (x1 - x0) * _M_PER_DEG_LAT * np.cos(np.radians((y0 + y1) / 2))
    h = (y1 - y0) * _M_PER_DEG_LAT
    return square_grid(bounds, float(np.sqrt(w * h / max(1, n_cells))) * 1.0001)


# -- loading and validation ------------------------------------------------------------------
def load_tessellation(
    source: str | Path | gpd.GeoDataFrame | Tessellation,
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
    if isinstance(source, gpd.GeoDataFrame):
        gdf, label = source.copy(), "tessellation (GeoDataFrame)"
    else:
        gdf, label = _read(Path(source)), str(source)
    if len(gdf) == 0:
        raise InputError(
            "the tessellation has no features",
            source=label,
            hint="give a file with at least one polygon",
        )
    if gdf.crs is None:
        min_x, min_y, max_x, max_y = gdf.total_bounds
        if not (-180 <= min_x <= max_x <= 180 and -90 <= min_y <= max_y <= 90):
            raise InputError(
                "the tessellation has no coordinate reference system and its coordinates are "
                "not longitude/latitude",
                source=label,
                hint="declare its CRS (GeoPandas: gdf.set_crs('EPSG:...'); a Shapefile: its "
                ".prj file)",
            )
        gdf = gdf.set_crs(4326)  # no CRS, longitude/latitude values: WGS84, as GeoJSON is
    elif not gdf.crs.equals("EPSG:4326"):
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
    spec = detect_grid(tess.gdf)
    return tess if spec is None else Tessellation(tess.gdf, grid=spec)


def detect_grid(gdf: gpd.GeoDataFrame) -> GridSpec | None:
    """The :class:`GridSpec` of valid tiles that are exactly the cells of a lng/lat grid.

    Decided from the geometry alone: every tile (in index order) must be an axis-aligned
    rectangle (a polygon with 4 vertices, all corners of its bounding box, no holes) and tile
    ``i`` must be cell ``(row, col)`` with ``i = row * ncols + col`` (row 0 south, col 0 west)
    of the grid whose edges are the distinct x and y bounds, with every cell present. Then
    the smallest tile index among the tiles whose closed rectangle holds a point is the lower
    row / lower column, so :meth:`GridSpec.assign` gives what the polygon path gives, point
    by point (borders and corners included). Otherwise None (the polygon path is used).
    """
    geoms = np.asarray(gdf.geometry.values, dtype=object)
    k = len(geoms)
    if k == 0 or not np.all(shapely.get_type_id(geoms) == 3):
        return None
    if np.any(shapely.get_num_interior_rings(geoms) != 0):
        return None
    if np.any(shapely.get_num_coordinates(geoms) != 5):
        return None
    b = shapely.bounds(geoms)
    xs = np.unique(np.concatenate([b[:, 0], b[:, 2]]))
    ys = np.unique(np.concatenate([b[:, 1], b[:, 3]]))
    ncols, nrows = len(xs) - 1, len(ys) - 1
    if ncols < 1 or nrows < 1 or ncols * nrows != k:
        return None
    col = np.searchsorted(xs, b[:, 0])
    row = np.searchsorted(ys, b[:, 1])
    if not (
        np.all(col < ncols)
        and np.all(row < nrows)
        and np.array_equal(row * ncols + col, np.arange(k))
        and np.array_equal(xs[np.minimum(col + 1, ncols)], b[:, 2])
        and np.array_equal(ys[np.minimum(row + 1, nrows)], b[:, 3])
    ):
        return None
    # the 4 ring vertices are the 4 distinct corners of the bounding box
    closed = shapely.get_coordinates(shapely.get_exterior_ring(geoms)).reshape(k, 5, 2)
    step = np.diff(closed, axis=1) != 0  # each side moves along exactly one axis
    if not np.all(step[:, :, 0] ^ step[:, :, 1]):
        return None
    ring = closed[:, :4]
    on_x = (ring[:, :, 0] == b[:, [0]]) | (ring[:, :, 0] == b[:, [2]])
    on_y = (ring[:, :, 1] == b[:, [1]]) | (ring[:, :, 1] == b[:, [3]])
    if not (on_x.all() and on_y.all()):
        return None
    corner = (ring[:, :, 0] == b[:, [2]]).astype(np.int8) * 2 + (ring[:, :, 1] == b[:, [3]])
    if not np.all(np.sort(corner, axis=1) == np.arange(4)):
        return None
    return GridSpec(xs, ys)


def _read(path: Path) -> gpd.GeoDataFrame:
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


def _pick_id_column(gdf: gpd.GeoDataFrame, id_column: str | None, label: str) -> str:
    attrs = [c for c in gdf.columns if c != gdf.geometry.name]
    if id_column is not None:
        if id_column not in gdf.columns:
            raise InputError(
                f"id column not found; columns seen: {attrs}",
                source=label,
                column=id_column,
                hint="pass --tile-id with one of the columns above",
            )
        return id_column
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
        if name_column not in gdf.columns:
            raise InputError(
                f"name column not found; columns seen: {list(gdf.columns)}",
                source=label,
                column=name_column,
            )
        return name_column
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
    gcol = gdf.geometry.name
    missing = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise InputError(
            f"{int(missing.sum())} tile(s) have no geometry",
            source=label,
            column=gcol,
            example=f"{id_col}={_py(ids[i])!r}",
            hint="every tile needs a polygon",
        )
    kinds = shapely.get_type_id(geoms)
    bad = ~np.isin(kinds, (3, 6))  # Polygon, MultiPolygon
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{int(bad.sum())} tile(s) are not polygons (e.g. a {geoms[i].geom_type})",
            source=label,
            column=gcol,
            example=f"{id_col}={_py(ids[i])!r}",
            hint="a tessellation holds Polygon or MultiPolygon features only",
        )
    valid = shapely.is_valid(geoms)
    if not valid.all():
        if not repair:
            i = int(np.flatnonzero(~valid)[0])
            raise InputError(
                f"{int((~valid).sum())} invalid polygon(s): {shapely.is_valid_reason(geoms[i])}",
                source=label,
                column=gcol,
                example=f"{id_col}={_py(ids[i])!r}",
                hint="fix the file, or pass --repair (Python: repair=True) to apply make_valid",
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
