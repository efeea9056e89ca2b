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
from privmob.surface import spelled

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
    column names (not declared), so located events without cells are refused before they are
    read: they may be a GPS log (:func:`refuse_undeclared_located_events`). ``reading``: the
    column mapping, time zone and delimiter (:class:`~privmob.data.reading.Reading`).
    ``keep_coordinates``: keep the coordinates of the trips' ends where the input has them
    (one-row trips with coordinates, trip points and GPS traces: their first and last point);
    ``carry`` (more input columns, kept under their own names): one-row trips only
    (:func:`privmob.data.sources.load_trips`); trips built from points or events have no value
    of their own in another column."""
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
        return trips_from_points(load_trip_points(source, **common), keep_coordinates)
    if shape == "gps":
        from privmob.prepare.staypoints import gps_trips

        points = load_gps_points(source, stay_distance, stay_minutes, **common)
        return gps_trips(points, keep_coordinates)
    if shape_detected and cells is None:
        refuse_undeclared_located_events(source)
    events = load_events(source, cells=cells, **common)
    return events_to_trips(events, trip_rule)


def refuse_undeclared_located_events(source: Any) -> None:
    """Refuse, before a record is read, trips from located events whose shape was told from
    the column names alone: ``uid, datetime, lat, lng`` are the columns of phone events and
    check-ins (a trip per move between two tiles) and of a GPS log (trips between stays)
    alike, and the two readings give different trips. Only the declared shape decides.

    The rule reads nothing but the column names, so no record, and no one person, can flip
    it (issue 38). It replaces a check of the records' density (more than 12 points per user
    and active hour on average), which one user with many fixes in an hour turned from a
    release into a refusal."""
    from privmob.data.reading import describe_source

    raise ConfigError(
        f"{describe_source(source)}: the columns uid, datetime, lat, lng are those of located "
        "events (calls, check-ins: a trip per move between two tiles) and of a GPS log (trips "
        "between stays) alike, and the two give different trips; declare which. Nothing was "
        "read or charged",
        hint=spelled("--input-shape events or --input-shape gps", 'shape="events" or shape="gps"')
        + f"; a cells table ({spelled('--cells', 'cells=')}) or a trip id column (tid) also "
        "tells",
    )
