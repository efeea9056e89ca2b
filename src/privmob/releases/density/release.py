"""The density release: exact pre-sampled counts from the engine, the mechanism, the table per
zone and hour, and the ledger entries (mechanism and out-of-domain cell)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import numpy as np
import numpy.typing as npt

from privmob.engine.base import Engine
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.json_types import JSON, JSONObject
from privmob.lazy_imports import pd
from privmob.prepare.bounding import fresh_key
from privmob.prepare.density_geometry import DensityGeometry
from privmob.prepare.presample import (
    HOURS_PER_WEEK,
    bucketed_density_counts,
    density_counts,
)
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.samplers import RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.density.config import OUT_OF_DOMAIN, DensityConfig
from privmob.releases.density.mechanism import DensityResult, perturb_density
from privmob.releases.gate import Draft, through_the_gate
from privmob.releases.release import Release


def density_draft(
    engine: Engine,
    events: str | Loaded,
    geometry: DensityGeometry,
    config: DensityConfig,
    week_start: datetime,
    accountant: Accountant,
    rng: RandomnessLike = None,
    step: Callable[[str], None] | None = None,
) -> Draft:
    """Hourly users per zone over the week starting at ``week_start`` (SPEC 4.3).

    ``events`` is a relation in ``engine`` (or the loaded input, which can be split into user
    buckets out of core) with columns uid, time (local TIMESTAMP) and
    tile = site (tower position) index in ``geometry`` (-1 outside); see :class:`SiteIndex`.
    Guarantee: ``config.cost()`` per user for the whole week and the visits outside it
    ((epsilon + epsilon_out)-DP with EFPA or LPA, (epsilon + epsilon_out, delta)-DP with
    EFPAG; the out-of-domain cell is the ``out_of_domain`` table); the accountant is checked
    before the data is read; the gate charges the two entries before the mechanism runs.
    """
    r = resolve(rng)
    if geometry.cmap.to_cover.shape[1] != geometry.n_towers:
        raise ConfigError("the cover map does not match the towers")
    cost = config.cost()
    accountant.precheck(cost)
    noise_kind = "fourier-perturbation" if config.method == "scheme" else "laplace"
    header = Release(
        kind="density",
        cost=cost,
        unit=PrivacyUnit.USER,
        bounds={"max_visits_per_hour": 1, "max_visits_per_week": config.max_visits},
        noise={"kind": noise_kind, "mechanism": config.mechanism},
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
        },
        domain={
            "zones": len(geometry.zone_ids),
            "hours": HOURS_PER_WEEK,
            "towers": geometry.n_towers,
            "cover_cells": geometry.cmap.size,
        },
        tables={},
        for_publication=r.for_publication,
        cost_parts=[
            (f"density {config.mechanism}", config.mechanism_cost()),
            (f"density outliers cell ({OUT_OF_DOMAIN})", config.outliers_cost()),
        ],
    )
    key = fresh_key(r)
    if isinstance(events, Loaded):
        counts = bucketed_density_counts(
            events, geometry.n_towers, week_start, config.max_visits, key, step=step
        )
    else:
        counts = density_counts(
            engine, events, geometry.n_towers, week_start, config.max_visits, key
        )

    def draw() -> Release:
        res = perturb_density(
            counts, geometry.cmap, geometry.centroids, config, r, first_hour=week_start.hour
        )
        return header.drawn(
            {
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
            noise={"steps": list(res.steps)},
            params={"signal": res.signal},
            extra={"accounting": accounting(config, res)},
        )

    return Draft(header, f"density {config.mechanism}", draw)


density_release = through_the_gate(density_draft)


def _row(values: npt.NDArray[np.float64] | None) -> npt.NDArray[np.float64]:
    return np.zeros((1, HOURS_PER_WEEK)) if values is None else np.asarray(values)[None, :]


def density_table(
    zone_ids: npt.NDArray[np.object_], zones: npt.NDArray[np.float64]
) -> pd.DataFrame:
    """Long table (zone, hour, count); counts rounded to integers and clamped at 0."""
    n_z, n_h = zones.shape
    return pd.DataFrame(
        {
            "zone": np.repeat(np.asarray(zone_ids), n_h),
            "hour": np.tile(np.arange(n_h, dtype=np.int16), n_z),
            "count": np.maximum(np.rint(zones), 0).astype(np.int64).ravel(),
        }
    )


def accounting(config: DensityConfig, res: DensityResult) -> JSONObject:
    """Per-step privacy accounting for the metadata (sequential composition)."""
    spent: list[JSON] = [
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
