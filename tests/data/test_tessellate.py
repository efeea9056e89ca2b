"""Tessellations from public parameters: metric grids, H3 cells, provenance, a release on them."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from tests.helpers import run_cli

from privmob.data import tessellate as t
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError

SF_BBOX = (-122.52, 37.70, -122.35, 37.83)


@pytest.fixture
def sf_area(shared_data):
    path = shared_data / "sf_neighborhoods" / "sf_neighborhoods.geojson"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared SF neighbourhoods)")
    return path


@pytest.mark.parametrize("suffix", [".geojson", ".parquet", ".shp"])
def test_h3_res8_over_sf_written_read_back_with_provenance(tmp_path, sf_area, suffix):
    pytest.importorskip("h3")
    tess, prov = t.h3_cells(t.file_area(sf_area), 8)
    assert 100 < tess.k < 400  # SF (~120 km2 of land) over res-8 cells of ~0.74 km2
    assert all(isinstance(i, str) and len(i) == 15 for i in tess.tile_ids)
    path = t.write_tessellation(tess, tmp_path / f"sf{suffix}", prov)
    back = load_tessellation(path)  # validates: polygons, no overlaps, unique ids
    assert back.tile_ids == tess.tile_ids
    assert back.gdf.crs.to_epsg() == 4326 and back.gdf.geometry.is_valid.all()
    got = t.read_provenance(path)
    assert got is not None and got["kind"] == "h3" and got["resolution"] == 8
    assert got["cells"] == tess.k and got["area"]["file"] == "sf_neighborhoods.geojson"
    assert len(got["area"]["sha256"]) == 64


def test_metric_grid_cells_measure_the_stated_size(tmp_path):
    tess, prov = t.metric_grid(t.bbox_area(SF_BBOX), 500)
    areas = tess.areas_m2()
    assert np.allclose(areas, 500**2, rtol=0.01)  # ~square cells of 500 m (sphere approx.)
    x0, y0, x1, y1 = tess.bounds
    assert (x0, y0) == SF_BBOX[:2] and x1 >= SF_BBOX[2] and y1 >= SF_BBOX[3]
    assert prov["kind"] == "square-grid" and prov["area"] == {"bbox": list(SF_BBOX)}
    assert prov["cells"] == tess.k == prov["nrows"] * prov["ncols"]
    back = load_tessellation(t.write_tessellation(tess, tmp_path / "g.parquet", prov))
    assert back.grid is not None and back.k == tess.k  # detected as a grid: fast assignment


def test_metric_grid_over_polygons_keeps_only_cells_touching_the_area(sf_area):
    area = t.file_area(sf_area)
    full, _ = t.metric_grid(t.bbox_area(area.bounds), 1000)
    kept, prov = t.metric_grid(area, 1000)
    assert 0 < kept.k < full.k and prov["cells"] == kept.k
    assert kept.gdf.geometry.intersects(area.geometry).all()
    assert set(kept.tile_ids) <= set(full.tile_ids)  # ids are the full grid's row*ncols+col


def test_missing_h3_gives_one_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "h3", None)  # import h3 -> ImportError
    with pytest.raises(ConfigError, match="needs h3, which is not installed") as exc:
        t.h3_cells(t.bbox_area(SF_BBOX), 8)
    assert "privmob[h3]" in (exc.value.hint or "")


def test_bad_parameters_are_refused():
    with pytest.raises(ConfigError, match="bbox"):
        t.bbox_area((-122.3, 37.7, -122.5, 37.8))  # west > east
    with pytest.raises(ConfigError, match="cannot write"):
        grid, prov = t.metric_grid(t.bbox_area(SF_BBOX), 5000)
        t.write_tessellation(grid, "x.csv", prov)
    with pytest.raises(ConfigError, match="resolution"):
        t.h3_cells(t.bbox_area(SF_BBOX), 16)


def test_cli_needs_exactly_one_area_and_one_kind(tmp_path, capsys):
    assert run_cli(["tessellate", str(tmp_path / "a.geojson"), "--h3", "8"]) == 2
    assert "--area FILE or --bbox" in capsys.readouterr().err
    bbox = ",".join(map(str, SF_BBOX))
    argv = ["tessellate", str(tmp_path / "a.geojson"), "--bbox", bbox]
    assert run_cli([*argv, "--h3", "8", "--cell-size", "100"]) == 2
    assert run_cli([*argv, "--cell-size", "800"]) == 0
    assert t.read_provenance(tmp_path / "a.geojson")["cell_size_m"] == 800


def test_h3_tessellation_round_trips_through_an_od_release(tmp_path, sf_area):
    """privmob tessellate --h3 8 over SF, trip points synthesised at cell centres, privmob od:
    the OD table's ids are the H3 ids (strings), merge with the tessellation, and the flow
    everybody made is found (epsilon 10, T=1: discrete Laplace scale 0.1, P(|noise|>=5) <
    1e-20, so this cannot fail by chance)."""
    h3 = pytest.importorskip("h3")
    tess_path = tmp_path / "sf_h3.geojson"
    assert run_cli(["tessellate", str(tess_path), "--area", str(sf_area), "--h3", "8"]) == 0
    tess = load_tessellation(tess_path)
    a, b = tess.tile_ids[3], tess.tile_ids[-4]
    rows = []
    for uid in range(40):
        for step, cell in enumerate((a, b)):
            lat, lng = h3.cell_to_latlng(cell)
            rows.append((uid, uid, f"2024-03-01 0{8 + step}:00:00", lat, lng))
    trips = pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])
    trips.to_csv(tmp_path / "trips.csv", index=False)
    argv = ["od", str(tmp_path / "trips.csv"), "-t", str(tess_path), "-e", "10", "-T", "1"]
    argv += ["--budget", "10", "--test-mode", "--seed", "1"]
    out = ["-o", str(tmp_path / "out"), "--format", "geoparquet", "--quiet"]
    assert run_cli([*argv, *out]) == 0
    od = pd.read_parquet(tmp_path / "out" / "od.parquet")
    assert set(od["origin"]) == set(tess.tile_ids) and od["origin"].map(type).eq(str).all()
    merged = od.merge(tess.gdf, left_on="origin", right_on="tile_id", validate="many_to_one")
    assert len(merged) == len(od)
    flow = od[(od["origin"] == a) & (od["destination"] == b)]["count"].item()
    assert abs(flow - 40) < 5
    # the flow as a map layer: a line from inside cell a to inside cell b
    import geopandas as gpd
    import shapely

    layer = gpd.read_parquet(tmp_path / "out" / "od_flows.geoparquet")
    line = layer[(layer["origin"] == a) & (layer["destination"] == b)].geometry.item()
    start, end = shapely.get_coordinates(line)
    cells = tess.gdf.set_index("tile_id").geometry
    assert cells[a].contains(shapely.Point(start)) and cells[b].contains(shapely.Point(end))
