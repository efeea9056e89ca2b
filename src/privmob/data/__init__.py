"""Inputs: schemas, loading and validation, tessellations, synthetic data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privmob.data.sources import (
    Loaded,
    load_events,
    load_trip_points,
    load_trips,
    read_raw,
    trips_from_points,
)
from privmob.errors import ConfigError

SHAPES = ("auto", "trips", "trip-points", "events")

__all__ = [
    "SHAPES",
    "Loaded",
    "detect_shape",
    "load_events",
    "load_trip_points",
    "load_trips",
    "load_trips_any",
    "trips_from_points",
]


def detect_shape(
    engine: Any, source: Any, delimiter: str | None = None, columns: Mapping[str, str] | None = None
) -> str:
    """Guess the input shape from its column names (after the mapping)."""
    from privmob.data.diagnose import layout_hint, shown_columns
    from privmob.errors import InputError

    view, display = read_raw(engine, source, delimiter=delimiter)
    found = engine.columns(view)
    names = {c.lower() for c in found}
    names |= {canon for canon in (columns or {})}
    if "start_time" in names:
        return "trips"
    if "tid" in names and "datetime" in names:
        return "trip-points"
    if "datetime" in names:
        return "events"
    layout = layout_hint(found)
    if layout is not None:  # a wrong --delimiter or a missing header, not a shape problem
        raise InputError(layout[0], source=display, hint=layout[1])
    raise ConfigError(
        f"cannot tell the input's shape from its columns ({shown_columns(sorted(names))})",
        hint="pass --input-shape trips|trip-points|events and --columns to map names",
    )


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
) -> Loaded:
    """Trips from any input shape: one-row trips as they are, trip points by first/last
    point, events by ``trip_rule`` (default seed 003's rule: consecutive events in different
    tiles; or ``hourly`` / ``hourly-consecutive`` modal locations, see prepare.trips)."""
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
        return load_trips(source, **common)
    if shape == "trip-points":
        return trips_from_points(load_trip_points(source, **common))
    return events_to_trips(load_events(source, cells=cells, **common), trip_rule)
