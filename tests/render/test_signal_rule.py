"""One rule for signal in every picture (issue 42, item 1): a value is coloured, drawn or
ranked iff it is above the noise floor of its family, the floor its caption states; small maps
share one colour scale; a cumulative share carries a band, or is not drawn when no cell clears
its floor.

Each picture is built so that some cells beat their own 95% margin but not their family's
floor (the case where colour and caption used to disagree), then parsed (``html.parser``) and
its colours read against the floor stated in its own words. Post-processing only: the
documents' values are set by hand, no true count is involved.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.render.test_uncertainty import fills, named_zones, number, parse

import privmob as pm
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.signal import noise_floor
from privmob.render import svg
from privmob.render.report_html import render_report_html

FULL_COLOUR = set(svg.PALETTE[1:]) | {"#4292c6"}
#: the count analyses of the report whose pictures colour cells: (section, shape, noise key)
COLOURED = (
    ("visits_per_tile", "path", "counts"),
    ("visits_per_time_tile", "path", "counts"),
    ("trips_over_time", "rect", "counts"),
    ("trips_per_weekday", "rect", "counts"),
    ("travel_time", "rect", "histogram"),
    ("jump_length", "rect", "histogram"),
)


@pytest.fixture(scope="module")
def report_doc(shared_data) -> dict:
    """A real report document (dpmr fixture, epsilon 1: margins of hundreds), its counts set
    by hand below."""
    from privmob.render.report_files import report_document

    fixture = shared_data / "dpmr_fixture"
    s = pm.Session(str(fixture / "test_data.csv"),
                   tessellation=str(fixture / "test_tessellation.geojson"),
                   budget=pm.PureDP(100), seed=3)  # fmt: skip
    r = s.report(epsilon=1, max_trips=10, period=pm.Period("2020-12-13", "2020-12-20"))
    doc = report_document(r.release)
    s.close()
    return doc


def _noise(a: dict, key: str) -> Noise:
    n = a["noise"][key]
    return Noise(NoiseKind(n["kind"]), float(n["scale"]))


def _cells(a: dict, key: str) -> int:
    """The cells of the analysis' family: its counts (and, for a histogram, its outliers bin,
    as its caption counts them)."""
    return len(a["counts"]) + (key == "histogram")


def between(a: dict, key: str) -> int:
    """A value above one cell's 95% margin and at or below the family's noise floor: the
    per-cell rule calls it signal, the caption's rule does not."""
    margin = _noise(a, key).margin_of_error()
    floor = noise_floor(_noise(a, key), _cells(a, key))
    assert margin + 2 <= floor
    return (margin + floor) // 2


def set_counts(doc: dict, strong: bool) -> dict:
    """Every coloured analysis' counts set between the margin and the floor; with ``strong``
    some cells (every third; in the small maps one cell) at three times the floor."""
    out = copy.deepcopy(doc)
    for name, _, key in COLOURED:
        a = out["analyses"][name]
        n = len(a["counts"])
        b = between(a, key)
        top = 3 * noise_floor(_noise(a, key), _cells(a, key))
        values = [b] * n
        if strong:
            step = n if name == "visits_per_time_tile" else 3
            values = [top if i % step == 0 else b for i in range(n)]
        a["counts"] = values
        if key == "histogram":
            a["outliers"] = 0
    return out


def stated_floors(elements: list[dict], section: str) -> set[float]:
    """Every figure a section's words give as "the noise floor" (captions, legends, notes)."""
    texts = " ".join(e["text"] for e in elements if e["section"] == section)
    return {number(m) for m in re.findall(r"noise floor ±?([\d,]+)", texts)}


@pytest.mark.parametrize("strong", [False, True], ids=["nothing-clears", "some-clear"])
def test_colour_and_caption_use_one_floor(report_doc, strong) -> None:
    """A cell is drawn in colour iff it is above the floor its section states; the cells
    between one cell's margin and the family's floor are grey or hatched (on the old code they
    were coloured under "no tile clears the noise floor")."""
    doc = set_counts(report_doc, strong)
    elements = parse(render_report_html(doc))
    for name, tag, key in COLOURED:
        a = doc["analyses"][name]
        floors = stated_floors(elements, name)
        assert len(floors) == 1, (name, floors)  # one floor, said, for every picture of it
        (floor,) = floors
        margin = _noise(a, key).margin_of_error()
        shapes = fills(elements, name, tag)
        assert shapes, name
        assert any(margin < v <= floor for v, _, _ in shapes), name  # the disputed cells
        for value, fill, cls in shapes:
            below = value <= floor
            assert (cls == "pm-below") == below, (name, value, floor, cls)
            if below:
                assert fill not in FULL_COLOUR, (name, value, fill)
        assert any(v > floor for v, _, _ in shapes) == strong, name


def test_a_caption_that_says_nothing_clears_has_nothing_coloured(report_doc) -> None:
    """The issue's case: under "no tile clears the noise floor F" no tile has a palette
    colour, and the histogram marked "unreliable: no bin clears its noise floor" has no blue
    bar."""
    elements = parse(render_report_html(set_counts(report_doc, strong=False)))
    notes = " ".join(e["text"] for e in elements if e["section"] == "visits_per_tile")
    assert "no tile clears the noise floor" in notes
    assert not [f for _, f, _ in fills(elements, "visits_per_tile", "path") if f in FULL_COLOUR]
    assert "travel_time" in {
        e["section"] for e in elements if "pm-unreliable" in e["attrs"].get("class", "")
    }
    assert not [f for _, f, _ in fills(elements, "travel_time", "rect") if f in FULL_COLOUR]


def _svg_of(e: dict) -> dict | None:
    while e is not None and e["tag"] != "svg":
        e = e["parent"]
    return e


def test_small_maps_share_one_colour_scale(report_doc) -> None:
    """A value has one colour in every small map, every map's legend has the same breaks, and
    the figure says the scale is shared (on the old code each map had its own maximum)."""
    doc = copy.deepcopy(report_doc)
    a = doc["analyses"]["visits_per_time_tile"]
    nw = len(doc["params"]["time_windows"])
    k = len(doc["tessellation"]["ids"])
    floor = noise_floor(_noise(a, "counts"), k * 2 * nw)
    c = np.zeros((k, 2, nw), dtype=int)
    c[0, 0, 0], c[1, 0, 0] = 10 * floor, 2 * floor  # one map up to 10 floors
    c[0, 0, 1] = 2 * floor  # another whose largest value is 2 floors
    c[2, 1, 3] = 6 * floor
    a["counts"] = c.ravel().tolist()
    elements = parse(render_report_html(doc))
    colour_of: dict[float, set[str]] = {}
    for value, fill, _ in fills(elements, "visits_per_time_tile", "path"):
        colour_of.setdefault(value, set()).add(fill)
    assert len(colour_of[2 * floor]) == 1, colour_of[2 * floor]
    assert colour_of[10 * floor] != colour_of[2 * floor]
    maps = [e for e in elements if e["tag"] == "svg" and e["section"] == "visits_per_time_tile"]
    assert len(maps) == 2 * nw
    breaks = {
        tuple(
            t["text"] for t in elements if t["attrs"].get("class") == "pm-break" and _svg_of(t) is m
        )
        for m in maps
    }
    assert len(breaks) == 1 and next(iter(breaks)), breaks
    words = " ".join(e["text"] for e in elements if e["section"] == "visits_per_time_tile")
    assert "one scale for all" in words and "one colour scale" in words


def cumulative_svgs(elements: list[dict], section: str) -> list[dict]:
    """The svg elements of a section that draw a cumulative share (said in their texts)."""
    out = []
    for m in (e for e in elements if e["tag"] == "svg" and e["section"] == section):
        words = " ".join(t["text"] for t in elements if _svg_of(t) is m)
        if "cumulative share" in words:
            out.append(m)
    return out


@pytest.mark.parametrize("strong", [False, True], ids=["nothing-clears", "some-clear"])
def test_a_cumulative_share_has_a_band_or_is_not_drawn(report_doc, strong) -> None:
    doc = set_counts(report_doc, strong)
    od = doc["analyses"]["od_flows"]
    f_od = noise_floor(_noise(od, "counts"), len(od["counts"]))
    od["counts"] = [3 * f_od if strong and i == 5 else 0 for i in range(len(od["counts"]))]
    elements = parse(render_report_html(doc))
    for name in ("visits_per_tile", "od_flows", "travel_time", "jump_length"):
        charts = cumulative_svgs(elements, name)
        assert charts, name
        for m in charts:
            inside = [e for e in elements if _svg_of(e) is m]
            curves = [e for e in inside if e["tag"] == "polyline"]
            bands = [e for e in inside if e["attrs"].get("class") == "pm-band"]
            if strong:
                assert curves and len(bands) == len(curves), name
            else:  # nothing clears the floor: no curve, and a line says why
                assert not curves, name
                assert "pm-no-curve" in m["attrs"].get("class", ""), name
                assert "noise floor" in " ".join(e["text"] for e in inside), name


def test_the_band_holds_the_true_curve_at_least_95_percent_of_the_time() -> None:
    """share_band holds the true cumulative share (bins in order, and by rank) whenever no
    cell's noise exceeds the floor: >= 95% of draws by the union bound. 200 draws of 30 noisy
    cells; the test allows 25 misses (Binomial(200, 0.05) > 25: false-failure rate < 1e-4)."""
    rng = np.random.default_rng(12)
    true = np.array([400, 250, 120, 60, 30, 10] + [0] * 24, dtype=float)
    b = 20.0
    floor = noise_floor(Noise(NoiseKind.DISCRETE_LAPLACE, b), true.size)
    p = 1 - np.exp(-1 / b)
    misses = {False: 0, True: 0}
    for _ in range(200):
        noisy = true + rng.geometric(p, true.size) - rng.geometric(p, true.size)
        for ranked in (False, True):
            t = -np.sort(-true) if ranked else true
            share = np.cumsum(t) / t.sum()
            _, low, high = svg.share_band(noisy.tolist(), floor, ranked=ranked)
            misses[ranked] += bool(np.any(share < low - 1e-12) or np.any(share > high + 1e-12))
    assert misses[False] <= 25 and misses[True] <= 25, misses


# -- notebook displays -------------------------------------------------------------------------


class Published:
    """A release with its published table replaced (the display reads only these)."""

    def __init__(self, release: Any, tables: dict[str, pd.DataFrame]) -> None:
        self.kind = release.kind
        self.noise = release.noise
        self.tables = tables


def test_a_zone_display_colours_only_the_zones_above_the_floor_its_note_states() -> None:
    """The tutorial's case: a zone above its margin but not the floor of the 9 zones is
    hatched, as "no zone clears the noise floor" says; a zone above the floor is coloured and
    ranked."""
    from privmob.render.release_html import picture

    rng = np.random.default_rng(5)
    n = 600
    events = pd.DataFrame(
        {
            "uid": rng.integers(0, 60, n),
            "datetime": pd.Timestamp("2024-01-01 21:00")
            + pd.to_timedelta(rng.integers(0, 3600, n), unit="s"),
            "lat": 52 + rng.uniform(0.0005, 0.0095, n),
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    )
    s = pm.Session(events, tessellation=named_zones(), budget=pm.PureDP(5), dataset="p", seed=1)
    pop = s.population(epsilon=1)
    release = pop.release
    noise = Noise(NoiseKind(release.noise["kind"]), float(release.noise["scale"]))
    margin, floor = noise.margin_of_error(), noise_floor(noise, 9)
    assert margin + 2 <= floor
    mid = (margin + floor) // 2
    table = release.tables["population"].copy()
    for values, strong in (([mid] + [0] * 8, False), ([mid, 3 * floor] + [0] * 7, True)):
        table["count"] = [values[int(z)] if str(z).isdigit() else 0 for z in table["zone"]]
        elements = parse(picture(Published(release, {"population": table}), s.tessellation))
        notes = " ".join(
            e["text"] for e in elements if "pm-ranking-note" in e["attrs"].get("class", "")
        )
        (stated,) = {number(m) for m in re.findall(r"noise floor ([\d,]+)", notes)}
        assert stated == floor
        assert ("no zone clears" in notes) == (not strong)
        tiles = fills(elements, None, "path")
        assert len(tiles) == 9
        for value, fill, cls in tiles:
            assert (cls == "pm-below") == (value <= stated), (value, stated, fill)
            assert (fill in FULL_COLOUR) == (value > stated), (value, stated, fill)
    s.close()


def test_every_primitive_given_a_floor_shows_only_what_clears_it() -> None:
    """Bars, lines, tiles and flows between one cell's margin (10) and the family's floor (30)
    are drawn neutral; only values above the floor get a colour or a line."""
    tess = {
        "outlines": [[[(0, 0), (1, 0), (1, 1), (0, 1)]], [[(1, 0), (2, 0), (2, 1), (1, 1)]]],
        "names": ["West", "East"],
        "lng": [0.5, 1.5],
        "lat": [0.5, 0.5],
    }
    page = parse(
        "<body>"
        + svg.bar_chart(["a", "b"], [20, 40], margin=10, floor=30)
        + svg.line_chart(
            ["0", "1"], {"noise": [20.0, 25.0], "signal": [20.0, 45.0]}, margin=10, floor=30
        )
        + svg.choropleth(tess, [20, 40], margin=10, floor=30, title="m")
        + svg.flow_map(tess, [(0, 1, 20.0), (1, 0, 40.0)], floor=30)
        + "</body>"
    )
    bars = fills(page, None, "rect")
    assert [(v, c) for v, _, c in bars] == [(20, "pm-below"), (40, "pm-bar")]
    lines = {
        t["text"].split(" (")[0]: t["parent"]["attrs"]["class"]
        for t in page
        if t["tag"] == "title" and t["parent"]["tag"] == "polyline"
    }
    assert lines == {"noise": "pm-below", "signal": "pm-line"}
    tiles = [(v, c) for v, _, c in fills(page, None, "path") if c in ("pm-below", "pm-tile")]
    assert tiles == [(20, "pm-below"), (40, "pm-tile")]
    flows = [e for e in page if e["attrs"].get("class") == "pm-flow"]
    assert len(flows) == 1
    assert [t["text"] for t in page if t["parent"] is flows[0]] == ["East → West: 40 trips"]
