"""Fourier perturbation of time series: EFPA and EFPAG (SPEC section 3; seed 004 5.3.2).

Both work on the orthonormal DCT-II of a series (orthonormal, so a change of L2 norm d in the
series is a change of L2 norm d in its coefficients). With budget epsilon:

1. epsilon/2 chooses how many leading coefficients k to keep, by the exponential mechanism
   (``privmob.privacy.mechanisms.noisy_max``) with score
   u(k) = -(sqrt(sum_{i>=k} F_i^2) + expected L2 norm of the noise on k coefficients),
   whose sensitivity is the L2 sensitivity Delta2 (the noise term is public).
2. epsilon/2 buys noise on F_0..F_{k-1}; the rest are zeroed and the series is inverted.

* EFPA (pure epsilon-DP): Laplace noise of scale sqrt(k) * Delta / (epsilon/2).
* EFPAG ((epsilon, delta)-DP): Gaussian noise sigma = sqrt(2 ln(4/delta)) * Delta2 / (epsilon/2),
  independent of k. sigma is at least the classical sqrt(2 ln(1.25/delta)) Delta2 / eps', so the
  Gaussian step is (epsilon/2, delta)-DP when epsilon/2 < 1 (Dwork & Roth, Thm A.1); larger
  budgets are refused.

**Several series at once.** A release often perturbs many series that one person can all touch
(the density release perturbs one series per cluster). This module then treats the stack as
one object so that the guarantee holds for the stack, not for each series alone:

* one k is chosen for the whole stack from the stacked score, whose sensitivity is the joint
  L2 sensitivity Delta2 of the stack;
* Gaussian noise is calibrated to the joint Delta2 (the Gaussian mechanism is an L2 mechanism);
* Laplace noise needs the L1 sensitivity of all retained coefficients, which is at most
  sqrt(k) * Delta21 where Delta21 bounds sum_s ||change of series s||_2 (the "mixed" L2,1
  sensitivity). For one series Delta21 = Delta2; for a stack the caller must supply it (the
  default sqrt(m) * Delta2 is always valid by Cauchy-Schwarz, but usually loose).

Applying single-series EFPA independently to each cluster with Delta2 = sqrt(l), as seed 004
describes, is *not* epsilon-DP for a person whose visits fall in several clusters: the losses
add up over the clusters. The stacked form above is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.privacy import samplers
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.discrete_gaussian import up
from privmob.privacy.mechanisms import Noise, NoiseKind, noisy_max
from privmob.privacy.samplers import Randomness, resolve

if TYPE_CHECKING:
    import numpy.typing as npt


def dct(series: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Orthonormal DCT-II along the last axis, from one FFT of the reordered series.

    ``x[0], x[2], ...`` followed by ``..., x[3], x[1]`` has the FFT ``V``; then
    ``DCT-II(x)[k] = Re(exp(-i pi k / 2n) V[k])``, scaled to an orthonormal transform. NumPy's
    FFT is used, not ``scipy.fft``: importing that costs about 0.1 s of the density release's
    start-up; tests/privacy/test_efpa.py checks both directions against the DCT matrix and
    against SciPy.
    """
    x = np.asarray(series, dtype=np.float64)
    n = x.shape[-1]
    v = np.concatenate([x[..., ::2], x[..., 1::2][..., ::-1]], axis=-1)
    k = np.arange(n)
    out: npt.NDArray[np.float64] = (np.fft.fft(v, axis=-1) * np.exp(-1j * np.pi * k / (2 * n))).real
    out *= math.sqrt(2.0 / n)
    out[..., 0] /= math.sqrt(2.0)
    return out


def idct(coefficients: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Inverse of :func:`dct` (orthonormal DCT-III along the last axis): the same steps
    backwards, ``V[k] = exp(i pi k / 2n) (X[k] - i X[n-k])`` with ``X[n] = 0``."""
    c = np.asarray(coefficients, dtype=np.float64)
    n = c.shape[-1]
    X = c * math.sqrt(n / 2.0)
    X[..., 0] *= math.sqrt(2.0)
    X_rev = np.zeros_like(X)
    X_rev[..., 1:] = X[..., :0:-1]  # X[n-k] for k >= 1; X[n] = 0
    k = np.arange(n)
    v = np.fft.ifft(np.exp(1j * np.pi * k / (2 * n)) * (X - 1j * X_rev), axis=-1).real
    out = np.empty_like(v)
    half = (n + 1) // 2
    out[..., ::2] = v[..., :half]
    out[..., 1::2] = v[..., half:][..., ::-1]
    return out


@dataclass(frozen=True)
class FourierPerturbation:
    """The output of EFPA/EFPAG: noisy series and how they were made."""

    values: npt.NDArray[np.float64]  # noisy series, same shape as the input
    k: int  # number of leading DCT coefficients kept (1..n)
    noise_kind: str  # "laplace" or "gaussian"
    noise_scale: float  # Laplace b or Gaussian sigma, on each kept coefficient
    cost: Cost

    def to_dict(self) -> JSONObject:
        return {
            "mechanism": "EFPA" if self.noise_kind == "laplace" else "EFPAG",
            "k": self.k,
            "noise_kind": self.noise_kind,
            "noise_scale": self.noise_scale,
            "cost": self.cost.to_dict(),
        }


def tail_energy(coefficients: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """For k = 1..n: sqrt of the energy dropped when keeping F_0..F_{k-1} (over all series)."""
    f = np.atleast_2d(coefficients)
    per_index = (f * f).sum(axis=0)  # energy of coefficient i over the stack
    # dropped(k) = sum_{i >= k} per_index[i], k = 1..n
    dropped = np.concatenate([np.cumsum(per_index[::-1])[::-1][1:], [0.0]])
    tail: npt.NDArray[np.float64] = np.sqrt(np.maximum(dropped, 0.0))
    return tail


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """EFPAG's noise: sigma = sqrt(2 ln(4/delta)) * Delta2 / (epsilon/2) (SPEC section 3)."""
    return up(math.sqrt(2.0 * math.log(4.0 / delta)) * l2_sensitivity / (epsilon / 2.0), 7)


def laplace_scale(k: int, epsilon: float, mixed_sensitivity: float) -> float:
    """EFPA's noise on each of k kept coefficients: sqrt(k) * Delta / (epsilon/2)."""
    return up(math.sqrt(k) * mixed_sensitivity / (epsilon / 2.0), 4)


def selection_scores(
    coefficients: npt.ArrayLike,
    epsilon: float,
    l2_sensitivity: float,
    *,
    delta: float = 0.0,
    mixed_sensitivity: float | None = None,
) -> npt.NDArray[np.float64]:
    """Scores u(k), k = 1..n (index k-1), of the exponential mechanism (sensitivity Delta2)."""
    f = np.atleast_2d(coefficients)
    m, n = f.shape
    ks = np.arange(1, n + 1, dtype=np.float64)
    if delta > 0:
        noise_norm = np.sqrt(m * ks) * gaussian_sigma(epsilon, delta, l2_sensitivity)
    else:
        d21 = mixed_sensitivity if mixed_sensitivity is not None else l2_sensitivity
        # E||Laplace(b) on m*k coefficients||_2 ~ sqrt(2 m k) b, b = sqrt(k) d21 / (eps/2)
        noise_norm = math.sqrt(2.0 * m) * ks * d21 / (epsilon / 2.0)
    score: npt.NDArray[np.float64] = -(tail_energy(f) + noise_norm)
    return score


def _check(epsilon: float, delta: float, l2: float, mixed: float | None) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not (l2 > 0 and math.isfinite(l2)):
        raise ConfigError(f"the L2 sensitivity must be > 0, got {l2}")
    if mixed is not None and mixed < l2 - 1e-12:
        raise ConfigError("the mixed (L2,1) sensitivity cannot be below the L2 sensitivity")
    if delta:
        if not 0 < delta < 1:
            raise ConfigError(f"delta must be in (0, 1), got {delta}")
        if epsilon / 2.0 >= 1.0:
            raise ConfigError(
                f"EFPAG's Gaussian step needs epsilon/2 < 1, got epsilon = {epsilon}",
                hint="use EFPA (delta = 0) or a smaller epsilon",
            )


def fourier_perturb(
    series: npt.ArrayLike,
    epsilon: float,
    l2_sensitivity: float,
    rng: Randomness | int | None = None,
    *,
    delta: float = 0.0,
    mixed_sensitivity: float | None = None,
    unit: PrivacyUnit = PrivacyUnit.USER,
) -> FourierPerturbation:
    """EFPA (``delta = 0``) or EFPAG (``delta > 0``) on one series or a stack of series.

    Guarantee: epsilon-DP (EFPA) or (epsilon, delta)-DP (EFPAG) for ``unit`` whenever one unit
    changes the stack by at most ``l2_sensitivity`` in L2 norm and (EFPA on a stack) by at most
    ``mixed_sensitivity`` in the sum of per-series L2 norms. See the module docstring.
    """
    x = np.asarray(series, dtype=np.float64)
    single = x.ndim == 1
    stack = np.atleast_2d(x)
    if stack.ndim != 2 or stack.shape[1] == 0:
        raise ConfigError("series must be a vector or an (m, n) array with n >= 1")
    m = stack.shape[0]
    if mixed_sensitivity is None:
        mixed_sensitivity = l2_sensitivity * math.sqrt(m)
    _check(epsilon, delta, l2_sensitivity, mixed_sensitivity)
    r = resolve(rng)
    coeffs = dct(stack)
    scores = selection_scores(
        coeffs, epsilon, l2_sensitivity, delta=delta, mixed_sensitivity=mixed_sensitivity
    )
    k = noisy_max(scores, epsilon / 2.0, l2_sensitivity, r) + 1
    kept = np.zeros_like(coeffs)
    if delta > 0:
        scale = gaussian_sigma(epsilon, delta, l2_sensitivity)
        kept[:, :k] = samplers.gaussian(coeffs[:, :k], scale, r)
        kind, cost = "gaussian", Cost.approx(epsilon, delta, unit)
    else:
        scale = laplace_scale(k, epsilon, mixed_sensitivity)
        kept[:, :k] = Noise(NoiseKind.LAPLACE_ROUNDED, scale).add_float(coeffs[:, :k], r)
        kind, cost = "laplace", Cost.pure(epsilon, unit)
    values = idct(kept)
    return FourierPerturbation(values[0] if single else values, int(k), kind, scale, cost)


def efpa(
    series: npt.ArrayLike,
    epsilon: float,
    l2_sensitivity: float,
    rng: Randomness | int | None = None,
    *,
    mixed_sensitivity: float | None = None,
    unit: PrivacyUnit = PrivacyUnit.USER,
) -> FourierPerturbation:
    """EFPA: epsilon-DP perturbation of a series of L2 sensitivity Delta2 (Laplace noise)."""
    return fourier_perturb(
        series, epsilon, l2_sensitivity, rng, mixed_sensitivity=mixed_sensitivity, unit=unit
    )


def efpag(
    series: npt.ArrayLike,
    epsilon: float,
    delta: float,
    l2_sensitivity: float,
    rng: Randomness | int | None = None,
    *,
    unit: PrivacyUnit = PrivacyUnit.USER,
) -> FourierPerturbation:
    """EFPAG: (epsilon, delta)-DP perturbation of a series of L2 sensitivity Delta2 (Gaussian)."""
    if not delta > 0:
        raise ConfigError("EFPAG needs delta > 0", hint="pass --delta, e.g. 1e-6, or use EFPA")
    return fourier_perturb(series, epsilon, l2_sensitivity, rng, delta=delta, unit=unit)
