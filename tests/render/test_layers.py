"""Releases as GIS layers: each layer opens in GeoPandas, valid, EPSG:4326, same noisy values."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from tests.helpers import box_grid, run_cli, write_city_files

from privmob.data.density_synth import synthetic_city
from privmob.errors import ConfigError
from privmob.render.layers import od_flows_layer, parse_formats, tile_values_layer

FORMATS = ["--format", "geoparquet,geojson", "--format", "csv"]


def open_layers(out, stem: str) -> list[gpd.GeoDataFrame]:
    """The three layer files, each opened as a GIS user would."""
    csv = pd.read_csv(out / f"{stem}.csv")
    from_csv = gpd.GeoDataFrame(
        csv.drop(columns="geometry_wkt"),
        geometry=gpd.GeoSeries.from_wkt(csv["geometry_wkt"]),
        crs=4326,
    )
    return [
        gpd.read_parquet(out / f"{stem}.geoparquet"),
        gpd.read_file(out / f"{stem}.geojson"),
        from_csv,
    ]


def check_layer(layer: gpd.GeoDataFrame, geom_type: str) -> None:
    assert len(layer) > 0
    assert layer.crs is not None and layer.crs.to_epsg() == 4326
    assert layer.geometry.is_valid.all() and not layer.geometry.is_empty.any()
    assert set(layer.geom_type) <= {geom_type, "Multi" + geom_type}


@pytest.fixture
def dpmr(shared_data):
    d = shared_data / "dpmr_fixture"
    return d / "test_data.csv", d / "test_tessellation.geojson"


def common(tmp_path) -> list[str]:
    return ["--test-mode", "--seed", "1", "--quiet"]


def test_od_layers_are_flows_between_tiles(tmp_path, dpmr):
    data, tess_path = dpmr
    out = tmp_path / "od"
    argv = ["od", str(data), "-t", str(tess_path), "-e", "5", "-T", "3", "--budget", "5"]
    assert run_cli([*argv, "-o", str(out), *FORMATS, *common(tmp_path)]) == 0
    table = pd.read_parquet(out / "od.parquet")
    meta = json.loads((out / "metadata.json").read_text())
    for layer in open_layers(out, "od_flows"):
        check_layer(layer, "LineString")
        assert {"origin_name", "destination_name", "margin_of_error_95"} <= set(layer.columns)
        assert (layer["margin_of_error_95"] == meta["privacy"]["noise"]["margin_of_error_95"]).all()
        assert pd.api.types.is_integer_dtype(layer["origin"])  # ids keep their type (int here)
        # the noisy counts are the table's, row for row; by default only the cells above the
        # release's noise floor are drawn (a line of noise reads as a flow)
        key = ["origin", "destination"]
        merged = layer.merge(table, on=key, suffixes=("", "_table"), validate="one_to_one")
        assert len(merged) == int((table["count"] > _floor(meta)).sum())
        assert (merged["count"] == merged["count_table"]).all()
        assert not layer["below_margin"].any()
    # --all-flows keeps every non-zero cell, each with its below_margin flag
    every = tmp_path / "od-all"
    assert run_cli([*argv, "-o", str(every), *FORMATS, "--all-flows", *common(tmp_path)]) == 0
    margin = meta["privacy"]["noise"]["margin_of_error_95"]
    for layer in open_layers(every, "od_flows"):
        assert len(layer) == int((table["count"] != 0).sum())
        assert (layer["below_margin"] == (layer["count"] <= margin)).all()


def test_od_layers_draw_no_line_within_one_tile(tmp_path, dpmr):
    """With ``--same-tile include`` the table releases the cells from a tile to itself; the
    layer draws none of them (a line of length 0 is no valid geometry) and every other flow
    above the floor, as without the option."""
    source, tess_path = dpmr
    points = pd.read_csv(source)
    # half the trips end where they began (round trips: within one tile)
    ends = points.groupby("tid").tail(1).index
    starts = points.groupby("tid").head(1).set_index("tid").loc[points.loc[ends, "tid"]]
    round_trip = (points.loc[ends, "tid"] % 2 == 0).to_numpy()
    for col in ("lat", "lng"):
        points.loc[ends[round_trip], col] = starts[col].to_numpy()[round_trip]
    data = tmp_path / "round_trips.csv"
    points.to_csv(data, index=False)
    out = tmp_path / "od"
    argv = ["od", str(data), "-t", str(tess_path), "-e", "50", "-T", "3", "--budget", "50"]
    argv += ["--same-tile", "include", "--all-flows", "-o", str(out), *FORMATS]
    assert run_cli([*argv, *common(tmp_path)]) == 0
    table = pd.read_parquet(out / "od.parquet")
    within = table["origin"] == table["destination"]
    assert (table.loc[within, "count"] != 0).any()  # the table keeps them
    for layer in open_layers(out, "od_flows"):
        check_layer(layer, "LineString")
        assert not (layer["origin"] == layer["destination"]).any()
        assert len(layer) == int(((table["count"] != 0) & ~within).sum())


def test_od_flows_layer_draws_no_line_from_a_tile_to_itself() -> None:
    """The public function itself, not only the layers a release writes: a diagonal cell has
    no line (length 0: no valid geometry), the other cells keep theirs."""
    tess = box_grid(2)
    table = pd.DataFrame({"origin": [0, 0, 1], "destination": [0, 1, 1], "count": [5, 7, 3]})
    lines = od_flows_layer(table, tess, keys=())
    assert list(zip(lines["origin"], lines["destination"], strict=True)) == [(0, 1)]
    assert lines.geometry.is_valid.all() and (lines.geometry.length > 0).all()


def _floor(meta: dict) -> int:
    """The noise floor of an OD release, from its metadata (public) alone."""
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.privacy.signal import noise_floor

    noise = meta["privacy"]["noise"]
    dist = Noise(NoiseKind(noise["kind"]), float(noise["scale"]))
    return noise_floor(dist, int(meta["domain"]["od_cells"]))


def test_od_flow_ends_are_inside_their_tiles():
    tess = box_grid(3)
    table = pd.DataFrame(
        {"period": ["all"] * 3, "origin": [0, 4, 8], "destination": [8, 0, 4], "count": [5, 0, 2]}
    )
    layer = od_flows_layer(table, tess, margin=3)
    assert list(layer["count"]) == [5, 2]  # the zero cell is not drawn
    polys = tess.gdf.geometry
    for row in layer.itertuples():
        start, end = shapely.get_coordinates(row.geometry)
        assert polys[row.origin].contains(shapely.Point(start))
        assert polys[row.destination].contains(shapely.Point(end))


def test_population_layer_has_polygons_values_and_margins(tmp_path, dpmr):
    data, tess_path = dpmr
    out = tmp_path / "pop"
    argv = ["population", str(data), "-t", str(tess_path), "-e", "1", "--budget", "1"]
    assert run_cli([*argv, "-o", str(out), *FORMATS, *common(tmp_path)]) == 0
    table = pd.read_parquet(out / "population.parquet")
    zones = table[table["kind"] == "zone"]
    # tile ids keep their type in the table too (missing on the outliers rows)
    assert pd.api.types.is_integer_dtype(table["tile_id"])
    assert table["tile_id"].isna().sum() == 2 and zones["tile_id"].notna().all()
    for layer in open_layers(out, "population_tiles"):
        check_layer(layer, "Polygon")
        assert len(layer) == len(zones)  # the outlier rows have no geometry
        assert list(layer["count"]) == list(zones["count"])
        assert (layer["margin_of_error_95"] > 0).all() and layer["tile_name"].notna().all()


def test_density_layer_is_zone_hour_polygons(tmp_path: Path) -> None:
    write_city_files(tmp_path, synthetic_city(3000, 30, 4, seed=3))
    out = tmp_path / "density"
    argv = ["density", str(tmp_path / "events.csv"), "--cells", str(tmp_path / "cells.csv")]
    argv += ["--zones", str(tmp_path / "zones.geojson"), "--epsilon", "0.5", "--delta", "1e-5"]
    argv += ["--max-visits", "20", "--week", "2026-03-02", "--budget", "0.8", "-o", str(out)]
    assert run_cli([*argv, "--format", "geoparquet", *common(tmp_path)]) == 0
    table = pd.read_parquet(out / "density.parquet")
    layer = gpd.read_parquet(out / "density_tiles.geoparquet")
    check_layer(layer, "Polygon")
    assert len(layer) == len(table) and list(layer["count"]) == list(table["count"])
    assert (out / "density.geojson").exists()  # the existing per-zone layer is kept


def test_series_counts_layer_has_margins_per_timestamp(tmp_path, dpmr):
    data, tess_path = dpmr
    out = tmp_path / "series"
    argv = ["series-counts", str(data), "-t", str(tess_path), "--start", "2020-12-13"]
    argv += ["--end", "2020-12-14", "--epsilon", "1", "--max-per-bin", "1", "--budget", "2"]
    assert run_cli([*argv, "-o", str(out), "--format", "geojson", *common(tmp_path)]) == 0
    layer = gpd.read_file(out / "series_tiles.geojson")
    check_layer(layer, "Polygon")
    table = pd.read_parquet(out / "series.parquet")
    assert len(layer) == int((table["zone"] != table["zone"].iloc[-1]).sum())
    assert (layer["margin_of_error_95"] > 0).all()


def test_tile_values_match_ids_stored_as_text():
    tess = box_grid(2)  # int ids 0..3
    table = pd.DataFrame({"zone": ["3", "0", "outside"], "count": [7, 1, 9]})
    layer = tile_values_layer(table, tess, margin=2.0)
    assert list(layer["tile_id"]) == [3, 0] and layer["tile_id"].dtype == np.int64
    assert list(layer["count"]) == [7, 1] and (layer["margin_of_error_95"] == 2).all()


def test_formats_are_checked_and_existing_layers_refused(tmp_path, dpmr, capsys):
    assert parse_formats(["geojson,csv", "geojson"]) == ["geojson", "csv"]
    assert parse_formats(None) == ["parquet"]
    with pytest.raises(ConfigError, match="unknown output format 'shp'"):
        parse_formats(["shp"])
    data, tess_path = dpmr
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "od_flows.geojson").write_text("{}")
    argv = ["od", str(data), "-t", str(tess_path), "-e", "1", "-T", "3", "--budget", "1"]
    argv += ["-o", str(tmp_path / "o"), "--format", "geojson", *common(tmp_path)]
    assert run_cli(argv) == 4  # the output cannot be written (exists)
    assert "exists; nothing was read, charged or written" in capsys.readouterr().err
    assert not (tmp_path / "o" / "od.parquet").exists()  # refused before any work


def test_tile_layers_flag_values_within_their_margin():
    tess = box_grid(2)
    table = pd.DataFrame({"zone": ["0", "1", "2", "3"], "count": [7, -2, 2, -5]})
    layer = tile_values_layer(table, tess, margin=2.0)
    # within the margin of 0, or below it (negative beyond the margin: only noise does that)
    assert list(layer["below_margin"]) == [False, True, True, True]


def test_a_layer_above_the_size_limit_is_refused_before_reading(tmp_path, dpmr, capsys):
    from privmob.privacy.ledger import Ledger

    data, tess_path = dpmr
    ledger = tmp_path / "ledger.sqlite"
    argv = ["population", str(data), "-t", str(tess_path), "-e", "1", "--budget", "1"]
    argv += ["--ledger", str(ledger), "--dataset", "d", "--quiet", "-o", str(tmp_path / "p")]
    assert run_cli([*argv, "--format", "geojson", "--max-layer-size", "1kB"]) == 2
    err = capsys.readouterr().err
    assert "population_tiles layer would be about" in err and "--max-layer-size" in err
    assert not (tmp_path / "p").exists()
    assert not Ledger(ledger).has_budget("d")  # nothing charged, no budget created
    # the same release under the default limit is written
    assert run_cli([*argv, "--format", "geojson"]) == 0
    assert (tmp_path / "p" / "population_tiles.geojson").exists()


def test_layer_size_estimates_are_within_a_factor_two(tmp_path, shared_data):
    """The estimate said with the plan (from the public tiles and the feature count only)
    against the files written, on the 263 NYC taxi zones (complex polygons)."""
    from privmob.data.tessellation_input import load_tessellation
    from privmob.render.layers import layer_size

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    table = pd.DataFrame({"zone": [str(t) for t in tess.tile_ids], "count": 5})
    layer = tile_values_layer(table, tess, margin=3.0)
    layer.to_file(tmp_path / "x.geojson", driver="GeoJSON")
    (tmp_path / "x.geojson").write_text(layer.to_json(drop_id=True))
    layer.to_parquet(tmp_path / "x.geoparquet")
    plain = pd.DataFrame(layer.drop(columns="geometry"))
    plain["geometry_wkt"] = shapely.to_wkt(layer.geometry.to_numpy(), rounding_precision=7)
    plain.to_csv(tmp_path / "x.csv", index=False)
    for fmt in ("geojson", "geoparquet", "csv"):
        real = (tmp_path / f"x.{fmt}").stat().st_size
        est = layer_size("population", tess, len(layer), fmt)
        assert 0.5 <= est / real <= 2, (fmt, est, real)


def test_writing_steps_are_named_as_what_they_are(tmp_path, dpmr, capsys):
    data, tess_path = dpmr
    argv = ["od", str(data), "-t", str(tess_path), "-e", "5", "-T", "3", "--budget", "5"]
    argv += ["--test-mode", "--seed", "1", "-o", str(tmp_path / "o"), "--format", "geojson"]
    assert run_cli(argv) == 0
    err = capsys.readouterr().err
    steps = [line for line in err.splitlines() if "✓" in line]
    names = [s.split("✓", 1)[1].strip() for s in steps]
    layer = next(i for i, n in enumerate(names) if n.startswith("writing the map layer"))
    charge = next(i for i, n in enumerate(names) if n.startswith("charging the privacy ledger"))
    # the layer's size and feature count come from the noise: said only after the charge
    assert "od_flows.geojson" in names[layer] and charge < layer
    moving = next(i for i, n in enumerate(names) if n.startswith("moving the release into"))
    assert layer < moving
    # the plan says the layer's size before anything is read
    assert "map layers: od_flows.geojson at most" in err
