"""The input shapes a loader reads, and telling them apart by column names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privmob.data.reading import read_raw
from privmob.errors import ConfigError

SHAPES = ("auto", "trips", "trip-points", "events", "gps")


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
    from privmob.data.coordinate_trips import coordinate_trip_columns

    if coordinate_trip_columns(engine.columns(view), columns) is not None:
        return "trips"  # bike-share rides: start and end coordinates
    if "tid" in names and "datetime" in names:
        return "trip-points"
    if "datetime" in names:
        return "events"
    layout = layout_hint(found)
    if layout is not None:  # a wrong --delimiter or a missing header, not a shape problem
        raise InputError(layout[0], source=display, hint=layout[1])
    raise ConfigError(
        f"cannot tell the input's shape from its columns ({shown_columns(sorted(names))})",
        hint="pass --input-shape trips|trip-points|events|gps and --columns to map names",
    )
