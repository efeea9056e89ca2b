"""The landmark theorem: for every t, the budgets at the landmarks and at t add up to at most
epsilon; :func:`verify_landmark_budget` checks it on every budget sequence before anything is
returned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from privmob.errors import BudgetError, ConfigError
from privmob.lazy_imports import np

if TYPE_CHECKING:
    import numpy.typing as npt

RELATIVE_TOLERANCE = 1e-9


def landmark_indices(
    landmarks: Sequence[int] | npt.NDArray[np.int64], length: int
) -> npt.NDArray[np.int64]:
    """Sorted unique landmark timestamps, checked to lie in 0..length-1."""
    marks = np.unique(np.asarray(list(landmarks), dtype=np.int64))
    if marks.size and (marks[0] < 0 or marks[-1] >= length):
        raise ConfigError(
            f"landmarks must be timestamps in 0..{length - 1}; got {marks[0]}..{marks[-1]}"
        )
    return marks


def landmark_spend(
    epsilons: npt.NDArray[np.float64], landmarks: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """sum_{i in L u {t}} eps_i for every t."""
    eps = np.asarray(epsilons, dtype=np.float64)
    is_mark = np.zeros(eps.size, dtype=bool)
    is_mark[landmarks] = True
    total = float(eps[is_mark].sum())
    return np.where(is_mark, total, total + eps)


def verify_landmark_budget(
    epsilons: Sequence[float] | npt.NDArray[np.float64],
    landmarks: Sequence[int] | npt.NDArray[np.int64],
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
