"""The exact (epsilon, delta) of the discrete Gaussian, and noise scales rounded up.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Theorem 7: adding ``Y ~ N_Z(0, sigma^2)`` to an integer query of sensitivity ``Delta`` (one
coordinate changes by at most Delta) is (epsilon, delta)-DP for exactly

    delta = P[Y > eps sigma^2 / Delta - Delta / 2] - e^eps P[Y > eps sigma^2 / Delta + Delta / 2]

and no smaller delta. privmob uses it when a neighbour changes one cell by at most one
(``l1_sensitivity == 1``: population homes, OD at one trip per user); there it needs sigma 5.50
instead of the 6.51 that converting rho-zCDP with ``rho + 2 sqrt(rho ln(1/delta))`` gives at
epsilon 1, delta 1e-9. A neighbour that changes several cells keeps the zCDP route (rho =
Delta2^2 / (2 sigma^2) holds for the multivariate discrete Gaussian, CKS Theorem 14).

Scales are never rounded to nearest: :func:`scale_up` returns the smallest float at least the
exact quotient, so the noise is never (even by one ulp) below what the guarantee assumes.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")


def scale_up(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` rounded up to a float (never below the exact quotient)."""
    exact = Fraction(numerator) / Fraction(denominator)
    q = numerator / denominator
    while Fraction(q) < exact:
        q = math.nextafter(q, math.inf)
    return q


def up(x: float, operations: int = 4) -> float:
    """``x`` computed with up to ``operations`` correctly rounded float operations (sqrt, log,
    *, /: each within 2^-53 relative, log within 1 ulp), moved up past their total error."""
    return x * (1.0 + operations * 2.0**-51)


def sigma_for_rho(l2_sensitivity: float, rho: float) -> float:
    """The smallest float sigma with ``l2^2 / (2 sigma^2) <= rho`` exactly (Gaussian noise of
    sigma on a query of L2 sensitivity l2 is then rho-zCDP)."""
    sigma = l2_sensitivity / math.sqrt(2.0 * rho)
    need = Fraction(l2_sensitivity) ** 2 / (2 * Fraction(rho))
    while Fraction(sigma) ** 2 < need:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: int = 1) -> float:
    """Theorem 7 of CKS20: the smallest delta for which adding N_Z(0, sigma^2) to an integer
    query of sensitivity ``sensitivity`` is (epsilon, delta)-DP.

    Written as P[L <= Y < U] - (e^eps - 1) P[Y >= U] with L = floor(eps s^2/D - D/2) + 1 and
    U = floor(eps s^2/D + D/2) + 1, summed in floating point with a relative margin that
    covers its rounding (the result is an upper bound)."""
    if not (sigma > 0 and epsilon >= 0 and sensitivity >= 1):
        raise ValueError("need sigma > 0, epsilon >= 0 and an integer sensitivity >= 1")
    s2 = sigma * sigma
    d = int(sensitivity)
    lower = math.floor(epsilon * s2 / d - d / 2) + 1
    upper = math.floor(epsilon * s2 / d + d / 2) + 1
    # terms 12 sigma past the first of a sum are exp(-72) of it: below any float rounding
    reach = math.ceil(12 * sigma) + 10

    def w(start: int, stop: int) -> float:
        k = np.arange(start, stop, dtype=np.float64)
        return math.fsum(np.exp(-(k * k) / (2.0 * s2)).tolist())

    norm = 1.0 + 2.0 * w(1, reach + 1)
    inside = w(lower, upper)
    tail = w(upper, max(upper, 0) + reach + 1)
    delta = (inside - math.expm1(epsilon) * tail) / norm
    # inside, tail and norm each carry a relative error below 1e-12; the margin covers it
    return max(0.0, delta + 1e-12 * (inside + math.expm1(epsilon) * tail) / norm)


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: int = 1) -> float:
    """The smallest sigma (to 1e-9 relative) whose exact Theorem 7 delta at ``epsilon`` is at
    most ``delta``; the returned sigma satisfies it (checked)."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError("need epsilon > 0 and 0 < delta < 1")
    hi = float(sensitivity)
    while discrete_gaussian_delta(hi, epsilon, sensitivity) > delta:
        hi *= 2.0
    lo = hi / 2.0 if hi > sensitivity else 1e-3
    while (hi - lo) > 1e-9 * hi:
        mid = (lo + hi) / 2.0
        if discrete_gaussian_delta(mid, epsilon, sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    assert discrete_gaussian_delta(hi, epsilon, sensitivity) <= delta
    return hi
