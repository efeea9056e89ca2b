import math

import pytest

from privmob.errors import ConfigError
from privmob.privacy.costs import (
    Cost,
    PrivacyUnit,
    membership_posterior_bound,
    parallel,
    sequential,
    thresholding_delta,
    zcdp_to_epsilon,
)


def test_sequential_and_parallel_composition():
    a, b = Cost.pure(0.5), Cost.approx(0.25, 1e-6)
    s = a + b
    assert s.epsilon == pytest.approx(0.75) and s.delta == pytest.approx(1e-6)
    assert sequential([a, a, a]).epsilon == pytest.approx(1.5)
    p = parallel([a, b])
    assert p.epsilon == 0.5 and p.delta == 1e-6


def test_units_do_not_mix():
    with pytest.raises(ConfigError):
        Cost.pure(1) + Cost.pure(1, PrivacyUnit.TRIP)


def test_group_privacy_seed_003():
    # a user with 14 trips over 305 daily trip-level releases at 0.5 loses 7 per day
    daily = Cost.pure(0.5, PrivacyUnit.TRIP).for_group(14)
    assert daily.epsilon == pytest.approx(7.0) and daily.unit is PrivacyUnit.USER
    approx = Cost.approx(0.1, 1e-8, PrivacyUnit.TRIP).for_group(3)
    assert approx.delta == pytest.approx(3 * math.exp(0.2) * 1e-8)


def test_weekly_programme_vector():
    # seed 002: 52 weeks x 70 unique trips x 0.66
    year = (Cost.pure(0.66, PrivacyUnit.TRIP).for_group(70)) * 52
    assert year.epsilon == pytest.approx(2402.4)


def test_thresholding_and_posterior_vectors():
    assert thresholding_delta(0.66, 100) == pytest.approx(2.0998e-29, rel=1e-4)
    assert membership_posterior_bound(0.66) == pytest.approx(0.659260, abs=5e-7)


def test_zcdp_conversion():
    c = Cost.zcdp(0.5, 1e-6)
    assert c.epsilon == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))
    assert zcdp_to_epsilon(0.0, 1e-6) == 0.0
    with pytest.raises(ConfigError):
        zcdp_to_epsilon(0.5, 0.0)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_invalid_epsilon(bad):
    with pytest.raises(ConfigError):
        Cost.pure(bad)
