"""Consistent estimates over a tree of public groups (issue 40, item 5): post-processing only.

A release measured at several levels of a public tree (zone pairs under borough pairs, H3
cells under their parents) gets independent noise at every level, each level from its share
of the budget. The measurements disagree (the fine cells of a borough pair do not sum to its
noisy count); this module makes them agree, reading nothing but the noisy values, the public
tree and the public noise variances:

1. **Weighted least squares** over the tree (Hay, Rastogi, Miklau and Suciu 2010, "Boosting
   the accuracy of differentially private histograms through consistency", with a variance
   per node instead of one for all): a bottom-up pass combines each node's own measurement
   with the sum of its children's estimates by inverse variance (:func:`consistent`,
   ``z_v = (y_v Vs + s sigma_v^2) / (Vs + sigma_v^2)``, ``V_v = sigma_v^2 Vs / (sigma_v^2 +
   Vs)``, with ``s`` and ``Vs`` the sum of the children's estimates and variances); a top-down
   pass hands each node's residual to its children in proportion to their variances. The
   result is the generalised least-squares estimate (the best linear unbiased one): every
   node equals the sum of its children, and each node's variance is known in closed form
   (:attr:`Consistent.variances`: ``P_c = V_c - V_c^2 / Vs + (V_c / Vs)^2 P_parent``; the
   test compares it with the dense GLS covariance).
2. **Non-negativity** (:func:`non_negative`), top-down: the root level is clamped at 0, then
   each node's children are moved to the nearest non-negative values (in the
   inverse-variance-weighted distance) that sum to the node's final value: every level stays
   consistent, no value is negative. This step biases small cells upwards and large ones
   downwards; the variances stated are the least-squares estimate's.

A node with no children at all below the root level (a borough pair whose only zone pair is
the unreleased diagonal) holds nothing by construction: its estimate and variance are 0.

:func:`default_shares` chooses the budget split across levels from public sizes alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")


#: z of a two-sided 95% normal interval
_Z95 = 1.959963984540054
#: real values of a level (estimates, variances), and node indices (a level's parents)
Reals: TypeAlias = "npt.NDArray[np.float64]"
Indices: TypeAlias = "npt.NDArray[np.int64]"


@dataclass(frozen=True)
class Tree:
    """A public tree stored level by level, coarsest first: ``sizes[l]`` nodes at level l and,
    for every level l > 0, ``parents[l - 1][i]``: the node of level l - 1 above node i."""

    sizes: tuple[int, ...]
    parents: tuple[Indices, ...]

    def __post_init__(self) -> None:
        if len(self.parents) != len(self.sizes) - 1:
            raise ValueError("a tree needs one parent array per level below the first")
        for level, p in enumerate(self.parents, start=1):
            if len(p) != self.sizes[level] or (
                len(p) and (p.min() < 0 or p.max() >= self.sizes[level - 1])
            ):
                raise ValueError(f"level {level}: a parent index outside the level above")

    def children_sum(self, level: int, values: npt.ArrayLike) -> Reals:
        """The sum of ``values`` (of level ``level + 1``) under each node of ``level``."""
        # weighted: float64 (np.asarray keeps that array, typed as it is)
        sums = np.bincount(self.parents[level], values, minlength=self.sizes[level])
        return np.asarray(sums, dtype=np.float64)

    def leaves_below(self, level: int) -> Reals:
        """The number of finest-level nodes below each node of ``level``."""
        n = np.ones(self.sizes[-1])
        for lv in range(len(self.sizes) - 2, level - 1, -1):
            n = self.children_sum(lv, n)
        return n


@dataclass(frozen=True)
class Consistent:
    """The least-squares estimates of every level (coarsest first) and their variances."""

    estimates: tuple[Reals, ...]
    variances: tuple[Reals, ...]


def consistent(
    tree: Tree, measured: Sequence[npt.ArrayLike], variances: Sequence[float]
) -> Consistent:
    """The weighted least-squares estimates of a tree measured at every level (see the
    module's docstring): ``measured[l]`` the noisy values of level l, ``variances[l]`` the
    variance of its noise (public). Post-processing: reads only these."""
    levels = len(tree.sizes)
    y = [np.asarray(m, dtype=np.float64) for m in measured]
    if len(y) != levels or any(len(v) != n for v, n in zip(y, tree.sizes, strict=True)):
        raise ValueError("one measured vector per level, one value per node")
    z: list[Reals] = [np.empty(0)] * levels
    v: list[Reals] = [np.empty(0)] * levels
    s: list[Reals] = [np.empty(0)] * levels
    vs: list[Reals] = [np.empty(0)] * levels
    z[-1], v[-1] = y[-1], np.full(tree.sizes[-1], float(variances[-1]))
    for lv in range(levels - 2, -1, -1):  # bottom-up
        sigma2 = float(variances[lv])
        s[lv], vs[lv] = tree.children_sum(lv, z[lv + 1]), tree.children_sum(lv, v[lv + 1])
        z[lv] = (y[lv] * vs[lv] + s[lv] * sigma2) / (vs[lv] + sigma2)
        v[lv] = sigma2 * vs[lv] / (vs[lv] + sigma2)
    x, p = [z[0]], [v[0]]
    for lv in range(1, levels):  # top-down
        up = tree.parents[lv - 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(vs[lv - 1][up] > 0, v[lv] / vs[lv - 1][up], 0.0)
        x.append(z[lv] + (x[lv - 1] - s[lv - 1])[up] * share)
        p.append(v[lv] - v[lv] * share + share * share * p[lv - 1][up])
    return Consistent(tuple(x), tuple(np.maximum(q, 0.0) for q in p))


def non_negative(
    tree: Tree, estimates: Sequence[npt.ArrayLike], variances: Sequence[npt.ArrayLike]
) -> tuple[Reals, ...]:
    """Consistent non-negative values near ``estimates`` (consistent ones, :func:`consistent`),
    top-down (see the module's docstring): the first level clamped at 0; then under every node
    its children ``c`` become ``max(0, c - tau V_c)`` with the one ``tau`` per node that makes
    them sum to the node's value (the projection onto that simplex in the distance weighted by
    1 / V_c). Post-processing."""
    out = [np.maximum(np.asarray(estimates[0], dtype=np.float64), 0.0)]
    for lv in range(1, len(tree.sizes)):
        up = tree.parents[lv - 1]
        out.append(_project(up, tree.sizes[lv - 1], estimates[lv], variances[lv], out[-1]))
    return tuple(out)


def _project(group: Indices, n: int, x: npt.ArrayLike, v: npt.ArrayLike, totals: Reals) -> Reals:
    """Per group g, ``max(0, x - tau_g w)`` summing to ``totals[g]`` (w: the weights, V with
    zero variances replaced by a tiny one)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.maximum(np.asarray(v, dtype=np.float64), 1e-12)
    ratio = x / w
    lo = np.full(n, np.inf)
    np.minimum.at(lo, group, (x - totals[group]) / w)
    hi = np.full(n, -np.inf)
    np.maximum.at(hi, group, ratio)
    lo = np.where(np.isfinite(lo), lo, 0.0) - 1.0
    hi = np.where(np.isfinite(hi), hi, 0.0) + 1.0
    for _ in range(200):  # bisection on tau: the sum falls as tau grows
        mid = (lo + hi) / 2
        total = np.bincount(group, np.maximum(x - mid[group] * w, 0.0), minlength=n)
        above = total > totals
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    tau = (lo + hi) / 2
    support = (x - tau[group] * w) > 0
    sx = np.bincount(group, np.where(support, x, 0.0), minlength=n)
    sw = np.bincount(group, np.where(support, w, 0.0), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = np.where(sw > 0, (sx - totals) / sw, tau)
    out: Reals = np.maximum(x - exact[group] * w, 0.0)
    out[(totals <= 0)[group]] = 0.0
    return out


def margin_95(variance: npt.ArrayLike, laplace: bool) -> Reals:
    """The 95% margin of error stated for an estimate of this variance: for Laplace noise the
    margin of the Laplace distribution of that variance (ln 20 x sqrt(var / 2): exact for a
    lone Laplace measurement, and above the normal 1.96 sd that a sum of many independent
    Laplace terms tends to); for Gaussian noise 1.96 sd."""
    sd = np.sqrt(np.asarray(variance, dtype=np.float64))
    if laplace:
        return math.log(20.0) * sd / math.sqrt(2.0)
    return _Z95 * sd


def level_variances(tree: Tree, shares: Sequence[float], power: int) -> tuple[Reals, ...]:
    """The variances of the consistent estimates when level l's noise has variance
    ``1 / shares[l] ** power`` (2: Laplace, scale 1 / share; 1: Gaussian under zCDP, rho
    proportional to the share): public, the same for any data."""
    measured = [np.zeros(n) for n in tree.sizes]
    return consistent(tree, measured, [1.0 / s**power for s in shares]).variances


def default_shares(tree: Tree, power: int) -> tuple[float, ...]:
    """The budget split chosen from public sizes alone: the shares (summing to 1, each a
    multiple of 0.01 and at least 0.01) that minimise the sum, over the levels, of each
    level's mean variance relative to the variance it has without a hierarchy (the whole
    budget on the finest level, a coarser cell the sum of the finest cells under it): every
    level's gain or loss counts as much. Zone pairs of the 263 taxi zones under the 36
    borough pairs: 8% for the boroughs (their variance falls to 0.30 of the zone sums' on
    average over the pairs, far lower for the pairs of many zones; the zones' rises by
    18%)."""
    levels = len(tree.sizes)
    if levels == 1:
        return (1.0,)
    leaves = [tree.leaves_below(lv) for lv in range(levels)]
    occupied = [n > 0 for n in leaves]

    def loss(shares: Sequence[float]) -> float:
        var = level_variances(tree, shares, power)
        return float(
            sum(
                np.mean(v[o] / n[o]) if o.any() else 0.0
                for v, n, o in zip(var, leaves, occupied, strict=True)
            )
        )

    grid = _simplex(levels, 100 if levels == 2 else 20)
    best = min(grid, key=loss)
    if levels > 2:  # refine around the coarse optimum on the 0.01 grid
        near = [
            g
            for g in _simplex(levels, 100)
            if max(abs(a - b) for a, b in zip(g, best, strict=True)) <= 0.05
        ]
        best = min(near, key=loss)
    return best


def _simplex(levels: int, steps: int) -> list[tuple[float, ...]]:
    """Every split of 1 into ``levels`` positive multiples of 1 / ``steps``."""

    def parts(n: int, total: int) -> list[tuple[int, ...]]:
        if n == 1:
            return [(total,)]
        return [(k, *rest) for k in range(1, total - n + 2) for rest in parts(n - 1, total - k)]

    return [tuple(k / steps for k in p) for p in parts(levels, steps)]
