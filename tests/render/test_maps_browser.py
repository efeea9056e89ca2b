"""Maps people can read, checked in a real headless Chromium on the NYC taxi zones: legends
with units and class breaks, tile names on hover, zoom/pan without external scripts, OD flows
drawn only when they clear the noise floor, and axis labels that never overlap (element boxes
measured by the browser)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.render.test_report_browser import _run

from privmob.data.sources import load_trip_points
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, Tiles, mobility_report
from privmob.render import svg
from privmob.render.report_files import write_report
from privmob.render.report_html import noise_floor, render_report_html

ZONES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "nyc_taxi_zones"

#: Injected into a copy of the page: measures what a reader sees and writes it to the DOM.
PROBE = """<script>
window.addEventListener('load',function(){
function overlaps(sel,root){var b=[].map.call(root.querySelectorAll(sel),function(e){
return e.getBoundingClientRect();}).filter(function(r){return r.width>0;});var n=0;
for(var i=0;i<b.length;i++)for(var j=i+1;j<b.length;j++){var p=b[i],q=b[j];
if(p.left<q.right-0.5&&q.left<p.right-0.5&&p.top<q.bottom-0.5&&q.top<p.bottom-0.5)n++;}
return [b.length,n];}
var out={maps:[],charts:[]};
document.querySelectorAll('svg.pm-map').forEach(function(s){
out.maps.push({legend:s.querySelectorAll('g.pm-legend').length,
breaks:overlaps('text.pm-break',s),flows:s.querySelectorAll('path.pm-flow').length,
zoom:s.querySelectorAll('g.pm-zoom').length,
named:[].filter.call(s.querySelectorAll('g.pm-zoom path > title'),
function(t){return t.textContent.length>0;}).length,
legendText:(s.querySelector('g.pm-legend')||{textContent:''}).textContent});});
document.querySelectorAll('svg').forEach(function(s){
if(s.querySelector('text.pm-xlabel'))out.charts.push(overlaps('text.pm-xlabel',s));});
var m=document.querySelector('svg.pm-map');if(m){var r=m.getBoundingClientRect();
m.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r.left+r.width/2,
clientY:r.top+r.height/3,bubbles:true,cancelable:true}));
out.zoomed=m.querySelector('g.pm-zoom').getAttribute('transform')||'';}
document.body.setAttribute('data-probe',JSON.stringify(out));});
</script>"""


@pytest.fixture(scope="module")
def taxi_report(tmp_path_factory) -> tuple[Path, dict]:
    if not (ZONES / "taxi_zones.geojson").exists():
        pytest.skip(f"../shared/data not found: {ZONES}")
    tess = load_tessellation(ZONES / "taxi_zones.geojson")
    pts = tess.gdf.geometry.representative_point()
    rng = np.random.default_rng(7)
    n = 6000
    # a busy corridor (tile 160 -> tile 1) and background trips between random zones
    o = np.where(rng.random(n) < 0.3, 160, rng.integers(0, tess.k, n))
    d = np.where(o == 160, 1, rng.integers(0, tess.k, n))
    day = pd.Timestamp("2024-03-01") + pd.to_timedelta(rng.integers(0, 92 * 24, n), unit="h")
    rows = []
    for i in range(n):
        for end, z in enumerate((o[i], d[i])):
            t = day[i] + pd.Timedelta(minutes=30 * end)
            rows.append((i // 2, i, t, pts.iloc[z].y, pts.iloc[z].x))
    out = tmp_path_factory.mktemp("taxi")
    frame = pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])
    frame.to_csv(out / "trips.csv", index=False)
    eng = DuckDBEngine()
    view = load_trip_points(out / "trips.csv", engine=eng, tessellation=tess).view
    cfg = ReportConfig.build(epsilon=5, max_trips=2, period=("2024-03-01", "2024-06-01"))
    acc = Accountant(Ledger(out / "ledger.sqlite"), "taxi", budget=100)
    rel = mobility_report(eng, view, Tiles.from_tessellation(tess), cfg, acc, rng=2)
    paths = write_report(rel, out / "report.html", basemap=False)
    return paths["html"], json.loads(paths["json"].read_text())


def _probe(html: Path, tmp_path: Path) -> dict:
    page = tmp_path / "probed.html"
    page.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    res = _run(["--dump-dom", "--virtual-time-budget=3000", page.as_uri()])
    m = re.search(r'data-probe="([^"]*)"', res.stdout)
    assert m, "the probe did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.browser
@pytest.mark.slow
def test_taxi_zone_maps_have_legends_names_zoom_and_honest_flows(taxi_report, tmp_path):
    html, doc = taxi_report
    seen = _probe(html, tmp_path)
    maps = seen["maps"]
    assert len(maps) >= 2  # visits per tile, OD flows
    for m in maps:
        assert m["legend"] == 1 and m["zoom"] == 1
        assert m["breaks"][0] >= 2 and m["breaks"][1] == 0, "legend labels overlap"
        assert m["named"] >= 263  # every taxi zone has its name on hover
    assert any("visits (noisy" in m["legendText"] for m in maps)
    assert "scale(1.25)" in seen["zoomed"]  # a wheel turn zooms the map (inline JS)
    # the OD map draws exactly the flows that clear the stated noise floor (at most 10)
    a = doc["analyses"]["od_flows"]
    c = np.asarray(a["counts"], dtype=float)
    floor = noise_floor(a["noise"]["counts"], c.size)
    assert floor > a["noise"]["counts"]["scale"] * np.log(c.size)  # stricter than b ln N
    expected = min(10, int((c > floor).sum()))
    assert expected >= 1  # the synthetic corridor clears it
    assert [m["flows"] for m in maps if m["flows"] or "trips" in m["legendText"]] == [expected]
    # daily bars over 92 days and the other charts: no two x labels overlap
    assert seen["charts"] and all(n_overlap == 0 for _, n_overlap in seen["charts"])
    # offline: no external script or tile server
    text = html.read_text()
    assert "<script src" not in text and "http://" not in text.replace(
        "http://www.w3.org/2000/svg", ""
    )
    assert "https://" not in text


@pytest.mark.browser
@pytest.mark.slow
def test_a_year_of_daily_labels_does_not_overlap(tmp_path):
    days = [str(d.date()) for d in pd.date_range("2024-01-01", "2024-12-31")]
    values = list(range(len(days)))
    page = tmp_path / "year.html"
    page.write_text(
        "<!DOCTYPE html><html><body>"
        + svg.bar_chart(days, values, width=760)
        + svg.line_chart(days, {"trips": values}, width=760)
        + "</body></html>"
    )
    seen = _probe(page, tmp_path)
    assert len(seen["charts"]) == 2
    for n_labels, n_overlap in seen["charts"]:
        assert 5 <= n_labels <= 20 and n_overlap == 0


@pytest.mark.browser
@pytest.mark.slow
def test_screenshot_of_the_taxi_report(taxi_report, tmp_path):
    import matplotlib.image as mpimg

    html, _ = taxi_report
    shot = tmp_path / "taxi.png"
    _run([f"--screenshot={shot}", "--window-size=1280,5000", html.as_uri()])
    assert shot.exists(), "Chromium wrote no screenshot"
    keep = Path(__file__).parent / "_screenshots"
    if keep.exists():  # to look at it: mkdir tests/render/_screenshots (git-ignored)
        (keep / "taxi.png").write_bytes(shot.read_bytes())
    img = mpimg.imread(shot)[..., :3]
    assert img.shape == (5000, 1280, 3) and img.std() > 0.05  # not blank
    red_flows = np.all(np.abs(img - np.array([0xE8, 0x93, 0x93]) / 255) < 0.08, axis=-1)
    classes = [np.array([int(c[i : i + 2], 16) for i in (1, 3, 5)]) / 255 for c in svg.PALETTE[2:]]
    tiles = np.any([np.all(np.abs(img - c) < 0.02, axis=-1) for c in classes], axis=0)
    assert tiles.mean() > 0.002, "no choropleth visible"
    assert red_flows.sum() > 50, "no OD flow line visible"


@pytest.mark.browser
@pytest.mark.slow
def test_the_basemap_page_is_complete_without_a_network(taxi_report, tmp_path):
    """The default page (web tiles under the maps) viewed where no tile server answers (every
    host name unresolvable): the maps, their legends, names and labels are all there, no
    script error, the attribution shown; only the tiles' requests fail."""
    html, doc = taxi_report
    online = tmp_path / "online.html"
    online.write_text(render_report_html(doc))
    page = tmp_path / "probed.html"
    page.write_text(online.read_text().replace("</body>", PROBE + "</body>"))
    res = _run(
        ["--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "--virtual-time-budget=3000",
         page.as_uri()]
    )  # fmt: skip
    m = re.search(r'data-probe="([^"]*)"', res.stdout)
    assert m, "the page did not finish loading without a network"
    seen = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    offline = _probe(html, tmp_path)
    assert [(x["legend"], x["named"], x["flows"]) for x in seen["maps"]] == [
        (x["legend"], x["named"], x["flows"]) for x in offline["maps"]
    ]
    assert re.search(r'<div id="js-errors">\s*</div>', res.stdout), "a JS error was caught"
    assert res.stdout.count("© OpenStreetMap contributors") == 2


#: Zooms the first map 4 times (in steps of the page's own wheel handler) and measures, in the
#: browser, the labels shown before and after: how many, and how many pairs of boxes overlap.
ZOOM_PROBE = """<script>
window.addEventListener('load',function(){
var svg=document.querySelector('svg.pm-map');
function shown(){var b=[].filter.call(svg.querySelectorAll('text.pm-label'),function(t){
return t.getAttribute('display')!=='none';}).map(function(t){return t.getBoundingClientRect();})
.filter(function(r){return r.width>0;});var n=0;for(var i=0;i<b.length;i++)
for(var j=i+1;j<b.length;j++){var p=b[i],q=b[j];if(p.left<q.right-0.5&&q.left<p.right-0.5&&
p.top<q.bottom-0.5&&q.top<p.bottom-0.5)n++;}
return {n:b.length,overlaps:n,height:b.length?b[0].height:0};}
var before=shown(),r=svg.getBoundingClientRect();
for(var k=0;k<7;k++)svg.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,
clientX:r.left+r.width/2,clientY:r.top+r.height/2,bubbles:true,cancelable:true}));
setTimeout(function(){document.body.setAttribute('data-zoom-probe',JSON.stringify(
{before:before,after:shown(),transform:svg.querySelector('g.pm-zoom').getAttribute('transform')}));
},50);});
</script>"""


@pytest.mark.browser
@pytest.mark.slow
def test_zooming_in_shows_more_zone_names_at_their_size(taxi_report, tmp_path):
    html, _ = taxi_report
    page = tmp_path / "zoomed.html"
    page.write_text(html.read_text().replace("</body>", ZOOM_PROBE + "</body>"))
    res = _run(["--dump-dom", "--virtual-time-budget=3000", page.as_uri()])
    m = re.search(r'data-zoom-probe="([^"]*)"', res.stdout)
    assert m, "the probe did not run"
    seen = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert "scale(4.76" in seen["transform"]  # 1.25 ** 7
    before, after = seen["before"], seen["after"]
    assert after["n"] > before["n"] and after["overlaps"] == before["overlaps"] == 0
    if before["n"]:
        assert after["height"] == pytest.approx(before["height"], rel=0.1)  # size on screen kept
