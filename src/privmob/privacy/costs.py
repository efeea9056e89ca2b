"""Privacy costs, units of privacy and composition (SPEC sections 3 and 5).

A :class:`Cost` is what one release spends: ``epsilon`` and ``delta`` of (epsilon, delta)-DP,
and, for releases built from Gaussian noise, the ``rho`` of rho-zCDP from which
(epsilon, delta) was derived. Costs compose sequentially by addition (``a + b``), in parallel
over disjoint units by maximum (:func:`parallel`), and convert to a coarser unit by group
privacy (:meth:`Cost.for_group`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from privmob.errors import ConfigError
from privmob.json_types import JSONObject

#: the largest float below 1: a composed delta that reaches 1 is capped here (no guarantee left,
#: and any budget refuses it); a cap written as 1 - 1e-300 is exactly 1.0 in floating point.
ALMOST_ONE = math.nextafter(1.0, 0.0)


class PrivacyUnit(StrEnum):
    """What neighbouring datasets differ in (Tumult's ``ProtectedChange``): ``pm.PrivacyUnit``."""

    USER = "user"
    TRIP = "trip"
    EVENT = "event"
    LANDMARK = "landmark"

    def __str__(self) -> str:
        return self.value


#: the earlier name of :class:`PrivacyUnit` (the same enum)
Unit = PrivacyUnit


@dataclass(frozen=True)
class Cost:
    """The privacy cost of a release, for one unit of privacy.

    ``epsilon``/``delta`` is the (epsilon, delta)-DP guarantee (delta = 0: pure DP). ``rho`` is
    set when the release is rho-zCDP; epsilon/delta is then its conversion.
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    unit: Unit = Unit.USER

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number >= 0, got {self.epsilon}")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.rho is not None and not (self.rho >= 0 and math.isfinite(self.rho)):
            raise ConfigError(f"rho must be a finite number >= 0, got {self.rho}")

    # -- constructors -----------------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: float, unit: Unit = Unit.USER) -> Cost:
        """epsilon-DP."""
        return cls(epsilon=float(epsilon), unit=unit)

    @classmethod
    def approx(cls, epsilon: float, delta: float, unit: Unit = Unit.USER) -> Cost:
        """(epsilon, delta)-DP."""
        return cls(epsilon=float(epsilon), delta=float(delta), unit=unit)

    @classmethod
    def zcdp(cls, rho: float, delta: float, unit: Unit = Unit.USER) -> Cost:
        """rho-zCDP, stated as (rho + 2 sqrt(rho ln(1/delta)), delta)-DP."""
        return cls(
            epsilon=zcdp_to_epsilon(rho, delta), delta=float(delta), rho=float(rho), unit=unit
        )

    # -- composition -------------------------------------------------------------------
    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0

    def __add__(self, other: Cost) -> Cost:
        """Sequential composition (basic): epsilons and deltas add; rho adds when both have it."""
        if not isinstance(other, Cost):
            return NotImplemented
        if self.unit != other.unit:
            raise ConfigError(
                f"cannot compose a {self.unit}-level cost with a {other.unit}-level cost",
                hint="convert one of them with Cost.for_group first",
            )
        rho = self.rho + other.rho if self.rho is not None and other.rho is not None else None
        return Cost(
            self.epsilon + other.epsilon, min(self.delta + other.delta, ALMOST_ONE), rho, self.unit
        )

    def __mul__(self, k: int) -> Cost:
        """k-fold sequential composition of the same release (e.g. 52 weekly releases)."""
        if k < 0:
            raise ConfigError("a release cannot be repeated a negative number of times")
        rho = self.rho * k if self.rho is not None else None
        return Cost(self.epsilon * k, min(self.delta * k, ALMOST_ONE), rho, self.unit)

    __rmul__ = __mul__

    def for_group(self, size: int, unit: Unit = Unit.USER) -> Cost:
        """Group privacy: the cost for a coarser unit made of at most ``size`` finer units.

        (epsilon, delta) becomes (g epsilon, g e^{(g-1) epsilon} delta); rho becomes g^2 rho
        (Bun & Steinke 2016, Prop. 1.9).
        """
        if size < 1:
            raise ConfigError(f"group size must be >= 1, got {size}")
        g = int(size)
        delta = 0.0
        if self.delta > 0:  # in logs: e^{(g-1) epsilon} overflows for large groups
            log_delta = math.log(g) + (g - 1) * self.epsilon + math.log(self.delta)
            delta = min(math.exp(log_delta), ALMOST_ONE) if log_delta < 0 else ALMOST_ONE
        rho = self.rho * g * g if self.rho is not None else None
        return Cost(self.epsilon * g, delta, rho, unit)

    def describe(self) -> str:
        text = f"epsilon={self.epsilon:.6g}"
        if self.delta:
            text += f", delta={self.delta:.3g}"
        if self.rho is not None:
            text += f" (rho={self.rho:.6g}-zCDP)"
        return f"{text} per {self.unit}"

    def to_dict(self) -> JSONObject:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "unit": self.unit.value,
        }


def sequential(costs: Iterable[Cost]) -> Cost:
    """Sum of costs (releases on the same units)."""
    total: Cost | None = None
    for c in costs:
        total = c if total is None else total + c
    if total is None:
        raise ConfigError("no costs to compose")
    return total


def parallel(costs: Iterable[Cost]) -> Cost:
    """Parallel composition over disjoint units: the maximum epsilon and delta."""
    cs = list(costs)
    if not cs:
        raise ConfigError("no costs to compose")
    units = {c.unit for c in cs}
    if len(units) > 1:
        raise ConfigError("parallel composition needs costs of one unit")
    rhos = [c.rho for c in cs]
    rho = max(r for r in rhos if r is not None) if all(r is not None for r in rhos) else None
    return Cost(max(c.epsilon for c in cs), max(c.delta for c in cs), rho, cs[0].unit)


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP implied by rho-zCDP: rho + 2 sqrt(rho ln(1/delta))."""
    if not 0 < delta < 1:
        raise ConfigError(f"converting zCDP to (epsilon, delta) needs 0 < delta < 1, got {delta}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_rho(l2_sensitivity: float, sigma: float) -> float:
    """Gaussian noise sigma on a query of L2 sensitivity Delta2 is Delta2^2/(2 sigma^2)-zCDP."""
    return l2_sensitivity**2 / (2.0 * sigma**2)


def thresholding_delta(epsilon: float, tau: float) -> float:
    """delta of noise plus thresholding on a private key set (SPEC 5), per unit-sensitivity cell.

    Laplace of scale 1/epsilon on cells that exist only where the data has records, dropping
    noisy counts below tau: delta = 0.5 exp(-epsilon (tau - 1)).
    """
    return 0.5 * math.exp(-epsilon * (tau - 1))


def membership_posterior_bound(epsilon: float) -> float:
    """Largest posterior of membership after an epsilon-DP release, from a 50% prior."""
    return 1.0 / (1.0 + math.exp(-epsilon))
