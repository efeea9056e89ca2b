"""Fast, exact discrete Laplace and discrete Gaussian noise from ``os.urandom``.

Every random bit comes from the operating system's cryptographically secure source
(``os.urandom``); numpy only does arithmetic on those bits. The output distributions are
*exactly* the discrete Laplace law ``P(z) ∝ exp(-|z|/b)`` and the discrete Gaussian law
``P(z) ∝ exp(-z²/(2σ²))`` for the float ``b`` / ``σ`` given (read as the exact rational it
represents), under one stated assumption on the platform's ``exp`` (see A below), which is
checked at first use. The full argument is in ``docs/secure-noise.md``; in short:

**Uniforms as intervals.** A uniform real ``V`` in (0, 1) is revealed 64 bits at a time. After
the first 64-bit word ``r`` we only know ``V ∈ (r/2⁶⁴, (r+1)/2⁶⁴)``. A decision about ``V``
(``V < p``, or ``floor(-ln V / λ) = k``) is taken on the fast path only when it holds for
*every* point of that interval, proven with rigorous floating-point bounds; otherwise the
element goes to an exact slow path that reveals more bits of the same ``V`` and compares
against ``exp``/``ln`` evaluated in Python's ``decimal`` (correctly rounded) with explicit
error bounds, increasing the precision until the decision is certain. Every decision is
therefore the exact function of the ideal uniform ``V``, so the law is exact; floating point
only decides how fast we get there. The slow path runs for at most ~``2^-15`` of the samples
(``2 * 2^-40 * b`` for the geometric, ``2^-31`` for the Gaussian acceptance).

**Discrete Laplace** (two-sided geometric): ``Z = G₁ - G₂`` with ``G`` iid geometric,
``P(G ≥ k) = exp(-kλ)``, ``λ = 1/b``, sampled by inversion ``G = floor(-ln V / λ)``
(``G ≥ k ⇔ V ≤ exp(-kλ)``). The difference of two such geometrics has pmf
``(1-q)/(1+q) q^|z|`` with ``q = exp(-1/b)``: the discrete Laplace law.

**Discrete Gaussian**: Canonne, Kamath and Steinke (2020), Algorithm 3: with
``t = floor(σ) + 1``, draw ``Y`` ~ discrete Laplace(t) and accept with probability
``exp(-(|Y| - σ²/t)² / (2σ²))``; the accepted values follow the discrete Gaussian exactly.
Acceptance is ``U < p`` with a fresh uniform ``U`` decided as above.

**A (platform assumption).** numpy's ``exp`` on float64 has relative error below ``2^-48``
for arguments in [-2100, 0] whose result is a normal number (libm and numpy's SIMD kernels are
within a few ulp, i.e. ~``2^-51``). The fast path needs its bounds to hold, so
:func:`check_platform` measures ``exp`` at first use against an independent reference
(``expl`` in extended precision where available, else correctly rounded ``decimal``) and
refuses the fast path (callers fall back to OpenDP) if it fails. The margins used (``2^-40``
and ``2^-32`` relative) exceed every accumulated rounding error by a factor >= 30.
"""

from __future__ import annotations

import math
import os
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

from privmob.cores import usable_cores
from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

# Margins (relative) on floating-point evaluations of exp thresholds; see module docstring.
ETA_GEOMETRIC = 2.0**-40
ETA_BERNOULLI = 2.0**-32
UNIFORM_SLACK = 2.0**-48  # covers the rounding of r -> float64 and of r + 1
TINY = 2.0**-80  # upper bound for any threshold whose exponent exceeds EXP_ARG_MAX
EXP_ARG_MAX = 60.0  # geometric thresholds: fast path only for exp(-x) with x <= 60
GAUSS_TAIL = 64.0  # discrete Gaussian fast path only for |y| <= 64 sigma
TWO_M64 = 2.0**-64
#: Scales the fast path accepts; outside it callers use OpenDP. The slow-path rate of the
#: geometric sampler is about 2 * 2^-40 * scale per draw, so the top bounds it by 2^-15.
SCALE_RANGE = (2.0**-8, 2.0**24)
CHUNK = 1 << 18


def random_words(n: int) -> npt.NDArray[np.uint64]:
    """``n`` uniform 64-bit words straight from ``os.urandom``."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


def _word() -> int:
    return int.from_bytes(os.urandom(8), "little")


# -- exact slow paths (pure Python, Fractions and correctly rounded decimal) ---------------


def _dec(x: Fraction) -> Decimal:
    """x rounded to the current decimal precision (relative error <= 10^(1-prec))."""
    return Decimal(x.numerator) / Decimal(x.denominator)


def _refine(lo: Fraction, width: Fraction) -> tuple[Fraction, Fraction]:
    """Reveal 64 more bits of a uniform known to lie in (lo, lo + width)."""
    width = width / 2**64
    return lo + _word() * width, width


def exact_bernoulli_exp(gamma: Fraction, lo: Fraction, width: Fraction) -> bool:
    """Decide ``U < exp(-gamma)`` exactly for ``U`` uniform on (lo, lo + width).

    ``exp(-gamma)`` is irrational for rational ``gamma > 0`` (Lindemann), so the refinement
    terminates with probability one; each round fails with probability <= ~10^(-prec+5)/width.
    """
    if gamma == 0:
        return True
    prec = 40 + len(str(gamma.numerator // gamma.denominator))
    while True:
        with localcontext() as ctx:
            ctx.prec = prec
            p = Fraction((-_dec(gamma)).exp())
        # |gamma_dec - gamma| <= gamma 10^(1-prec); exp correctly rounded: rel. error <= 10^(1-prec)
        rel = (gamma + 2) * Fraction(1, 10 ** (prec - 2))
        if lo + width <= p * (1 - rel):
            return True
        if lo >= p * (1 + rel):
            return False
        lo, width = _refine(lo, width)
        prec += 20


def _certified_floor(x: Fraction, lam: Fraction, prec: int) -> int | None:
    """floor(-ln(x) / lam) if ``prec`` decimal digits prove it, else None (0 < x <= 1)."""
    if x == 1:
        return 0
    with localcontext() as ctx:
        ctx.prec = prec
        y = Fraction(-_dec(x).ln() * _dec(1 / lam))
    # error: ln of a rounded x (abs <= 2*10^(1-prec)), rounding of ln, of 1/lam, of the product
    tol = (abs(y) + 1 / lam) * Fraction(1, 10 ** (prec - 2))
    f = math.floor(y)
    if y - tol > f and y + tol < f + 1:
        return f
    return None


def exact_geometric(lam: Fraction, lo: Fraction, width: Fraction) -> int:
    """``floor(-ln V / lam)`` exactly for ``V`` uniform on (lo, lo + width)."""
    prec = 50
    while True:
        if lo > 0:
            a = _certified_floor(lo + width, lam, prec)
            if a is not None and a == _certified_floor(lo, lam, prec):
                return a
        lo, width = _refine(lo, width)
        prec += 20


# -- vectorised fast paths -------------------------------------------------------------------


def _uniform_bounds(
    r: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Float bounds with lo_f <= r/2^64 and hi_f >= (r+1)/2^64 (rigorous)."""
    rf = r.astype(np.float64)  # round to nearest: relative error <= 2^-53
    lo = rf * (TWO_M64 * (1.0 - UNIFORM_SLACK))
    hi = (rf + 1.0) * (TWO_M64 * (1.0 + UNIFORM_SLACK))
    return lo, hi


def geometric(n: int, scale: float) -> npt.NDArray[np.int64]:
    """``n`` iid geometric variables with ``P(G >= k) = exp(-k/scale)``, exact."""
    lam_f = 1.0 / scale
    r = random_words(n)
    lo, hi = _uniform_bounds(r)
    mid = (r.astype(np.float64) + 0.5) * TWO_M64
    k = np.floor(-np.log(mid) * scale)  # a candidate only; correctness comes from the checks
    x_k = k * lam_f
    x_k1 = (k + 1.0) * lam_f
    with np.errstate(under="ignore"):
        # lower bound on T_k = exp(-k lam): exact 1 for k = 0
        t_k_low = np.where(
            k == 0, 1.0, np.where(x_k <= EXP_ARG_MAX, np.exp(-x_k) * (1.0 - ETA_GEOMETRIC), 0.0)
        )
        # upper bound on T_{k+1}: beyond EXP_ARG_MAX the true value is < e^-59.9 < TINY
        t_k1_high = (
            np.where(x_k1 <= EXP_ARG_MAX, np.exp(-np.minimum(x_k1, EXP_ARG_MAX)), 0.0)
            * (1.0 + ETA_GEOMETRIC)
            + TINY
        )
    # G = k for every V in the interval iff hi <= T_k and lo >= T_{k+1}
    ok = ((k == 0) | (hi <= t_k_low)) & (lo > t_k1_high)
    out = k.astype(np.int64)
    bad = np.flatnonzero(~ok)
    if bad.size:
        lam = 1 / Fraction(scale)
        for i in bad:
            out[i] = exact_geometric(lam, Fraction(int(r[i]), 2**64), Fraction(1, 2**64))
    return out


def discrete_laplace(n: int, scale: float) -> npt.NDArray[np.int64]:
    """``n`` iid draws with ``P(z) ∝ exp(-|z|/scale)``, exact (difference of two geometrics)."""
    diff: npt.NDArray[np.int64] = geometric(n, scale) - geometric(n, scale)
    return diff


def _gaussian_accept(y: npt.NDArray[np.int64], sigma: float, t: int) -> npt.NDArray[np.bool_]:
    """Bernoulli(exp(-(|y| - sigma²/t)² / (2 sigma²))) for each y, exact."""
    a = np.abs(y).astype(np.float64)
    s2 = sigma * sigma
    d = a - s2 / t
    gamma = d * d / (2.0 * s2)  # |error| <= 2^-38 when |y| <= 64 sigma (docs/secure-noise.md)
    r = random_words(y.size)
    lo, hi = _uniform_bounds(r)
    with np.errstate(under="ignore"):
        e = np.exp(-gamma)
    p_low = e * (1.0 - ETA_BERNOULLI)
    p_high = e * (1.0 + ETA_BERNOULLI) + TINY
    fast = a <= GAUSS_TAIL * sigma
    accept: npt.NDArray[np.bool_] = fast & (hi <= p_low)
    reject = fast & (lo >= p_high)
    bad = np.flatnonzero(~(accept | reject))
    if bad.size:
        sig = Fraction(sigma)
        s2q = sig * sig
        for i in bad:
            g = (abs(int(y[i])) - s2q / t) ** 2 / (2 * s2q)
            accept[i] = exact_bernoulli_exp(g, Fraction(int(r[i]), 2**64), Fraction(1, 2**64))
    return accept


def discrete_gaussian(n: int, sigma: float) -> npt.NDArray[np.int64]:
    """``n`` iid draws with ``P(z) ∝ exp(-z²/(2 sigma²))``, exact (CKS20 Algorithm 3)."""
    t = math.floor(sigma) + 1
    out = np.empty(n, dtype=np.int64)
    filled = 0
    rate = 0.7  # acceptance rate guess, then measured (only sizes the batches)
    while filled < n:
        need = n - filled
        batch = int(need / rate * 1.05) + 64
        y = discrete_laplace(batch, float(t))
        y = y[_gaussian_accept(y, sigma, t)]
        rate = max(0.05, y.size / batch)
        y = y[:need]
        out[filled : filled + y.size] = y
        filled += y.size
    return out


# -- platform check and threaded front end ---------------------------------------------------


#: Relative accuracy that assumption A asks of numpy's float64 ``exp``.
EXP_TOLERANCE = 2.0**-48


def has_extended_precision() -> bool:
    """Whether numpy's ``longdouble`` has a 64-bit mantissa (x87 extended, e.g. x86-64 Linux)."""
    return bool(np.finfo(np.longdouble).nmant >= 63)


def reference_exp_neg(
    xs: npt.NDArray[np.float64], extended: bool | None = None
) -> npt.NDArray[np.longdouble] | list[Decimal]:
    """``exp(-x)`` for each x to far better than ``2^-48`` relative, independently of numpy's
    float64 ``exp``: in x87 extended precision (``expl``, 64-bit mantissa) where numpy's
    ``longdouble`` has it (``extended=None``: when available), else correctly rounded
    ``decimal`` at 40 digits (slower)."""
    if extended is None:
        extended = has_extended_precision()
    if extended:
        return np.exp(-xs.astype(np.longdouble))
    with localcontext() as ctx:
        ctx.prec = 40
        return [(-Decimal(x)).exp() for x in xs.tolist()]


def exp_meets_tolerance(
    xs: npt.NDArray[np.float64], got: npt.NDArray[np.float64], extended: bool | None = None
) -> bool:
    """Whether ``got`` (float64 values of ``exp(-xs)``) is within ``EXP_TOLERANCE`` of it
    (``extended``: the reference, as :func:`reference_exp_neg`)."""
    ref = reference_exp_neg(xs, extended)
    if isinstance(ref, np.ndarray):
        err = np.abs(got.astype(np.longdouble) - ref)
        return bool(np.all(err <= ref * np.longdouble(EXP_TOLERANCE)))
    tol = Decimal(EXP_TOLERANCE)
    return all(abs(Decimal(g) - r) <= r * tol for g, r in zip(got.tolist(), ref, strict=True))


@lru_cache(maxsize=1)
def check_platform() -> bool:
    """True if numpy's exp meets assumption A (relative error < 2^-48) on a test grid."""
    xs = np.concatenate([np.linspace(0.0, 64.0, 1501), np.linspace(64.0, 700.0, 301)])
    xs = np.concatenate([xs, xs * (1 + 2.0**-30), [2.0**-60, 1e-9, 0.1, 1.0 / 3]])
    return exp_meets_tolerance(xs, np.exp(-xs))


def fast_path_supports(scale: float) -> bool:
    """Whether the vectorised sampler handles this scale (else use OpenDP)."""
    return SCALE_RANGE[0] <= scale <= SCALE_RANGE[1] and check_platform()


def _threads() -> int:
    return min(4, usable_cores())


def sample(kind: str, n: int, scale: float) -> npt.NDArray[np.int64]:
    """``n`` exact draws of ``kind`` ("laplace" or "gaussian"), chunks spread over threads."""
    samplers = {"laplace": discrete_laplace, "gaussian": discrete_gaussian}
    if kind not in samplers:
        raise ConfigError(
            f"unknown noise kind {kind!r}",
            hint="use 'laplace' or 'gaussian'",
        )
    fn = samplers[kind]
    if n <= CHUNK:
        return fn(n, scale)
    out = np.empty(n, dtype=np.int64)

    def run(start: int) -> None:
        stop = min(n, start + CHUNK)
        out[start:stop] = fn(stop - start, scale)

    from concurrent.futures import ThreadPoolExecutor  # on first use (issue 43)

    with ThreadPoolExecutor(_threads()) as pool:
        list(pool.map(run, range(0, n, CHUNK)))
    return out
