import math

import numpy as np
import pytest

from privmob.errors import ConfigError
from privmob.evaluate import similarity as s


def test_smape_hand_cases():
    assert s.smape([10, 0], [10, 0]) == 0.0
    # 2*|15-5|/(5+15) = 1.0 and 2*|0-4|/4 = 2.0 -> mean 1.5
    assert s.smape([5, 0], [15, 4]) == pytest.approx(1.5)
    assert s.smape(100, 50) == pytest.approx(2 * 50 / 150)


def test_js_base2_is_one_for_disjoint_and_zero_for_equal():
    assert s.js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert s.js_divergence([1, 0], [0, 1], base=math.e) == pytest.approx(math.log(2))
    assert s.js_distance([1, 0], [0, 1], base=math.e) == pytest.approx(math.sqrt(math.log(2)))
    assert s.js_divergence([3, 1], [6, 2]) == pytest.approx(0.0, abs=1e-12)


def test_js_half_overlap():
    # p=(1/2,1/2,0), q=(0,1/2,1/2): m=(1/4,1/2,1/4); KL(p||m) = 1/2*log2(2) = 0.5
    assert s.js_divergence([1, 1, 0], [0, 1, 1]) == pytest.approx(0.5)


def test_kl_hand_case_and_infinity():
    # KL((1/2,1/2) || (1/4,3/4)) in bits = 0.5*log2(2) + 0.5*log2(2/3)
    expected = 0.5 * 1 + 0.5 * math.log2(2 / 3)
    assert s.kl_divergence([1, 1], [1, 3]) == pytest.approx(expected)
    assert s.kl_divergence([1, 1], [1, 0]) == math.inf


def test_negative_noisy_counts_are_clipped():
    assert np.allclose(s.to_distribution([-3, 1, 3]), [0, 0.25, 0.75])
    assert np.allclose(s.to_distribution([-3, -1]), [0.5, 0.5])


def test_emd_1d_moves_mass_one_bin():
    # all mass moves from position 0 to position 10
    assert s.emd_1d([1, 0], [0, 1], [0, 10]) == pytest.approx(10.0)
    # half the mass moves 2 bins of width 5
    assert s.emd_1d([2, 0, 0], [1, 0, 1], [0, 5, 10]) == pytest.approx(5.0)


def test_emd_spatial_matches_haversine():
    lat = np.array([0.0, 0.0, 1.0])
    lng = np.array([0.0, 1.0, 0.0])
    d01 = s.haversine_m(0, 0, 0, 1)
    # one degree of longitude on the equator: 2*pi*R/360
    assert d01 == pytest.approx(2 * math.pi * s.EARTH_RADIUS_M / 360)
    assert s.emd_spatial([1, 0, 0], [0, 1, 0], lat, lng) == pytest.approx(d01, rel=1e-9)
    # half the mass stays, half moves to tile 2 -> 0.5 * d02
    d02 = s.haversine_m(0, 0, 1, 0)
    assert s.emd_spatial([2, 0, 0], [1, 0, 1], lat, lng) == pytest.approx(0.5 * d02, rel=1e-9)
    # two sources, two sinks: optimal pairing is the cheap one
    lat4 = np.array([0.0, 0.0, 0.0, 0.0])
    lng4 = np.array([0.0, 10.0, 0.1, 10.1])
    got = s.emd_spatial([1, 1, 0, 0], [0, 0, 1, 1], lat4, lng4)
    assert got == pytest.approx(s.haversine_m(0, 0, 0, 0.1), rel=1e-6)
    assert s.emd_spatial([1, 2, 3, 4], [1, 2, 3, 4], lat4, lng4) == 0.0


def test_kendall_tau_and_top_n():
    assert s.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert s.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # one swapped pair out of 6 -> (5-1)/6
    assert s.kendall_tau([1, 2, 3, 4], [2, 1, 3, 4]) == pytest.approx(4 / 6)
    assert s.top_n_coverage([9, 8, 7, 1], [9, 1, 8, 7], n=2) == 0.5
    assert s.top_n_coverage([9, 8, 7, 1], [8, 9, 0, 0], n=2) == 1.0
    with pytest.raises(ConfigError):
        s.top_n_coverage([1, 2], [1, 2, 3])
