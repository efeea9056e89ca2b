"""Trips from events (SPEC section 2).

``consecutive_event_trips``: seed 003's rule for daily OD matrices — a trip is counted when
one event and the next event of the same user fall in different tiles. The trip starts at the
earlier event. Events outside the tessellation (tile -1) take part like any tile, so such trips
land in the outliers cell.
"""

from __future__ import annotations

from privmob.data.sources import Loaded, _new_name


def consecutive_event_trips(events: Loaded) -> Loaded:
    """Trips between consecutive events of a user in different tiles (seed 003).

    Canonical trips view: ``uid, tid, start_time, end_time, origin, destination``; ``tid`` is
    the rank of the trip's first event within the user's events (ties broken by tile).
    """
    view = _new_name("trips")
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
    return Loaded(view, events.source, "trips", events.engine, events.engine.columns(view))
