"""Tower-to-zone mapping by Voronoi area shares (SPEC section 2; seed 004 formula 1).

The Voronoi cell of each tower is clipped to the study area (the union of the zones); a tower's
count is split over zones by area share:
``X_zone(t) = sum_towers X_tower(t) * area(cell & zone) / area(cell)``.
Every row of the share matrix sums to 1 (or 0 for a tower whose cell misses the area), so the
mapping never increases L1 sensitivity. Geometry is public: nothing here reads counts.

Areas are computed in a local metric CRS (UTM of the area). Towers at the same position share
one cell; each of them is mapped with that cell's shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import shapely

from privmob.data.tessellation import local_metric_crs
from privmob.errors import InputError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import geopandas as gpd
    import scipy.sparse as sp
else:
    gpd = lazy_module("geopandas")
    sp = lazy_module("scipy.sparse")


@dataclass(frozen=True)
class VoronoiMap:
    """Tower cells clipped to the area and their area shares over the zones."""

    cells: gpd.GeoSeries  # one clipped Voronoi polygon per tower (EPSG:4326), may be empty
    shares: sp.csr_matrix  # (towers x zones)
    tower_centroids: np.ndarray  # (towers, 2) lng, lat of the clipped cell (tower if empty)
    zone_centroids: np.ndarray  # (zones, 2) lng, lat


def voronoi_map(lng: np.ndarray, lat: np.ndarray, zones: gpd.GeoDataFrame) -> VoronoiMap:
    """Voronoi cells of towers at (lng, lat), clipped to the zones' union, and their shares."""
    lng = np.asarray(lng, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    if lng.size == 0:
        raise InputError("no towers given", hint="the cells table needs cell_id, lat, lng rows")
    if zones.crs is None:
        zones = zones.set_crs("EPSG:4326")
    zones = zones.to_crs("EPSG:4326")
    metric = local_metric_crs(zones.total_bounds)
    zm = zones.to_crs(metric).geometry.reset_index(drop=True)
    area = shapely.union_all(np.asarray(zm.values))
    pts = gpd.GeoSeries(gpd.points_from_xy(lng, lat), crs="EPSG:4326").to_crs(metric)
    xy = np.column_stack([pts.x.to_numpy(), pts.y.to_numpy()])
    uniq, inverse = np.unique(np.round(xy, 3), axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    minx, miny, maxx, maxy = area.bounds
    pad = 10.0 * max(maxx - minx, maxy - miny, 1.0)
    extent = shapely.box(
        min(minx, uniq[:, 0].min()) - pad,
        min(miny, uniq[:, 1].min()) - pad,
        max(maxx, uniq[:, 0].max()) + pad,
        max(maxy, uniq[:, 1].max()) + pad,
    )
    if len(uniq) == 1:
        polys = np.array([extent])
    else:
        regions = shapely.voronoi_polygons(
            shapely.multipoints(uniq), extend_to=extent, ordered=True
        )
        polys = np.asarray(shapely.get_parts(regions))
    clipped_u = shapely.intersection(polys, area)
    clipped = clipped_u[inverse]
    cell_area = shapely.area(clipped)
    tree = shapely.STRtree(np.asarray(zm.values))
    ti, zi = tree.query(clipped, predicate="intersects")
    inter = shapely.area(shapely.intersection(clipped[ti], np.asarray(zm.values)[zi]))
    share = inter / np.where(cell_area[ti] > 0, cell_area[ti], 1.0)
    # Zones that overlap (within the loader's tolerance, or a GeoDataFrame passed directly)
    # would let a tower's shares sum above 1 and so multiply one visit: cap each row at 1, so
    # that the map never increases L1 sensitivity whatever the zones (SPEC 1.2).
    row_sum = np.bincount(ti, weights=share, minlength=lng.size)
    share = share / np.maximum(row_sum[ti], 1.0)
    keep = share > 0
    shares = sp.csr_matrix(
        (share[keep], (ti[keep], zi[keep])), shape=(lng.size, len(zm)), dtype=np.float64
    )
    cells = gpd.GeoSeries(clipped, crs=metric).to_crs("EPSG:4326")
    cent = gpd.GeoSeries(shapely.centroid(clipped), crs=metric).to_crs("EPSG:4326")
    tc = np.column_stack([cent.x.to_numpy(), cent.y.to_numpy()])
    empty = shapely.is_empty(clipped)
    tc[empty] = np.column_stack([lng, lat])[empty]
    zc_geo = gpd.GeoSeries(zm.centroid, crs=metric).to_crs("EPSG:4326")
    zc = np.column_stack([zc_geo.x.to_numpy(), zc_geo.y.to_numpy()])
    return VoronoiMap(cells, shares, tc, zc)


# -- the phone-records view of the same map (issue 3) ------------------------------------------
#
# Population and other presence counts use the shares with an explicit "outside every zone"
# column, so that every row sums to exactly 1 and nothing is silently dropped. privmob applies
# the shares *after* the noise (noisy integer tower counts, then shares: post-processing, no
# extra cost, fractional zone values); applying them to exact counts before noise would need
# real-valued noise. Trips keep the containing zone of each tower: shares would turn one trip
# into fractional trips between several zone pairs.


def _zones_gdf(zones: object) -> gpd.GeoDataFrame:
    gdf = zones.gdf if hasattr(zones, "gdf") else zones
    if not isinstance(gdf, gpd.GeoDataFrame):
        raise InputError("zones must be a Tessellation or a GeoDataFrame")
    return gdf


def _check_towers(lng: np.ndarray, lat: np.ndarray) -> None:
    bad = ~(np.isfinite(lng) & np.isfinite(lat))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{int(bad.sum())} tower(s) have no valid coordinates (first: row {i})",
            column="lat/lng",
            hint="every tower needs lat and lng to build its Voronoi cell",
        )


def tower_voronoi(lng: np.ndarray, lat: np.ndarray, zones: object) -> gpd.GeoDataFrame:
    """Voronoi cells of the towers clipped to the study area, one row per tower (EPSG:4326)."""
    lng, lat = np.asarray(lng, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    _check_towers(lng, lat)
    vm = voronoi_map(lng, lat, _zones_gdf(zones))
    return gpd.GeoDataFrame({"tower": np.arange(len(lng))}, geometry=vm.cells.values, crs=4326)


def tower_zone_shares(lng: np.ndarray, lat: np.ndarray, zones: object) -> np.ndarray:
    """Dense (n_towers, k + 1) shares; column k = the part outside every zone. Rows sum to 1
    (a tower whose clipped cell is empty maps wholly to column k)."""
    lng, lat = np.asarray(lng, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    _check_towers(lng, lat)
    s = voronoi_map(lng, lat, _zones_gdf(zones)).shares.toarray()
    out = np.zeros((s.shape[0], s.shape[1] + 1), dtype=np.float64)
    out[:, :-1] = s
    out[:, -1] = np.clip(1.0 - s.sum(axis=1), 0.0, 1.0)
    return np.asarray(out / out.sum(axis=1, keepdims=True))


def apply_shares(tower_counts: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Zone values (..., k + 1) from tower values (..., n_towers): y = x @ S (linear)."""
    x = np.asarray(tower_counts, dtype=np.float64)
    if x.shape[-1] != shares.shape[0]:
        raise InputError(
            f"{x.shape[-1]} tower values but {shares.shape[0]} towers in the share matrix"
        )
    return np.asarray(x @ shares)
