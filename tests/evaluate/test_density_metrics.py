"""Density metrics: MRE with the sanity bound, Pearson, EMD (exact and k-NN graph)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privmob.evaluate.density_metrics import EARTH_RADIUS_M, mre, pearson, spatial_emd


def test_mre_uses_the_sanity_bound() -> None:
    x = np.array([[0.0, 10.0, 990.0]])  # total 1000 -> gamma = 1
    y = np.array([[2.0, 12.0, 980.0]])
    expected = (2 / 1 + 2 / 10 + 10 / 990) / 3
    assert mre(x, y)[0] == pytest.approx(expected)


def test_pearson_matches_numpy_and_skips_constant_series() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((3, 50))
    y = x + rng.normal(0, 0.1, x.shape)
    y[2] = 5.0
    got = pearson(x, y)
    for i in range(2):
        assert got[i] == pytest.approx(np.corrcoef(x[i], y[i])[0, 1])
    assert np.isnan(got[2])


def test_emd_on_a_meridian_equals_the_1d_wasserstein_distance() -> None:
    # points on one meridian: haversine distance = R * |delta latitude| (radians)
    rng = np.random.default_rng(1)
    lat = np.sort(rng.uniform(48.0, 48.2, 40))
    pts = np.column_stack([np.full(40, 2.3), lat])
    x = rng.random((40, 2)) * 100
    y = rng.random((40, 2)) * 100
    metres = np.radians(lat) * EARTH_RADIUS_M
    exact = spatial_emd(x, y, pts)
    for t in range(2):
        ref = stats.wasserstein_distance(metres, metres, x[:, t], y[:, t])
        assert exact.per_hour[t] == pytest.approx(ref, rel=1e-6)
    # the k-NN graph version: an upper bound, within its stated stretch
    graph = spatial_emd(x, y, pts, exact_max=10, neighbours=4)
    assert np.all(graph.per_hour >= exact.per_hour - 1e-6)
    assert np.all(graph.per_hour <= graph.stretch * exact.per_hour + 1e-6)


def test_graph_emd_is_close_to_exact_on_scattered_zones() -> None:
    rng = np.random.default_rng(2)
    pts = np.column_stack([rng.uniform(2.25, 2.41, 120), rng.uniform(48.81, 48.97, 120)])
    x = rng.random((120, 1)) * 100
    y = x + rng.normal(0, 20, x.shape)
    exact = spatial_emd(x, y, pts)
    graph = spatial_emd(x, y, pts, exact_max=50)
    assert exact.per_hour[0] <= graph.per_hour[0] <= 1.15 * exact.per_hour[0]
