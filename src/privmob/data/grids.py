"""Regular lng/lat grids, whose point assignment is arithmetic: the :class:`GridSpec` (cell
edges, point-in-cell by binary search), :func:`detect_grid`, which recognises a tessellation
whose tiles are exactly the cells of one, and :func:`square_grid` / :func:`grid_with_about`,
which build a grid of ~square cells over a lng/lat box.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from privmob.data.grid_spec import GridSpec
from privmob.data.tessellation import Tessellation
from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import shapely
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")
    shapely = lazy_module("shapely")


def detect_grid(geometries: Sequence[shapely.Geometry] | np.ndarray) -> GridSpec | None:
    """The :class:`GridSpec` of valid tiles (their polygons in index order) that are exactly
    the cells of a lng/lat grid.

    Decided from the geometry alone: every tile (in index order) must be an axis-aligned
    rectangle (a polygon with 4 vertices, all corners of its bounding box, no holes) and tile
    ``i`` must be cell ``(row, col)`` with ``i = row * ncols + col`` (row 0 south, col 0 west)
    of the grid whose edges are the distinct x and y bounds, with every cell present. Then
    the smallest tile index among the tiles whose closed rectangle holds a point is the lower
    row / lower column, so :meth:`GridSpec.assign` gives what the polygon path gives, point
    by point (borders and corners included). Otherwise None (the polygon path is used).
    """
    geoms = np.asarray(geometries, dtype=object)
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
