"""What a dataset has spent, by two valid accountings; the ledger refuses by the tighter.

- **basic**: epsilons and deltas of all entries add up (sequential composition).
- **zCDP**: entries that carry a rho (Gaussian releases, rho-zCDP) compose by adding rho, and
  the total is converted once to (epsilon, delta) at whatever delta the budget leaves after the
  other entries, with the tight conversion (:func:`privmob.privacy.zcdp.zcdp_epsilon`); the
  entries without rho add up as in the basic accounting.

Both are upper bounds on the privacy loss of the whole history, so a release fits if the
history plus the release fits the budget under either of them. The choice depends only on the
costs (public), never on the data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from privmob.privacy.zcdp import zcdp_epsilon

TOLERANCE = 1e-9  # relative slack for floating-point sums of epsilons


@dataclass(frozen=True)
class Accounts:
    """Spent under each accounting, for a budget (epsilon, delta)."""

    budget_epsilon: float
    budget_delta: float
    basic_epsilon: float
    basic_delta: float
    rho: float  # total rho of the entries that carry one
    #: epsilon by zCDP composition at delta = the budget's delta (None: not applicable, e.g.
    #: no entry carries rho or no delta is left for the conversion)
    zcdp_epsilon: float | None

    @property
    def basic_fits(self) -> bool:
        return (
            self.basic_epsilon <= self.budget_epsilon * (1 + TOLERANCE)
            and self.basic_delta <= self.budget_delta * (1 + TOLERANCE) + 1e-300
        )

    @property
    def zcdp_fits(self) -> bool:
        return self.zcdp_epsilon is not None and self.zcdp_epsilon <= self.budget_epsilon * (
            1 + TOLERANCE
        )

    @property
    def fits(self) -> bool:
        return self.basic_fits or self.zcdp_fits

    @property
    def epsilon(self) -> float:
        """Spent epsilon by the tighter valid accounting."""
        if self.zcdp_epsilon is not None and (self.zcdp_fits or not self.basic_fits):
            return min(self.basic_epsilon, self.zcdp_epsilon)
        return self.basic_epsilon

    @property
    def tighter(self) -> str:
        if self.zcdp_epsilon is not None and self.zcdp_epsilon < self.basic_epsilon:
            return "zCDP"
        return "basic"

    @property
    def epsilon_left(self) -> float:
        return max(0.0, self.budget_epsilon - self.epsilon)

    def describe(self) -> str:
        text = f"basic: epsilon={self.basic_epsilon:.6g}, delta={self.basic_delta:.3g}"
        if self.zcdp_epsilon is not None:
            text += (
                f"; zCDP: rho={self.rho:.6g} -> epsilon={self.zcdp_epsilon:.6g} at "
                f"delta={self.budget_delta:.3g}"
            )
        return text


def accounts(
    rows: Iterable[tuple[float, float, float | None]], budget_epsilon: float, budget_delta: float
) -> Accounts:
    """``rows``: (epsilon, delta, rho or None) of each entry, in the budget's unit."""
    basic_eps = basic_delta = 0.0
    rest_eps = rest_delta = 0.0
    rho = 0.0
    n_rho = 0
    for eps, delta, r in rows:
        basic_eps += eps
        basic_delta += delta
        if r is None:
            rest_eps += eps
            rest_delta += delta
        else:
            rho += r
            n_rho += 1
    zcdp: float | None = None
    delta_left = budget_delta - rest_delta
    if n_rho and 0 < delta_left < 1 and math.isfinite(rho):
        zcdp = rest_eps + zcdp_epsilon(rho, delta_left)
    return Accounts(budget_epsilon, budget_delta, basic_eps, basic_delta, rho, zcdp)
