"""The record-level half of the mobility report, in SQL that DuckDB and Spark SQL both accept.

Input: the canonical trip points view of :func:`privmob.data.sources.load_trip_points`,
``uid, tid, time, lat, lng, tile`` (tile = tile index 0..k-1, -1 outside the tessellation).
Every query returns ``(i0, n)`` rows whose ``i0`` is a cell of a public domain;
:func:`privmob.engine.dense_counts` turns them into one dense integer vector per analysis,
which is all the driver ever sees.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from functools import partial

from privmob.domain import Period
from privmob.engine.dialect import Dialect
from privmob.prepare.bounding import bound_per_user
from privmob.privacy.quantiles import Bins
from privmob.releases.counts import CountTerm, CountVector
from privmob.releases.dimensions import Dimension, dimension, haversine_km

from .config import MISSING_COLUMNS, ReportConfig


def _ts(value: datetime, d: Dialect) -> str:
    return d.timestamp_literal(value.isoformat(sep=" "))


TRIP_COLUMNS = (
    "uid",
    "tid",
    "n_points",
    "start_time",
    "end_time",
    "o_lat",
    "o_lng",
    "origin",
    "d_lat",
    "d_lng",
    "destination",
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
    MIN_BY(tile, time) AS origin,
    MAX_BY(lat, time) AS d_lat, MAX_BY(lng, time) AS d_lng,
    MAX_BY(tile, time) AS destination,
    CASE WHEN COUNT(*) > COUNT(time) THEN 1 ELSE 0 END AS miss_datetime,
    CASE WHEN COUNT(*) > COUNT(lat) THEN 1 ELSE 0 END AS miss_lat,
    CASE WHEN COUNT(*) > COUNT(lng) THEN 1 ELSE 0 END AS miss_lng
  FROM {points}
  WHERE uid IS NOT NULL AND tid IS NOT NULL
  GROUP BY uid, tid)"""
    if cfg.unit.value == "user":
        # only the users above M are ranked where the dialect says so (the same trips kept;
        # Spark ranks all, where the count and its join would be a shuffle each)
        bounded = bound_per_user(
            ends, max_units=cfg.max_trips, key=key, dialect=d,
            rank_above_bound_only=d.ranks_above_bound_only,
        )  # fmt: skip
        ends = f"({bounded})"
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
SELECT uid, tid, start_time AS t, o_lat AS lat, o_lng AS lng, origin AS tile, 0 AS is_end
FROM {trips} WHERE in_period = 1 AND o_lat IS NOT NULL
UNION ALL
SELECT uid, tid, end_time AS t, d_lat AS lat, d_lng AS lng, destination AS tile, 1 AS is_end
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


def _hist(table: str, expr: str, bins: Bins, where: str = "1 = 1") -> CountTerm:
    return CountTerm(table, bins.sql_index(expr), where)


# -- the report's own dimensions (the template's vocabulary gives tile, origin, destination,
# hour and weekday); each maps a row to its label's index, or to -1 (the outliers cell)


def _trip_end() -> Dimension:
    """Which end of a trip a trip end is (``pm_ends.is_end``)."""
    return Dimension("end", ("start", "end"), lambda _t, _d, _k: "is_end")


def _day_type() -> Dimension:
    """Weekday or weekend (Saturday and Sunday) of the time; -1 without a time."""

    def sql(t: str, d: Dialect, _k: int) -> str:
        wd = d.weekday(t)
        return f"CASE WHEN {wd} >= 5 THEN 1 WHEN {wd} < 5 THEN 0 ELSE -1 END"

    return Dimension("day_type", ("weekday", "weekend"), sql)


def _time_window(cfg: ReportConfig) -> Dimension:
    """The declared time window of the hour (the last one wraps around midnight)."""
    tw = cfg.time_windows

    def sql(t: str, d: Dialect, _k: int) -> str:
        hour = d.hour(t)
        cases = " ".join(
            f"WHEN {hour} >= {tw[i]} AND {hour} < {tw[i + 1]} THEN {i}" for i in range(len(tw) - 1)
        )
        return f"CASE {cases} WHEN {hour} IS NOT NULL THEN {len(tw) - 1} ELSE -1 END"

    return Dimension("time_window", tuple(cfg.window_labels), sql)


def _trip_kind() -> Dimension:
    return Dimension("trip_kind", ("complete", "incomplete"), lambda _t, _d, _k: "1 - complete")


def _time_bin(cfg: ReportConfig, n_bins: int) -> Dimension:
    """The *trips over time* bin of the time (day, week or month from the period's length);
    -1 for a trip outside the period (or without a time)."""
    start = cfg.period[0]

    def sql(ts: str, d: Dialect, _k: int) -> str:
        if cfg.time_resolution == "month":
            raw = f"((year({ts}) - {start.year}) * 12 + month({ts}) - {start.month})"
        else:
            secs = 86400 if cfg.time_resolution == "day" else 7 * 86400
            since = f"{d.epoch_seconds(ts)} - {d.epoch_seconds(_ts(start, d))}"
            raw = f"CAST(FLOOR(({since}) / {secs}) AS BIGINT)"
        return f"CASE WHEN in_period = 1 THEN {raw} ELSE -1 END"

    return Dimension("time_bin", tuple(range(n_bins)), sql)  # bin starts: build.time_bins


def queries(cfg: ReportConfig, k: int, n_time_bins: int, d: Dialect) -> dict[str, tuple[str, int]]:
    """For each analysis, the SQL giving (i0, n) and the dense domain size (the terms of
    :func:`count_terms` as one query each, their terms joined by UNION ALL)."""
    return {
        name: (" UNION ALL ".join(t.sql() for t in terms), size)
        for name, (terms, size) in count_terms(cfg, k, n_time_bins, d).items()
    }


def count_vectors(cfg: ReportConfig, k: int, n_time_bins: int) -> dict[str, CountVector]:
    """The report's count vectors of the count template's shape (:class:`CountVector`): one
    cell per record over the product of public dimensions, the outliers cell last.

    Relations used: ``pm_trips`` (bounded trips), ``pm_ends`` (a view of their ends) and the
    users with a trip in the period (the rows of the per-user trip counts).
    """
    ids = range(k)  # the tiles' indexes (the labels only give the size here)
    tile, origin, destination, hour, weekday = (
        dimension(name, ids, Period())
        for name in ("tile", "origin", "destination", "hour", "weekday")
    )
    trips = partial(CountVector, "pm_trips", time="start_time", k=k)
    ends = partial(CountVector, "pm_ends", time="t", k=k)
    in_period = "in_period = 1"
    # trips within one tile are left out unless cfg.same_tile says "include" (od's rule)
    same = (
        ""
        if cfg.same_tile == "include"
        else f" AND NOT (origin = destination AND origin >= 0 AND origin < {k})"
    )
    return {
        # dataset statistics: users, [complete trips, incomplete trips]
        "users": CountVector(PER_USER, (), outliers=False),
        "trip_kinds": trips((_trip_kind(),), where=in_period, outliers=False),
        "trips_over_time": trips((_time_bin(cfg, n_time_bins),)),
        "trips_per_weekday": trips((weekday,), where=in_period, outliers=False),
        # (is_end, weekend, hour) -> is_end * 48 + weekend * 24 + hour
        "trips_per_hour": ends(
            (_trip_end(), _day_type(), hour), where="t IS NOT NULL", outliers=False
        ),
        "visits_per_tile": ends((tile,)),
        "visits_per_time_tile": ends((tile, _day_type(), _time_window(cfg))),
        "od_flows": trips((origin, destination), where=f"in_period = 1 AND complete = 1{same}"),
    }


#: the users with a trip in the period, with their number of trips
PER_USER = "(SELECT uid, COUNT(*) AS trips FROM pm_trips WHERE in_period = 1 GROUP BY uid) u"


def cap_per_cell(od: CountVector, cap: int, key: int, d: Dialect) -> CountVector:
    """``od`` counting at most ``cap`` of a user's trips in any one OD cell: the rows it counts,
    ranked within (user, origin, destination) by the keyed hash of (key, uid, tid) that bounds
    trips per user (:func:`~privmob.prepare.bounding.bound_per_user`), the first ``cap`` kept."""
    rows = f"(SELECT * FROM {od.source} WHERE {od.where})"
    capped = bound_per_user(
        rows, max_units=cap, key=key, dialect=d, partition=("origin", "destination")
    )
    return replace(od, source=f"({capped}) AS od_capped_", where="1 = 1")


def count_terms(
    cfg: ReportConfig, k: int, n_time_bins: int, d: Dialect, key: int | None = None
) -> dict[str, tuple[list[CountTerm], int]]:
    """For each analysis, its count terms (:class:`~privmob.releases.counts.CountTerm`) and the
    dense domain size: the count vectors of :func:`count_vectors` (one term each), the
    missing values (a trip counts in each column it misses) and the histograms. ``key``: the
    release's bounding key, which the OD cell cap (``cfg.od_cell_cap``) ranks by; None where
    the terms are not run (the plan reads their sizes: the cap then ranks by key 0).
    """
    vectors = count_vectors(cfg, k, n_time_bins)
    if cfg.od_cell_cap is not None:  # every path that could run these terms caps: the key
        # only picks which trips stay, the L2 bound holds for any key
        vectors["od_flows"] = cap_per_cell(vectors["od_flows"], cfg.od_cell_cap, key or 0, d)
    q: dict[str, tuple[list[CountTerm], int]] = {
        name: ([v.term(d)], v.size) for name, v in vectors.items()
    }
    q["missing_values"] = (
        [CountTerm("pm_trips", str(i), f"miss_{c} = 1") for i, c in enumerate(MISSING_COLUMNS)],
        len(MISSING_COLUMNS),
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
        [_hist(PER_USER, "trips", cfg.bins("trips_per_user"))],
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
