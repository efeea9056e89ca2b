"""Regular grids recognised from a loaded file's geometry: the arithmetic assignment (numpy and
SQL in DuckDB) must give exactly what the polygon path gives, borders and corners included."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from privmob.data.grids import detect_grid, square_grid
from privmob.data.sources import load_trip_points
from privmob.data.tessellation import Tessellation
from privmob.data.tessellation_input import load_tessellation
from privmob.data.tile_assignment import grid_tiles_sql
from privmob.engine import DuckDBEngine
from privmob.engine.dialect import DUCKDB


def _write(path: Path, tess: Tessellation, order: np.ndarray | None = None) -> Path:
    gdf = tess.gdf if order is None else tess.gdf.iloc[order]
    path.write_text(gdf.to_json(drop_id=True))
    return path


def _probe_points(spec, n: int = 3_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random points plus every edge crossing, each edge's neighbouring floats, and points
    outside (all combinations of x and y on a mesh)."""
    rng = np.random.default_rng(seed)
    xe, ye = spec.lng_edges, spec.lat_edges
    pad_x, pad_y = (xe[-1] - xe[0]) / 10, (ye[-1] - ye[0]) / 10
    xs = np.r_[
        xe,
        np.nextafter(xe, -np.inf),
        np.nextafter(xe, np.inf),
        rng.uniform(xe[0] - pad_x, xe[-1] + pad_x, 40),
    ]
    ys = np.r_[
        ye,
        np.nextafter(ye, -np.inf),
        np.nextafter(ye, np.inf),
        rng.uniform(ye[0] - pad_y, ye[-1] + pad_y, 40),
    ]
    mx, my = np.meshgrid(xs, ys)
    rx = rng.uniform(xe[0] - pad_x, xe[-1] + pad_x, n)
    ry = rng.uniform(ye[0] - pad_y, ye[-1] + pad_y, n)
    return np.r_[mx.ravel(), rx, np.nan, 0.0], np.r_[my.ravel(), ry, 0.0, np.nan]


def _sql_assign(spec, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
    con = duckdb.connect()
    con.register("p", pa.table({"i": np.arange(len(lng)), "lng": lng, "lat": lat}))
    sql = grid_tiles_sql(spec, "p", "lng", "lat", DUCKDB)
    assert sql is not None
    res = con.execute(f"SELECT _pm_tile AS t FROM ({sql}) ORDER BY i").fetchnumpy()["t"]
    return np.asarray(res, dtype=np.int64)


@pytest.mark.parametrize(
    "bounds,size",
    [
        ((-74.05, 40.6, -73.73, 40.91), 1800.0),
        ((9.0, 45.3, 9.3, 45.6), 1000.0),
        ((0, 0, 1, 1), 37_000.0),
    ],
)
def test_loaded_grid_is_recognised_and_assigns_like_polygons(tmp_path: Path, bounds, size) -> None:
    made = square_grid(bounds, size)
    loaded = load_tessellation(_write(tmp_path / "g.geojson", made))
    assert loaded.grid is not None
    assert np.array_equal(loaded.grid.lng_edges, made.grid.lng_edges)
    assert np.array_equal(loaded.grid.lat_edges, made.grid.lat_edges)
    poly = Tessellation(loaded.gdf)  # the same tiles through the polygon sweep
    assert poly.grid is None
    lng, lat = _probe_points(loaded.grid)
    want = poly.assign(lng, lat)
    assert (want >= 0).sum() > 1000 and (want < 0).sum() > 100  # both inside and outside hit
    assert np.array_equal(loaded.assign(lng, lat), want)
    assert np.array_equal(_sql_assign(loaded.grid, lng, lat), want)


def test_irregular_grid_edges_follow_polygons(tmp_path: Path) -> None:
    # rows of unequal height, columns of unequal width: still a grid, edges are not uniform
    xe = np.array([0.0, 0.1, 0.3, 0.35, 0.8])
    ye = np.array([10.0, 10.5, 10.55, 11.0])
    from privmob.data.grid_spec import GridSpec

    loaded = load_tessellation(
        _write(tmp_path / "g.geojson", Tessellation.from_grid(GridSpec(xe, ye)))
    )
    assert loaded.grid is not None
    poly = Tessellation(loaded.gdf)
    lng, lat = _probe_points(loaded.grid)
    want = poly.assign(lng, lat)
    assert np.array_equal(loaded.assign(lng, lat), want)
    if (
        grid_tiles_sql(loaded.grid, "p", "lng", "lat", DUCKDB) is not None
    ):  # too irregular for one correction: the loader falls back
        assert np.array_equal(_sql_assign(loaded.grid, lng, lat), want)


def _fc(path: Path, boxes: list[tuple[object, tuple[float, float, float, float]]]) -> Path:
    feats = [
        {
            "type": "Feature",
            "properties": {"tile_id": tid},
            "geometry": {
                "type": "Polygon",
                "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]],
            },
        }
        for tid, (x0, y0, x1, y1) in boxes
    ]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def test_not_a_grid_keeps_the_polygon_path(tmp_path: Path) -> None:
    cells = [(0, 0, 1, 1), (1, 0, 2, 1), (0, 1, 1, 2), (1, 1, 2, 2)]
    # row-major ids: a grid
    assert load_tessellation(_fc(tmp_path / "a.geojson", list(enumerate(cells)))).grid is not None
    # ids in another order (smallest index is not the lower row/column): polygon path
    other = load_tessellation(
        _fc(tmp_path / "b.geojson", list(zip([3, 2, 1, 0], cells, strict=True)))
    )
    assert other.grid is None
    # a missing cell, or a cell that is not a rectangle of the grid
    assert load_tessellation(_fc(tmp_path / "c.geojson", list(enumerate(cells[:3])))).grid is None
    uneven = [*cells[:3], (1, 1, 2, 2.5)]
    assert load_tessellation(_fc(tmp_path / "d.geojson", list(enumerate(uneven)))).grid is None
    tri = load_tessellation(tmp_path / "a.geojson").gdf.copy()
    from shapely.geometry import Polygon

    tri.loc[3, "geometry"] = Polygon([(1, 1), (2, 1), (2, 2), (1.5, 2.0), (1, 1)])
    assert detect_grid(tri.geometry.values) is None


def test_trip_points_tiles_same_with_grid_and_polygons(tmp_path: Path) -> None:
    made = square_grid((-74.05, 40.6, -73.73, 40.91), 3000)
    loaded = load_tessellation(_write(tmp_path / "g.geojson", made))
    lng, lat = _probe_points(loaded.grid, n=500)
    ok = ~(np.isnan(lng) | np.isnan(lat))
    lng, lat = lng[ok], lat[ok]
    pts = pa.table(
        {
            "uid": np.arange(len(lng)) // 4,
            "tid": np.arange(len(lng)) // 2,
            "datetime": pa.array(
                np.full(len(lng), 1_700_000_000_000_000), pa.timestamp("us", "UTC")
            ),
            "lat": lat,
            "lng": lng,
        }
    )
    got = {}
    for name, tess in (("grid", loaded), ("poly", Tessellation(loaded.gdf))):
        with DuckDBEngine() as eng:
            view = load_trip_points(pts, engine=eng, tessellation=tess).view
            got[name] = eng.fetch(f"SELECT tile, time FROM {view}")
    assert np.array_equal(got["grid"]["tile"].to_numpy(), got["poly"]["tile"].to_numpy())
    assert str(got["grid"]["time"].iloc[0]) == "2023-11-14 22:13:20"
