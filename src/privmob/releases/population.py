"""DP population counts (SPEC 4.4; seed 003): users per home zone, over every zone.

Data flow: events → home per user (most frequent night tile, ``privmob.prepare.homes``) →
exact counts over the public domain (every zone, plus "home outside the zones" and "unknown
home" for users without a night event) → noise on every cell → clamp at 0 → ledger → output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from privmob.data.sources import Loaded
from privmob.engine.base import dense_counts
from privmob.errors import ConfigError
from privmob.prepare.homes import home_cells_sql
from privmob.privacy.costs import Unit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.releases.base import Accountant, Release
from privmob.releases.periods import StudyPeriod

OUTSIDE = "home outside the zones"
UNKNOWN = "unknown home (no night event)"


def exact_home_counts(
    events: Loaded,
    k: int,
    *,
    night: tuple[int, int] = (20, 6),
    period: StudyPeriod | None = None,
) -> np.ndarray:
    """Exact users per home cell (k zones, outside, unknown). Never publish these."""
    where = "TRUE"
    if period is not None and period.declared:
        where = f"({period.bin_sql('time', events.engine.dialect)}) >= 0"
    sql = home_cells_sql(events.view, events.engine.dialect, k, night=night, where=where)
    return dense_counts(events.engine, sql, (k + 2,))


def population_counts(
    events: Loaded,
    *,
    tessellation: Any,
    epsilon: float,
    accountant: Accountant,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    night: tuple[int, int] = (20, 6),
    period: StudyPeriod | None = None,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Differentially private number of users whose home is in each zone.

    Guarantee: user-level epsilon-DP (discrete Laplace / laplace-rounded, scale 1/epsilon) or
    (epsilon, delta)-DP (discrete Gaussian). Each user has exactly one cell (a zone, "outside"
    or "unknown home"), so adding or removing a user changes one count by 1 (L1 = L2
    sensitivity 1) whatever their events. Every cell of the public domain gets noise; clamping
    negative values to 0 is post-processing. When ``period`` is declared only events inside it
    are read; the period itself is public.
    """
    step = step or (lambda _m: None)
    r = resolve(rng)
    if night[0] == night[1]:
        raise ConfigError("the night window is empty")
    k = tessellation.k
    dist, cost = calibrate(noise, epsilon, l1_sensitivity=1, l2_sensitivity=1, delta=delta)
    accountant.precheck(cost)
    step("finding home locations")
    counts = exact_home_counts(events, k, night=night, period=period)
    step(f"adding {dist.kind} noise to {k + 2} cells")
    noisy = np.maximum(dist.add(counts, r), 0)
    ids = [str(t) for t in tessellation.tile_ids]
    table = pd.DataFrame(
        {
            "zone": [*ids, OUTSIDE, UNKNOWN],
            "kind": ["zone"] * k + ["outliers", "outliers"],
            "count": noisy.astype(np.int64),
        }
    )
    release = Release(
        kind="population",
        cost=cost,
        unit=Unit.USER,
        bounds={"homes_per_user": 1},
        noise={**dist.to_dict(), "l1_sensitivity": 1, "margin_of_error_95": dist.margin_of_error()},
        params={
            "epsilon": epsilon,
            "delta": delta,
            "night_hours": list(night),
            "period": (period or StudyPeriod()).to_dict(),
            "post_processing": "negative counts set to 0",
        },
        domain={"zones": k, "outlier_cells": [OUTSIDE, UNKNOWN]},
        tables={"population": table},
        for_publication=r.for_publication,
    )
    step("charging the privacy ledger")
    accountant.charge(release, description=f"population counts over {k} zones")
    return release
