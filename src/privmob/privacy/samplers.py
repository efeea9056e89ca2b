"""Noise samplers: secure ones for publication, seeded ones for tests only.

Secure integer noise (discrete Laplace, discrete Gaussian) comes by default from
:mod:`privmob.privacy.exact_noise`: exact samplers vectorised in numpy whose every random bit
comes from ``os.urandom`` (about 20-40x faster than OpenDP here; correctness argument in that
module and docs/secure-noise.md). ``backend="opendp"`` uses OpenDP's exact samplers instead
(fed by the OS's secure source; kept for cross-checks and for scales outside the fast path's
range). Continuous Laplace stays on OpenDP's floating-point-safe sampler. OpenDP work is split
into chunks that run on threads (OpenDP releases the GIL while it samples).

A :class:`Randomness` made with :meth:`Randomness.for_tests` uses numpy's seeded generator
instead: reproducible, *not* secure, and every release made with it says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar

from privmob.cores import usable_cores
from privmob.lazy_imports import lazy_module
from privmob.privacy import exact_noise
from privmob.privacy.payment import require_paid

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

Backend = Literal["numpy", "opendp"]

CHUNK = 1 << 16


@dataclass
class Randomness:
    """Where noise comes from. The default is secure; a seed is for tests only."""

    seed: int | None = None
    _rng: np.random.Generator | None = field(default=None, repr=False)

    @classmethod
    def secure(cls) -> Randomness:
        return cls(seed=None)

    @classmethod
    def for_tests(cls, seed: int) -> Randomness:
        return cls(seed=int(seed))

    @property
    def for_publication(self) -> bool:
        """False when seeded: such output must never be published."""
        return self.seed is None

    @property
    def generator(self) -> np.random.Generator:
        if self.seed is None:
            raise RuntimeError("secure randomness has no numpy generator")
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng


#: what an ``rng`` parameter accepts: a :class:`Randomness`, an int seed (tests only) or
#: ``None`` (secure); :func:`resolve` turns it into a :class:`Randomness`
RandomnessLike: TypeAlias = "Randomness | int | None"


def resolve(rng: RandomnessLike) -> Randomness:
    """Accept ``None`` (secure), a :class:`Randomness`, or an int seed (tests only)."""
    if rng is None:
        return Randomness.secure()
    if isinstance(rng, Randomness):
        return rng
    return Randomness.for_tests(int(rng))


# -- OpenDP-backed secure samplers -----------------------------------------------------------


@lru_cache(maxsize=1)
def _opendp() -> ModuleType:
    """The ``opendp`` package with its measurements, domains, metrics and measures modules
    loaded and contrib features on, imported without ``opendp.prelude`` (which also imports
    scikit-learn through opendp.extras: 2 s instead of ~20 s on a loaded machine)."""
    import opendp
    import opendp.domains
    import opendp.measurements
    import opendp.measures
    import opendp.metrics
    from opendp.mod import enable_features

    enable_features("contrib")
    return opendp


#: an OpenDP measurement on a vector: the values in, the noisy values out (a list)
Sampler: TypeAlias = "Callable[[npt.NDArray[np.int64] | npt.NDArray[np.float64]], object]"


@lru_cache(maxsize=64)
def _int_measurement(kind: str, scale: float) -> Sampler:
    _opendp()
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_gaussian, make_laplace
    from opendp.metrics import l1_distance, l2_distance

    domain = vector_domain(atom_domain(T="i64"))
    if kind == "laplace":
        return make_laplace(domain, l1_distance(T="i64"), scale=scale)
    return make_gaussian(domain, l2_distance(T="i64"), scale=scale)


@lru_cache(maxsize=64)
def _float_laplace(scale: float) -> Sampler:
    _opendp()
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_laplace
    from opendp.metrics import l1_distance

    domain = vector_domain(atom_domain(T=float, nan=False))
    return make_laplace(domain, l1_distance(T=float), scale=scale)


@lru_cache(maxsize=64)
def _float_gaussian(sigma: float) -> Sampler:
    _opendp()
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_gaussian
    from opendp.metrics import l2_distance

    domain = vector_domain(atom_domain(T=float, nan=False))
    return make_gaussian(domain, l2_distance(T=float), scale=sigma)


def _threads() -> int:
    return min(8, usable_cores())


#: the element type of the noisy values: integers (discrete noise) or reals
_Element = TypeVar("_Element", "np.int64", "np.float64")


def _chunked(
    measurement: Sampler, values: npt.NDArray[_Element], dtype: type[_Element]
) -> npt.NDArray[_Element]:
    out = np.empty(values.shape[0], dtype=dtype)
    starts = range(0, values.shape[0], CHUNK)

    def run(start: int) -> None:
        part = values[start : start + CHUNK]
        out[start : start + part.shape[0]] = np.asarray(measurement(part), dtype=dtype)

    if values.shape[0] <= CHUNK:
        run(0)
    else:
        from concurrent.futures import ThreadPoolExecutor  # on first use (issue 43)

        with ThreadPoolExecutor(_threads()) as pool:
            list(pool.map(run, starts))
    return out


def _secure_integer_noise(
    kind: str, values: npt.ArrayLike, scale: float, backend: Backend
) -> npt.NDArray[np.int64]:
    require_paid()
    flat = np.ascontiguousarray(values, dtype=np.int64).ravel()
    if flat.size == 0:
        return flat.reshape(np.shape(values))
    scale = float(scale)
    if backend not in ("numpy", "opendp"):
        raise ValueError(f"unknown noise backend {backend!r} (use 'numpy' or 'opendp')")
    if backend == "numpy" and exact_noise.fast_path_supports(scale):
        noisy: npt.NDArray[np.int64] = flat + exact_noise.sample(kind, flat.size, scale)
        return noisy.reshape(np.shape(values))
    return _chunked(_int_measurement(kind, scale), flat, np.int64).reshape(np.shape(values))


def secure_discrete_laplace(
    values: npt.ArrayLike, scale: float, *, backend: Backend = "numpy"
) -> npt.NDArray[np.int64]:
    """values + discrete Laplace(scale) noise (pmf ∝ exp(-|z|/scale)), exact, secure source.

    ``backend="numpy"``: vectorised exact sampler on ``os.urandom`` bits (falls back to OpenDP
    for scales outside its range); ``backend="opendp"``: OpenDP's sampler.
    """
    return _secure_integer_noise("laplace", values, scale, backend)


def secure_discrete_gaussian(
    values: npt.ArrayLike, sigma: float, *, backend: Backend = "numpy"
) -> npt.NDArray[np.int64]:
    """values + discrete Gaussian(sigma) noise (pmf ∝ exp(-z²/(2σ²))), exact, secure source.

    Backends as for :func:`secure_discrete_laplace`.
    """
    return _secure_integer_noise("gaussian", values, sigma, backend)


def secure_laplace(values: npt.ArrayLike, scale: float) -> npt.NDArray[np.float64]:
    """values + continuous Laplace(scale) noise, from OpenDP's floating-point-safe sampler."""
    require_paid()
    return _secure_float_noise(_float_laplace, values, scale)


def secure_gaussian(values: npt.ArrayLike, sigma: float) -> npt.NDArray[np.float64]:
    """values + continuous Gaussian(sigma) noise, from OpenDP's floating-point-safe sampler."""
    require_paid()
    return _secure_float_noise(_float_gaussian, values, sigma)


def _secure_float_noise(
    measurement: Callable[[float], Sampler], values: npt.ArrayLike, scale: float
) -> npt.NDArray[np.float64]:
    """values (as floats) + the noise of OpenDP's ``measurement`` of ``scale``."""
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    if flat.size == 0:
        return flat.reshape(np.shape(values))
    return _chunked(measurement(float(scale)), flat, np.float64).reshape(np.shape(values))


def gaussian(
    values: npt.ArrayLike, sigma: float, rng: RandomnessLike = None
) -> npt.NDArray[np.float64]:
    """values + continuous Gaussian(sigma) noise: secure by default, numpy's when seeded."""
    require_paid()
    r = resolve(rng)
    real = np.asarray(values, dtype=np.float64)
    if r.for_publication:
        return secure_gaussian(real, sigma)
    return real + r.generator.normal(0.0, sigma, real.shape)


# -- seeded samplers (tests only) --------------------------------------------------------------


def seeded_discrete_laplace(
    gen: np.random.Generator, size: int, scale: float
) -> npt.NDArray[np.int64]:
    """Two-sided geometric noise: difference of two geometric variables, p = 1 - e^{-1/b}."""
    require_paid()
    p = -math.expm1(-1.0 / scale)
    return (gen.geometric(p, size) - gen.geometric(p, size)).astype(np.int64)


def seeded_discrete_gaussian(
    gen: np.random.Generator, size: int, sigma: float
) -> npt.NDArray[np.int64]:
    """Discrete Gaussian by rejection from discrete Laplace (Canonne, Kamath, Steinke 2020)."""
    require_paid()
    t = math.floor(sigma) + 1
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        batch = max(64, int(need * 1.6))
        y = seeded_discrete_laplace(gen, batch, t)
        accept = gen.random(batch) < np.exp(-((np.abs(y) - sigma**2 / t) ** 2) / (2 * sigma**2))
        y = y[accept][:need]
        out[filled : filled + y.size] = y
        filled += y.size
    return out
