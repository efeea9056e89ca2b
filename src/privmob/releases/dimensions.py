"""The public dimensions of the count template (``Session.counts``, ``privmob counts``).

A dimension maps a record to one of its declared labels, or to the outliers cell; its labels
are fixed before any data is read and never taken from the data. A count holds its
dimensions typed (:class:`TypedDimension`: :class:`Named`, :class:`TimeBins`,
:class:`Duration`, :class:`Distance`, :class:`Categorical`); their text is read once, at the
edges (``--by``, strings given to ``Session.counts`` or to a kind's declaration:
:func:`parse_dimension`), and written (:func:`spelling`) only where text is written: the
metadata's ``by``, plans, messages. The vocabulary, spelled:

- ``origin``, ``destination`` (trips): the tiles of the tessellation;
- ``tile`` (trip points, events): the visited tile; ``zone``: the same plus an ``outside``
  label for records outside every tile (``tile`` counts those in the outliers cell);
- ``period``: the bins of the declared period (``all``, ``day``, ``week``);
  ``bin:1h`` (any fixed length: ``30min``, ``6h``, ``1D``): bins of that length over the
  declared ``[start, end)``, which must hold a whole number of them;
- ``hour`` (of day, 0-23), ``weekday`` (Monday-Sunday);
- ``duration:0,5,15,60``: trip minutes (end time minus start time) between declared edges;
- ``distance:0,1,2,5``: trip kilometres between declared edges. The distance is the
  great-circle distance (haversine, Earth radius 6371.0088 km, as the report's
  ``jump_length``) between the trip's start and end coordinates when the input gives them
  (one-row trips with ``origin_lat, origin_lng, destination_lat, destination_lng`` or the
  bike-share names; trip points and GPS traces: the trip's first and last point), also for a
  trip with an end outside the tessellation (outside for the tile dimensions only); else (tile
  ids, events) between the centroids of its origin and destination tiles (a public point per
  tile; a trip within one tile is then 0 km), where a trip outside every tile has no centroid:
  its distance is unknown and it is counted in the outliers cell;
- ``COLUMN:v1,v2,...`` (any other name): a categorical column of the input, carried through
  the loader, with its declared values (compared as text). A value not declared, or a missing
  value, is counted in the outliers cell: the declared values are the public domain and the
  values found in the data are never read.

Bins are ``[lo, hi)``; a value below the first edge or at or above the last one is counted in
the outliers cell.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module
from privmob.surface import spelled

if TYPE_CHECKING:
    import pyarrow as pa

    from privmob.data.tessellation import Tessellation
    from privmob.domain import Period
    from privmob.engine.dialect import Dialect
    from privmob.engine.relation import Loaded
else:
    pa = lazy_module("pyarrow")

#: what a count release counts: its records' time column and the columns that tell two
#: records of one user apart (for the per-user bound)
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "trips": ("start_time", ("tid",)),
    "trip-points": ("time", ("tid", "time")),
    "events": ("time", ("time", "tile")),
}
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: the label of ``zone`` for records outside every tile
OUTSIDE = "outside"
#: the column the trip distance is read from (see :mod:`privmob.prepare.trip_distance`)
DISTANCE_COLUMN = "distance_km"
#: the records' own columns: a categorical column may not take one of these names
CANONICAL_COLUMNS = frozenset(
    {"uid", "tid", "time", "start_time", "end_time", "origin", "destination", "tile", "lat",
     "lng", "cell_id", "origin_lat", "origin_lng", "destination_lat", "destination_lng",
     DISTANCE_COLUMN}
)  # fmt: skip
#: the built-in dimension names (every other ``NAME:values`` is a categorical column)
NAMED = ("origin", "destination", "tile", "zone", "period", "bin", "hour", "weekday",
         "duration", "distance")  # fmt: skip

#: maps a record (its time column, the dialect, the number of tiles) to its label's index
CellSql = Callable[[str, "Dialect", int], str]


@dataclass(frozen=True)
class Dimension:
    """One public dimension: its output ``column``, its declared ``labels`` and ``sql``, which
    maps a record (its time column, the dialect, the number of tiles) to 0..len(labels)-1, or
    to a negative value (or NULL) for a record outside the domain (the outliers cell)."""

    column: str
    labels: tuple[object, ...]
    sql: CellSql = field(compare=False)
    sources: tuple[str, ...] = tuple(SOURCES)
    #: input columns the records must carry for it (a categorical column)
    reads: tuple[str, ...] = ()
    #: it reads the trip distance (:data:`DISTANCE_COLUMN`, added before counting)
    distance: bool = False


# -- the typed dimensions: what a count's ``by`` holds -------------------------------------
class TypedDimension:
    """A dimension as a count declares it (``CountSpec.by``, a declared kind's ``by``): typed,
    its parameters checked when it is made, written as text (:func:`spelling`) only where text
    is written (metadata, plans, messages) and never parsed back. :meth:`resolve` gives its
    public labels over the tessellation's tiles and the declared period (no data read)."""

    def resolve(self, tiles: tuple[object, ...], period: Period) -> Dimension:
        """The dimension over public labels: ``tiles`` (the tessellation's ids) and ``period``."""
        raise NotImplementedError

    @property
    def reads(self) -> tuple[str, ...]:
        """The input columns the records must carry for it (a categorical column)."""
        return ()

    @property
    def measures_distance(self) -> bool:
        """It reads the trip distance (:data:`DISTANCE_COLUMN`, added before counting)."""
        return False


#: the dimensions whose labels are their own (the tiles, the period, the clock): no parameter
LABELLED = ("origin", "destination", "tile", "zone", "period", "hour", "weekday")


@dataclass(frozen=True)
class Named(TypedDimension):
    """A dimension with labels of its own, by its ``name``: ``origin``, ``destination``,
    ``tile``, ``zone``, ``period``, ``hour`` or ``weekday`` (see the module's docstring)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in LABELLED:
            raise ConfigError(f"unknown count dimension {self.name!r}", hint=_VOCABULARY)

    def __str__(self) -> str:
        return self.name

    def resolve(self, tiles: tuple[object, ...], period: Period) -> Dimension:
        name = self.name
        if name in ("origin", "destination"):
            return Dimension(name, tiles, _tile(name), ("trips",))
        if name == "tile":
            return Dimension("tile", tiles, _tile("tile"), ("trip-points", "events"))
        if name == "zone":
            labels = (*tiles, OUTSIDE) if tiles else ()
            return Dimension("zone", labels, _zone, ("trip-points", "events"))
        if name == "period":
            return Dimension(
                "period", tuple(period.labels()), lambda t, d, _k: period.bin_sql(t, d)
            )
        if name == "hour":
            return Dimension("hour", tuple(range(24)), lambda t, d, _k: d.hour(t))
        return Dimension("weekday", WEEKDAYS, lambda t, d, _k: d.weekday(t))


def _numbers(edges: Sequence[float]) -> str:
    # the shortest text of each edge that reads back as that edge (5 -> "5", 0.1 -> "0.1")
    return ",".join(f"{e:g}" if float(f"{e:g}") == e else repr(e) for e in edges)


@dataclass(frozen=True)
class TripBins(TypedDimension):
    """Bins ``[lo, hi)`` of a trip's measured value between declared ``edges`` (at least two,
    increasing, finite; kept as floats): :class:`Duration` and :class:`Distance`."""

    edges: Sequence[float]
    #: the dimension's name and column, and its labels' unit
    name: ClassVar[str]
    unit: ClassVar[str]

    def __post_init__(self) -> None:
        edges = tuple(float(e) for e in self.edges)
        object.__setattr__(self, "edges", edges)  # frozen: its one normal form, set once
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ConfigError(
                f"{str(self)!r}: give at least two increasing edges",
                hint=f"e.g. {self.name}:0,5,15,60",
            )
        if not all(math.isfinite(e) for e in edges):
            raise ConfigError(f"{str(self)!r}: the edges must be finite numbers")

    def __str__(self) -> str:
        return f"{self.name}:{_numbers(self.edges)}"

    def resolve(self, tiles: tuple[object, ...], period: Period) -> Dimension:
        labels = tuple(f"[{lo:g}, {hi:g}) {self.unit}" for lo, hi in itertools.pairwise(self.edges))
        sql = _bins(self.edges, self.value)
        return Dimension(self.name, labels, sql, ("trips",), distance=self.measures_distance)

    def value(self, time: str, dialect: Dialect) -> str:
        """SQL: the trip's measured value (``time``: the records' time column)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Distance(TripBins):
    """Trip distance bins (km) between declared ``edges``: ``Distance([0, 1, 2, 5])`` is
    ``"distance:0,1,2,5"``."""

    name = "distance"
    unit = "km"

    def value(self, time: str, dialect: Dialect) -> str:
        return DISTANCE_COLUMN  # added before counting (:func:`with_trip_distance`)

    @property
    def measures_distance(self) -> bool:
        return True


@dataclass(frozen=True)
class Duration(TripBins):
    """Trip duration bins (minutes) between declared ``edges``: ``"duration:0,5,15,60"``."""

    name = "duration"
    unit = "min"

    def value(self, time: str, dialect: Dialect) -> str:
        d = dialect
        return f"(({d.epoch_seconds('end_time')} - {d.epoch_seconds('start_time')}) / 60.0)"


@dataclass(frozen=True)
class TimeBins(TypedDimension):
    """Time bins of a fixed length over the declared period: ``TimeBins("1h")`` is
    ``"bin:1h"``."""

    length: str

    def __str__(self) -> str:
        return f"bin:{self.length}"

    def resolve(self, tiles: tuple[object, ...], period: Period) -> Dimension:
        return _time_bins(self.length, period, str(self))


@dataclass(frozen=True)
class Categorical(TypedDimension):
    """A categorical ``column`` of the input with its declared ``values`` (the public
    domain): ``Categorical("usertype", ["Subscriber", "Customer"])`` is
    ``"usertype:Subscriber,Customer"``. Values are compared as text; others go to the
    outliers cell."""

    column: str
    values: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(str(v) for v in self.values))
        check_categorical(self.column, self.values)

    def __str__(self) -> str:
        return f"{self.column}:{','.join(self.values)}"

    def resolve(self, tiles: tuple[object, ...], period: Period) -> Dimension:
        values = self.values
        return Dimension(
            self.column, tuple(values), _categorical(self.column, values), reads=(self.column,)
        )

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.column,)


#: a dimension as ``Session.counts`` takes it: typed, or its spelling (parsed there, once)
DimensionLike = str | TypedDimension


def spelling(dim: DimensionLike) -> str:
    """The one spelling of ``dim`` (recorded in ``metadata.json``'s ``by``, plans, messages)."""
    return str(dim).strip()


def check_categorical(column: str, values: Sequence[str]) -> None:
    """Refuse a categorical dimension that cannot be spelled or would shadow a record column."""
    if not column or not column.isidentifier():
        raise ConfigError(
            f"a categorical column must be a plain column name, got {column!r}",
            hint="letters, digits and _ (map another name with --columns NAME=<your column>)",
        )
    if column in CANONICAL_COLUMNS or column in NAMED:
        raise ConfigError(
            f"{column!r} is a record column or a dimension of its own, not a categorical column",
            hint=f"name another column (not one of {', '.join(sorted(CANONICAL_COLUMNS))})",
        )
    if not values or any(not v or "," in v for v in values) or len(set(values)) != len(values):
        raise ConfigError(
            f"{column}: declare its values, each once, non-empty and without commas",
            hint=f"e.g. {column}:bike,car,walk",
        )


# -- the vocabulary ---------------------------------------------------------------------------
def _tile(column: str) -> CellSql:
    return lambda _t, _d, k: f"CASE WHEN {column} >= 0 AND {column} < {k} THEN {column} ELSE -1 END"


def _zone(_t: str, _d: Dialect, k: int) -> str:
    return f"CASE WHEN tile >= 0 AND tile < {k} THEN tile ELSE {k} END"


def _bins(edges: Sequence[float], expr: Callable[[str, Dialect], str]) -> CellSql:
    def sql(time: str, dialect: Dialect, _k: int) -> str:
        x = expr(time, dialect)
        arms = " ".join(
            f"WHEN {x} >= {lo!r} AND {x} < {hi!r} THEN {i}"
            for i, (lo, hi) in enumerate(itertools.pairwise(edges))
        )
        return f"CASE {arms} ELSE -1 END"

    return sql


def _categorical(column: str, values: Sequence[str]) -> CellSql:
    from privmob.data.reading import ident

    def sql(_t: str, _d: Dialect, _k: int) -> str:
        arms = " ".join(
            "WHEN '" + v.replace("'", "''") + f"' THEN {i}" for i, v in enumerate(values)
        )
        return f"CASE CAST({ident(column)} AS VARCHAR) {arms} ELSE -1 END"

    return sql


def _time_bins(length: str, period: Period, spec: str) -> Dimension:
    import pandas as pd

    from privmob.domain import time_grid

    if period.start is None or period.end is None:
        raise ConfigError(
            f"{spec!r} cuts the declared period: declare its start and end",
            hint="e.g. "
            + spelled(
                "--start 2024-01-01 --end 2024-01-08",
                'period=pm.Period("2024-01-01", "2024-01-08")',
            ),
        )
    grid = time_grid(period.start.isoformat(sep=" "), period.end.isoformat(sep=" "), length)
    width = (grid[1] - grid[0]) // pd.Timedelta(microseconds=1)
    start, end = (f"TIMESTAMP '{t.isoformat(sep=' ')}'" for t in (period.start, period.end))
    last = len(grid) - 1

    def sql(time: str, d: Dialect, _k: int) -> str:
        # whole microseconds, not seconds: a declared start with a fraction of a second must
        # not move a time into the next bin; clamped to the public bins as Period.bin_sql is
        since = f"{d.epoch_micros(time)} - {d.epoch_micros(start)}"
        index = f"LEAST(GREATEST(CAST(floor(({since}) / {width}) AS BIGINT), 0), {last})"
        return f"CASE WHEN {time} >= {start} AND {time} < {end} THEN {index} ELSE -1 END"

    return Dimension("bin", tuple(grid), sql)


_VOCABULARY = (
    "use origin, destination, tile, zone, period, bin:LENGTH, hour, weekday, "
    "duration:EDGES (minutes), distance:EDGES (km) or COLUMN:VALUES (a categorical "
    "column), e.g. duration:0,5,15,60 or usertype:Subscriber,Customer"
)


def parse_dimension(text: str) -> TypedDimension:
    """The typed dimension spelled ``text`` (see the module's docstring): the one reading of a
    dimension's text, at the edges (``--by``, a Session caller's or a kind declaration's
    strings)."""
    spec = text.strip()
    name, colon, arg = spec.partition(":")
    if colon and name in NAMED and name not in ("bin", "duration", "distance"):
        raise ConfigError(
            f"{spec!r}: {name} has its own labels and takes no edges or values",
            hint=f"write {name} alone; a column of the input named {name} cannot be counted",
        )
    if name in LABELLED:
        return Named(name)
    if name == "bin" and arg:
        return TimeBins(arg)
    if name in ("duration", "distance"):
        edges = _edges(arg, spec)
        return Duration(edges) if name == "duration" else Distance(edges)
    if colon and name not in NAMED:
        return Categorical(name, [v.strip() for v in arg.split(",")])
    raise ConfigError(f"unknown count dimension {spec!r}", hint=_VOCABULARY)


def as_dimension(dim: DimensionLike) -> TypedDimension:
    """``dim`` typed: a typed dimension itself (the same object), its text parsed."""
    return parse_dimension(dim) if isinstance(dim, str) else dim


def dimension(spec: DimensionLike, tile_ids: Sequence[object], period: Period) -> Dimension:
    """The dimension ``spec`` (typed or its spelling) over public labels."""
    return as_dimension(spec).resolve(tuple(tile_ids), period)


def _edges(text: str, spec: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"cannot read the bin edges of {spec!r}") from exc


def split_dimensions(text: str) -> tuple[str, ...]:
    """The dimensions of a comma-separated ``--by``: a comma separates dimensions, except
    inside the edges or values after ``NAME:``, which run to the next known dimension name
    (``origin,duration:0,5,15,hour`` is origin, duration:0,5,15 and hour)."""
    out: list[str] = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        name = token.partition(":")[0]
        if out and ":" in out[-1] and ":" not in token and name not in NAMED:
            out[-1] += f",{token}"
        else:
            out.append(token)
    return tuple(out)


def parse_dimensions(text: str) -> tuple[TypedDimension, ...]:
    """The typed dimensions of a comma-separated ``--by`` (:func:`split_dimensions`)."""
    return tuple(parse_dimension(d) for d in split_dimensions(text))


def needs(by: Sequence[TypedDimension]) -> tuple[tuple[str, ...], bool]:
    """What the records counted ``by`` these dimensions must carry (before any tile or period
    is known): the categorical columns, and whether the trip distance is read."""
    carry = tuple(c for b in by for c in b.reads)
    return carry, any(b.measures_distance for b in by)


def haversine_km(lat1: str, lng1: str, lat2: str, lng2: str, cos_lat2: str | None = None) -> str:
    """Great-circle distance in km (SQL: the trip distance and the report's ``jump_length``);
    ``cos_lat2``: a column holding ``cos(radians(lat2))`` already
    (the same float, computed once per user instead of once per row)."""
    cos2 = cos_lat2 or f"cos(radians({lat2}))"
    h = (
        f"pow(sin(radians({lat2} - {lat1}) / 2), 2) + cos(radians({lat1})) * "
        f"{cos2} * pow(sin(radians({lng2} - {lng1}) / 2), 2)"
    )
    return f"(2 * 6371.0088 * asin(sqrt(least(1.0, {h}))))"


#: the coordinates of one-row trips' ends (when the input gives them)
ENDS = ("origin_lat", "origin_lng", "destination_lat", "destination_lng")


def with_trip_distance(trips: Loaded, tessellation: Tessellation) -> Loaded:
    """``trips`` with :data:`DISTANCE_COLUMN`: the great-circle km between the trip's start and
    end coordinates when the trips carry them, else between the centroids of its origin and
    destination tiles (public points of the tessellation; NULL for a trip outside every tile,
    which the distance dimension counts in the outliers cell). Rebuilt per user bucket."""
    from privmob.engine.relation import new_name

    engine, view = trips.engine, new_name("trips")
    if set(ENDS) <= set(trips.columns):
        sql = f"SELECT *, {haversine_km(*ENDS)} AS {DISTANCE_COLUMN} FROM {trips.view}"
    else:
        points = new_name("tile_points")
        lnglat = tessellation.centroids()
        engine.register(
            points,
            pa.table(
                {
                    "tile": pa.array(range(len(lnglat)), pa.int64()),
                    "lat": pa.array(lnglat[:, 1], pa.float64()),
                    "lng": pa.array(lnglat[:, 0], pa.float64()),
                }
            ),
        )
        # no centroid, no distance: NULL (the outliers cell). The check is needed: LEAST
        # skips a NULL in DuckDB and Spark, so the haversine of a missing end is half the
        # Earth's circumference (20,015 km), which an open last bin would count
        km = haversine_km("o_.lat", "o_.lng", "d_.lat", "d_.lng")
        known = "o_.tile IS NOT NULL AND d_.tile IS NOT NULL"
        sql = (
            f"SELECT t_.*, CASE WHEN {known} THEN {km} END AS {DISTANCE_COLUMN} "
            f"FROM {trips.view} AS t_ "
            f"LEFT JOIN {points} AS o_ ON t_.origin = o_.tile "
            f"LEFT JOIN {points} AS d_ ON t_.destination = d_.tile"
        )
    engine.create_view(view, sql)
    return trips.derived(view, trips.shape, lambda part: with_trip_distance(part, tessellation))


def measures(dims: Sequence[Dimension], records: Loaded) -> dict[str, str]:
    """What the measured dimensions of a release counted (its ``params``): the trip distance's
    definition, from the columns of the ``records`` read (public: the input's layout)."""
    if not any(d.distance for d in dims):
        return {}
    if set(ENDS) <= set(records.columns):
        return {"trip_distance": "great-circle km between the trip's start and end coordinates"}
    return {
        "trip_distance": "great-circle km between the centroids of the trip's origin and "
        "destination tiles"
    }
