"""Loading and validating input records into the engine (SPEC section 0).

Three input shapes, each read from CSV (any delimiter, gzip ok), Parquet, or an in-memory
pandas / Polars / Arrow table, with an optional column mapping for other names:

* trips (one row per trip): ``uid, start_time[, end_time][, tid]`` plus ``origin, destination``
  (tile ids) or ``origin_lat, origin_lng, destination_lat, destination_lng``;
* trip points (dp_mobility_report's shape): ``uid, tid, datetime, lat, lng[, tile_id]``;
* events (CDR, check-ins, GPS fixes): ``uid, datetime`` plus ``lat, lng`` or ``cell_id`` with a
  separate cells table ``cell_id, lat, lng``.

Each loader validates the input in the engine (one aggregate pass; the first bad row is looked
up only when something is wrong) and raises :class:`~privmob.errors.InputError` naming the file,
the column, the row number and the kind of problem, never a person's values
(:mod:`privmob.data.diagnose`). It then exposes a view with the canonical schema:

* trips: ``uid, tid, start_time, end_time, origin, destination``
* trip points: ``uid, tid, time, lat, lng, tile``
* events: ``uid, time, tile`` (+ ``lat, lng`` or ``cell_id`` when given)

Times are local wall-clock TIMESTAMPs in the study time zone: naive inputs are taken to be in
``timezone`` (default UTC); inputs with an offset are converted to it. Tiles are integer indexes
into the tessellation (``-1`` = outside every tile: such records go to the outliers cell, never
dropped). Input files are only read, never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Unpack

import numpy as np
import pyarrow as pa

from privmob.data.fingerprint import coordinate_text, identity_text
from privmob.data.reading import (
    INT64_SAFE_TYPES,
    Reading,
    column_types,
    csv_rows_estimate,
    ident,
    read_raw,
    reads_csv,
    refuse_unknown_reading,
    resolve_columns,
)
from privmob.data.tile_assignment import (
    coordinate_tiles,
    grid_tiles_sql,
    tile_index,
    tiles_fingerprint,
)
from privmob.data.times import (
    canonical_time,
    check_timezone,
    input_zone_checks,
    native_time,
    scanned_times,
    time_checks,
    time_expr,
)
from privmob.data.validation import (
    Check,
    Validated,
    coord_checks,
    float_expr,
    parsed_view,
    relabel,
    uid_check,
    validate,
)
from privmob.engine.base import Engine
from privmob.engine.buckets import PARTS_MARGIN, POINT_PARTS_MARGIN, parts_for
from privmob.engine.relation import Loaded, new_name
from privmob.errors import ConfigError, InputError

if TYPE_CHECKING:
    from privmob.data.tessellation import Tiling


class Opened(NamedTuple):
    """An input opened by :func:`_opened`: its raw view, its display name, and how it is read."""

    raw: str
    display: str
    columns: Mapping[str, str] | None
    timezone: str


def _opened(
    engine: Engine,
    source: Any,
    reading: Reading,
    *,
    header: bool = True,
    names: list[str] | None = None,
) -> Opened:
    """``source`` exposed as a raw view (:func:`~privmob.data.reading.read_raw`) as
    ``reading`` says, its time zone checked first (a wrong zone is refused before the input
    is read)."""
    refuse_unknown_reading(reading)
    timezone = check_timezone(reading.get("timezone", "UTC"))
    raw, display = read_raw(
        engine, source, delimiter=reading.get("delimiter"), header=header, names=names
    )
    return Opened(raw, display, reading.get("columns"), timezone)


def _check_input_zone(
    parsed: dict[str, str],
    checks: list[Check],
    name: str,
    cols: Mapping[str, str],
    types: Mapping[str, str],
    timezone: str,
) -> None:
    """Add what ``--input-timezone`` asks of the time column ``name`` to the parsed columns and
    the checks of a loader (:func:`privmob.data.times.input_zone_checks`)."""
    zoned, zone_checks = input_zone_checks(name, cols[name], types[cols[name]], timezone)
    parsed |= zoned
    checks += zone_checks


def load_events(
    source: Any,
    *,
    engine: Engine,
    tessellation: Tiling,
    cells: Any = None,
    cell_columns: Mapping[str, str] | None = None,
    header: bool = True,
    names: list[str] | None = None,
    carry: Sequence[str] = (),
    **reading: Unpack[Reading],
) -> Loaded:
    """Events (``uid, datetime`` + ``lat, lng`` or ``cell_id`` with ``cells``) → canonical view.

    Canonical columns: ``uid, time, tile`` plus ``lat, lng`` (coordinates) or ``cell_id``.
    An event whose cell id is not in ``cells`` gets tile -1 (the outliers cell). ``cells`` is
    a cells file or frame, or a :class:`CellsTable` loaded before (then ``tessellation`` is not
    used: the table's tiles are). ``carry``: more input columns the view keeps under their own
    names (:func:`carried_sql`; a missing one is refused naming the file and the column).
    ``reading``: the column mapping, time zone and delimiter (:class:`Reading`).
    """
    raw, display, columns, timezone = _opened(engine, source, reading, header=header, names=names)
    use_cells = cells is not None
    required = ["uid", "datetime"] + (["cell_id"] if use_cells else ["lat", "lng"]) + [*carry]
    cols = resolve_columns(engine, raw, display, required=required, optional=[], mapping=columns)
    types = column_types(engine, raw)
    dialect = engine.dialect
    parsed = {
        "datetime": time_expr(cols["datetime"], types[cols["datetime"]], timezone, dialect=dialect),
        "datetime_raw": ident(cols["datetime"]),
    }
    checks = [uid_check(cols["uid"]), *time_checks("datetime", types[cols["datetime"]])]
    _check_input_zone(parsed, checks, "datetime", cols, types, timezone)
    if not use_cells:
        parsed |= {"lat": float_expr(cols["lat"]), "lng": float_expr(cols["lng"])}
        checks += coord_checks("lat", "lng")
    content = {
        "uid": identity_text(cols["uid"], types[cols["uid"]]),
        "time": canonical_time(engine, "datetime", types[cols["datetime"]], timezone),
    }
    content |= (
        {"cell_id": identity_text(cols["cell_id"], types[cols["cell_id"]])}
        if use_cells
        else {"lat": coordinate_text("_p_lat"), "lng": coordinate_text("_p_lng")}
    )
    checked = _validated_input(
        engine, source, raw, display, cols=cols, types=types, parsed=parsed, checks=checks,
        content=content, times={"datetime": cols["datetime"]}, timezone=timezone,
    )  # fmt: skip
    # not parsed into user parts: most releases of events count them in one pass (homes need
    # 4 B per event), where writing 127M events from CSV in 4 parts cost 4.6 s more than one
    # file; a count in buckets writes only the columns it reads (docs/scale.md)
    pview = checked.relation  # the input parsed once, where the engine can
    view = new_name("events")
    if use_cells:
        if isinstance(cells, CellsTable):  # loaded before (its tiles already assigned)
            cell_view, int_keys = cells.view, cells.int_keys
        else:
            cell_view, int_keys = _cells_table(cells, engine, tessellation, cell_columns)
        # the cell's canonical id text on both sides (7, 7.0 and "7.0" are one cell)
        cid = identity_text(cols["cell_id"], types[cols["cell_id"]], table="e")
        on = f"{cid} = c.cell_key"
        if types[cols["cell_id"]] in INT64_SAFE_TYPES and int_keys:
            # integer ids on both sides: the same match as on their text, on integers
            on = f"CAST(e.{ident(cols['cell_id'])} AS BIGINT) = c.cell_int"
        # an event at a cell id absent from the cells table is at no known place: tile -1,
        # the noisy outliers cell (as a point outside the tessellation), never a refusal of
        # the whole input (one neighbour must not decide whether there is a release)
        engine.create_view(
            view,
            (
                f"SELECT e.{ident(cols['uid'])} AS uid, e._p_datetime AS time, "
                f"COALESCE(c.tile, -1) AS tile, {cid} AS cell_id{carried_sql(carry, cols)} "
                f"FROM {pview} AS e LEFT JOIN {cell_view} AS c ON {on}"
            ),
        )
    else:
        lookup = coordinate_tiles(
            engine, tessellation, f"SELECT _p_lng AS lng, _p_lat AS lat FROM {pview}"
        )
        engine.create_view(
            view,
            (
                f"SELECT e.{ident(cols['uid'])} AS uid, e._p_datetime AS time, t.tile AS tile, "
                f"e._p_lat AS lat, e._p_lng AS lng{carried_sql(carry, cols)} "
                f"FROM {pview} AS e JOIN {lookup} AS t "
                f"ON e._p_lng = t.lng AND e._p_lat = t.lat"
            ),
        )
    return _bound(view, display, "events", engine, checked, tessellation)


def _validated_input(
    engine: Engine,
    source: Any,
    raw: str,
    display: str,
    *,
    cols: dict[str, str],
    types: dict[str, str],
    parsed: dict[str, str],
    checks: list[Check],
    content: dict[str, str],
    times: dict[str, str],
    timezone: str,
    user: str | None = None,
    parts_margin: int = PARTS_MARGIN,
) -> Validated:
    """The validation pass of an input read as the view ``raw`` (columns ``cols``: canonical
    name -> the input's, of ``types``): its ``parsed`` expressions (columns ``_p_<name>``),
    every row checked by ``checks`` (named by the input's columns in messages), the content
    fingerprint over ``content``, the ``times`` columns scanned for the input time zone; the
    input is parsed once where that pays (:func:`_parse_once`), in user parts by its ``user``
    column where the engine's memory limit will split the users into buckets
    (:class:`privmob.engine.relation.UserParts`; ``user``: None where the loader's canonical
    view cannot be rebuilt over a part of the input; ``parts_margin``: see
    :func:`privmob.engine.buckets.parts_for`)."""
    pview = parsed_view(engine, raw, parsed)
    relabel(checks, cols)
    keep = [cols[k] for k in cols if k not in parsed]
    once = _parse_once(engine, source, keep)
    count = 1
    if once is not None and user is not None:
        limit = getattr(engine, "memory_limit", None)
        count = parts_for(csv_rows_estimate(source), limit, parts_margin)
    return validate(
        engine, raw, pview, display, checks, content, parse_once=once,
        scanned=scanned_times(engine, raw, parsed, times, types, timezone, keep),
        parts=(user, count) if user is not None and count > 1 else None,
    )  # fmt: skip


def _view_over(engine: Engine, shape: str, select: Callable[[str], str]) -> Callable[[str], str]:
    """Creates a loader's canonical view (``select`` of a relation of the parsed input) over
    a relation of the parsed input and returns its name: the whole input at loading, one user
    bucket's parts when counting (:class:`privmob.engine.relation.UserParts`)."""

    def over(relation: str) -> str:
        view = new_name(shape)
        engine.create_view(view, select(relation))
        return view

    return over


def _bound(
    view: str,
    display: str,
    shape: str,
    engine: Engine,
    checked: Validated,
    tessellation: Tiling,
    rebase: Callable[[str], str] | None = None,
) -> Loaded:
    """The canonical relation ``view`` of a validated input, bound to its content (fingerprint,
    rows, people) and to the tessellation its tiles were assigned with; ``rebase``
    (:func:`_view_over`) makes ``view`` again over a part of the parsed input, where the input
    was parsed into user parts."""
    parts = checked.parts
    return Loaded(
        view,
        display,
        shape,
        engine,
        engine.columns(view),
        fingerprint=checked.fingerprint,
        rows=checked.rows,
        people_source=checked.people,
        older_source=checked.older,
        tiles=tiles_fingerprint(tessellation),
        parts=None if parts is None or rebase is None else replace(parts, rebase=rebase),
    )


def carried_sql(carry: Sequence[str], cols: Mapping[str, str]) -> str:
    """The select-list tail keeping the input columns ``carry`` (of the parsed input ``e``)
    under their own names; they are not part of the content fingerprint (the records are)."""
    return "".join(f", e.{ident(cols[c])} AS {ident(c)}" for c in carry)


def _parse_once(engine: Engine, source: Any, keep: list[str]) -> list[str] | None:
    """The input columns to keep when the input is parsed once (CSV text, whose second read and
    parse would cost as much as the first: DuckDB writes it to a private file, Spark keeps it in
    its cache), else None (the parsed view is read again: Parquet and in-memory tables are
    cheap to scan; on Spark, building its in-memory cache of 10M Parquet trips cost 23 s where
    the validation pass reading the file costs 4 s, and counting from the cache was slower)."""
    return keep if engine.dialect.parses_csv_once and reads_csv(source) else None


@dataclass(frozen=True)
class CellsTable:
    """A cells table loaded and validated once (:func:`load_cells_table`): its view
    ``cell_key, lat, lng, cell_int, tile`` and whether every cell has an integer key. Passed as
    ``cells`` to :func:`load_events`, the events join on it without loading the table again."""

    view: str
    int_keys: bool


def load_cells_table(
    cells: Any, *, engine: Engine, tessellation: Tiling, columns: Mapping[str, str] | None = None
) -> CellsTable:
    """Cells (towers) ``cell_id, lat, lng``, validated, their tiles assigned by
    ``tessellation`` (one ``assign`` call on every cell's position, in the table's order)."""
    return CellsTable(*_cells_table(cells, engine, tessellation, columns))


def load_cells(
    cells: Any, *, engine: Engine, tessellation: Tiling, columns: Mapping[str, str] | None = None
) -> str:
    """Cells (towers) ``cell_id, lat, lng`` → view ``cell_key (VARCHAR), lat, lng, cell_int,
    tile`` (``cell_int``: the id as BIGINT when the id column is an integer type, else NULL)."""
    return load_cells_table(cells, engine=engine, tessellation=tessellation, columns=columns).view


def _cells_table(
    cells: Any, engine: Engine, tessellation: Tiling, columns: Mapping[str, str] | None
) -> tuple[str, bool]:
    """:func:`load_cells`' view, and whether every cell has an integer key (known from the
    cells fetched, without another query: on Spark a job of its own)."""
    raw, display = read_raw(engine, cells)
    cols = resolve_columns(
        engine, raw, display, required=["cell_id", "lat", "lng"], optional=[], mapping=columns
    )
    pview = parsed_view(
        engine, raw, {"lat": float_expr(cols["lat"]), "lng": float_expr(cols["lng"])}
    )
    checks = [
        Check(
            cols["cell_id"],
            f"{ident(cols['cell_id'])} IS NULL",
            "missing cell id",
            "every cell needs an id",
        ),
        *coord_checks("lat", "lng"),
    ]
    relabel(checks, cols)
    validate(engine, raw, pview, display, checks)
    # integer ids also get an integer key: events join on it, much faster than on text
    id_type = column_types(engine, raw)[cols["cell_id"]]
    int_key = id_type in INT64_SAFE_TYPES
    cell_int = f"CAST({ident(cols['cell_id'])} AS BIGINT)" if int_key else "CAST(NULL AS BIGINT)"
    key = identity_text(cols["cell_id"], id_type)  # the events' cell ids are read alike
    df = engine.fetch(
        f"SELECT {key} AS cell_key, _p_lat AS lat, _p_lng AS lng, {cell_int} AS cell_int "
        f"FROM {pview}"
    )
    # every cell's key is here anyway: duplicates are found in it, not by a query of their own
    dup = df["cell_key"][df["cell_key"].duplicated()]
    if len(dup):
        raise InputError(
            f"duplicate cell id '{dup.iloc[0]!s}'",
            source=display,
            column=cols["cell_id"],
            example={cols["cell_id"]: dup.iloc[0]},
            hint="each cell id must appear once in the cells table",
        )
    df["tile"] = np.asarray(
        tessellation.assign(df["lng"].to_numpy(), df["lat"].to_numpy()), dtype=np.int32
    )
    view = new_name("cells")
    engine.register(view, pa.Table.from_pandas(df, preserve_index=False))
    return view, bool(int_key and len(df) and df["cell_int"].notna().all())


def load_trip_points(
    source: Any,
    *,
    engine: Engine,
    tessellation: Tiling,
    carry: Sequence[str] = (),
    **reading: Unpack[Reading],
) -> Loaded:
    """Trip points (``uid, tid, datetime, lat, lng[, tile_id]``) → canonical view
    ``uid, tid, time, lat, lng, tile`` (and the ``carry`` columns, as :func:`load_events`)."""
    raw, display, columns, timezone = _opened(engine, source, reading)
    cols = resolve_columns(
        engine,
        raw,
        display,
        required=["uid", "tid", "datetime", "lat", "lng", *carry],
        optional=["tile_id"],
        mapping=columns,
    )
    types = column_types(engine, raw)
    parsed = {
        "datetime": time_expr(
            cols["datetime"],
            types[cols["datetime"]],
            timezone,
            dialect=engine.dialect,
        ),
        "datetime_raw": ident(cols["datetime"]),
        "lat": float_expr(cols["lat"]),
        "lng": float_expr(cols["lng"]),
    }
    checks = [
        uid_check(cols["uid"]),
        Check(
            cols["tid"],
            f"{ident(cols['tid'])} IS NULL",
            "missing trip id",
            "every point needs the id of its trip",
        ),
        *time_checks("datetime", types[cols["datetime"]]),
        *coord_checks("lat", "lng"),
    ]
    _check_input_zone(parsed, checks, "datetime", cols, types, timezone)
    content = {
        "uid": identity_text(cols["uid"], types[cols["uid"]]),
        "tid": identity_text(cols["tid"], types[cols["tid"]]),
        "time": canonical_time(engine, "datetime", types[cols["datetime"]], timezone),
        "lat": coordinate_text("_p_lat"),
        "lng": coordinate_text("_p_lng"),
    }
    if "tile_id" in cols:
        content["tile_id"] = identity_text(cols["tile_id"], types[cols["tile_id"]])
    checked = _validated_input(
        engine, source, raw, display, cols=cols, types=types, parsed=parsed, checks=checks,
        content=content, times={"datetime": cols["datetime"]}, timezone=timezone,
        user=cols["uid"], parts_margin=POINT_PARTS_MARGIN,
    )  # fmt: skip
    pview = checked.relation  # the input parsed once, where the engine can
    canonical = (
        f"e.{ident(cols['uid'])} AS uid, e.{ident(cols['tid'])} AS tid, "
        f"e._p_datetime AS time, e._p_lat AS lat, e._p_lng AS lng{carried_sql(carry, cols)}"
    )
    grid = getattr(tessellation, "grid", None)
    regular = grid is not None and grid_tiles_sql(grid, "p_", "lng", "lat", engine.dialect)
    if "tile_id" not in cols:
        # tiles from the coordinates (grid arithmetic or point in polygon): the points are
        # derived from the parsed input, so user buckets are written before the tiles are
        # assigned, and each bucket assigns its own coordinates
        over = _view_over(
            engine, "untiled", lambda parsed: f"SELECT {canonical} FROM {parsed} AS e"
        )
        untiled = _bound(
            over(pview), display, "trip_points_untiled", engine, checked, tessellation, over
        )
        if regular:
            return _grid_tiled_points(untiled, grid, tuple(carry))
        return _polygon_tiled_points(untiled, tessellation, tuple(carry), on_read=True)
    tile_expr, tile_sql = tile_index(
        engine, tessellation, cols["tile_id"], types[cols["tile_id"]], "t"
    )
    over = _view_over(
        engine,
        "points",
        lambda parsed: f"SELECT {canonical}, {tile_expr} AS tile FROM {parsed} AS e {tile_sql}",
    )
    return _bound(over(pview), display, "trip_points", engine, checked, tessellation, over)


def _polygon_tiled_points(
    untiled: Loaded, tessellation: Tiling, carry: tuple[str, ...] = (), *, on_read: bool = False
) -> Loaded:
    """Canonical trip points with ``tile`` assigned by point in polygon to the distinct
    coordinates of ``untiled`` (``uid, tid, time, lat, lng`` and the ``carry`` columns)
    (:func:`_polygon_tiled`)."""
    more = "".join(f", e.{ident(c)}" for c in carry)

    def select(lookup: str) -> str:
        return (
            f"SELECT e.uid, e.tid, e.time, e.lat, e.lng, COALESCE(t.tile, -1) AS tile{more} "
            f"FROM {untiled.view} AS e LEFT JOIN {lookup} AS t "
            "ON e.lng = t.lng AND e.lat = t.lat"
        )

    return _polygon_tiled(
        untiled,
        tessellation,
        "trip_points",
        ["uid", "tid", "time", "lat", "lng", "tile", *carry],
        f"SELECT lng, lat FROM {untiled.view}",
        select,
        lambda b: _polygon_tiled_points(b, tessellation, carry),
        on_read=on_read,
    )


def _polygon_tiled_trips(
    untiled: Loaded,
    tessellation: Tiling,
    coordinates: bool,
    carry: tuple[str, ...] = (),
    *,
    on_read: bool = False,
) -> Loaded:
    """Canonical one-row trips with ``origin`` and ``destination`` assigned by point in polygon
    to the distinct trip ends of ``untiled`` (``uid, tid, start_time, end_time``, the ends'
    coordinates and the ``carry`` columns), the coordinates kept with ``coordinates``
    (:func:`_polygon_tiled`)."""
    more = "".join(f", e.{c}" for c in _TRIP_ENDS) if coordinates else ""
    more += "".join(f", e.{ident(c)}" for c in carry)
    at = "ON e.{0}_lng = {1}.lng AND e.{0}_lat = {1}.lat"

    def select(lookup: str) -> str:
        return (
            "SELECT e.uid, e.tid, e.start_time, e.end_time, COALESCE(o.tile, -1) AS origin, "
            f"COALESCE(d.tile, -1) AS destination{more} FROM {untiled.view} AS e "
            f"LEFT JOIN {lookup} AS o {at.format('origin', 'o')} "
            f"LEFT JOIN {lookup} AS d {at.format('destination', 'd')}"
        )

    kept = list(_TRIP_ENDS) if coordinates else []
    return _polygon_tiled(
        untiled,
        tessellation,
        "trips",
        ["uid", "tid", "start_time", "end_time", "origin", "destination", *kept, *carry],
        (
            f"SELECT origin_lng AS lng, origin_lat AS lat FROM {untiled.view} UNION "
            f"SELECT destination_lng, destination_lat FROM {untiled.view}"
        ),
        select,
        lambda b: _polygon_tiled_trips(b, tessellation, coordinates, carry),
        on_read=on_read,
    )


def _polygon_tiled(
    untiled: Loaded,
    tessellation: Tiling,
    shape: str,
    columns: list[str],
    pairs_sql: str,
    select: Callable[[str], str],
    again: Callable[[Loaded], Loaded],
    *,
    on_read: bool,
) -> Loaded:
    """``untiled`` with its tiles assigned by point in polygon to the distinct (lng, lat)
    pairs of ``pairs_sql`` and joined back (``select`` of the lookup's name: the relation's
    ``columns``). Rebuilt per user bucket by :mod:`privmob.engine.buckets` (``again``), so the
    buckets are written from the untiled records and each bucket's lookup holds only its own
    coordinates (a join to the whole input's lookup spilled at 100M trips under 4 GB, and did
    not fit in DuckDB's share of a 512 MB limit for 5M points). ``on_read``: the whole input's
    lookup is built only when the relation is read in one pass (a run in buckets never does)."""
    eng = untiled.engine
    view = new_name(shape.replace("-", "_"))

    def create() -> None:
        eng.create_view(view, select(coordinate_tiles(eng, tessellation, pairs_sql)))

    if on_read:
        return untiled.derived_on_read(view, shape, columns, create, again)
    create()
    return untiled.derived(view, shape, again)


def _grid_tiled_points(untiled: Loaded, grid: Any, carry: tuple[str, ...] = ()) -> Loaded:
    """Canonical trip points with ``tile`` computed on a regular grid from ``untiled``
    (``uid, tid, time, lat, lng`` and the ``carry`` columns); rebuilt per user bucket by
    :mod:`privmob.engine.buckets`."""
    eng = untiled.engine
    sql = grid_tiles_sql(grid, untiled.view, "lng", "lat", eng.dialect)
    view = new_name("points")
    more = "".join(f", {ident(c)}" for c in carry)
    eng.create_view(
        view, f"SELECT uid, tid, time, lat, lng, _pm_tile AS tile{more} FROM ({sql}) AS g_"
    )
    return untiled.derived(view, "trip_points", lambda b: _grid_tiled_points(b, grid, carry))


def end_coordinates(order: str) -> str:
    """SQL columns of a trip's first and last point's coordinates (``origin_lat, origin_lng,
    destination_lat, destination_lng``), the points ordered by ``order``: the ends a trip
    distance is measured between (:func:`privmob.releases.dimensions.with_trip_distance`)."""
    return (
        f", arg_min(lat, {order}) AS origin_lat, arg_min(lng, {order}) AS origin_lng, "
        f"arg_max(lat, {order}) AS destination_lat, arg_max(lng, {order}) AS destination_lng"
    )


def trip_ends(
    points: Loaded, order: str, coordinates: bool, again: Callable[[Loaded], Loaded]
) -> Loaded:
    """One row per trip of the trip points ``points``: its first point by ``order`` is its
    origin, its last its destination; with ``coordinates``, also their coordinates
    (:func:`end_coordinates`), known also for an end outside the tessellation. ``again``: the
    same derivation of another input (:meth:`Loaded.derived`)."""
    view = new_name("trips")
    ends = end_coordinates(order) if coordinates else ""
    points.engine.create_view(
        view,
        (
            "SELECT uid, tid, min(time) AS start_time, max(time) AS end_time, "
            f"arg_min(tile, {order}) AS origin, arg_max(tile, {order}) AS destination{ends} "
            f"FROM {points.view} GROUP BY uid, tid"
        ),
    )
    return points.derived(view, "trips", again)


def trips_from_points(points: Loaded, coordinates: bool = False) -> Loaded:
    """One row per trip from trip points: first point = origin, last point = destination;
    with ``coordinates``, also their coordinates (:func:`end_coordinates`), known also for an
    end outside the tessellation."""
    return trip_ends(points, "time", coordinates, lambda p: trips_from_points(p, coordinates))


def trip_points_from_trips(trips: Loaded) -> Loaded:
    """Trip points from one-row trips with coordinates (:func:`load_trips` with
    ``coordinates=True``): each trip becomes its origin at its start time and its destination
    at its end time, so the mobility report reads them as ``od`` does."""
    view = new_name("points")
    trips.engine.create_view(
        view,
        (
            "SELECT uid, tid, start_time AS time, origin_lat AS lat, origin_lng AS lng, "
            f"origin AS tile FROM {trips.view} UNION ALL "
            "SELECT uid, tid, end_time, destination_lat, destination_lng, destination "
            f"FROM {trips.view}"
        ),
    )
    return trips.derived(view, "trip-points", trip_points_from_trips)


#: The coordinates of a one-row trip's ends (trips given by coordinates).
_TRIP_ENDS = ("origin_lat", "origin_lng", "destination_lat", "destination_lng")


def load_trips(
    source: Any,
    *,
    engine: Engine,
    tessellation: Tiling,
    uid_per_trip: bool = False,
    coordinates: bool = False,
    keep_coordinates: bool = False,
    carry: Sequence[str] = (),
    **reading: Unpack[Reading],
) -> Loaded:
    """One-row trips → canonical view ``uid, tid, start_time, end_time, origin, destination``
    (with ``coordinates``, also ``origin_lat, origin_lng, destination_lat, destination_lng``:
    trips given by coordinates only, refused otherwise).

    Origin and destination are tile ids (``origin``, ``destination``) or coordinates
    (``origin_lat, origin_lng, destination_lat, destination_lng``, or the bike-share names of
    :mod:`privmob.data.coordinate_trips`); tile ids not in the tessellation and coordinates
    outside it become ``-1`` (outliers). ``uid_per_trip`` (trip-level releases only): an
    input without a ``uid`` column makes each trip its own unit (uid = the trip id).
    ``keep_coordinates``: keep the ends' coordinates when the trips give them (no refusal when
    they do not); ``carry``: more input columns kept under their own names (as
    :func:`load_events`).
    """
    from privmob.data.coordinate_trips import NO_UID_HINT, coordinate_trip_columns

    raw, display, columns, timezone = _opened(engine, source, reading)
    available = {c.lower() for c in engine.columns(raw)}
    mapping = dict(columns or {})
    if "origin" not in mapping and "origin" not in available:
        mapping = coordinate_trip_columns(engine.columns(raw), mapping) or mapping
    no_uid = "uid" not in mapping and "uid" not in available
    if no_uid and not uid_per_trip and "origin_lat" in mapping:
        raise InputError(
            f"missing column 'uid' (columns found: {', '.join(engine.columns(raw))})",
            source=display,
            column="uid",
            hint=NO_UID_HINT,
        )
    uid_per_trip = uid_per_trip and no_uid
    by_coords = (
        "origin" not in mapping
        and "origin" not in available
        and ("origin_lat" in available or "origin_lat" in mapping)
    )
    ends = (
        ["origin_lat", "origin_lng", "destination_lat", "destination_lng"]
        if by_coords
        else ["origin", "destination"]
    )
    if coordinates and not by_coords:
        raise ConfigError(
            f"{display}: the mobility report needs trip points (uid, tid, datetime, lat, lng) "
            "or one-row trips with coordinates; these trips give their origin and destination "
            "as tile ids only",
            hint="give trips with start and end coordinates (origin_lat, origin_lng, "
            "destination_lat, destination_lng), or trip points (uid, tid, datetime, lat, lng)",
        )
    cols = resolve_columns(
        engine,
        raw,
        display,
        required=[*([] if uid_per_trip else ["uid"]), "start_time", *ends, *carry],
        optional=["end_time", "tid"],
        mapping=mapping,
    )
    types = column_types(engine, raw)
    dialect = engine.dialect
    parsed = {
        "start_time": time_expr(
            cols["start_time"], types[cols["start_time"]], timezone, dialect=dialect
        ),
        "start_time_raw": ident(cols["start_time"]),
    }
    checks = [*time_checks("start_time", types[cols["start_time"]])]
    for name in ("start_time", "end_time"):
        if name in cols:
            _check_input_zone(parsed, checks, name, cols, types, timezone)
    if not uid_per_trip:
        checks.insert(0, uid_check(cols["uid"]))
    if "end_time" in cols:
        parsed |= {
            "end_time": time_expr(
                cols["end_time"], types[cols["end_time"]], timezone, dialect=dialect
            ),
            "end_time_raw": ident(cols["end_time"]),
        }
        if not native_time(types[cols["end_time"]]):
            checks.append(
                Check(
                    "end_time",
                    "_p_end_time IS NULL AND _p_end_time_raw IS NOT NULL",
                    "unparsable timestamp",
                    "use ISO 8601 or epoch seconds",
                )
            )
    if by_coords:
        for end in ("origin", "destination"):
            parsed |= {
                f"{end}_lat": float_expr(cols[f"{end}_lat"]),
                f"{end}_lng": float_expr(cols[f"{end}_lng"]),
            }
            checks += coord_checks(f"{end}_lat", f"{end}_lng")
    else:
        checks += [
            Check(
                cols[e],
                f"{ident(cols[e])} IS NULL",
                f"missing {e} tile id",
                "every trip needs an origin and a destination",
            )
            for e in ends
        ]
    content = {} if uid_per_trip else {"uid": identity_text(cols["uid"], types[cols["uid"]])}
    content["start_time"] = canonical_time(
        engine, "start_time", types[cols["start_time"]], timezone
    )
    if "end_time" in cols:
        content["end_time"] = canonical_time(engine, "end_time", types[cols["end_time"]], timezone)
    if "tid" in cols:
        content["tid"] = identity_text(cols["tid"], types[cols["tid"]])
    for e in ends:
        content[e] = (
            coordinate_text(f"_p_{e}") if by_coords else identity_text(cols[e], types[cols[e]])
        )
    times: dict[str, str] = {k: cols[k] for k in ("start_time", "end_time") if k in cols}
    # the user id's column (the trip id's, each trip its own unit), where the trips of a part
    # of the input are those of whole users: not where the trip id is the row's number
    user = cols.get("tid") if uid_per_trip else (cols["uid"] if "tid" in cols else None)
    checked = _validated_input(
        engine, source, raw, display, cols=cols, types=types, parsed=parsed, checks=checks,
        content=content, times=times, timezone=timezone, user=user,
    )  # fmt: skip
    pview = checked.relation  # the input parsed once, where the engine can
    tid = ident(cols["tid"]) if "tid" in cols else "row_number() OVER ()"
    uid = f"e.{ident(cols['uid'])}" if not uid_per_trip else "0"  # replaced by tid below
    end = "_p_end_time" if "end_time" in cols else "_p_start_time"
    coordinates = coordinates or (keep_coordinates and by_coords)
    head = f"{uid} AS uid, {tid} AS tid, e._p_start_time AS start_time, e.{end} AS end_time"
    if by_coords:
        # the trips untiled (with their ends' coordinates): user buckets are written from
        # them, and each bucket assigns the tiles of its own trip ends (_polygon_tiled)
        tail = "".join(f", e._p_{c} AS {c}" for c in _TRIP_ENDS) + carried_sql(carry, cols)
        joins = ""
    else:
        o_expr, o_join = tile_index(
            engine, tessellation, cols["origin"], types[cols["origin"]], "o"
        )
        d_expr, d_join = tile_index(
            engine, tessellation, cols["destination"], types[cols["destination"]], "d"
        )
        tail = f", {o_expr} AS origin, {d_expr} AS destination{carried_sql(carry, cols)}"
        joins = f" {o_join} {d_join}"
    shape = "untiled" if by_coords else "trips"
    over = _view_over(
        engine, shape, lambda parsed: f"SELECT {head}{tail} FROM {parsed} AS e{joins}"
    )
    if uid_per_trip:  # each trip its own unit: uid = tid (computed once, then copied)
        kept = "".join(f", {c}" for c in _TRIP_ENDS) if by_coords else ", origin, destination"
        kept += "".join(f", {ident(c)}" for c in carry)
        trips = over

        def per_trip(parsed: str) -> str:
            return f"SELECT tid AS uid, tid, start_time, end_time{kept} FROM {trips(parsed)}"

        over = _view_over(engine, shape, per_trip)
    view = over(pview)
    if by_coords:
        untiled = _bound(view, display, "trips_untiled", engine, checked, tessellation, over)
        return _polygon_tiled_trips(untiled, tessellation, coordinates, tuple(carry), on_read=True)
    return _bound(view, display, "trips", engine, checked, tessellation, over)
