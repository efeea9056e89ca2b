"""The model behind :mod:`privmob.data.synth`: tiles, anchors, towers and trips of one chunk.

See :mod:`privmob.data.synth` for the description of the model and the public API. Synthetic
input generation, not a release: numpy's seeded generator is fine here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from privmob.data.grids import grid_with_about
from privmob.data.tessellation import Tessellation
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError

if TYPE_CHECKING:
    from scipy.spatial import cKDTree


#: Default study area when no tessellation is given: central New York City.
DEFAULT_BOUNDS = (-74.05, 40.60, -73.75, 40.90)
DEFAULT_GRID_CELLS = 256

US = 1_000_000
DAY_US = 86_400 * US
WEEKDAY_WEIGHT = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.65, 0.55])  # Mon..Sun
CANDIDATES = 8


def default_tessellation(n_cells: int = DEFAULT_GRID_CELLS) -> Tessellation:
    """A square grid of about ``n_cells`` cells over central New York City."""
    return grid_with_about(DEFAULT_BOUNDS, n_cells)


class Alias:
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


def sorted_by_user_time(user: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Order by (user, time) with one int64 argsort when the combined key fits."""
    lo = int(when.min()) if len(when) else 0
    span = (int(when.max()) - lo + 1) if len(when) else 1
    if len(user) and (int(user.max()) + 1) * span < 2**62:
        return np.argsort(user.astype(np.int64) * span + (when - lo), kind="stable")
    return np.lexsort((when, user))


# -- the static world: tiles, weights, towers ----------------------------------------------
class World:
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
        self.pop_alias, self.jobs_alias = Alias(self.pop), Alias(self.jobs)
        self.decay_km = cfg.decay_km or max(0.4 * radius, 1e-3)
        self.sampler = PointSampler(self.tess)
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
            from scipy.spatial import cKDTree  # lazy: every `privmob` command imports this module

            self.tower_tree = cKDTree(self._tower_xy)
        return np.asarray(self.tower_tree.query(self.to_km(lng, lat))[1].astype(np.int32))

    def id_array(self, idx: np.ndarray) -> pa.Array:
        vals = self.tile_ids[idx]
        return pa.array(vals.astype(np.int64) if self.int_ids else vals.astype(str))


class PointSampler:
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
class Trips:
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


def local_to_utc_us(local_us: np.ndarray, timezone: str) -> np.ndarray:
    if timezone == "UTC":
        return local_us
    idx = pd.DatetimeIndex(local_us.astype("datetime64[us]"))
    utc = idx.tz_localize(timezone, ambiguous=False, nonexistent="shift_forward").tz_convert("UTC")
    return utc.tz_localize(None).to_numpy().astype("datetime64[us]").astype(np.int64)


def anchors(world: World, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
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


def generate_trips(
    world: World,
    cfg: SynthConfig,
    a: dict[str, np.ndarray],
    rng: np.random.Generator,
    day0_us: int,
    dow0: int,
) -> Trips:
    n = len(a["home"])
    s = cfg.trips_sigma
    mu = math.log(cfg.mean_trips_per_user) - s * s / 2
    per_user = np.maximum(1, np.rint(rng.lognormal(mu, s, n))).astype(np.int64)
    user = np.repeat(np.arange(n), per_user)
    m = len(user)
    dow = (dow0 + np.arange(cfg.days)) % 7
    dw = WEEKDAY_WEIGHT[dow]
    day = rng.choice(cfg.days, m, p=dw / dw.sum())
    weekend = dow[day] >= 5
    u = rng.random(m)
    p_commute = np.where(weekend, 0.04, 0.30)
    to_work = u < p_commute
    to_home = (u >= p_commute) & (u < 2 * p_commute)
    other = ~(to_work | to_home)
    # departure hour: ~N(8, 0.9) to work, ~N(17.75, 1.2) home, ~N(13 or 14, 3.5) otherwise
    mean = np.where(to_work, 8.0, np.where(to_home, 17.75, np.where(weekend, 14.0, 13.0)))
    sd = np.where(to_work, 0.9, np.where(to_home, 1.2, 3.5))
    hour = mean + sd * rng.standard_normal(m)
    anytime = np.flatnonzero(rng.random(m) < 0.03)  # 3% at a uniformly random time
    hour[anytime] = rng.uniform(0, 24, len(anytime))
    hour %= 24.0

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
    cand = world.pop_alias.draw(rng, (len(oi), CANDIDATES))
    dist = np.sqrt(((world.xy[cand] - world.xy[o][:, None, :]) ** 2).sum(-1))
    w = np.exp(-dist / world.decay_km)
    w /= w.sum(1, keepdims=True)
    pick = (np.cumsum(w, 1) < rng.random(len(oi))[:, None]).sum(1)
    origin[oi] = o
    destination[oi] = cand[np.arange(len(oi)), np.minimum(pick, CANDIDATES - 1)]

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

    local = day0_us + day * DAY_US + (hour * 3600 * US).astype(np.int64)
    start = local_to_utc_us(local, cfg.timezone)
    end = start + (minutes * 60 * US).astype(np.int64)
    order = sorted_by_user_time(user, start)
    user = user[order]
    offsets = np.concatenate([[0], np.cumsum(per_user)[:-1]])
    tid = (np.arange(m) - offsets[user]).astype(np.int64)
    return Trips(
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


@dataclass(frozen=True)
class SynthConfig:
    """Everything that determines a synthetic dataset (same config -> same bytes of data).

    ``mean_trips_per_user`` is over the whole period. ``chunk_users`` (default: about half a
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
        return max(1_000, int(500_000 / self.mean_trips_per_user))
