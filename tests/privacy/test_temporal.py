"""Temporal privacy loss (SPEC 4.5): the SPEC vectors, an LP cross-check, landmark limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from privmob.errors import ConfigError
from privmob.privacy.temporal import (
    backward_loss,
    forward_loss,
    landmark_loss,
    loss_increment,
    max_budget_for_target,
    pair_loss,
    temporal_loss,
    transition_matrix,
    user_level_loss,
)

P = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]])


@pytest.mark.parametrize(
    ("alpha", "expected"),
    [(0.1, 0.050220), (0.5, 0.252399), (1, 0.494334), (2, 0.939752), (5, 1.557279)],
)
def test_spec_vector_loss_increment(alpha: float, expected: float) -> None:
    assert round(loss_increment(P, alpha), 6) == expected


def test_spec_vector_backward_loss() -> None:
    bpl = backward_loss(P, [0.1] * 60)
    expected = [0.1, 0.150220, 0.175571, 0.188392, 0.194880]
    np.testing.assert_allclose(np.round(bpl[:5], 6), expected, rtol=0, atol=1e-12)
    assert round(float(bpl[-1]), 6) == 0.201532
    assert np.all(np.diff(bpl) >= -1e-12)


def test_spec_vector_total_loss() -> None:
    tpl = temporal_loss(P, P, [0.1] * 10)
    expected = [0.201311, 0.251315, 0.276240, 0.288219, 0.293044]
    np.testing.assert_allclose(np.round(tpl, 6), expected + expected[::-1], rtol=0, atol=1e-12)


def test_identical_rows_give_no_extra_loss() -> None:
    same = np.tile([[0.2, 0.5, 0.3]], (3, 1))
    for alpha in (0.1, 1.0, 10.0):
        assert loss_increment(same, alpha) == 0.0
    np.testing.assert_allclose(temporal_loss(same, same, [0.3] * 6), 0.3)


def test_no_correlation_means_event_level() -> None:
    eps = [0.1, 0.2, 0.3]
    np.testing.assert_allclose(temporal_loss(None, None, eps), eps)


def _lp_sup(q: np.ndarray, d: np.ndarray, alpha: float) -> float:
    """log sup (q.x)/(d.x) s.t. x_j <= e^alpha x_k, by Charnes-Cooper: y = x/(d.x)."""
    n = q.size
    rows = []
    for j in range(n):
        for k in range(n):
            if j != k:
                row = np.zeros(n)
                row[j] = 1.0
                row[k] = -math.exp(alpha)
                rows.append(row)
    res = linprog(
        -q,
        A_ub=np.array(rows),
        b_ub=np.zeros(len(rows)),
        A_eq=d[None, :],
        b_eq=[1.0],
        bounds=[(0, None)] * n,
        method="highs",
    )
    assert res.status == 0
    return math.log(max(-res.fun, 1.0))


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_matches_linear_program(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    m = rng.dirichlet(np.full(n, 0.7), size=n)
    if seed == 0:
        m[0] = np.eye(n)[0]  # zeros in a row
    for alpha in (0.05, 0.3, 1.0, 3.0):
        lp = max(_lp_sup(m[a], m[b], alpha) for a in range(n) for b in range(n) if a != b)
        assert loss_increment(m, alpha) == pytest.approx(lp, abs=1e-7)


def test_loss_increment_bounds() -> None:
    rng = np.random.default_rng(7)
    m = rng.dirichlet(np.ones(4), size=4)
    prev = 0.0
    for alpha in np.linspace(0.0, 4.0, 21):
        cur = loss_increment(m, float(alpha))
        assert 0.0 <= cur <= alpha + 1e-12
        assert cur >= prev - 1e-12  # non-decreasing
        prev = cur
    # a permutation matrix carries everything: L(alpha) = alpha
    assert loss_increment(np.eye(3)[[1, 2, 0]], 0.7) == pytest.approx(0.7)
    assert pair_loss(np.array([1.0, 0.0]), np.array([0.0, 1.0]), math.inf) == math.inf


def test_forward_is_mirrored_backward() -> None:
    eps = [0.1, 0.4, 0.2, 0.3]
    np.testing.assert_allclose(forward_loss(P, eps), backward_loss(P, eps[::-1])[::-1])


def test_landmark_loss_limits() -> None:
    eps = np.full(10, 0.1)
    np.testing.assert_allclose(landmark_loss(P, P, eps, []), temporal_loss(P, P, eps))
    np.testing.assert_allclose(landmark_loss(P, P, eps, range(10)), user_level_loss(eps))
    # without correlation the landmark loss is the theorem's sum over L u {t}
    marks = [2, 5]
    expected = [0.3 if t not in marks else 0.2 for t in range(10)]
    np.testing.assert_allclose(landmark_loss(None, None, eps, marks), expected)


def test_landmark_loss_by_hand() -> None:
    """T = 3, L = {1}, t = 0: S = {0, 1}; alpha_0 = FPL over [0, 0]; alpha_1 = BPL over [1, 1]
    + FPL over [1, 2] - eps_1."""
    eps = [0.1, 0.2, 0.3]
    a0 = 0.1
    a1 = 0.2 + (loss_increment(P, 0.3) + 0.2) - 0.2
    assert landmark_loss(P, P, eps, [1])[0] == pytest.approx(a0 + a1)


def test_search_for_the_largest_budget() -> None:
    c = max_budget_for_target(1.0, backward=P, forward=P, length=10)
    assert float(temporal_loss(P, P, [c] * 10).max()) <= 1.0
    assert float(temporal_loss(P, P, [c * 1.001] * 10).max()) > 1.0
    # without correlation the answer is the target itself
    assert max_budget_for_target(0.5, backward=None, forward=None, length=4) == 0.5
    marks = [1, 7]
    c = max_budget_for_target(1.0, backward=P, forward=P, length=10, landmarks=marks)
    assert float(landmark_loss(P, P, [c] * 10, marks).max()) <= 1.0
    assert float(landmark_loss(P, P, [c * 1.001] * 10, marks).max()) > 1.0


def test_invalid_matrices_are_refused() -> None:
    with pytest.raises(ConfigError, match="sums to"):
        transition_matrix([[0.5, 0.4], [0.5, 0.5]])
    with pytest.raises(ConfigError, match="square"):
        transition_matrix([[1.0, 0.0]])
    with pytest.raises(ConfigError):
        landmark_loss(P, P, [0.1, 0.1], [5])
