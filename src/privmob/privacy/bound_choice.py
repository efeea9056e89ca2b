"""A contribution bound chosen for accuracy: a DP quantile of records per user, and a DP
estimate of what the bound cut (issue 40, item 4).

The bound M (the most records counted per user) trades bias for noise: users with more than M
records lose records (every count is biased low), and the noise scale is M / epsilon. Nothing
about the data may set M (SPEC 1.2), but a *DP selection* of M may (SPEC 1.3):

* **choice** (:func:`choose_bound`): the exponential mechanism (report noisy max,
  :func:`privmob.privacy.mechanisms.noisy_max`) picks the q-quantile of records per user among
  the public candidates 1, 2, ..., ``max_bound``, from the users' exact record counts (a user
  above ``max_bound`` counts as ``max_bound``). Each user holds one value, so adding or
  removing one user moves every rank-distance utility of
  :func:`privmob.privacy.quantiles.quantile_utilities` by at most 1: Delta_u = 1, and the
  choice is ``epsilon_choice``-DP per user whatever the counts are.
* **rescale** (:func:`kept_and_lost`, :func:`rescale_factor`): two noisy totals, K = sum over
  users of min(x, M) (the records kept) and L = sum of min(x, C) - min(x, M) (the records cut,
  counted up to the public cap C = ``max_bound``). One user adds min(x, C) <= C to K + L, so the
  pair has L1 sensitivity C: discrete Laplace of scale C / epsilon_rescale on each is
  ``epsilon_rescale``-DP. The published cells are multiplied by s = (K^ + L^) / K^
  (post-processing of noisy values only).

What the rescaled counts assume and what they cost is stated in the release: s corrects the
*total* (up to the cap C: records beyond C per user stay lost); a cell is unbiased only if the
records cut fall in the cells as the records kept do (the users above M travel as the others);
the noise of a cell grows by the factor s, and s itself has a standard deviation of about
sqrt(2) b sqrt(1/K^2 + L^2 / K^4) with b = C / epsilon_rescale (delta method; independent
noise on K and L).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, cast

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind, calibrate, noisy_max
from privmob.privacy.quantiles import quantile_utilities
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from privmob.privacy.samplers import Randomness
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

#: the public candidates 1..DEFAULT_MAX_BOUND when none is given
DEFAULT_MAX_BOUND = 100


@dataclass(frozen=True)
class BoundChoice:
    """How the bound is chosen and corrected, from public parameters only.

    ``auto``: the bound is the DP ``quantile`` of records per user over the candidates
    1..``max_bound``, from ``share`` of the release's epsilon. ``rescale``: the counts are
    multiplied by a noisy estimate of (records up to ``max_bound``) / (records kept), from
    ``rescale_share`` of the epsilon. The rest of the epsilon goes to the counts."""

    auto: bool = True
    quantile: float = 0.9
    share: float = 0.1
    max_bound: int = DEFAULT_MAX_BOUND
    rescale: bool = False
    rescale_share: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ConfigError(
                f"the bound's quantile must be between 0 and 1, got {self.quantile}",
                hint="e.g. " + spelled("--bound-quantile 0.9", "bound_quantile=0.9"),
            )
        if int(self.max_bound) != self.max_bound or self.max_bound < 2:
            raise ConfigError(
                f"the bound's largest candidate must be a whole number >= 2, got {self.max_bound}",
                hint="a public figure above any plausible bound, e.g. "
                + spelled("--bound-max 100", "bound_max=100"),
            )
        for name, share, used in (
            ("bound_share", self.share, self.auto),
            ("rescale_share", self.rescale_share, self.rescale),
        ):
            if used and not 0.0 < share < 0.5:
                raise ConfigError(
                    f"the share of the budget for {name.split('_')[0]} must be in (0, 0.5), "
                    f"got {share}",
                    hint="a small share, e.g. "
                    + spelled(f"--{name.replace('_', '-')} 0.1", f"{name}=0.1"),
                )

    def epsilons(self, epsilon: float) -> tuple[float, float, float]:
        """(choice, rescale, counts) epsilons; they add up to ``epsilon`` exactly in floating
        point, in this order (so the ledger's parts sum to the epsilon the user gave)."""
        choice = epsilon * self.share if self.auto else 0.0
        rescale = epsilon * self.rescale_share if self.rescale else 0.0
        counts = epsilon - choice - rescale
        # the last ulps: nudge the parts until (choice + rescale) + counts == epsilon exactly
        for i in range(17):
            c = _ulps(counts, i)
            for j in range(17):
                a = _ulps(choice, j) if self.auto else 0.0
                b = rescale if self.auto or not self.rescale else _ulps(rescale, j)
                if a + b + c == epsilon and c > 0 and (a > 0) == self.auto:
                    return a, b, c
        raise ConfigError(f"cannot split epsilon {epsilon} into the bound's parts")

    def parts(self, epsilon: float, counts_label: str, unit: PrivacyUnit) -> list[tuple[str, Cost]]:
        """The ledger parts (committed together by the one gate, before any noise)."""
        choice, rescale, counts = self.epsilons(epsilon)
        out: list[tuple[str, Cost]] = []
        if self.auto:
            out.append((f"the bound: DP {self.describe_choice()}", Cost.pure(choice, unit)))
        if self.rescale:
            out.append(
                (
                    f"rescale: noisy records kept and cut up to {self.max_bound} per user",
                    Cost.pure(rescale, unit),
                )
            )
        out.append((counts_label, Cost.pure(counts, unit)))
        return out

    def describe_choice(self) -> str:
        return (
            f"{self.quantile:g}-quantile of records per user over the public candidates "
            f"1..{self.max_bound}"
        )

    def to_dict(self, epsilon: float) -> JSONObject:
        choice, rescale, counts = self.epsilons(epsilon)
        return {
            "auto": self.auto,
            "quantile": self.quantile if self.auto else None,
            "candidates": [1, self.max_bound],
            "epsilon_choice": choice,
            "rescale": self.rescale,
            "epsilon_rescale": rescale,
            "epsilon_counts": counts,
        }


def _ulps(x: float, i: int) -> float:
    """``x`` moved by the i-th of 0, +1, -1, +2, -2, ... units in the last place."""
    step, toward = (i + 1) // 2, (math.inf if i % 2 else -math.inf)
    for _ in range(step):
        x = math.nextafter(x, toward)
    return x


def per_user_histogram_sql(rows: str, max_bound: int, user: str = "uid") -> str:
    """SQL: users by their number of rows in ``rows``, index min(n, max_bound + 1) (a dense
    vector of length max_bound + 2; index 0 stays empty)."""
    top = int(max_bound) + 1
    return (
        f"SELECT CASE WHEN n_ > {top} THEN {top} ELSE n_ END AS i0, count(*) AS n FROM "
        f"(SELECT {user}, count(*) AS n_ FROM {rows} AS h_ GROUP BY {user}) AS u_ GROUP BY i0"
    )


def _clipped(histogram: npt.ArrayLike, max_bound: int) -> npt.NDArray[np.int64]:
    """Users per value 1..max_bound, a user above max_bound at max_bound."""
    h = np.asarray(histogram, dtype=np.int64)
    if h.shape != (max_bound + 2,):
        raise ValueError(f"expected {max_bound + 2} users per count, got shape {h.shape}")
    c = h[1 : max_bound + 1].copy()
    c[-1] += h[max_bound + 1]
    return c


def bound_utilities(
    histogram: npt.ArrayLike, quantile: float, max_bound: int
) -> npt.NDArray[np.float64]:
    """The utility of each candidate bound 1..max_bound (Delta_u = 1 per user: see the module)."""
    return quantile_utilities(_clipped(histogram, max_bound), quantile)


def choose_bound(
    histogram: npt.ArrayLike,
    choice: BoundChoice,
    epsilon: float,
    rng: Randomness | int | None = None,
) -> int:
    """The bound M in 1..max_bound, epsilon-DP per user (exponential mechanism over the public
    candidates, from the exact users per record count; never a value read from the data)."""
    scores = bound_utilities(histogram, choice.quantile, choice.max_bound)
    return 1 + noisy_max(scores, epsilon, 1.0, rng)


def kept_and_lost(histogram: npt.ArrayLike, bound: int, cap: int) -> npt.NDArray[np.int64]:
    """Exact (K, L): the records kept with at most ``bound`` per user, and the records cut,
    counted up to ``cap`` per user (never publish these: noise them, sensitivity ``cap``)."""
    if not 1 <= bound <= cap:
        raise ValueError(f"bound {bound} must be in 1..{cap}")
    values = np.arange(1, cap + 1)
    users = _clipped(histogram, cap)
    kept = int((np.minimum(values, bound) * users).sum())
    upto_cap = int((values * users).sum())
    return np.array([kept, upto_cap - kept], dtype=np.int64)


@dataclass(frozen=True)
class Rescale:
    """The published factor s = (K^ + L^) / K^ and what it means (from noisy values only)."""

    kept: int
    lost: int
    factor: float
    factor_std: float
    noise_scale: float
    cap: int

    def to_dict(self) -> JSONObject:
        return {
            "noisy_records_kept": self.kept,
            "noisy_records_cut_up_to_cap": self.lost,
            "factor": self.factor,
            "factor_std": self.factor_std,
            "noise": {"kind": NoiseKind.DISCRETE_LAPLACE.value, "scale": self.noise_scale},
            "l1_sensitivity": self.cap,
            "bias": (
                "the counts' total is corrected up to the cap (records beyond "
                f"{self.cap} per user stay cut); a cell is unbiased only if the records cut "
                "fall in the cells as the records kept do; a ratio estimator, biased by about "
                "(factor_std / factor)^2 relative"
            ),
            "variance": (
                "a cell's noise is multiplied by the factor (its standard deviation by "
                "factor); the factor's own relative error, factor_std / factor, is common to "
                "every cell"
            ),
            "post_processing": "every noisy cell times the factor, rounded to an integer",
        }


def rescale_factor(
    exact: npt.ArrayLike, cap: int, epsilon: float, rng: Randomness | int | None = None
) -> Rescale:
    """Noise (discrete Laplace, scale cap / epsilon, L1 sensitivity ``cap``) on the exact
    (K, L) of :func:`kept_and_lost`, and the factor (K^ + L^) / K^ (1 when K^ < 1 or L^ < 0:
    post-processing). epsilon-DP per user."""
    noise, _ = calibrate(NoiseKind.DISCRETE_LAPLACE, epsilon, l1_sensitivity=cap)
    kept, lost = (int(v) for v in noise.add(np.asarray(exact, dtype=np.int64), rng))
    b, sd = noise.scale, noise.std
    if kept < 1:
        return Rescale(kept, lost, 1.0, math.inf, b, cap)
    lost_used = max(lost, 0)
    factor = (kept + lost_used) / kept
    # delta method on 1 + L / K with independent noise of sd on K and on L
    factor_std = sd * math.sqrt(1.0 / kept**2 + lost_used**2 / kept**4)
    return Rescale(kept, lost, factor, factor_std, b, cap)


def kept_share_lognormal(bound: int, median: float, sigma: float) -> float:
    """The share of records kept with at most ``bound`` per user if records per user were
    lognormal with this median and log-sd (a user's public expectation, not the data):
    E[min(X, M)] / E[X]. Used by the plan to state the bias of a fixed bound."""
    if median <= 0 or sigma <= 0:
        raise ConfigError("the expected records per user need a median > 0 and a log-sd > 0")
    mu = math.log(median)
    mean = math.exp(mu + sigma**2 / 2)
    z = (math.log(bound) - mu) / sigma

    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    kept = mean * phi(z - sigma) + bound * (1.0 - phi(z))
    return kept / mean


#: the keywords (and ``privmob`` options) that set a :class:`BoundChoice`
CHOICE_KEYWORDS = ("bound_quantile", "bound_share", "bound_max", "rescale", "rescale_share")


class _ChoiceFields(TypedDict, total=False):
    """The fields of a :class:`BoundChoice` that keywords set."""

    quantile: float
    share: float
    max_bound: int
    rescale: bool
    rescale_share: float


def choice_of(options: Mapping[str, object]) -> BoundChoice | None:
    """The :class:`BoundChoice` that ``Session`` keywords (or command options) state, ``None``
    when they state none (a fixed bound as given, or ``auto`` with the defaults)."""
    given = {k: options[k] for k in CHOICE_KEYWORDS if options.get(k) is not None}
    if not given:
        return None
    names = {"bound_quantile": "quantile", "bound_share": "share", "bound_max": "max_bound"}
    # the caller's values as given (Session keywords, command options): BoundChoice checks them
    fields = cast("_ChoiceFields", {names.get(k, k): v for k, v in given.items()})
    return BoundChoice(**fields)
