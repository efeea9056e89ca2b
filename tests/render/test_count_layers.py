"""Map layers of count tables (``privmob counts --format``, ``Session.counts(formats=)``): a
table by one tile dimension is a polygon per row, a table by origin and destination a line per
flow above the noise floor, each with its margin and ``below_margin`` flag, size-checked and
stamped as the other kinds' layers; a table by no tile is refused before the input is read."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from tests.helpers import run_cli
from tests.releases.golden_cases import INPUTS

import privmob as pm
from privmob.releases.stamp import read_stamp

COMMON = ["--test-mode", "--seed", "7", "--budget", "100", "--dataset", "g", "--quiet"]
EVERY = ["--format", "parquet,geoparquet,geojson,csv"]


def _count(out: Path, data: str, by: str, *extra: str, epsilon: str = "2") -> int:
    args = ["counts", str(INPUTS / data), "-t", str(INPUTS / "grid.geojson"), "-e", epsilon,
            "-T", "3", "--by", by, "-o", str(out), *COMMON, *extra]  # fmt: skip
    return run_cli(args)


def _session() -> pm.Session:
    """The Session of the command lines above (same input, seed, budget and dataset)."""
    trips, grid = str(INPUTS / "trips.csv"), str(INPUTS / "grid.geojson")
    return pm.Session(trips, tessellation=grid, seed=7, budget=100, dataset="g")


def _layers(out: Path, stem: str) -> dict[str, pd.DataFrame]:
    """The layer in each format, as a GIS user opens it (geometry as WKT text)."""
    csv = pd.read_csv(out / f"{stem}.csv")
    csv = csv[[c for c in csv.columns if not c.startswith("privmob_")]]
    out_ = {"csv": csv}
    for fmt, frame in (
        ("geoparquet", gpd.read_parquet(out / f"{stem}.geoparquet")),
        ("geojson", gpd.read_file(out / f"{stem}.geojson")),
    ):
        assert frame.crs.to_epsg() == 4326 and frame.geometry.is_valid.all()
        df = pd.DataFrame(frame.drop(columns="geometry"))
        df["geometry_wkt"] = shapely.to_wkt(frame.geometry.to_numpy(), rounding_precision=7)
        out_[fmt] = df
    return out_


def _stamped_for_testing(out: Path, stem: str) -> None:
    assert read_stamp(out / f"{stem}.geoparquet")["privmob.for_publication"] == "false"
    doc = json.loads((out / f"{stem}.geojson").read_text())
    assert doc["privmob"]["for_publication"] is False
    assert doc["privmob"]["kind"] == "counts"
    assert "NOT FOR PUBLICATION" in doc["privmob"]["warning"]
    csv = pd.read_csv(out / f"{stem}.csv", dtype=str)
    assert (csv["privmob_for_publication"] == "false").all()


@pytest.mark.parametrize(
    ("data", "by", "key"),
    [
        ("trips.csv", "origin,hour", "origin"),
        ("trips.csv", "destination", "destination"),
        ("events.csv", "zone,weekday", "zone"),  # zone's "outside" label has no polygon
        ("points.csv", "tile", "tile"),
    ],
)
def test_a_count_table_by_one_tile_is_a_polygon_per_row(
    data: str, by: str, key: str, tmp_path: Path
) -> None:
    records = {"trips.csv": [], "events.csv": ["--records", "events"],
               "points.csv": ["--records", "trip-points"]}[data]  # fmt: skip
    assert _count(tmp_path, data, by, *EVERY, *records) == 0
    table = pd.read_parquet(tmp_path / "counts.parquet")
    meta = json.loads((tmp_path / "metadata.json").read_text())
    margin = meta["privacy"]["noise"]["margin_of_error_95"]
    tiles = gpd.read_file(INPUTS / "grid.geojson")
    on_a_tile = table[table[key].astype(str).isin(tiles["tile_id"].astype(str))]
    assert len(on_a_tile) == len(table) - (len(table) // 10 if key == "zone" else 0)
    others = [c for c in table.columns if c not in (key, "count")]
    expected = on_a_tile.assign(k=on_a_tile[key].astype(str))
    for fmt, layer in _layers(tmp_path, "counts_tiles").items():
        assert len(layer) == len(on_a_tile), fmt  # every row on a tile, zero cells included
        got = layer.assign(k=layer[key].astype(str))
        merged = expected.merge(got, on=["k", *others], suffixes=("", "_l"))
        assert len(merged) == len(on_a_tile), fmt
        assert (merged["count"] == merged["count_l"]).all(), fmt  # the table's noisy values
        assert np.allclose(merged["margin_of_error_95"], margin)
        assert (merged["below_margin"] == (merged["count"] <= margin)).all(), fmt
        assert (merged["k"] == merged["tile_id"].astype(str)).all(), fmt
    _stamped_for_testing(tmp_path, "counts_tiles")


def test_a_count_table_by_origin_and_destination_is_a_line_per_flow(tmp_path: Path) -> None:
    from privmob.render.layers import flow_floor

    by = "origin,destination,weekday"  # epsilon 10: flows above the noise floor exist
    assert _count(tmp_path / "floor", "trips.csv", by, *EVERY, epsilon="10") == 0
    assert _count(tmp_path / "all", "trips.csv", by, *EVERY, "--all-flows", epsilon="10") == 0
    table = pd.read_parquet(tmp_path / "all" / "counts.parquet")
    assert len(table) == 9 * 9 * 7  # the public domain (same-tile trips are counted)
    with _session() as s:
        result = s.counts(epsilon=10, by=by.split(","), max_records=3)
        floor = flow_floor(result.release)
        assert floor is not None and floor > result.release.noise["margin_of_error_95"]
        pd.testing.assert_frame_equal(result.release.tables["counts"], table)  # the command's
        points = shapely.get_coordinates(s.tessellation.gdf.geometry.representative_point())
        ids = [str(t) for t in s.tessellation.tile_ids]
    # a trip within one tile has no line (length 0): it stays in the table only
    between = table[table["origin"] != table["destination"]]
    above = between[between["count"] > floor]
    nonzero = between[between["count"] != 0]
    assert 0 < len(above) < len(nonzero) < len(between)  # the floor drops flows
    for folder, cells in (("floor", above), ("all", nonzero)):
        for fmt, layer in _layers(tmp_path / folder, "counts_flows").items():
            assert len(layer) == len(cells), (folder, fmt)
            assert list(layer.columns[:3]) == ["weekday", "origin", "destination"]
            assert sorted(layer["count"]) == sorted(cells["count"]), (folder, fmt)
            margin = layer["margin_of_error_95"]
            assert (layer["below_margin"] == (layer["count"] <= margin)).all()
            for row in layer.head(5).itertuples():  # from origin's point to destination's
                line = shapely.from_wkt(row.geometry_wkt)
                start, end = shapely.get_coordinates(line)[[0, -1]]
                assert np.allclose(start, points[ids.index(str(row.origin))], atol=1e-6)
                assert np.allclose(end, points[ids.index(str(row.destination))], atol=1e-6)
        _stamped_for_testing(tmp_path / folder, "counts_flows")


def _unreadable(tmp_path: Path) -> Path:
    bad = tmp_path / "unreadable.csv"
    bad.write_text("this is not,a mobility file\n\x00\x01,\n")
    return bad


@pytest.mark.parametrize(
    ("by", "extra", "said"),
    [
        ("hour", (), "a counts release by hour has no map layer"),  # no tile dimension
        ("origin,hour", ("--max-layer-size", "1kB"), "over the layer size limit"),
    ],
)
def test_a_layer_that_cannot_be_written_is_refused_before_reading(
    by: str, extra: tuple[str, ...], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an input that fails validation if it is read: the refusal must be the layer's
    bad = _unreadable(tmp_path)
    args = ["counts", str(bad), "-t", str(INPUTS / "grid.geojson"), "-e", "1", "--by", by,
            "--format", "geojson", "-o", str(tmp_path / "o"), *COMMON, *extra]  # fmt: skip
    assert run_cli(args) == 2
    err = capsys.readouterr().err
    assert said in err and "validat" not in err
    assert not (tmp_path / "o").exists()


def test_layers_of_the_session_and_the_command_are_the_same(tmp_path: Path) -> None:
    assert _count(tmp_path / "cli", "trips.csv", "origin,weekday", "--format", "csv") == 0
    with _session() as s:
        s.counts(epsilon=2, by=["origin", "weekday"], max_records=3, output=tmp_path / "py",
                 formats=["csv"])  # fmt: skip
    cli = pd.read_csv(tmp_path / "cli" / "counts_tiles.csv")
    py = pd.read_csv(tmp_path / "py" / "counts_tiles.csv")
    pd.testing.assert_frame_equal(cli, py)
