"""The density release's public parameters (:class:`DensityConfig`) and its cost, known before
any data is read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

from privmob.errors import ConfigError
from privmob.prepare.presample import (
    HOURS_PER_WEEK,
)
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.efpa import gaussian_sigma
from privmob.surface import spelled

MAX_VISITS_PER_WEEK = HOURS_PER_WEEK  # after the one-visit-per-hour cap


TOTALS = ("one-visit", "rescaled", "sampled")


OUTLIERS_SHARE = 0.1  # default budget of the out-of-domain cell, as a share of epsilon


OUT_OF_DOMAIN = "visits outside the week or at no known tower"


class DensityOptions(TypedDict, total=False):
    """The :class:`DensityConfig` fields besides epsilon and the bound: the keywords
    ``Session.density`` passes on (each documented on :class:`DensityConfig`)."""

    delta: float
    method: str
    cover: bool
    totals: str
    totals_split: float
    clustering: bool
    tau: float | None
    fourier: bool
    smoothing: bool
    outliers_epsilon: float | None


@dataclass(frozen=True)
class DensityConfig:
    """Parameters of the density release. ``delta > 0`` selects EFPAG, 0 selects EFPA."""

    epsilon: float
    max_visits: int = 30
    delta: float = 0.0
    method: str = "scheme"  # "scheme" or "lpa" (naive Laplace baseline)
    cover: bool = True  # False: perturb the zones themselves
    totals: str = "one-visit"  # seed 004 5.4.1; "rescaled"; "sampled" (Algorithm 2 line 1)
    totals_split: float = 0.5  # share of the totals budget for the per-cell part
    clustering: bool = True
    tau: float | None = None  # None: sqrt(168) * per-coefficient noise std / 0.01 (seed 004)
    fourier: bool = True  # False: plain noise on every cluster count
    smoothing: bool = True
    outliers_epsilon: float | None = None  # out-of-domain cell; None: OUTLIERS_SHARE x epsilon

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if not 1 <= self.max_visits <= MAX_VISITS_PER_WEEK:
            raise ConfigError(f"max visits must be in 1..168, got {self.max_visits}")
        if self.method not in ("scheme", "lpa"):
            raise ConfigError(f"method must be 'scheme' or 'lpa', got {self.method!r}")
        if self.totals not in TOTALS:
            raise ConfigError(f"totals must be one of {TOTALS}, got {self.totals!r}")
        if not 0 < self.totals_split < 1:
            raise ConfigError("totals_split must be in (0, 1)")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.outliers_epsilon is not None and not (
            self.outliers_epsilon > 0 and math.isfinite(self.outliers_epsilon)
        ):
            raise ConfigError(
                f"the out-of-domain cell needs a budget > 0, got {self.outliers_epsilon}",
                hint=f"{spelled('--outliers-epsilon', 'outliers_epsilon=')} must be a positive "
                "number (SPEC 1: it is always released)",
            )

    @property
    def mechanism(self) -> str:
        if self.method == "lpa":
            return "LPA"
        return "EFPAG" if self.delta > 0 else "EFPA"

    @property
    def epsilon_outliers(self) -> float:
        """The out-of-domain cell's budget (public)."""
        if self.outliers_epsilon is None:
            return OUTLIERS_SHARE * self.epsilon
        return float(self.outliers_epsilon)

    def mechanism_cost(self) -> Cost:
        """The cost of the density mechanism (totals + EFPA(G)/LPA) over the week's domain."""
        if self.method == "lpa" or self.delta == 0:
            return Cost.pure(self.epsilon, PrivacyUnit.USER)
        return Cost.approx(self.epsilon, self.delta, PrivacyUnit.USER)

    def outliers_cost(self) -> Cost:
        """The cost of the out-of-domain cell (visits outside the week or at no tower)."""
        return Cost.pure(self.epsilon_outliers, PrivacyUnit.USER)

    def cost(self) -> Cost:
        """The whole release's cost, known before any data is read (sequential composition)."""
        return self.mechanism_cost() + self.outliers_cost()

    def default_tau(self) -> float:
        """Seed 004: tau = sqrt(168) * sigma / 0.01, sigma the noise std per coefficient when
        all 168 coefficients are kept (EFPA: with the worst-case mixed sensitivity l)."""
        l2 = math.sqrt(self.max_visits)
        half = self.epsilon / 2.0
        if self.delta > 0:
            sigma = gaussian_sigma(half, self.delta, l2)
        else:
            sigma = math.sqrt(2.0) * math.sqrt(HOURS_PER_WEEK) * self.max_visits / (half / 2.0)
        return math.sqrt(HOURS_PER_WEEK) * sigma / 0.01
