"""EFPA / EFPAG: DCT round trip, selection and noise calibrated to the L2 sensitivity.

The reference quantities (DCT matrix, scores, selection probabilities) are recomputed here from
the SPEC formulas, independently of privmob.privacy.efpa.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privmob.errors import ConfigError
from privmob.privacy.efpa import dct, efpa, efpag, fourier_perturb, idct
from privmob.privacy.samplers import Randomness

N = 168
L = 30
D2 = math.sqrt(L)  # L2 sensitivity of a pre-sampled density series (SPEC 4.3)


def dct_matrix(n: int) -> np.ndarray:
    """Orthonormal DCT-II written out: F_k = sqrt(2/n) c_k sum_i x_i cos(pi (2i+1) k / 2n)."""
    i = np.arange(n)
    k = i[:, None]
    mat = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * i[None, :] + 1) * k / (2 * n))
    mat[0] /= np.sqrt(2.0)
    return mat


def test_dct_round_trip_and_orthonormal() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, N)) * 50 + 100
    f = dct(x)
    np.testing.assert_allclose(f, x @ dct_matrix(N).T, atol=1e-9)
    np.testing.assert_allclose(idct(f), x, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(f, axis=1), np.linalg.norm(x, axis=1))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 167, 168, 169, 730])
def test_dct_matches_the_matrix_and_scipy_at_every_length(n: int) -> None:
    """The FFT route reorders even and odd samples: odd lengths, length 1 and 2, and a 2-D
    stack must all give the matrix's DCT (and SciPy's, which privmob no longer imports)."""
    import scipy.fft

    rng = np.random.default_rng(n)
    x = rng.normal(size=(4, n)) * 50 + 100
    f = dct(x)
    np.testing.assert_allclose(f, x @ dct_matrix(n).T, atol=1e-9)
    np.testing.assert_allclose(f, scipy.fft.dct(x, type=2, norm="ortho", axis=-1), atol=1e-9)
    np.testing.assert_allclose(idct(f), scipy.fft.idct(f, type=2, norm="ortho", axis=-1), atol=1e-9)
    np.testing.assert_allclose(idct(f), x, atol=1e-9)
    np.testing.assert_allclose(dct(x[1]), f[1], atol=1e-12)  # one series as a row of the stack
    before = f.copy()
    idct(f)
    np.testing.assert_array_equal(f, before)  # the input is not modified


def reference_probabilities(coeffs: np.ndarray, eps: float, d2: float, delta: float = 0.0):
    """P(k) of the exponential mechanism (eps/2, sensitivity d2) with the SPEC score."""
    n = coeffs.size
    ks = np.arange(1, n + 1)
    tail = np.array([math.sqrt(float((coeffs[k:] ** 2).sum())) for k in ks])
    if delta:
        sigma = math.sqrt(2 * math.log(4 / delta)) * d2 / (eps / 2)
        noise = np.sqrt(ks) * sigma
    else:
        noise = math.sqrt(2) * ks * d2 / (eps / 2)
    u = -(tail + noise)
    logits = (eps / 2) * u / (2 * d2)
    p = np.exp(logits - logits.max())
    return p / p.sum()


def chi2_pvalue(observed_k: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit, bins with expected count < 5 pooled into one."""
    n = observed_k.size
    counts = np.bincount(observed_k - 1, minlength=probs.size).astype(float)
    expected = probs * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def _series() -> tuple[np.ndarray, np.ndarray]:
    coeffs = np.zeros(N)
    coeffs[0] = 400.0
    coeffs[1:8] = [60.0, 45.0, 35.0, 25.0, 18.0, 12.0, 8.0]
    return coeffs, idct(coeffs)


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_selection_follows_the_exponential_mechanism_with_l2_sensitivity(delta: float) -> None:
    # Fixed seed; the chi-square test at level 1e-3 has a 0.1% false-failure rate for a
    # correct implementation. Power: the same sample must reject the distribution of a
    # mechanism whose sensitivity is off by 2x.
    eps = 1.0
    coeffs, x = _series()
    trials = 3000
    r = Randomness.for_tests(11)
    ks = np.array([fourier_perturb(x, eps, D2, r, delta=delta).k for _ in range(trials)])
    assert chi2_pvalue(ks, reference_probabilities(coeffs, eps, D2, delta)) > 1e-3
    assert chi2_pvalue(ks, reference_probabilities(coeffs, eps, 2 * D2, delta)) < 1e-3
    assert chi2_pvalue(ks, reference_probabilities(coeffs, eps, D2 / 2, delta)) < 1e-3


def _residuals(delta: float, trials: int = 400) -> tuple[np.ndarray, list[int], list[float]]:
    eps = 1.0
    coeffs, x = _series()
    r = Randomness.for_tests(5)
    res, ks, scales = [], [], []
    for _ in range(trials):
        out = fourier_perturb(x, eps, D2, r, delta=delta)
        f = dct(out.values)
        assert np.allclose(f[out.k :], 0.0, atol=1e-8)  # high frequencies are dropped
        res.append(f[: out.k] - coeffs[: out.k])
        ks.append(out.k)
        scales.append(out.noise_scale)
    return np.concatenate(res), ks, scales


def test_efpa_laplace_noise_scale_is_sqrt_k_times_l2_over_half_epsilon() -> None:
    # E|Laplace(b)| = b and Var|Laplace(b)|/b^2 = 1: with >= 400 residuals the mean of |r|/b
    # is within 0.25 of 1 with probability > 1 - 1e-6 (Chebyshev-free normal bound, 5 sigma);
    # a 2x scale error gives 2 or 0.5 and fails.
    res, ks, scales = _residuals(0.0)
    eps = 1.0
    expected = [math.sqrt(k) * D2 / (eps / 2) for k in ks]
    np.testing.assert_allclose(scales, expected)
    b = np.repeat(expected, ks)
    z = np.abs(res) / b
    assert z.size >= 400
    assert abs(z.mean() - 1.0) < 5 / math.sqrt(z.size)
    assert stats.kstest(res / b, stats.laplace.cdf).pvalue > 1e-3  # 0.1% false failures


def test_efpag_gaussian_sigma_matches_spec() -> None:
    delta = 1e-5
    res, _, scales = _residuals(delta)
    sigma = math.sqrt(2 * math.log(4 / delta)) * D2 / 0.5
    np.testing.assert_allclose(scales, sigma)
    # sample std within 5 standard errors (SE of std ~ sigma / sqrt(2n)); 2x fails
    assert abs(res.std() / sigma - 1.0) < 5 / math.sqrt(2 * res.size)
    assert stats.kstest(res / sigma, stats.norm.cdf).pvalue > 1e-3


def test_stack_uses_one_k_and_mixed_sensitivity_for_laplace() -> None:
    _, x = _series()
    stack = np.vstack([x, 2 * x, 0.5 * x])
    out = efpa(stack, 1.0, D2, 3, mixed_sensitivity=L)
    assert out.values.shape == stack.shape
    assert out.noise_scale == pytest.approx(math.sqrt(out.k) * L / 0.5)
    default = efpa(stack, 1.0, D2, 3)  # default: sqrt(m) * D2, always valid
    assert default.noise_scale == pytest.approx(math.sqrt(default.k) * math.sqrt(3) * D2 / 0.5)
    g = efpag(stack, 1.0, 1e-6, D2, 3)
    assert g.noise_scale == pytest.approx(math.sqrt(2 * math.log(4e6)) * D2 / 0.5)
    assert g.cost.delta == 1e-6 and default.cost.delta == 0


def test_refuses_bad_parameters() -> None:
    _, x = _series()
    with pytest.raises(ConfigError):
        efpag(x, 2.5, 1e-6, D2, 1)  # epsilon/2 >= 1: classical Gaussian bound does not hold
    with pytest.raises(ConfigError):
        efpag(x, 1.0, 0.0, D2, 1)
    with pytest.raises(ConfigError):
        efpa(x, -1.0, D2, 1)
    with pytest.raises(ConfigError):
        efpa(x, 1.0, D2, 1, mixed_sensitivity=1.0)


def test_secure_path_runs() -> None:
    _, x = _series()
    out = efpag(x, 1.0, 1e-6, D2)
    assert out.values.shape == x.shape and np.all(np.isfinite(out.values))
    out = efpa(x, 1.0, D2)
    assert np.all(np.isfinite(out.values))
