"""Mechanisms (SPEC section 3): calibrated noise on integer vectors and private selection.

A :class:`Noise` is a calibrated noise distribution: its kind, its scale, and the privacy cost
it buys for a given sensitivity. ``calibrate`` chooses the scale from epsilon (and delta) and
the *enforced* sensitivity; nothing here ever looks at the data to choose a scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.privacy import samplers
from privmob.privacy.costs import Cost, PrivacyUnit, gaussian_rho, zcdp_to_epsilon
from privmob.privacy.discrete_gaussian import discrete_gaussian_sigma, scale_up, sigma_for_rho
from privmob.privacy.payment import require_paid
from privmob.privacy.samplers import Randomness, resolve

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")


class NoiseKind(StrEnum):
    """The noise families privmob offers."""

    DISCRETE_LAPLACE = "discrete-laplace"  # two-sided geometric; pure epsilon-DP, integer output
    DISCRETE_GAUSSIAN = "discrete-gaussian"  # rho-zCDP, stated as (epsilon, delta)
    LAPLACE_ROUNDED = "laplace-rounded"  # continuous Laplace then rounding (seed 003's Algorithm 1)

    def __str__(self) -> str:
        return self.value

    @property
    def traits(self) -> NoiseTraits:
        """What this kind does differently: its row of :data:`NOISE_KINDS`."""
        return NOISE_KINDS[self]


@dataclass(frozen=True)
class NoiseTraits:
    """What differs between noise kinds, one row of :data:`NOISE_KINDS` per kind: the code
    that uses noise asks the kind's row, never which kind it is."""

    #: calibrated in rho-zCDP and stated as (epsilon, delta) (needs 0 < delta < 1); the other
    #: kinds are pure epsilon-DP with Laplace tails
    zcdp: bool
    #: offered on real values too (:meth:`Noise.add_float`: continuous Laplace, no rounding)
    real_valued: bool
    #: exact integer draws under pure epsilon-DP: the one kind a mean, a chosen bound and an
    #: integer landmark series are released with
    exact_pure: bool
    #: a hierarchy level's noise variance is in proportion to 1 / share ** power (Laplace: the
    #: scale 1 / share, squared; Gaussian under zCDP: rho in proportion to the share)
    variance_power: int
    #: ``values`` (integers) plus independent noise of ``scale`` on every entry, as integers
    add: Callable[[npt.NDArray[np.int64], float, Randomness], npt.NDArray[np.int64]]
    #: P(|noise| > a) for an integer a >= 0 at ``scale`` (after rounding for laplace-rounded)
    tail: Callable[[int, float], float]
    #: the noise's standard deviation at ``scale``
    std: Callable[[float], float]
    #: the unnormalised probabilities of the integer noise on the integers ``k`` at ``scale``
    pmf_weights: Callable[[npt.NDArray[np.float64], float], npt.NDArray[np.float64]]
    #: E|noise| of one cell at ``scale``, exact; None where privmob does not compute it
    expected_abs_error: Callable[[float], float] | None


@dataclass(frozen=True)
class Noise:
    """A calibrated noise distribution.

    ``scale`` is b for the Laplace kinds (density proportional to exp(-|x|/b)) and sigma for the
    discrete Gaussian.
    """

    kind: NoiseKind
    scale: float

    def __post_init__(self) -> None:
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise ConfigError(f"noise scale must be a finite number > 0, got {self.scale}")

    def add(
        self, values: npt.ArrayLike, rng: Randomness | int | None = None
    ) -> npt.NDArray[np.int64]:
        """Return ``values`` plus independent noise on every entry (integers out)."""
        require_paid()
        r = resolve(rng)
        return self.kind.traits.add(np.asarray(values), self.scale, r)

    def add_later(
        self, size: int, rng: Randomness | int | None = None
    ) -> Callable[[npt.ArrayLike], npt.NDArray[np.int64]]:
        """Start drawing the noise of ``size`` integer cells now; add it when counts are ready.

        Returns ``add(values)``, equal in distribution to :meth:`add` on ``size`` integer
        values: the noise does not depend on the data (its scale and the domain are public),
        so it can be drawn while the engine counts. With the secure source the draw runs in a
        background thread (the samplers and DuckDB release the GIL); with a seeded source it
        runs inside ``add`` so that the draw order, hence the output for a seed, is unchanged.
        Nothing is released here: the caller still adds the noise after counting and charges
        the ledger before anything is written.
        """
        require_paid()  # here: the secure draw runs on a thread of its own
        r = resolve(rng)
        size = int(size)
        if not r.for_publication:
            return lambda values: self.add(self._check(values, size), r)
        from concurrent.futures import ThreadPoolExecutor  # on first use (issue 43)

        pool = ThreadPoolExecutor(1, thread_name_prefix="privmob-noise")
        pending = pool.submit(self.add, np.zeros(size, dtype=np.int64), r)
        pool.shutdown(wait=False)

        def add(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
            counts = self._check(values, size)
            # integer counts: values + round(z) = round(values + z) for laplace-rounded too
            out: npt.NDArray[np.int64] = counts.astype(np.int64) + pending.result().reshape(
                counts.shape
            )
            return out

        return add

    @staticmethod
    def _check(values: npt.ArrayLike, size: int) -> npt.NDArray[np.generic[object]]:
        counts = np.asarray(values)
        if counts.size != size or not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(f"expected {size} integer counts, got {counts.size} {counts.dtype}")
        return counts

    def add_float(
        self, values: npt.ArrayLike, rng: Randomness | int | None = None
    ) -> npt.NDArray[np.float64]:
        """Continuous noise on real values (Laplace kinds only); no rounding."""
        require_paid()
        r = resolve(rng)
        if not self.kind.traits.real_valued:
            raise ConfigError("real-valued noise is offered for the Laplace kinds only")
        real = np.asarray(values, dtype=np.float64)
        if r.for_publication:
            return samplers.secure_laplace(real, self.scale)
        return real + r.generator.laplace(0.0, self.scale, real.shape)

    # -- accuracy -------------------------------------------------------------------------
    def tail(self, a: int) -> float:
        """P(|noise| > a) for an integer a >= 0 (after rounding for laplace-rounded)."""
        return self.kind.traits.tail(a, self.scale)

    def margin_of_error(self, confidence: float = 0.95) -> int:
        """Smallest integer m with P(|noise| <= m) >= confidence."""
        if not 0 < confidence < 1:
            raise ConfigError("confidence must be in (0, 1)")
        lo, hi = 0, 1
        while self.tail(hi) > 1 - confidence:
            hi *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if self.tail(mid) > 1 - confidence:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @property
    def std(self) -> float:
        return self.kind.traits.std(self.scale)

    def to_dict(self) -> JSONObject:
        return {"kind": self.kind.value, "scale": self.scale}


def calibrate(
    kind: NoiseKind | str,
    epsilon: float,
    *,
    l1_sensitivity: float,
    l2_sensitivity: float | None = None,
    delta: float = 0.0,
    unit: PrivacyUnit = PrivacyUnit.USER,
) -> tuple[Noise, Cost]:
    """Noise for a query with the given enforced sensitivities and its privacy cost.

    Laplace kinds: b = Delta1 / epsilon, epsilon-DP. Discrete Gaussian: when a neighbour
    changes one cell by at most one (Delta1 = 1), the smallest sigma whose exact (epsilon,
    delta) by Canonne-Kamath-Steinke's Theorem 7 is within the request; otherwise the sigma
    whose rho = Delta2^2 / (2 sigma^2) converts to (epsilon, delta). Scales are rounded up,
    never to nearest (:mod:`privmob.privacy.discrete_gaussian`).
    """
    kind = NoiseKind(kind)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if l1_sensitivity <= 0:
        raise ConfigError("sensitivity must be > 0")
    if kind.traits.zcdp:
        if not 0 < delta < 1:
            raise ConfigError("the discrete Gaussian needs 0 < delta < 1", hint="pass --delta 1e-9")
        l2 = l2_sensitivity if l2_sensitivity is not None else l1_sensitivity
        if l1_sensitivity == 1 and l2 == 1:  # one cell, by one: the exact Theorem 7 bound
            sigma = discrete_gaussian_sigma(epsilon, delta, 1)
            return Noise(kind, sigma), Cost(epsilon, delta, gaussian_rho(1.0, sigma), unit)
        rho = rho_for_epsilon(epsilon, delta)
        sigma = sigma_for_rho(l2, rho)
        return Noise(kind, sigma), Cost(zcdp_to_epsilon(rho, delta), delta, rho, unit)
    return Noise(kind, scale_up(l1_sensitivity, epsilon)), Cost(epsilon, 0.0, None, unit)


def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """Largest rho whose zCDP-to-DP conversion at delta is epsilon."""
    log_term = math.log(1.0 / delta)
    rho = (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2
    return rho * (1 - 1e-12)  # stay on the safe side of floating-point rounding


# -- the noise kinds' table -------------------------------------------------------------------


def _integer_draws(
    secure: Callable[[npt.NDArray[np.int64], float], npt.NDArray[np.int64]],
    seeded: Callable[[np.random.Generator, int, float], npt.NDArray[np.int64]],
) -> Callable[[npt.NDArray[np.int64], float, Randomness], npt.NDArray[np.int64]]:
    """:attr:`NoiseTraits.add` of an exact integer sampler (secure, or seeded for tests)."""

    def add(values: npt.NDArray[np.int64], scale: float, r: Randomness) -> npt.NDArray[np.int64]:
        if r.for_publication:
            return secure(values, scale)
        noise = seeded(r.generator, values.size, scale)
        return np.asarray(values.astype(np.int64) + noise.reshape(values.shape))

    return add


def _add_rounded_laplace(
    values: npt.NDArray[np.int64], scale: float, r: Randomness
) -> npt.NDArray[np.int64]:
    """laplace-rounded: continuous Laplace, then round half up (seed 003 step 4)."""
    if r.for_publication:
        noisy = samplers.secure_laplace(values, scale)
    else:
        noisy = values + r.generator.laplace(0.0, scale, values.shape)
    return np.floor(noisy + 0.5).astype(np.int64)


def _discrete_laplace_tail(a: int, b: float) -> float:
    return 2.0 * math.exp(-(a + 1) / b) / (1.0 + math.exp(-1.0 / b))


def _rounded_laplace_tail(a: int, b: float) -> float:
    # round(eta) > a  <=>  |eta| >= a + 0.5 (ties go up, measure zero)
    return math.exp(-(a + 0.5) / b)


def _discrete_gaussian_tail(a: int, b: float) -> float:
    ks = np.arange(-int(a) - 1 - int(12 * b) - 10, int(a) + 2 + int(12 * b) + 10)
    w = np.exp(-(ks.astype(float) ** 2) / (2 * b * b))
    return float(w[np.abs(ks) > a].sum() / w.sum())


def _discrete_laplace_std(b: float) -> float:
    q = math.exp(-1.0 / b)
    return math.sqrt(2 * q) / (1 - q)


def _rounded_laplace_std(b: float) -> float:
    return math.sqrt(2.0) * b


def _discrete_gaussian_std(b: float) -> float:
    return b


def _discrete_laplace_weights(k: npt.NDArray[np.float64], s: float) -> npt.NDArray[np.float64]:
    w: npt.NDArray[np.float64] = np.exp(-np.abs(k) / s)
    return w


def _discrete_gaussian_weights(k: npt.NDArray[np.float64], s: float) -> npt.NDArray[np.float64]:
    w: npt.NDArray[np.float64] = np.exp(-(k**2) / (2.0 * s * s))
    return w


def _rounded_laplace_weights(k: npt.NDArray[np.float64], s: float) -> npt.NDArray[np.float64]:
    """P(round(eta) = k), eta ~ Laplace(s)."""
    cdf = np.where(k + 0.5 < 0, 0.5 * np.exp((k + 0.5) / s), 1 - 0.5 * np.exp(-(k + 0.5) / s))
    lo = np.where(k - 0.5 < 0, 0.5 * np.exp((k - 0.5) / s), 1 - 0.5 * np.exp(-(k - 0.5) / s))
    w: npt.NDArray[np.float64] = cdf - lo
    return w


def _discrete_laplace_abs_error(b: float) -> float:
    """2q / (1 - q^2) with q = exp(-1/b)."""
    q = math.exp(-1.0 / b)
    return 2.0 * q / (-math.expm1(-1.0 / b) * (1.0 + q))


def _discrete_gaussian_abs_error(s: float) -> float:
    """Summed over the support (to 12 sigma, past which the terms are below float rounding)."""
    k = np.arange(0, math.ceil(12 * s) + 10, dtype=np.float64)
    w = np.exp(-(k * k) / (2.0 * s * s))
    return float(2.0 * np.sum(k * w) / (2.0 * np.sum(w) - 1.0))


#: What differs by noise kind, one row per kind (the samplers are looked up when drawing).
NOISE_KINDS: dict[NoiseKind, NoiseTraits] = {
    NoiseKind.DISCRETE_LAPLACE: NoiseTraits(
        zcdp=False,
        real_valued=True,
        exact_pure=True,
        variance_power=2,
        add=_integer_draws(
            lambda values, scale: samplers.secure_discrete_laplace(values, scale),
            lambda gen, size, scale: samplers.seeded_discrete_laplace(gen, size, scale),
        ),
        tail=_discrete_laplace_tail,
        std=_discrete_laplace_std,
        pmf_weights=_discrete_laplace_weights,
        expected_abs_error=_discrete_laplace_abs_error,
    ),
    NoiseKind.DISCRETE_GAUSSIAN: NoiseTraits(
        zcdp=True,
        real_valued=False,
        exact_pure=False,
        variance_power=1,
        add=_integer_draws(
            lambda values, scale: samplers.secure_discrete_gaussian(values, scale),
            lambda gen, size, scale: samplers.seeded_discrete_gaussian(gen, size, scale),
        ),
        tail=_discrete_gaussian_tail,
        std=_discrete_gaussian_std,
        pmf_weights=_discrete_gaussian_weights,
        expected_abs_error=_discrete_gaussian_abs_error,
    ),
    NoiseKind.LAPLACE_ROUNDED: NoiseTraits(
        zcdp=False,
        real_valued=True,
        exact_pure=False,
        variance_power=2,
        add=_add_rounded_laplace,
        tail=_rounded_laplace_tail,
        std=_rounded_laplace_std,
        pmf_weights=_rounded_laplace_weights,
        expected_abs_error=None,
    ),
}


# -- selection --------------------------------------------------------------------------------


def noisy_max(
    scores: npt.ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: Randomness | int | None = None,
) -> int:
    """Index of a high score, chosen epsilon-DP (report noisy max with exponential noise).

    Equivalent in guarantee to the exponential mechanism with utility ``scores`` of
    sensitivity Delta_u: scale 2 Delta_u / epsilon. Scores must come from public candidates.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ConfigError("noisy_max needs a non-empty vector of scores")
    if not np.all(np.isfinite(s)):
        raise ConfigError("scores must be finite")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ConfigError(
            f"the utility's sensitivity must be a finite number > 0, got {sensitivity}"
        )
    scale = scale_up(2.0 * sensitivity, epsilon)
    require_paid("a noisy selection")
    r = resolve(rng)
    if not r.for_publication:
        # exponential mechanism by Gumbel-max (tests only)
        return int(np.argmax(s / scale + r.generator.gumbel(size=s.size)))
    meas = _noisy_max_measurement(scale)
    return int(meas(s.tolist()))


@lru_cache(maxsize=128)
def _noisy_max_measurement(scale: float) -> Callable[[list[float]], int]:
    """OpenDP's report-noisy-max (exponential noise) for one scale, built once: the scores in,
    the index of the noisy maximum out."""
    samplers._opendp()
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_noisy_max
    from opendp.measures import max_divergence
    from opendp.metrics import linf_distance

    return make_noisy_max(
        vector_domain(atom_domain(T=float, nan=False)),
        linf_distance(T=float),
        max_divergence(),
        scale=scale,
    )
