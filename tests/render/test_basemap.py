"""The basemap: web tiles (fetched by the viewer's browser, never by privmob) under the report's
and the notebook displays' maps, with a visible attribution; and an offline switch under which
the HTML names no external address at all (parsed: no http(s) URL in any src/href attribute,
inline style or CSS). No test here needs the network."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import run_cli

import privmob as pm
from privmob.data.grids import square_grid
from privmob.releases.report.inputs import Tiles
from privmob.render import svg
from privmob.render.basemap import OFFLINE_ENV
from privmob.render.report_html import render_report_html

NS = "{http://www.w3.org/2000/svg}"
ATTRIBUTION = "© OpenStreetMap contributors"
TILE_URL = re.compile(r"^https://tile\.openstreetmap\.org/(\d+)/(\d+)/(\d+)\.png$")


class Addresses(HTMLParser):
    """Every address a page would make a browser load or follow: src/href attributes (also
    xlink:href), url(...) in inline styles and <style> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("src", "href", "xlink:href", "srcset", "action", "poster", "data"):
                self.found.append(value)
            if name == "style":
                self.found += re.findall(r"url\(([^)]*)\)", value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.found += re.findall(r"url\(([^)]*)\)|@import\s+([^;]*)", data)


def external(html: str) -> list[str]:
    """The external addresses of a page (http, https or protocol-relative)."""
    p = Addresses()
    p.feed(html)
    flat = [a if isinstance(a, str) else " ".join(a) for a in p.found]
    ext = [a for a in flat if re.match(r"\s*['\"]?\s*(https?:)?//", a, re.I)]
    # and anywhere in the text of the page, scripts included (the SVG namespace is a name)
    ext += [
        u for u in re.findall(r"https?://[^\s'\"<>)]+", html) if u != "http://www.w3.org/2000/svg"
    ]
    return ext


def grid_tiles() -> dict:
    t = Tiles.from_tessellation(square_grid((-74.09, 40.70, -74.02, 40.75), 1500))
    return {"ids": t.ids, "names": t.names, "lat": t.lat, "lng": t.lng, "outlines": t.outlines}


def slippy(lng: float, lat: float, z: int) -> tuple[float, float]:
    """OpenStreetMap's tile numbers of a point (the wiki's formula)."""
    n = 2**z
    r = math.radians(lat)
    return (lng + 180) / 360 * n, (1 - math.log(math.tan(r) + 1 / math.cos(r)) / math.pi) / 2 * n


def test_a_map_with_a_basemap_draws_web_tiles_under_the_tiles_and_credits_them() -> None:
    tiles = grid_tiles()
    root = ET.fromstring(svg.choropleth(tiles, [3] * len(tiles["ids"]), basemap=True))
    zoom = next(g for g in root.iter(f"{NS}g") if g.get("class") == "pm-zoom")
    children = list(zoom)
    base = next(i for i, c in enumerate(children) if c.get("class") == "pm-basemap")
    over = next(i for i, c in enumerate(children) if c.get("class") == "pm-over-basemap")
    assert base < over  # the streets under the tiles, the tiles translucent over them
    images = list(children[base].iter(f"{NS}image"))
    assert 1 <= len(images) <= 48
    proj = svg.TileOutlines(tiles, 560, 420).proj
    covered = [0.0, 0.0, 0.0, 0.0]  # the union of the images' boxes covers the map
    for im in images:
        z, x, y = (int(v) for v in TILE_URL.match(im.get("href", "")).groups())
        # the image's corner is the web tile's north-west corner, projected
        x0, y0 = float(im.get("x")), float(im.get("y"))
        fx, fy = slippy(*_lnglat(proj, x0 + 0.01, y0 + 0.01), z)
        assert (math.floor(fx), math.floor(fy)) == (x, y)
        covered = [
            min(covered[0], x0),
            min(covered[1], y0),
            max(covered[2], x0 + float(im.get("width"))),
            max(covered[3], y0 + float(im.get("height"))),
        ]
    assert covered[0] <= 0 and covered[1] <= 0
    assert covered[2] >= proj.width and covered[3] >= proj.height
    credit = next(g for g in root.iter(f"{NS}g") if g.get("class") == "pm-attribution")
    assert ATTRIBUTION in "".join(credit.itertext())
    assert credit not in list(zoom.iter())  # always visible, never zoomed away


def _lnglat(proj: svg.Projection, x: float, y: float) -> tuple[float, float]:
    return proj.x0 + (x - proj.pad) / (proj.kx * proj.s), proj.y1 - (y - proj.pad) / proj.s


def test_without_a_basemap_a_map_names_no_address() -> None:
    tiles = grid_tiles()
    for out in (
        svg.choropleth(tiles, [3] * len(tiles["ids"])),
        svg.choropleth(tiles, [3] * len(tiles["ids"]), basemap=False),
        svg.flow_map(tiles, [(0, 3, 9.0)], basemap=False),
    ):
        assert external(out) == [] and "<image" not in out and ATTRIBUTION not in out


def test_the_environment_switch_turns_every_basemap_off(monkeypatch) -> None:
    tiles = grid_tiles()
    assert "<image" in svg.flow_map(tiles, [(0, 3, 9.0)], basemap=True)
    monkeypatch.setenv(OFFLINE_ENV, "1")
    out = svg.flow_map(tiles, [(0, 3, 9.0)], basemap=True)
    assert "<image" not in out and external(out) == []


@pytest.fixture(scope="module")
def report_doc(shared_data) -> dict:
    from privmob.render.report_files import report_document

    fixture = shared_data / "dpmr_fixture"
    with pm.Session(str(fixture / "test_data.csv"),
                    tessellation=str(fixture / "test_tessellation.geojson"),
                    budget=pm.PureDP(100), seed=3) as s:  # fmt: skip
        r = s.report(epsilon=1, max_trips=10, period=pm.Period("2020-12-13", "2020-12-20"))
        return report_document(r.release)


def test_the_report_draws_a_basemap_by_default_and_none_offline(report_doc) -> None:
    online = render_report_html(report_doc)
    assert online.count(ATTRIBUTION) == 2  # visits per tile and OD flows
    assert {u.split("/")[2] for u in external(online)} == {
        "tile.openstreetmap.org",
        "www.openstreetmap.org",  # the attribution's link
    }
    offline = render_report_html(report_doc, basemap=False)
    assert external(offline) == [] and ATTRIBUTION not in offline and "<image" not in offline
    # the offline page is complete: the same maps, tiles, names and legends
    for needle in ("class='pm-map'", "class='pm-legend'", "<title>Tile name: 1"):
        assert offline.count(needle) == online.count(needle) > 0


def test_the_cli_offline_switch_writes_a_page_with_no_address(shared_data, tmp_path) -> None:
    fixture = shared_data / "dpmr_fixture"
    argv = ["report", str(fixture / "test_data.csv"), "-t",
            str(fixture / "test_tessellation.geojson"), "-e", "1", "-M", "5", "--start",
            "2020-12-13", "--end", "2020-12-20", "--budget", "5", "--test-mode", "--seed", "1",
            "--quiet"]  # fmt: skip
    assert run_cli([*argv, "-o", str(tmp_path / "off" / "report.html"), "--offline-maps"]) == 0
    assert run_cli([*argv, "-o", str(tmp_path / "on" / "report.html")]) == 0
    off = (tmp_path / "off" / "report.html").read_text()
    on = (tmp_path / "on" / "report.html").read_text()
    assert external(off) == [] and "class='pm-map'" in off
    assert ATTRIBUTION in on and any(TILE_URL.match(u) for u in external(on))


def _trips() -> pd.DataFrame:
    rows = [(u, u, pd.Timestamp("2024-01-01 08:00"), 0, 4) for u in range(60)]
    return pd.DataFrame(rows, columns=["uid", "tid", "start_time", "origin", "destination"])


@pytest.mark.parametrize("offline", [False, True])
def test_notebook_displays_follow_the_sessions_switch(offline: bool, tmp_path: Path) -> None:
    grid = square_grid((13.0, 52.0, 13.03, 52.02), 1000)
    with pm.Session(_trips(), tessellation=grid, budget=pm.PureDP(20), dataset="g", seed=2,
                    offline_maps=offline) as s:  # fmt: skip
        od = s.od(epsilon=10, max_trips=1, period=pm.Period("2024-01-01", "2024-01-02"))
        html = od._repr_html_()
    if offline:
        assert external(html) == [] and ATTRIBUTION not in html
    else:
        assert ATTRIBUTION in html and any(TILE_URL.match(u) for u in external(html))
        assert external(od.html(basemap=False)) == []  # one display offline on request
