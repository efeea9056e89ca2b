"""Tessellations: loading, validation (bad input), point assignment, square grids."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from privmob.data.grids import grid_with_about, square_grid
from privmob.data.tessellation import Tessellation
from privmob.data.tessellation_input import OVERLAP_TOLERANCE, load_tessellation
from privmob.errors import ConfigError, InputError


@pytest.fixture
def shared(shared_data: Path):
    """Path of a file in ../shared/data (the test skips when the folder is absent)."""

    def path(rel: str) -> Path:
        p = shared_data / rel
        if not p.exists():
            pytest.skip(f"{p} not found (real-data tests need ../shared/data)")
        return p

    return path


def box(x0: float, y0: float, x1: float, y1: float) -> list:
    return [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]


def feature(props: dict, coords: list | None, kind: str = "Polygon") -> dict:
    geom = None if coords is None else {"type": kind, "coordinates": coords}
    return {"type": "Feature", "properties": props, "geometry": geom}


def write_fc(path: Path, features: list[dict]) -> Path:
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


def two_boxes(tmp_path: Path) -> Path:
    return write_fc(
        tmp_path / "two.geojson",
        [
            feature({"tile_id": "b", "tile_name": "East"}, box(1, 0, 2, 1)),
            feature({"tile_id": "a", "tile_name": "West"}, box(0, 0, 1, 1)),
        ],
    )


# -- real tessellations --------------------------------------------------------------------
def test_nyc_taxi_zones_load_despite_slivers(shared) -> None:
    # the file has ~300 sub-square-metre slivers between neighbouring zones (max 2e-7 of a
    # zone's area): far below OVERLAP_TOLERANCE, so it loads by default
    t = load_tessellation(shared("nyc_taxi_zones/taxi_zones.geojson"))
    assert t.k == 263
    assert t.tile_ids == list(range(1, 264))  # LocationID detected, ints, sorted
    assert t.tile_names is not None and t.tile_names[0] == "Newark Airport"
    # Times Square is in zone 230 (Times Sq/Theatre District)
    assert t.tile_ids[t.assign(np.array([-73.9855]), np.array([40.7580]))[0]] == 230


def test_other_real_tessellations(shared) -> None:
    sf = load_tessellation(shared("sf_neighborhoods/sf_neighborhoods.geojson"))
    assert sf.k == 40 and all(isinstance(i, str) for i in sf.tile_ids)  # single column: nhood
    milan = load_tessellation(shared("milan_grid/milano-grid.geojson"))
    assert milan.k == 10_000 and milan.tile_ids[:3] == [1, 2, 3]
    areas = milan.areas_m2()
    assert 50_000 < areas.min() <= areas.max() < 60_000  # ~235 m cells
    dpmr = load_tessellation(shared("dpmr_fixture/test_tessellation.geojson"))
    assert dpmr.k == 4 and dpmr.tile_names == [f"Tile name: {i}" for i in (1, 2, 3, 4)]


def test_assign_real_polygons_matches_shapely(shared) -> None:
    t = load_tessellation(shared("nyc_taxi_zones/taxi_zones.geojson"))
    rng = np.random.default_rng(1)
    x0, y0, x1, y1 = t.bounds
    lng, lat = rng.uniform(x0, x1, 3000), rng.uniform(y0, y1, 3000)
    got = t.assign(lng, lat)
    geoms = t.gdf.geometry.values
    for i in range(0, 3000, 7):
        hits = np.flatnonzero(shapely.intersects_xy(geoms, lng[i], lat[i]))
        assert got[i] == (hits.min() if len(hits) else -1)
    assert 0.2 < (got >= 0).mean() < 0.6  # NYC covers ~36% of its bounding box


# -- assignment -----------------------------------------------------------------------------
def test_assign_border_outside_nan_and_order(tmp_path: Path) -> None:
    t = load_tessellation(two_boxes(tmp_path))
    assert t.tile_ids == ["a", "b"] and t.index_of("b") == 1  # sorted by id, not file order
    lng = np.array([0.5, 1.5, 1.0, 1.0, 5.0, np.nan, 0.0, 2.0])
    lat = np.array([0.5, 0.5, 0.5, 1.0, 0.5, 0.5, 0.0, 1.0])
    assert t.assign(lng, lat).tolist() == [0, 1, 0, 0, -1, -1, 0, 1]
    assert t.assign(lng, lat).dtype == np.int32


def test_assign_dedup_path_agrees(tmp_path: Path) -> None:
    t = load_tessellation(two_boxes(tmp_path))
    rng = np.random.default_rng(2)
    places = rng.uniform(-0.5, 2.5, size=(50, 2))
    pick = rng.integers(0, 50, 300_000)  # > 200k points, 50 distinct: deduplicated path
    lng, lat = places[pick, 0], places[pick, 1]
    assert np.array_equal(t.assign(lng, lat), t.assign(places[:, 0], places[:, 1])[pick])


def test_index_lookups(tmp_path: Path) -> None:
    t = load_tessellation(two_boxes(tmp_path))
    assert t.indexes_of(["b", "zz", "a"]).tolist() == [1, -1, 0]
    with pytest.raises(InputError, match="unknown tile id 'zz'"):
        t.index_of("zz")
    gj = t.to_geojson_dict()
    assert gj["type"] == "FeatureCollection"
    assert [f["properties"]["tile_id"] for f in gj["features"]] == ["a", "b"]
    assert [f["properties"]["tile_index"] for f in gj["features"]] == [0, 1]
    assert np.allclose(t.centroids(), [[0.5, 0.5], [1.5, 0.5]], atol=1e-3)


# -- square grids ---------------------------------------------------------------------------
def test_square_grid_shape_ids_and_sizes() -> None:
    g = square_grid((-74.05, 40.6, -73.75, 40.9), 2000)
    assert g.grid is not None and g.k == g.grid.nrows * g.grid.ncols
    assert g.tile_ids == list(range(g.k))
    side = np.sqrt(g.areas_m2())
    assert np.all(np.abs(side - 2000) < 2000 * 0.01)  # within 1% of the requested size
    assert grid_with_about((-74.05, 40.6, -73.75, 40.9), 256).k in range(200, 320)


def test_square_grid_arithmetic_matches_polygons() -> None:
    g = square_grid((9.0, 45.3, 9.3, 45.6), 1000)
    poly = Tessellation(g.gdf)  # same cells, polygon path
    assert poly.grid is None
    rng = np.random.default_rng(3)
    lng = rng.uniform(8.95, 9.35, 20_000)
    lat = rng.uniform(45.25, 45.65, 20_000)
    # plus points exactly on edges and corners (shared borders: smallest index wins)
    e, f = g.grid.lng_edges, g.grid.lat_edges
    lng = np.r_[lng, e, e[:5], e[-1], e[0]]
    lat = np.r_[lat, np.full(len(e), f[3]), f[:5], f[-1], f[0]]
    assert np.array_equal(g.assign(lng, lat), poly.assign(lng, lat))


def test_sweep_and_strtree_query_agree_on_borders() -> None:
    # assign() sweeps when there are >= 20 points per tile, else one STRtree query: both must
    # give the grid's arithmetic answer, shared edges and corners included (smallest index)
    g = square_grid((9.0, 45.3, 9.3, 45.6), 1000)
    poly = Tessellation(g.gdf)
    rng = np.random.default_rng(4)
    e, f = g.grid.lng_edges, g.grid.lat_edges
    lng = np.r_[rng.uniform(8.95, 9.35, 2_000), e, e[:5], e[-1], e[0]]
    lat = np.r_[rng.uniform(45.25, 45.65, 2_000), np.full(len(e), f[3]), f[:5], f[-1], f[0]]
    want = g.assign(lng, lat)
    assert len(lng) < 20 * poly.k  # so assign() itself takes the query path here
    assert np.array_equal(poly.assign(lng, lat), want)
    assert np.array_equal(poly._sweep(lng, lat), want)
    assert np.array_equal(poly._query(lng, lat), want)


def test_sweep_on_several_threads_gives_the_one_thread_answer(monkeypatch) -> None:
    # assign() splits a large sweep into chunks swept on every core at once: each point's tile
    # depends on that point alone, so the chunks (here small, with points on shared edges and
    # corners and outside) give the grid's arithmetic answer as one sweep does
    import privmob.data.tessellation as tessellation

    g = square_grid((9.0, 45.3, 9.3, 45.6), 1000)
    rng = np.random.default_rng(8)
    e, f = g.grid.lng_edges, g.grid.lat_edges
    lng = np.r_[rng.uniform(8.95, 9.35, 60_000), np.tile(e, 30)]
    lat = np.r_[rng.uniform(45.25, 45.65, 60_000), np.repeat(f[:30], len(e))]
    want = g.assign(lng, lat)
    calls: list[int] = []
    copies: set[int | None] = set()
    in_use: set[int | None] = set()
    shared: list[int | None] = []
    lock = threading.Lock()
    sweep = Tessellation._sweep

    def watched(self, x, y, prepared=None):  # the real sweep, watching which copy it is given
        key = id(prepared[0]) if prepared else None
        with lock:
            calls.append(len(x))
            copies.add(key)
            if key in in_use:  # another thread is sweeping with the same prepared polygons
                shared.append(key)
            in_use.add(key)
        try:
            time.sleep(0.02)  # long enough for the threads' sweeps to overlap
            return sweep(self, x, y, prepared)
        finally:
            with lock:
                in_use.discard(key)

    monkeypatch.setattr(Tessellation, "_sweep", watched)
    monkeypatch.setattr(tessellation, "_PARALLEL_MIN", 10_000)
    monkeypatch.setattr(tessellation, "_CHUNK", 7_000)
    assert np.array_equal(Tessellation(g.gdf).assign(lng, lat), want)
    assert len(calls) > 2 and sum(calls) == len(lng)
    # GEOS prepared geometries are not safe to share between threads: no two sweeps at once
    # use the same prepared polygons, and with several cores each thread has its own copy
    assert not shared
    if len(os.sched_getaffinity(0)) > 1:
        assert None not in copies and len(copies) == 2


def test_square_grid_rejects_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        square_grid((1, 1, 0, 0), 100)
    with pytest.raises(ConfigError):
        square_grid((0, 0, 1, 1), -5)
    with pytest.raises(ConfigError, match="cells"):
        square_grid((-10, -10, 10, 10), 1)


# -- formats and CRS -----------------------------------------------------------------------
def test_formats_and_reprojection(tmp_path: Path) -> None:
    base = load_tessellation(two_boxes(tmp_path)).gdf
    base.to_parquet(tmp_path / "t.parquet")
    base.to_file(tmp_path / "t.shp")
    base.to_crs(3857).to_file(tmp_path / "m.geojson", driver="GeoJSON")
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        for ext in ("shp", "shx", "dbf", "prj"):
            z.write(tmp_path / f"t.{ext}", f"t.{ext}")
    for name in ("t.parquet", "t.shp", "m.geojson", "z.zip"):
        t = load_tessellation(tmp_path / name)
        assert t.tile_ids == ["a", "b"]
        assert np.allclose(t.bounds, (0, 0, 2, 1), atol=1e-6)
    assert load_tessellation(base).k == 2  # a GeoDataFrame
    t = load_tessellation(base)
    assert load_tessellation(t) is t


def test_input_file_not_modified(tmp_path: Path) -> None:
    path = write_fc(
        tmp_path / "x.geojson",
        [feature({"cell": 2}, box(1, 0, 2, 1)), feature({"cell": 1}, box(0, 0, 1, 1))],
    )
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    t = load_tessellation(path, id_column="cell")
    assert t.tile_ids == [1, 2]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


# -- bad input: every message names the file, the column and an example ---------------------
def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found") as e:
        load_tessellation(tmp_path / "nope.geojson")
    assert "nope.geojson" in str(e.value)
    (tmp_path / "empty.geojson").write_text("")
    with pytest.raises(InputError, match="empty") as e:
        load_tessellation(tmp_path / "empty.geojson")
    assert "empty.geojson" in str(e.value)
    p = write_fc(tmp_path / "none.geojson", [])
    with pytest.raises(InputError, match="no features") as e:
        load_tessellation(p)
    assert "none.geojson" in str(e.value)
    (tmp_path / "t.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="unsupported"):
        load_tessellation(tmp_path / "t.csv")


def test_missing_id_column_lists_columns(tmp_path: Path) -> None:
    p = write_fc(tmp_path / "cols.geojson", [feature({"foo": 1, "bar": "x"}, box(0, 0, 1, 1))])
    with pytest.raises(InputError, match="columns seen") as e:
        load_tessellation(p)
    msg = str(e.value)
    assert "cols.geojson" in msg and "'foo'" in msg and "'bar'" in msg and "tile_id" in msg
    with pytest.raises(InputError, match="id column not found") as e:
        load_tessellation(p, id_column="zone")
    assert "column 'zone'" in str(e.value) and "'foo'" in str(e.value)


def test_duplicate_and_null_ids(tmp_path: Path) -> None:
    p = write_fc(
        tmp_path / "dup.geojson",
        [
            feature({"tile_id": 7}, box(0, 0, 1, 1)),
            feature({"tile_id": 8}, box(1, 0, 2, 1)),
            feature({"tile_id": 7}, box(2, 0, 3, 1)),
        ],
    )
    with pytest.raises(InputError, match="duplicate tile id 7") as e:
        load_tessellation(p)
    msg = str(e.value)
    assert "dup.geojson" in msg and "column 'tile_id'" in msg and "#0 and #2" in msg
    p = write_fc(
        tmp_path / "nullid.geojson",
        [feature({"tile_id": "a"}, box(0, 0, 1, 1)), feature({"tile_id": None}, box(1, 0, 2, 1))],
    )
    with pytest.raises(InputError, match="no id") as e:
        load_tessellation(p)
    assert "nullid.geojson" in str(e.value) and "feature #1" in str(e.value)


def test_null_and_non_polygon_geometry(tmp_path: Path) -> None:
    p = write_fc(
        tmp_path / "nullgeom.geojson",
        [feature({"tile_id": 1}, box(0, 0, 1, 1)), feature({"tile_id": 2}, None)],
    )
    with pytest.raises(InputError, match="no geometry") as e:
        load_tessellation(p)
    assert "nullgeom.geojson" in str(e.value) and "column 'geometry'" in str(e.value)
    assert "tile_id=2" in str(e.value)
    p = write_fc(
        tmp_path / "point.geojson",
        [feature({"tile_id": 1}, box(0, 0, 1, 1)), feature({"tile_id": 2}, [3, 3], "Point")],
    )
    with pytest.raises(InputError, match=r"not polygons.*Point") as e:
        load_tessellation(p)
    assert "point.geojson" in str(e.value) and "tile_id=2" in str(e.value)


def test_invalid_polygon_and_repair(tmp_path: Path) -> None:
    bowtie = [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]
    p = write_fc(
        tmp_path / "bowtie.geojson",
        [feature({"tile_id": "x"}, bowtie), feature({"tile_id": "y"}, box(2, 0, 3, 1))],
    )
    with pytest.raises(InputError, match=r"invalid polygon.*Self-intersection") as e:
        load_tessellation(p)
    msg = str(e.value)
    assert "bowtie.geojson" in msg and "column 'geometry'" in msg and "tile_id='x'" in msg
    assert "repair" in msg
    before = p.read_bytes()
    t = load_tessellation(p, repair=True)
    assert t.k == 2 and t.gdf.geometry.is_valid.all()
    # make_valid keeps both triangles of the bow tie, not the empty middle
    assert t.assign(np.array([0.2, 0.8, 0.5]), np.array([0.5, 0.5, 0.2])).tolist() == [0, 0, -1]
    assert p.read_bytes() == before


def test_overlaps_named_but_shared_borders_and_slivers_accepted(tmp_path: Path) -> None:
    p = write_fc(
        tmp_path / "overlap.geojson",
        [
            feature({"tile_id": "A"}, box(0, 0, 1, 1)),
            feature({"tile_id": "B"}, box(0.5, 0, 1.5, 1)),
            feature({"tile_id": "C"}, box(5, 5, 6, 6)),
        ],
    )
    with pytest.raises(InputError, match="overlap") as e:
        load_tessellation(p)
    msg = str(e.value)
    assert "overlap.geojson" in msg and "'A'" in msg and "'B'" in msg and "50.00%" in msg
    # a tile inside another is an overlap too
    p = write_fc(
        tmp_path / "nested.geojson",
        [feature({"tile_id": 1}, box(0, 0, 4, 4)), feature({"tile_id": 2}, box(1, 1, 2, 2))],
    )
    with pytest.raises(InputError, match="overlap"):
        load_tessellation(p)
    # a sliver below the tolerance is accepted
    eps = OVERLAP_TOLERANCE / 10
    p = write_fc(
        tmp_path / "sliver.geojson",
        [feature({"tile_id": 1}, box(0, 0, 1, 1)), feature({"tile_id": 2}, box(1 - eps, 0, 2, 1))],
    )
    assert load_tessellation(p).k == 2


@settings(max_examples=25, deadline=None)
@given(
    x0=st.floats(-170, 170),
    y0=st.floats(-60, 60),
    size=st.floats(100, 5000),
    cells=st.integers(1, 12),
    picks=st.lists(
        st.tuples(st.integers(0, 13), st.integers(0, 13), st.floats(-0.2, 1.2)),
        min_size=1,
        max_size=40,
    ),
)
def test_grid_assign_equals_brute_force(x0, y0, size, cells, picks) -> None:
    # any grid, points on edges, corners, inside and outside: arithmetic == GEOS brute force
    span = size * cells / 111_320 / np.cos(np.radians(y0 + 1))
    g = square_grid((x0, y0, x0 + span, y0 + span * 0.7), size)
    e, f = g.grid.lng_edges, g.grid.lat_edges
    lng = np.array(
        [e[min(i, len(e) - 1)] + (u if j % 2 else 0) * (e[1] - e[0]) for i, j, u in picks]
    )
    lat = np.array(
        [f[min(j, len(f) - 1)] + (u if i % 2 else 0) * (f[1] - f[0]) for i, j, u in picks]
    )
    geoms = g.gdf.geometry.values
    expect = []
    for x, y in zip(lng, lat, strict=True):
        hits = np.flatnonzero(shapely.intersects_xy(geoms, x, y))
        expect.append(hits.min() if len(hits) else -1)
    assert g.assign(lng, lat).tolist() == expect
    assert Tessellation(g.gdf).assign(lng, lat).tolist() == expect
