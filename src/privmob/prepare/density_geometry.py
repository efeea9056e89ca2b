"""Public geometry of the density release: tower sites, Voronoi shares, the cover.

Nothing here reads counts: it is all built from the cells table (tower positions) and the
zones, which are public, so it costs no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privmob.lazy_imports import lazy_module
from privmob.prepare.cover import CoverMap, cover_map, minimum_cover
from privmob.prepare.voronoi import VoronoiMap, voronoi_map

if TYPE_CHECKING:
    import geopandas as gpd
else:
    gpd = lazy_module("geopandas")


@dataclass(frozen=True)
class DensityGeometry:
    """Public geometry of a density release: towers, zones, the cover and its maps."""

    zone_ids: np.ndarray
    voronoi: VoronoiMap
    cmap: CoverMap
    centroids: np.ndarray  # (cover cells, 2) lng, lat

    @property
    def n_towers(self) -> int:
        return int(self.voronoi.shares.shape[0])


class SiteIndex:
    """Tower positions ("sites") as a tessellation-like index: ``assign(lng, lat)`` returns the
    site index of exact positions (to 1e-7 degrees), -1 for unknown ones. Towers sharing a
    position share a site. Pass it as ``tessellation`` to ``load_events(..., cells=...)``."""

    def __init__(self, lng: np.ndarray, lat: np.ndarray) -> None:
        keys = _site_keys(np.asarray(lng, dtype=np.float64), np.asarray(lat, dtype=np.float64))
        order = np.sort(np.unique(keys, return_index=True)[1])
        self.lng = np.asarray(lng, dtype=np.float64)[order]
        self.lat = np.asarray(lat, dtype=np.float64)[order]
        self._index = {k: i for i, k in enumerate(keys[order])}

    @property
    def k(self) -> int:
        return int(self.lng.size)

    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        keys = _site_keys(np.asarray(lng, dtype=np.float64), np.asarray(lat, dtype=np.float64))
        return np.array([self._index.get(k, -1) for k in keys], dtype=np.int32)


def _site_keys(lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
    a = np.rint(lng * 1e7).astype(np.int64)
    b = np.rint(lat * 1e7).astype(np.int64)
    return np.array([f"{x}:{y}" for x, y in zip(a, b, strict=True)])


def density_geometry(
    tower_lng: np.ndarray,
    tower_lat: np.ndarray,
    zones: gpd.GeoDataFrame,
    zone_ids: np.ndarray | None = None,
    *,
    cover: bool = True,
) -> DensityGeometry:
    """Voronoi shares, the minimum cover (or the zones alone) and the cover cells' centroids."""
    vm = voronoi_map(tower_lng, tower_lat, zones)
    chosen = minimum_cover(vm.shares) if cover else None
    cmap = cover_map(vm.shares, chosen)
    cent = np.where(
        (cmap.kinds == "tower")[:, None],
        vm.tower_centroids[np.where(cmap.kinds == "tower", cmap.ids, 0)],
        vm.zone_centroids[np.where(cmap.kinds == "zone", cmap.ids, 0)],
    )
    ids = np.arange(len(zones)) if zone_ids is None else np.asarray(zone_ids)
    return DensityGeometry(ids, vm, cmap, cent)
