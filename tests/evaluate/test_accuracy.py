"""Accuracy theorems (SPEC 4.1): SPEC vectors, and Monte Carlo against the real mechanism.

Monte Carlo checks draw n = 200_000 noisy copies of one count with ``Noise.add`` and a seeded
``Randomness``; each asserts |empirical - formula| <= 5 binomial standard errors, a false
failure rate below 1e-6 per check. With n this large a scale off by 2x moves every checked
probability by far more than 5 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privmob.errors import ConfigError
from privmob.evaluate import accuracy as acc
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness

KINDS = ["laplace-rounded", "discrete-laplace"]
N = 200_000


def _draws(kind: str, epsilon: float, T: int, count: int, seed: int) -> np.ndarray:
    noise, _ = calibrate(kind, epsilon, l1_sensitivity=T)
    return noise.add(np.full(N, count, dtype=np.int64), Randomness.for_tests(seed))


def _close(empirical: float, p: float) -> None:
    se = math.sqrt(max(p * (1 - p), 1e-12) / N)
    assert abs(empirical - p) <= 5 * se + 1e-9, (empirical, p, se)


# -- SPEC vectors -----------------------------------------------------------------------------


def test_spec_vectors() -> None:
    assert round(acc.thm2_stays_suppressed(10, 15, 0.5), 6) == 0.947300
    assert round(acc.thm3_stays_released(15, 15, 0.5), 6) == 0.610600
    assert round(acc.thm3_stays_released(20, 15, 0.5), 6) == 0.968036
    assert round(acc.thm6_epsilon(10, 0.05), 6) == 0.285308
    assert round(acc.thm7_epsilon(10, 0.05), 6) == 0.373909
    assert round(acc.heuristic_epsilon(10), 6) == 0.141421


def test_closed_forms_match_seed_formulas() -> None:
    b = 1 / 0.3
    for alpha in range(0, 20):
        assert acc.thm4_error_tail(alpha, 0.3) == pytest.approx(math.exp(-(alpha + 0.5) / b))
        # discrete Laplace tail is exactly SPEC section 3 and Noise.tail
        assert acc.thm4_error_tail(alpha, 0.3, kind="discrete-laplace") == pytest.approx(
            Noise(NoiseKind.DISCRETE_LAPLACE, b).tail(alpha)
        )
    for m in range(0, 15):
        assert acc.thm2_stays_suppressed(m, 15, 0.3) == pytest.approx(
            1 - 0.5 * math.exp(-(15 - 0.5 - m) / b)
        )


@pytest.mark.parametrize("kind", KINDS)
def test_difference_tail_matches_convolution(kind: str) -> None:
    n = acc.IntegerNoise.of(kind, 0.4, 2)
    ks = np.arange(-600, 601)
    p = np.array([n.pmf(int(k)) for k in ks])
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    d = np.convolve(p, p[::-1])
    ds = np.arange(-1200, 1201)
    for a in (0, 1, 3, 10, 25):
        assert n.difference_tail(a) == pytest.approx(d[np.abs(ds) > a].sum(), rel=1e-9)


# -- Monte Carlo against Noise.add ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_suppression_probabilities_monte_carlo(kind: str) -> None:
    eps, T, tau = 0.5, 1, 15
    for i, count in enumerate((10, 14, 15, 20)):
        released = np.mean(_draws(kind, eps, T, count, seed=100 + i) >= tau)
        _close(float(released), acc.p_released(count, tau, eps, T, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_error_tail_monte_carlo(kind: str) -> None:
    eps, T, count = 0.5, 2, 500
    x = _draws(kind, eps, T, count, seed=7)
    for alpha in (0, 2, 5, 10):
        _close(float(np.mean(np.abs(x - count) > alpha)), acc.thm4_error_tail(alpha, eps, T, kind))
    # a scale off by 2x is caught
    wrong = acc.thm4_error_tail(5, 2 * eps, T, kind)
    assert abs(float(np.mean(np.abs(x - count) > 5)) - wrong) > 10 * math.sqrt(wrong / N)


@pytest.mark.parametrize("kind", KINDS)
def test_difference_tail_monte_carlo(kind: str) -> None:
    eps, T = 0.3, 1
    x1 = _draws(kind, eps, T, 300, seed=11)
    x2 = _draws(kind, eps, T, 340, seed=12)
    err = (x2 - x1) - 40
    for alpha in (0, 3, 8, 15):
        _close(float(np.mean(np.abs(err) > alpha)), acc.difference_error_tail(alpha, eps, T, kind))


def test_seed_theorem5_underestimates_rounded_difference() -> None:
    # The seed's Theorem 5 is not the exact tail of round(eta2) - round(eta1): Monte Carlo
    # agrees with the exact formula and rejects the printed one at alpha = 3, eps = 0.3.
    x1 = _draws("laplace-rounded", 0.3, 1, 300, seed=21)
    x2 = _draws("laplace-rounded", 0.3, 1, 300, seed=22)
    emp = float(np.mean(np.abs(x2 - x1) > 3))
    _close(emp, acc.difference_error_tail(3, 0.3))
    assert abs(emp - acc.thm5_difference_tail(3, 0.3)) > 10 * math.sqrt(emp * (1 - emp) / N)


# -- smallest epsilon ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_smallest_epsilon_is_tight(kind: str) -> None:
    for alpha, beta, T in ((10, 0.05, 1), (3, 0.01, 4), (0, 0.2, 1)):
        e = acc.thm6_epsilon(alpha, beta, T, kind)
        assert acc.thm4_error_tail(alpha, e, T, kind) <= beta * (1 + 1e-9)
        assert acc.thm4_error_tail(alpha, e * 0.999, T, kind) > beta
        d = acc.difference_epsilon(alpha, beta, T, kind)
        assert acc.difference_error_tail(alpha, d, T, kind) <= beta * (1 + 1e-9)
        assert acc.difference_error_tail(alpha, d * 0.999, T, kind) > beta
        assert d > e  # a difference of two noisy cells is noisier than one cell


def test_thm7_inverts_printed_thm5() -> None:
    for alpha, beta in ((10, 0.05), (2, 0.1), (50, 0.001)):
        e = acc.thm7_epsilon(alpha, beta, T=3)
        assert acc.thm5_difference_tail(alpha, e, T=3) == pytest.approx(beta, rel=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_error_bound_inverts_tail(kind: str) -> None:
    a = acc.error_bound(0.5, 0.05, 1, kind)
    assert acc.thm4_error_tail(a, 0.5, 1, kind) <= 0.05 < acc.thm4_error_tail(a - 1, 0.5, 1, kind)
    d = acc.difference_error_bound(0.5, 0.05, 1, kind)
    assert d > a


def test_heuristic_tau_and_errors() -> None:
    lo, s, hi = acc.heuristic_tau(15, 0.5)
    assert (lo, s, hi) == pytest.approx((15 - 2 * math.sqrt(2), 15, 15 + 2 * math.sqrt(2)))
    with pytest.raises(ConfigError):
        acc.thm7_epsilon(10, 0.5)
    with pytest.raises(ConfigError):
        acc.thm6_epsilon(10, 0.05, kind="discrete-gaussian")
    with pytest.raises(ConfigError):
        acc.thm2_stays_suppressed(20, 15, 0.5)
    with pytest.raises(ConfigError):
        acc.thm4_error_tail(-1, 0.5)
