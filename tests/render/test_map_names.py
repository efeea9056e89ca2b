"""Maps that say where they are: every tile and every flow names its tiles on hover (a readable
name for tiles that have none: id and centre, never a bare number), and the names that fit are
drawn on the map, inside their tiles, no two overlapping. The SVG is parsed, as a browser
would read it (the browser checks are in test_maps_browser)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import geopandas as gpd
import pytest
import shapely
from shapely.geometry import box

from privmob.data.grids import square_grid
from privmob.data.tessellation import Tessellation
from privmob.releases.report.inputs import Tiles
from privmob.render import svg
from privmob.render.map_labels import LABEL_CHAR_PX, LABEL_HEIGHT_PX, tile_names

NS = "{http://www.w3.org/2000/svg}"


def tiles_of(tess: Tessellation) -> dict:
    """The tiles as the report's document holds them (names = ids when unnamed)."""
    t = Tiles.from_tessellation(tess)
    return {"ids": t.ids, "names": t.names, "lat": t.lat, "lng": t.lng, "outlines": t.outlines}


def named_grid(names: list[str], n: int = 3, size: float = 0.01) -> Tessellation:
    tiles = [box(13 + c * size, 52 + r * size, 13 + (c + 1) * size, 52 + (r + 1) * size)
             for r in range(n) for c in range(n)]  # fmt: skip
    return Tessellation(
        gpd.GeoDataFrame({"tile_id": range(n * n), "tile_name": names}, geometry=tiles, crs=4326)
    )


def tile_titles(root: ET.Element) -> list[str]:
    """The tooltip of every tile (a path of the zoomable drawing that is not a flow)."""
    zoom = next(g for g in root.iter(f"{NS}g") if g.get("class") == "pm-zoom")
    return [
        p.findtext(f"{NS}title") or ""
        for p in zoom.iter(f"{NS}path")
        if p.get("class") != "pm-flow"
    ]


def labels(root: ET.Element, level: int = 1) -> list[tuple[str, float, float]]:
    """The labels shown at zoom ``level`` (those of lower levels included)."""
    return [
        (t.text or "", float(t.get("x", 0)), float(t.get("y", 0)))
        for t in root.iter(f"{NS}text")
        if t.get("class") == "pm-label" and int(t.get("data-zoom", "1")) <= level
    ]


def label_box(text: str, x: float, y: float, level: int = 1) -> shapely.Polygon:
    """A label's box in map pixels (centred at x, y; its size on screen kept at any zoom)."""
    w, h = len(text) * LABEL_CHAR_PX / level, LABEL_HEIGHT_PX / level
    return shapely.box(x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def projected(tiles: dict, width: int = 560, height: int = 420) -> list[shapely.Polygon]:
    outlines = svg.TileOutlines(tiles, width, height)
    proj = outlines.proj
    return [
        shapely.Polygon([proj(x, y) for x, y in max(rings, key=len)]) for rings in tiles["outlines"]
    ]


def test_named_tiles_carry_their_names_in_tooltips_and_as_labels_that_fit() -> None:
    names = [f"Zone{chr(65 + i)}" for i in range(9)]
    tiles = tiles_of(named_grid(names))
    root = ET.fromstring(svg.choropleth(tiles, list(range(9)), unit="visits"))
    titles = tile_titles(root)
    assert len(titles) == 9
    assert [t.split(":")[0] for t in titles] == names  # each tile named on hover
    drawn = labels(root)
    assert sorted(t for t, _, _ in drawn) == names  # short names fit in ~1 km tiles
    polys = projected(tiles)
    for text, x, y in drawn:
        assert polys[names.index(text)].contains(label_box(text, x, y))


def test_a_name_that_does_not_fit_is_a_tooltip_only() -> None:
    names = ["Zone A", "A very long neighbourhood name that no small tile can hold", *"CDEFGHI"]
    tiles = tiles_of(named_grid(names))
    root = ET.fromstring(svg.choropleth(tiles, [1] * 9, unit="visits", width=300, height=300))
    drawn = {t for t, _, _ in labels(root)}
    assert "Zone A" in drawn and names[1] not in drawn
    assert any(t.startswith(names[1] + ":") for t in tile_titles(root))


@pytest.mark.parametrize("size", [(560, 420), (1600, 1200)])
def test_labels_never_overlap_and_stay_inside_their_zone(shared_data, size) -> None:
    """On the 263 NYC taxi zones, at each zoom level a reader can reach (1, 2, 4, 8): the
    labels shown do not overlap and each lies inside its zone."""
    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    tiles = tiles_of(tess)
    root = ET.fromstring(svg.choropleth(tiles, [0] * tess.k, unit="visits", width=size[0],
                                        height=size[1]))  # fmt: skip
    polys = projected(tiles, *size)
    zones: dict[str, list[int]] = {}
    for i, n in enumerate(tiles["names"]):
        zones.setdefault(n, []).append(i)
    shown = [len(labels(root, level)) for level in (1, 2, 4, 8)]
    assert shown == sorted(shown) and 10 <= shown[-1] < tess.k  # more as one zooms in
    for level in (1, 2, 4, 8):
        drawn = labels(root, level)
        boxes = [label_box(*d, level) for d in drawn]
        for i, a in enumerate(boxes):
            assert not any(a.intersects(b) for b in boxes[i + 1 :]), drawn[i]
        for (text, _, _), b in zip(drawn, boxes, strict=True):
            # (a name may be shared: two zones are named Corona)
            assert any(polys[j].buffer(0.5).contains(b) for j in zones[text]), text
    # every one of the 263 zones is named on hover
    assert all(t.split(":")[0] in zones for t in tile_titles(root))


def test_grid_tiles_get_readable_names_not_bare_numbers() -> None:
    grid = square_grid((-74.09, 40.70, -74.02, 40.75), 1500)  # Jersey City, no names
    tiles = tiles_of(grid)
    readable = re.compile(r"^tile \d+ \(40\.\d{4}, -74\.\d{4}\)$")
    root = ET.fromstring(svg.choropleth(tiles, [5] * grid.k, unit="visits"))
    titles = [t.split(":")[0] for t in tile_titles(root)]
    assert len(titles) == grid.k and all(readable.match(t) for t in titles), titles[:3]
    # flows name both ends, origin first
    flows = ET.fromstring(svg.flow_map(tiles, [(0, 5, 40.0), (7, 7, 12.0)]))
    said = [e.findtext(f"{NS}title") for e in flows.iter() if e.get("class") == "pm-flow"]
    names = tile_names(tiles)
    assert said == [f"{names[0]} → {names[5]}: 40 trips"]
    assert names[0] != "0" and readable.match(names[5])
    circles = [c.findtext(f"{NS}title") for c in flows.iter(f"{NS}circle")]
    assert circles == [f"{names[7]} → {names[7]}: 12 trips"]  # a flow within one tile
    # the ids (as in the tables) are drawn where they fit
    assert {t for t, _, _ in labels(root)} <= {str(i) for i in range(grid.k)}
    assert labels(root)


def test_h3_like_ids_are_named_with_their_centre() -> None:
    tess = Tessellation(
        gpd.GeoDataFrame(
            {"tile_id": ["88283082b9fffff", "88283082bbfffff"]},
            geometry=[box(-122.42, 37.77, -122.41, 37.78), box(-122.41, 37.77, -122.40, 37.78)],
            crs=4326,
        )
    )
    names = tile_names(tiles_of(tess))
    assert names[0] == "88283082b9fffff (37.7750, -122.4150)"


def test_the_notebook_display_names_unnamed_tiles_in_its_ranking() -> None:
    import pandas as pd

    import privmob as pm

    grid = square_grid((13.0, 52.0, 13.03, 52.02), 1000)
    rows = [(u, u, pd.Timestamp("2024-01-01 08:00"), 0, 4) for u in range(60)]
    trips = pd.DataFrame(rows, columns=["uid", "tid", "start_time", "origin", "destination"])
    with pm.Session(trips, tessellation=grid, budget=pm.PureDP(20), dataset="g", seed=2) as s:
        od = s.od(epsilon=10, max_trips=1, period=pm.Period("2024-01-01", "2024-01-02"))
        html = od.html(basemap=False)
    names = tile_names(tiles_of(grid))
    assert f"<td>{names[0]}</td>" in html and f"<td>{names[4]}</td>" in html
    assert f"{names[0]} → {names[4]}" in html  # the flow's tooltip


@pytest.mark.parametrize("labels_on", [True, False])
def test_labels_can_be_left_out(labels_on: bool) -> None:
    tiles = tiles_of(named_grid([f"Z{i}" for i in range(9)]))
    out = svg.choropleth(tiles, [1] * 9, labels=labels_on)
    assert ("class='pm-label'" in out) is labels_on


def test_layers_name_unnamed_tiles_as_the_maps_do() -> None:
    import pandas as pd

    from privmob.render.layers import od_flows_layer, tile_values_layer

    grid = square_grid((-74.09, 40.70, -74.02, 40.75), 1500)
    names = tile_names(tiles_of(grid))  # the maps' names
    od = pd.DataFrame({"period": ["all"], "origin": [0], "destination": [5], "count": [12]})
    flows = od_flows_layer(od, grid, margin=4)
    assert (flows["origin_name"].iloc[0], flows["destination_name"].iloc[0]) == (names[0], names[5])
    polys = tile_values_layer(pd.DataFrame({"zone": ["3"], "count": [7]}), grid, margin=4)
    assert polys["tile_name"].tolist() == [names[3]] and names[3].startswith("tile 3 (40.7")
