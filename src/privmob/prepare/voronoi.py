"""Cells (towers) to zones by Voronoi area shares (SPEC section 2; seed 004, formula 1).

The Voronoi cell of each tower is built by privmob (``shapely.voronoi_polygons``), clipped to
the study area (by default the union of the zones), and intersected with every zone:

    share[t, z] = area(voronoi(t) ∩ zone z) / area(voronoi(t) ∩ study area)

computed in a local Lambert azimuthal equal-area projection. The last column holds the part of a
tower's cell outside every zone (the outliers cell), so every row sums to 1. Towers at the same
position share one Voronoi cell (each gets the cell's shares).

Privacy: mapping tower counts x to zone counts y = S^T x is linear with non-negative rows that
sum to 1, so ||S^T (x - x')||_1 <= ||x - x'||_1: it keeps L1 sensitivity. privmob applies it
*after* the noise (noisy integer tower counts, then shares: post-processing, no extra cost, and
the published zone values are fractional); applying it to exact counts before noise would need
real-valued noise. Trips keep the containing zone of each tower (shares would turn one trip into
fractional trips between several zone pairs); presence-type counts (population, density) can
use shares. Towers and zones are public; no record is read here.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import shapely

from privmob.errors import InputError


def _zones_gdf(zones: Any) -> gpd.GeoDataFrame:
    gdf = zones.gdf if hasattr(zones, "gdf") else zones
    if not isinstance(gdf, gpd.GeoDataFrame):
        raise InputError("zones must be a Tessellation or a GeoDataFrame")
    return gdf.to_crs(4326) if gdf.crs is not None else gdf.set_crs(4326)


def local_equal_area_crs(bounds: tuple[float, float, float, float]) -> str:
    x0, y0, x1, y1 = bounds
    return f"+proj=laea +lat_0={(y0 + y1) / 2} +lon_0={(x0 + x1) / 2} +datum=WGS84 +units=m"


def tower_voronoi(
    lng: np.ndarray, lat: np.ndarray, zones: Any, study_area: Any = None
) -> gpd.GeoDataFrame:
    """Voronoi cells of the towers clipped to the study area, one row per tower (EPSG:4326).

    Raises InputError for towers without finite coordinates.
    """
    lng = np.asarray(lng, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    bad = ~(np.isfinite(lng) & np.isfinite(lat))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{int(bad.sum())} tower(s) have no valid coordinates (first: row {i})",
            column="lat/lng",
            hint="every tower needs lat and lng to build its Voronoi cell",
        )
    if lng.size == 0:
        raise InputError("no towers given")
    zg = _zones_gdf(zones)
    crs = local_equal_area_crs(tuple(float(v) for v in zg.total_bounds))  # type: ignore[arg-type]
    zl = zg.to_crs(crs)
    area = (
        shapely.union_all(zl.geometry.values)
        if study_area is None
        else gpd.GeoSeries([study_area], crs=4326).to_crs(crs).iloc[0]
    )
    pts = gpd.GeoSeries(gpd.points_from_xy(lng, lat), crs=4326).to_crs(crs)
    xy = np.column_stack([pts.x.to_numpy(), pts.y.to_numpy()])
    uniq, inverse = np.unique(xy, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    if len(uniq) == 1:
        cells = [area]
    else:
        x0, y0, x1, y1 = area.bounds
        span = max(x1 - x0, y1 - y0, 1.0)
        frame = shapely.box(x0 - span, y0 - span, x1 + span, y1 + span)
        frame = shapely.union_all([frame, *shapely.points(uniq).tolist()]).envelope.buffer(span)
        vor = shapely.voronoi_polygons(shapely.multipoints(uniq), extend_to=frame, ordered=True)
        cells = list(shapely.get_parts(vor))
        if len(cells) != len(uniq):  # fall back to matching by containment
            polys = shapely.get_parts(vor)
            cells = []
            for p in shapely.points(uniq):
                hit = [g for g in polys if g.covers(p)]
                cells.append(hit[0])
    clipped = shapely.intersection(np.asarray(cells, dtype=object), area)
    geom = gpd.GeoSeries(np.asarray(clipped, dtype=object)[inverse], crs=crs)
    return gpd.GeoDataFrame({"tower": np.arange(len(lng))}, geometry=geom.to_crs(4326).values)


def tower_zone_shares(
    lng: np.ndarray, lat: np.ndarray, zones: Any, study_area: Any = None
) -> np.ndarray:
    """(n_towers, k + 1) area shares; column k = outside every zone. Rows sum to 1.

    A tower whose clipped cell is empty (outside the study area) maps wholly to column k.
    """
    zg = _zones_gdf(zones)
    k = len(zg)
    crs = local_equal_area_crs(tuple(float(v) for v in zg.total_bounds))  # type: ignore[arg-type]
    vor = tower_voronoi(lng, lat, zones, study_area).to_crs(crs)
    zl = zg.to_crs(crs).geometry.values
    shares = np.zeros((len(vor), k + 1), dtype=np.float64)
    cell_areas = vor.geometry.area.to_numpy()
    tree = shapely.STRtree(zl)
    for t, (cell, a) in enumerate(zip(vor.geometry.values, cell_areas, strict=True)):
        if a <= 0:
            shares[t, k] = 1.0
            continue
        idx = tree.query(cell, predicate="intersects")
        if len(idx):
            shares[t, idx] = shapely.area(shapely.intersection(zl[idx], cell)) / a
        inside = shares[t, :k].sum()
        shares[t, k] = max(0.0, 1.0 - inside)
    shares /= shares.sum(axis=1, keepdims=True)
    return shares


def apply_shares(tower_counts: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Zone values (..., k + 1) from tower values (..., n_towers): y = x @ S (linear)."""
    x = np.asarray(tower_counts, dtype=np.float64)
    if x.shape[-1] != shares.shape[0]:
        raise InputError(
            f"{x.shape[-1]} tower values but {shares.shape[0]} towers in the share matrix"
        )
    return x @ shares
