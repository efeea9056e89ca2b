"""The HTML report in a real headless Chromium: loads offline, no console errors, and a
screenshot shows the charts and the map."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from privmob.data.sources import load_trip_points
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, Tiles, mobility_report
from privmob.render.report_files import write_report

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "dpmr_fixture"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium installed (Debian: apt-get install chromium)")


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    if not FIXTURE.exists():
        pytest.skip(f"../shared/data not found: {FIXTURE}")
    tess = load_tessellation(FIXTURE / "test_tessellation.geojson")
    eng = DuckDBEngine()
    view = load_trip_points(FIXTURE / "test_data.csv", engine=eng, tessellation=tess).view
    # epsilon 200: the bars of the first charts clear their noise floor (only signal is blue)
    cfg = ReportConfig.build(epsilon=200, max_trips=5, period=("2020-12-01", "2021-01-01"))
    out = tmp_path_factory.mktemp("report")
    acc = Accountant(Ledger(out / "ledger.sqlite"), "fixture", budget=1000)
    rel = mobility_report(eng, view, Tiles.from_tessellation(tess), cfg, acc, rng=2)
    # offline maps: the page names no external address (the basemap's page is checked in
    # test_maps_browser, viewed without a network)
    return write_report(rel, out / "report.html", basemap=False)["html"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="pm-chromium-")
    try:
        return subprocess.run(
            [_browser(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.browser
@pytest.mark.slow
def test_report_loads_without_console_errors(report_html):
    res = _run(["--enable-logging=stderr", "--v=0", "--dump-dom", report_html.as_uri()])
    dom = res.stdout
    assert "<svg" in dom
    m = re.search(r'data-rendered="(\d+)"', dom)
    assert m and int(m.group(1)) >= 20, "the page's script did not run"
    assert re.search(r"<div id=\"js-errors\">\s*</div>", dom), "a JS error was caught"
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    # offline: nothing is fetched from the network
    assert "net::ERR" not in res.stderr


@pytest.mark.browser
@pytest.mark.slow
def test_screenshot_shows_charts_and_map(report_html, tmp_path):
    import matplotlib.image as mpimg

    shot = tmp_path / "shot.png"
    _run([f"--screenshot={shot}", "--window-size=1280,4000", report_html.as_uri()])
    assert shot.exists(), "Chromium wrote no screenshot"
    img = mpimg.imread(shot)[..., :3]
    assert img.shape[0] >= 3000 and img.shape[1] == 1280
    blue_bars = np.all(np.abs(img - np.array([0x42, 0x92, 0xC6]) / 255) < 0.02, axis=-1)
    dark_tiles = np.all(np.abs(img - np.array([0x08, 0x45, 0x94]) / 255) < 0.02, axis=-1)
    assert blue_bars.mean() > 0.002, "no bar chart visible"
    assert dark_tiles.mean() > 0.001, "no choropleth visible"
