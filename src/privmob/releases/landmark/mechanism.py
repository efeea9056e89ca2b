"""The mechanism: independent Laplace or discrete Laplace noise of scale Delta / eps_t on each
timestamp, with the skip and adaptive schemes' decisions made on public coins and noisy values
only."""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from privmob.errors import ConfigError, InputError
from privmob.lazy_imports import np
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.payment import require_paid
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.landmark.schemes import (
    AdaptiveRule,
    Scheme,
    guaranteed_landmarks,
    scheme_budgets,
)
from privmob.releases.landmark.theorem import landmark_indices, verify_landmark_budget

if TYPE_CHECKING:
    import numpy.typing as npt

SKIP_WARNING = (
    "the skip scheme republishes old values at the landmarks: a repeated or sparse release "
    "pattern can reveal where the (sensitive) landmark timestamps are"
)


#: a series' values as the schemes read them (:func:`series_values`): integers or floats
Series: TypeAlias = "npt.NDArray[np.int64] | npt.NDArray[np.float64]"


@dataclass
class SeriesResult:
    """What a scheme released: values (zones x T), budgets, and which t were fresh."""

    values: npt.NDArray[np.float64]
    epsilons: npt.NDArray[np.float64]
    published: npt.NDArray[np.bool_]
    rates: npt.NDArray[np.float64]
    noise_kind: NoiseKind


def series_values(
    values: npt.ArrayLike, sensitivity: float, integer: bool | None = None
) -> tuple[Series, NoiseKind]:
    """The series as a zones x timestamps matrix and its noise kind (integers: discrete
    Laplace), refused when it cannot be noised: checked before the charge."""
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
    return x, NoiseKind.DISCRETE_LAPLACE if integer else NoiseKind.LAPLACE_ROUNDED


def perturb_series(
    values: npt.ArrayLike,
    landmarks: Sequence[int] | npt.NDArray[np.int64],
    epsilon: float,
    scheme: Scheme | str,
    *,
    sensitivity: float,
    rng: RandomnessLike = None,
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
    x, kind = series_values(values, sensitivity, integer)
    length = x.shape[1]
    marks = landmark_indices(landmarks, length)
    r = resolve(rng)
    if scheme is Scheme.ADAPTIVE:
        result = _adaptive(
            x, marks, epsilon, sensitivity, r, kind, rule or AdaptiveRule(), fill_value
        )
    else:
        eps = scheme_budgets(scheme, length, marks, epsilon)
        verify_landmark_budget(eps, guaranteed_landmarks(scheme, marks, length), epsilon)
        out = _noisy_columns(x, eps, sensitivity, r, kind)
        published = eps > 0
        if scheme is Scheme.SKIP and marks.size:
            warnings.warn(SKIP_WARNING, UserWarning, stacklevel=2)
            out = _carry_forward(out, published, fill_value)
        result = SeriesResult(out, eps, published, np.ones(length), kind)
    verify_landmark_budget(result.epsilons, guaranteed_landmarks(scheme, marks, length), epsilon)
    return result


def landmark_noise(kind: NoiseKind, eps: float, sensitivity: float) -> Noise:
    noise, _ = calibrate(kind, eps, l1_sensitivity=sensitivity, unit=PrivacyUnit.LANDMARK)
    return noise


def add_noise(noise: Noise, column: npt.ArrayLike, r: Randomness) -> npt.NDArray[np.float64]:
    column = np.array(column)  # a writable copy: OpenDP refuses read-only buffers
    if noise.kind.traits.exact_pure:
        return noise.add(column, r).astype(np.float64)
    return noise.add_float(column, r)


def _noisy_columns(
    x: Series,
    eps: npt.NDArray[np.float64],
    sensitivity: float,
    r: Randomness,
    kind: NoiseKind,
) -> npt.NDArray[np.float64]:
    """Independent noise of scale sensitivity/eps_t on every column with eps_t > 0."""
    out = np.full(x.shape, np.nan)
    for e in np.unique(eps[eps > 0]):
        cols = np.flatnonzero(eps == e)
        block = x[:, cols]
        out[:, cols] = add_noise(
            landmark_noise(kind, float(e), sensitivity), block.ravel(), r
        ).reshape(block.shape)
    return out


def _carry_forward(
    out: npt.NDArray[np.float64], published: npt.NDArray[np.bool_], fill_value: float
) -> npt.NDArray[np.float64]:
    """Post-processing: unpublished columns repeat the last published one."""
    last = np.full(out.shape[0], float(fill_value))
    for t in range(out.shape[1]):
        if published[t]:
            last = out[:, t]
        else:
            out[:, t] = last
    return out


def _coin(r: Randomness) -> float:
    require_paid("a sampling coin")
    if r.for_publication:
        return secrets.SystemRandom().random()
    return float(r.generator.random())


def _adaptive(
    x: Series,
    marks: npt.NDArray[np.int64],
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
    last: npt.NDArray[np.float64] | None = None
    for t in range(length):
        rates[t] = rate
        publish = last is None or _coin(r) < rate
        if publish:
            e = float(planned[t]) if is_mark[t] else epsilon - float(planned.sum())
            e = max(e, 0.0)
            if e == 0.0:
                publish = False
        if publish:
            noisy = add_noise(landmark_noise(kind, e, sensitivity), x[:, t], r)
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
