"""Utility of a density release (SPEC 4.3): MRE with a sanity bound, Pearson, spatial EMD.

These compare a noisy release with the exact (non-private) series; they are for evaluation and
benchmarks only, never part of a release.

* MRE of a series X (length n) and its release X^: mean_t |X^_t - X_t| / max(gamma, X_t),
  gamma = 0.1% of sum_t X_t (seed 004 section 3.2).
* Pearson correlation of X and X^ (series whose values are all equal are skipped).
* EMD per hour between the spatial distributions X_.,t / sum and X^_.,t / sum (negative noisy
  values clamped to 0), ground distance = haversine distance between zone centroids (metres).
  Solved exactly as a transport LP (HiGHS) from the zones with surplus to the zones with
  deficit. Above ``max_points`` zones, zones are first grouped into ``max_points`` groups by
  k-means on their positions (fixed seed) and the EMD between the grouped distributions is
  returned: it differs from the exact EMD by at most the mass-weighted mean distance of zones
  to their group's centre, summed over both distributions (triangle inequality), which is
  reported as ``bound``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from privmob.evaluate.similarity import transport_cost

EARTH_RADIUS_M = 6_371_008.8


def mre(truth: np.ndarray, noisy: np.ndarray, gamma_share: float = 0.001) -> np.ndarray:
    """Mean relative error per series (rows); gamma = gamma_share * the series total."""
    x = np.atleast_2d(np.asarray(truth, dtype=np.float64))
    y = np.atleast_2d(np.asarray(noisy, dtype=np.float64))
    gamma = gamma_share * x.sum(axis=1, keepdims=True)
    denom = np.maximum(gamma, x)
    rel = np.divide(np.abs(y - x), denom, out=np.zeros_like(x), where=denom > 0)
    return np.asarray(rel.mean(axis=1))


def pearson(truth: np.ndarray, noisy: np.ndarray) -> np.ndarray:
    """Pearson correlation per series (rows); NaN where either series is constant."""
    x = np.atleast_2d(np.asarray(truth, dtype=np.float64))
    y = np.atleast_2d(np.asarray(noisy, dtype=np.float64))
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    num = (xc * yc).sum(axis=1)
    den = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def haversine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distances in metres between points a (n, 2) and b (m, 2) given as (lng, lat) degrees."""
    return haversine(a[:, None, :], b[None, :, :])


def haversine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise (broadcasting) haversine distance in metres; last axis is (lng, lat)."""
    lng1, lat1 = np.radians(a[..., 0]), np.radians(a[..., 1])
    lng2, lat2 = np.radians(b[..., 0]), np.radians(b[..., 1])
    h = (
        np.sin((lat2 - lat1) / 2) ** 2
        + np.cos(lat1) * np.cos(lat2) * np.sin((lng2 - lng1) / 2) ** 2
    )
    return np.asarray(2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(h, 0, 1))))


def emd(p: np.ndarray, q: np.ndarray, dist: np.ndarray) -> float:
    """Exact EMD between distributions p, q (same support) with ground distances ``dist``."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    diff = p - q
    src = np.nonzero(diff > 1e-15)[0]
    dst = np.nonzero(diff < -1e-15)[0]
    if src.size == 0 or dst.size == 0:
        return 0.0
    supply, demand = diff[src], -diff[dst]
    demand = demand * supply.sum() / demand.sum()
    return transport_cost(supply, demand, dist[np.ix_(src, dst)])


@dataclass(frozen=True)
class SpatialEMD:
    per_hour: np.ndarray  # metres, one per evaluated hour
    hours: np.ndarray
    stretch: float  # 1.0 when exact; else the exact EMD is in [per_hour / stretch, per_hour]


@dataclass(frozen=True)
class _Graph:
    tail: np.ndarray
    head: np.ndarray
    length: np.ndarray
    incidence: sp.csr_matrix
    stretch: float


def _knn_graph(pts: np.ndarray, k: int) -> _Graph:
    from scipy.sparse.csgraph import dijkstra, minimum_spanning_tree
    from scipy.spatial import cKDTree

    lat0 = np.radians(pts[:, 1].mean())
    xy = np.column_stack([np.radians(pts[:, 0]) * np.cos(lat0), np.radians(pts[:, 1])])
    _, nb = cKDTree(xy).query(xy, k=min(k + 1, len(pts)))
    tail = np.repeat(np.arange(len(pts)), nb.shape[1] - 1)
    head = nb[:, 1:].ravel()
    # plus a minimum spanning tree, so that the graph is always connected
    mst = minimum_spanning_tree(sp.csr_matrix(haversine_matrix(pts, pts))).tocoo()
    tail, head = np.concatenate([tail, mst.row]), np.concatenate([head, mst.col])
    tail, head = np.concatenate([tail, head]), np.concatenate([head, tail])
    pairs = np.unique(np.column_stack([tail, head]), axis=0)
    tail, head = pairs[:, 0], pairs[:, 1]
    length = haversine(pts[tail], pts[head])
    n, e = len(pts), tail.size
    inc = sp.csr_matrix(
        (
            np.concatenate([np.ones(e), -np.ones(e)]),
            (np.concatenate([tail, head]), np.concatenate([np.arange(e), np.arange(e)])),
        ),
        shape=(n, e),
    )
    g = sp.csr_matrix((length, (tail, head)), shape=(n, n))
    sp_dist = dijkstra(g, directed=True)
    direct = haversine_matrix(pts, pts)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(direct > 0, sp_dist / np.where(direct > 0, direct, 1.0), 1.0)
    return _Graph(tail, head, length, inc, float(np.nanmax(ratio)))


def _graph_emd(p: np.ndarray, q: np.ndarray, g: _Graph) -> float:
    """Min-cost flow of p - q over the graph (transshipment): an upper bound on the EMD."""
    res = linprog(g.length, A_eq=g.incidence, b_eq=p - q, bounds=(0, None), method="highs")
    if not res.success:  # pragma: no cover - the k-NN graph is connected for spread points
        raise RuntimeError(f"transport LP failed: {res.message}")
    return float(res.fun)


def spatial_emd(
    truth: np.ndarray,
    noisy: np.ndarray,
    lnglat: np.ndarray,
    *,
    hours: np.ndarray | None = None,
    exact_max: int = 300,
    neighbours: int = 10,
) -> SpatialEMD:
    """EMD (metres) between true and noisy spatial distributions, per hour (columns).

    Exact up to ``exact_max`` zones. Above, the mass moves along a k-nearest-neighbour graph
    of the zone centroids (transshipment allowed): the result is an upper bound of the exact
    EMD, at most ``stretch`` times it, ``stretch`` being the largest ratio of graph distance to
    haversine distance over all zone pairs (computed, and returned).
    """
    x = np.asarray(truth, dtype=np.float64)
    y = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    pts = np.asarray(lnglat, dtype=np.float64)
    hrs = np.arange(x.shape[1]) if hours is None else np.asarray(hours)
    n = x.shape[0]
    graph = _knn_graph(pts, neighbours) if n > exact_max else None
    dist = haversine_matrix(pts, pts) if graph is None else None
    out = []
    for t in hrs:
        p = x[:, t] / x[:, t].sum() if x[:, t].sum() > 0 else np.full(n, 1.0 / n)
        q = y[:, t] / y[:, t].sum() if y[:, t].sum() > 0 else np.full(n, 1.0 / n)
        out.append(_graph_emd(p, q, graph) if graph is not None else emd(p, q, dist))  # type: ignore[arg-type]
    return SpatialEMD(np.array(out), hrs, 1.0 if graph is None else graph.stretch)
