"""DP population counts (SPEC 4.4; seed 003): users per home zone, over every zone.

Data flow: events → home per user (most frequent night tile, ``privmob.prepare.homes``) →
exact counts over the public domain (every zone, plus "home outside the zones" and "unknown
home" for users without a night event) → noise on every cell → clamp at 0 → ledger → output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.domain import Period
from privmob.engine.base import dense_counts
from privmob.engine.buckets import counts_by_user_buckets
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.prepare.homes import home_cells_sql
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.releases.base import Accountant
from privmob.releases.release import Release
from privmob.releases.tiles import check_shape, check_tessellation

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

#: Engine memory per input event of the home step (for the user buckets). Homes are an
#: aggregate per (user, tile), which DuckDB spills, and a window over those aggregates, not
#: over events: one pass over 1.27B events peaked at 1.30 GB (~0.8 B per event above the
#: 0.3 GB base; docs/benchmarks.md), so 4 B per event keeps a 4-5x margin. Buckets cost a
#: partitioning pass (1.27B events in 2 buckets: 294 s instead of 207 s), so none where
#: the memory does not ask for them.
HOME_BYTES_PER_ROW = 4

OUTSIDE = "home outside the zones"
UNKNOWN = "unknown home (no night event in the period)"


def exact_home_counts(
    events: Loaded,
    k: int,
    *,
    night: tuple[int, int] = (20, 6),
    period: Period | None = None,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
) -> np.ndarray:
    """Exact users per home cell (k zones, outside, unknown). Never publish these.

    Out of core: with a memory limit on the engine (DuckDB ``--memory-limit``) the users are
    split into hash buckets (:mod:`privmob.engine.buckets`); a user's home depends on their own
    events only, so the summed bucket counts equal the single-pass counts.
    """
    where = "TRUE"
    if period is not None and period.declared:
        where = f"({period.bin_sql('time', events.engine.dialect)}) >= 0"

    def count(part: Loaded) -> np.ndarray:
        sql = home_cells_sql(part.view, part.engine.dialect, k, night=night, where=where)
        return dense_counts(part.engine, sql, (k + 2,))

    return counts_by_user_buckets(
        events,
        count,
        "finding home locations",
        buckets=buckets,
        step=step,
        columns=("uid", "time", "tile"),
        bytes_per_row=HOME_BYTES_PER_ROW,
    )


def population_counts(
    events: Loaded,
    *,
    tessellation: Tessellation,
    epsilon: float,
    accountant: Accountant,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    night: tuple[int, int] = (20, 6),
    period: Period | None = None,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Differentially private number of users whose home is in each zone.

    Guarantee: user-level epsilon-DP (discrete Laplace / laplace-rounded, scale 1/epsilon) or
    (epsilon, delta)-DP (discrete Gaussian). Each user has exactly one cell (a zone, "outside"
    or "unknown home"), so adding or removing a user changes one count by 1 (L1 = L2
    sensitivity 1) whatever their events. Every cell of the public domain gets noise; clamping
    negative values to 0 is post-processing. When ``period`` is declared homes come from the
    events inside it; a user with no night event inside it (e.g. seen only outside the period)
    is counted in the "unknown home" outliers cell (SPEC 1.1); the period itself is public.
    """
    step = step or (lambda _m: None)
    r = resolve(rng)
    if night[0] == night[1]:
        raise ConfigError("the night window is empty")
    check_tessellation(events, tessellation)
    check_shape(
        events,
        "events",
        "population release",
        "load located events (or trip points) with privmob.data.load_events, or use "
        "privmob.Session",
    )
    k = tessellation.k
    dist, cost = calibrate(noise, epsilon, l1_sensitivity=1, l2_sensitivity=1, delta=delta)
    accountant.precheck(cost)
    step("finding home locations")
    counts = exact_home_counts(events, k, night=night, period=period, step=step)
    step(f"adding {dist.kind} noise to {k + 2} cells")
    noisy = np.maximum(dist.add(counts, r), 0)
    ids = [str(t) for t in tessellation.tile_ids]
    table = pd.DataFrame(
        {
            "zone": [*ids, OUTSIDE, UNKNOWN],
            "tile_id": typed_tile_ids(tessellation.tile_ids, extra=2),
            "kind": ["zone"] * k + ["outliers", "outliers"],
            "count": noisy.astype(np.int64),
        }
    )
    release = Release(
        kind="population",
        cost=cost,
        unit=PrivacyUnit.USER,
        bounds={"homes_per_user": 1},
        noise={**dist.to_dict(), "l1_sensitivity": 1, "margin_of_error_95": dist.margin_of_error()},
        params={
            "epsilon": epsilon,
            "delta": delta,
            "night_hours": list(night),
            "period": (period or Period()).to_dict(),
            "post_processing": "negative counts set to 0",
        },
        domain={"zones": k, "outlier_cells": [OUTSIDE, UNKNOWN]},
        tables={"population": table},
        for_publication=r.for_publication,
    )
    step(accountant.closing_step)
    accountant.charge(release, description=f"population counts over {k} zones")
    return release


def population_by_tower_shares(
    events: Loaded,
    *,
    towers: pd.DataFrame,
    tessellation: Tessellation,
    epsilon: float,
    accountant: Accountant,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    night: tuple[int, int] = (20, 6),
    period: Period | None = None,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """DP population per zone through Voronoi area shares of the towers (SPEC section 2).

    Homes are found per tower (the most frequent tower at night); the users per home tower
    (plus "unknown home") get noise with sensitivity 1, exactly as in
    :func:`population_counts` (user-level epsilon-DP); the noisy tower counts, clamped at 0,
    are then split over zones by the public area-share matrix (post-processing: no extra
    cost). Zone values are therefore fractional. ``towers`` (``cell_key, lat, lng``) is the
    public towers table; ``events`` must carry ``cell_id``.
    """
    import pyarrow as pa

    from privmob.engine.relation import new_name
    from privmob.prepare.voronoi import apply_shares, tower_zone_shares

    step = step or (lambda _m: None)
    r = resolve(rng)
    if "cell_id" not in events.columns:
        raise ConfigError(
            "Voronoi shares need events with cell ids", hint="load the events with --cells"
        )
    n = len(towers)
    k = tessellation.k
    step("building the towers' Voronoi cells and area shares")
    shares = tower_zone_shares(towers["lng"].to_numpy(), towers["lat"].to_numpy(), tessellation)
    dist, cost = calibrate(noise, epsilon, l1_sensitivity=1, l2_sensitivity=1, delta=delta)
    accountant.precheck(cost)
    eng = events.engine
    mapping = new_name("towerindex")
    eng.register(
        mapping,
        pa.table(
            {
                "cell_key": pa.array(towers["cell_key"].astype(str).tolist(), pa.string()),
                "tower": pa.array(np.arange(n, dtype=np.int32)),
            }
        ),
    )
    view = new_name("tower_events")
    eng.create_view(
        view,
        f"SELECT e.uid, e.time, COALESCE(m.tower, -1) AS tile FROM {events.view} AS e "
        f"LEFT JOIN {mapping} AS m ON CAST(e.cell_id AS VARCHAR) = m.cell_key",
    )
    tower_events = Loaded(view, events.source, "events", eng, ["uid", "time", "tile"])
    step("finding home towers")
    counts = exact_home_counts(tower_events, n, night=night, period=period)
    step(f"adding {dist.kind} noise to {n + 2} cells")
    noisy = np.maximum(dist.add(counts, r), 0)
    zones = apply_shares(noisy[:n], shares)  # k zones + outside
    zones[k] += noisy[n]  # homes at no known tower (unknown cell ids): outside the zones
    ids = [str(t) for t in tessellation.tile_ids]
    table = pd.DataFrame(
        {
            "zone": [*ids, OUTSIDE, UNKNOWN],
            "tile_id": typed_tile_ids(tessellation.tile_ids, extra=2),
            "kind": ["zone"] * k + ["outliers", "outliers"],
            "count": np.append(zones, float(noisy[n + 1])),
        }
    )
    release = Release(
        kind="population",
        cost=cost,
        unit=PrivacyUnit.USER,
        bounds={"homes_per_user": 1},
        noise={**dist.to_dict(), "l1_sensitivity": 1, "margin_of_error_95": dist.margin_of_error()},
        params={
            "epsilon": epsilon,
            "delta": delta,
            "night_hours": list(night),
            "period": (period or Period()).to_dict(),
            "zone_mapping": "voronoi area shares of noisy tower counts",
            "post_processing": "negative tower counts set to 0, then split by area shares",
        },
        domain={"towers": n, "zones": k, "outlier_cells": [OUTSIDE, UNKNOWN]},
        tables={"population": table},
        for_publication=r.for_publication,
    )
    step(accountant.closing_step)
    accountant.charge(release, description=f"population over {k} zones via {n} towers")
    return release


def typed_tile_ids(tile_ids: list[Any], extra: int) -> pd.Series:
    """The tile ids with their type (nullable Int64 or string), then ``extra`` missing values
    for the outliers rows: ``zone`` holds text for every row, ``tile_id`` merges with the
    tessellation."""
    if all(isinstance(t, int) for t in tile_ids):
        return pd.Series(pd.array([*tile_ids, *[None] * extra], dtype="Int64"))
    return pd.Series(pd.array([*map(str, tile_ids), *[None] * extra], dtype="string"))
