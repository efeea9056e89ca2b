"""Tessellations: the public spatial domain of every release.

A :class:`Tessellation` is a set of non-overlapping polygons (tiles) in EPSG:4326, each with a
``tile_id`` kept exactly as the user gave it (int or str). Tiles are sorted by ``tile_id`` so
that the *tile index* 0..k-1 is deterministic; the engine works with tile indexes and the
releases map them back to ids. The tessellation is public information: it is never derived
from the private records.

This module holds the :class:`Tessellation` itself (ids, index order, geometry, point
assignment) and the local metric CRS its areas and centroids are computed in. A tessellation
is read and validated by :func:`privmob.data.tessellation_input.load_tessellation` (GeoJSON,
GeoParquet, Shapefile, also zipped, or GeoPackage); a regular grid, whose point assignment is
pure arithmetic, is built or recognised by :mod:`privmob.data.grids`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from privmob.errors import ConfigError, InputError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import geopandas as gpd
    import numpy as np
    import shapely

    from privmob.data.grid_spec import GridSpec
else:  # imported when tiles are built or used, not when a release plans (issue 43)
    np = lazy_module("numpy")
    shapely = lazy_module("shapely")

#: held while the tiles of a deferred tessellation are built (:meth:`Tessellation._build`)
_BUILDING = threading.Lock()
_CHUNK = 4_000_000  # points per sweep (bounds the memory of one pass)
#: Points below which one sweep is not split across threads (a thread's sort and per-tile
#: steps would cost more than they save).
_PARALLEL_MIN = 500_000
#: The sweep's cost has a part per tile (a Python step for each tile); with fewer than this
#: many points per tile an STRtree query is faster (measured on the 10,000 Milan cells: equal
#: at 10-20 points per tile, the sweep 3x faster at 100).
_SWEEP_MIN_PER_TILE = 20


def _mostly_repeated(x: np.ndarray, y: np.ndarray, sample: int = 100_000) -> bool:
    """True when a prefix sample has < 50% distinct coordinates (then deduplicate first)."""
    if len(x) < 2 * sample:
        return False
    import pandas as pd

    xy = np.column_stack([x[:sample], y[:sample]]).view(np.complex128).ravel()
    return len(pd.unique(xy)) < sample // 2


def local_metric_crs(bounds: tuple[float, float, float, float] | np.ndarray) -> str:
    """A metric CRS for geometry inside lng/lat ``bounds`` (minx, miny, maxx, maxy): Lambert
    azimuthal equal-area centred on the box (areas exact, distances within 0.1% over a few
    hundred km). Built from its PROJ string, without a CRS database search (geopandas'
    ``estimate_utm_crs`` costs 0.12-0.23 s per call idle)."""
    x0, y0, x1, y1 = (float(v) for v in bounds)
    return f"+proj=laea +lat_0={(y0 + y1) / 2} +lon_0={(x0 + x1) / 2} +datum=WGS84 +units=m"


def _plain(v: Any) -> Any:
    """An attribute value as JSON holds it: None, bool, int, float or str."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return None if v != v else v  # NaN: missing
    if hasattr(v, "item"):  # a NumPy scalar
        return _plain(v.item())
    return str(v)


class Tiling(Protocol):
    """What a loader assigns records to tile indexes with (its ``tessellation`` argument): a
    :class:`Tessellation`, or another public tiling such as the density release's tower sites.
    What only a :class:`Tessellation` has (``tile_ids`` for an input with a tile-id column,
    ``grid`` for grid arithmetic, ``fingerprint``) is asked for where it is needed
    (:mod:`privmob.data.tile_assignment`)."""

    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """The tile index (int32) of each point; -1 outside every tile."""
        ...


class Tessellation:
    """Tiles (polygons in EPSG:4326) with ids, in a deterministic index order.

    Build one with :func:`~privmob.data.tessellation_input.load_tessellation` (validates),
    :func:`~privmob.data.grids.square_grid` or :meth:`from_tiles`. The constructor takes a
    GeoDataFrame and only normalises it: reprojects it to EPSG:4326 and sorts it by
    ``tile_id``.

    The tiles are held as arrays (ids, shapely polygons, names), not as a GeoDataFrame: reading
    and using a tessellation needs neither pandas nor GeoPandas (which would add about a
    second to every command's start-up); :attr:`gdf` builds the GeoDataFrame on first use.
    """

    def __init__(self, gdf: gpd.GeoDataFrame, *, grid: GridSpec | None = None) -> None:
        if "tile_id" not in gdf.columns:
            raise ConfigError("a Tessellation needs a 'tile_id' column")
        if gdf.crs is not None and not gdf.crs.equals("EPSG:4326"):
            gdf = gdf.to_crs(4326)
        names = gdf["tile_name"].astype(str).tolist() if "tile_name" in gdf.columns else None
        skip = {"tile_id", "tile_name", gdf.geometry.name}
        attrs = {str(c): gdf[c].tolist() for c in gdf.columns if c not in skip}
        self._set(gdf["tile_id"].to_numpy(), gdf.geometry.to_numpy(), names, grid, attrs)

    @classmethod
    def from_tiles(
        cls,
        tile_ids: np.ndarray | Sequence[Any],
        geometries: np.ndarray | Sequence[Any],
        names: Sequence[str] | None = None,
        *,
        grid: GridSpec | None = None,
        attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> Tessellation:
        """The tessellation of ``tile_ids`` (ints or strs), their polygons (shapely, EPSG:4326)
        and optional ``names``, as they are (no check; sorted by id unless ``grid``);
        ``attributes``: the file's other public columns (one value per tile, e.g. a zone's
        ``borough``: :meth:`attribute`)."""
        tess = cls.__new__(cls)
        ids = np.asarray(tile_ids)
        if ids.dtype.kind not in "iu":
            ids = np.asarray(tile_ids, dtype=object)
        tess._set(ids, np.asarray(geometries, dtype=object), names, grid, attributes)
        return tess

    def _set(
        self,
        ids: np.ndarray,
        geoms: np.ndarray,
        names: Sequence[str] | None,
        grid: GridSpec | None,
        attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        """Hold the tiles in index order: as given for a grid, else sorted by tile id."""
        if len(ids) != len(geoms) or (names is not None and len(names) != len(ids)):
            raise ConfigError("a Tessellation needs one id, polygon (and name) per tile")
        if any(len(v) != len(ids) for v in (attributes or {}).values()):
            raise ConfigError("a Tessellation needs one value of each attribute per tile")
        order = np.arange(len(ids)) if grid is not None else np.argsort(ids, kind="stable")
        self._ids = ids[order]
        self._geoms = np.asarray(geoms, dtype=object)[order]
        self._names = None if names is None else [str(names[i]) for i in order]
        self._attributes = {
            str(c): [_plain(v[i]) for i in order] for c, v in (attributes or {}).items()
        }
        self._grid = grid
        self._gdf: gpd.GeoDataFrame | None = None
        self._prepared: tuple[np.ndarray, np.ndarray] | None = None
        self._index: dict[Any, int] | None = None
        self._fingerprint: str | None = None

    @classmethod
    def deferred(
        cls,
        k: int,
        bounds: tuple[float, float, float, float],
        build: Callable[[], Tessellation],
    ) -> Tessellation:
        """A tessellation of ``k`` tiles within ``bounds`` whose tiles ``build`` makes on first
        use (the tessellation cache's entries: a release's plan needs the number of tiles
        only, and is printed before NumPy and shapely are imported, issue 43)."""
        tess = cls.__new__(cls)
        tess.__dict__["_deferred"] = (k, tuple(float(b) for b in bounds), build)
        return tess

    @property
    def is_deferred(self) -> bool:
        """True while the tiles of a :meth:`deferred` tessellation are not built yet."""
        return self.__dict__.get("_deferred") is not None

    def _build(self) -> None:
        """Build the tiles of a deferred tessellation (nothing for any other); once, whichever
        thread asks first (the others wait for it)."""
        with _BUILDING:
            deferred = self.__dict__.get("_deferred")
            if deferred is not None:
                self.__dict__.update(deferred[2]().__dict__)
                del self.__dict__["_deferred"]  # after the tiles are set: no thread misses them

    if not TYPE_CHECKING:  # only for the attributes a deferred tessellation has not set yet

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") or self.__dict__.get("_deferred") is None:
                raise AttributeError(name)
            self._build()
            return getattr(self, name)

    def __getstate__(self) -> dict[str, Any]:  # pickled (or copied) with its tiles built
        self._build()
        return self.__dict__

    def with_grid(self, grid: GridSpec) -> Tessellation:
        """The same tiles with the arithmetic assignment of ``grid`` (tile ``i`` is its cell
        ``i``: :func:`privmob.data.grids.detect_grid`)."""
        return Tessellation.from_tiles(
            self._ids, self._geoms, self._names, grid=grid, attributes=self._attributes
        )

    # -- basic properties -------------------------------------------------------------------
    @classmethod
    def from_grid(cls, spec: GridSpec) -> Tessellation:
        """The tessellation of a regular grid; :meth:`assign` then uses arithmetic."""
        lng0, lng1 = spec.lng_edges[:-1], spec.lng_edges[1:]
        lat0, lat1 = spec.lat_edges[:-1], spec.lat_edges[1:]
        rows, cols = np.divmod(np.arange(spec.nrows * spec.ncols), spec.ncols)
        geoms = shapely.box(lng0[cols], lat0[rows], lng1[cols], lat1[rows])
        return cls.from_tiles(np.arange(len(geoms), dtype=np.int64), geoms, grid=spec)

    @property
    def gdf(self) -> gpd.GeoDataFrame:
        """Columns tile_id [, tile_name], geometry; row i is tile index i (a GeoDataFrame,
        built on first use)."""
        if self._gdf is None:
            import geopandas as gpd

            cols: dict[str, Any] = {"tile_id": self._ids}
            if self._names is not None:
                cols["tile_name"] = self._names
            self._gdf = gpd.GeoDataFrame(cols, geometry=self._geoms, crs=4326)
        return self._gdf

    @property
    def geometries(self) -> np.ndarray:
        """The tiles' polygons (shapely, EPSG:4326) in index order."""
        return self._geoms

    @property
    def k(self) -> int:
        """Number of tiles."""
        deferred = self.__dict__.get("_deferred")
        return int(deferred[0]) if deferred is not None else len(self._ids)

    @property
    def tile_ids(self) -> list[Any]:
        """Tile ids in index order (Python ints or strs)."""
        ids: list[Any] = self._ids.tolist()
        return ids

    @property
    def fingerprint(self) -> str:
        """A digest of the tile ids and geometries (in index order): two tessellations with
        the same fingerprint assign every point to the same tile index."""
        if self._fingerprint is None:
            import hashlib

            h = hashlib.sha256()
            for tid, geom in zip(self.tile_ids, shapely.to_wkb(self._geoms), strict=True):
                h.update(repr(tid).encode())
                h.update(geom)
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    @property
    def tile_names(self) -> list[str] | None:
        return None if self._names is None else list(self._names)

    @property
    def attributes(self) -> dict[str, list[Any]]:
        """The tessellation file's other columns (public, one value per tile in index order;
        None where a tile has none): what a hierarchy of zones groups the tiles by
        (:mod:`privmob.releases.hierarchy`)."""
        return {c: list(v) for c, v in self._attributes.items()}

    @property
    def grid(self) -> GridSpec | None:
        """The grid spec when this is a regular grid (fast arithmetic assignment)."""
        return self._grid

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(min_lng, min_lat, max_lng, max_lat) of all tiles."""
        deferred = self.__dict__.get("_deferred")
        if deferred is not None:
            x0, y0, x1, y1 = deferred[1]
            return (float(x0), float(y0), float(x1), float(y1))
        b = shapely.total_bounds(self._geoms)
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
        import pandas as pd

        ids = pd.Index(self._ids)
        return np.asarray(ids.get_indexer(pd.Index(np.asarray(tile_ids))), dtype=np.int32)

    # -- geometry ---------------------------------------------------------------------------
    def centroids(self) -> np.ndarray:
        """(k, 2) array of tile centroids as lng, lat (computed in a local metric projection)."""
        local = self.gdf.geometry.to_crs(self._local_crs())
        c = local.centroid.to_crs(4326)
        return np.column_stack([c.x.to_numpy(), c.y.to_numpy()])

    def areas_m2(self) -> np.ndarray:
        """Tile areas in square metres (Lambert azimuthal equal-area centred on the tiles)."""
        return np.asarray(self.gdf.geometry.to_crs(self._local_crs()).area.to_numpy())

    def _local_crs(self) -> str:
        return local_metric_crs(self.bounds)

    def to_geojson_dict(self) -> dict[str, Any]:
        """A GeoJSON FeatureCollection with properties tile_id, tile_index [, tile_name]."""
        g = self.gdf.copy()
        g.insert(1, "tile_index", np.arange(self.k))
        collection: dict[str, Any] = json.loads(g.to_json(drop_id=True))
        return collection

    # -- point assignment -------------------------------------------------------------------
    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Tile index (int32) of each point; -1 when outside all tiles or NaN.

        A point on a border shared by several tiles goes to the smallest tile index among
        them (deterministic). Vectorised: a regular grid uses arithmetic; otherwise distinct
        coordinates (deduplicated when they repeat a lot) are swept against the prepared tile
        polygons in chunks of at most 4M points, on every core (:meth:`_sweep_chunks`), or,
        with fewer than 20 points per tile, queried in one STRtree query.
        ``benchmarks/bench_tile_assignment.py`` compares the sweep with shapely's
        ``STRtree.query(points, predicate="intersects")``.
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
            import pandas as pd

            codes, uniq = pd.factorize(np.column_stack([x, y]).view(np.complex128).ravel())
            u = np.asarray(uniq, dtype=np.complex128)
            x, y, inverse = u.real.copy(), u.imag.copy(), codes
        tiles = np.empty(len(x), dtype=np.int32)
        if len(x) < _SWEEP_MIN_PER_TILE * self.k:
            tiles[:] = self._query(x, y)
        else:
            self._sweep_chunks(x, y, tiles)
        out[ok] = tiles if inverse is None else tiles[inverse]
        return out

    def _sweep_chunks(self, x: np.ndarray, y: np.ndarray, tiles: np.ndarray) -> None:
        """:meth:`_sweep` over chunks of the points (at most 4M points at a time in all, to
        bound memory), as many at a time as the process has cores: GEOS and NumPy's sort
        release the GIL, and each point's tile depends on that point alone, so the result is
        the same. Each thread tests against its own prepared copy of the polygons: a GEOS
        prepared geometry builds its indexes lazily, on first use, and is not safe to share
        between threads."""
        import queue
        from concurrent.futures import ThreadPoolExecutor

        from privmob.cores import usable_cores

        workers = max(1, min(usable_cores(), len(x) // _PARALLEL_MIN))
        # a multiple of the threads, so that they finish together, with at most _CHUNK points
        # in flight across them, as on one thread (the memory the out-of-core plans count on)
        n_chunks = workers * -(-len(x) // _CHUNK)
        size = -(-len(x) // n_chunks)
        starts = range(0, len(x), size)
        if workers == 1:
            for s in starts:
                tiles[s : s + size] = self._sweep(x[s : s + size], y[s : s + size])
            return
        free: queue.SimpleQueue[tuple[np.ndarray, np.ndarray]] = queue.SimpleQueue()
        free.put(self._prepare())
        for _ in range(workers - 1):
            free.put(self._prepare(copy=True))

        def one(s: int) -> None:
            prepared = free.get()  # a copy no other thread is using
            try:
                tiles[s : s + size] = self._sweep(x[s : s + size], y[s : s + size], prepared)
            finally:
                free.put(prepared)

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, starts))

    def _query(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Point-in-polygon by one STRtree query (few points per tile): the same rule as
        :meth:`_sweep`, borders inside and the smallest tile index for a shared border."""
        tree = shapely.STRtree(self._geoms)
        point, tile = tree.query(shapely.points(x, y), predicate="intersects")
        none = np.iinfo(np.int32).max
        res = np.full(len(x), none, dtype=np.int32)
        np.minimum.at(res, point, tile.astype(np.int32))
        res[res == none] = -1
        return res

    def _sweep(
        self,
        x: np.ndarray,
        y: np.ndarray,
        prepared: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Point-in-polygon by a sweep over longitude-sorted points.

        For each tile (in index order) the points inside its bounding box are a contiguous
        slice of the sorted longitudes filtered on latitude; those are tested with the
        prepared polygon (GEOS ``intersects_xy``: borders count as inside). A point already
        matched keeps its smaller tile index. ``prepared``: the polygons of :meth:`_prepare`
        (default: this tessellation's own).
        """
        geoms, b = prepared or self._prepare()
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

    def _prepare(self, copy: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The tile polygons prepared for repeated point tests, and their bounds (made once);
        ``copy``: a new prepared copy (new GEOS objects, the same coordinates), not kept."""
        if self._prepared is None or copy:
            geoms = self._geoms
            geoms = shapely.from_wkb(shapely.to_wkb(geoms)) if copy else geoms.copy()
            shapely.prepare(geoms)
            if copy:
                return geoms, shapely.bounds(geoms)
            self._prepared = (geoms, shapely.bounds(geoms))
        return self._prepared

    def __repr__(self) -> str:
        kind = "grid" if self._grid is not None else "polygons"
        return f"Tessellation(k={self.k}, {kind}, bounds={tuple(round(b, 5) for b in self.bounds)})"
