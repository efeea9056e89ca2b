"""DP histograms over declared bins and DP quantiles chosen from a public grid (SPEC 3, 4.2).

The bins of a histogram are declared (lower bound, upper bound, width) from public knowledge,
never from the data. Values below the lower bound or at/above the upper bound go to one
*outliers* cell, which gets noise like every other cell.

A DP quantile is one of the public grid values (the midpoint of a declared bin, or a declared
bound for the outliers cells), chosen by the exponential mechanism
(:func:`privmob.privacy.mechanisms.noisy_max`) from the exact bin counts, so it is
never a raw data value. The utility of bin i for quantile q is minus the rank distance between
the target rank k = 1 + q (n - 1) and the ranks the bin holds, (L_i, U_i]:
``u_i = -max(L_i + 1 - k, k - U_i, 0)``. When one unit adds or removes at most ``s`` values,
L_i, U_i and k each move by at most s in a way that keeps every term within s, so Delta_u = s
(s = M for trip values under user-level privacy, 1 for one value per user).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate, noisy_max

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from privmob.privacy.samplers import Randomness
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

FIVE_NUMBERS = (0.0, 0.25, 0.5, 0.75, 1.0)
FIVE_NAMES = ("min", "q25", "median", "q75", "max")


@dataclass(frozen=True)
class Bins:
    """Declared regular bins [lo + i w, lo + (i+1) w) for i < n, plus one outliers cell.

    Dense layout used everywhere (engine and driver): index 0 = below ``lo``, 1..n = the bins,
    n + 1 = at or above ``hi``. Releases merge 0 and n + 1 into one outliers count.
    """

    lo: float
    hi: float
    width: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.hi > self.lo):
            raise ConfigError(f"histogram range needs lo < hi, got [{self.lo}, {self.hi})")
        if not self.width > 0:
            raise ConfigError(f"bin width must be > 0, got {self.width}")
        n = (self.hi - self.lo) / self.width
        if abs(n - round(n)) > 1e-9 * max(1.0, n):
            raise ConfigError(
                f"range [{self.lo}, {self.hi}) is not a whole number of bins of {self.width}"
            )
        if round(n) > 100_000:
            raise ConfigError("more than 100,000 bins", hint="choose a wider bin")

    @property
    def n(self) -> int:
        return round((self.hi - self.lo) / self.width)

    @property
    def edges(self) -> npt.NDArray[np.float64]:
        """The n + 1 public grid values lo, lo + w, ..., hi."""
        return self.lo + self.width * np.arange(self.n + 1, dtype=np.float64)

    @property
    def size(self) -> int:
        """Length of the dense layout (n bins + below + above)."""
        return self.n + 2

    def index(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Dense index of each value (numpy twin of :meth:`sql_index`)."""
        v = np.asarray(values, dtype=np.float64)
        idx = 1 + np.floor((v - self.lo) / self.width).astype(np.int64)
        idx = np.where(v < self.lo, 0, idx)
        return np.where(v >= self.hi, self.n + 1, idx)

    def sql_index(self, expr: str) -> str:
        """SQL expression (DuckDB and Spark) with the dense index of ``expr``."""
        return (
            f"CASE WHEN ({expr}) < {self.lo!r} THEN 0 WHEN ({expr}) >= {self.hi!r} "
            f"THEN {self.n + 1} ELSE 1 + CAST(FLOOR((({expr}) - {self.lo!r}) / {self.width!r}) "
            f"AS BIGINT) END"
        )

    def to_dict(self) -> JSONObject:
        return {"lo": self.lo, "hi": self.hi, "width": self.width, "bins": self.n}


def quantile_utilities(dense_counts: npt.ArrayLike, q: float) -> npt.NDArray[np.float64]:
    """Utility of each candidate cell of the dense layout for quantile ``q`` (see module doc)."""
    c = np.asarray(dense_counts, dtype=np.float64)
    if not 0.0 <= q <= 1.0:
        raise ConfigError(f"quantile must be in [0, 1], got {q}")
    upper = np.cumsum(c)
    lower = upper - c
    n = upper[-1] if upper.size else 0.0
    k = 1.0 + q * max(n - 1.0, 0.0)
    return -np.maximum(np.maximum(lower + 1.0 - k, k - upper), 0.0)


def candidate_values(bins: Bins) -> npt.NDArray[np.float64]:
    """The public value reported for each dense cell: the midpoint of its bin (a lower edge
    would bias every quantile low by half a bin); below-range reports lo and above-range
    reports hi (read: "at or beyond the declared bound"). Depends on the declared bins only,
    so reporting it for the chosen cell is post-processing of the mechanism's choice."""
    midpoints = bins.lo + bins.width * (np.arange(bins.n, dtype=np.float64) + 0.5)
    return np.concatenate([[bins.lo], midpoints, [bins.hi]])


def dp_quantiles(
    dense_counts: npt.ArrayLike,
    bins: Bins,
    epsilon: float,
    sensitivity: float,
    quantiles: tuple[float, ...] = FIVE_NUMBERS,
    rng: Randomness | int | None = None,
    unit: PrivacyUnit = PrivacyUnit.USER,
) -> tuple[npt.NDArray[np.float64], Cost]:
    """DP quantiles of values binned on the public grid ``bins``.

    Guarantee: ``epsilon``-DP for the given unit when one unit changes at most ``sensitivity``
    values; each quantile uses epsilon / len(quantiles) (sequential composition). The outputs
    are public bin midpoints (or declared bounds), sorted (post-processing) so that
    min <= q25 <= ... <= max.
    """
    c = np.asarray(dense_counts)
    if c.shape != (bins.size,):
        raise ConfigError(f"expected {bins.size} dense counts, got shape {c.shape}")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be > 0, got {epsilon}")
    from privmob.privacy.samplers import resolve  # where noise is drawn (issue 43)

    r = resolve(rng)
    eps_each = epsilon / len(quantiles)
    values = candidate_values(bins)
    chosen = [
        values[noisy_max(quantile_utilities(c, q), eps_each, sensitivity, r)] for q in quantiles
    ]
    return np.sort(np.asarray(chosen, dtype=np.float64)), Cost.pure(epsilon, unit)


@dataclass(frozen=True)
class DPHistogram:
    """A noisy histogram over declared bins: ``counts`` per bin and one ``outliers`` count."""

    bins: Bins
    counts: npt.NDArray[np.int64]
    outliers: int
    noise: Noise
    cost: Cost

    def margin_of_error(self, confidence: float = 0.95) -> int:
        return self.noise.margin_of_error(confidence)


def dp_histogram(
    dense_counts: npt.ArrayLike,
    bins: Bins,
    epsilon: float,
    sensitivity: float,
    kind: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    rng: Randomness | int | None = None,
    unit: PrivacyUnit = PrivacyUnit.USER,
    calibrated: tuple[Noise, Cost] | None = None,
) -> DPHistogram:
    """Noise on every declared bin and on the merged outliers cell.

    Guarantee: ``epsilon``-DP when one unit changes the dense counts by at most
    ``sensitivity`` in L1 (merging below/above into one cell cannot raise the L1 change).
    With ``calibrated`` (noise and its cost, e.g. a discrete Gaussian calibrated by the caller
    to an L2 bound that holds after the merge), that noise instead of Laplace at ``epsilon``.
    """
    c = np.asarray(dense_counts, dtype=np.int64)
    if c.shape != (bins.size,):
        raise ConfigError(f"expected {bins.size} dense counts, got shape {c.shape}")
    merged = np.concatenate([c[1:-1], [c[0] + c[-1]]])
    noise, cost = calibrated or calibrate(kind, epsilon, l1_sensitivity=sensitivity, unit=unit)
    noisy = noise.add(merged, rng)
    return DPHistogram(bins, noisy[:-1], int(noisy[-1]), noise, cost)
