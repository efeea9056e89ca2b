"""Clustering of cover cells on their noisy totals until every cluster's noisy total reaches
tau (seed 004, Algorithm 3): post-processing of noisy values and public geometry."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def _planar(lnglat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Equirectangular projection in km around the mean latitude (for nearest neighbours)."""
    lat0 = math.radians(float(np.mean(lnglat[:, 1]))) if len(lnglat) else 0.0
    x = np.radians(lnglat[:, 0]) * math.cos(lat0) * 6371.0
    y = np.radians(lnglat[:, 1]) * 6371.0
    return np.column_stack([x, y])


def cluster_cells(
    centroids: npt.NDArray[np.float64], noisy_totals: npt.NDArray[np.float64], tau: float
) -> npt.NDArray[np.int64]:
    """Seed 004 Algorithm 3 on NOISY totals: merge the cluster with the smallest noisy total
    into the cluster with the nearest centre until every cluster's noisy total is >= tau.

    Returns a label per cell (0..m-1). The centre of a cluster is the mean of its cells'
    centroids. Reads only public centroids and noisy totals (post-processing).
    """
    n = len(noisy_totals)
    labels = np.arange(n)
    if n == 0:
        return labels
    xy = _planar(np.asarray(centroids, dtype=np.float64))
    total = np.asarray(noisy_totals, dtype=np.float64).copy()
    size = np.ones(n)
    active = np.ones(n, dtype=bool)
    while active.sum() > 1:
        masked = np.where(active, total, np.inf)
        a = int(np.argmin(masked))
        if masked[a] >= tau:
            break
        d = np.hypot(xy[:, 0] - xy[a, 0], xy[:, 1] - xy[a, 1])
        d[~active] = np.inf
        d[a] = np.inf
        b = int(np.argmin(d))
        xy[b] = (xy[a] * size[a] + xy[b] * size[b]) / (size[a] + size[b])
        size[b] += size[a]
        total[b] += total[a]
        active[a] = False
        labels[labels == a] = b
    _, dense = np.unique(labels, return_inverse=True)
    return dense.astype(np.int64)
