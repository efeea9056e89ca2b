"""Synthetic phone records with a daily and weekly rhythm, for tests and benchmarks of the density
release. Not real data; every number here is made up.

A square study area is cut into ``grid x grid`` square zones; towers are scattered with more
of them near the centre. Each user has a home tower (drawn with a centre-heavy weight) and a
work tower (drawn more towards the centre); each event's hour follows a weekday/weekend daily
profile (low around 4:00, peaks at midday and evening), and its tower is the work tower during
weekday office hours, otherwise home, with some events at random towers.

Office hours are 9:00-18:00 for everyone by default (``commute_spread_h = 0``): every central
zone's series then jumps at exactly 9:00 and 18:00. With ``commute_spread_h = s > 0`` each user
has their own office hours, start ~ Normal(9, s) and end ~ Normal(18, s) hours (drawn from a
second generator, so the other draws are unchanged), and an event is at work when its time
(hour and minute) falls between them: commutes spread over the morning and the evening, as in
real phone records, instead of one step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from privmob.errors import ConfigError

WEEK_START = datetime(2026, 3, 2)  # a Monday


@dataclass(frozen=True)
class SyntheticCity:
    zones: gpd.GeoDataFrame  # zone_id, geometry (EPSG:4326)
    towers: pd.DataFrame  # cell_id, lng, lat
    events: pd.DataFrame  # uid, time, cell_id, tile (tower index)
    week_start: datetime


def _profile(weekend: bool) -> np.ndarray:
    h = np.arange(24)
    day = np.exp(-((h - 12.5) ** 2) / 18.0) + 0.8 * np.exp(-((h - 19.0) ** 2) / 6.0)
    night = 0.05 + 0.1 * np.exp(-((h - 0.0) ** 2) / 4.0)
    p = night + (0.6 if weekend else 1.0) * day
    return np.asarray(p)


def hour_weights() -> np.ndarray:
    """Relative event rate for each of the 168 hours of a week starting Monday 0:00."""
    days = [_profile(weekend=d >= 5) for d in range(7)]
    w = np.concatenate(days)
    return np.asarray(w / w.sum())


def synthetic_city(
    n_users: int,
    n_towers: int,
    grid: int,
    *,
    mean_events: float = 14.0,
    seed: int = 0,
    commute_spread_h: float = 0.0,
    origin: tuple[float, float] = (2.25, 48.81),
    size_deg: float = 0.16,
) -> SyntheticCity:
    if not commute_spread_h >= 0:
        raise ConfigError(f"the commute spread must be >= 0 hours, got {commute_spread_h}")
    rng = np.random.default_rng(seed)
    x0, y0 = origin
    d = size_deg / grid
    polys = [
        shapely.box(x0 + i * d, y0 + j * d, x0 + (i + 1) * d, y0 + (j + 1) * d)
        for j in range(grid)
        for i in range(grid)
    ]
    zones = gpd.GeoDataFrame({"zone_id": np.arange(grid * grid)}, geometry=polys, crs="EPSG:4326")
    # towers: half uniform, half centre-heavy
    u = rng.random((n_towers, 2))
    c = np.clip(0.5 + rng.normal(0, 0.18, (n_towers, 2)), 0.001, 0.999)
    pick = rng.random(n_towers) < 0.5
    pos = np.where(pick[:, None], u, c)
    towers = pd.DataFrame(
        {
            "cell_id": np.arange(n_towers) + 1000,
            "lng": x0 + pos[:, 0] * size_deg,
            "lat": y0 + pos[:, 1] * size_deg,
        }
    )
    centre_dist = np.hypot(pos[:, 0] - 0.5, pos[:, 1] - 0.5)
    home_w = np.exp(-centre_dist / 0.35) * rng.gamma(2.0, 1.0, n_towers)
    work_w = np.exp(-centre_dist / 0.15) * rng.gamma(1.0, 1.0, n_towers)
    home = rng.choice(n_towers, n_users, p=home_w / home_w.sum()).astype(np.int32)
    work = rng.choice(n_towers, n_users, p=work_w / work_w.sum()).astype(np.int32)
    # events per user: heavy-tailed, at least 1
    n_ev = np.maximum(1, rng.negative_binomial(1.2, 1.2 / (1.2 + mean_events), n_users))
    n_ev = np.minimum(n_ev, 700)
    uid = np.repeat(np.arange(n_users, dtype=np.int32), n_ev)
    total = int(n_ev.sum())
    hw = hour_weights()
    hour = rng.choice(168, total, p=hw).astype(np.int16)
    hod = hour % 24
    weekday = hour < 120
    work_draw = rng.random(total)
    roam = rng.random(total) < 0.15
    roam_tower = rng.integers(0, n_towers, total)
    seconds = rng.integers(0, 3600, total)
    if commute_spread_h > 0:  # each user's own office hours, from a second generator
        own = np.random.default_rng([seed, 1])
        start = 9.0 + own.normal(0.0, commute_spread_h, n_users)
        end = np.maximum(18.0 + own.normal(0.0, commute_spread_h, n_users), start)
        t = hod + seconds / 3600.0
        office = weekday & (t >= start[uid]) & (t < end[uid])
    else:
        office = weekday & (hod >= 9) & (hod < 18)
    at_work = office & (work_draw < 0.75)
    tower = np.where(at_work, work[uid], home[uid])
    tower = np.where(roam, roam_tower, tower).astype(np.int32)
    minutes = seconds.astype("timedelta64[s]")
    time = np.datetime64(WEEK_START) + hour.astype("timedelta64[h]") + minutes
    events = pd.DataFrame(
        {
            "uid": uid,
            "time": time.astype("datetime64[us]"),
            "cell_id": towers["cell_id"].to_numpy()[tower],
            "tile": tower,
        }
    )
    return SyntheticCity(zones, towers, events, WEEK_START)
