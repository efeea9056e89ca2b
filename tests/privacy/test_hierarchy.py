"""Consistent estimates over a public tree (privmob.privacy.hierarchy): the closed form is the
generalised least-squares estimate, its variances are the GLS covariance's diagonal, and the
non-negative step keeps every sum."""

import numpy as np
import pytest

from privmob.privacy.hierarchy import Tree, consistent, default_shares, margin_95, non_negative


def small_tree() -> Tree:
    """2 roots, 5 middle nodes, 12 leaves (unequal fan-outs)."""
    return Tree(
        (2, 5, 12),
        (np.array([0, 0, 1, 1, 1]), np.array([0, 0, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4])),
    )


def design(tree: Tree) -> list[np.ndarray]:
    """Each level's matrix from the leaves (dense: for the reference GLS only)."""
    mats = [np.eye(tree.sizes[-1])]
    for lv in range(len(tree.sizes) - 2, -1, -1):
        up = np.zeros((tree.sizes[lv], tree.sizes[lv + 1]))
        up[tree.parents[lv], np.arange(tree.sizes[lv + 1])] = 1
        mats.insert(0, up @ mats[0])
    return mats


def test_closed_form_is_the_generalised_least_squares_estimate():
    tree, var = small_tree(), [4.0, 2.0, 1.0]
    rng = np.random.default_rng(1)
    y = [rng.normal(5, 3, n) for n in tree.sizes]
    fit = consistent(tree, y, var)
    mats = design(tree)
    a = np.vstack(mats)
    w = np.concatenate([np.full(n, 1 / v) for n, v in zip(tree.sizes, var, strict=True)])
    cov = np.linalg.inv(a.T @ (a * w[:, None]))
    leaves = cov @ a.T @ (w * np.concatenate(y))
    for lv, m in enumerate(mats):
        np.testing.assert_allclose(fit.estimates[lv], m @ leaves, atol=1e-10)
        np.testing.assert_allclose(fit.variances[lv], np.diag(m @ cov @ m.T), atol=1e-10)
    # consistent: every node is the sum of its children
    for lv in range(2):
        np.testing.assert_allclose(tree.children_sum(lv, fit.estimates[lv + 1]), fit.estimates[lv])


def test_non_negative_keeps_every_sum_and_moves_nothing_already_non_negative():
    tree, var = small_tree(), [4.0, 2.0, 1.0]
    rng = np.random.default_rng(2)
    y = [rng.normal(0, 3, n) for n in tree.sizes]
    fit = consistent(tree, y, var)
    assert min(v.min() for v in fit.estimates) < 0  # something to fix
    out = non_negative(tree, fit.estimates, fit.variances)
    assert all((v >= 0).all() for v in out)
    for lv in range(2):
        np.testing.assert_allclose(tree.children_sum(lv, out[lv + 1]), out[lv], atol=1e-9)
    np.testing.assert_allclose(out[0], np.maximum(fit.estimates[0], 0))
    # a consistent non-negative input is its own projection
    leaves = rng.uniform(0, 5, 12)
    same = [m @ leaves for m in design(tree)]
    again = non_negative(tree, same, fit.variances)
    for a, b in zip(again, same, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_a_node_with_no_children_is_zero_with_no_variance():
    tree = Tree((3, 4), (np.array([0, 0, 2, 2]),))  # node 1 has no children
    fit = consistent(tree, [np.array([5.0, 7.0, 1.0]), np.ones(4)], [1.0, 1.0])
    assert fit.estimates[0][1] == 0 and fit.variances[0][1] == 0


def test_default_split_of_zone_pairs_under_borough_pairs_gives_the_boroughs_little():
    """263 zones in 6 boroughs (their sizes): a small share makes the borough pairs far more
    accurate than the sums of their zone pairs, at a small cost to the zones."""
    sizes = [1, 43, 61, 69, 20, 69]
    group = np.repeat(np.arange(6), sizes)
    o, d = np.divmod(np.arange(263 * 263), 263)
    keep = o != d
    tree = Tree((36, int(keep.sum())), ((group[o] * 6 + group[d])[keep],))
    shares = default_shares(tree, 2)
    assert sum(shares) == pytest.approx(1.0)
    assert 0.03 <= shares[0] <= 0.15
    from privmob.privacy.hierarchy import level_variances

    var = level_variances(tree, shares, 2)
    sums = tree.leaves_below(0)  # without a hierarchy: the sum of that many unit variances
    assert np.mean(var[0][sums > 0] / sums[sums > 0]) < 0.35
    assert np.mean(var[1]) < 1.3


def test_the_margin_covers_95_percent_of_laplace_errors():
    """The stated margin of a lone Laplace measurement is its exact 95% quantile.
    False-failure rate: 200,000 draws, the share outside has sd 0.0005: a miss beyond 0.004
    is below 1e-12."""
    rng = np.random.default_rng(3)
    b = 7.0
    m = margin_95(np.array(2 * b * b), laplace=True)
    outside = np.mean(np.abs(rng.laplace(0, b, 200_000)) > m)
    assert abs(outside - 0.05) < 0.004
