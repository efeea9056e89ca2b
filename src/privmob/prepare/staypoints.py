"""Trips from raw GPS traces by stay-point detection (docs/inputs.md).

Raw traces (GeoLife, Cabspotting: ``uid, datetime, lat, lng`` without a trip id) become trips
the way trackintel and scikit-mobility do it: find where a person stays, and call the movement
between two consecutive stays a trip. The exact rule, per user, on the points sorted by
(time, lat, lng) (identical points are interchangeable):

1. A point p is *settled* when the user has a point at or after ``t_p + T`` and every point
   from p up to and including the first such point lies within ``D`` metres of p, both
   north-south and east-west (on the local plane at p's latitude: a square of side ``2 D``
   centred on p). "Every point from p" means every point with a time in ``[t_p, t_p + T)``
   plus the first point at or after ``t_p + T``.
2. A settled point *covers* the rows from itself to that first point at or after
   ``t_p + T``. Covers that share a row merge: a *stay* is a maximal chain of overlapping
   covers, from its first settled point to the last row any of its covers reaches.
3. A *trip* is the movement between two consecutive stays of the user: the last point of
   the first stay, every point in between, and the first point of the next stay. Its origin
   is the tile of its first point, its destination the tile of its last point, its start and
   end the times of these points. Points before the first stay and after the last stay
   belong to no trip.

Defaults (scikit-mobility's ``stay_locations``): ``D = 200`` metres, ``T = 20`` minutes.
The square (rather than a circle of radius ``D``) is what lets the rule run as window
aggregates (a moving minimum and maximum over a time frame) on DuckDB and Spark alike: the
whole segmentation is one SQL definition of five window steps, no recursion, no self-join.
It is a per-user transformation: one user's trips depend only on that user's points.
"""

from __future__ import annotations

import math

from privmob.engine.dialect import Dialect
from privmob.engine.relation import Loaded, new_name
from privmob.errors import ConfigError

#: Default stay radius in metres (scikit-mobility's ``spatial_radius_km=0.2``).
STAY_DISTANCE_M = 200.0
#: Default minimum stay in minutes (scikit-mobility's ``minutes_for_a_stop=20``).
STAY_MINUTES = 20.0
#: Metres per degree of latitude (mean Earth radius 6,371,008.8 m).
METRES_PER_DEGREE = 6_371_008.8 * math.pi / 180.0


def check_stay_parameters(distance_m: float, minutes: float) -> None:
    """Both thresholds must be positive and finite."""
    for name, value, unit in (
        ("--stay-distance", distance_m, "metres"),
        ("--stay-minutes", minutes, "minutes"),
    ):
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(
                f"{name} must be a positive number of {unit}, got {value}",
                hint=f"e.g. {name} {STAY_DISTANCE_M if unit == 'metres' else STAY_MINUTES:g}",
            )


def gps_segments_sql(
    points: str,
    dialect: Dialect,
    *,
    distance_m: float = STAY_DISTANCE_M,
    minutes: float = STAY_MINUTES,
) -> str:
    """SQL: the trip points of ``points`` (``uid, time, lat, lng, tile``) by the stay rule of
    this module, as ``uid, tid, time, lat, lng, tile, seq`` (``tid``: the trip's number
    within the user, from 1; ``seq``: the point's rank in the user's sorted points)."""
    check_stay_parameters(distance_m, minutes)
    window_us = round(minutes * 60e6)
    dlat = distance_m / METRES_PER_DEGREE  # D in degrees of latitude
    lit = f"CAST('{dlat!r}' AS DOUBLE)"
    by_seq = "PARTITION BY uid ORDER BY seq"
    ranked = (
        f"SELECT uid, time, lat, lng, tile, {dialect.epoch_micros('time')} AS us, "
        "ROW_NUMBER() OVER (PARTITION BY uid ORDER BY time, lat, lng) AS seq "
        f"FROM {points} AS p_"
    )
    # 1. each point with its successor
    paired = (
        "SELECT uid, time, lat, lng, tile, us, seq, "
        f"LEAD(lat) OVER ({by_seq}) AS n_lat, LEAD(lng) OVER ({by_seq}) AS n_lng, "
        f"LEAD(us) OVER ({by_seq}) AS n_us FROM ({ranked}) AS r_"
    )
    # 2. extent of the points in [t, t + T) and their successors: settled points
    frame = (
        f"OVER (PARTITION BY uid ORDER BY us RANGE BETWEEN CURRENT ROW AND {window_us - 1} "
        "FOLLOWING)"
    )
    framed = (
        "SELECT uid, time, lat, lng, tile, us, seq, "
        f"max(greatest(lat, coalesce(n_lat, lat))) {frame} AS hi_lat, "
        f"min(least(lat, coalesce(n_lat, lat))) {frame} AS lo_lat, "
        f"max(greatest(lng, coalesce(n_lng, lng))) {frame} AS hi_lng, "
        f"min(least(lng, coalesce(n_lng, lng))) {frame} AS lo_lng, "
        f"max(n_us) {frame} AS reach_us, "
        f"max(CASE WHEN n_us IS NOT NULL THEN seq + 1 END) {frame} AS reach_seq "
        f"FROM ({paired}) AS n_"
    )
    coslat = "cos(radians(lat))"
    settled = (
        f"reach_us >= us + {window_us} AND hi_lat - lat <= {lit} AND lat - lo_lat <= {lit} "
        f"AND (hi_lng - lng) * {coslat} <= {lit} AND (lng - lo_lng) * {coslat} <= {lit}"
    )
    covers = (
        "SELECT uid, time, lat, lng, tile, seq, "
        f"CASE WHEN {settled} THEN reach_seq END AS cover_end FROM ({framed}) AS f_"
    )
    # 3. merge overlapping covers into stays
    before = f"OVER ({by_seq} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    flagged = (
        "SELECT uid, time, lat, lng, tile, seq, "
        "CASE WHEN cover_end IS NOT NULL AND (prev_reach IS NULL OR seq > prev_reach) "
        "THEN 1 ELSE 0 END AS stay_start, "
        "CASE WHEN cover_end IS NOT NULL OR prev_reach >= seq THEN 1 ELSE 0 END AS covered "
        f"FROM (SELECT *, max(cover_end) {before} AS prev_reach FROM ({covers}) AS c_) AS v_"
    )
    numbered = (
        "SELECT uid, time, lat, lng, tile, seq, stay_start, covered, "
        f"sum(stay_start) OVER ({by_seq} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
        "AS stay_no, "
        f"LEAD(covered - stay_start) OVER ({by_seq}) AS next_continues "
        f"FROM ({flagged}) AS s_"
    )
    # 4. trips between consecutive stays
    trip_no = (
        "CASE WHEN stay_start = 1 AND stay_no >= 2 THEN stay_no - 1 "
        "WHEN stay_no < last_stay AND covered = 1 AND coalesce(next_continues, 0) = 0 "
        "THEN stay_no "
        "WHEN stay_no >= 1 AND stay_no < last_stay AND covered = 0 THEN stay_no END"
    )
    labelled = (
        f"SELECT uid, time, lat, lng, tile, seq, {trip_no} AS tid FROM ("
        "SELECT *, max(stay_no) OVER (PARTITION BY uid) AS last_stay "
        f"FROM ({numbered}) AS m_) AS l_"
    )
    return (
        "SELECT uid, CAST(tid AS BIGINT) AS tid, time, lat, lng, tile, seq "
        f"FROM ({labelled}) AS t_ WHERE tid IS NOT NULL"
    )


def gps_trip_points(
    events: Loaded, *, distance_m: float = STAY_DISTANCE_M, minutes: float = STAY_MINUTES
) -> Loaded:
    """Trip points (``uid, tid, time, lat, lng, tile, seq``) from GPS events (``uid, time,
    lat, lng, tile``, e.g. from :func:`privmob.data.sources.load_events`) by the stay rule
    of this module."""
    view = new_name("gps_points")
    sql = gps_segments_sql(
        events.view, events.engine.dialect, distance_m=distance_m, minutes=minutes
    )
    events.engine.create_view(view, sql)
    return events.derived(
        view,
        "trip_points",
        lambda e: gps_trip_points(e, distance_m=distance_m, minutes=minutes),
    )


def gps_trips(points: Loaded, coordinates: bool = False) -> Loaded:
    """One row per trip from :func:`gps_trip_points`: origin = tile of the first point,
    destination = tile of the last (by the points' rank, so ties in time cannot swap them);
    with ``coordinates``, also their coordinates
    (:func:`~privmob.data.sources.end_coordinates`), known also for an end outside the
    tessellation."""
    from privmob.data.sources import trip_ends

    return trip_ends(points, "seq", coordinates, lambda p: gps_trips(p, coordinates))
