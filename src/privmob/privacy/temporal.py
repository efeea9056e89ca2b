"""Temporal privacy loss (TPL) under temporal correlation (Cao et al., ICDE 2017; SPEC 4.5).

A release made of per-timestamp epsilon_t-DP parts leaks more than epsilon_t about the value
at one timestamp when an adversary knows how values are correlated in time, here a Markov
chain with a *backward* transition matrix P^B (row l: P(l_{t-1} = . | l_t = l)) and a
*forward* matrix P^F (row l: P(l_{t+1} = . | l_t = l)).

- ``L(alpha)`` (:func:`loss_increment`): the most that a loss alpha about the neighbouring
  timestamp can add through the correlation, ``max over ordered row pairs (q, d) of
  log sup_x (q.x)/(d.x)`` subject to ``e^-alpha <= x_j/x_k <= e^alpha``; computed in closed
  form (SPEC 4.5: the iterative J set), cross-checked against a linear program in the tests.
- Backward loss: BPL_1 = eps_1, BPL_t = L^B(BPL_{t-1}) + eps_t; forward loss:
  FPL_T = eps_T, FPL_t = L^F(FPL_{t+1}) + eps_t; total TPL_t = BPL_t + FPL_t - eps_t.
- Event-level releases: :func:`temporal_loss`. User-level releases (the whole series is the
  unit): the loss at every timestamp is sum_t eps_t whatever the correlation
  (:func:`user_level_loss`). Landmark releases (:func:`landmark_loss`): for every t, each
  i in S = L u {t} accumulates backward loss only from the element of S before it and forward
  loss only up to the element of S after it, and the loss at t is the sum over S.
- :func:`max_budget_for_target`: the largest per-timestamp budget (or the largest multiple
  of a budget profile) whose maximum TPL stays at or below a target, by bisection (the loss
  is non-decreasing in every eps_t because L is non-decreasing).

Timestamps are 0-based here (SPEC writes them 1-based).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from privmob.errors import ConfigError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "backward_loss",
    "forward_loss",
    "landmark_loss",
    "loss_increment",
    "max_budget_for_target",
    "pair_loss",
    "temporal_loss",
    "transition_matrix",
    "user_level_loss",
]

_ROW_SUM_TOLERANCE = 1e-6
#: real values: matrices of transition probabilities, privacy losses per time
Reals: TypeAlias = "npt.NDArray[np.float64]"
Budgets: TypeAlias = "Sequence[float] | Reals"


def transition_matrix(matrix: object, *, name: str = "transition matrix") -> Reals:
    """Validate a row-stochastic square matrix (non-negative rows summing to 1)."""
    try:
        p = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a square matrix of numbers: {exc}") from exc
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] == 0:
        raise ConfigError(f"{name} must be a non-empty square matrix, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ConfigError(f"{name} must hold finite, non-negative probabilities")
    sums = p.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > _ROW_SUM_TOLERANCE)
    if bad.size:
        raise ConfigError(
            f"{name}: row {int(bad[0])} sums to {sums[bad[0]]:.6g}, not 1",
            hint="rows are conditional distributions P(next state | current state)",
        )
    out: Reals = p / sums[:, None]
    return out


def pair_loss(q: Reals, d: Reals, alpha: float) -> float:
    """log sup_x (q.x)/(d.x) over e^-alpha <= x_j/x_k <= e^alpha, for two probability rows.

    The supremum puts x_j = e^alpha on a set J and 1 elsewhere; J is found by the fixed point
    of SPEC 4.5: start from {j : q_j > d_j}, compute v = (Q(e^a - 1) + 1)/(D(e^a - 1) + 1)
    with Q, D the sums of q, d over J, keep the j with q_j/d_j > v, repeat until stable.
    """
    if alpha < 0:
        raise ConfigError(f"alpha must be >= 0, got {alpha}")
    if alpha == 0:
        return 0.0
    g = math.expm1(alpha)
    if not math.isfinite(g):
        # alpha = inf: the ratio is unconstrained; sup = max_j q_j/d_j
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(q > 0, q / d, 0.0)
        top = float(np.max(r))
        return math.log(top) if top > 0 else 0.0
    member = q > d
    v = 1.0
    while member.any():
        big_q = float(q[member].sum())
        big_d = float(d[member].sum())
        v = (big_q * g + 1.0) / (big_d * g + 1.0)
        # q_j / d_j > v  <=>  q_j > v d_j (no division, d_j may be 0)
        keep = member & (q > v * d)
        if np.array_equal(keep, member):
            break
        member = keep
    else:
        v = 1.0
    return math.log(v) if v > 1.0 else 0.0


def loss_increment(matrix: Reals, alpha: float) -> float:
    """L(alpha): the loss that alpha at a neighbouring timestamp adds (max over row pairs)."""
    p = np.asarray(matrix, dtype=np.float64)
    n = p.shape[0]
    best = 0.0
    for a in range(n):
        for b in range(n):
            if a != b:
                best = max(best, pair_loss(p[a], p[b], alpha))
    return best


def _budgets(epsilons: Budgets) -> Reals:
    eps = np.asarray(epsilons, dtype=np.float64)
    if eps.ndim != 1 or eps.size == 0:
        raise ConfigError("the budget sequence must be a non-empty 1-d sequence")
    if not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ConfigError("per-timestamp budgets must be finite and >= 0")
    return eps


def backward_loss(backward: Reals | None, epsilons: Budgets) -> Reals:
    """BPL_t for an event-level release with per-timestamp budgets (None: no correlation)."""
    eps = _budgets(epsilons)
    return _backward(None if backward is None else transition_matrix(backward), eps)


def forward_loss(forward: Reals | None, epsilons: Budgets) -> Reals:
    """FPL_t for an event-level release with per-timestamp budgets (None: no correlation)."""
    eps = _budgets(epsilons)
    return _forward(None if forward is None else transition_matrix(forward), eps)


def _backward(p: Reals | None, eps: Reals) -> Reals:
    out = np.empty_like(eps)
    prev = 0.0
    for t, e in enumerate(eps):
        prev = (loss_increment(p, prev) if p is not None and t > 0 else 0.0) + float(e)
        out[t] = prev
    return out


def _forward(p: Reals | None, eps: Reals) -> Reals:
    return _backward(p, eps[::-1])[::-1].copy()


def temporal_loss(
    backward: Reals | None,
    forward: Reals | None,
    epsilons: Budgets,
) -> Reals:
    """TPL_t = BPL_t + FPL_t - eps_t of an event-level release (Cao et al., Theorem 3)."""
    eps = _budgets(epsilons)
    pb = None if backward is None else transition_matrix(backward, name="backward matrix")
    pf = None if forward is None else transition_matrix(forward, name="forward matrix")
    tpl: Reals = _backward(pb, eps) + _forward(pf, eps) - eps
    return tpl


def user_level_loss(epsilons: Budgets) -> Reals:
    """Loss at every timestamp of a user-level release: sum_t eps_t.

    When the whole series is the unit, its loss is the sequential composition of all parts;
    correlation adds nothing to it (the adversary's uncertainty is already the whole series).
    """
    eps = _budgets(epsilons)
    return np.full(eps.shape, float(eps.sum()))


def landmark_loss(
    backward: Reals | None,
    forward: Reals | None,
    epsilons: Budgets,
    landmarks: Sequence[int] | npt.NDArray[np.int64],
) -> Reals:
    """Loss at each t of a landmark release (seed 001, section "under temporal correlation").

    For S = L u {t} in time order, each i in S gets
    alpha_i = BPL over (i^-, i] + FPL over [i, i^+) - eps_i, where i^- / i^+ are the elements
    of S before / after i (or the start / end of the series); the loss at t is sum_{i in S}
    alpha_i. With L empty this is :func:`temporal_loss`; with L = every timestamp it is
    :func:`user_level_loss`.
    """
    eps = _budgets(epsilons)
    n = eps.size
    marks = sorted({int(i) for i in landmarks})
    if marks and (marks[0] < 0 or marks[-1] >= n):
        raise ConfigError(f"landmarks must be timestamps in 0..{n - 1}")
    pb = None if backward is None else transition_matrix(backward, name="backward matrix")
    pf = None if forward is None else transition_matrix(forward, name="forward matrix")
    cache: dict[tuple[str, int, int], float] = {}

    def bpl(start: int, end: int) -> float:  # backward loss at `end` from releases start..end
        key = ("b", start, end)
        if key not in cache:
            cache[key] = float(_backward(pb, eps[start : end + 1])[-1])
        return cache[key]

    def fpl(start: int, end: int) -> float:  # forward loss at `start` from releases start..end
        key = ("f", start, end)
        if key not in cache:
            cache[key] = float(_forward(pf, eps[start : end + 1])[0])
        return cache[key]

    out = np.empty(n)
    for t in range(n):
        s = sorted(set(marks) | {t})
        total = 0.0
        for k, i in enumerate(s):
            lo = s[k - 1] + 1 if k > 0 else 0
            hi = s[k + 1] - 1 if k + 1 < len(s) else n - 1
            total += bpl(lo, i) + fpl(i, hi) - float(eps[i])
        out[t] = total
    return out


def max_budget_for_target(
    target: float,
    *,
    backward: Reals | None,
    forward: Reals | None,
    length: int,
    landmarks: Sequence[int] | None = None,
    profile: Budgets | None = None,
    tolerance: float = 1e-9,
) -> float:
    """Largest c such that the max loss of budgets c * profile stays <= target.

    ``profile`` defaults to ones (then c is the per-timestamp budget). With ``landmarks`` the
    landmark loss is used, else the event-level TPL. Bisection on c: the loss is continuous
    and non-decreasing in c, so the result is within ``tolerance`` (relative) below the exact
    answer and never above it.
    """
    if not (target > 0 and math.isfinite(target)):
        raise ConfigError(f"the target loss must be a finite number > 0, got {target}")
    if length < 1:
        raise ConfigError("the series needs at least one timestamp")
    base = np.ones(length) if profile is None else _budgets(profile)
    if base.size != length:
        raise ConfigError(f"the budget profile has {base.size} entries, not {length}")
    if not np.any(base > 0):
        raise ConfigError("the budget profile must have a positive entry")
    pb = None if backward is None else transition_matrix(backward, name="backward matrix")
    pf = None if forward is None else transition_matrix(forward, name="forward matrix")

    def worst(c: float) -> float:
        eps = c * base
        if landmarks is not None:
            return float(np.max(landmark_loss(pb, pf, eps, landmarks)))
        return float(np.max(temporal_loss(pb, pf, eps)))

    # the loss at some t is at least c * max(profile), so c <= hi; an event-level loss is at
    # most c * sum(profile) (L(alpha) <= alpha), a landmark loss at most twice that
    hi = target / float(base.max())
    if worst(hi) <= target:
        return hi
    lo = target / (2.0 * float(base.sum()))
    while worst(lo) > target:  # not reached for valid matrices; kept as a guard
        lo *= 0.5
    while hi - lo > tolerance * hi:
        mid = 0.5 * (lo + hi)
        if worst(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo
