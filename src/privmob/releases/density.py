"""Spatio-temporal density: users present per zone and hour of a week (SPEC 4.3, seed 004).

Pipeline (each step after pre-sampling can be switched off in :class:`DensityConfig`):

1. pre-sampling in the engine (:mod:`privmob.prepare.presample`): one visit per user per hour,
   at most l per week -> L1 sensitivity l, L2 sensitivity sqrt(l);
2. towers -> zones by Voronoi area shares (:mod:`privmob.prepare.voronoi`);
3. the minimum cover of towers and zones (:mod:`privmob.prepare.cover`), public geometry only;
4. noisy totals per cover cell (budget epsilon/2), then clustering of cells on those noisy
   totals until every cluster's noisy total reaches tau;
5. EFPA or EFPAG (budget epsilon/2) on the stack of cluster series; each cell gets its
   cluster's normalised shape times its own noisy total;
6. optional smoothing of the night minima by exponential least-squares fits (post-processing);
7. cover cells -> zones (formula 1 on the reduced towers).

The LPA baseline instead adds Laplace noise of scale l/epsilon to every (cover cell, hour) count.

Outside the domain (SPEC 1, invariant 1): the parts of tower cells outside the zones form the
outliers series (a row of the cover, inside the mechanism above); the visits outside the
declared week or at no known tower are pre-sampled the same way (one per user and hour, at
most l per user) and summed into ONE out-of-domain cell released with discrete Laplace noise
of scale l / epsilon_out, its own budget (``outliers_epsilon``, default 0.1 x epsilon).

Privacy: the release is (epsilon + epsilon_out)-DP (EFPA, LPA) or (epsilon + epsilon_out,
delta)-DP (EFPAG) per user, for a user's whole week and everything they did outside it:
totals, EFPA(G) and the out-of-domain cell compose sequentially (two ledger entries: the
mechanism, epsilon; the out-of-domain cell, epsilon_out); the cover, the clustering, the
scaling and the smoothing read only public geometry and noisy values. EFPA(G) runs on the stack
of all cluster series at once (see :mod:`privmob.privacy.efpa`), which keeps the guarantee for a
user whose visits fall in several clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from privmob.engine.base import Engine
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.evaluate.signal import density_signal
from privmob.prepare.bounding import fresh_key
from privmob.prepare.cover import CoverMap
from privmob.prepare.density_geometry import DensityGeometry, SiteIndex, density_geometry
from privmob.prepare.presample import (
    HOURS_PER_WEEK,
    DensityCounts,
    bucketed_density_counts,
    density_counts,
)
from privmob.privacy import samplers
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.discrete_gaussian import scale_up, up
from privmob.privacy.efpa import fourier_perturb, gaussian_sigma
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.releases.base import Accountant, Release

__all__ = [
    "DensityConfig",
    "DensityGeometry",
    "DensityResult",
    "SiteIndex",
    "cluster_cells",
    "density_geometry",
    "density_release",
    "perturb_density",
    "smooth_nights",
]

MAX_VISITS_PER_WEEK = HOURS_PER_WEEK  # after the one-visit-per-hour cap
TOTALS = ("one-visit", "rescaled", "sampled")
OUTLIERS_SHARE = 0.1  # default budget of the out-of-domain cell, as a share of epsilon
OUT_OF_DOMAIN = "visits outside the week or at no known tower"


@dataclass(frozen=True)
class DensityConfig:
    """Parameters of the density release. ``delta > 0`` selects EFPAG, 0 selects EFPA."""

    epsilon: float
    max_visits: int = 30
    delta: float = 0.0
    method: str = "scheme"  # "scheme" or "lpa" (naive Laplace baseline)
    cover: bool = True  # False: perturb the zones themselves
    totals: str = "one-visit"  # seed 004 5.4.1; "rescaled"; "sampled" (Algorithm 2 line 1)
    totals_split: float = 0.5  # share of the totals budget for the per-cell part
    clustering: bool = True
    tau: float | None = None  # None: sqrt(168) * per-coefficient noise std / 0.01 (seed 004)
    fourier: bool = True  # False: plain noise on every cluster count
    smoothing: bool = True
    outliers_epsilon: float | None = None  # out-of-domain cell; None: OUTLIERS_SHARE x epsilon

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if not 1 <= self.max_visits <= MAX_VISITS_PER_WEEK:
            raise ConfigError(f"max visits must be in 1..168, got {self.max_visits}")
        if self.method not in ("scheme", "lpa"):
            raise ConfigError(f"method must be 'scheme' or 'lpa', got {self.method!r}")
        if self.totals not in TOTALS:
            raise ConfigError(f"totals must be one of {TOTALS}, got {self.totals!r}")
        if not 0 < self.totals_split < 1:
            raise ConfigError("totals_split must be in (0, 1)")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.outliers_epsilon is not None and not (
            self.outliers_epsilon > 0 and math.isfinite(self.outliers_epsilon)
        ):
            raise ConfigError(
                f"the out-of-domain cell needs a budget > 0, got {self.outliers_epsilon}",
                hint="--outliers-epsilon must be a positive number (SPEC 1: it is always released)",
            )

    @property
    def mechanism(self) -> str:
        if self.method == "lpa":
            return "LPA"
        return "EFPAG" if self.delta > 0 else "EFPA"

    @property
    def epsilon_outliers(self) -> float:
        """The out-of-domain cell's budget (public)."""
        if self.outliers_epsilon is None:
            return OUTLIERS_SHARE * self.epsilon
        return float(self.outliers_epsilon)

    def mechanism_cost(self) -> Cost:
        """The cost of the density mechanism (totals + EFPA(G)/LPA) over the week's domain."""
        if self.method == "lpa" or self.delta == 0:
            return Cost.pure(self.epsilon, Unit.USER)
        return Cost.approx(self.epsilon, self.delta, Unit.USER)

    def outliers_cost(self) -> Cost:
        """The cost of the out-of-domain cell (visits outside the week or at no tower)."""
        return Cost.pure(self.epsilon_outliers, Unit.USER)

    def cost(self) -> Cost:
        """The whole release's cost, known before any data is read (sequential composition)."""
        return self.mechanism_cost() + self.outliers_cost()

    def default_tau(self) -> float:
        """Seed 004: tau = sqrt(168) * sigma / 0.01, sigma the noise std per coefficient when
        all 168 coefficients are kept (EFPA: with the worst-case mixed sensitivity l)."""
        l2 = math.sqrt(self.max_visits)
        half = self.epsilon / 2.0
        if self.delta > 0:
            sigma = gaussian_sigma(half, self.delta, l2)
        else:
            sigma = math.sqrt(2.0) * math.sqrt(HOURS_PER_WEEK) * self.max_visits / (half / 2.0)
        return math.sqrt(HOURS_PER_WEEK) * sigma / 0.01


@dataclass
class DensityResult:
    """Noisy zone series and the accounting of every step."""

    zones: np.ndarray  # (zones, 168), noisy, post-processed
    cost: Cost
    steps: list[dict[str, Any]] = field(default_factory=list)
    clusters: np.ndarray | None = None  # cluster label of each cover cell
    noisy_totals: np.ndarray | None = None  # per cover cell, then the outliers cell
    outliers: np.ndarray | None = None  # (168,) noisy visits outside the area (SPEC 1.1)
    out_of_domain: int | None = None  # noisy visits outside the week or at no tower
    signal: dict[str, Any] | None = None  # privmob.evaluate.signal.density_signal


# -- clustering (Algorithm 3) -------------------------------------------------------------------


def _planar(lnglat: np.ndarray) -> np.ndarray:
    """Equirectangular projection in km around the mean latitude (for nearest neighbours)."""
    lat0 = math.radians(float(np.mean(lnglat[:, 1]))) if len(lnglat) else 0.0
    x = np.radians(lnglat[:, 0]) * math.cos(lat0) * 6371.0
    y = np.radians(lnglat[:, 1]) * 6371.0
    return np.column_stack([x, y])


def cluster_cells(centroids: np.ndarray, noisy_totals: np.ndarray, tau: float) -> np.ndarray:
    """Seed 004 Algorithm 3 on NOISY totals: merge the cluster with the smallest noisy total
    into the cluster with the nearest centre until every cluster's noisy total is >= tau.

    Returns a label per cell (0..m-1). The centre of a cluster is the mean of its cells'
    centroids. Reads only public centroids and noisy totals (post-processing).
    """
    n = len(noisy_totals)
    labels = np.arange(n)
    if n == 0:
        return labels
    xy = _planar(np.asarray(centroids, dtype=np.float64))
    total = np.asarray(noisy_totals, dtype=np.float64).copy()
    size = np.ones(n)
    active = np.ones(n, dtype=bool)
    while active.sum() > 1:
        masked = np.where(active, total, np.inf)
        a = int(np.argmin(masked))
        if masked[a] >= tau:
            break
        d = np.hypot(xy[:, 0] - xy[a, 0], xy[:, 1] - xy[a, 1])
        d[~active] = np.inf
        d[a] = np.inf
        b = int(np.argmin(d))
        xy[b] = (xy[a] * size[a] + xy[b] * size[b]) / (size[a] + size[b])
        size[b] += size[a]
        total[b] += total[a]
        active[a] = False
        labels[labels == a] = b
    _, dense = np.unique(labels, return_inverse=True)
    return dense.astype(np.int64)


# -- smoothing (seed 004 5.4.2) -------------------------------------------------------------


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _exp_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Least-squares fit of ``a * exp(b * x)`` to ``y`` (Levenberg-Marquardt from the log-linear
    fit; each accepted step lowers the squared error), or None if it is not finite.

    Written here rather than taken from ``scipy.optimize.curve_fit``: importing scipy.optimize
    costs 0.3-0.4 s at every ``privmob density`` start (idle; 1.3 s in a loaded profile), more
    than the fit of a week of nights.
    A window has 3 or 5 points, so the arithmetic is on Python floats (the 2 x 2 normal
    equations solved in closed form): 0.22 ms a 5-point window against 0.89 ms with numpy calls.
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    n = len(xs)
    if n < 2:
        return None
    # the log-linear fit (least squares of log y on x) as the starting point
    logs = [math.log(max(v, 1e-9)) for v in ys]
    mx, ml = sum(xs) / n, sum(logs) / n
    sxx = sum((u - mx) ** 2 for u in xs)
    if sxx == 0:
        return None
    b = sum((u - mx) * (v - ml) for u, v in zip(xs, logs, strict=True)) / sxx
    a = _exp(ml - b * mx)

    def sq_error(a: float, b: float) -> float:
        try:
            return math.fsum((a * _exp(b * u) - v) ** 2 for u, v in zip(xs, ys, strict=True))
        except (OverflowError, ValueError):
            return math.inf

    err, damping = sq_error(a, b), 1e-3
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(err)):
        return None
    for _ in range(200):
        e = [_exp(b * u) for u in xs]
        j1 = [a * u * eu for u, eu in zip(xs, e, strict=True)]
        res = [a * eu - v for eu, v in zip(e, ys, strict=True)]
        n00 = sum(eu * eu for eu in e)
        n01 = sum(eu * ju for eu, ju in zip(e, j1, strict=True))
        n11 = sum(ju * ju for ju in j1)
        g0 = sum(eu * r for eu, r in zip(e, res, strict=True))
        g1 = sum(ju * r for ju, r in zip(j1, res, strict=True))
        while damping < 1e12:
            m00, m11 = n00 * (1 + damping), n11 * (1 + damping)
            det = m00 * m11 - n01 * n01
            if det != 0 and math.isfinite(det):
                da, db = (n01 * g1 - m11 * g0) / det, (n01 * g0 - m00 * g1) / det
                new = sq_error(a + da, b + db)
            else:  # a singular system (e.g. exp underflowed): only more damping can help
                da = db = new = math.nan
            if math.isfinite(new) and new <= err:
                break
            damping *= 10.0
        else:
            break  # no step lowers the error: a (local) minimum
        a, b, improved = a + da, b + db, err - new
        err, damping = new, max(damping / 10.0, 1e-12)
        # MINPACK's default tolerances (as curve_fit): relative error reduction or step
        if improved <= 1.5e-8 * err or (
            abs(da) <= 1.5e-8 * abs(a) and abs(db) <= 1.5e-8 * max(abs(b), 1.0)
        ):
            break
    with np.errstate(all="ignore"):
        fit = a * np.exp(b * np.asarray(x, dtype=np.float64))
    return fit if np.all(np.isfinite(fit)) else None


def smooth_nights(series: np.ndarray, first_hour: int = 0) -> np.ndarray:
    """Replace each night's 0:00-4:00 and 4:00-6:00 values by exponential least-squares fits.

    ``first_hour`` is the hour of day of slot 0. Post-processing of noisy series only.
    """
    out = np.array(series, dtype=np.float64, copy=True)
    hours = (np.arange(out.shape[-1]) + first_hour) % 24
    starts = np.nonzero(hours == 0)[0]
    for s in starts:
        for lo, hi, keep in ((0, 4, range(0, 4)), (4, 6, range(4, 7))):
            idx = np.arange(s + lo, s + hi + 1)
            if idx[-1] >= out.shape[-1]:
                continue
            x = np.arange(idx.size, dtype=np.float64)
            for row in np.atleast_2d(out):
                fit = _exp_fit(x, row[idx])
                if fit is not None:
                    sel = [s + h for h in keep]
                    row[sel] = fit[[h - lo for h in keep]]
    return out


# -- the perturbation (Algorithms 1-2) ----------------------------------------------------------


def _laplace(values: np.ndarray, scale: float, rng: Randomness) -> np.ndarray:
    return Noise(NoiseKind.LAPLACE_ROUNDED, scale).add_float(values, rng)


def with_outliers(cmap: CoverMap) -> sp.csr_matrix:
    """``cmap.to_cover`` plus a last row: the share of each tower cell outside the area.

    The outliers cell (SPEC 1.1) makes every tower's column sum exactly 1, so a visit still
    moves at most 1 in L1 norm per hour; it is public geometry, present even when all zeros.
    """
    inside = np.asarray(cmap.to_cover.sum(axis=0)).ravel()
    outside = np.clip(1.0 - inside, 0.0, 1.0)
    outside[outside < 1e-9] = 0.0
    return sp.csr_matrix(sp.vstack([cmap.to_cover, sp.csr_matrix(outside[None, :])]))


def noisy_totals(
    counts: DensityCounts, cmap: CoverMap, config: DensityConfig, epsilon: float, rng: Randomness
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Noisy weekly totals per cover cell and (last) the outliers cell, epsilon-DP (pure)."""
    ell = config.max_visits
    ext = with_outliers(cmap)
    if config.totals == "sampled":
        sampled = ext @ counts.sampled.sum(axis=1)
        scale = scale_up(ell, epsilon)
        est = _laplace(sampled, scale, rng)
        return est, [{"step": "totals (sampled)", "epsilon": epsilon, "laplace_scale": scale}]
    e_cell = epsilon * config.totals_split
    e_grand = epsilon - e_cell
    grand_scale = scale_up(MAX_VISITS_PER_WEEK, e_grand)
    grand = float(_laplace(np.array([float(counts.total_visits)]), grand_scale, rng)[0])
    if config.totals == "one-visit":
        base = ext @ counts.one_visit
        cell_scale = scale_up(1.0, e_cell)
    else:  # rescaled
        base = ext @ counts.sampled.sum(axis=1)
        cell_scale = scale_up(ell, e_cell)
    noisy = np.maximum(_laplace(base, cell_scale, rng), 0.0)
    denom = noisy.sum()
    est = noisy / denom * max(grand, 0.0) if denom > 0 else np.zeros_like(noisy)
    steps = [
        {
            "step": f"totals ({config.totals}): per cell",
            "epsilon": e_cell,
            "laplace_scale": cell_scale,
        },
        {"step": "totals: all hourly visits", "epsilon": e_grand, "laplace_scale": grand_scale},
    ]
    return est, steps


def perturb_density(
    counts: DensityCounts,
    cmap: CoverMap,
    centroids: np.ndarray,
    config: DensityConfig,
    rng: Randomness | int | None = None,
    *,
    first_hour: int = 0,
) -> DensityResult:
    """The mechanism on exact bounded counts: returns noisy zone series (zones x 168).

    Guarantee: ``config.cost()`` per user, given that ``counts`` came from the pre-sampling
    with ``config.max_visits`` and ``cmap`` from public geometry. ``centroids`` (lng, lat) are
    those of the cover cells (public).
    """
    r = resolve(rng)
    if counts.max_visits != config.max_visits:
        raise ConfigError("the counts were pre-sampled with another max_visits")
    ell = config.max_visits
    n_c = cmap.size
    x_cover = np.asarray(with_outliers(cmap) @ counts.sampled)  # (cells + outliers, 168)
    out_of_domain, out_step = noisy_out_of_domain(counts, config, r)
    if config.method == "lpa":
        scale = scale_up(ell, config.epsilon)
        noisy = _laplace(x_cover, scale, r)
        steps = [{"step": "LPA", "epsilon": config.epsilon, "laplace_scale": scale}, out_step]
        zones = np.asarray(cmap.to_zones @ noisy[:n_c])
        return DensityResult(
            zones, config.cost(), steps, outliers=noisy[n_c], out_of_domain=out_of_domain
        )
    half = config.epsilon / 2.0
    totals, steps = noisy_totals(counts, cmap, config, half, r)
    tau = config.tau if config.tau is not None else config.default_tau()
    labels = cluster_cells(centroids, totals[:n_c], tau) if config.clustering else np.arange(n_c)
    labels = np.append(labels, labels.max() + 1 if n_c else 0)  # outliers: a cluster alone
    m = int(labels.max()) + 1
    stack = np.zeros((m, HOURS_PER_WEEK))
    np.add.at(stack, labels, x_cover)
    l2 = math.sqrt(ell)
    mixed = min(float(ell), math.sqrt(m * ell))
    if config.fourier:
        fp = fourier_perturb(stack, half, l2, r, delta=config.delta, mixed_sensitivity=mixed)
        shapes = fp.values
        step = {"step": fp.to_dict()["mechanism"], "epsilon": half, "delta": config.delta}
        step.update({"k": fp.k, "noise_scale": fp.noise_scale, "l2_sensitivity": l2})
        step.update({"mixed_sensitivity": mixed, "clusters": m, "tau": tau})
    elif config.delta > 0:
        if half >= 1:
            raise ConfigError("the Gaussian step needs epsilon/2 < 1")
        sigma = up(math.sqrt(2.0 * math.log(4.0 / config.delta)) * l2 / half, 6)
        shapes = samplers.gaussian(stack, sigma, r)
        step = {"step": "Gaussian per count", "epsilon": half, "delta": config.delta}
        step.update({"sigma": sigma, "clusters": m, "tau": tau})
    else:
        shapes = _laplace(stack, scale_up(ell, half), r)
        step = {"step": "Laplace per count", "epsilon": half, "laplace_scale": scale_up(ell, half)}
        step.update({"clusters": m, "tau": tau})
    steps.append(step)
    shapes = np.maximum(shapes, 0.0)
    if config.smoothing:
        shapes = np.maximum(smooth_nights(shapes, first_hour), 0.0)
        steps.append({"step": "night smoothing", "epsilon": 0.0})
    norm = shapes.sum(axis=1, keepdims=True)
    unit_shapes = np.divide(shapes, norm, out=np.zeros_like(shapes), where=norm > 0)
    cells = totals[:, None] * unit_shapes[labels]
    zones = np.asarray(cmap.to_zones @ cells[:n_c])
    steps.append(out_step)
    kept: int | None = None
    std = None
    if config.fourier:  # noise per kept coefficient -> per hourly value (orthonormal DCT)
        kept = fp.k
        per = fp.noise_scale * (math.sqrt(2.0) if config.delta == 0 else 1.0)
        std = per * math.sqrt(kept / HOURS_PER_WEEK)
    signal = density_signal(
        noisy_total=float(np.sum(totals[:n_c])), tau=tau, clusters=m, kept=kept, noise_std=std
    )
    return DensityResult(
        zones, config.cost(), steps, labels[:n_c], totals, cells[n_c], out_of_domain, signal
    )


def noisy_out_of_domain(
    counts: DensityCounts, config: DensityConfig, rng: Randomness
) -> tuple[int, dict[str, Any]]:
    """The out-of-domain cell: discrete Laplace of scale l / epsilon_out on the bounded count
    of visits outside the week or at no tower (<= l per user): epsilon_out-DP per user."""
    eps = config.epsilon_outliers
    noise, _ = calibrate(
        NoiseKind.DISCRETE_LAPLACE, eps, l1_sensitivity=config.max_visits, unit=Unit.USER
    )
    value = int(noise.add(np.array([int(counts.outside)], dtype=np.int64), rng)[0])
    step = {"step": f"outliers: {OUT_OF_DOMAIN}", "epsilon": eps}
    step.update(
        {"noise": noise.kind.value, "scale": noise.scale, "l1_sensitivity": config.max_visits}
    )
    return value, step


# -- geometry and the release -------------------------------------------------------------------


def density_release(
    engine: Engine,
    events: str | Loaded,
    geometry: DensityGeometry,
    config: DensityConfig,
    week_start: datetime,
    accountant: Accountant,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Hourly users per zone over the week starting at ``week_start`` (SPEC 4.3).

    ``events`` is a relation in ``engine`` (or the loaded input, which can be split into user
    buckets out of core) with columns uid, time (local TIMESTAMP) and
    tile = site (tower position) index in ``geometry`` (-1 outside); see :class:`SiteIndex`.
    Guarantee: ``config.cost()`` per user for the whole week and the visits outside it
    ((epsilon + epsilon_out)-DP with EFPA or LPA, (epsilon + epsilon_out, delta)-DP with
    EFPAG; the out-of-domain cell is the ``out_of_domain`` table); the accountant is checked
    before the data is read and charged (two entries) before the release is returned.
    """
    r = resolve(rng)
    if geometry.cmap.to_cover.shape[1] != geometry.n_towers:
        raise ConfigError("the cover map does not match the towers")
    cost = config.cost()
    accountant.precheck(cost)
    key = fresh_key(r)
    if isinstance(events, Loaded):
        counts = bucketed_density_counts(
            events, geometry.n_towers, week_start, config.max_visits, key, step=step
        )
    else:
        counts = density_counts(
            engine, events, geometry.n_towers, week_start, config.max_visits, key
        )
    res = perturb_density(
        counts, geometry.cmap, geometry.centroids, config, r, first_hour=week_start.hour
    )
    release = Release(
        kind="density",
        cost=cost,
        unit=Unit.USER,
        bounds={"max_visits_per_hour": 1, "max_visits_per_week": config.max_visits},
        noise={"mechanism": config.mechanism, "steps": res.steps},
        params={
            "epsilon": config.epsilon,
            "delta": config.delta,
            "method": config.method,
            "cover": config.cover,
            "totals": config.totals,
            "clustering": config.clustering,
            "tau": config.tau if config.tau is not None else config.default_tau(),
            "fourier": config.fourier,
            "smoothing": config.smoothing,
            "outliers_epsilon": config.epsilon_outliers,
            "week_start": week_start.isoformat(),
            "signal": res.signal,
        },
        domain={
            "zones": len(geometry.zone_ids),
            "hours": HOURS_PER_WEEK,
            "towers": geometry.n_towers,
            "cover_cells": geometry.cmap.size,
        },
        tables={
            "density": density_table(geometry.zone_ids, res.zones),
            "outliers": density_table(np.array(["outside"]), _row(res.outliers)),
            "out_of_domain": pd.DataFrame(
                {
                    "cell": [OUT_OF_DOMAIN],
                    "count": [max(int(res.out_of_domain or 0), 0)],
                    "epsilon": [config.epsilon_outliers],
                    "noise_scale": [config.max_visits / config.epsilon_outliers],
                }
            ),
        },
        for_publication=r.for_publication,
        extra={"accounting": accounting(config, res)},
        cost_parts=[
            (f"density {config.mechanism}", config.mechanism_cost()),
            (f"density outliers cell ({OUT_OF_DOMAIN})", config.outliers_cost()),
        ],
    )
    return accountant.charge(release, description=f"density {config.mechanism}")


def _row(values: np.ndarray | None) -> np.ndarray:
    return np.zeros((1, HOURS_PER_WEEK)) if values is None else np.asarray(values)[None, :]


def density_table(zone_ids: np.ndarray, zones: np.ndarray) -> pd.DataFrame:
    """Long table (zone, hour, count); counts rounded to integers and clamped at 0."""
    n_z, n_h = zones.shape
    return pd.DataFrame(
        {
            "zone": np.repeat(np.asarray(zone_ids), n_h),
            "hour": np.tile(np.arange(n_h, dtype=np.int16), n_z),
            "count": np.maximum(np.rint(zones), 0).astype(np.int64).ravel(),
        }
    )


def accounting(config: DensityConfig, res: DensityResult) -> dict[str, Any]:
    """Per-step privacy accounting for the metadata (sequential composition)."""
    spent = [
        {k: v for k, v in s.items() if k in ("step", "epsilon", "delta")}
        for s in res.steps
        if "epsilon" in s
    ]
    return {
        "composition": "sequential",
        "steps": spent,
        "total": res.cost.to_dict(),
        "unit": "user (all visits of one user in the week)",
    }
