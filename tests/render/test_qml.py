"""QGIS styles shipped beside the layers: ``<stem>.qml`` next to ``<stem>.geojson`` (and the
other formats), a rule-based renderer on the layer's own value column whose first rule hatches
(polygons) or dashes grey (lines) the features whose ``below_margin`` is true; staged, sealed
and published with the release. The XML is parsed and checked against the layer written."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from tests.helpers import run_cli

import privmob as pm
from privmob.data.grids import square_grid
from privmob.render.qml import style_qml

COMMON = ["--test-mode", "--seed", "1", "--quiet"]


def fields_named(expr: str) -> set[str]:
    """The fields a QGIS expression reads ("double-quoted" names)."""
    return set(re.findall(r'"([^"]+)"', expr))


def check_style(qml: Path, layer: gpd.GeoDataFrame, value: str, fill: bool) -> None:
    root = ET.parse(qml).getroot()
    assert root.tag == "qgis"
    renderer = root.find("renderer-v2")
    assert renderer is not None and renderer.get("type") == "RuleRenderer"
    rules = renderer.findall("rules/rule")
    symbols = {s.get("name"): s for s in renderer.findall("symbols/symbol")}
    # every field a rule reads is a real field of the layer
    for r in rules:
        assert fields_named(r.get("filter", "")) <= set(layer.columns), r.get("filter")
    below, *classes = rules
    assert fields_named(below.get("filter", "")) == {"below_margin"}
    hatch = symbols[below.get("symbol")]
    layers = [lay.get("class") for lay in hatch.iter("layer")]
    if fill:
        assert hatch.get("type") == "fill" and "LinePatternFill" in layers
    else:
        styles = {o.get("value") for o in hatch.iter("Option") if o.get("name") == "line_style"}
        assert hatch.get("type") == "line" and styles == {"dash"}
    assert len(classes) == 8
    for r in classes:  # the value classes leave out the features below their margin
        assert value in fields_named(r.get("filter", "")) and "NOT (" in r.get("filter", "")
        assert symbols[r.get("symbol")].get("type") == ("fill" if fill else "line")
    # the classes end at the layer's largest value (equal widths, as on the report's maps)
    top = max(float(x) for x in re.findall(r">= ([\d.e+]+)", classes[-1].get("filter", "")))
    assert top == pytest.approx(layer[value].max() * 7 / 8)
    text = root.find("labeling/settings/text-style")
    if fill:
        assert text is not None and text.get("fieldName") == "tile_name" in layer.columns
    stamp = root.find("privmob")
    assert stamp is not None and stamp.get("for_publication") == "false"


def test_a_style_beside_each_polygon_layer(tmp_path: Path, shared_data: Path) -> None:
    d = shared_data / "dpmr_fixture"
    out = tmp_path / "pop"
    argv = ["population", str(d / "test_data.csv"), "-t", str(d / "test_tessellation.geojson")]
    fmt = ["--format", "geojson,csv,geoparquet"]
    assert run_cli([*argv, "-e", "1", "--budget", "1", "-o", str(out), *fmt, *COMMON]) == 0
    assert (out / "population_tiles.qml").is_file()  # one style, the stem of every format
    assert not list(out.glob("*.qml.*")) and len(list(out.glob("*.qml"))) == 1
    layer = gpd.read_file(out / "population_tiles.geojson")
    check_style(out / "population_tiles.qml", layer, "count", fill=True)


def test_a_style_beside_a_flow_layer_published_and_listed(tmp_path: Path) -> None:
    grid = square_grid((13.0, 52.0, 13.03, 52.02), 1000)
    rows = [(u, u, pd.Timestamp("2024-01-01 08:00"), u % 3, 4 + u % 2) for u in range(90)]
    trips = pd.DataFrame(rows, columns=["uid", "tid", "start_time", "origin", "destination"])
    with pm.Session(trips, tessellation=grid, budget=pm.PureDP(20), dataset="g", seed=2,
                    all_flows=True) as s:  # fmt: skip
        od = s.od(epsilon=0.5, max_trips=1, period=pm.Period("2024-01-01", "2024-01-02"),
                  output=tmp_path / "od", formats=["geojson"])  # fmt: skip
    style = tmp_path / "od" / "od_flows.qml"
    assert style in od.written  # published (renamed into place) with the release
    layer = gpd.read_file(tmp_path / "od" / "od_flows.geojson")
    assert layer["below_margin"].any()  # every non-zero cell: the dashed rule has work
    check_style(style, layer, "count", fill=False)
    meta = json.loads((tmp_path / "od" / "metadata.json").read_text())
    assert meta["kind"] == "od"


def test_a_layer_without_margins_gets_classes_only() -> None:
    layer = gpd.GeoDataFrame(
        {"tile_name": ["a", "b"], "count": [3.0, 9.0]},
        geometry=gpd.GeoSeries.from_wkt(["POINT (0 0)", "POINT (1 1)"]).buffer(0.4),
        crs=4326,
    )
    root = ET.fromstring(style_qml(layer, lines=False).split("\n", 1)[1])
    filters = [r.get("filter", "") for r in root.iter("rule")]
    assert len(filters) == 8 and not any("below_margin" in f for f in filters)
