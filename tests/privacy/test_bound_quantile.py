"""The bound chosen privately and the rescale (privmob.privacy.bound_choice; issue 40 item 4):
the choice's utility has sensitivity 1 per user over the public candidates, the mechanism's
distribution is the exponential mechanism's at the stated epsilon (a scale off by 2x fails),
the chosen bound lands near the true quantile, the rescale's totals have L1 sensitivity cap and
its stated error matches its spread, and the parts of the budget add up to epsilon exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privmob.errors import ConfigError
from privmob.privacy.bound_choice import (
    BoundChoice,
    bound_utilities,
    choose_bound,
    kept_and_lost,
    kept_share_lognormal,
    rescale_factor,
)
from privmob.privacy.payment import paid
from privmob.privacy.samplers import resolve


def histogram(counts: np.ndarray, cap: int) -> np.ndarray:
    """Users per record count, the dense layout of per_user_histogram_sql (index min(n, cap+1))."""
    return np.bincount(np.minimum(counts, cap + 1), minlength=cap + 2)


def test_the_utility_moves_by_at_most_one_when_one_user_comes_or_goes() -> None:
    rng = np.random.default_rng(0)
    cap = 30
    for _ in range(300):
        users = rng.integers(1, 60, size=int(rng.integers(1, 40)))
        extra = int(rng.integers(1, 80))  # any user, above the cap too
        for q in (0.05, 0.5, 0.9, 0.95):
            u = bound_utilities(histogram(users, cap), q, cap)
            u2 = bound_utilities(histogram(np.append(users, extra), cap), q, cap)
            assert u.shape == (cap,)
            assert np.max(np.abs(u - u2)) <= 1.0 + 1e-12


def test_the_bound_is_a_public_candidate_whatever_the_data() -> None:
    choice = BoundChoice(max_bound=20)
    with paid():
        for seed in range(30):
            users = np.array([1000] * 5)  # every user far above the candidates
            m = choose_bound(histogram(users, 20), choice, 0.5, resolve(seed))
            assert 1 <= m <= 20


def _em_probabilities(utilities: np.ndarray, epsilon: float) -> np.ndarray:
    w = np.exp(epsilon * (utilities - utilities.max()) / 2.0)
    p: np.ndarray = w / w.sum()
    return p


def test_the_choice_draws_from_the_exponential_mechanism_at_its_epsilon() -> None:
    """20,000 seeded draws against the exact exponential mechanism's probabilities (Delta_u =
    1). Tolerance 0.012 on every candidate: 4.7 standard deviations of a frequency at most
    0.5 (sd 0.0035), a false failure below 1e-4 over the 12 candidates; the same mechanism at
    twice the epsilon (noise scale off by 2x) is more than 0.04 away on some candidate."""
    cap, eps = 12, 0.4
    users = np.repeat(np.arange(1, 13), [3, 5, 4, 6, 2, 3, 1, 1, 2, 1, 1, 1])
    h = histogram(users, cap)
    choice = BoundChoice(quantile=0.9, max_bound=cap)
    exact = _em_probabilities(bound_utilities(h, 0.9, cap), eps)
    off = _em_probabilities(bound_utilities(h, 0.9, cap), 2 * eps)
    assert np.max(np.abs(off - exact)) > 0.04  # the test below can tell the two apart
    r = resolve(11)
    with paid():
        draws = [choose_bound(h, choice, eps, r) for _ in range(20_000)]
    freq = np.bincount(draws, minlength=cap + 1)[1:] / len(draws)
    assert np.max(np.abs(freq - exact)) < 0.012
    assert np.max(np.abs(freq - off)) > 0.03


def test_the_chosen_bound_lands_near_the_true_quantile() -> None:
    """Lognormal records per user (median 6, log-sd 0.9, 20,000 users), epsilon 0.1, 10 seeds:
    the chosen M's rank is within 1.5% of the users (300) of the 0.95 and 0.9 quantiles. A
    candidate 300 users off has utility <= -300, chosen with probability at most
    100 exp(-0.1 x 300 / 2) = 3e-5 per draw: a false failure below 1e-3 over the 20 draws."""
    gen = np.random.default_rng(5)
    users = np.maximum(1, np.rint(6 * np.exp(0.9 * gen.standard_normal(20_000)))).astype(int)
    h = histogram(users, 100)
    for q in (0.9, 0.95):
        choice = BoundChoice(quantile=q, max_bound=100)
        for seed in range(10):
            with paid():
                m = choose_bound(h, choice, 0.1, resolve(seed))
            below, at_most = np.mean(users < m), np.mean(users <= m)
            assert below <= q + 0.015 and at_most >= q - 0.015, (q, seed, m)


def test_kept_and_lost_against_the_users_and_their_sensitivity() -> None:
    rng = np.random.default_rng(3)
    cap = 40
    for _ in range(200):
        users = rng.integers(1, 90, size=int(rng.integers(1, 30)))
        m = int(rng.integers(1, cap + 1))
        k, lost = kept_and_lost(histogram(users, cap), m, cap)
        assert k == np.minimum(users, m).sum()
        assert lost == (np.minimum(users, cap) - np.minimum(users, m)).sum()
        extra = int(rng.integers(1, 200))
        k2, lost2 = kept_and_lost(histogram(np.append(users, extra), cap), m, cap)
        assert abs(k2 - k) + abs(lost2 - lost) <= cap  # L1 sensitivity: the cap


def test_the_rescale_factor_and_its_stated_error() -> None:
    """500 seeded draws of the factor on exact (K, L) = (20000, 4000), cap 50, epsilon 0.5
    (noise scale 100): the mean is within 0.01 of 1.2 (sd of the mean ~0.0003) and the spread
    within 15% of the stated factor_std (the sd of 500 draws is within 15% with probability
    > 0.999); at a scale off by 2x the spread would be twice as wide and fail."""
    r = resolve(4)
    with paid():
        draws = [rescale_factor(np.array([20_000, 4_000]), 50, 0.5, r) for _ in range(500)]
    factors = np.array([d.factor for d in draws])
    stated = float(np.mean([d.factor_std for d in draws]))
    assert abs(factors.mean() - 1.2) < 0.01
    assert abs(factors.std() / stated - 1) < 0.15
    assert draws[0].noise_scale == 100.0 and draws[0].cap == 50


@pytest.mark.parametrize("eps", [1.0, 0.3, 0.7, 1e-3, 2.5, 1 / 3, 10.0, 0.1 + 0.2])
@pytest.mark.parametrize("shares", [(0.1, 0.05), (0.05, 0.1), (0.07, 0.03), (1 / 3, 0.1)])
def test_the_parts_add_up_to_epsilon_exactly(eps: float, shares: tuple[float, float]) -> None:
    for auto in (True, False):
        for rescale in (True, False):
            c = BoundChoice(auto=auto, share=shares[0], rescale=rescale, rescale_share=shares[1])
            choice, resc, counts = c.epsilons(eps)
            assert choice + resc + counts == eps
            assert counts > 0 and (choice > 0) == auto and (resc > 0) == rescale


def test_bad_choices_are_refused_with_their_option() -> None:
    with pytest.raises(ConfigError, match="quantile"):
        BoundChoice(quantile=1.0)
    with pytest.raises(ConfigError, match="candidate"):
        BoundChoice(max_bound=1)
    with pytest.raises(ConfigError, match="share"):
        BoundChoice(share=0.6)
    with pytest.raises(ConfigError, match="share"):
        BoundChoice(rescale=True, rescale_share=0.0)


def test_the_kept_share_of_a_stated_expectation() -> None:
    # lognormal median 6, log-sd 0.9: E[min(X, 26)] / E[X] is 0.915 (worked by hand in the
    # module's docs); a bound far above keeps everything, a bound of 1 keeps 1 / E[X]
    assert kept_share_lognormal(26, 6, 0.9) == pytest.approx(0.915, abs=0.005)
    assert kept_share_lognormal(10**6, 6, 0.9) == pytest.approx(1.0, abs=1e-6)
    mean = 6 * math.exp(0.9**2 / 2)
    assert kept_share_lognormal(1, 6, 0.9) == pytest.approx(1 / mean, rel=0.02)
