"""Tile assignment: records to integer indexes into the public tessellation (``-1`` = outside
every tile: such records go to the outliers cell, never dropped), by tile id or by point in
polygon / grid arithmetic in the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from privmob.data.reading import INTEGER_TYPES, NUMERIC_TIME_TYPES, ident
from privmob.engine.base import Engine
from privmob.engine.relation import new_name
from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.data.tessellation import Tiling


def tiles_fingerprint(tessellation: Tiling) -> str | None:
    """The tessellation's fingerprint (``None`` for a tiling without one: tower sites)."""
    fingerprint: str | None = getattr(tessellation, "fingerprint", None)
    return fingerprint


def tile_ids_of(tessellation: Tiling) -> Sequence[Any]:
    """The tile ids of a :class:`~privmob.data.tessellation.Tessellation` (index order); a
    tiling without ids cannot read a tile-id column."""
    ids: Sequence[Any] | None = getattr(tessellation, "tile_ids", None)
    if ids is None:
        raise ConfigError(
            f"{type(tessellation).__name__} has no tile ids: an input with a tile-id column "
            "needs a tessellation",
            hint="load the zones with privmob.data.tessellation_input.load_tessellation",
        )
    return ids


def tile_index(
    engine: Engine, tessellation: Tiling, column: str, coltype: str, alias: str
) -> tuple[str, str]:
    """SQL mapping a tile-id column to the tile index (-1 if unknown): (expression, join).

    Integer ids forming a contiguous range map arithmetically (no join); other integer ids
    join on BIGINT; anything else joins on the id's text.
    """
    ids = list(tile_ids_of(tessellation))
    int_ids = all(isinstance(t, int | np.integer) for t in ids)
    col = f"e.{ident(column)}"
    if int_ids and coltype in INTEGER_TYPES:
        lo, hi = int(min(ids)), int(max(ids))
        if [int(t) for t in ids] == list(range(lo, hi + 1)):
            expr = (
                f"CASE WHEN {col} BETWEEN {lo} AND {hi} THEN CAST({col} - {lo} AS INTEGER) "
                "ELSE -1 END"
            )
            return expr, ""
        return _join_tile_keys(engine, [int(t) for t in ids], pa.int64(), "BIGINT", col, alias)
    if int_ids and (coltype in NUMERIC_TIME_TYPES or coltype.startswith("DECIMAL")):
        # integer ids stored as floats (3.0): compare numbers, not their text ("3.0" != "3")
        return _join_tile_keys(engine, [float(t) for t in ids], pa.float64(), "DOUBLE", col, alias)
    return _join_tile_keys(engine, [str(t) for t in ids], pa.string(), "VARCHAR", col, alias)


def _join_tile_keys(
    engine: Engine, keys: list[Any], arrow_type: pa.DataType, sql_type: str, col: str, alias: str
) -> tuple[str, str]:
    """Register ``tile_key -> tile index`` and LEFT JOIN ``col`` (cast to ``sql_type``) on it."""
    name = new_name("tiles")
    engine.register(
        name,
        pa.table(
            {
                "tile_key": pa.array(keys, arrow_type),
                "tile": pa.array(np.arange(len(keys), dtype=np.int32)),
            }
        ),
    )
    return (
        f"COALESCE({alias}.tile, -1)",
        f"LEFT JOIN {name} AS {alias} ON CAST({col} AS {sql_type}) = {alias}.tile_key",
    )


def _edge_bin_sql(x: str, edges: np.ndarray, dialect: Any) -> tuple[str, str] | None:
    """SQL for :func:`privmob.data.grids._edge_bin` (bin i = (e_i, e_i+1], bin 0
    closed, -1 outside or NaN/NULL) in two steps: (guess, fix). ``guess`` is an arithmetic
    bin (-1 outside); ``fix`` corrects it once against the exact edges, reading the guess
    from column ``{x}_g``. None when the edges are too irregular for one correction."""
    e = np.asarray(edges, dtype=np.float64)
    n = len(e) - 1
    scale = n / float(e[-1] - e[0])
    # the guess for a value in bin i lies in i-1..i+1 when every edge is within 1/4 bin of
    # its place on the uniform grid (float error of the guess is far below that)
    if not np.all(np.abs((e - e[0]) * scale - np.arange(n + 1)) < 0.25):
        return None
    lo, hi = f"CAST('{float(e[0])!r}' AS DOUBLE)", f"CAST('{float(e[-1])!r}' AS DOUBLE)"
    guess = (
        f"CASE WHEN {x} >= {lo} AND {x} <= {hi} THEN least(greatest(CAST(floor(({x} - {lo}) "
        f"* CAST('{scale!r}' AS DOUBLE)) AS BIGINT), 0), {n - 1}) ELSE -1 END"
    )
    g = "{g}"
    at = dialect.double_at
    fix = (
        f"CASE WHEN {g} < 0 THEN -1 "
        f"WHEN {g} > 0 AND {x} <= {at(list(e), g)} THEN {g} - 1 "
        f"WHEN {g} < {n - 1} AND {x} > {at(list(e), f'{g} + 1')} THEN {g} + 1 "
        f"ELSE {g} END"
    )
    return guess, fix


def grid_tiles_sql(grid: Any, relation: str, lng: str, lat: str, dialect: Any) -> str | None:
    """``SELECT *, <tile index> AS _pm_tile FROM relation``: the tile index of (lng, lat) on a
    regular grid, exactly as :meth:`privmob.data.grids.GridSpec.assign` gives it (each
    bin computed once per row); None if the edges are too irregular."""
    col = _edge_bin_sql(lng, grid.lng_edges, dialect)
    row = _edge_bin_sql(lat, grid.lat_edges, dialect)
    if col is None or row is None:
        return None
    return (
        f"SELECT s2_.*, CASE WHEN _pm_c < 0 OR _pm_r < 0 THEN -1 "
        f"ELSE CAST(_pm_r * {grid.ncols} + _pm_c AS INTEGER) END AS _pm_tile FROM ("
        f"SELECT s1_.*, {col[1].format(g='_pm_gc')} AS _pm_c, "
        f"{row[1].format(g='_pm_gr')} AS _pm_r FROM ("
        f"SELECT *, {col[0]} AS _pm_gc, {row[0]} AS _pm_gr FROM {relation}) AS s1_) AS s2_"
    )


def coordinate_tiles(engine: Engine, tessellation: Tiling, pairs_sql: str) -> str:
    """Assign tiles to the distinct (lng, lat) pairs of ``pairs_sql``; returns a lookup view.

    Point-in-polygon runs vectorised on the distinct coordinates (GEOS via the tessellation)
    and the result is joined back in the engine.
    """
    df = engine.fetch(f"SELECT DISTINCT lng, lat FROM ({pairs_sql}) AS p_")
    lng = df["lng"].to_numpy(dtype=np.float64)
    lat = df["lat"].to_numpy(dtype=np.float64)
    tiles = np.asarray(tessellation.assign(lng, lat), dtype=np.int32)
    name = new_name("coordtiles")
    # DuckDB: a table of its own (within its memory limit), not a Python object kept alive
    store = getattr(engine, "store_table", engine.register)
    store(name, pa.table({"lng": lng, "lat": lat, "tile": tiles}))
    return name
