"""The tight conversion from rho-zCDP to (epsilon, delta)-DP.

Canonne, Kamath and Steinke (2020, Proposition 12 / Corollary 13): rho-zCDP is (alpha,
alpha rho)-RDP for every alpha > 1, and (alpha, tau)-RDP implies (epsilon, delta)-DP with

    epsilon = tau + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln(alpha)) / (alpha - 1),

so epsilon(delta) is the infimum of that expression over alpha. It is never larger than the
classical rho + 2 sqrt(rho ln(1/delta)) (:func:`privmob.privacy.costs.zcdp_to_epsilon`) and
agrees with OpenDP's ``make_zCDP_to_approxDP`` (tested). OpenDP exposes its conversion only
through a measurement (a user-defined one needs its "honest-but-curious" feature switched on
for the whole process), so the ledger computes the same bound here with scipy.
"""

from __future__ import annotations

import math
from functools import lru_cache

from privmob.errors import ConfigError


def _epsilon_at(alpha: float, rho: float, log_inv_delta: float) -> float:
    return alpha * rho + (
        log_inv_delta + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)
    ) / (alpha - 1.0)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP (CKS 2020)."""
    from scipy.optimize import minimize_scalar

    if not 0 < delta < 1:
        raise ConfigError(f"converting zCDP to (epsilon, delta) needs 0 < delta < 1, got {delta}")
    if rho < 0 or not math.isfinite(rho):
        raise ConfigError(f"rho must be a finite number >= 0, got {rho}")
    if rho == 0:
        return 0.0
    log_inv = math.log(1.0 / delta)
    # the classical bound's optimum alpha = 1 + sqrt(ln(1/delta)/rho) brackets the minimum
    guess = 1.0 + math.sqrt(log_inv / rho)
    res = minimize_scalar(
        _epsilon_at,
        bounds=(1.0 + 1e-9, max(4.0 * guess, 2.0)),
        args=(rho, log_inv),
        method="bounded",
        options={"xatol": 1e-12},
    )
    eps = float(res.fun)
    # never report more than the classical bound, never less than zero
    return max(0.0, min(eps, rho + 2.0 * math.sqrt(rho * log_inv)))


#: bisection steps of :func:`rho_for_zcdp_epsilon` (to the float resolution of rho)
_INVERSE_STEPS = 200


@lru_cache(maxsize=256)
def rho_for_zcdp_epsilon(epsilon: float, delta: float) -> float:
    """The largest rho (to float resolution) whose tight conversion :func:`zcdp_epsilon` at
    ``delta`` is at most ``epsilon``: the zCDP budget that an (epsilon, delta) budget buys.

    Found by bisection on :func:`zcdp_epsilon` itself (increasing in rho), so the ledger, which
    converts with the same function, finds the charge within the budget; the result is checked.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    lo, hi = 0.0, max(1.0, epsilon)
    while zcdp_epsilon(hi, delta) <= epsilon:  # epsilon >= rho, so this ends
        lo, hi = hi, 2.0 * hi
    for _ in range(_INVERSE_STEPS):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    assert zcdp_epsilon(lo, delta) <= epsilon
    return lo
