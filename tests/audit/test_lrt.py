"""Likelihood-ratio membership attack (SPEC 7, seed 002)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import laplace

from privmob.audit.lrt import (
    ReleaseConfig,
    background_from_counts,
    cell_log_lr,
    log_lr_released,
    log_lr_suppressed,
    simulate,
)
from privmob.errors import ConfigError
from privmob.privacy.costs import membership_posterior_bound

EPS = 0.66
B = 1 / EPS
NO_THRESHOLD = -1e9  # every value released


# -- SPEC vectors ---------------------------------------------------------------------------------


def test_spec_vectors_continuous_laplace() -> None:
    assert log_lr_released(151.3, 150, B, "laplace") == pytest.approx(0.66, abs=5e-6)
    assert log_lr_released(150.4, 150, B, "laplace") == pytest.approx(-0.132, abs=5e-6)
    assert log_lr_suppressed(99, 100, B, "laplace") == pytest.approx(-0.39417, abs=5e-6)
    both = cell_log_lr(np.array([151.3, 150.4, 42.0]), np.array([150, 150, 99]), 100, B, "laplace")
    np.testing.assert_allclose(both, [0.66, -0.132, -0.39417], atol=5e-6)


# -- exact likelihoods against brute force --


def _dlap_pmf(j: np.ndarray, b: float) -> np.ndarray:
    q = math.exp(-1 / b)
    return (1 - q) / (1 + q) * q ** np.abs(j)


@pytest.mark.parametrize("b", [0.7, 1 / 0.66, 5.0])
@pytest.mark.parametrize("c", [0, 3, 99, 100, 140])
def test_discrete_laplace_lr_matches_pmf_sums(b: float, c: int) -> None:
    tau = 100
    support = np.arange(-2000, 2000)
    # released y: ratio of pmfs at y - (c+1) and y - c
    for y in (tau, tau + 1, c, c + 1, c + 7):
        if y < tau:
            continue
        expected = math.log(_dlap_pmf(np.array(y - c - 1), b) / _dlap_pmf(np.array(y - c), b))
        assert log_lr_released(y, c, b, "discrete-laplace") == pytest.approx(expected, abs=1e-12)
    p_in = _dlap_pmf(support, b)[c + 1 + support <= tau - 1].sum()
    p_out = _dlap_pmf(support, b)[c + support <= tau - 1].sum()
    got = log_lr_suppressed(c, tau, b, "discrete-laplace")
    assert got == pytest.approx(math.log(p_in / p_out), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("c", [0, 50, 99, 100, 130])
def test_rounded_laplace_lr_matches_scipy(c: int) -> None:
    tau, b = 100, 1 / 0.5
    d = laplace(scale=b)
    for y in (tau, tau + 3, c + 1, c - 2):
        if y < tau:
            continue

        def mass(lo: float) -> float:  # P(lo <= eta < lo + 1), from the accurate tail
            return d.sf(lo) - d.sf(lo + 1) if lo > 0 else d.cdf(lo + 1) - d.cdf(lo)

        p1, p0 = mass(y - 0.5 - c - 1), mass(y - 0.5 - c)
        got = log_lr_released(y, c, b, "laplace-rounded")
        assert got == pytest.approx(math.log(p1 / p0), rel=1e-9)
    expected = math.log(d.cdf(tau - 0.5 - c - 1) / d.cdf(tau - 0.5 - c))
    assert log_lr_suppressed(c, tau, b, "laplace-rounded") == pytest.approx(expected, rel=1e-9)


def test_extreme_tails_are_finite() -> None:
    c = np.array([0, 10_000])
    for model in ("laplace", "laplace-rounded", "discrete-laplace"):
        assert np.all(np.isfinite(log_lr_suppressed(c, 100, 0.1, model)))
        assert np.all(np.isfinite(log_lr_released(np.array([100, 20_000]), c, 0.1, model)))


# -- the simulation --
# Accuracy estimates from n balanced trials have standard deviation <= 0.5/sqrt(n); every
# comparison below allows 4.5 of those, a false-failure rate <= 3.4e-6 per comparison (one-sided
# normal tail), well under 1e-3 for the whole file.

N = 4000
TOL = 4.5 * 0.5 / math.sqrt(N)


def test_single_cell_accuracy_matches_closed_form() -> None:
    bg = background_from_counts([500])
    cont = simulate(ReleaseConfig(EPS, NO_THRESHOLD, "laplace"), [1], N, bg, rng=11)
    # Lambda > 0 iff y - c > 1/2: accuracy 1 - exp(-1/(2b))/2
    assert cont.accuracy[0] == pytest.approx(1 - 0.5 * math.exp(-EPS / 2), abs=TOL)
    disc = simulate(ReleaseConfig(EPS, NO_THRESHOLD, "discrete-laplace"), [1], N, bg, rng=12)
    # the discrete Laplace attains the bound exactly for one cell
    assert disc.accuracy[0] == pytest.approx(membership_posterior_bound(EPS), abs=TOL)


def test_trip_level_noise_leaks_far_above_claim() -> None:
    """Seed 002: with trip-level noise, accuracy rises far above the claimed 0.66 with k."""
    ks = [0, 1, 10, 30, 70]
    res = simulate(ReleaseConfig(EPS, 100, "laplace", "trip"), ks, N, rng=3)
    acc = dict(zip(ks, res.accuracy, strict=True))
    claimed = membership_posterior_bound(EPS)
    assert acc[0] == pytest.approx(0.5, abs=TOL)
    assert acc[1] <= claimed + TOL
    assert acc[30] > claimed + 0.15
    assert acc[70] > 0.9
    assert np.all(np.diff(res.accuracy) > -2 * TOL)
    # the attacker never beats the bound for the *effective* epsilon k * eps
    assert np.all(res.accuracy <= res.bound + TOL)


@pytest.mark.parametrize("noise", ["laplace", "discrete-laplace", "laplace-rounded"])
@pytest.mark.parametrize("bound", [1, 4])
def test_user_level_release_stays_below_its_bound(noise: str, bound: int) -> None:
    ks = [0, 1, 2, 4, 8, 70]
    res = simulate(ReleaseConfig(EPS, 100, noise, "user", bound=bound), ks, N, rng=5)
    assert np.all(res.epsilon_user[1:] == EPS)
    assert np.all(res.accuracy <= res.bound + TOL), res.to_frame()


def test_broken_scale_is_caught_by_the_bound_check() -> None:
    """The check above can fail: noise at half the scale beats the claimed bound."""
    cfg = ReleaseConfig(EPS, NO_THRESHOLD, "discrete-laplace", "user", bound=1, scale_factor=0.5)
    res = simulate(cfg, [1], N, background_from_counts([300]), rng=6)
    # expected accuracy e^{2 eps}/(1+e^{2 eps}) = 0.789, bound 0.659
    assert res.accuracy[0] > res.bound[0] + TOL


def test_multiple_periods_add_up() -> None:
    cfg = ReleaseConfig(EPS, 100, "discrete-laplace", "user", bound=2, periods=52)
    res = simulate(cfg, [0, 2], 2000, rng=8)
    assert res.epsilon_user[1] == pytest.approx(52 * EPS)
    assert res.accuracy[1] > 0.8  # a year of weekly releases gives the target away (0.88)


def test_config_errors() -> None:
    with pytest.raises(ConfigError):
        ReleaseConfig(epsilon=0)
    with pytest.raises(ConfigError):
        ReleaseConfig(noise="gaussian")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        simulate(ReleaseConfig(), [1], 1)
    with pytest.raises(ConfigError):
        background_from_counts([])
