"""Similarity measures for comparing two mobility reports (SPEC 4.2; dp_mobility_report's
``BenchmarkReport``).

All functions are post-processing: they read released (noisy) values or, in evaluations, exact
values, and never touch raw records. Distributions are given as non-negative weight vectors over
the same public domain; negative noisy counts are clipped to zero before normalising
(:func:`to_distribution`).

Bases: Jensen-Shannon divergence is in **bits (base 2)** by default, so it lies in [0, 1];
the Jensen-Shannon *distance* is its square root. dp_mobility_report reports the base-e JS
distance; pass ``base=math.e`` to :func:`js_distance` to reproduce that scale.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

from privmob.errors import ConfigError

EARTH_RADIUS_M = 6_371_008.8


def to_distribution(weights: ArrayLike) -> np.ndarray:
    """Clip negatives to 0 and normalise to sum 1 (all zeros -> uniform)."""
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    total = w.sum()
    if w.size == 0:
        raise ConfigError("an empty distribution cannot be compared")
    if total <= 0:
        return np.full(w.size, 1.0 / w.size)
    return np.asarray(w / total)


def smape(true: ArrayLike, estimate: ArrayLike) -> float:
    """Symmetric mean absolute percentage error, in [0, 2].

    mean_i 2|e_i - t_i| / (|t_i| + |e_i|), with 0/0 counted as 0 (both zero: no error).
    """
    t = np.atleast_1d(np.asarray(true, dtype=np.float64))
    e = np.atleast_1d(np.asarray(estimate, dtype=np.float64))
    _same_shape(t, e)
    den = np.abs(t) + np.abs(e)
    num = 2.0 * np.abs(e - t)
    terms = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return float(terms.mean())


def kl_divergence(p: ArrayLike, q: ArrayLike, base: float = 2.0) -> float:
    """Kullback-Leibler divergence D(p || q) of the normalised weights (inf if q=0 where p>0)."""
    pp, qq = to_distribution(p), to_distribution(q)
    _same_shape(pp, qq)
    mask = pp > 0
    if np.any(qq[mask] == 0):
        return math.inf
    return float(np.sum(pp[mask] * np.log(pp[mask] / qq[mask])) / math.log(base))


def js_divergence(p: ArrayLike, q: ArrayLike, base: float = 2.0) -> float:
    """Jensen-Shannon divergence; base 2 (default) gives a value in [0, 1]."""
    pp, qq = to_distribution(p), to_distribution(q)
    _same_shape(pp, qq)
    m = 0.5 * (pp + qq)
    return max(0.0, 0.5 * kl_divergence(pp, m, base) + 0.5 * kl_divergence(qq, m, base))


def js_distance(p: ArrayLike, q: ArrayLike, base: float = 2.0) -> float:
    """Jensen-Shannon distance: sqrt of :func:`js_divergence` in the same base (a metric)."""
    return math.sqrt(js_divergence(p, q, base))


def emd_1d(p: ArrayLike, q: ArrayLike, positions: ArrayLike) -> float:
    """Earth mover's distance between two histograms whose bins sit at ``positions``.

    Both are normalised first; the result is in the unit of ``positions`` (e.g. bin centres
    in minutes or metres).
    """
    pp, qq = to_distribution(p), to_distribution(q)
    _same_shape(pp, qq)
    x = np.asarray(positions, dtype=np.float64)
    _same_shape(pp, x)
    return float(stats.wasserstein_distance(x, x, pp, qq))


def haversine_m(lat1: ArrayLike, lng1: ArrayLike, lat2: ArrayLike, lng2: ArrayLike) -> np.ndarray:
    """Great-circle distance in metres (broadcasts)."""
    la1, lo1, la2, lo2 = (
        np.radians(np.asarray(a, dtype=np.float64)) for a in (lat1, lng1, lat2, lng2)
    )
    h = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    return np.asarray(2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0))))


def emd_spatial(
    p: ArrayLike, q: ArrayLike, lat: ArrayLike, lng: ArrayLike, max_support: int = 1500
) -> float:
    """Earth mover's distance in metres between two spatial distributions over tiles.

    Ground distance: haversine between tile centroids (``lat``, ``lng``). Solved exactly as a
    transport linear programme (scipy HiGHS). Since haversine is a metric, mass present in both
    distributions stays in place at zero cost, so only the surplus tiles of p and of q enter
    the programme; ``max_support`` caps sources x sinks to keep it small.
    """
    pp, qq = to_distribution(p), to_distribution(q)
    _same_shape(pp, qq)
    common = np.minimum(pp, qq)
    src, dst = pp - common, qq - common
    si, di = np.flatnonzero(src > 1e-15), np.flatnonzero(dst > 1e-15)
    if si.size == 0 or di.size == 0:
        return 0.0
    if si.size * di.size > max_support**2:
        raise ConfigError(
            f"spatial EMD over {si.size} x {di.size} tiles is too large",
            hint="compare on a coarser tessellation",
        )
    lat, lng = np.asarray(lat, dtype=np.float64), np.asarray(lng, dtype=np.float64)
    cost = haversine_m(lat[si][:, None], lng[si][:, None], lat[di][None, :], lng[di][None, :])
    a, b = src[si], dst[di]
    b = b * (a.sum() / b.sum())  # equal surplus mass up to rounding
    return transport_cost(a, b, cost)


def transport_cost(supply: np.ndarray, demand: np.ndarray, cost: np.ndarray) -> float:
    """The least total cost of moving the mass ``supply`` (n sources) to ``demand`` (m sinks,
    the same total) at ``cost`` (n, m) per unit: the transport linear programme, solved exactly
    (scipy HiGHS)."""
    from scipy import sparse

    ns, nd = supply.size, demand.size
    idx = np.arange(ns * nd)
    ones = np.ones(ns * nd)
    a_eq = sparse.vstack(
        [
            sparse.csr_matrix((ones, (np.repeat(np.arange(ns), nd), idx)), shape=(ns, ns * nd)),
            sparse.csr_matrix((ones, (np.tile(np.arange(nd), ns), idx)), shape=(nd, ns * nd)),
        ]
    )
    res = optimize.linprog(
        np.asarray(cost).ravel(),
        A_eq=a_eq,
        b_eq=np.concatenate([supply, demand]),
        bounds=(0, None),
        method="highs",
    )
    if not res.success:  # pragma: no cover - HiGHS solves every balanced transport problem
        raise RuntimeError(f"transport LP failed: {res.message}")
    return float(res.fun)


def kendall_tau(a: ArrayLike, b: ArrayLike) -> float:
    """Kendall's tau-b rank correlation of two value vectors over the same items (nan -> 0)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _same_shape(x, y)
    if x.size < 2:
        return 1.0
    tau = stats.kendalltau(x, y).statistic
    return 0.0 if tau is None or math.isnan(tau) else float(tau)


def top_n_coverage(true: ArrayLike, estimate: ArrayLike, n: int = 10) -> float:
    """Share of the n items ranked highest by ``true`` that are also in the top n of
    ``estimate`` (ties broken by item index, so the result is deterministic)."""
    t, e = np.asarray(true, dtype=np.float64), np.asarray(estimate, dtype=np.float64)
    _same_shape(t, e)
    n = min(int(n), t.size)
    if n <= 0:
        raise ConfigError("top-n coverage needs n >= 1")
    top_t = set(np.argsort(-t, kind="stable")[:n].tolist())
    top_e = set(np.argsort(-e, kind="stable")[:n].tolist())
    return len(top_t & top_e) / n


def _same_shape(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ConfigError(f"cannot compare values over different domains: {a.shape} vs {b.shape}")
