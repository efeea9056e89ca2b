"""The driver half of the mobility report: noise and DP selection on dense exact counts.

Every function here receives dense integer vectors over public domains (never records) and
returns noisy, post-processed values with the epsilon, the enforced L1 sensitivity and the
95% margin of error of its noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from privmob.json_types import JSONObject
from privmob.lazy_imports import np
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, calibrate
from privmob.privacy.quantiles import FIVE_NAMES, dp_histogram, dp_quantiles
from privmob.privacy.samplers import Randomness
from privmob.releases.counts import noisy_cells

from .config import DISTRIBUTIONS, MISSING_COLUMNS, UNITS, ReportConfig

if TYPE_CHECKING:
    import numpy.typing as npt

# sensitivities (L1) under user-level privacy, as multiples of M; None = constant (below)
_USER_TRIPS = {
    "trips_over_time": 1,
    "trips_per_weekday": 1,
    "trips_per_hour": 2,  # both ends of a trip are counted
    "visits_per_tile": 2,
    "visits_per_time_tile": 2,
    "od_flows": 1,
    "travel_time": 1,
    "jump_length": 1,
}
_PER_USER = ("trips_per_user", "radius_of_gyration", "user_tile_count", "mobility_entropy")


def sensitivity(analysis: str, cfg: ReportConfig, part: str = "") -> int:
    """Enforced L1 sensitivity of one analysis (or one ``part`` of dataset statistics).

    User level: a user has at most M trips (bounding), each with two ends. Trip level: one
    trip; a per-user value moves from one bin to another (2); one trip sits between two
    others, so up to 3 gaps change in *time between trips*.
    """
    m = cfg.max_trips if cfg.unit is PrivacyUnit.USER else 1
    if analysis == "dataset_statistics":
        return 1 if part == "users" else m
    if analysis == "missing_values":
        return m * len(MISSING_COLUMNS)  # per trip at most one per column
    if analysis in _USER_TRIPS:
        return _USER_TRIPS[analysis] * m
    if analysis == "time_between_trips":
        return max(1, cfg.max_trips - 1) if cfg.unit is PrivacyUnit.USER else 3
    if analysis in _PER_USER:
        return 1 if cfg.unit is PrivacyUnit.USER else 2
    raise KeyError(analysis)


@dataclass
class AnalysisResult:
    """One released analysis: noisy values and how they were made."""

    name: str
    epsilon: float
    sensitivity: dict[str, int]
    noise: JSONObject
    margin_of_error: dict[str, int]
    values: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return {
            "epsilon": self.epsilon,
            "sensitivity": dict(self.sensitivity),
            "noise": self.noise,
            "margin_of_error_95": dict(self.margin_of_error),
            **self.values,
        }


def counts(
    name: str,
    exact: npt.NDArray[np.int64],
    eps: float,
    delta1: int,
    cfg: ReportConfig,
    rng: Randomness,
    gaussian: Noise | None = None,
) -> tuple[npt.NDArray[np.int64], AnalysisResult]:
    """Noise on every cell of a dense count vector (zero cells and outliers cell included):
    Laplace at ``eps``, or the ``gaussian`` noise its composition chose (:mod:`.composition`)."""
    noise = gaussian or calibrate(cfg.noise_kind, eps, l1_sensitivity=delta1, unit=cfg.unit)[0]
    noisy = noisy_cells(exact, noise, rng)  # the count template's noise step
    res = AnalysisResult(
        name,
        eps,
        {"counts": delta1},
        {"counts": noise.to_dict()},
        {"counts": noise.margin_of_error(cfg.confidence)},
    )
    return noisy, res


def dataset_statistics(
    users: npt.NDArray[np.int64],
    kinds: npt.NDArray[np.int64],
    eps: float,
    cfg: ReportConfig,
    rng: Randomness,
    gaussian: dict[str, Noise | None] | None = None,
) -> AnalysisResult:
    """Users (Delta 1) and complete/incomplete trips (Delta M jointly), epsilon split in half
    (or the ``gaussian`` noise of a part); #trips and #trip ends are sums of the noisy counts
    (post-processing)."""
    g = gaussian or {}

    def half(
        part: str, exact: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], AnalysisResult]:
        delta1 = sensitivity("dataset_statistics", cfg, part)
        return counts(part, exact, eps / 2, delta1, cfg, rng, g.get(part))

    n_users, r_users = half(
        "users", users
    )  # users first: the order of draws is part of a seeded release
    n_kinds, r_kinds = half("trips", kinds)
    complete, incomplete = int(n_kinds[0]), int(n_kinds[1])
    return AnalysisResult(
        "dataset_statistics",
        eps,
        {"users": r_users.sensitivity["counts"], "trips": r_kinds.sensitivity["counts"]},
        {"users": r_users.noise["counts"], "trips": r_kinds.noise["counts"]},
        {
            "users": r_users.margin_of_error["counts"],
            "complete_trips": r_kinds.margin_of_error["counts"],
            "incomplete_trips": r_kinds.margin_of_error["counts"],
            "trips": 2 * r_kinds.margin_of_error["counts"],
        },
        {
            "users": int(n_users[0]),
            "complete_trips": complete,
            "incomplete_trips": incomplete,
            "trips": complete + incomplete,
            "trip_ends": 2 * complete + incomplete,
        },
    )


def distribution(
    name: str,
    exact: npt.NDArray[np.int64],
    eps: float,
    cfg: ReportConfig,
    rng: Randomness,
    gaussian: tuple[Noise, Cost] | None = None,
) -> AnalysisResult:
    """Histogram over the declared bins + outliers (eps * (1 - share), or the ``gaussian``
    noise its composition chose) and a DP five-number summary chosen among the declared bins,
    reported at their midpoints (eps * share, always pure: the exponential mechanism)."""
    bins = cfg.bins(name)
    delta1 = sensitivity(name, cfg)
    eps_q = eps * cfg.quantile_share
    hist = dp_histogram(
        exact, bins, eps - eps_q, delta1, cfg.noise_kind, rng, cfg.unit, calibrated=gaussian
    )
    five, _ = dp_quantiles(exact, bins, eps_q, delta1, rng=rng, unit=cfg.unit)
    return AnalysisResult(
        name,
        eps,
        {"histogram": delta1, "quantiles": delta1},
        {"histogram": hist.noise.to_dict(), "quantiles": {"kind": "exponential", "epsilon": eps_q}},
        {"histogram": hist.margin_of_error(cfg.confidence)},
        {
            "unit": UNITS[name],
            "bins": bins.to_dict(),
            "edges": bins.edges.tolist(),
            "counts": hist.counts.tolist(),
            "outliers": hist.outliers,
            "five_number_summary": dict(zip(FIVE_NAMES, five.tolist(), strict=True)),
        },
    )


def is_distribution(name: str) -> bool:
    return name in DISTRIBUTIONS
