"""The record-level half of the mobility report, in SQL that DuckDB and Spark SQL both accept.

Input: a table of trip points ``uid, tid, datetime, lat, lng, tile`` (tile = tile index
0..k-1, -1 outside the tessellation). Every query returns ``(idx, n)`` rows whose ``idx`` is a
cell of a public domain; :func:`dense` turns them into one dense integer vector per analysis,
which is all the driver ever sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privmob.privacy.quantiles import Bins

from .config import MISSING_COLUMNS, ReportConfig


@dataclass(frozen=True)
class Dialect:
    """The few functions that differ between DuckDB and Spark SQL."""

    name: str = "duckdb"

    def epoch(self, expr: str) -> str:
        """Seconds since 1970 of a TIMESTAMP (as DOUBLE)."""
        if self.name == "spark":
            return f"CAST(unix_timestamp({expr}) AS DOUBLE)"
        return f"CAST(epoch({expr}) AS DOUBLE)"

    def weekday(self, expr: str) -> str:
        """0 = Monday .. 6 = Sunday."""
        if self.name == "spark":
            return f"((dayofweek({expr}) + 5) % 7)"
        return f"(isodow({expr}) - 1)"

    def keyed_hash(self, key: str, *cols: str) -> str:
        """A 64-bit keyed hash; the key is a fresh random secret per release."""
        parts = ", ".join(f"CAST({c} AS VARCHAR)" for c in cols)
        if self.name == "spark":
            parts = parts.replace("VARCHAR", "STRING")
            return f"xxhash64('{key}', {parts})"
        return f"hash(concat_ws('|', '{key}', {parts}))"


DUCKDB = Dialect("duckdb")
SPARK = Dialect("spark")


def _ts(value: Any) -> str:
    return f"TIMESTAMP '{value.isoformat(sep=' ')}'"


def haversine_km(lat1: str, lng1: str, lat2: str, lng2: str) -> str:
    h = (
        f"pow(sin(radians({lat2} - {lat1}) / 2), 2) + cos(radians({lat1})) * "
        f"cos(radians({lat2})) * pow(sin(radians({lng2} - {lng1}) / 2), 2)"
    )
    return f"(2 * 6371.0088 * asin(sqrt(least(1.0, {h}))))"


def trips_sql(points: str, cfg: ReportConfig, key: str, d: Dialect) -> str:
    """One row per kept trip: ends, tiles, times, ``in_period``; bounded to M per user.

    Rows without uid or tid cannot be attributed to a unit and are dropped (any count of them
    would have unbounded sensitivity). Under user-level privacy each user keeps at most M
    trips, chosen by a keyed hash of (key, uid, tid), independent of other users' data.
    """
    start, end = cfg.period
    bound = f"WHERE rn <= {cfg.max_trips}" if cfg.unit.value == "user" else ""
    return f"""
WITH ends AS (
  SELECT uid, tid,
    COUNT(*) AS n_points,
    MIN(datetime) AS start_time, MAX(datetime) AS end_time,
    MIN_BY(lat, datetime) AS o_lat, MIN_BY(lng, datetime) AS o_lng,
    MIN_BY(tile, datetime) AS o_tile,
    MAX_BY(lat, datetime) AS d_lat, MAX_BY(lng, datetime) AS d_lng,
    MAX_BY(tile, datetime) AS d_tile,
    MAX(CASE WHEN datetime IS NULL THEN 1 ELSE 0 END) AS miss_datetime,
    MAX(CASE WHEN lat IS NULL THEN 1 ELSE 0 END) AS miss_lat,
    MAX(CASE WHEN lng IS NULL THEN 1 ELSE 0 END) AS miss_lng
  FROM {points}
  WHERE uid IS NOT NULL AND tid IS NOT NULL
  GROUP BY uid, tid
), ranked AS (
  SELECT *, ROW_NUMBER() OVER (
    PARTITION BY uid ORDER BY {d.keyed_hash(key, "uid", "tid")}, tid) AS rn
  FROM ends
)
SELECT *,
  CASE WHEN start_time >= {_ts(start)} AND start_time < {_ts(end)} THEN 1 ELSE 0 END
    AS in_period,
  CASE WHEN n_points >= 2 AND start_time IS NOT NULL AND end_time > start_time
    AND o_lat IS NOT NULL AND d_lat IS NOT NULL THEN 1 ELSE 0 END AS complete
FROM ranked {bound}
"""


def ends_sql(trips: str) -> str:
    """Trip ends (origin and destination) of in-period trips: one row per point."""
    return f"""
SELECT uid, tid, start_time AS t, o_lat AS lat, o_lng AS lng, o_tile AS tile, 0 AS is_end
FROM {trips} WHERE in_period = 1 AND o_lat IS NOT NULL
UNION ALL
SELECT uid, tid, end_time AS t, d_lat AS lat, d_lng AS lng, d_tile AS tile, 1 AS is_end
FROM {trips} WHERE in_period = 1 AND n_points >= 2 AND d_lat IS NOT NULL
"""


def users_sql(ends: str) -> str:
    """Per-user aggregates over trip ends: visits, distinct tiles, radius of gyration (km),
    normalised mobility entropy."""
    hav = haversine_km("e.lat", "e.lng", "c.clat", "c.clng")
    return f"""
WITH c AS (
  SELECT uid, AVG(lat) AS clat, AVG(lng) AS clng, COUNT(*) AS n_visits,
    COUNT(DISTINCT CASE WHEN tile >= 0 THEN tile END) AS n_tiles
  FROM {ends} GROUP BY uid
), rog AS (
  SELECT e.uid, sqrt(AVG(pow({hav}, 2))) AS rog
  FROM {ends} e JOIN c ON e.uid = c.uid GROUP BY e.uid
), tc AS (
  SELECT uid, tile, COUNT(*) AS cnt FROM {ends} GROUP BY uid, tile
), ent AS (
  SELECT tc.uid,
    CASE WHEN MAX(c.n_visits) > 1 THEN
      (ln(MAX(c.n_visits)) - SUM(tc.cnt * ln(tc.cnt)) / MAX(c.n_visits)) / ln(MAX(c.n_visits))
    ELSE 0.0 END AS entropy
  FROM tc JOIN c ON tc.uid = c.uid GROUP BY tc.uid
)
SELECT c.uid, c.n_visits, c.n_tiles, rog.rog, least(ent.entropy, 0.999999) AS entropy
FROM c JOIN rog ON c.uid = rog.uid JOIN ent ON c.uid = ent.uid
"""


def _hist(table: str, expr: str, bins: Bins, where: str = "1 = 1") -> str:
    return (
        f"SELECT {bins.sql_index(expr)} AS idx, COUNT(*) AS n FROM {table} WHERE {where} GROUP BY 1"
    )


def _window_index(hour: str, tw: tuple[int, ...]) -> str:
    cases = " ".join(
        f"WHEN {hour} >= {tw[i]} AND {hour} < {tw[i + 1]} THEN {i}" for i in range(len(tw) - 1)
    )
    return f"CASE {cases} ELSE {len(tw) - 1} END"


def _is_weekend(ts: str, d: Dialect) -> str:
    return f"CASE WHEN {d.weekday(ts)} >= 5 THEN 1 ELSE 0 END"


def _time_bin(ts: str, cfg: ReportConfig, d: Dialect, n_bins: int) -> str:
    start = cfg.period[0]
    if cfg.time_resolution == "month":
        raw = f"((year({ts}) - {start.year}) * 12 + month({ts}) - {start.month})"
    else:
        secs = 86400 if cfg.time_resolution == "day" else 7 * 86400
        raw = f"CAST(FLOOR(({d.epoch(ts)} - {d.epoch(_ts(start))}) / {secs}) AS BIGINT)"
    # out of period (or missing time) -> the outliers cell n_bins
    return f"CASE WHEN in_period = 1 THEN {raw} ELSE {n_bins} END"


def queries(cfg: ReportConfig, k: int, n_time_bins: int, d: Dialect) -> dict[str, tuple[str, int]]:
    """For each analysis, the SQL giving (idx, n) and the dense domain size.

    Tables used: ``pm_trips`` (bounded trips), ``pm_ends`` (trip ends), ``pm_users``.
    """
    tw = cfg.time_windows
    nw = len(tw)
    q: dict[str, tuple[str, int]] = {}
    # dataset statistics: [users, complete trips, incomplete trips]
    q["users"] = ("SELECT 0 AS idx, COUNT(DISTINCT uid) AS n FROM pm_trips WHERE in_period = 1", 1)
    q["trip_kinds"] = (
        "SELECT 1 - complete AS idx, COUNT(*) AS n FROM pm_trips WHERE in_period = 1 GROUP BY 1",
        2,
    )
    miss = " UNION ALL ".join(
        f"SELECT {i} AS idx, SUM(miss_{c}) AS n FROM pm_trips"
        for i, c in enumerate(MISSING_COLUMNS)
    )
    q["missing_values"] = (miss, len(MISSING_COLUMNS))
    q["trips_over_time"] = (
        f"SELECT {_time_bin('start_time', cfg, d, n_time_bins)} AS idx, COUNT(*) AS n "
        "FROM pm_trips GROUP BY 1",
        n_time_bins + 1,
    )
    q["trips_per_weekday"] = (
        f"SELECT {d.weekday('start_time')} AS idx, COUNT(*) AS n FROM pm_trips "
        "WHERE in_period = 1 GROUP BY 1",
        7,
    )
    # (is_end, weekend, hour) -> is_end*48 + weekend*24 + hour
    q["trips_per_hour"] = (
        f"SELECT is_end * 48 + {_is_weekend('t', d)} * 24 + hour(t) AS idx, COUNT(*) AS n "
        "FROM pm_ends WHERE t IS NOT NULL GROUP BY 1",
        96,
    )
    q["visits_per_tile"] = (
        f"SELECT CASE WHEN tile >= 0 AND tile < {k} THEN tile ELSE {k} END AS idx, "
        "COUNT(*) AS n FROM pm_ends GROUP BY 1",
        k + 1,
    )
    q["visits_per_time_tile"] = (
        f"SELECT CASE WHEN tile >= 0 AND tile < {k} AND t IS NOT NULL THEN "
        f"(tile * 2 + {_is_weekend('t', d)}) * {nw} + {_window_index('hour(t)', tw)} "
        f"ELSE {k * 2 * nw} END AS idx, COUNT(*) AS n FROM pm_ends GROUP BY 1",
        k * 2 * nw + 1,
    )
    q["od_flows"] = (
        f"SELECT CASE WHEN o_tile >= 0 AND o_tile < {k} AND d_tile >= 0 AND d_tile < {k} "
        f"THEN o_tile * {k} + d_tile ELSE {k * k} END AS idx, COUNT(*) AS n "
        "FROM pm_trips WHERE in_period = 1 AND complete = 1 GROUP BY 1",
        k * k + 1,
    )
    tt = f"({d.epoch('end_time')} - {d.epoch('start_time')}) / 60.0"
    q["travel_time"] = (
        _hist("pm_trips", tt, cfg.bins("travel_time"), "in_period = 1 AND complete = 1"),
        cfg.bins("travel_time").size,
    )
    jl = haversine_km("o_lat", "o_lng", "d_lat", "d_lng")
    q["jump_length"] = (
        _hist("pm_trips", jl, cfg.bins("jump_length"), "in_period = 1 AND complete = 1"),
        cfg.bins("jump_length").size,
    )
    per_user = "(SELECT uid, COUNT(*) AS trips FROM pm_trips WHERE in_period = 1 GROUP BY uid) u"
    q["trips_per_user"] = (
        _hist(per_user, "trips", cfg.bins("trips_per_user")),
        cfg.bins("trips_per_user").size,
    )
    gaps = (
        f"(SELECT ({d.epoch('start_time')} - {d.epoch('prev_end')}) / 3600.0 AS gap FROM "
        "(SELECT start_time, LAG(end_time) OVER (PARTITION BY uid ORDER BY start_time, tid) "
        "AS prev_end FROM pm_trips WHERE in_period = 1 AND start_time IS NOT NULL) s "
        "WHERE prev_end IS NOT NULL) g"
    )
    q["time_between_trips"] = (
        _hist(gaps, "gap", cfg.bins("time_between_trips")),
        cfg.bins("time_between_trips").size,
    )
    for name, col in (
        ("radius_of_gyration", "rog"),
        ("user_tile_count", "n_tiles"),
        ("mobility_entropy", "entropy"),
    ):
        q[name] = (_hist("pm_users", col, cfg.bins(name)), cfg.bins(name).size)
    return q


def dense(rows: list[tuple[Any, Any]], size: int) -> np.ndarray:
    """Scatter (idx, n) rows into a dense int64 vector over the public domain of ``size``.

    Indices outside 0..size-1 cannot occur by construction; they raise rather than vanish.
    """
    out = np.zeros(size, dtype=np.int64)
    for idx, n in rows:
        if idx is None or n is None:
            continue
        i = int(idx)
        if not 0 <= i < size:
            raise AssertionError(f"domain index {i} outside 0..{size - 1}")
        out[i] += int(n)
    return out
