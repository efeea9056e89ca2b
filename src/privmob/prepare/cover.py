"""The minimum cover of an area by tower cells and zones (seed 004 section 5.2).

Towers (their Voronoi cells clipped to the area) and zones both partition the area. Their
intersection graph is bipartite: an edge joins tower j and zone z when the two overlap. A set
of cells covers every overlap piece exactly when it is a vertex cover of that graph, so the
smallest cover is a minimum vertex cover, found from a maximum matching by König's theorem
(Hopcroft-Karp, :func:`maximum_matching`).

The matching is written here rather than taken from
``scipy.sparse.csgraph.maximum_bipartite_matching``: importing ``scipy.sparse.csgraph`` imports
``scipy.sparse.linalg`` and ``scipy.linalg`` too, 0.17 s of every density run's start-up
(``python -X importtime``), for a graph of a few thousand edges that this function matches in
milliseconds (tests/prepare/test_cover.py checks it against SciPy's).

The cover only depends on public geometry, never on counts: choosing it costs no privacy.

:func:`cover_map` turns a cover into two linear maps: tower counts -> cover-cell counts (each
overlap piece is counted once: by its zone if the zone is in the cover, else by its tower, the
"reduced tower" of the seed), and cover-cell counts -> zone counts (a reduced tower's count is
spread over its remaining pieces by area). The first map sends one visit to at most 1 in L1 norm,
so it keeps the sensitivity of the tower counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

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


def maximum_matching(indptr: np.ndarray, indices: np.ndarray, n_right: int) -> np.ndarray:
    """A maximum matching of a bipartite graph given as CSR rows (left vertex -> its right
    neighbours): the matched right vertex of each left vertex, or -1 (Hopcroft-Karp).

    Each phase layers the left vertices by a breadth-first search from the free ones, then
    augments along vertex-disjoint paths that climb the layers one step at a time; it stops
    when no free right vertex can be reached."""
    n_left = len(indptr) - 1
    adj = [indices[indptr[u] : indptr[u + 1]].tolist() for u in range(n_left)]
    match_l = [-1] * n_left
    match_r = [-1] * n_right
    for u in range(n_left):  # a greedy start leaves few augmenting paths to find
        for v in adj[u]:
            if match_r[v] < 0:
                match_l[u], match_r[v] = v, u
                break
    while True:
        layer = [-1] * n_left
        queue = [u for u in range(n_left) if match_l[u] < 0 and adj[u]]
        for u in queue:
            layer[u] = 0
        reachable = False
        for u in queue:  # the queue grows while it is read
            for v in adj[u]:
                w = match_r[v]
                if w < 0:
                    reachable = True
                elif layer[w] < 0:
                    layer[w] = layer[u] + 1
                    queue.append(w)
        if not reachable:
            return np.asarray(match_l, dtype=np.int64)
        nxt = [0] * n_left  # the next edge to try from each left vertex in this phase
        for root in range(n_left):
            if match_l[root] >= 0 or layer[root] != 0:
                continue
            path_l: list[int] = [root]
            path_r: list[int] = []
            while path_l:
                x = path_l[-1]
                if nxt[x] == len(adj[x]):  # a dead end for the rest of the phase
                    layer[x] = -1
                    path_l.pop()
                    if path_r:
                        path_r.pop()
                    continue
                v = adj[x][nxt[x]]
                nxt[x] += 1
                w = match_r[v]
                if w < 0:  # a free right vertex: flip the path's edges
                    path_r.append(v)
                    for a, b in zip(path_l, path_r, strict=True):
                        match_l[a], match_r[b] = b, a
                    break
                if layer[w] == layer[x] + 1:
                    path_l.append(w)
                    path_r.append(v)


def minimum_cover(shares: sp.spmatrix | np.ndarray) -> Cover:
    """Minimum vertex cover of the tower x zone overlap graph (König's construction).

    ``shares`` is (towers x zones), nonzero where a tower cell and a zone overlap.
    """
    graph = _overlaps(shares)
    graph.data[:] = 1.0
    n_t, n_z = graph.shape
    match_of_tower = maximum_matching(graph.indptr, graph.indices, n_z)  # zone or -1
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
