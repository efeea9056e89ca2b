"""The discrete Gaussian's exact (epsilon, delta) (CKS20 Theorem 7) and scales rounded up."""

import math
from fractions import Fraction

import numpy as np
import pytest

from privmob.privacy.discrete_gaussian import (
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    scale_up,
    sigma_for_rho,
    up,
)
from privmob.privacy.mechanisms import calibrate


def privacy_curve_delta(sigma: float, epsilon: float, shift: int) -> float:
    """delta(eps) = sum_y max(0, P(y) - e^eps Q(y)) for P = N_Z(0, s^2), Q = N_Z(shift, s^2),
    summed directly over the support (the definition, not the theorem's closed form); the
    reverse direction is the same by symmetry."""
    y = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 60 + shift, dtype=np.float64)
    logp = -(y * y) / (2 * sigma * sigma)
    logq = -((y - shift) ** 2) / (2 * sigma * sigma)
    norm = np.exp(logp).sum()
    diff = np.exp(logp) - np.exp(epsilon + logq)
    return float(diff[diff > 0].sum() / norm)


@pytest.mark.parametrize(
    ("sigma", "epsilon", "shift"),
    [(5.5, 1.0, 1), (2.0, 0.5, 1), (12.3, 0.3, 3), (40.0, 0.1, 2), (1.2, 2.0, 1)],
)
def test_theorem7_delta_is_the_privacy_curve(sigma, epsilon, shift):
    got = discrete_gaussian_delta(sigma, epsilon, shift)
    want = privacy_curve_delta(sigma, epsilon, shift)
    assert got >= want  # an upper bound, as a guarantee must be ...
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)  # ... and a tight one


def test_calibrated_sigma_is_the_exact_one_not_the_zcdp_conversion():
    """epsilon 1, delta 1e-9, sensitivity 1: 5.50 (Theorem 7), not 6.51 (rho + 2 sqrt(...))."""
    noise, cost = calibrate(
        "discrete-gaussian", 1.0, l1_sensitivity=1, l2_sensitivity=1, delta=1e-9
    )
    assert noise.scale == pytest.approx(5.4998, abs=1e-3)
    assert privacy_curve_delta(noise.scale, 1.0, 1) <= 1e-9  # the guarantee holds ...
    assert privacy_curve_delta(noise.scale * (1 - 1e-6), 1.0, 1) > 1e-9 * (1 - 1e-4)  # tight
    assert (cost.epsilon, cost.delta) == (1.0, 1e-9)
    assert cost.rho == pytest.approx(1 / (2 * noise.scale**2))
    assert discrete_gaussian_sigma(1.0, 1e-9) == noise.scale


def test_several_cells_keep_the_zcdp_route():
    """Theorem 7 is one coordinate; a neighbour changing several cells keeps rho-zCDP."""
    noise, cost = calibrate(
        "discrete-gaussian", 1.0, l1_sensitivity=3, l2_sensitivity=3, delta=1e-9
    )
    assert 3**2 / (2 * noise.scale**2) <= cost.rho * (1 + 1e-12)
    assert noise.scale > 3 * 6.5


@pytest.mark.parametrize(("num", "den"), [(1, 3.0), (1, 0.3), (7, 0.1), (2, 1.7), (5, 3.1)])
def test_scales_round_up_never_to_nearest(num, den):
    exact = Fraction(num) / Fraction(den)
    got = scale_up(num, den)
    assert Fraction(got) >= exact and Fraction(math.nextafter(got, 0)) < exact
    noise, _ = calibrate("discrete-laplace", den, l1_sensitivity=num)
    assert Fraction(noise.scale) >= exact  # 1/3.0 rounded to nearest is below 1/3
    sigma = sigma_for_rho(num, den)
    assert Fraction(sigma) ** 2 >= Fraction(num) ** 2 / (2 * Fraction(den))


def test_up_covers_float_rounding():
    x = math.sqrt(2.0 * math.log(4.0 / 1e-6)) * 3.0 / (0.7 / 2.0)
    assert up(x, 7) > x and up(x, 7) < x * (1 + 1e-14)
