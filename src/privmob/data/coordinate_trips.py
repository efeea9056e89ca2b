"""One-row trips with origin and destination coordinates, in the layouts bike-share systems
publish (docs/inputs.md).

Citi Bike and Divvy publish one row per ride with start and end coordinates: since 2020 as
``ride_id, started_at, ended_at, start_lat, start_lng, end_lat, end_lng, ...``, before as
``starttime, stoptime, "start station latitude", "start station longitude", "end station
latitude", "end station longitude", ...``. Such files are read as they are: these names are
taken for privmob's canonical ``start_time, end_time, origin_lat, origin_lng,
destination_lat, destination_lng`` (and ``ride_id`` for ``tid``) when the canonical names are
absent and ``--columns`` maps nothing else to them. The coordinates are then assigned to tiles
by the tessellation's point-in-polygon path, as every coordinate input is.

These files carry no rider id (``bikeid`` is a bicycle, not a person): user-level privacy is
impossible from them. They are released per trip (``--unit trip``), where each ride is its own
unit; under ``--unit user`` the missing ``uid`` is refused with that explanation.
"""

from __future__ import annotations

from collections.abc import Mapping

#: canonical column -> the names bike-share files use for it, in order of preference
ALIASES: dict[str, tuple[str, ...]] = {
    "start_time": ("started_at", "starttime", "start time"),
    "end_time": ("ended_at", "stoptime", "stop time"),
    "origin_lat": ("start_lat", "start station latitude", "start_station_latitude"),
    "origin_lng": (
        "start_lng",
        "start_lon",
        "start station longitude",
        "start_station_longitude",
    ),
    "destination_lat": ("end_lat", "end station latitude", "end_station_latitude"),
    "destination_lng": (
        "end_lng",
        "end_lon",
        "end station longitude",
        "end_station_longitude",
    ),
    "tid": ("ride_id",),
}

#: the hint when a coordinate-trips file has no person id
NO_UID_HINT = (
    "bike-share files have no rider id (bikeid is a bicycle, not a person): release per trip "
    "with --unit trip and no --group-size (od, counts, trips-per-hour, report; Python: "
    "unit='trip'), charged to a trip-level budget (--budget with --unit trip, or privmob ledger "
    "init NAME --epsilon 5 --unit trip); or map a person id with --columns uid=<column>"
)


def coordinate_trip_columns(
    available: list[str], mapping: Mapping[str, str] | None
) -> dict[str, str] | None:
    """The column mapping for a bike-share layout: ``mapping`` completed with the aliases of
    the canonical names it lacks, or None when ``available`` has no origin and destination
    coordinates under a known name."""
    lower = {c.lower(): c for c in available}
    out = dict(mapping or {})
    mapped_to = {v.lower() for v in out.values()}
    for canon, names in ALIASES.items():
        if canon in out or canon in lower:
            continue
        hit = next((lower[n] for n in names if n in lower and n not in mapped_to), None)
        if hit is not None:
            out[canon] = hit
    ends = ("origin_lat", "origin_lng", "destination_lat", "destination_lng")
    if not all(e in out or e in lower for e in ends):
        return None
    return out
