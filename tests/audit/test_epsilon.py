"""Empirical epsilon lower bound (SPEC 7) and its power against a broken mechanism."""

from __future__ import annotations

import math

import pytest

from privmob.audit.epsilon import clopper_pearson_lower, clopper_pearson_upper, empirical_epsilon
from privmob.audit.lrt import ReleaseConfig, background_from_counts, epsilon_audit, simulate
from privmob.errors import ConfigError


def test_clopper_pearson_closed_forms() -> None:
    # zero errors: upper bound solves (1 - p)^n = alpha
    assert clopper_pearson_upper(0, 100, 0.025) == pytest.approx(1 - 0.025 ** (1 / 100))
    # all errors: lower bound solves p^n = alpha
    assert clopper_pearson_lower(100, 100, 0.025) == pytest.approx(0.025 ** (1 / 100))
    assert clopper_pearson_upper(100, 100, 0.025) == 1.0
    lo, hi = clopper_pearson_lower(30, 100, 0.025), clopper_pearson_upper(30, 100, 0.025)
    assert lo < 0.3 < hi
    with pytest.raises(ConfigError):
        clopper_pearson_upper(5, 3, 0.05)


def test_point_estimate_inverts_the_tradeoff() -> None:
    eps = 1.3
    err = 1 / (1 + math.exp(eps))  # the optimal test's FPR = FNR for an eps-DP mechanism
    n = 10**9
    audit = empirical_epsilon(round(err * n), n, round(err * n), n)
    assert audit.epsilon_point == pytest.approx(eps, rel=1e-6)
    assert audit.epsilon_lower == pytest.approx(eps, abs=2e-3)
    assert audit.epsilon_lower < audit.epsilon_point
    # delta loosens the bound: ln((1 - delta - FPR)/FNR)
    with_delta = empirical_epsilon(round(err * n), n, round(err * n), n, delta=0.1)
    assert with_delta.epsilon_point == pytest.approx(math.log((1 - 0.1 - err) / err), rel=1e-6)
    # a useless attack gives 0, not a negative epsilon
    assert empirical_epsilon(500, 1000, 500, 1000).epsilon_lower == 0.0


# Confidence 0.999: for a correct mechanism the lower bound exceeds the true epsilon with
# probability <= 1e-3 (the union bound over the two Clopper-Pearson upper bounds), so the
# "correct mechanism passes" test fails falsely at most 0.1% of seeds. The broken mechanism
# has true epsilon 4 against a claim of 1; with 20,000 trials its lower bound is about 3.8.

CONF = 0.999
TRIALS = 20_000


def _single_cell(scale_factor: float, seed: int) -> tuple[float, bool]:
    cfg = ReleaseConfig(
        epsilon=1.0,
        tau=-1e9,
        noise="discrete-laplace",
        style="user",
        bound=1,
        scale_factor=scale_factor,
    )
    res = simulate(cfg, [1], TRIALS, background_from_counts([1000]), rng=seed)
    audit = epsilon_audit(res, 1, confidence=CONF)
    return audit.epsilon_lower, audit.violated


def test_correct_mechanism_is_not_flagged() -> None:
    lower, violated = _single_cell(1.0, seed=21)
    assert not violated
    assert 0.85 < lower <= 1.0  # the attack is optimal, so the bound is nearly tight


def test_broken_mechanism_is_caught() -> None:
    lower, violated = _single_cell(0.25, seed=22)  # noise scale 1/4 of the correct one
    assert violated
    assert lower > 3.0


def test_trip_level_release_breaks_a_user_level_claim() -> None:
    """Audit the seed-002 release against the 0.66 it claims for people, at k = 10 trips."""
    res = simulate(ReleaseConfig(0.66, 100, "laplace", "trip"), [10], TRIALS, rng=23)
    audit = empirical_epsilon(
        int(res.false_positives[0]),
        int(res.n_out[0]),
        int(res.false_negatives[0]),
        int(res.n_in[0]),
        confidence=CONF,
        claimed=0.66,
    )
    assert audit.violated
    assert "VIOLATED" in audit.describe()
