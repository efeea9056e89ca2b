"""Uncertainty in every picture: no value that noise alone could have produced is ranked, no
cell within its 95% margin of 0 is drawn in a full colour, multi-period releases are shown one
period at a time, and all of it reads only noisy values and public parameters (post-processing,
SPEC invariant 6).

The pages and SVG are parsed (``html.parser``), not matched as text. Statistical statements
use fixed seeds; each states its false-failure rate.
"""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from typing import ClassVar

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box
from tests.helpers import random_times

import privmob as pm
from privmob.errors import ConfigError
from privmob.render import svg
from privmob.render.report_html import noise_floor, render_report_html


class Elements(HTMLParser):
    """Every element with its attributes, the text directly inside it and the id of the
    enclosing <section>."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[dict] = []
        self.found: list[dict] = []
        self.section: list[str] = []

    def _open(self, tag, attrs) -> dict:
        el = {"tag": tag, "attrs": dict(attrs), "text": "", "section": None}
        if tag == "section":
            self.section.append(el["attrs"].get("id", ""))
        el["section"] = self.section[-1] if self.section else None
        el["parent"] = self.stack[-1] if self.stack else None
        self.found.append(el)
        return el

    def handle_starttag(self, tag, attrs):
        el = self._open(tag, attrs)
        if tag not in ("meta", "br", "input"):
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self._open(tag, attrs)  # <rect .../>: no children

    def handle_endtag(self, tag):
        while self.stack:
            el = self.stack.pop()
            if el["tag"] == tag:
                break
        if tag == "section" and self.section:
            self.section.pop()

    def handle_data(self, data):
        if self.stack:
            self.stack[-1]["text"] += data


def parse(html: str) -> list[dict]:
    p = Elements()
    p.feed(html)
    return p.found


def number(text: str) -> float:
    m = re.search(r"-?[\d,]+(\.\d+)?", text)
    assert m, text
    return float(m.group(0).replace(",", ""))


def ranking_values(elements: list[dict], section: str) -> list[float]:
    """The values of a section's ranking table (the last cell of each row after the header)."""
    tables = [e for e in elements if e["tag"] == "table" and e["section"] == section]
    values = []
    for t in tables:
        rows = [e for e in elements if e["tag"] == "tr" and e["parent"] is t]
        head = [e["text"] for e in elements if e["tag"] == "th" and e["parent"] is rows[0]]
        if not head or head[0] != "rank":
            continue
        for r in rows[1:]:
            cells = [e for e in elements if e["tag"] == "td" and e["parent"] is r]
            values.append(number(cells[-1]["text"]))
    return values


@pytest.fixture(scope="module")
def report_doc(shared_data) -> dict:
    """A real report document (dpmr fixture), its counts then replaced below."""
    from privmob.render.report_files import report_document

    fixture = shared_data / "dpmr_fixture"
    s = pm.Session(str(fixture / "test_data.csv"),
                   tessellation=str(fixture / "test_tessellation.geojson"),
                   budget=pm.PureDP(100), seed=3)  # fmt: skip
    r = s.mobility_report(epsilon=1, max_trips=10, period=pm.Period("2020-12-13", "2020-12-20"))
    doc = report_document(r.release)
    s.close()
    return doc


def noise_only(doc: dict, seed: int) -> dict:
    """The document with every count analysis replaced by noise on all-zero true counts:
    whatever a picture shows of it is noise alone."""
    out = copy.deepcopy(doc)
    rng = np.random.default_rng(seed)
    for a in out["analyses"].values():
        noise = a.get("noise", {}).get("counts") or a.get("noise", {}).get("histogram")
        if not noise or "counts" not in a:
            continue
        b = float(noise["scale"])
        n = len(a["counts"])
        # two-sided geometric (discrete Laplace) draws of scale b
        p = 1 - np.exp(-1 / b)
        draws = rng.geometric(p, n) - rng.geometric(p, n)
        a["counts"] = draws.astype(int).tolist()
    return out


def test_a_noise_only_value_never_appears_in_a_ranking(report_doc) -> None:
    # 20 documents of pure noise: the report's ranking tables list nothing. Each ranking is
    # empty unless some cell's noise clears the floor, P <= 5% per table by its union bound
    # over the cells; over 20 documents x 2 rankings we allow at most 5 non-empty tables
    # (binomial(40, 0.05) > 5: probability 0.014 at the bound, far less in fact: the floor
    # is conservative), and a listed value is always above the floor.
    non_empty = 0
    for seed in range(20):
        doc = noise_only(report_doc, seed)
        html = render_report_html(doc)
        elements = parse(html)
        for name in ("visits_per_tile", "od_flows"):
            a = doc["analyses"][name]
            listed = ranking_values(elements, name)
            floor = noise_floor(a["noise"]["counts"], len(a["counts"]))
            assert all(v > floor for v in listed), (name, listed, floor)
            non_empty += bool(listed)
    assert non_empty <= 5


def test_the_issue_case_ranks_no_pure_noise(report_doc) -> None:
    """Epsilon 1 over 15 analyses on 30 users (margin +-449 per OD cell, the issue's 10-taxi
    case): the OD ranking lists only flows above the noise floor, on the real release."""
    html = render_report_html(report_doc)
    a = report_doc["analyses"]["od_flows"]
    floor = noise_floor(a["noise"]["counts"], len(a["counts"]))
    listed = ranking_values(parse(html), "od_flows")
    assert all(v > floor for v in listed)
    assert len(listed) == sum(1 for v in a["counts"] if v > floor) or len(listed) == 10


def fills(elements: list[dict], section: str | None, tag: str) -> list[tuple[float, str, str]]:
    """(value from the tooltip, fill, class) of each drawn shape with a <title>."""
    out = []
    for e in elements:
        if e["tag"] != tag or (section is not None and e["section"] != section):
            continue
        titles = [t for t in elements if t["tag"] == "title" and t["parent"] is e]
        if not titles:
            continue
        # "<name>: <value> ..." where a name may hold ": " itself ("Tile name: 2: 1,024 visits")
        values = re.findall(r": (-?[\d,]+(?:\.\d+)?)", titles[0]["text"])
        if not values:
            continue
        value = number(values[-1])
        out.append((value, e["attrs"].get("fill", ""), e["attrs"].get("class", "")))
    return out


def test_a_below_margin_cell_is_never_drawn_in_full_colour(report_doc) -> None:
    doc = noise_only(report_doc, 7)
    elements = parse(render_report_html(doc))
    full_colour = set(svg.PALETTE[1:]) | {"#4292c6"}
    checked = 0
    for name, tag in (
        ("visits_per_tile", "path"),
        ("visits_per_time_tile", "path"),
        ("trips_over_time", "rect"),
        ("trips_per_weekday", "rect"),
        ("travel_time", "rect"),
    ):
        a = doc["analyses"][name]
        margin = a["margin_of_error_95"].get("counts", a["margin_of_error_95"].get("histogram"))
        shapes = fills(elements, name, tag)
        assert shapes, name
        for value, fill, cls in shapes:
            if value <= margin:
                checked += 1
                assert fill not in full_colour and cls == "pm-below", (name, value, fill)
                assert fill == svg.BELOW or fill.startswith("url(#pm-hatch-")
    assert checked > 50  # noise only: most cells are within their margin
    # the maps' legends say what the hatch means (the noise floor the captions state)
    legends = [e for e in elements if e["attrs"].get("class") == "pm-legend-below"]
    assert legends and all("noise floor" in "".join(
        t["text"] for t in elements if t["parent"] is lg or (t["parent"] or {}).get("parent") is lg
    ) for lg in legends)  # fmt: skip


def test_bars_carry_margin_whiskers_and_lines_bands() -> None:
    page = parse(
        "<body>"
        + svg.bar_chart(["a", "b", "c"], [100, 3, -2], margin=10)
        + svg.line_chart(["0", "1"], {"s": [5.0, 50.0]}, margin=10)
        + "</body>"
    )
    whiskers = [e for e in page if e["attrs"].get("class") == "pm-margin"]
    assert len(whiskers) == 3
    bars = fills(page, None, "rect")
    assert [(v, f) for v, f, _ in bars] == [(100, "#4292c6"), (3, svg.BELOW), (-2, svg.BELOW)]
    assert [e for e in page if e["attrs"].get("class") == "pm-band"]
    notes = [e["text"] for e in page if e["attrs"].get("class") == "pm-uncertainty"]
    assert notes and all("95% margin" in t for t in notes)


def test_quartiles_of_a_noise_only_histogram_are_marked_unreliable(report_doc) -> None:
    elements = parse(render_report_html(noise_only(report_doc, 11)))
    marked = {e["section"] for e in elements if "pm-unreliable" in e["attrs"].get("class", "")}
    dists = ("travel_time", "jump_length", "time_between_trips", "radius_of_gyration")
    # each histogram is pure noise: it escapes the mark only if a bin clears its floor (P <=
    # 5% each by the union bound; all four escaping: < 1e-5)
    assert sum(name in marked for name in dists) >= 3
    # a histogram with a clear signal is not marked
    strong = copy.deepcopy(report_doc)
    a = strong["analyses"]["travel_time"]
    a["counts"] = [0] * len(a["counts"])
    a["counts"][3] = 50 * a["margin_of_error_95"]["histogram"]
    elements = parse(render_report_html(strong))
    assert "travel_time" not in {
        e["section"] for e in elements if "pm-unreliable" in e["attrs"].get("class", "")
    }


# -- notebook displays -------------------------------------------------------------------------


def named_zones(n: int = 3) -> gpd.GeoDataFrame:
    tiles = [box(13 + c * 0.01, 52 + r * 0.01, 13.01 + c * 0.01, 52.01 + r * 0.01)
             for r in range(n) for c in range(n)]  # fmt: skip
    names = [f"Zone{chr(65 + i)}" for i in range(n * n)]
    return gpd.GeoDataFrame({"tile_id": range(n * n), "name": names}, geometry=tiles, crs=4326)


def daily_trips(days: int = 30, seed: int = 2) -> pd.DataFrame:
    """A strong daily flow 0 -> 4 (40 users a day) and a little background."""
    rng = np.random.default_rng(seed)
    rows = []
    tid = 0
    for day in range(days):
        t0 = pd.Timestamp("2024-01-01") + pd.Timedelta(days=day, hours=8)
        for u in range(40):
            rows.append((day * 100 + u, tid, t0, 0, 4))
            tid += 1
        for u in range(5):
            o = int(rng.integers(0, 9))
            rows.append((day * 100 + 50 + u, tid, t0, o, (o + 1) % 9))
            tid += 1
    return pd.DataFrame(rows, columns=["uid", "tid", "start_time", "origin", "destination"])


def test_a_multi_period_od_display_shows_one_period_never_the_sum() -> None:
    s = pm.Session(daily_trips(), tessellation=named_zones(), budget=pm.PureDP(50),
                   dataset="d", seed=4)  # fmt: skip
    od = s.od_matrix(epsilon=20, max_trips=1,
                     period=pm.Period("2024-01-01", "2024-01-31", bin="day"))  # fmt: skip
    html = od._repr_html_()
    table = od.to_pandas()
    first = table[table["period"] == table["period"].iloc[0]]
    # the legend's largest width is one day's largest flow (never the 30-day sum, ~1,200)
    elements = parse(html)
    breaks = [number(e["text"]) for e in elements if e["attrs"].get("class") == "pm-break"]
    assert breaks and max(breaks) == pytest.approx(first["count"].max(), abs=1)
    assert max(breaks) < 100
    assert "1 of 30" in html and "never their sum" in html
    # another day on request
    assert "2 of 30" in od.html(period=str(table["period"].unique()[1]))
    with pytest.raises(ConfigError, match="no period"):
        od.html(period="1999-01-01")
    # the ranking names the zones beside their ids
    assert "ZoneA (0)" in html and "ZoneE (4)" in html
    s.close()


def test_population_display_names_zones_and_hatches_noise() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    events = pd.DataFrame(
        {
            "uid": rng.integers(0, 150, n),
            "datetime": random_times(rng, n, "2024-01-01 21:00", 3600),
            "lat": 52 + rng.uniform(0.0005, 0.0095, n),  # every home in the bottom row
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    )
    s = pm.Session(events, tessellation=named_zones(), budget=pm.PureDP(5), dataset="p", seed=1)
    pop = s.population(epsilon=2)
    html = pop._repr_html_()
    elements = parse(html)
    n = pop.metadata.noise
    floor = noise_floor({"kind": n["kind"], "scale": n["scale"]}, 9)  # the 9 zones shown
    tiles = fills(elements, None, "path")
    assert len(tiles) == 9
    for value, fill, _cls in tiles:
        assert (value <= floor) == fill.startswith("url(#pm-hatch-")
    # the first rows carry the zone names beside the ids
    cells = [e["text"] for e in elements if e["tag"] == "td"]
    assert "ZoneA" in cells and "zone_name" in html
    s.close()


# -- post-processing only -----------------------------------------------------------------------


class Recorder:
    """A release whose attribute reads are recorded: a display must read only the published
    tables and the public parameters."""

    PUBLIC: ClassVar[set[str]] = {
        "kind", "tables", "table", "noise", "domain", "params", "cost", "unit", "bounds",
        "for_publication",
    }  # fmt: skip

    def __init__(self, release) -> None:
        object.__setattr__(self, "_release", release)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self._release, name)


def test_displays_and_layers_read_only_published_values_and_public_parameters() -> None:
    from privmob.render.layers import release_layer
    from privmob.render.release_html import release_html

    s = pm.Session(daily_trips(3), tessellation=named_zones(), budget=pm.PureDP(50),
                   dataset="d", seed=4)  # fmt: skip
    od = s.od_matrix(epsilon=5, max_trips=1,
                     period=pm.Period("2024-01-01", "2024-01-04", bin="day"))  # fmt: skip
    spy = Recorder(od.release)
    release_html(spy, s.tessellation)
    release_layer(spy, s.tessellation)
    assert spy.read and spy.read <= Recorder.PUBLIC, spy.read - Recorder.PUBLIC
    # the same published tables give the same display (nothing else is read)
    assert release_html(od.release, s.tessellation) == release_html(spy, s.tessellation)
    s.close()
