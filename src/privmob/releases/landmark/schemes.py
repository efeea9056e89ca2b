"""The schemes and their data-independent budget sequences eps_t (uniform, skip, adaptive,
and the event- and user-level references), with the unit each one protects."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.lazy_imports import np
from privmob.privacy.costs import PrivacyUnit
from privmob.releases.landmark.theorem import landmark_indices

if TYPE_CHECKING:
    import numpy.typing as npt


class Scheme(StrEnum):
    """A landmark scheme (the module's docstring); ``str()`` is its value (a StrEnum's)."""

    UNIFORM = "uniform"
    SKIP = "skip"
    ADAPTIVE = "adaptive"
    EVENT = "event"
    USER = "user"


SCHEME_UNIT = {
    Scheme.UNIFORM: PrivacyUnit.LANDMARK,
    Scheme.SKIP: PrivacyUnit.LANDMARK,
    Scheme.ADAPTIVE: PrivacyUnit.LANDMARK,
    Scheme.EVENT: PrivacyUnit.EVENT,
    Scheme.USER: PrivacyUnit.USER,
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


def scheme_budgets(
    scheme: Scheme | str,
    length: int,
    landmarks: Sequence[int] | npt.NDArray[np.int64],
    epsilon: float,
) -> npt.NDArray[np.float64]:
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


def guaranteed_landmarks(
    scheme: Scheme, marks: npt.NDArray[np.int64], length: int
) -> npt.NDArray[np.int64]:
    """The landmark set the theorem is checked against for the scheme's stated unit."""
    if scheme is Scheme.EVENT:
        return np.empty(0, dtype=np.int64)  # event-level: protects one timestamp at a time
    if scheme is Scheme.USER:
        return np.arange(length)  # user-level: protects all timestamps at once
    return marks
