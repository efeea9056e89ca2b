"""The perturbation (seed 004, Algorithms 1-2): noisy totals per cover cell, EFPA / EFPAG on
the stack of cluster series or the LPA baseline, and the one out-of-domain cell."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.prepare.cover import CoverMap
from privmob.prepare.presample import (
    HOURS_PER_WEEK,
    DensityCounts,
)
from privmob.privacy import samplers
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.discrete_gaussian import scale_up, up
from privmob.privacy.efpa import fourier_perturb
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.privacy.signal import density_signal
from privmob.releases.density.clustering import cluster_cells
from privmob.releases.density.config import MAX_VISITS_PER_WEEK, OUT_OF_DOMAIN, DensityConfig
from privmob.releases.density.smoothing import smooth_nights

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


@dataclass
class DensityResult:
    """Noisy zone series and the accounting of every step."""

    zones: npt.NDArray[np.float64]  # (zones, 168), noisy, post-processed
    cost: Cost
    steps: list[JSONObject] = field(default_factory=list)
    clusters: npt.NDArray[np.int64] | None = None  # cluster label of each cover cell
    noisy_totals: npt.NDArray[np.float64] | None = None  # per cover cell, then the outliers cell
    outliers: npt.NDArray[np.float64] | None = (
        None  # (168,) noisy visits outside the area (SPEC 1.1)
    )
    out_of_domain: int | None = None  # noisy visits outside the week or at no tower
    signal: JSONObject | None = None  # privmob.privacy.signal.density_signal


def _laplace(
    values: npt.NDArray[np.float64], scale: float, rng: Randomness
) -> npt.NDArray[np.float64]:
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
) -> tuple[npt.NDArray[np.float64], list[JSONObject]]:
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
    steps: list[JSONObject] = [
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
    centroids: npt.NDArray[np.float64],
    config: DensityConfig,
    rng: RandomnessLike = None,
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
        steps: list[JSONObject] = [
            {"step": "LPA", "epsilon": config.epsilon, "laplace_scale": scale},
            out_step,
        ]
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
) -> tuple[int, JSONObject]:
    """The out-of-domain cell: discrete Laplace of scale l / epsilon_out on the bounded count
    of visits outside the week or at no tower (<= l per user): epsilon_out-DP per user."""
    eps = config.epsilon_outliers
    noise, _ = calibrate(
        NoiseKind.DISCRETE_LAPLACE, eps, l1_sensitivity=config.max_visits, unit=PrivacyUnit.USER
    )
    value = int(noise.add(np.array([int(counts.outside)], dtype=np.int64), rng)[0])
    step: JSONObject = {"step": f"outliers: {OUT_OF_DOMAIN}", "epsilon": eps}
    step.update(
        {"noise": noise.kind.value, "scale": noise.scale, "l1_sensitivity": config.max_visits}
    )
    return value, step
