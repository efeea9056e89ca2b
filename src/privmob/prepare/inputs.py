"""Trips from any input shape: one-row trips as loaded, trip points by first and last point,
phone events by a trip rule, raw GPS traces by stay points (loading, then preparation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Unpack

from privmob.data.reading import Reading, refuse_unknown_reading
from privmob.data.shapes import SHAPES, detect_shape
from privmob.data.sources import load_events, load_trip_points, load_trips, trips_from_points
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.data.tessellation import Tiling


def load_gps_points(
    source: Any,
    stay_distance: float | None = None,
    stay_minutes: float | None = None,
    **common: Any,
) -> Loaded:
    """Trip points from raw GPS traces (``uid, datetime, lat, lng``) by stay points, with
    the thresholds in metres and minutes (default: prepare.staypoints' defaults)."""
    from privmob.prepare.staypoints import (
        STAY_DISTANCE_M,
        STAY_MINUTES,
        check_stay_parameters,
        gps_trip_points,
    )

    distance = STAY_DISTANCE_M if stay_distance is None else stay_distance
    minutes = STAY_MINUTES if stay_minutes is None else stay_minutes
    check_stay_parameters(distance, minutes)  # before the input is read
    # shape "gps": user buckets (--memory-limit) must keep lat and lng, which the stay rule
    # reads (events' buckets keep only uid, time and tile)
    events = replace(load_events(source, **common), shape="gps")
    return gps_trip_points(events, distance_m=distance, minutes=minutes)


def load_trips_any(
    source: Any,
    *,
    engine: Any,
    tessellation: Tiling,
    shape: str = "auto",
    cells: Any = None,
    trip_rule: str = "events",
    stay_distance: float | None = None,
    stay_minutes: float | None = None,
    uid_per_trip: bool = False,
    shape_detected: bool = False,
    keep_coordinates: bool = False,
    carry: Sequence[str] = (),
    **reading: Unpack[Reading],
) -> Loaded:
    """Trips from any input shape: one-row trips as they are, trip points by first/last
    point, events by ``trip_rule`` (default seed 003's rule: consecutive events in different
    tiles; or ``hourly`` / ``hourly-consecutive`` modal locations, see prepare.trips), raw
    GPS traces (``gps``: ``uid, datetime, lat, lng``) by stay points (prepare.staypoints).
    ``uid_per_trip``: one-row trips without a uid column (bike-share rides) make each trip its
    own unit; only for trip-level releases. ``shape_detected``: the shape was told from the
    column names (not declared), so located events as dense as a GPS log are refused
    (:func:`refuse_likely_gps`). ``reading``: the column mapping, time zone and delimiter
    (:class:`~privmob.data.reading.Reading`). ``keep_coordinates`` and ``carry`` (more input
    columns, kept under their own names): one-row trips only
    (:func:`privmob.data.sources.load_trips`);
    trips built from points or events have no value of their own in another column."""
    from privmob.prepare.trips import events_to_trips

    refuse_unknown_reading(reading)
    if shape not in SHAPES:
        raise ConfigError(f"unknown input shape '{shape}'", hint=f"use one of {SHAPES}")
    if shape == "auto":
        shape_detected = cells is None
        shape = (
            "events"
            if cells is not None
            else detect_shape(engine, source, reading.get("delimiter"), reading.get("columns"))
        )
    common: dict[str, Any] = {"engine": engine, "tessellation": tessellation, **reading}
    if carry and shape != "trips":
        raise ConfigError(
            f"the column {carry[0]!r} is counted per trip only on one-row trips; trips built "
            f"from {shape} have no value of their own in it",
            hint="count the records themselves (--records trip-points or events; Python: "
            "records=) by it, or give one-row trips",
        )
    if shape == "trips":
        return load_trips(
            source,
            uid_per_trip=uid_per_trip,
            keep_coordinates=keep_coordinates,
            carry=carry,
            **common,
        )
    if shape == "trip-points":
        return trips_from_points(load_trip_points(source, **common))
    if shape == "gps":
        from privmob.prepare.staypoints import gps_trips

        return gps_trips(load_gps_points(source, stay_distance, stay_minutes, **common))
    events = load_events(source, cells=cells, **common)
    if shape_detected and cells is None:
        refuse_likely_gps(events)
    return events_to_trips(events, trip_rule)


#: Located events with more than this many records per user and active hour, on average, are
#: taken for a GPS log (a fix every few minutes or seconds: Cabspotting ~60, GeoLife hundreds)
#: rather than events (calls, check-ins: a few an hour at most).
GPS_FIXES_PER_HOUR = 12


def refuse_likely_gps(events: Loaded) -> None:
    """Refuse, before anything is charged, events whose shape was told from the column names
    (``uid, datetime, lat, lng``) when they are as dense as a GPS log: read as events, each
    move between two consecutive fixes in different tiles is a trip, which is not what a trip
    of a GPS trace is (``--input-shape gps``: trips between stays).

    The check runs here, on the operator's side, on the validated input; its figure goes to
    the error's ``detail`` (shown with ``--verbose``), never into a release, its metadata or
    the ledger: a release that passes it records nothing about it."""
    rate = events.engine.fetch(
        "SELECT AVG(CAST(k AS DOUBLE)) AS rate FROM (SELECT COUNT(*) AS k "
        f"FROM {events.view} GROUP BY uid, date_trunc('hour', time)) AS per_hour"
    )["rate"].iloc[0]
    if rate is None or not rate > GPS_FIXES_PER_HOUR:  # NULL or NaN: no events
        return
    raise ConfigError(
        f"{events.source}: these located events look like a GPS log (more than "
        f"{GPS_FIXES_PER_HOUR} points per user and active hour on average); read as events, "
        "every move between two points in different tiles would be counted as a trip. "
        "Nothing was charged",
        hint="for trips between stays give --input-shape gps (Python: shape='gps'); to count "
        "them as events all the same, declare --input-shape events",
        detail=f"{rate:.1f} points per user and active hour on average",
    )
