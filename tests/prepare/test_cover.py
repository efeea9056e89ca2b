"""Minimum cover of towers and zones: valid, minimum (brute force), mass-preserving maps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privmob.prepare.cover import Cover, cover_map, is_cover, maximum_matching, minimum_cover


def brute_force_minimum(adj: np.ndarray) -> int:
    n_t, n_z = adj.shape
    edges = list(zip(*np.nonzero(adj), strict=True))
    for size in range(n_t + n_z + 1):
        for combo in itertools.combinations(range(n_t + n_z), size):
            chosen = set(combo)
            if all(t in chosen or (n_t + z) in chosen for t, z in edges):
                return size
    raise AssertionError


def test_hand_made_cases() -> None:
    # one big tower over three zones: the tower alone covers
    star = np.array([[0.5, 0.3, 0.2]])
    c = minimum_cover(star)
    assert c.size == 1 and list(c.towers) == [0]
    # one big zone over three towers: the zone alone covers
    c = minimum_cover(star.T)
    assert c.size == 1 and list(c.zones) == [0]
    # a path t0-z0-t1-z1: two cells
    path = np.array([[1.0, 0.0], [0.5, 0.5]])
    c = minimum_cover(path)
    assert is_cover(path, c) and c.size == 2
    # identical partitions: one cell per pair
    eye = np.eye(4)
    assert minimum_cover(eye).size == 4


@pytest.mark.parametrize("seed", range(25))
def test_random_graphs_are_covered_minimally(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_t, n_z = rng.integers(1, 6), rng.integers(1, 6)
    adj = rng.random((n_t, n_z)) < 0.4
    # towers and zones are partitions of the area: every cell overlaps something
    for t in range(n_t):
        if not adj[t].any():
            adj[t, rng.integers(n_z)] = True
    for z in range(n_z):
        if not adj[:, z].any():
            adj[rng.integers(n_t), z] = True
    shares = adj * rng.random((n_t, n_z))
    shares = shares / shares.sum(axis=1, keepdims=True)
    c = minimum_cover(shares)
    assert is_cover(shares, c)
    assert c.size == brute_force_minimum(shares > 0)


def test_cover_map_preserves_mass_and_sensitivity() -> None:
    rng = np.random.default_rng(3)
    shares = np.array(
        [
            [0.6, 0.4, 0.0, 0.0],
            [0.0, 0.3, 0.7, 0.0],
            [0.0, 0.0, 0.2, 0.8],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    cover = minimum_cover(shares)
    cm = cover_map(shares, cover)
    x_t = rng.integers(0, 100, size=(4, 7)).astype(float)
    x_c = cm.to_cover @ x_t
    # each tower's visit lands with total weight 1 in the cover: column sums are 1
    np.testing.assert_allclose(np.asarray(cm.to_cover.sum(axis=0)).ravel(), 1.0)
    np.testing.assert_allclose(x_c.sum(axis=0), x_t.sum(axis=0))
    # back to zones: formula (1) when the cover is the towers themselves
    x_z = cm.to_zones @ x_c
    np.testing.assert_allclose(x_z.sum(axis=0), x_t.sum(axis=0))
    towers_only = cover_map(shares, Cover(np.arange(4), np.zeros(0, dtype=np.int64)))
    np.testing.assert_allclose(towers_only.to_zones @ (towers_only.to_cover @ x_t), shares.T @ x_t)
    # no cover step: cover cells are the zones
    plain = cover_map(shares)
    np.testing.assert_allclose(plain.to_zones @ (plain.to_cover @ x_t), shares.T @ x_t)


def test_minimum_cover_does_not_modify_its_input() -> None:
    import scipy.sparse as sp

    shares = sp.csr_matrix(np.array([[0.25, 0.75], [0.0, 1.0]]))
    minimum_cover(shares)
    np.testing.assert_allclose(shares.toarray(), [[0.25, 0.75], [0.0, 1.0]])


@pytest.mark.parametrize("seed", range(6))
def test_maximum_matching_is_a_matching_as_large_as_scipys(seed: int) -> None:
    """Hopcroft-Karp here against SciPy's on random graphs from sparse to dense, a few with
    isolated vertices: every pair is an edge, no vertex is used twice, and the size is SciPy's
    (a maximum matching's size is unique; the pairs need not be)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rng = np.random.default_rng(seed)
    for _ in range(40):
        n_l, n_r = (int(v) for v in rng.integers(1, 120, size=2))
        dense = rng.random((n_l, n_r)) < rng.uniform(0.005, 0.3)
        g = sp.csr_matrix(dense)
        got = maximum_matching(g.indptr, g.indices, n_r)
        matched = np.nonzero(got >= 0)[0]
        assert got.shape == (n_l,)
        assert dense[matched, got[matched]].all()
        assert np.unique(got[matched]).size == matched.size
        want = maximum_bipartite_matching(g.astype(np.float64), perm_type="column")
        assert matched.size == int((want >= 0).sum())


def test_density_imports_no_scipy_linalg_csgraph_or_fft() -> None:
    """The density release's start-up: SciPy's sparse graphs (which import scipy.linalg) and
    its FFT cost about 0.27 s to import, for a matching and a DCT written here."""
    import subprocess
    import sys

    probe = (
        "import sys, privmob.releases.density, privmob.prepare.cover, privmob.privacy.efpa; "
        "print([m for m in ('scipy.linalg', 'scipy.sparse.csgraph', 'scipy.fft') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
