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
the work tower on weekday office hours, at trip ends and along trips).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from privmob.data.synth_model import (
    DAY_US,
    DEFAULT_BOUNDS,
    US,
    SynthConfig,
    Trips,
    World,
    anchors,
    default_tessellation,
    generate_trips,
    local_to_utc_us,
    sorted_by_user_time,
)
from privmob.errors import ConfigError

Kind = Literal["trips", "trip-points", "events"]
KINDS: tuple[str, ...] = ("trips", "trip-points", "events")

TS = pa.timestamp("us", tz="UTC")


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


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(us, type=pa.int64()).cast(TS)


def _trips_table(world: World, cfg: SynthConfig, t: Trips, uids: np.ndarray) -> pa.Table:
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
    world: World, cfg: SynthConfig, t: Trips, uids: np.ndarray, rng: np.random.Generator
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
    world: World,
    cfg: SynthConfig,
    a: dict[str, np.ndarray],
    t: Trips,
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
    local = day0_us + day * DAY_US + (hour * 3600 * US).astype(np.int64)
    when = local_to_utc_us(local, cfg.timezone)
    # trip ends: 70% of departures and arrivals leave a record at the nearest tower, and
    # Poisson(0.5) records per trip on the way (a point on the straight line, time interpolated)
    so = rng.random(len(t.user)) < 0.7
    sd = rng.random(len(t.user)) < 0.7
    on_way = np.repeat(np.arange(len(t.user)), rng.poisson(0.5, len(t.user)))
    f = rng.random(len(on_way))
    w_lng = t.o_lng[on_way] + f * (t.d_lng[on_way] - t.o_lng[on_way])
    w_lat = t.o_lat[on_way] + f * (t.d_lat[on_way] - t.o_lat[on_way])
    w_time = t.start_us[on_way] + (f * (t.end_us[on_way] - t.start_us[on_way])).astype(np.int64)
    users = np.concatenate([user, t.user[so], t.user[sd], t.user[on_way]])
    times = np.concatenate([when, t.start_us[so], t.end_us[sd], w_time])
    towers = np.concatenate(
        [
            tower,
            world.nearest_tower(t.o_lng[so], t.o_lat[so]),
            world.nearest_tower(t.d_lng[sd], t.d_lat[sd]),
            world.nearest_tower(w_lng, w_lat),
        ]
    )
    order = sorted_by_user_time(users, times)
    return pa.table(
        {
            "uid": pa.array(uids[users[order]]),
            "datetime": _ts(times[order]),
            "cell_id": pa.array(towers[order]),
        }
    )


def cells_table(world: World) -> pa.Table:
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
    kind: Kind, config: SynthConfig, world: World | None = None
) -> Iterator[pa.Table]:
    """Yield the dataset as Arrow tables, one per chunk of users (bounded memory)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    cfg = config.validated()
    if world is None:
        world = World(cfg)
    day0 = pd.Timestamp(cfg.start).normalize()
    day0_us = int(day0.value // 1000)
    dow0 = int(day0.day_of_week)
    step = cfg.users_per_chunk
    for c, lo in enumerate(range(0, cfg.n_users, step)):
        hi = min(cfg.n_users, lo + step)
        rng = np.random.default_rng([cfg.seed, 1, c])
        uids = np.arange(lo, hi, dtype=np.int64)
        a = anchors(world, hi - lo, rng)
        t = generate_trips(world, cfg, a, rng, day0_us, dow0)
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
    The data go to ``<path>.partial`` first and are renamed to ``path`` (replacing it) only
    once complete, so an interrupted run leaves no truncated file under the final name.
    """
    cfg = (config or SynthConfig()).validated()
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    world = World(cfg)
    rows = chunks = 0
    writer: pq.ParquetWriter | None = None
    users_done = 0
    partial = path.with_name(path.name + ".partial")
    try:
        for table in iter_synthetic(kind, cfg, world):
            if writer is None:
                writer = pq.ParquetWriter(partial, table.schema, compression="zstd")
            writer.write_table(table)
            rows += table.num_rows
            chunks += 1
            users_done = min(cfg.n_users, chunks * cfg.users_per_chunk)
            if progress is not None:
                progress(users_done, rows)
    except BaseException:
        if writer is not None:
            writer.close()
        partial.unlink(missing_ok=True)
        raise
    assert writer is not None  # n_users >= 1 gives at least one chunk
    writer.close()
    partial.replace(path)
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
