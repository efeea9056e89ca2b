"""Voronoi area shares (SPEC section 2): geometry by hand on a square, rows sum to 1."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely

from privmob.errors import InputError
from privmob.prepare.voronoi import apply_shares, tower_voronoi, tower_zone_shares

# two zones: the west and east halves of a small square near the equator (almost planar)
ZONES = gpd.GeoDataFrame(
    {"tile_id": ["W", "E"]},
    geometry=[shapely.box(0.0, 0.0, 0.01, 0.02), shapely.box(0.01, 0.0, 0.02, 0.02)],
    crs=4326,
)


def test_two_towers_split_along_the_bisector() -> None:
    # towers at x = 0.005 and x = 0.0125: bisector at x = 0.00875, inside zone W
    s = tower_zone_shares(np.array([0.005, 0.0125]), np.array([0.01, 0.01]), ZONES)
    assert s.shape == (2, 3)
    np.testing.assert_allclose(s.sum(axis=1), 1.0)
    assert s[0] == pytest.approx([1.0, 0.0, 0.0], abs=1e-3)
    # tower 1 owns x in [0.00875, 0.02]: 0.00125 of W, 0.01 of E
    assert s[1, 0] == pytest.approx(0.00125 / 0.01125, rel=1e-2)
    assert s[1, 1] == pytest.approx(0.01 / 0.01125, rel=1e-2)


def test_single_and_duplicate_towers_and_outside() -> None:
    s = tower_zone_shares(np.array([0.01]), np.array([0.01]), ZONES)
    assert s[0] == pytest.approx([0.5, 0.5, 0.0], abs=1e-3)
    s = tower_zone_shares(np.array([0.005, 0.005, 0.015]), np.array([0.01, 0.01, 0.01]), ZONES)
    np.testing.assert_allclose(s[0], s[1])
    # a tower far outside: its clipped cell is empty or small; rows still sum to 1
    s = tower_zone_shares(np.array([0.005, 5.0]), np.array([0.01, 5.0]), ZONES)
    np.testing.assert_allclose(s.sum(axis=1), 1.0)
    cells = tower_voronoi(np.array([0.005, 0.015]), np.array([0.01, 0.01]), ZONES)
    assert shapely.area(cells.geometry.values).sum() == pytest.approx(0.0004, rel=1e-3)


def test_shares_keep_l1_sensitivity() -> None:
    rng = np.random.default_rng(0)
    lng, lat = rng.uniform(0, 0.02, 20), rng.uniform(0, 0.02, 20)
    s = tower_zone_shares(lng, lat, ZONES)
    x = rng.integers(0, 50, 20)
    x2 = x.copy()
    x2[3] += 1  # one more event at one tower
    assert np.abs(apply_shares(x2, s) - apply_shares(x, s)).sum() == pytest.approx(1.0)
    assert apply_shares(x, s).sum() == pytest.approx(x.sum())


def test_bad_towers() -> None:
    with pytest.raises(InputError, match="no valid coordinates"):
        tower_zone_shares(np.array([0.005, np.nan]), np.array([0.01, 0.01]), ZONES)
    with pytest.raises(InputError):
        apply_shares(np.ones(3), np.ones((2, 3)))


def test_overlapping_zones_cannot_multiply_a_visit() -> None:
    # The density release maps EXACT tower counts through these shares before the noise, so a
    # tower's shares must sum to at most 1 even if zones overlap (the loader tolerates small
    # overlaps; a GeoDataFrame may be passed directly). Two copies of the same zone would
    # otherwise count every visit twice and double the sensitivity.
    from privmob.prepare.cover import cover_map, minimum_cover
    from privmob.prepare.voronoi import voronoi_map

    twice = gpd.GeoDataFrame(
        {"tile_id": ["A", "A2"]},
        geometry=[shapely.box(0.0, 0.0, 0.02, 0.02), shapely.box(0.0, 0.0, 0.02, 0.02)],
        crs=4326,
    )
    vm = voronoi_map(np.array([0.005, 0.015]), np.array([0.01, 0.01]), twice)
    row_sums = np.asarray(vm.shares.sum(axis=1)).ravel()
    assert row_sums.max() <= 1.0 + 1e-12
    for cover in (None, minimum_cover(vm.shares)):
        to_cover = cover_map(vm.shares, cover).to_cover
        assert np.asarray(to_cover.sum(axis=0)).ravel().max() <= 1.0 + 1e-12
