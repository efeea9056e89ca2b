"""Accuracy of the private OD matrix and how to choose epsilon (SPEC 4.1; seed 003 Thms 2-7).

Everything here is a function of *public* parameters only (epsilon, T, tau, alpha, beta, a
hypothetical count M): planning reads no data and costs no privacy.

Two noise kinds are covered, with b = T / epsilon:

* ``laplace-rounded`` (seed 003's Algorithm 1): continuous Laplace of scale b, then rounding
  half up. The integer error N = round(eta) has P(N = 0) = 1 - exp(-1/(2b)) and
  P(N = k) = sinh(1/(2b)) * exp(-|k|/b) for k != 0.
* ``discrete-laplace`` (privmob's default): P(N = k) = (1-q)/(1+q) * q^|k|, q = exp(-1/b).

Both are "two-sided geometric away from zero": P(N = k) = s * r^|k| (k != 0), P(N = 0) = p0,
r = exp(-1/b). All exact results below are derived from that form:

* survival P(N >= j) = s * r^j / (1 - r) for j >= 1 (and by symmetry for j <= 0);
* a cell of true count M is released (not suppressed) iff M + N >= tau, i.e. with probability
  P(N >= tau - M) (Thm 2 is 1 minus this for M < tau, Thm 3 is this for M >= tau);
* the difference D = N2 - N1 of two periods has, for d >= 1,
  P(D = d) = r^d * (2 p0 s + s^2 (2 r^2 / (1 - r^2) + d - 1)), so P(|D| > a) has a closed form
  (``difference_tail``).

The seed's Theorem 5 formula exp(-(a+1)/b) ((a+1)/b + 2) / 2 treats round(eta2) - round(eta1)
as if it were eta2 - eta1 shifted by one; it is kept (``thm5_difference_tail``) because the SPEC
vector for Theorem 7 comes from it, but the exact value for the rounded mechanism is
``difference_tail``. Smallest epsilons without a closed form are found by bisection on the
exact, monotone tail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind

SQRT2 = math.sqrt(2.0)
_LAPLACE_KINDS = (NoiseKind.LAPLACE_ROUNDED, NoiseKind.DISCRETE_LAPLACE)


def _kind(kind: NoiseKind | str) -> NoiseKind:
    k = NoiseKind(kind)
    if k not in _LAPLACE_KINDS:
        raise ConfigError(
            f"accuracy planning covers {', '.join(str(x) for x in _LAPLACE_KINDS)}; got {k}",
            hint="use --noise discrete-laplace or --noise laplace-rounded",
        )
    return k


def _check(epsilon: float, T: int) -> float:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if T < 1 or int(T) != T:
        raise ConfigError(f"T (max trips per user) must be an integer >= 1, got {T}")
    return T / epsilon


@dataclass(frozen=True)
class IntegerNoise:
    """The integer error of a released count: P(N=0) = p0, P(N=k) = s * r^|k| for k != 0."""

    kind: NoiseKind
    scale: float  # b = T / epsilon
    p0: float
    s: float
    r: float

    @classmethod
    def of(cls, kind: NoiseKind | str, epsilon: float, T: int = 1) -> IntegerNoise:
        k = _kind(kind)
        b = _check(epsilon, T)
        r = math.exp(-1.0 / b)
        if k is NoiseKind.DISCRETE_LAPLACE:
            c = (1.0 - r) / (1.0 + r)
            return cls(k, b, c, c, r)
        return cls(k, b, -math.expm1(-0.5 / b), math.sinh(0.5 / b), r)

    def pmf(self, k: int) -> float:
        return self.p0 if k == 0 else self.s * self.r ** abs(k)

    def sf(self, j: int) -> float:
        """P(N >= j) for an integer j."""
        if j >= 1:
            return self.s * self.r**j / (1.0 - self.r)
        return 1.0 - self.sf(1 - j)  # P(N >= j) = 1 - P(N <= j-1) = 1 - P(N >= 1-j)

    def tail(self, a: int) -> float:
        """P(|N| > a) for an integer a >= 0."""
        return 2.0 * self.sf(a + 1)

    def difference_tail(self, a: int) -> float:
        """P(|N2 - N1| > a) for independent copies N1, N2 and an integer a >= 0."""
        r, s = self.r, self.s
        c = 2.0 * self.p0 * s + s * s * (2.0 * r * r / (1.0 - r * r) - 1.0)
        m = a + 1
        geo = r**m / (1.0 - r)  # sum_{d>=m} r^d
        lin = r**m * (m / (1.0 - r) + r / (1.0 - r) ** 2)  # sum_{d>=m} d r^d
        return 2.0 * (c * geo + s * s * lin)


def _nonneg_int(name: str, value: int) -> int:
    if int(value) != value or value < 0:
        raise ConfigError(f"{name} must be an integer >= 0, got {value}")
    return int(value)


# -- Theorems 2 and 3: suppression --------------------------------------------------------------


def p_released(
    count: int, tau: int, epsilon: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """P(a cell of true count ``count`` is released, i.e. its noisy value is >= tau)."""
    count, tau = _nonneg_int("count", count), _nonneg_int("tau", tau)
    return IntegerNoise.of(kind, epsilon, T).sf(tau - count)


def thm2_stays_suppressed(
    count: int, tau: int, epsilon: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Theorem 2: a cell with count < tau stays suppressed with this probability.

    laplace-rounded: 1 - 0.5 exp(-(tau - 0.5 - M)/b) (the seed's formula, exact).
    """
    if count >= tau:
        raise ConfigError(f"Theorem 2 is about counts below tau ({count} >= {tau})")
    return 1.0 - p_released(count, tau, epsilon, T, kind)


def thm3_stays_released(
    count: int, tau: int, epsilon: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Theorem 3: a cell with count >= tau stays unsuppressed with this probability.

    laplace-rounded: 1 - 0.5 exp(-(M - tau + 0.5)/b) (SPEC's corrected sign).
    """
    if count < tau:
        raise ConfigError(f"Theorem 3 is about counts at or above tau ({count} < {tau})")
    return p_released(count, tau, epsilon, T, kind)


# -- Theorems 4 and 5: error of a released cell and of a difference of two periods -------------


def thm4_error_tail(
    alpha: int, epsilon: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Theorem 4: P(|M_hat - M| > alpha) for a cell released in both (exact for both kinds).

    laplace-rounded: exp(-(alpha + 0.5)/b); discrete-laplace: 2 q^(alpha+1) / (1 + q).
    """
    return IntegerNoise.of(kind, epsilon, T).tail(_nonneg_int("alpha", alpha))


def difference_error_tail(
    alpha: int, epsilon: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Exact P(|(M_hat2 - M_hat1) - (M2 - M1)| > alpha) for two independently noised periods."""
    return IntegerNoise.of(kind, epsilon, T).difference_tail(_nonneg_int("alpha", alpha))


def thm5_difference_tail(alpha: int, epsilon: float, T: int = 1) -> float:
    """Theorem 5 as printed in seed 003: exp(-(alpha+1)/b) ((alpha+1)/b + 2) / 2.

    This is the tail of eta2 - eta1 (continuous) at alpha + 1; it approximates, and for small
    alpha/b differs from, the exact tail of the rounded mechanism (``difference_error_tail``).
    """
    b = _check(epsilon, T)
    x = (_nonneg_int("alpha", alpha) + 1) / b
    return math.exp(-x) * (x + 2.0) / 2.0


# -- Theorems 6 and 7: the smallest epsilon for a target -----------------------------------------


def _beta(beta: float) -> float:
    if not 0 < beta < 1:
        raise ConfigError(f"beta (failure probability) must be in (0, 1), got {beta}")
    return beta


def _smallest_epsilon(tail_at: Callable[[float], float], beta: float) -> float:
    """Smallest epsilon with tail_at(epsilon) <= beta, for a tail decreasing in epsilon."""
    lo, hi = 1e-9, 1.0
    while tail_at(hi) > beta:
        hi *= 2.0
        if hi > 1e6:
            raise ConfigError("no epsilon below 1e6 meets this target")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if tail_at(mid) > beta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def thm6_epsilon(
    alpha: int, beta: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Smallest epsilon with P(|M_hat - M| > alpha) <= beta (Theorem 6).

    laplace-rounded: the closed form -T ln(beta) / (alpha + 0.5); discrete-laplace: bisection on
    the exact tail 2 q^(alpha+1)/(1+q).
    """
    alpha, beta = _nonneg_int("alpha", alpha), _beta(beta)
    if _kind(kind) is NoiseKind.LAPLACE_ROUNDED:
        _check(1.0, T)
        return -T * math.log(beta) / (alpha + 0.5)
    return _smallest_epsilon(lambda e: thm4_error_tail(alpha, e, T, kind), beta)


def thm7_epsilon(alpha: int, beta: float, T: int = 1) -> float:
    """Theorem 7 as in seed 003: epsilon >= T (-2 - W_{-1}(-2 beta e^-2)) / (alpha + 1).

    Inverts ``thm5_difference_tail``; needs beta <= 0.5/e.
    """
    alpha, beta = _nonneg_int("alpha", alpha), _beta(beta)
    _check(1.0, T)
    if beta > 0.5 / math.e:
        raise ConfigError(f"Theorem 7 needs beta <= 0.5/e = {0.5 / math.e:.4f}, got {beta}")
    from scipy.special import lambertw  # lazy: scipy.special costs ~0.5 s at every start

    w = lambertw(-2.0 * beta * math.exp(-2.0), k=-1)
    return T * (-2.0 - float(w.real)) / (alpha + 1)


def difference_epsilon(
    alpha: int, beta: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> float:
    """Smallest epsilon with the *exact* difference tail <= beta (bisection; both kinds)."""
    alpha, beta = _nonneg_int("alpha", alpha), _beta(beta)
    return _smallest_epsilon(lambda e: difference_error_tail(alpha, e, T, kind), beta)


def error_bound(
    epsilon: float, beta: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> int:
    """Smallest integer alpha with P(|M_hat - M| > alpha) <= beta (Theorem 4 inverted)."""
    return _smallest_within(IntegerNoise.of(kind, epsilon, T).tail, _beta(beta))


def difference_error_bound(
    epsilon: float, beta: float, T: int = 1, kind: NoiseKind | str = "laplace-rounded"
) -> int:
    """Smallest integer alpha with the exact difference tail <= beta."""
    return _smallest_within(IntegerNoise.of(kind, epsilon, T).difference_tail, _beta(beta))


def _smallest_within(tail: Callable[[int], float], beta: float) -> int:
    """Smallest integer a >= 0 with ``tail(a) <= beta``, for a tail that falls as ``a`` grows
    (doubling, then bisection)."""
    a = 0
    while tail(a) > beta:
        a = max(1, 2 * a)
    lo, hi = a // 2, a
    while lo < hi:
        mid = (lo + hi) // 2
        if tail(mid) > beta:
            lo = mid + 1
        else:
            hi = mid
    return lo


# -- heuristics -------------------------------------------------------------------------------


def heuristic_epsilon(alpha: float, T: int = 1) -> float:
    """Seed 003's rule of thumb: the Laplace standard deviation sqrt(2) T / eps <= alpha."""
    if alpha <= 0:
        raise ConfigError(f"alpha must be > 0, got {alpha}")
    return SQRT2 * T / alpha


def heuristic_tau(standard: float, epsilon: float, T: int = 1) -> tuple[float, float, float]:
    """(s - sqrt(2) T/eps, s, s + sqrt(2) T/eps) for an existing suppression standard s.

    Seed 003 writes sqrt(2)/eps (trip level, T = 1); the noise standard deviation is
    sqrt(2) T / eps in general.
    """
    sd = SQRT2 * _check(epsilon, T)
    return (standard - sd, float(standard), standard + sd)


@dataclass(frozen=True)
class Plan:
    """Everything ``privmob plan`` prints, for one (alpha, beta, T, noise kind)."""

    alpha: int
    beta: float
    T: int
    kind: str
    epsilon_cell: float  # Thm 6 (exact for the kind)
    epsilon_difference: float  # exact difference tail, by bisection
    epsilon_thm7: float | None  # seed's Lambert-W formula (laplace-rounded only)
    epsilon_heuristic: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def plan(alpha: int, beta: float, T: int = 1, kind: NoiseKind | str = "discrete-laplace") -> Plan:
    """The smallest epsilons meeting an error target alpha with confidence 1 - beta."""
    k = _kind(kind)
    thm7 = None
    if k is NoiseKind.LAPLACE_ROUNDED and beta <= 0.5 / math.e:
        thm7 = thm7_epsilon(alpha, beta, T)
    return Plan(
        alpha=alpha,
        beta=beta,
        T=T,
        kind=str(k),
        epsilon_cell=thm6_epsilon(alpha, beta, T, k),
        epsilon_difference=difference_epsilon(alpha, beta, T, k),
        epsilon_thm7=thm7,
        epsilon_heuristic=heuristic_epsilon(alpha, T),
    )
