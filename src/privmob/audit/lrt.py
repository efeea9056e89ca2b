"""Likelihood-ratio membership attack with perfect knowledge (SPEC section 7, seed 002).

The attacker knows every other user's contribution ``c`` to each cell and the target's set of
(unique) trip cells. Each of the target's cells holds ``c + x`` before noise, ``x = 1`` if the
target is in the data and ``0`` if not. The release adds noise and suppresses noisy values
below a threshold ``tau``; the attacker sums per-cell log-likelihood ratios

    l(y) = ln P(y | c + 1) - ln P(y | c)            (released, y >= tau)
    l    = ln P(Y < tau | c + 1) - ln P(Y < tau | c)  (suppressed)

and guesses "member" when the sum is positive (ties: a fair coin).

Three noise models are covered, each with its exact likelihood:

* ``laplace``: continuous Laplace of scale b, no rounding (seed 002's Bassolas setting).
  Released: l = (|y - c| - |y - c - 1|)/b; suppressed: l = ln(F(tau-1-c)/F(tau-c)), F the
  Laplace CDF. SPEC vectors (b = 1/0.66): +0.66, -0.132, -0.39417.
* ``laplace-rounded``: continuous Laplace then rounding half up (seed 003's Algorithm 1):
  P(Y = y | mu) = F(y + 1/2 - mu) - F(y - 1/2 - mu); suppressed iff mu + eta < tau - 1/2.
* ``discrete-laplace``: privmob's two-sided geometric noise, P(eta = j) = (1-q)/(1+q) q^|j|,
  q = e^{-1/b}. Released: l = (|y - c| - |y - c - 1|)/b (integer y, the normalising constants
  cancel); suppressed (y <= tau - 1): l = ln(G(tau-2-c)/G(tau-1-c)) with the discrete CDF
  G(m) = q^{-m}/(1+q) for m < 0 and 1 - q^{m+1}/(1+q) for m >= 0.

The simulation (:func:`simulate`) draws the noise with privmob's own
:class:`privmob.privacy.mechanisms.Noise` (seeded, tests and audits only) and is vectorised over
trials for each number of trips k.

Release styles:

* ``trip``: trip-level noise of scale 1/epsilon per period; a target with k unique trips moves k
  cells, so its effective user-level epsilon is k * epsilon per period.
* ``user``: privmob's user-level release: each user is bounded to at most T trips, noise of
  scale T/epsilon; effective user-level epsilon is epsilon per period whatever k is. The
  attacker is told which min(k, T) trips were kept (stronger than reality, where the sample is
  keyed by a secret).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from privmob.audit.epsilon import EpsilonAudit, empirical_epsilon
from privmob.errors import ConfigError
from privmob.privacy.costs import membership_posterior_bound
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.samplers import Randomness


class NoiseModel(StrEnum):
    """Noise as the attacker models it (and as the simulation draws it)."""

    LAPLACE = "laplace"  # continuous, unrounded (seed 002)
    LAPLACE_ROUNDED = "laplace-rounded"  # continuous then round half up (seed 003)
    DISCRETE_LAPLACE = "discrete-laplace"  # privmob's default: two-sided geometric

    def __str__(self) -> str:
        return self.value


class ReleaseStyle(StrEnum):
    TRIP = "trip"  # trip-level noise (the claim of seeds 002/003)
    USER = "user"  # privmob: user bounded to T trips, noise scale T/epsilon

    def __str__(self) -> str:
        return self.value


# -- log CDFs and log pmfs ------------------------------------------------------------------------


def _log_laplace_cdf(x: np.ndarray, b: float) -> np.ndarray:
    """ln F(x) for Laplace(0, b), stable in both tails."""
    x = np.asarray(x, dtype=np.float64)
    neg = math.log(0.5) + np.minimum(x, 0.0) / b
    pos = np.log1p(-0.5 * np.exp(-np.maximum(x, 0.0) / b))
    return np.asarray(np.where(x < 0, neg, pos))


def _log_discrete_laplace_cdf(m: np.ndarray, b: float) -> np.ndarray:
    """ln P(eta <= m) for the discrete Laplace of scale b (integer m)."""
    m = np.asarray(m, dtype=np.float64)
    log_q = -1.0 / b
    log1pq = math.log1p(math.exp(log_q))
    neg = -np.abs(np.minimum(m, 0.0)) / b - log1pq  # q^{-m} / (1+q) for m < 0
    pos = np.log1p(-np.exp((np.maximum(m, 0.0) + 1.0) * log_q - log1pq))
    return np.asarray(np.where(m < 0, neg, pos))


def _log_laplace_interval(a: np.ndarray, b: float) -> np.ndarray:
    """ln (F(a + 1) - F(a)) for Laplace(0, b): the mass of a unit interval."""
    a = np.asarray(a, dtype=np.float64)
    log_w = math.log(-math.expm1(-1.0 / b))  # ln(1 - e^{-1/b})
    right = math.log(0.5) - np.maximum(a, 0.0) / b + log_w  # a >= 0
    left = math.log(0.5) + np.minimum(a + 1.0, 0.0) / b + log_w  # a + 1 <= 0
    mid_val = 1.0 - 0.5 * np.exp(np.minimum(a, 0.0) / b) - 0.5 * np.exp(-np.maximum(a + 1, 0) / b)
    mid = np.log(np.maximum(mid_val, 1e-300))
    return np.where(a >= 0, right, np.where(a + 1 <= 0, left, mid))


def log_lr_released(
    y: np.ndarray, c: np.ndarray, scale: float, model: NoiseModel | str
) -> np.ndarray:
    """Per-cell ln P(y | c+1) - ln P(y | c) for a released value y (y >= tau)."""
    model = NoiseModel(model)
    y = np.asarray(y, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if model is NoiseModel.LAPLACE_ROUNDED:
        upper = _log_laplace_interval(y - 0.5 - (c + 1), scale)
        return np.asarray(upper - _log_laplace_interval(y - 0.5 - c, scale))
    # continuous density and discrete pmf have the same ratio exp(-|y-mu|/b)
    return np.asarray((np.abs(y - c) - np.abs(y - c - 1.0)) / scale)


def log_lr_suppressed(
    c: np.ndarray, tau: float, scale: float, model: NoiseModel | str
) -> np.ndarray:
    """Per-cell ln P(Y < tau | c+1) - ln P(Y < tau | c) for a suppressed cell."""
    model = NoiseModel(model)
    c = np.asarray(c, dtype=np.float64)
    if model is NoiseModel.LAPLACE:
        return np.asarray(_log_laplace_cdf(tau - 1.0 - c, scale) - _log_laplace_cdf(tau - c, scale))
    if model is NoiseModel.LAPLACE_ROUNDED:
        # round(mu + eta) <= tau - 1  <=>  eta < tau - 1/2 - mu
        return np.asarray(
            _log_laplace_cdf(tau - 1.5 - c, scale) - _log_laplace_cdf(tau - 0.5 - c, scale)
        )
    # integer output: suppressed <=> c + x + eta <= tau - 1
    below = _log_discrete_laplace_cdf(tau - 2.0 - c, scale)
    return np.asarray(below - _log_discrete_laplace_cdf(tau - 1.0 - c, scale))


def cell_log_lr(
    y: np.ndarray, c: np.ndarray, tau: float, scale: float, model: NoiseModel | str
) -> np.ndarray:
    """Per-cell log-likelihood ratio of 'member' vs 'not member' (suppressed where y < tau)."""
    y = np.asarray(y, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    released = y >= tau
    out = np.empty(np.broadcast(y, c).shape, dtype=np.float64)
    out[...] = log_lr_released(y, c, scale, model)
    if not np.all(released):
        sup = np.broadcast_to(log_lr_suppressed(c, tau, scale, model), out.shape)
        out = np.where(released, out, sup)
    return out


# -- the configurable release -------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseConfig:
    """A release as the audit simulates it.

    ``epsilon`` is the release's claimed epsilon per period (for its own unit), ``tau`` the
    suppression threshold (0 = none), ``bound`` the per-user trip bound T (style ``user``),
    ``periods`` how many periods (e.g. weeks) the attacker sees, the target contributing its k
    unique trips in each. ``scale_factor`` multiplies the correct noise scale (1 = correct;
    < 1 simulates a broken mechanism for audits of the audit).
    """

    epsilon: float = 0.66
    tau: float = 100.0
    noise: NoiseModel = NoiseModel.LAPLACE
    style: ReleaseStyle = ReleaseStyle.TRIP
    bound: int = 70
    periods: int = 1
    scale_factor: float = 1.0

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be > 0, got {self.epsilon}")
        if self.bound < 1 or self.periods < 1:
            raise ConfigError("bound and periods must be >= 1")
        if not self.scale_factor > 0:
            raise ConfigError("scale_factor must be > 0")
        try:
            object.__setattr__(self, "noise", NoiseModel(self.noise))
            object.__setattr__(self, "style", ReleaseStyle(self.style))
        except ValueError as exc:
            raise ConfigError(
                str(exc),
                hint=f"noise: {', '.join(NoiseModel)}; style: {', '.join(ReleaseStyle)}",
            ) from None

    @property
    def scale(self) -> float:
        """The noise scale b actually used."""
        sens = self.bound if self.style is ReleaseStyle.USER else 1
        return self.scale_factor * sens / self.epsilon

    def cells(self, k: int) -> int:
        """How many of the target's cells the release moves (per period)."""
        return min(k, self.bound) if self.style is ReleaseStyle.USER else k

    def epsilon_user(self, k: int) -> float:
        """The claimed user-level epsilon for a target with k unique trips per period."""
        per_period = self.epsilon if self.style is ReleaseStyle.USER else k * self.epsilon
        if self.style is ReleaseStyle.USER and k == 0:
            per_period = 0.0
        return per_period * self.periods

    def draw(self, mean: np.ndarray, rng: Randomness) -> np.ndarray:
        """Noisy values with privmob's own noise (seeded simulation only)."""
        if self.noise is NoiseModel.LAPLACE:
            return Noise(NoiseKind.LAPLACE_ROUNDED, self.scale).add_float(mean, rng)
        kind = (
            NoiseKind.LAPLACE_ROUNDED
            if self.noise is NoiseModel.LAPLACE_ROUNDED
            else NoiseKind.DISCRETE_LAPLACE
        )
        return Noise(kind, self.scale).add(mean.astype(np.int64), rng).astype(np.float64)


Background = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def background_from_counts(counts: Sequence[int] | np.ndarray) -> Background:
    """Background counts c drawn (with replacement) from observed per-cell counts."""
    pool = np.asarray(counts, dtype=np.int64).ravel()
    if pool.size == 0 or np.any(pool < 0):
        raise ConfigError("background counts must be a non-empty list of counts >= 0")

    def draw(gen: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return pool[gen.integers(0, pool.size, size=shape)]

    return draw


def synthetic_background(
    median: float = 100.0, sigma: float = 1.0, seed: int = 7, n_cells: int = 20_000
) -> Background:
    """Synthetic phone-data-like OD cell counts: log-normal around ``median`` (heavy tail).

    With the default median equal to seed 002's threshold of 100, about half of a target's
    cells sit below the threshold before the target is added, as in a city's OD matrix.
    """
    gen = np.random.default_rng(seed)
    counts = np.floor(gen.lognormal(math.log(median), sigma, n_cells)).astype(np.int64)
    return background_from_counts(counts)


@dataclass
class LRTResult:
    """Attack outcome per k: accuracy, error counts, the bound for the claimed epsilon."""

    config: ReleaseConfig
    ks: np.ndarray
    trials: int
    n_in: np.ndarray
    n_out: np.ndarray
    false_negatives: np.ndarray  # members guessed "out"
    false_positives: np.ndarray  # non-members guessed "in"
    epsilon_user: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def accuracy(self) -> np.ndarray:
        wrong = self.false_negatives + self.false_positives
        return np.asarray(1.0 - wrong / (self.n_in + self.n_out))

    @property
    def bound(self) -> np.ndarray:
        return np.array([membership_posterior_bound(e) for e in self.epsilon_user])

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "k": self.ks,
                "style": str(self.config.style),
                "noise": str(self.config.noise),
                "epsilon_user": self.epsilon_user,
                "accuracy": self.accuracy,
                "bound": self.bound,
                "fpr": self.false_positives / self.n_out,
                "fnr": self.false_negatives / self.n_in,
                "trials": self.n_in + self.n_out,
            }
        )

    def params(self) -> dict[str, object]:
        d = asdict(self.config)
        d["noise"] = str(self.config.noise)
        d["style"] = str(self.config.style)
        d["scale"] = self.config.scale
        d["trials"] = self.trials
        return d


def attack_trials(
    config: ReleaseConfig,
    k: int,
    trials: int,
    background: Background,
    rng: Randomness,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``trials`` balanced trials (first half members) for one k.

    Returns (membership, guess) boolean arrays of length ``trials``.
    """
    gen = rng.generator
    member = np.zeros(trials, dtype=bool)
    member[: (trials + 1) // 2] = True
    n = config.cells(k) * config.periods
    if n == 0:
        guess = gen.random(trials) < 0.5
        return member, guess
    c = background(gen, (trials, n)).astype(np.float64)
    y = config.draw(c + member[:, None], rng)
    llr = cell_log_lr(y, c, config.tau, config.scale, config.noise).sum(axis=1)
    # ties (exactly 0 within rounding) get a fair coin
    tie = np.abs(llr) <= 1e-9 * max(1.0, n / config.scale)
    guess = np.where(tie, gen.random(trials) < 0.5, llr > 0)
    return member, guess


def simulate(
    config: ReleaseConfig,
    ks: Sequence[int] | np.ndarray = range(71),
    trials: int = 10_000,
    background: Background | None = None,
    rng: Randomness | int = 0,
    progress: Callable[[int], None] | None = None,
) -> LRTResult:
    """Attacker accuracy for targets with each k unique trips (balanced in/out trials).

    A simulation, not a release: it reads no data (background counts are drawn from the given
    pool) and its noise is seeded. The guarantee it checks: for an epsilon_user-DP release the
    accuracy of any attacker with a 50% prior is at most e^eps_user / (1 + e^eps_user).
    """
    if trials < 2:
        raise ConfigError("trials must be >= 2")
    r = rng if isinstance(rng, Randomness) else Randomness.for_tests(int(rng))
    if r.for_publication:
        raise ConfigError("the attack simulation needs a seeded Randomness")
    bg = background or synthetic_background()
    ks_arr = np.asarray(list(ks), dtype=np.int64)
    if ks_arr.size == 0 or np.any(ks_arr < 0):
        raise ConfigError("ks must be a non-empty list of trip counts >= 0")
    n_in = np.zeros(ks_arr.size, dtype=np.int64)
    n_out = np.zeros_like(n_in)
    fn = np.zeros_like(n_in)
    fp = np.zeros_like(n_in)
    for i, k in enumerate(ks_arr):
        member, guess = attack_trials(config, int(k), trials, bg, r)
        n_in[i] = member.sum()
        n_out[i] = (~member).sum()
        fn[i] = (member & ~guess).sum()
        fp[i] = (~member & guess).sum()
        if progress:
            progress(1)
    eps_user = np.array([config.epsilon_user(int(k)) for k in ks_arr])
    return LRTResult(config, ks_arr, trials, n_in, n_out, fn, fp, eps_user)


def epsilon_audit(
    result: LRTResult, k: int, *, confidence: float = 0.95, delta: float = 0.0
) -> EpsilonAudit:
    """Empirical epsilon lower bound from the attack's errors at one k, beside the claim."""
    idx = np.flatnonzero(result.ks == k)
    if idx.size == 0:
        raise ConfigError(f"k={k} was not simulated")
    i = int(idx[0])
    return empirical_epsilon(
        int(result.false_positives[i]),
        int(result.n_out[i]),
        int(result.false_negatives[i]),
        int(result.n_in[i]),
        delta=delta,
        confidence=confidence,
        claimed=float(result.epsilon_user[i]),
    )
