"""Counts per zone and time bin from raw events, for landmark-private publication.

The engine bins each event into the public grid of time bins [start, end) and the public
tessellation, keeps at most ``max_per_bin`` events per user per bin (a keyed-hash sample:
the choice for one user depends only on that user's records and a fresh key), and counts.
That bound, enforced here before aggregation, is the sensitivity per timestamp of the series
(L1 over zones): one user's events at one timestamp change the column by at most
``max_per_bin``. Events outside the tessellation are counted in an extra ``outside`` zone;
events outside the period belong to no timestamp of the series and are not counted (the
period is public). The driver sees only the dense zones x bins matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from privmob.data.sources import Loaded
from privmob.engine.base import dense_counts
from privmob.errors import ConfigError
from privmob.prepare.bounding import bound_per_user, fresh_key
from privmob.privacy.costs import Cost
from privmob.privacy.samplers import Randomness, resolve
from privmob.releases.base import Accountant, Release
from privmob.releases.landmark import SCHEME_UNIT, AdaptiveRule, Scheme, publish_series

OUTSIDE = "outside"


def time_grid(start: str, end: str, freq: str) -> pd.DatetimeIndex:
    """The public time bins: left edges of [start, end) every ``freq`` (e.g. 1h, 1D)."""
    try:
        grid = pd.date_range(pd.Timestamp(start), pd.Timestamp(end), freq=freq, inclusive="left")
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot build the time bins: {exc}", hint="e.g. --freq 1h") from exc
    if len(grid) < 2:
        raise ConfigError("the period holds fewer than two time bins", hint="check --start < --end")
    if np.unique(np.diff(grid.asi8)).size != 1:
        raise ConfigError("time bins must have a fixed length (use h, min, D or a multiple)")
    return grid


def bounded_zone_counts(
    events: Loaded,
    *,
    tiles: int,
    grid: pd.DatetimeIndex,
    max_per_bin: int,
    rng: Randomness | None = None,
) -> np.ndarray:
    """Exact bounded counts, shape (tiles + 1, bins); the last row is ``outside``.

    Never publish these: they are the input of the noise.
    """
    engine = events.engine
    d = engine.dialect
    if len(grid) < 2:
        raise ConfigError("a series needs at least two time bins")
    start = d.timestamp_literal(grid[0].isoformat(sep=" "))
    end_ts = grid[-1] + (grid[1] - grid[0])
    width = int((grid[1] - grid[0]).total_seconds())
    end = d.timestamp_literal(end_ts.isoformat(sep=" "))
    binned = (
        f"(SELECT uid, time, tile, CAST(floor(({d.epoch_seconds('time')} - "
        f"{d.epoch_seconds(start)}) / {width}) AS BIGINT) AS bin FROM {events.view} "
        f"WHERE time >= {start} AND time < {end})"
    )
    bounded = bound_per_user(
        binned,
        max_units=max_per_bin,
        key=fresh_key(rng),
        dialect=d,
        unit=("time", "tile"),
        partition=("bin",),
    )
    sql = (
        f"SELECT CASE WHEN tile >= 0 THEN tile ELSE {tiles} END AS i0, bin AS i1, "
        f"count(*) AS n FROM ({bounded}) AS q_ GROUP BY 1, 2"
    )
    return dense_counts(engine, sql, (tiles + 1, len(grid)))


def publish_zone_counts(
    events: Loaded,
    *,
    tile_ids: Sequence[object],
    grid: pd.DatetimeIndex,
    max_per_bin: int,
    landmarks: Sequence[int],
    epsilon: float,
    scheme: Scheme | str,
    accountant: Accountant,
    rng: Randomness | int | None = None,
    rule: AdaptiveRule | None = None,
) -> Release:
    """Counts per zone and time bin, published under landmark epsilon-privacy.

    Guarantee: as :func:`privmob.releases.landmark.publish_series` with sensitivity
    ``max_per_bin``, which the engine enforces per user and bin before counting. Landmarks
    are positions in ``grid`` (public). Zones: the tessellation's tiles plus ``outside``.
    """
    scheme = Scheme(scheme)
    accountant.precheck(Cost.pure(epsilon, SCHEME_UNIT[scheme]))  # before reading the data
    r = resolve(rng)
    counts = bounded_zone_counts(
        events, tiles=len(tile_ids), grid=grid, max_per_bin=max_per_bin, rng=r
    )
    return publish_series(
        counts,
        landmarks,
        epsilon,
        scheme,
        sensitivity=float(max_per_bin),
        accountant=accountant,
        rng=r,
        timestamps=list(grid),
        zones=[*(str(t) for t in tile_ids), OUTSIDE],  # one type for Parquet
        integer=True,
        rule=rule,
        sensitivity_note=(
            f"each user keeps at most {max_per_bin} event(s) per time bin (keyed-hash sample), "
            "enforced by the engine before counting"
        ),
    )
