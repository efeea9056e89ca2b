"""Statistical tests of the noise. Each goodness-of-fit test uses a fixed seed or, for the
secure sampler, a p-value threshold of 1e-4 (false-failure rate 1e-4 per test); each also
checks that the same test rejects a sampler whose scale is off by 2x, so it has power."""

import math

import numpy as np
import pytest
from scipy import stats

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate, noisy_max, rho_for_epsilon
from privmob.privacy.samplers import Randomness

ALPHA = 1e-4


def dlap_pmf(k: np.ndarray, b: float) -> np.ndarray:
    q = math.exp(-1 / b)
    return (1 - q) / (1 + q) * q ** np.abs(k)


def dgauss_pmf(k: np.ndarray, sigma: float) -> np.ndarray:
    support = np.arange(-60 * int(sigma + 1), 60 * int(sigma + 1) + 1)
    z = np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(k.astype(float) ** 2) / (2 * sigma**2)) / z


def chi2_pvalue(samples: np.ndarray, pmf, lo: int, hi: int) -> float:
    """Chi-square goodness of fit with bins lo..hi and two tail bins."""
    ks = np.arange(lo, hi + 1)
    p = pmf(ks)
    probs = np.concatenate(
        [[pmf(np.arange(lo - 2000, lo)).sum()], p, [pmf(np.arange(hi + 1, hi + 2001)).sum()]]
    )
    probs = probs / probs.sum()
    inside = samples[(samples >= lo) & (samples <= hi)] - lo
    counts = np.concatenate(
        [[np.sum(samples < lo)], np.bincount(inside, minlength=ks.size), [np.sum(samples > hi)]]
    )
    exp = probs * samples.size
    keep = exp >= 5
    obs = np.concatenate([counts[keep], [counts[~keep].sum()]])
    e = np.concatenate([exp[keep], [exp[~keep].sum()]])
    if e[-1] == 0:
        obs, e = obs[:-1], e[:-1]
    return float(stats.chisquare(obs, e).pvalue)


@pytest.mark.parametrize("b", [0.7, 4.0])
def test_secure_discrete_laplace_distribution(b):
    n = 40_000
    x = Noise(NoiseKind.DISCRETE_LAPLACE, b).add(np.zeros(n, dtype=np.int64))
    lo, hi = -int(6 * b) - 1, int(6 * b) + 1
    assert chi2_pvalue(x, lambda k: dlap_pmf(k, b), lo, hi) > ALPHA
    # power: the same test rejects the right samples judged against a scale 2x too large
    assert chi2_pvalue(x, lambda k: dlap_pmf(k, 2 * b), lo, hi) < ALPHA


def test_secure_discrete_gaussian_distribution():
    sigma, n = 3.0, 30_000
    x = Noise(NoiseKind.DISCRETE_GAUSSIAN, sigma).add(np.zeros(n, dtype=np.int64))
    assert chi2_pvalue(x, lambda k: dgauss_pmf(k, sigma), -12, 12) > ALPHA
    assert chi2_pvalue(x, lambda k: dgauss_pmf(k, sigma / 2), -12, 12) < ALPHA


def test_seeded_samplers_match_the_pmf_and_are_reproducible():
    b, sigma = 2.5, 4.0
    a1 = Noise(NoiseKind.DISCRETE_LAPLACE, b).add(np.zeros(50_000, dtype=np.int64), 7)
    a2 = Noise(NoiseKind.DISCRETE_LAPLACE, b).add(np.zeros(50_000, dtype=np.int64), 7)
    assert np.array_equal(a1, a2)
    assert chi2_pvalue(a1, lambda k: dlap_pmf(k, b), -15, 15) > ALPHA
    g = Noise(NoiseKind.DISCRETE_GAUSSIAN, sigma).add(np.zeros(50_000, dtype=np.int64), 8)
    assert chi2_pvalue(g, lambda k: dgauss_pmf(k, sigma), -16, 16) > ALPHA


def test_laplace_rounded_tail_matches_theory():
    b = 2.0
    x = Noise(NoiseKind.LAPLACE_ROUNDED, b).add(np.zeros(200_000, dtype=np.int64), 11)
    for a in (0, 2, 5):
        # |binomial estimate - p| within 5 standard errors (false failure ~ 1e-6)
        p = Noise(NoiseKind.LAPLACE_ROUNDED, b).tail(a)
        se = math.sqrt(p * (1 - p) / x.size)
        assert abs(np.mean(np.abs(x) > a) - p) < 5 * se


def test_noise_is_added_to_values():
    v = np.array([10, 20, 30], dtype=np.int64)
    out = Noise(NoiseKind.DISCRETE_LAPLACE, 1e-3).add(v)
    assert np.array_equal(out, v)  # scale 1e-3: noise is 0 with prob ~1 - 1e-434


@pytest.mark.parametrize("kind", list(NoiseKind))
def test_margin_of_error_is_the_95_percent_quantile(kind):
    n = Noise(kind, 3.0)
    m = n.margin_of_error(0.95)
    assert n.tail(m) <= 0.05 < n.tail(m - 1)


def test_calibrate_scales():
    noise, cost = calibrate("discrete-laplace", 0.5, l1_sensitivity=4)
    assert noise.scale == 8.0 and cost.epsilon == 0.5 and cost.delta == 0
    noise, cost = calibrate(
        "discrete-gaussian", 1.0, l1_sensitivity=4, l2_sensitivity=2, delta=1e-6
    )
    rho = 2**2 / (2 * noise.scale**2)
    assert rho == pytest.approx(rho_for_epsilon(1.0, 1e-6))
    assert cost.epsilon <= 1.0 and cost.epsilon == pytest.approx(1.0)
    with pytest.raises(ConfigError):
        calibrate("discrete-gaussian", 1.0, l1_sensitivity=1)  # needs delta
    with pytest.raises(ConfigError):
        calibrate("discrete-laplace", 0.0, l1_sensitivity=1)


def test_noisy_max_follows_the_exponential_mechanism():
    """Seeded path: selection frequencies match exp(eps u / 2) up to sampling error."""
    scores = np.array([0.0, 1.0, 2.0, 4.0])
    eps, n = 1.0, 20_000
    rng = Randomness.for_tests(3)
    picks = np.bincount([noisy_max(scores, eps, 1.0, rng) for _ in range(n)], minlength=4)
    p = np.exp(eps * scores / 2)
    p /= p.sum()
    assert stats.chisquare(picks, p * n).pvalue > ALPHA
    # the secure path picks the clear winner most of the time
    secure = [noisy_max(np.array([0.0, 0.0, 50.0]), 1.0, 1.0) for _ in range(50)]
    assert secure.count(2) >= 48


@pytest.mark.parametrize("kind", list(NoiseKind))
def test_add_later_secure_is_values_plus_noise_of_the_right_scale(kind):
    """Noise drawn in the background (secure source) has the same law as ``add`` and is
    added to the values given later; false-failure rate 1e-4 per kind (chi-square)."""
    b, n = 2.0, 40_000
    values = np.arange(n, dtype=np.int64) % 7
    x = Noise(kind, b).add_later(n)(values) - values
    assert x.dtype == np.int64
    if kind is NoiseKind.DISCRETE_LAPLACE:
        pmf, wrong = (lambda k: dlap_pmf(k, b)), (lambda k: dlap_pmf(k, 2 * b))
    elif kind is NoiseKind.DISCRETE_GAUSSIAN:
        pmf, wrong = (lambda k: dgauss_pmf(k, b)), (lambda k: dgauss_pmf(k, b / 2))
    else:  # rounded Laplace: P(|x| > a) within 5 standard errors, and 2b rejected
        for a in (0, 2, 5):
            p, p2 = Noise(kind, b).tail(a), Noise(kind, 2 * b).tail(a)
            se = math.sqrt(p * (1 - p) / n)
            assert abs(np.mean(np.abs(x) > a) - p) < 5 * se
        assert abs(np.mean(np.abs(x) > 2) - p2) > 5 * se
        return
    assert chi2_pvalue(x, pmf, -14, 14) > ALPHA
    assert chi2_pvalue(x, wrong, -14, 14) < ALPHA


def test_add_later_seeded_matches_add_and_checks_the_size():
    values = np.arange(1000, dtype=np.int64)
    for kind in NoiseKind:
        later = Noise(kind, 3.0).add_later(values.size, Randomness.for_tests(5))
        assert np.array_equal(later(values), Noise(kind, 3.0).add(values, 5))
    with pytest.raises(ValueError):
        Noise(NoiseKind.DISCRETE_LAPLACE, 3.0).add_later(10)(np.zeros(9, dtype=np.int64))
    with pytest.raises(ValueError):
        Noise(NoiseKind.DISCRETE_LAPLACE, 3.0).add_later(2, 1)(np.zeros(2))
