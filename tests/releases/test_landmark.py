"""Landmark-private series (SPEC 4.5): the theorem on every path, noise scales, the release."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privmob.errors import BudgetError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant, write_release
from privmob.releases.landmark import (
    AdaptiveRule,
    Scheme,
    landmark_spend,
    perturb_series,
    publish_series,
    scheme_budgets,
    verify_landmark_budget,
)

LANDMARK_SCHEMES = [Scheme.UNIFORM, Scheme.SKIP, Scheme.ADAPTIVE]


def test_spec_vector_uniform() -> None:
    eps = scheme_budgets("uniform", 10, [1, 4, 7], 1.0)
    assert np.all(eps == 0.25)


def test_verify_refuses_an_overspend() -> None:
    verify_landmark_budget([0.25] * 5, [0, 1, 2], 1.0)
    with pytest.raises(BudgetError, match="t=3"):
        verify_landmark_budget([0.25, 0.25, 0.25, 0.3, 0.25], [0, 1, 2], 1.0)
    # landmarks alone may not exceed epsilon either
    with pytest.raises(BudgetError):
        verify_landmark_budget([0.5, 0.6, 0.0], [0, 1], 1.0)


@st.composite
def series_and_landmarks(draw: st.DrawFn) -> tuple[np.ndarray, list[int], float]:
    length = draw(st.integers(1, 60))
    values = draw(st.lists(st.integers(0, 50), min_size=length, max_size=length).map(np.array))
    marks = draw(st.lists(st.integers(0, length - 1), max_size=length, unique=True))
    epsilon = draw(st.floats(0.05, 5.0))
    return values, marks, epsilon


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=series_and_landmarks(),
    scheme=st.sampled_from(LANDMARK_SCHEMES),
    seed=st.integers(0, 2**16),
    step=st.sampled_from([0.0, 0.1, 0.5]),
    min_rate=st.sampled_from([0.05, 0.3, 1.0]),
)
def test_theorem_holds_on_every_path(
    data: tuple[np.ndarray, list[int], float],
    scheme: Scheme,
    seed: int,
    step: float,
    min_rate: float,
) -> None:
    values, marks, epsilon = data
    rule = AdaptiveRule(initial_rate=1.0, step=step, min_rate=min_rate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = perturb_series(values, marks, epsilon, scheme, sensitivity=2.0, rng=seed, rule=rule)
    spend = landmark_spend(res.epsilons, np.array(sorted(marks), dtype=np.int64))
    assert np.all(spend <= epsilon * (1 + 1e-9))
    assert np.all(res.epsilons >= 0)
    assert np.all(res.published == (res.epsilons > 0))
    assert res.values.shape == (1, values.size) and np.all(np.isfinite(res.values))


@settings(max_examples=30, deadline=None)
@given(data=series_and_landmarks(), seed=st.integers(0, 2**16))
def test_reference_schemes_keep_their_guarantees(
    data: tuple[np.ndarray, list[int], float], seed: int
) -> None:
    values, marks, epsilon = data
    user = perturb_series(values, marks, epsilon, "user", sensitivity=1.0, rng=seed)
    assert user.epsilons.sum() <= epsilon * (1 + 1e-9)  # every timestamp at once
    event = perturb_series(values, marks, epsilon, "event", sensitivity=1.0, rng=seed)
    assert np.all(event.epsilons <= epsilon)


def test_adaptive_redistributes_skipped_landmarks() -> None:
    # min_rate tiny and a flat series: many landmarks get skipped, later budgets grow
    values = np.zeros(300, dtype=np.int64)
    marks = list(range(0, 300, 10))
    res = perturb_series(
        values,
        marks,
        1.0,
        "adaptive",
        sensitivity=1.0,
        rng=3,
        rule=AdaptiveRule(step=0.3, min_rate=0.05),
    )
    base = 1.0 / (len(marks) + 1)
    assert res.epsilons.max() > base * 1.01
    verify_landmark_budget(res.epsilons, marks, 1.0)


def _replay_rates(res, sensitivity: float, rule: AdaptiveRule) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The sampling rates recomputed from the OUTPUT only (noisy values and budgets)."""
    rate, last = rule.initial_rate, None
    rates = []
    for t in range(res.values.shape[1]):
        rates.append(rate)
        if res.published[t]:
            cur = res.values[:, t]
            if last is not None:
                change = float(np.mean(np.abs(cur - last)))
                if sensitivity / res.epsilons[t] > change:
                    rate = max(rule.min_rate, rate - rule.step)
                else:
                    rate = min(rule.max_rate, rate + rule.step)
            last = cur
    return np.array(rates)


def test_adaptive_decisions_are_post_processing() -> None:
    """The rate path is a function of the released values and public parameters alone."""
    rng = np.random.default_rng(0)
    values = np.cumsum(rng.integers(-3, 4, size=(4, 200)), axis=1)
    rule = AdaptiveRule(initial_rate=0.8, step=0.2, min_rate=0.2)
    res = perturb_series(
        values, [5, 50, 51, 120], 2.0, "adaptive", sensitivity=3.0, rng=1, rule=rule
    )
    np.testing.assert_allclose(res.rates, _replay_rates(res, 3.0, rule))
    # approximated timestamps repeat the previous release exactly
    for t in np.flatnonzero(~res.published):
        np.testing.assert_array_equal(res.values[:, t], res.values[:, t - 1])


def test_skip_warns_and_republishes() -> None:
    values = np.arange(10, dtype=np.int64)
    with pytest.warns(UserWarning, match="reveal"):
        res = perturb_series(values, [0, 4, 5], 1.0, "skip", sensitivity=1.0, rng=2, fill_value=-1)
    assert res.values[0, 0] == -1  # nothing regular yet: the public fill value
    assert res.values[0, 4] == res.values[0, 3] == res.values[0, 5]
    assert res.epsilons.tolist() == [0, 1, 1, 1, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize("integer", [True, False])
def test_zero_and_full_landmark_shares_match_the_references(integer: bool) -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(0, 100, size=50)
    if not integer:
        values = values + 0.5
    kw = {"sensitivity": 2.0, "integer": integer}
    none = perturb_series(values, [], 1.0, "uniform", rng=9, **kw)
    event = perturb_series(values, [], 1.0, "event", rng=9, **kw)
    np.testing.assert_array_equal(none.epsilons, event.epsilons)
    np.testing.assert_array_equal(none.values, event.values)
    every = perturb_series(values, range(50), 1.0, "uniform", rng=9, **kw)
    user = perturb_series(values, [], 1.0, "user", rng=9, **kw)
    np.testing.assert_allclose(every.epsilons, user.epsilons, rtol=1e-15)
    np.testing.assert_array_equal(every.values, user.values)
    skip = perturb_series(values, [], 1.0, "skip", rng=9, **kw)
    np.testing.assert_array_equal(skip.values, event.values)


def _abs_noise_ratio(noise: np.ndarray, scale: float, integer: bool) -> float:
    """Mean |noise| divided by its expectation under the claimed scale."""
    if integer:
        q = math.exp(-1.0 / scale)
        expected = 2 * q / (1 - q * q)
    else:
        expected = scale
    return float(np.mean(np.abs(noise))) / expected


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("scheme", ["uniform", "skip", "adaptive", "user", "event"])
def test_noise_scale_matches_the_budget(scheme: str, integer: bool) -> None:
    """Per published timestamp, mean |noise| over 3000 zones is within 10% of Delta/eps_t.

    The standard error of the mean |noise| is ~1/sqrt(3000) = 1.8% of its mean, so 10% is
    5.5 standard errors: false-failure rate < 1e-7 per timestamp. A scale off by 2x gives a
    ratio of 2 or 0.5 and fails.
    """
    zones, length, sensitivity = 3000, 8, 3.0
    values = np.zeros((zones, length), dtype=np.int64 if integer else np.float64)
    res = (
        perturb_series(
            values,
            [1, 2, 6],
            1.5,
            scheme,
            sensitivity=sensitivity,
            rng=11,
            integer=integer,
            rule=AdaptiveRule(initial_rate=0.5, step=0.2),
        )
        if scheme != "skip"
        else _quiet_skip(values, sensitivity, integer)
    )
    checked = 0
    last_fresh = None
    for t in range(length):
        if not res.published[t]:
            continue
        if last_fresh is not None and np.array_equal(res.values[:, t], res.values[:, last_fresh]):
            pytest.fail("a fresh publication repeated the previous one")
        ratio = _abs_noise_ratio(res.values[:, t], sensitivity / res.epsilons[t], integer)
        assert 0.9 < ratio < 1.1, (t, ratio)
        last_fresh = t
        checked += 1
    assert checked >= 1


def _quiet_skip(values: np.ndarray, sensitivity: float, integer: bool):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return perturb_series(
            values, [1, 2, 6], 1.5, "skip", sensitivity=sensitivity, rng=11, integer=integer
        )


def test_a_wrong_scale_would_be_caught() -> None:
    """The check above fails for noise of twice the claimed scale."""
    noise = np.random.default_rng(0).laplace(0.0, 2.0, 3000)
    assert not 0.9 < _abs_noise_ratio(noise, 1.0, False) < 1.1


def test_publish_series_charges_and_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.set_budget("counts", 3.0, unit=PrivacyUnit.LANDMARK)
    acc = Accountant(ledger, "counts")
    values = np.arange(24, dtype=np.int64).reshape(2, 12)
    rel = publish_series(
        values,
        [3, 4],
        1.0,
        "uniform",
        sensitivity=1.0,
        accountant=acc,
        rng=4,
        timestamps=pd.date_range("2024-01-01", periods=12, freq="h"),
        zones=["a", "b"],
    )
    assert rel.unit is PrivacyUnit.LANDMARK and rel.cost.epsilon == 1.0
    assert not rel.for_publication
    assert ledger.spent("counts").epsilon == pytest.approx(1.0)
    budgets = rel.tables["budgets"]
    assert budgets["epsilon_t"].tolist() == [1 / 3] * 12
    assert set(rel.tables["series"]["zone"]) == {"a", "b"}
    assert rel.tables["series"]["value"].dtype == np.int64
    paths = write_release(rel, tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert meta["params"]["landmarks"] == [3, 4]
    assert meta["privacy"]["unit"] == "landmark"
    assert meta["max_landmark_spend"] <= 1.0 + 1e-12
    assert len(paths) == 3
    # the budget refuses a fourth release of epsilon 1 after two more
    publish_series(values, [3], 1.0, "skip", sensitivity=1.0, accountant=acc, rng=4)
    publish_series(values, [3], 1.0, "adaptive", sensitivity=1.0, accountant=acc, rng=4)
    with pytest.raises(BudgetError):
        publish_series(values, [3], 1.0, "uniform", sensitivity=1.0, accountant=acc, rng=4)


def test_skip_release_records_its_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.set_budget("s", 5.0, unit=PrivacyUnit.LANDMARK)
    rel = publish_series(
        np.ones(5), [2], 1.0, "skip", sensitivity=1.0, accountant=Accountant(ledger, "s"), rng=1
    )
    assert any("reveal" in w for w in rel.extra["warnings"])


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("scheme", ["uniform", "adaptive"])
def test_secure_noise_runs(scheme: str, integer: bool) -> None:
    values = np.zeros((500, 4), dtype=np.int64 if integer else np.float64)
    values.flags.writeable = False  # as pandas' to_numpy() can return
    res = perturb_series(values, [1], 1.0, scheme, sensitivity=1.0, integer=integer)
    assert np.any(res.values != 0)
    ratio = _abs_noise_ratio(res.values[:, 0], 1.0 / res.epsilons[0], integer)
    assert 0.75 < ratio < 1.25  # 500 draws: SE 4.5%, so 25% is 5.5 SE


def test_metadata_keeps_only_known_notes(ledger, monkeypatch):
    """A warning raised while the exact series is processed never reaches the metadata."""
    import warnings

    import privmob.releases.landmark as lm
    from privmob.releases.base import Accountant

    real = lm.perturb_series

    def leaky(*args, **kwargs):
        warnings.warn("value 123456 looks odd", UserWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(lm.release, "perturb_series", leaky)  # where publish_series finds it
    ledger.set_budget("s", 100.0, unit=PrivacyUnit.LANDMARK)
    acct = Accountant(ledger, "s")
    rel = lm.publish_series(
        np.arange(10.0), [2], 1.0, "skip", sensitivity=1.0, accountant=acct, rng=1
    )
    notes = rel.metadata()["warnings"]
    assert lm.SKIP_WARNING in notes
    assert not any("123456" in n for n in notes)
