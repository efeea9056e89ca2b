"""Trips from any input shape: one-row trips as loaded, trip points by first and last point,
phone events by a trip rule, raw GPS traces by stay points (loading, then preparation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from privmob.data.shapes import SHAPES, detect_shape
from privmob.data.sources import load_events, load_trip_points, load_trips, trips_from_points
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError


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
    tessellation: Any,
    shape: str = "auto",
    cells: Any = None,
    columns: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    delimiter: str | None = None,
    trip_rule: str = "events",
    stay_distance: float | None = None,
    stay_minutes: float | None = None,
    uid_per_trip: bool = False,
) -> Loaded:
    """Trips from any input shape: one-row trips as they are, trip points by first/last
    point, events by ``trip_rule`` (default seed 003's rule: consecutive events in different
    tiles; or ``hourly`` / ``hourly-consecutive`` modal locations, see prepare.trips), raw
    GPS traces (``gps``: ``uid, datetime, lat, lng``) by stay points (prepare.staypoints).
    ``uid_per_trip``: one-row trips without a uid column (bike-share rides) make each trip its
    own unit; only for trip-level releases."""
    from privmob.prepare.trips import events_to_trips

    if shape not in SHAPES:
        raise ConfigError(f"unknown input shape '{shape}'", hint=f"use one of {SHAPES}")
    if shape == "auto":
        shape = "events" if cells is not None else detect_shape(engine, source, delimiter, columns)
    common = {
        "engine": engine,
        "tessellation": tessellation,
        "columns": columns,
        "timezone": timezone,
        "delimiter": delimiter,
    }
    if shape == "trips":
        return load_trips(source, uid_per_trip=uid_per_trip, **common)
    if shape == "trip-points":
        return trips_from_points(load_trip_points(source, **common))
    if shape == "gps":
        from privmob.prepare.staypoints import gps_trips

        return gps_trips(load_gps_points(source, stay_distance, stay_minutes, **common))
    return events_to_trips(load_events(source, cells=cells, **common), trip_rule)
