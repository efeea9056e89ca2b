"""What an epsilon costs in decisions (SPEC section 6; seed 003, Tables 2 and 3).

Two downstream uses of daily OD matrices are simulated with exact and with private inputs and
their decisions compared:

* **Mobility SIR** (Goel & Sharma 2020) per region, one step per day, with the corrected
  dR_i = mu I_i and dI_i = new_i - mu I_i; region i "acts" on day t when I_i / N_i >= 0.20.
  Accuracy, precision and recall of the private decisions against the exact ones, per region
  over all days, then averaged over regions (with the standard deviation across regions).
* **Aid targeting** after a shock: total out-migration from the affected region over the
  following days (percent error) and the top-k destination regions (overlap share).

Privacy: these functions are *simulations for the data holder*. They compare private outputs
with exact ones, so their results are not differentially private and must not be published as
if they were; as seed 003 notes, choosing epsilon from them leaks a little, so run them on
pre-program or synthetic data. The private inputs are made by :func:`privatize_od` and
:func:`privatize_counts`, which use the same calibrated noise (``privmob.privacy.mechanisms``)
as the releases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness

ACT_THRESHOLD = 0.20


# -- private inputs (the mechanism of SPEC 4.1 and 4.4 applied to dense exact counts) -----------


def privatize_od(
    counts: np.ndarray,
    epsilon: float,
    *,
    T: int = 1,
    tau: int = 0,
    kind: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    rng: Randomness | int | None = None,
) -> np.ndarray:
    """Algorithm 1 of seed 003 on exact (…, k, k) counts: noise of scale T/eps on every
    off-diagonal cell, values below tau set to 0, diagonal 0. epsilon-DP per matrix (user level
    with T, trip level with T = 1) when the counts were bounded to T trips per user."""
    c = np.asarray(counts)
    if c.ndim < 2 or c.shape[-1] != c.shape[-2]:
        raise ConfigError("OD counts must have shape (..., k, k)")
    from privmob.privacy.postprocess import suppress  # the release's own post-processing

    noise, _ = calibrate(kind, epsilon, l1_sensitivity=T)
    noisy = suppress(noise.add(c.astype(np.int64), rng), tau)
    idx = np.arange(c.shape[-1])
    noisy[..., idx, idx] = 0
    return noisy


def privatize_counts(
    counts: np.ndarray,
    epsilon: float,
    *,
    kind: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    rng: Randomness | int | None = None,
) -> np.ndarray:
    """DP population counts (SPEC 4.4): sensitivity 1 (one home per user), clamped at 0."""
    noise, _ = calibrate(kind, epsilon, l1_sensitivity=1)
    return np.asarray(np.maximum(noise.add(np.asarray(counts, dtype=np.int64), rng), 0))


# -- mobility SIR ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Epidemic:
    """S, I, R per day (rows 0..days) and region."""

    S: np.ndarray
    I: np.ndarray  # noqa: E741
    R: np.ndarray
    N: np.ndarray

    @property
    def prevalence(self) -> np.ndarray:
        return np.asarray(self.I / self.N)

    def decisions(self, threshold: float = ACT_THRESHOLD) -> np.ndarray:
        """Boolean (days+1, k): region acts when I/N >= threshold."""
        return self.prevalence >= threshold


def mobility_sir(
    od: np.ndarray,
    population: np.ndarray,
    initial_infected: np.ndarray,
    *,
    days: int | None = None,
    beta: float = 0.10,
    mu: float = 0.04,
    alpha: float = 1.0,
) -> Epidemic:
    """Goel & Sharma's mobility SIR (SPEC 6), one step per day with day t's matrix.

    new_i = beta S_i I_i/N_i + alpha beta S_i (sum_j M_ij I_j/N_j) / (N_i + sum_j M_ij);
    S -= new; I += new - mu I; R += mu I. ``od`` is (n_days, k, k); it is cycled if the
    simulation runs longer. Populations below 1 are raised to 1 (noisy inputs).
    """
    m = np.asarray(od, dtype=np.float64)
    if m.ndim == 2:
        m = m[None]
    n_mats, k, k2 = m.shape
    if k != k2:
        raise ConfigError("OD matrices must be square")
    N = np.maximum(np.asarray(population, dtype=np.float64), 1.0)
    if N.shape != (k,):
        raise ConfigError(f"population must have one value per region ({k})")
    days = n_mats if days is None else days
    S = np.empty((days + 1, k))
    I = np.empty((days + 1, k))  # noqa: E741
    R = np.empty((days + 1, k))
    I[0] = np.minimum(np.asarray(initial_infected, dtype=np.float64), N)
    S[0] = N - I[0]
    R[0] = 0.0
    for t in range(days):
        mt = m[t % n_mats].copy()
        np.fill_diagonal(mt, 0.0)
        s, i = S[t], I[t]
        frac = i / N
        visit = mt @ frac / (N + mt.sum(axis=1))
        new = beta * s * frac + alpha * beta * s * visit
        new = np.minimum(new, s)
        rec = mu * i
        S[t + 1] = s - new
        I[t + 1] = i + new - rec
        R[t + 1] = R[t] + rec
    return Epidemic(S, I, R, N)


@dataclass(frozen=True)
class DecisionScores:
    """Per-region accuracy, precision, recall of private vs exact decisions."""

    accuracy: np.ndarray
    precision: np.ndarray
    recall: np.ndarray

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in ("accuracy", "precision", "recall"):
            v = getattr(self, name)
            out[name] = float(v.mean())
            out[f"{name}_sd"] = float(v.std())
        return out


def compare_decisions(exact: np.ndarray, private: np.ndarray) -> DecisionScores:
    """Scores per region (columns) over days (rows); the exact decisions are the truth.

    Where precision or recall is 0/0 (no positive decision on either side) it counts as 1 when
    the two sides agree that there is nothing to act on, else 0.
    """
    e = np.asarray(exact, dtype=bool)
    p = np.asarray(private, dtype=bool)
    tp = (e & p).sum(axis=0)
    fp = (~e & p).sum(axis=0)
    fn = (e & ~p).sum(axis=0)
    acc = (e == p).mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), (fn == 0).astype(float))
        rec = np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), (fp == 0).astype(float))
    return DecisionScores(acc.astype(float), prec.astype(float), rec.astype(float))


def seed_infection(population: np.ndarray, origin: int, share: float = 0.01) -> np.ndarray:
    """Initial infections: ``share`` of the (exact or private) population of one region."""
    init = np.zeros(len(population), dtype=np.float64)
    init[origin] = share * max(float(population[origin]), 1.0)
    return init


# -- aid targeting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AidTargeting:
    total_exact: float
    total_private: float
    percent_error: float
    topk_accuracy: float  # mean over days of |top-k private ∩ top-k exact| / k
    topk_accuracy_period: float  # the same for the period's summed flows


def top_destinations(flows: np.ndarray, origin: int, k: int) -> np.ndarray:
    """The k destinations with the largest flows out of ``origin`` (ties: smaller index)."""
    f = np.asarray(flows, dtype=np.float64).copy()
    f[origin] = -np.inf
    order = np.lexsort((np.arange(len(f)), -f))
    return order[:k]


def aid_targeting(exact: np.ndarray, private: np.ndarray, origin: int, k: int = 3) -> AidTargeting:
    """Out-migration from ``origin`` over the given days (n_days, k, k), exact vs private."""
    e = np.asarray(exact, dtype=np.float64)
    p = np.asarray(private, dtype=np.float64)
    if e.shape != p.shape or e.ndim != 3:
        raise ConfigError("aid targeting needs two (n_days, k, k) arrays of the same shape")
    out_e = e[:, origin, :].copy()
    out_p = p[:, origin, :].copy()
    out_e[:, origin] = 0
    out_p[:, origin] = 0
    tot_e, tot_p = float(out_e.sum()), float(out_p.sum())
    pct = abs(tot_p - tot_e) / tot_e * 100.0 if tot_e > 0 else float("nan")

    def overlap(a: np.ndarray, b: np.ndarray) -> float:
        ta, tb = top_destinations(a, origin, k), top_destinations(b, origin, k)
        return len(set(ta.tolist()) & set(tb.tolist())) / k

    daily = float(np.mean([overlap(out_e[t], out_p[t]) for t in range(e.shape[0])]))
    return AidTargeting(tot_e, tot_p, pct, daily, overlap(out_e.sum(0), out_p.sum(0)))
