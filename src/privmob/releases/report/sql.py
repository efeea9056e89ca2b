"""The record-level half of the mobility report, in SQL that DuckDB and Spark SQL both accept.

Input: the canonical trip points view of :func:`privmob.data.sources.load_trip_points`,
``uid, tid, time, lat, lng, tile`` (tile = tile index 0..k-1, -1 outside the tessellation).
Every query returns ``(i0, n)`` rows whose ``i0`` is a cell of a public domain;
:func:`privmob.engine.dense_counts` turns them into one dense integer vector per analysis,
which is all the driver ever sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privmob.engine.dialect import Dialect
from privmob.prepare.bounding import bound_per_user
from privmob.privacy.quantiles import Bins

from .config import MISSING_COLUMNS, ReportConfig


def _ts(value: Any, d: Dialect) -> str:
    return d.timestamp_literal(value.isoformat(sep=" "))


def haversine_km(lat1: str, lng1: str, lat2: str, lng2: str, cos_lat2: str | None = None) -> str:
    """Great-circle distance in km; ``cos_lat2``: a column holding ``cos(radians(lat2))``
    already (the same float, computed once per user instead of once per row)."""
    cos2 = cos_lat2 or f"cos(radians({lat2}))"
    h = (
        f"pow(sin(radians({lat2} - {lat1}) / 2), 2) + cos(radians({lat1})) * "
        f"{cos2} * pow(sin(radians({lng2} - {lng1}) / 2), 2)"
    )
    return f"(2 * 6371.0088 * asin(sqrt(least(1.0, {h}))))"


TRIP_COLUMNS = (
    "uid",
    "tid",
    "n_points",
    "start_time",
    "end_time",
    "o_lat",
    "o_lng",
    "o_tile",
    "d_lat",
    "d_lng",
    "d_tile",
    "miss_datetime",
    "miss_lat",
    "miss_lng",
)


def trips_sql(points: str, cfg: ReportConfig, key: int, d: Dialect) -> str:
    """One row per kept trip: ends, tiles, times, ``in_period``; bounded to M per user.

    Rows without uid or tid cannot be attributed to a unit and are dropped (any count of them
    would have unbounded sensitivity). Under user-level privacy each user keeps at most M
    trips, chosen by a keyed hash of (key, uid, tid), independent of other users' data.
    """
    start, end = cfg.period
    ends = f"""(
  SELECT uid, tid,
    COUNT(*) AS n_points,
    MIN(time) AS start_time, MAX(time) AS end_time,
    MIN_BY(lat, time) AS o_lat, MIN_BY(lng, time) AS o_lng,
    MIN_BY(tile, time) AS o_tile,
    MAX_BY(lat, time) AS d_lat, MAX_BY(lng, time) AS d_lng,
    MAX_BY(tile, time) AS d_tile,
    CASE WHEN COUNT(*) > COUNT(time) THEN 1 ELSE 0 END AS miss_datetime,
    CASE WHEN COUNT(*) > COUNT(lat) THEN 1 ELSE 0 END AS miss_lat,
    CASE WHEN COUNT(*) > COUNT(lng) THEN 1 ELSE 0 END AS miss_lng
  FROM {points}
  WHERE uid IS NOT NULL AND tid IS NOT NULL
  GROUP BY uid, tid)"""
    if cfg.unit.value == "user":
        ends = f"({bound_per_user(ends, max_units=cfg.max_trips, key=key, dialect=d)})"
    return f"""
SELECT {", ".join(TRIP_COLUMNS)},
  CASE WHEN start_time >= {_ts(start, d)} AND start_time < {_ts(end, d)} THEN 1 ELSE 0 END
    AS in_period,
  CASE WHEN n_points >= 2 AND start_time IS NOT NULL AND end_time > start_time
    AND o_lat IS NOT NULL AND d_lat IS NOT NULL THEN 1 ELSE 0 END AS complete
FROM {ends} AS t_
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
    normalised mobility entropy. Visits, tiles and entropy come from one (user, tile) count;
    the radius needs the user's centre first, then a second pass over the ends."""
    hav = haversine_km("e.lat", "e.lng", "c.clat", "c.clng", "c.cos_clat")
    return f"""
WITH tc AS (
  SELECT uid, tile, COUNT(*) AS cnt FROM {ends} GROUP BY uid, tile
), u AS (
  SELECT uid, CAST(SUM(cnt) AS BIGINT) AS n_visits, COUNT_IF(tile >= 0) AS n_tiles,
    SUM(cnt * ln(cnt)) AS cnt_ln_cnt
  FROM tc GROUP BY uid
), c AS (
  SELECT uid, clat, clng, cos(radians(clat)) AS cos_clat
  FROM (SELECT uid, AVG(lat) AS clat, AVG(lng) AS clng FROM {ends} GROUP BY uid) AS a_
), rog AS (
  SELECT e.uid, sqrt(AVG(pow({hav}, 2))) AS rog
  FROM {ends} e JOIN c ON e.uid = c.uid GROUP BY e.uid
)
SELECT u.uid, u.n_visits, u.n_tiles, rog.rog,
  least(CASE WHEN u.n_visits > 1 THEN
      (ln(u.n_visits) - u.cnt_ln_cnt / u.n_visits) / ln(u.n_visits)
    ELSE 0.0 END, 0.999999) AS entropy
FROM u JOIN rog ON u.uid = rog.uid
"""


@dataclass(frozen=True)
class Count:
    """One term of a count vector: ``SELECT i0, COUNT(*) FROM source WHERE where GROUP BY i0``.

    ``i0`` is never NULL on a row where ``where`` holds (every such row lands in a cell of the
    public domain, outliers included)."""

    source: str
    i0: str
    where: str = "1 = 1"

    def sql(self) -> str:
        return (
            f"SELECT {self.i0} AS i0, COUNT(*) AS n FROM {self.source} WHERE {self.where} "
            "GROUP BY i0"
        )


def _hist(table: str, expr: str, bins: Bins, where: str = "1 = 1") -> Count:
    return Count(table, bins.sql_index(expr), where)


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
        since = f"{d.epoch_seconds(ts)} - {d.epoch_seconds(_ts(start, d))}"
        raw = f"CAST(FLOOR(({since}) / {secs}) AS BIGINT)"
    # out of period (or missing time) -> the outliers cell n_bins
    return f"CASE WHEN in_period = 1 THEN {raw} ELSE {n_bins} END"


def queries(cfg: ReportConfig, k: int, n_time_bins: int, d: Dialect) -> dict[str, tuple[str, int]]:
    """For each analysis, the SQL giving (i0, n) and the dense domain size (the terms of
    :func:`count_terms` as one query each, their terms joined by UNION ALL)."""
    return {
        name: (" UNION ALL ".join(t.sql() for t in terms), size)
        for name, (terms, size) in count_terms(cfg, k, n_time_bins, d).items()
    }


def count_terms(
    cfg: ReportConfig, k: int, n_time_bins: int, d: Dialect
) -> dict[str, tuple[list[Count], int]]:
    """For each analysis, its count terms (:class:`Count`) and the dense domain size.

    Relations used: ``pm_trips`` (bounded trips), ``pm_ends`` (a view of their ends), ``pm_users``.
    """
    tw = cfg.time_windows
    nw = len(tw)
    q: dict[str, tuple[list[Count], int]] = {}
    in_period = "in_period = 1"
    per_user = "(SELECT uid, COUNT(*) AS trips FROM pm_trips WHERE in_period = 1 GROUP BY uid) u"
    # dataset statistics: [users, complete trips, incomplete trips]; the users with a trip in
    # the period are the rows of the per-user trip counts (trips_per_user reads them too)
    q["users"] = ([Count(per_user, "0")], 1)
    q["trip_kinds"] = ([Count("pm_trips", "1 - complete", in_period)], 2)
    q["missing_values"] = (
        [Count("pm_trips", str(i), f"miss_{c} = 1") for i, c in enumerate(MISSING_COLUMNS)],
        len(MISSING_COLUMNS),
    )
    q["trips_over_time"] = (
        [Count("pm_trips", _time_bin("start_time", cfg, d, n_time_bins))],
        n_time_bins + 1,
    )
    q["trips_per_weekday"] = ([Count("pm_trips", d.weekday("start_time"), in_period)], 7)
    # (is_end, weekend, hour) -> is_end*48 + weekend*24 + hour
    q["trips_per_hour"] = (
        [
            Count(
                "pm_ends",
                f"is_end * 48 + {_is_weekend('t', d)} * 24 + {d.hour('t')}",
                "t IS NOT NULL",
            )
        ],
        96,
    )
    q["visits_per_tile"] = (
        [Count("pm_ends", f"CASE WHEN tile >= 0 AND tile < {k} THEN tile ELSE {k} END")],
        k + 1,
    )
    q["visits_per_time_tile"] = (
        [
            Count(
                "pm_ends",
                f"CASE WHEN tile >= 0 AND tile < {k} AND t IS NOT NULL THEN "
                f"(tile * 2 + {_is_weekend('t', d)}) * {nw} + {_window_index(d.hour('t'), tw)} "
                f"ELSE {k * 2 * nw} END",
            )
        ],
        k * 2 * nw + 1,
    )
    # trips within one tile are left out unless cfg.same_tile says "include" (od's rule)
    same = (
        ""
        if cfg.same_tile == "include"
        else f" AND NOT (o_tile = d_tile AND o_tile >= 0 AND o_tile < {k})"
    )
    q["od_flows"] = (
        [
            Count(
                "pm_trips",
                f"CASE WHEN o_tile >= 0 AND o_tile < {k} AND d_tile >= 0 AND d_tile < {k} "
                f"THEN o_tile * {k} + d_tile ELSE {k * k} END",
                f"in_period = 1 AND complete = 1{same}",
            )
        ],
        k * k + 1,
    )
    tt = f"({d.epoch_seconds('end_time')} - {d.epoch_seconds('start_time')}) / 60.0"
    q["travel_time"] = (
        [_hist("pm_trips", tt, cfg.bins("travel_time"), "in_period = 1 AND complete = 1")],
        cfg.bins("travel_time").size,
    )
    jl = haversine_km("o_lat", "o_lng", "d_lat", "d_lng")
    q["jump_length"] = (
        [_hist("pm_trips", jl, cfg.bins("jump_length"), "in_period = 1 AND complete = 1")],
        cfg.bins("jump_length").size,
    )
    q["trips_per_user"] = (
        [_hist(per_user, "trips", cfg.bins("trips_per_user"))],
        cfg.bins("trips_per_user").size,
    )
    gaps = (
        f"(SELECT ({d.epoch_seconds('start_time')} - {d.epoch_seconds('prev_end')}) / 3600.0 "
        "AS gap FROM "
        "(SELECT start_time, LAG(end_time) OVER (PARTITION BY uid ORDER BY start_time, tid) "
        "AS prev_end FROM pm_trips WHERE in_period = 1 AND start_time IS NOT NULL) s "
        "WHERE prev_end IS NOT NULL) g"
    )
    q["time_between_trips"] = (
        [_hist(gaps, "gap", cfg.bins("time_between_trips"))],
        cfg.bins("time_between_trips").size,
    )
    for name, col in (
        ("radius_of_gyration", "rog"),
        ("user_tile_count", "n_tiles"),
        ("mobility_entropy", "entropy"),
    ):
        q[name] = ([_hist("pm_users", col, cfg.bins(name))], cfg.bins(name).size)
    return q
