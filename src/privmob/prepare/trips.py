"""Trips from events (SPEC section 2).

``consecutive_event_trips``: seed 003's rule for daily OD matrices — a trip is counted when
one event and the next event of the same user fall in different tiles. The trip starts at the
earlier event. Events outside the tessellation (tile -1) take part like any tile, so such trips
land in the outliers cell.

``hourly_trips``: per user, bin events by clock hour and keep the most frequent tile of each
hour (ties: tiles inside the tessellation first, then the smallest tile index); a trip is a
change of tile between consecutive non-empty hours (option: only directly consecutive hours).

``events_to_trips`` picks a rule by name. All are SQL that DuckDB and Spark SQL both accept
(window functions and GROUP BY; the epoch function comes from the engine's dialect). They are
per-user transformations: one user's trips depend only on that user's events.
"""

from __future__ import annotations

from privmob.engine.dialect import Dialect
from privmob.engine.relation import Loaded, new_name
from privmob.errors import ConfigError


def consecutive_event_trips(events: Loaded) -> Loaded:
    """Trips between consecutive events of a user in different tiles (seed 003).

    Canonical trips view: ``uid, tid, start_time, end_time, origin, destination``; ``tid`` is
    the rank of the trip's first event within the user's events (ties broken by tile).
    """
    view = new_name("trips")
    events.engine.create_view(
        view,
        (
            "SELECT uid, seq AS tid, time AS start_time, next_time AS end_time, "
            "tile AS origin, next_tile AS destination FROM ("
            "SELECT uid, time, tile, "
            "ROW_NUMBER() OVER (PARTITION BY uid ORDER BY time, tile) AS seq, "
            "LEAD(tile) OVER (PARTITION BY uid ORDER BY time, tile) AS next_tile, "
            "LEAD(time) OVER (PARTITION BY uid ORDER BY time, tile) AS next_time "
            f"FROM {events.view}) AS s_ "
            "WHERE next_tile IS NOT NULL AND next_tile <> tile"
        ),
    )
    return events.derived(view, "trips", consecutive_event_trips)


def hourly_modal_sql(events: str, dialect: Dialect) -> str:
    """SQL ``uid, hr, tile, first_time, last_time``: each user's most frequent tile in each
    clock hour with events (ties: tiles inside the tessellation first, then the smallest tile
    index), with the first and last event time at that tile in that hour."""
    hr = f"CAST(FLOOR({dialect.epoch_seconds('time')} / 3600) AS BIGINT)"
    return (
        "SELECT uid, hr, tile, first_time, last_time FROM ("
        "SELECT uid, hr, tile, first_time, last_time, ROW_NUMBER() OVER (PARTITION BY uid, hr "
        "ORDER BY n DESC, CASE WHEN tile < 0 THEN 1 ELSE 0 END, tile) AS mode_rank_ FROM ("
        "SELECT uid, hr, tile, count(*) AS n, min(time) AS first_time, max(time) AS last_time "
        f"FROM (SELECT uid, time, tile, {hr} AS hr FROM {events} AS ev_) AS binned_ "
        "GROUP BY uid, hr, tile) AS per_tile_) AS ranked_ WHERE mode_rank_ = 1"
    )


def hourly_trips_sql(events: str, dialect: Dialect, *, consecutive_hours: bool = False) -> str:
    """SQL for canonical trips from hourly modal locations (SPEC section 2; seeds 002/003).

    A trip is a change of modal tile between consecutive non-empty hours of a user (with
    ``consecutive_hours``, only between hours that follow each other directly). It starts at
    the last event of the origin hour's modal tile and ends at the first event of the
    destination hour's modal tile.
    """
    modal = hourly_modal_sql(events, dialect)
    gap = " AND next_hr = hr + 1" if consecutive_hours else ""
    return (
        "SELECT uid, CAST(ROW_NUMBER() OVER (PARTITION BY uid ORDER BY hr) AS BIGINT) AS tid, "
        "last_time AS start_time, next_time AS end_time, tile AS origin, next_tile AS destination "
        "FROM (SELECT uid, hr, tile, last_time, "
        "LEAD(hr) OVER (PARTITION BY uid ORDER BY hr) AS next_hr, "
        "LEAD(tile) OVER (PARTITION BY uid ORDER BY hr) AS next_tile, "
        "LEAD(first_time) OVER (PARTITION BY uid ORDER BY hr) AS next_time "
        f"FROM ({modal}) AS modal_) AS paired_ "
        f"WHERE next_tile IS NOT NULL AND next_tile <> tile{gap}"
    )


def hourly_trips(events: Loaded, *, consecutive_hours: bool = False) -> Loaded:
    """Trips from events by hourly modal location (see :func:`hourly_trips_sql`)."""
    view = new_name("trips")
    sql = hourly_trips_sql(events.view, events.engine.dialect, consecutive_hours=consecutive_hours)
    events.engine.create_view(view, sql)
    return events.derived(
        view, "trips", lambda e: hourly_trips(e, consecutive_hours=consecutive_hours)
    )


def events_to_trips(events: Loaded, rule: str = "events") -> Loaded:
    """Trips from events by ``rule``: ``events`` (seed 003: consecutive events in different
    tiles), ``hourly`` (changes of hourly modal tile between non-empty hours) or
    ``hourly-consecutive`` (only between directly consecutive hours)."""
    if rule == "events":
        return consecutive_event_trips(events)
    if rule in ("hourly", "hourly-consecutive"):
        return hourly_trips(events, consecutive_hours=rule == "hourly-consecutive")
    raise ConfigError(
        f"unknown trip rule '{rule}'", hint="use events, hourly or hourly-consecutive"
    )
