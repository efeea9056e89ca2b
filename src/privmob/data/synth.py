"""Synthetic mobility data at any size, streamed to Parquet.

Not private data and not a release: a generator of realistic-looking *input* for demos, tests
and benchmarks. It uses numpy's seeded generator (this is not DP output), is deterministic
for a given :class:`SynthConfig`, and writes chunks of users one row group at a time, so
memory is bounded by the chunk size whatever the total size.

The model (all tiles are tile indexes of a :class:`~privmob.data.tessellation.Tessellation`):

* Each tile gets a *population* weight (heavy-tailed lognormal x decay from the city centre)
  and a *job* weight (concentrated on a few central tiles). Every user has a home tile drawn
  by population and a work tile drawn by jobs, and a point inside each.
* Trips per user over the period: lognormal with the configured mean and ``trips_sigma``
  (default 1.0: the busiest users have tens of times the mean), at least 1.
* Each trip falls on a day (weekdays weight 1, Saturday 0.65, Sunday 0.55). On weekdays 30%
  are home->work around 08:00, 30% work->home around 17:45, 40% other; on weekends 92% are
  other trips, centred on early afternoon. 3% of trips get a uniformly random time. Other
  trips leave from home (60%), work (25%) or anywhere, to a tile chosen among 8 candidates
  drawn by population with probability ~ exp(-distance / decay).
* Duration: 4 min + 2.5 min/km x lognormal noise.
* Clock times follow the rhythm in ``config.timezone`` and are stored as tz-aware UTC
  timestamps (``timestamp[us, tz=UTC]``).

Kinds: ``trips`` (uid, tid, start_time, end_time, origin, destination as tile ids
[+ coordinates]), ``trip-points`` (uid, tid, datetime, lat, lng; the origin, the destination
and Poisson(``extra_points_per_trip``) points in between) and ``events`` (CDR-like: uid,
datetime, cell_id, plus a cells table cell_id, lat, lng; events at the home tower at night,
the work tower on weekday office hours, and at trip ends).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import shapely
from scipy.spatial import cKDTree

from privmob.data.tessellation import Tessellation, grid_with_about, load_tessellation
from privmob.errors import ConfigError

Kind = Literal["trips", "trip-points", "events"]
KINDS: tuple[str, ...] = ("trips", "trip-points", "events")

#: Default study area when no tessellation is given: central New York City.
DEFAULT_BOUNDS = (-74.05, 40.60, -73.75, 40.90)
DEFAULT_GRID_CELLS = 256

_US = 1_000_000
_DAY_US = 86_400 * _US
_WEEKDAY_WEIGHT = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.65, 0.55])  # Mon..Sun
_CANDIDATES = 8
TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class SynthConfig:
    """Everything that determines a synthetic dataset (same config -> same bytes of data).

    ``mean_trips_per_user`` is over the whole period. ``chunk_users`` (default: about one
    million trips per chunk) sets the row-group size and the memory bound; it is part of the
    seed stream, so changing it changes the data.
    """

    n_users: int = 10_000
    start: str | date = "2024-01-01"
    days: int = 28
    mean_trips_per_user: float = 20.0
    trips_sigma: float = 1.0
    tessellation: Tessellation | str | Path | None = None
    grid_cells: int = DEFAULT_GRID_CELLS
    seed: int = 0
    timezone: str = "UTC"
    coordinates: bool = False
    extra_points_per_trip: float = 1.0
    n_towers: int | None = None
    events_per_user_day: float = 5.0
    decay_km: float | None = None
    chunk_users: int | None = None

    def validated(self) -> SynthConfig:
        if self.n_users < 1:
            raise ConfigError(f"n_users must be >= 1, got {self.n_users}")
        if self.days < 1:
            raise ConfigError(f"days must be >= 1, got {self.days}")
        if not self.mean_trips_per_user > 0:
            raise ConfigError(f"mean_trips_per_user must be > 0, got {self.mean_trips_per_user}")
        if self.trips_sigma < 0 or self.extra_points_per_trip < 0:
            raise ConfigError("trips_sigma and extra_points_per_trip must be >= 0")
        if self.events_per_user_day < 0:
            raise ConfigError("events_per_user_day must be >= 0")
        if self.n_towers is not None and self.n_towers < 1:
            raise ConfigError(f"n_towers must be >= 1, got {self.n_towers}")
        try:
            pd.Timestamp(self.start)
        except (ValueError, TypeError):
            raise ConfigError(f"start must be a date like 2024-01-01, got {self.start!r}") from None
        return self

    @property
    def users_per_chunk(self) -> int:
        if self.chunk_users is not None:
            return max(1, int(self.chunk_users))
        return max(1_000, int(1_000_000 / self.mean_trips_per_user))


@dataclass
class SynthSummary:
    """What :func:`write_synthetic` wrote."""

    kind: str
    path: Path
    rows: int
    users: int
    chunks: int
    bytes: int
    seconds: float
    tiles: int
    start: str
    end: str
    cells_path: Path | None = None
    cells: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def default_tessellation(n_cells: int = DEFAULT_GRID_CELLS) -> Tessellation:
    """A square grid of about ``n_cells`` cells over central New York City."""
    return grid_with_about(DEFAULT_BOUNDS, n_cells)


class _Alias:
    """Walker's alias table: O(1) vectorised draws from a fixed categorical distribution."""

    def __init__(self, p: np.ndarray) -> None:
        n = len(p)
        q = np.asarray(p, dtype=np.float64) * n / np.sum(p)
        alias = np.arange(n)
        small = [i for i in range(n) if q[i] < 1.0]
        large = [i for i in range(n) if q[i] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            alias[s] = g
            q[g] -= 1.0 - q[s]
            (small if q[g] < 1.0 else large).append(g)
        for i in small + large:
            q[i] = 1.0
        self.q, self.alias, self.n = q, alias, n

    def draw(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        j = rng.integers(0, self.n, size)
        return np.where(rng.random(size) < self.q[j], j, self.alias[j])


def _sorted_by_user_time(user: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Order by (user, time) with one int64 argsort when the combined key fits."""
    lo = int(when.min()) if len(when) else 0
    span = (int(when.max()) - lo + 1) if len(when) else 1
    if len(user) and (int(user.max()) + 1) * span < 2**62:
        return np.argsort(user.astype(np.int64) * span + (when - lo), kind="stable")
    return np.lexsort((when, user))


# -- the static world: tiles, weights, towers ----------------------------------------------
class _World:
    """Everything shared by all chunks, derived from the config's seed only."""

    def __init__(self, cfg: SynthConfig) -> None:
        t = cfg.tessellation
        if t is None:
            t = default_tessellation(cfg.grid_cells)
        self.tess = t if isinstance(t, Tessellation) else load_tessellation(t)
        rng = np.random.default_rng([cfg.seed, 0x5EED])
        k = self.tess.k
        c = self.tess.centroids()
        self.lng0, self.lat0 = float(np.mean(c[:, 0])), float(np.mean(c[:, 1]))
        self.kx = 111.32 * math.cos(math.radians(self.lat0))
        self.xy = self.to_km(c[:, 0], c[:, 1])
        spread = np.sqrt(((self.xy - self.xy.mean(0)) ** 2).sum(1))
        radius = max(float(np.percentile(spread, 90)), 1e-3)
        centre = self.xy[np.argmin(spread)] + rng.normal(0, radius * 0.05, 2)
        d = np.sqrt(((self.xy - centre) ** 2).sum(1))
        pop = np.exp(-d / (0.6 * radius)) * rng.lognormal(0.0, 0.8, k)
        jobs = np.exp(-d / (0.2 * radius)) * rng.lognormal(0.0, 1.2, k)
        self.pop = pop / pop.sum()
        self.jobs = jobs / jobs.sum()
        self.pop_alias, self.jobs_alias = _Alias(self.pop), _Alias(self.jobs)
        self.decay_km = cfg.decay_km or max(0.4 * radius, 1e-3)
        self.sampler = _PointSampler(self.tess)
        # towers (events only; cheap): denser where people live, at least one per few tiles
        self.tower_tree: cKDTree | None = None
        n_towers = cfg.n_towers or max(50, 2 * k)
        tiles = rng.choice(k, n_towers, p=0.5 * self.pop + 0.5 / k)
        self.towers = self.sampler.sample(tiles, rng)
        self._tower_xy = self.to_km(*self.towers)
        ids = self.tess.gdf["tile_id"]
        self.tile_ids: np.ndarray = ids.to_numpy()
        self.int_ids = pd.api.types.is_integer_dtype(ids)

    def to_km(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        return np.column_stack([(lng - self.lng0) * self.kx, (lat - self.lat0) * 110.574])

    def nearest_tower(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        if self.tower_tree is None:
            self.tower_tree = cKDTree(self._tower_xy)
        return self.tower_tree.query(self.to_km(lng, lat))[1].astype(np.int32)

    def id_array(self, idx: np.ndarray) -> pa.Array:
        vals = self.tile_ids[idx]
        return pa.array(vals.astype(np.int64) if self.int_ids else vals.astype(str))


class _PointSampler:
    """Uniform points inside tiles: rectangles for grids, area-weighted triangles otherwise."""

    def __init__(self, tess: Tessellation) -> None:
        self.grid = tess.grid
        if self.grid is not None:
            return
        tris, owner = [], []
        for i, g in enumerate(tess.gdf.geometry.values):
            parts = shapely.get_parts(shapely.constrained_delaunay_triangles(g))
            tris.append(shapely.get_coordinates(parts).reshape(len(parts), 4, 2)[:, :3])
            owner.append(np.full(len(parts), i))
        self.tri = np.concatenate(tris)
        a, b, c = self.tri[:, 0], self.tri[:, 1], self.tri[:, 2]
        area = 0.5 * np.abs(
            (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
        )
        owner_arr = np.concatenate(owner)
        self.cum = np.cumsum(area)
        first = np.searchsorted(owner_arr, np.arange(tess.k), side="left")
        last = np.searchsorted(owner_arr, np.arange(tess.k), side="right") - 1
        self.first, self.last = first, last
        self.base = np.where(first > 0, self.cum[np.maximum(first - 1, 0)], 0.0)
        self.tile_area = self.cum[last] - self.base

    def sample(self, tiles: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(lng, lat) of one uniform point inside each given tile index."""
        if self.grid is not None:
            cols, rows = tiles % self.grid.ncols, tiles // self.grid.ncols
            e, f = self.grid.lng_edges, self.grid.lat_edges
            u, v = rng.random(len(tiles)), rng.random(len(tiles))
            return e[cols] + u * (e[cols + 1] - e[cols]), f[rows] + v * (f[rows + 1] - f[rows])
        target = self.base[tiles] + rng.random(len(tiles)) * self.tile_area[tiles]
        tri = np.clip(
            np.searchsorted(self.cum, target, side="right"), self.first[tiles], self.last[tiles]
        )
        r1, r2 = rng.random(len(tiles)), rng.random(len(tiles))
        flip = r1 + r2 > 1
        r1, r2 = np.where(flip, 1 - r1, r1), np.where(flip, 1 - r2, r2)
        t = self.tri[tri]
        p = t[:, 0] + r1[:, None] * (t[:, 1] - t[:, 0]) + r2[:, None] * (t[:, 2] - t[:, 0])
        return p[:, 0], p[:, 1]


# -- one chunk of users ----------------------------------------------------------------------
@dataclass
class _Trips:
    user: np.ndarray  # position of the user in the chunk
    tid: np.ndarray
    start_us: np.ndarray  # UTC microseconds since epoch
    end_us: np.ndarray
    origin: np.ndarray  # tile indexes
    destination: np.ndarray
    o_lng: np.ndarray
    o_lat: np.ndarray
    d_lng: np.ndarray
    d_lat: np.ndarray


def _local_to_utc_us(local_us: np.ndarray, timezone: str) -> np.ndarray:
    if timezone == "UTC":
        return local_us
    idx = pd.DatetimeIndex(local_us.astype("datetime64[us]"))
    utc = idx.tz_localize(timezone, ambiguous=False, nonexistent="shift_forward").tz_convert("UTC")
    return utc.tz_localize(None).to_numpy().astype("datetime64[us]").astype(np.int64)


def _anchors(world: _World, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    home = world.pop_alias.draw(rng, n)
    work = world.jobs_alias.draw(rng, n)
    h_lng, h_lat = world.sampler.sample(home, rng)
    w_lng, w_lat = world.sampler.sample(work, rng)
    return {
        "home": home,
        "work": work,
        "h_lng": h_lng,
        "h_lat": h_lat,
        "w_lng": w_lng,
        "w_lat": w_lat,
    }


def _trips(
    world: _World,
    cfg: SynthConfig,
    a: dict[str, np.ndarray],
    rng: np.random.Generator,
    day0_us: int,
    dow0: int,
) -> _Trips:
    n = len(a["home"])
    s = cfg.trips_sigma
    mu = math.log(cfg.mean_trips_per_user) - s * s / 2
    per_user = np.maximum(1, np.rint(rng.lognormal(mu, s, n))).astype(np.int64)
    user = np.repeat(np.arange(n), per_user)
    m = len(user)
    dow = (dow0 + np.arange(cfg.days)) % 7
    dw = _WEEKDAY_WEIGHT[dow]
    day = rng.choice(cfg.days, m, p=dw / dw.sum())
    weekend = dow[day] >= 5
    u = rng.random(m)
    p_commute = np.where(weekend, 0.04, 0.30)
    to_work = u < p_commute
    to_home = (u >= p_commute) & (u < 2 * p_commute)
    other = ~(to_work | to_home)
    hour = np.where(
        to_work,
        rng.normal(8.0, 0.9, m),
        np.where(
            to_home, rng.normal(17.75, 1.2, m), rng.normal(np.where(weekend, 14.0, 13.0), 3.5, m)
        ),
    )
    hour = np.where(rng.random(m) < 0.03, rng.uniform(0, 24, m), hour) % 24.0

    home, work = a["home"][user], a["work"][user]
    origin = np.where(to_home, work, home)
    destination = np.where(to_home, home, work)
    # other trips: from home / work / anywhere, to a distance-decayed destination
    oi = np.flatnonzero(other)
    r = rng.random(len(oi))
    o = np.where(
        r < 0.6,
        home[oi],
        np.where(r < 0.85, work[oi], world.pop_alias.draw(rng, len(oi))),
    )
    cand = world.pop_alias.draw(rng, (len(oi), _CANDIDATES))
    dist = np.sqrt(((world.xy[cand] - world.xy[o][:, None, :]) ** 2).sum(-1))
    w = np.exp(-dist / world.decay_km)
    w /= w.sum(1, keepdims=True)
    pick = (np.cumsum(w, 1) < rng.random(len(oi))[:, None]).sum(1)
    origin[oi] = o
    destination[oi] = cand[np.arange(len(oi)), np.minimum(pick, _CANDIDATES - 1)]

    # points: anchors keep their point, other ends get a fresh point in the tile
    o_lng, o_lat = world.sampler.sample(origin, rng)
    d_lng, d_lat = world.sampler.sample(destination, rng)
    for lng, lat, tiles in ((o_lng, o_lat, origin), (d_lng, d_lat, destination)):
        at_home = tiles == home
        at_work = (tiles == work) & ~at_home
        lng[at_home], lat[at_home] = a["h_lng"][user[at_home]], a["h_lat"][user[at_home]]
        lng[at_work], lat[at_work] = a["w_lng"][user[at_work]], a["w_lat"][user[at_work]]
    km = np.sqrt(((world.to_km(o_lng, o_lat) - world.to_km(d_lng, d_lat)) ** 2).sum(1))
    minutes = 4.0 + 2.5 * km * rng.lognormal(0.0, 0.3, m)

    local = day0_us + day * _DAY_US + (hour * 3600 * _US).astype(np.int64)
    start = _local_to_utc_us(local, cfg.timezone)
    end = start + (minutes * 60 * _US).astype(np.int64)
    order = _sorted_by_user_time(user, start)
    user = user[order]
    offsets = np.concatenate([[0], np.cumsum(per_user)[:-1]])
    tid = (np.arange(m) - offsets[user]).astype(np.int64)
    return _Trips(
        user,
        tid,
        start[order],
        end[order],
        origin[order],
        destination[order],
        o_lng[order],
        o_lat[order],
        d_lng[order],
        d_lat[order],
    )


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(us, type=pa.int64()).cast(TS)


def _trips_table(world: _World, cfg: SynthConfig, t: _Trips, uids: np.ndarray) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "uid": pa.array(uids[t.user]),
        "tid": pa.array(t.tid),
        "start_time": _ts(t.start_us),
        "end_time": _ts(t.end_us),
        "origin": world.id_array(t.origin),
        "destination": world.id_array(t.destination),
    }
    if cfg.coordinates:
        cols |= {
            "origin_lat": pa.array(t.o_lat),
            "origin_lng": pa.array(t.o_lng),
            "destination_lat": pa.array(t.d_lat),
            "destination_lng": pa.array(t.d_lng),
        }
    return pa.table(cols)


def _trip_points_table(
    world: _World, cfg: SynthConfig, t: _Trips, uids: np.ndarray, rng: np.random.Generator
) -> pa.Table:
    m = len(t.user)
    extra = (
        rng.poisson(cfg.extra_points_per_trip, m)
        if cfg.extra_points_per_trip > 0
        else np.zeros(m, np.int64)
    )
    trip = np.concatenate([np.arange(m), np.arange(m), np.repeat(np.arange(m), extra)])
    frac = np.concatenate([np.zeros(m), np.ones(m), rng.random(int(extra.sum()))])
    order = np.lexsort((frac, trip))
    trip, frac = trip[order], frac[order]
    wobble = 0.0005 * np.sin(np.pi * frac)  # ~50 m detours away from the straight line
    lng = (
        t.o_lng[trip]
        + frac * (t.d_lng[trip] - t.o_lng[trip])
        + wobble * rng.standard_normal(len(trip))
    )
    lat = (
        t.o_lat[trip]
        + frac * (t.d_lat[trip] - t.o_lat[trip])
        + wobble * rng.standard_normal(len(trip))
    )
    when = t.start_us[trip] + (frac * (t.end_us[trip] - t.start_us[trip])).astype(np.int64)
    return pa.table(
        {
            "uid": pa.array(uids[t.user[trip]]),
            "tid": pa.array(t.tid[trip]),
            "datetime": _ts(when),
            "lat": pa.array(lat),
            "lng": pa.array(lng),
        }
    )


def _events_table(
    world: _World,
    cfg: SynthConfig,
    a: dict[str, np.ndarray],
    t: _Trips,
    uids: np.ndarray,
    rng: np.random.Generator,
    day0_us: int,
    dow0: int,
) -> pa.Table:
    n = len(a["home"])
    home_tower = world.nearest_tower(a["h_lng"], a["h_lat"])
    work_tower = world.nearest_tower(a["w_lng"], a["w_lat"])
    # stays: per user a heavy-tailed activity rate, per user-day a Poisson number of events
    rate = cfg.events_per_user_day * rng.lognormal(-0.5 * 0.8**2, 0.8, n)
    per_user = rng.poisson(rate * cfg.days)
    user = np.repeat(np.arange(n), per_user)
    e = len(user)
    day = rng.integers(0, cfg.days, e)
    weekend = ((dow0 + day) % 7) >= 5
    # hour: a day-heavy mixture (few events at night)
    hour = np.where(rng.random(e) < 0.85, rng.normal(14.0, 4.0, e), rng.uniform(0, 24, e)) % 24.0
    office = ~weekend & (hour >= 9) & (hour < 17) & (rng.random(e) < 0.9)
    tower = np.where(office, work_tower[user], home_tower[user])
    local = day0_us + day * _DAY_US + (hour * 3600 * _US).astype(np.int64)
    when = _local_to_utc_us(local, cfg.timezone)
    # trip ends: 70% of departures and arrivals leave a record at the nearest tower
    so = rng.random(len(t.user)) < 0.7
    sd = rng.random(len(t.user)) < 0.7
    users = np.concatenate([user, t.user[so], t.user[sd]])
    times = np.concatenate([when, t.start_us[so], t.end_us[sd]])
    towers = np.concatenate(
        [
            tower,
            world.nearest_tower(t.o_lng[so], t.o_lat[so]),
            world.nearest_tower(t.d_lng[sd], t.d_lat[sd]),
        ]
    )
    order = _sorted_by_user_time(users, times)
    return pa.table(
        {
            "uid": pa.array(uids[users[order]]),
            "datetime": _ts(times[order]),
            "cell_id": pa.array(towers[order]),
        }
    )


def cells_table(world: _World) -> pa.Table:
    lng, lat = world.towers
    return pa.table(
        {
            "cell_id": pa.array(np.arange(len(lng), dtype=np.int32)),
            "lat": pa.array(lat),
            "lng": pa.array(lng),
        }
    )


def default_cells_path(path: str | Path) -> Path:
    """Where ``events`` put the cells table by default: ``<stem>.cells.parquet``."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".parquet") + ".cells.parquet")


# -- public API ------------------------------------------------------------------------------
def iter_synthetic(
    kind: Kind, config: SynthConfig, world: _World | None = None
) -> Iterator[pa.Table]:
    """Yield the dataset as Arrow tables, one per chunk of users (bounded memory)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    cfg = config.validated()
    if world is None:
        world = _World(cfg)
    day0 = pd.Timestamp(cfg.start).normalize()
    day0_us = int(day0.value // 1000)
    dow0 = int(day0.day_of_week)
    step = cfg.users_per_chunk
    for c, lo in enumerate(range(0, cfg.n_users, step)):
        hi = min(cfg.n_users, lo + step)
        rng = np.random.default_rng([cfg.seed, 1, c])
        uids = np.arange(lo, hi, dtype=np.int64)
        a = _anchors(world, hi - lo, rng)
        t = _trips(world, cfg, a, rng, day0_us, dow0)
        if kind == "trips":
            yield _trips_table(world, cfg, t, uids)
        elif kind == "trip-points":
            yield _trip_points_table(world, cfg, t, uids, rng)
        else:
            yield _events_table(world, cfg, a, t, uids, rng, day0_us, dow0)


def write_synthetic(
    kind: Kind,
    path: str | Path,
    config: SynthConfig | None = None,
    *,
    cells_path: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SynthSummary:
    """Generate ``kind`` with ``config`` and stream it to the Parquet file ``path``.

    For ``events`` the towers go to ``cells_path`` (default: ``<path stem>.cells.parquet``
    next to ``path``). ``progress(users_done, rows_written)`` is called after each chunk.
    """
    cfg = (config or SynthConfig()).validated()
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    world = _World(cfg)
    rows = chunks = 0
    writer: pq.ParquetWriter | None = None
    users_done = 0
    try:
        for table in iter_synthetic(kind, cfg, world):
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
            rows += table.num_rows
            chunks += 1
            users_done = min(cfg.n_users, chunks * cfg.users_per_chunk)
            if progress is not None:
                progress(users_done, rows)
    finally:
        if writer is not None:
            writer.close()
    out_cells = None
    n_cells = 0
    if kind == "events":
        out_cells = Path(cells_path) if cells_path else default_cells_path(path)
        ct = cells_table(world)
        pq.write_table(ct, out_cells)
        n_cells = ct.num_rows
    end = pd.Timestamp(cfg.start).normalize() + pd.Timedelta(days=cfg.days)
    return SynthSummary(
        kind=kind,
        path=path,
        rows=rows,
        users=cfg.n_users,
        chunks=chunks,
        bytes=path.stat().st_size,
        seconds=time.perf_counter() - t0,
        tiles=world.tess.k,
        start=str(pd.Timestamp(cfg.start).date()),
        end=str(end.date()),
        cells_path=out_cells,
        cells=n_cells,
    )


def synth_trips(path: str | Path, **config: Any) -> SynthSummary:
    """Write synthetic one-row trips; keyword arguments are :class:`SynthConfig` fields."""
    return write_synthetic("trips", path, SynthConfig(**config))


def synth_trip_points(path: str | Path, **config: Any) -> SynthSummary:
    """Write synthetic trip points (uid, tid, datetime, lat, lng)."""
    return write_synthetic("trip-points", path, SynthConfig(**config))


def synth_events(
    path: str | Path, cells_path: str | Path | None = None, **config: Any
) -> SynthSummary:
    """Write synthetic CDR-like events (uid, datetime, cell_id) and the cells table."""
    return write_synthetic("events", path, SynthConfig(**config), cells_path=cells_path)


__all__ = [
    "DEFAULT_BOUNDS",
    "KINDS",
    "SynthConfig",
    "SynthSummary",
    "default_cells_path",
    "default_tessellation",
    "iter_synthetic",
    "synth_events",
    "synth_trip_points",
    "synth_trips",
    "write_synthetic",
]
