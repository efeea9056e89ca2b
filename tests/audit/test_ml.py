"""Pyrgelis-style ML membership attack (seed 003 appendix, SPEC 7)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from tests.helpers import random_times

from privmob.audit.ml import (
    PrivateOD,
    attack,
    auc_table,
    bound_per_period,
    cell_index,
    from_trips,
    synthetic_membership_data,
)
from privmob.errors import ConfigError, InputError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.samplers import Randomness


@pytest.fixture(scope="module")
def small() -> object:
    # 40 users: each target's trips are a visible share of the daily matrix
    return synthetic_membership_data(
        users=40, zones=5, periods=100, n_targets=6, min_days=8, seed=3
    )


def test_cell_index_is_a_bijection_on_off_diagonal_pairs() -> None:
    z = 6
    o, d = np.meshgrid(np.arange(z), np.arange(z), indexing="ij")
    off = o != d
    idx = cell_index(o[off], d[off], z)
    assert sorted(idx.tolist()) == list(range(z * (z - 1)))


def test_bounding_keeps_at_most_t_trips_per_user_and_period() -> None:
    gen = np.random.default_rng(1)
    counts = gen.poisson(0.4, size=(30, 9, 12))
    for t in (1, 3):
        b = bound_per_period(counts, t, gen)
        assert b.sum() == np.minimum(counts.sum(axis=2), t).sum()
        assert np.all(b <= counts.sum(axis=0))
    # nothing dropped when T is above every user's daily total
    assert np.array_equal(bound_per_period(counts, 10**6, gen), counts.sum(axis=0))


@pytest.mark.parametrize(
    ("unit", "bound", "eps"), [(PrivacyUnit.TRIP, 1, 0.5), (PrivacyUnit.USER, 4, 1.0)]
)
def test_private_matrices_use_privmobs_calibrated_noise(small, unit, bound, eps) -> None:
    rel = PrivateOD(eps, unit, bound, tau=-(10**9))
    noisy = rel.release(small, Randomness.for_tests(4))
    base = small.bounded[bound] if unit == PrivacyUnit.USER else small.aggregate
    diff = (noisy - base).ravel()
    q = math.exp(-eps / bound)
    expected_std = math.sqrt(2 * q) / (1 - q)  # discrete Laplace of scale T/eps
    # n = 2000 cells, relative s.e. of the sample std about 2.5%: 15% tolerance is > 6 s.e.,
    # while a scale off by 2x changes the std by ~2x
    assert np.std(diff) == pytest.approx(expected_std, rel=0.15)


def test_threshold_is_post_processing(small) -> None:
    noisy = PrivateOD(1.0, tau=5).release(small, Randomness.for_tests(1))
    assert np.all((noisy == 0) | (noisy >= 5))


def test_user_level_needs_a_bounded_aggregate(small) -> None:
    with pytest.raises(ConfigError, match="bounded"):
        PrivateOD(1.0, PrivacyUnit.USER, 99).release(small, Randomness.for_tests(0))


@pytest.mark.slow
def test_attack_finds_membership_in_raw_and_loses_it_under_heavy_noise(small) -> None:
    res = attack(
        small,
        PrivateOD(0.005),
        n_estimators=5,
        n_jobs=1,
        rng=7,
    )
    assert set(res.setting) == {"raw/raw", "private/private", "raw/private"}
    assert (res.targets >= 4).all()
    raw = res[(res.setting == "raw/raw")].groupby("model").mean_auc.first()
    # small population: expected raw AUC ~0.7-0.8; 6 targets x ~40 test periods, s.e. ~0.04
    assert (raw > 0.6).all(), res
    heavy = res[(res.release.str.startswith("eps=0.005")) & (res.setting != "raw/raw")]
    # noise of scale 200 on counts ~10: chance level 0.5, +-0.2 is > 4 s.e.
    assert (heavy.mean_auc.sub(0.5).abs() < 0.2).all(), res
    table = auc_table(res)
    assert table.shape == (4, 2)
    assert not table.isna().any().any()


def test_from_trips_matches_direct_counts() -> None:
    gen = np.random.default_rng(5)
    n = 600
    trips = pd.DataFrame(
        {
            "uid": gen.integers(0, 20, n),
            "start_time": random_times(gen, n, "2024-01-01", 40 * 24, "h"),
            "origin": gen.integers(-1, 4, n),
            "destination": gen.integers(0, 4, n),
        }
    )
    data = from_trips(trips, 4, n_targets=3, min_days=3, bounds=(2,), seed=1)
    valid = trips[(trips.origin >= 0) & (trips.origin != trips.destination)]
    assert data.aggregate.sum() == len(valid)
    assert data.periods == 40
    assert data.weekday[0] == 0  # 2024-01-01 was a Monday
    uid = data.target_ids[0]
    mine = valid[valid.uid == uid]
    assert data.targets[0].sum() == len(mine)
    with pytest.raises(InputError):
        from_trips(trips.drop(columns="origin"), 4)
