"""Landmark privacy for time series (seed 001, SPEC 4.5).

A series (one value per timestamp, or a vector of counts per zone per timestamp) is published
with a *public* set L of landmark timestamps. Landmark-neighbouring series differ in the
events at the landmarks and at one more timestamp; a mechanism made of per-timestamp
eps_t-DP parts with independent noise satisfies landmark epsilon-privacy iff

    for every t:  sum_{i in L u {t}} eps_i <= epsilon            (the landmark theorem)

Every scheme below produces a budget sequence eps_t, and :func:`verify_landmark_budget`
checks the theorem on it *before* anything is returned; the budgets are part of the output.

Schemes (``Scheme``):

- ``uniform``: eps_t = epsilon/(|L|+1) for every t (SPEC 4.5). When every timestamp is a
  landmark there is no regular t and epsilon/|L| satisfies the theorem; privmob uses it, so
  100% landmarks coincides with the user-level scheme and 0% with the event-level one.
- ``skip``: landmarks republish the last regular release (cost 0, a public ``fill_value``
  before the first one); regular timestamps get epsilon. WARNING: a sparse or repeated
  release pattern can reveal where the landmarks are (seed 001); the release says so.
- ``adaptive``: see :class:`AdaptiveRule` for the sampling-rate rule and the redistribution
  of the budget of skipped landmarks.
- ``event`` (reference): eps_t = epsilon at every t. epsilon-DP per *event*; it protects a
  landmark set only when L is empty (its unit is ``event``, not ``landmark``).
- ``user`` (reference): eps_t = epsilon/T. epsilon-DP for the whole series (unit ``user``):
  the theorem holds for every L.

Noise: Laplace with scale Delta/eps_t through :mod:`privmob.privacy.mechanisms`, discrete
Laplace (secure, exact) for integer series, continuous Laplace (OpenDP's sampler) for real
ones. Delta is the caller's *enforced* bound on how much one unit's event can change the
value at one timestamp (L1 over zones), e.g. "each user contributes at most c check-ins per
hour" gives Delta = c; ``value_bounds`` additionally clamps values to a declared range.
Nothing in the budgets, the noise scales or the adaptive decisions is read from the data.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from privmob.errors import BudgetError, ConfigError, InputError
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.releases.base import Accountant, Release

RELATIVE_TOLERANCE = 1e-9
SKIP_WARNING = (
    "the skip scheme republishes old values at the landmarks: a repeated or sparse release "
    "pattern can reveal where the (sensitive) landmark timestamps are"
)


class Scheme(StrEnum):
    UNIFORM = "uniform"
    SKIP = "skip"
    ADAPTIVE = "adaptive"
    EVENT = "event"
    USER = "user"

    def __str__(self) -> str:
        return self.value


SCHEME_UNIT = {
    Scheme.UNIFORM: Unit.LANDMARK,
    Scheme.SKIP: Unit.LANDMARK,
    Scheme.ADAPTIVE: Unit.LANDMARK,
    Scheme.EVENT: Unit.EVENT,
    Scheme.USER: Unit.USER,
}


@dataclass(frozen=True)
class AdaptiveRule:
    """The sampling-rate rule of the adaptive scheme (a design choice, seed 001).

    - Reservation: every landmark starts with b = epsilon/(|L|+1) (epsilon/|L| if all
      timestamps are landmarks); a regular timestamp t gets epsilon - Lambda(t), where
      Lambda(t) is the landmarks' total at that moment (spent for past landmarks, reserved
      for future ones). Initially that is b too (the uniform scheme).
    - Sampling: at each t a public coin with probability ``rate`` decides between publishing
      a fresh noisy value and approximating with the last release (cost 0). The first
      timestamp is always published. ``rate`` starts at ``initial_rate``.
    - Adaptation, after each fresh publication: with d = mean over zones of
      |noisy_t - previous release| and the noise scale s = Delta/eps_t, if s > d (the change
      is within the noise) the rate drops by ``step``, else it rises by ``step``, clamped to
      [``min_rate``, ``max_rate``].
    - Redistribution: the reservation of an approximated landmark is split in equal shares
      among the later landmarks and, if a regular timestamp follows, one share for the
      regular pool (raising eps - Lambda for the later regular timestamps). The budget of an
      approximated regular timestamp is simply not spent.

    Why the theorem holds on every path: Lambda never increases (a skipped reservation is
    re-spread over at most as many shares as it came from), so every regular t satisfies
    Lambda_final + eps_t <= Lambda(t) + epsilon - Lambda(t) = epsilon, and every landmark
    satisfies Lambda_final <= Lambda(0) <= epsilon. :func:`verify_landmark_budget` checks it.
    Why the decisions cost nothing: the coin is independent of the data and ``rate`` is a
    function of earlier *noisy* releases and public parameters only (post-processing).
    """

    initial_rate: float = 1.0
    step: float = 0.1
    min_rate: float = 0.1
    max_rate: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.min_rate <= self.max_rate <= 1:
            raise ConfigError("adaptive rates need 0 < min_rate <= max_rate <= 1")
        if not self.min_rate <= self.initial_rate <= self.max_rate:
            raise ConfigError("the initial rate must lie within [min_rate, max_rate]")
        if not 0 <= self.step <= 1:
            raise ConfigError("the rate step must be in [0, 1]")


@dataclass
class SeriesResult:
    """What a scheme released: values (zones x T), budgets, and which t were fresh."""

    values: np.ndarray
    epsilons: np.ndarray
    published: np.ndarray
    rates: np.ndarray
    noise_kind: NoiseKind


# -- the theorem ------------------------------------------------------------------------------


def landmark_indices(landmarks: Sequence[int] | np.ndarray, length: int) -> np.ndarray:
    """Sorted unique landmark timestamps, checked to lie in 0..length-1."""
    marks = np.unique(np.asarray(list(landmarks), dtype=np.int64))
    if marks.size and (marks[0] < 0 or marks[-1] >= length):
        raise ConfigError(
            f"landmarks must be timestamps in 0..{length - 1}; got {marks[0]}..{marks[-1]}"
        )
    return marks


def landmark_spend(epsilons: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """sum_{i in L u {t}} eps_i for every t."""
    eps = np.asarray(epsilons, dtype=np.float64)
    is_mark = np.zeros(eps.size, dtype=bool)
    is_mark[landmarks] = True
    total = float(eps[is_mark].sum())
    return np.where(is_mark, total, total + eps)


def verify_landmark_budget(
    epsilons: Sequence[float] | np.ndarray,
    landmarks: Sequence[int] | np.ndarray,
    epsilon: float,
) -> None:
    """Raise :class:`BudgetError` unless sum_{i in L u {t}} eps_i <= epsilon for every t."""
    eps = np.asarray(epsilons, dtype=np.float64)
    if eps.ndim != 1 or not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise BudgetError("per-timestamp budgets must be a 1-d sequence of finite numbers >= 0")
    marks = landmark_indices(landmarks, eps.size)
    spend = landmark_spend(eps, marks)
    worst = int(np.argmax(spend))
    if spend[worst] > epsilon * (1 + RELATIVE_TOLERANCE):
        raise BudgetError(
            f"landmark budget violated at t={worst}: sum over L u {{t}} of eps_i = "
            f"{spend[worst]:.9g} > epsilon = {epsilon:.9g}; nothing is released"
        )


# -- data-independent budget sequences ----------------------------------------------------------


def scheme_budgets(
    scheme: Scheme | str, length: int, landmarks: Sequence[int] | np.ndarray, epsilon: float
) -> np.ndarray:
    """The budgets of the non-adaptive schemes (for adaptive: its initial reservation)."""
    scheme = Scheme(scheme)
    if length < 1:
        raise ConfigError("the series needs at least one timestamp")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    marks = landmark_indices(landmarks, length)
    n = marks.size
    if scheme is Scheme.EVENT:
        return np.full(length, float(epsilon))
    if scheme is Scheme.USER:
        return np.full(length, epsilon / length)
    if scheme is Scheme.SKIP:
        eps = np.full(length, float(epsilon))
        eps[marks] = 0.0
        return eps
    share = epsilon / n if n == length else epsilon / (n + 1)
    return np.full(length, share)


def _guaranteed_landmarks(scheme: Scheme, marks: np.ndarray, length: int) -> np.ndarray:
    """The landmark set the theorem is checked against for the scheme's stated unit."""
    if scheme is Scheme.EVENT:
        return np.empty(0, dtype=np.int64)  # event-level: protects one timestamp at a time
    if scheme is Scheme.USER:
        return np.arange(length)  # user-level: protects all timestamps at once
    return marks


# -- the mechanism ------------------------------------------------------------------------------


def perturb_series(
    values: np.ndarray,
    landmarks: Sequence[int] | np.ndarray,
    epsilon: float,
    scheme: Scheme | str,
    *,
    sensitivity: float,
    rng: Randomness | int | None = None,
    integer: bool | None = None,
    rule: AdaptiveRule | None = None,
    fill_value: float = 0.0,
) -> SeriesResult:
    """Run a scheme on ``values`` (shape (T,) or (zones, T)); no accounting, no output.

    Guarantee: landmark epsilon-privacy for L (event-level epsilon-DP for ``event``,
    epsilon-DP for the whole series for ``user``) when one unit's event changes the values at
    one timestamp by at most ``sensitivity`` in L1 norm. The budgets are verified against the
    theorem before returning. Use :func:`publish_series` to release (it charges the ledger).
    """
    scheme = Scheme(scheme)
    x = np.asarray(values)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] == 0:
        raise InputError("the series must be a non-empty vector or a zones x timestamps matrix")
    if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x)):
        raise InputError("the series must hold finite numbers")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ConfigError(f"the sensitivity must be a finite number > 0, got {sensitivity}")
    if integer is None:
        integer = bool(np.issubdtype(x.dtype, np.integer))
    if integer and not np.issubdtype(x.dtype, np.integer):
        if not np.all(x == np.round(x)):
            raise InputError("integer noise was asked for but the series has fractional values")
        x = x.astype(np.int64)
    kind = NoiseKind.DISCRETE_LAPLACE if integer else NoiseKind.LAPLACE_ROUNDED
    length = x.shape[1]
    marks = landmark_indices(landmarks, length)
    r = resolve(rng)
    if scheme is Scheme.ADAPTIVE:
        result = _adaptive(
            x, marks, epsilon, sensitivity, r, kind, rule or AdaptiveRule(), fill_value
        )
    else:
        eps = scheme_budgets(scheme, length, marks, epsilon)
        verify_landmark_budget(eps, _guaranteed_landmarks(scheme, marks, length), epsilon)
        out = _noisy_columns(x, eps, sensitivity, r, kind)
        published = eps > 0
        if scheme is Scheme.SKIP and marks.size:
            warnings.warn(SKIP_WARNING, UserWarning, stacklevel=2)
            out = _carry_forward(out, published, fill_value)
        result = SeriesResult(out, eps, published, np.ones(length), kind)
    verify_landmark_budget(result.epsilons, _guaranteed_landmarks(scheme, marks, length), epsilon)
    return result


def _noise(kind: NoiseKind, eps: float, sensitivity: float) -> Noise:
    noise, _ = calibrate(kind, eps, l1_sensitivity=sensitivity, unit=Unit.LANDMARK)
    return noise


def _add(noise: Noise, column: np.ndarray, r: Randomness) -> np.ndarray:
    column = np.array(column)  # a writable copy: OpenDP refuses read-only buffers
    if noise.kind is NoiseKind.DISCRETE_LAPLACE:
        return noise.add(column, r).astype(np.float64)
    return noise.add_float(column, r)


def _noisy_columns(
    x: np.ndarray, eps: np.ndarray, sensitivity: float, r: Randomness, kind: NoiseKind
) -> np.ndarray:
    """Independent noise of scale sensitivity/eps_t on every column with eps_t > 0."""
    out = np.full(x.shape, np.nan)
    for e in np.unique(eps[eps > 0]):
        cols = np.flatnonzero(eps == e)
        block = x[:, cols]
        out[:, cols] = _add(_noise(kind, float(e), sensitivity), block.ravel(), r).reshape(
            block.shape
        )
    return out


def _carry_forward(out: np.ndarray, published: np.ndarray, fill_value: float) -> np.ndarray:
    """Post-processing: unpublished columns repeat the last published one."""
    last = np.full(out.shape[0], float(fill_value))
    for t in range(out.shape[1]):
        if published[t]:
            last = out[:, t]
        else:
            out[:, t] = last
    return out


def _coin(r: Randomness) -> float:
    if r.for_publication:
        return secrets.SystemRandom().random()
    return float(r.generator.random())


def _adaptive(
    x: np.ndarray,
    marks: np.ndarray,
    epsilon: float,
    sensitivity: float,
    r: Randomness,
    kind: NoiseKind,
    rule: AdaptiveRule,
    fill_value: float,
) -> SeriesResult:
    """The adaptive scheme (rule: :class:`AdaptiveRule`). Reads the data only to add noise."""
    length = x.shape[1]
    is_mark = np.zeros(length, dtype=bool)
    is_mark[marks] = True
    share = epsilon / marks.size if marks.size == length else epsilon / (marks.size + 1)
    planned = np.where(is_mark, share, 0.0)  # landmark reservations (spent or future)
    regular_after = np.cumsum(~is_mark[::-1])[::-1]  # regular timestamps at or after t
    eps = np.zeros(length)
    published = np.zeros(length, dtype=bool)
    rates = np.empty(length)
    out = np.empty(x.shape, dtype=np.float64)
    rate = rule.initial_rate
    last: np.ndarray | None = None
    for t in range(length):
        rates[t] = rate
        publish = last is None or _coin(r) < rate
        if publish:
            e = float(planned[t]) if is_mark[t] else epsilon - float(planned.sum())
            e = max(e, 0.0)
            if e == 0.0:
                publish = False
        if publish:
            noisy = _add(_noise(kind, e, sensitivity), x[:, t], r)
            if last is not None:
                # post-processing: both values are noisy releases; the scale is public
                change = float(np.mean(np.abs(noisy - last)))
                if sensitivity / e > change:
                    rate = max(rule.min_rate, rate - rule.step)
                else:
                    rate = min(rule.max_rate, rate + rule.step)
            last = noisy
            eps[t] = e
            published[t] = True
            out[:, t] = noisy
            continue
        out[:, t] = last if last is not None else float(fill_value)
        if is_mark[t]:
            freed = float(planned[t])
            planned[t] = 0.0
            later = np.flatnonzero(is_mark[t + 1 :]) + t + 1
            shares = later.size + (1 if t + 1 < length and regular_after[t + 1] > 0 else 0)
            if shares:
                planned[later] += freed / shares
    # landmarks that were published keep what they spent; skipped ones spent nothing
    return SeriesResult(out, eps, published, rates, kind)


# -- the release --------------------------------------------------------------------------------


def publish_series(
    values: np.ndarray,
    landmarks: Sequence[int] | np.ndarray,
    epsilon: float,
    scheme: Scheme | str,
    *,
    sensitivity: float,
    accountant: Accountant,
    rng: Randomness | int | None = None,
    timestamps: Sequence[object] | None = None,
    zones: Sequence[object] | None = None,
    integer: bool | None = None,
    rule: AdaptiveRule | None = None,
    fill_value: float = 0.0,
    value_bounds: tuple[float, float] | None = None,
    sensitivity_note: str = "",
    outliers: tuple[float, float] | None = None,
) -> Release:
    """Publish a series under landmark epsilon-privacy with a public landmark set.

    Guarantee (schemes ``uniform``, ``skip``, ``adaptive``): landmark epsilon-privacy: for
    series that differ in the events at all landmarks plus one more timestamp, each changing
    the value at its timestamp by at most ``sensitivity`` (L1 over zones), the output
    distributions differ by at most e^epsilon. ``event``: epsilon-DP per event (one
    timestamp). ``user``: epsilon-DP for the whole series. ``value_bounds`` clamps the
    values first (an enforced range). The landmark set, the timestamps and the zones are
    public parameters. The cost (epsilon, in the scheme's unit) is prechecked before the
    noise and charged after it; the tables hold only noisy or post-processed values plus the
    per-timestamp budgets (``budgets`` table).

    ``outliers = (exact value, outliers_epsilon)``: one more cell, the values outside the
    declared period (SPEC 1, invariant 1), which the caller bounds so that one unit changes
    it by at most ``sensitivity``. It gets its own noise of scale sensitivity /
    outliers_epsilon (``outliers`` table) and composes sequentially with the series: the
    cost is epsilon + outliers_epsilon, charged as two ledger entries (series, outliers).
    """
    scheme = Scheme(scheme)
    unit = SCHEME_UNIT[scheme]
    series_cost = Cost.pure(epsilon, unit)
    cost = series_cost
    if outliers is not None:
        if not (outliers[1] > 0 and math.isfinite(outliers[1])):
            raise ConfigError(f"the outliers cell needs a budget > 0, got {outliers[1]}")
        cost = series_cost + Cost.pure(outliers[1], unit)
    accountant.precheck(cost)
    x = np.asarray(values)
    if value_bounds is not None:
        lo, hi = value_bounds
        if not lo < hi:
            raise ConfigError("value bounds need lower < upper")
        x = np.clip(x, lo, hi)
    single = x.ndim == 1
    length = x.shape[-1]
    r = resolve(rng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = perturb_series(
            x,
            landmarks,
            epsilon,
            scheme,
            sensitivity=sensitivity,
            rng=r,
            integer=integer,
            rule=rule,
            fill_value=fill_value,
        )
    marks = landmark_indices(landmarks, length)
    labels = list(timestamps) if timestamps is not None else list(range(length))
    if len(labels) != length:
        raise ConfigError(f"{len(labels)} timestamp labels for a series of {length}")
    zone_labels: list[object] = (
        list(zones) if zones is not None else list(range(result.values.shape[0]))
    )
    is_mark = np.zeros(length, dtype=bool)
    is_mark[marks] = True
    released = result.values
    if result.noise_kind is NoiseKind.DISCRETE_LAPLACE:
        released = np.round(released).astype(np.int64)
    if single:
        series = pd.DataFrame({"t": np.arange(length), "timestamp": labels, "value": released[0]})
    else:
        z, n = released.shape
        series = pd.DataFrame(
            {
                "zone": [zone for zone in zone_labels for _ in range(n)],
                "t": np.tile(np.arange(n), z),
                "timestamp": labels * z,
                "value": released.ravel(),
            }
        )
    with np.errstate(divide="ignore"):
        scales = np.where(result.epsilons > 0, sensitivity / result.epsilons, np.inf)
    budgets = pd.DataFrame(
        {
            "t": np.arange(length),
            "timestamp": labels,
            "landmark": is_mark,
            "epsilon_t": result.epsilons,
            "published": result.published,
            "noise_scale": scales,
            "sampling_rate": result.rates,
        }
    )
    tables = {"series": series, "budgets": budgets}
    parts: list[tuple[str, Cost]] = []
    if outliers is not None:
        value, eps_out = float(outliers[0]), float(outliers[1])
        if not math.isfinite(value):
            raise InputError("the outliers cell must hold a finite number")
        whole = result.noise_kind is NoiseKind.DISCRETE_LAPLACE
        if whole and value != round(value):
            raise InputError("the outliers cell of an integer series must be a whole number")
        exact = np.array([round(value)], dtype=np.int64) if whole else np.array([value])
        noisy = _add(_noise(result.noise_kind, eps_out, sensitivity), exact, r)
        cell: float | int = round(float(noisy[0])) if whole else float(noisy[0])
        tables["outliers"] = pd.DataFrame(
            {
                "cell": ["outside the period"],
                "value": [cell],
                "epsilon": [eps_out],
                "noise_scale": [sensitivity / eps_out],
            }
        )
        parts = [
            (f"landmark series ({scheme.value})", series_cost),
            ("outliers cell (outside the period)", Cost.pure(eps_out, unit)),
        ]
    # only known, data-independent notes reach the metadata (a warning raised while working
    # on the exact series could quote a data value)
    notes = [SKIP_WARNING] if any(str(w.message) == SKIP_WARNING for w in caught) else []
    if scheme is Scheme.EVENT and marks.size:
        notes.append("event-level scheme: the landmarks are NOT protected as a whole")
    release = Release(
        kind="landmark-series",
        cost=cost,
        unit=unit,
        bounds={
            "sensitivity_per_timestamp": float(sensitivity),
            "sensitivity_source": sensitivity_note or "declared by the caller",
            "value_bounds": list(value_bounds) if value_bounds is not None else None,
        },
        noise={
            "kind": result.noise_kind.value,
            "scale": "sensitivity / epsilon_t per timestamp (see the budgets table)",
        },
        params={
            "scheme": scheme.value,
            "epsilon": float(epsilon),
            "landmarks": marks.tolist(),
            "adaptive_rule": asdict(rule or AdaptiveRule()) if scheme is Scheme.ADAPTIVE else None,
            "fill_value": fill_value if scheme is Scheme.SKIP else None,
        },
        domain={"timestamps": length, "zones": None if single else len(zone_labels)},
        tables=tables,
        for_publication=r.for_publication,
        extra={
            "max_landmark_spend": float(landmark_spend(result.epsilons, marks).max()),
            "sum_epsilon_t": float(result.epsilons.sum()),
            "outliers_epsilon": float(outliers[1]) if outliers is not None else None,
            "composition": "series (landmark theorem) + outliers cell, sequential"
            if outliers is not None
            else "series (landmark theorem)",
            "warnings": notes,
        },
        cost_parts=parts,
    )
    return accountant.charge(release, description=f"landmark series ({scheme.value})")
