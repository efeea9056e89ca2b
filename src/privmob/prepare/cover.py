"""The minimum cover of an area by tower cells and zones (seed 004 section 5.2).

Towers (their Voronoi cells clipped to the area) and zones both partition the area. Their
intersection graph is bipartite: an edge joins tower j and zone z when the two overlap. A set
of cells covers every overlap piece exactly when it is a vertex cover of that graph, so the
smallest cover is a minimum vertex cover, found from a maximum matching by König's theorem
(Hopcroft-Karp in ``scipy.sparse.csgraph.maximum_bipartite_matching``).

The cover only depends on public geometry, never on counts: choosing it costs no privacy.

:func:`cover_map` turns a cover into two linear maps: tower counts -> cover-cell counts (each
overlap piece is counted once: by its zone if the zone is in the cover, else by its tower, the
"reduced tower" of the seed), and cover-cell counts -> zone counts (a reduced tower's count is
spread over its remaining pieces by area). The first map sends one visit to at most 1 in L1 norm,
so it keeps the sensitivity of the tower counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from privmob.errors import ConfigError

SHARE_TOLERANCE = 1e-9  # overlap shares below this are numerical slivers, not overlaps


@dataclass(frozen=True)
class Cover:
    """Cells of a cover: indices of the towers and of the zones chosen."""

    towers: np.ndarray
    zones: np.ndarray

    @property
    def size(self) -> int:
        return int(self.towers.size + self.zones.size)


def _overlaps(shares: sp.spmatrix | np.ndarray) -> sp.csr_matrix:
    m = sp.csr_matrix(shares, dtype=np.float64, copy=True)
    m.data[m.data < SHARE_TOLERANCE] = 0.0
    m.eliminate_zeros()
    return m


def minimum_cover(shares: sp.spmatrix | np.ndarray) -> Cover:
    """Minimum vertex cover of the tower x zone overlap graph (König's construction).

    ``shares`` is (towers x zones), nonzero where a tower cell and a zone overlap.
    """
    graph = _overlaps(shares)
    graph.data[:] = 1.0
    n_t, n_z = graph.shape
    match_of_tower = maximum_bipartite_matching(graph, perm_type="column")  # zone or -1
    match_of_zone = np.full(n_z, -1, dtype=np.int64)
    matched = match_of_tower >= 0
    match_of_zone[match_of_tower[matched]] = np.nonzero(matched)[0]
    # alternating search from unmatched towers: tower -> zone by any edge, zone -> tower by
    # its matching edge
    seen_t = np.zeros(n_t, dtype=bool)
    seen_z = np.zeros(n_z, dtype=bool)
    has_edge = np.diff(graph.indptr) > 0
    stack = list(np.nonzero(~matched & has_edge)[0])
    seen_t[stack] = True
    while stack:
        t = stack.pop()
        for z in graph.indices[graph.indptr[t] : graph.indptr[t + 1]]:
            if seen_z[z]:
                continue
            seen_z[z] = True
            t2 = match_of_zone[z]
            if t2 >= 0 and not seen_t[t2]:
                seen_t[t2] = True
                stack.append(t2)
    towers = np.nonzero(has_edge & ~seen_t)[0]
    zones = np.nonzero(seen_z)[0]
    return Cover(towers.astype(np.int64), zones.astype(np.int64))


def is_cover(shares: sp.spmatrix | np.ndarray, cover: Cover) -> bool:
    """True when every overlap (edge) has its tower or its zone in the cover."""
    g = _overlaps(shares).tocoo()
    in_t = np.zeros(g.shape[0], dtype=bool)
    in_z = np.zeros(g.shape[1], dtype=bool)
    in_t[cover.towers] = True
    in_z[cover.zones] = True
    return bool(np.all(in_t[g.row] | in_z[g.col]))


@dataclass(frozen=True)
class CoverMap:
    """Linear maps between tower counts, cover-cell counts and zone counts.

    Cover cells are numbered towers first (``kinds == "tower"``), then zones; ``ids`` holds the
    tower or zone index of each cover cell.
    """

    to_cover: sp.csr_matrix  # (cover cells x towers): X_cover = to_cover @ X_towers
    to_zones: sp.csr_matrix  # (zones x cover cells): X_zones = to_zones @ X_cover
    kinds: np.ndarray  # "tower" / "zone"
    ids: np.ndarray

    @property
    def size(self) -> int:
        return int(self.ids.size)


def cover_map(shares: sp.spmatrix | np.ndarray, cover: Cover | None = None) -> CoverMap:
    """Maps for ``cover`` (default: the zones themselves, i.e. no cover step).

    ``shares[j, z]`` = area(tower cell j & zone z) / area(tower cell j).
    """
    w = _overlaps(shares).tocoo()
    n_t, n_z = w.shape
    if cover is None:
        cover = Cover(np.zeros(0, dtype=np.int64), np.arange(n_z, dtype=np.int64))
    if not is_cover(shares, cover):
        raise ConfigError("the chosen cells do not cover every tower-zone overlap")
    cell_of_tower = np.full(n_t, -1, dtype=np.int64)
    cell_of_zone = np.full(n_z, -1, dtype=np.int64)
    cell_of_tower[cover.towers] = np.arange(cover.towers.size)
    cell_of_zone[cover.zones] = cover.towers.size + np.arange(cover.zones.size)
    # each piece goes to its zone's cell when the zone is in the cover, else its tower's
    cell = np.where(cell_of_zone[w.col] >= 0, cell_of_zone[w.col], cell_of_tower[w.row])
    n_c = cover.size
    to_cover = sp.csr_matrix((w.data, (cell, w.row)), shape=(n_c, n_t))
    mass = np.bincount(cell, weights=w.data, minlength=n_c)
    frac = w.data / np.where(mass[cell] > 0, mass[cell], 1.0)
    to_zones = sp.csr_matrix((frac, (w.col, cell)), shape=(n_z, n_c))
    kinds = np.array(["tower"] * cover.towers.size + ["zone"] * cover.zones.size)
    ids = np.concatenate([cover.towers, cover.zones]).astype(np.int64)
    return CoverMap(to_cover, to_zones, kinds, ids)
