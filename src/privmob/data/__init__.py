"""Inputs: schemas, loading and validation, tessellations, synthetic data.

The loaders are imported on first use (``privmob.data.load_trips`` imports DuckDB's
relation helpers, pandas and pyarrow then), so that a light submodule such as
:mod:`privmob.data.reading` costs nothing at the CLI's start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privmob.data.shapes import SHAPES, detect_shape
    from privmob.data.sources import load_events, load_trip_points, load_trips, trips_from_points
    from privmob.engine.relation import Loaded

_LAZY = {
    "SHAPES": "privmob.data.shapes",
    "detect_shape": "privmob.data.shapes",
    "Loaded": "privmob.engine.relation",
    "load_events": "privmob.data.sources",
    "load_trip_points": "privmob.data.sources",
    "load_trips": "privmob.data.sources",
    "trips_from_points": "privmob.data.sources",
}

__all__ = [
    "SHAPES",
    "Loaded",
    "detect_shape",
    "load_events",
    "load_trip_points",
    "load_trips",
    "trips_from_points",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privmob.data' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
