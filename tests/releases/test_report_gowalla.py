"""End to end on real check-ins: Gowalla NYC -> trips of consecutive same-day check-ins ->
report over the 263 NYC taxi zones."""

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from privmob.data.sources import load_trip_points
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.evaluate.report_comparison import compare_reports
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import (
    ANALYSES,
    ReportConfig,
    Tiles,
    mobility_report,
    trip_points_from_checkins,
)
from privmob.render.report_files import report_document

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.mark.slow
def test_gowalla_nyc_report_over_taxi_zones(tmp_path):
    events = DATA / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"
    zones = DATA / "nyc_taxi_zones" / "taxi_zones.geojson"
    if not (events.exists() and zones.exists()):
        pytest.skip(f"../shared/data not found: {events}, {zones}")
    ev = pd.read_csv(events, sep="\t", header=None, names=["uid", "datetime", "lat", "lng", "loc"])
    points = trip_points_from_checkins(ev)
    assert len(points) % 2 == 0 and points["tid"].nunique() == len(points) // 2
    tess = load_tessellation(zones)
    tiles = Tiles.from_tessellation(tess)
    assert tiles.k == 263
    eng = DuckDBEngine()
    view = load_trip_points(points, engine=eng, tessellation=tess).view
    inside = eng.fetch(f"SELECT AVG(CASE WHEN tile >= 0 THEN 1.0 ELSE 0 END) AS s FROM {view}")
    assert inside["s"][0] > 0.8  # SOURCE.md: 92% of check-ins fall inside
    docs = []
    # a near-exact reference (epsilon 1e4: noise scale < 0.1) and a report at epsilon 50
    for eps in (1e4, 50):
        cfg = ReportConfig.build(epsilon=eps, max_trips=20, period=("2009-01-01", "2011-01-01"))
        acc = Accountant(Ledger(tmp_path / "ledger.sqlite"), "gowalla", budget=2e4)
        docs.append(report_document(mobility_report(eng, view, tiles, cfg, acc, rng=eps)))
    a = docs[1]["analyses"]
    assert set(a) == set(ANALYSES)
    assert len(a["visits_per_tile"]["counts"]) == 263
    assert len(a["od_flows"]["counts"]) == 263 * 263
    # real signal survives: Manhattan zones dominate the visits
    names = np.array(docs[0]["tessellation"]["names"])
    top = names[np.argsort(a["visits_per_tile"]["counts"])[::-1][:10]]
    zones_df = gpd.read_file(zones)
    manhattan = set(zones_df.loc[zones_df["borough"] == "Manhattan", "zone"])
    assert len(set(top) & manhattan) >= 7
    # 36.6k kept trips; at epsilon 50 (3.3 per analysis) visits per tile have noise scale 12
    # against ~280 visits per tile on average: the spatial distribution and the rankings of
    # the largest tiles and flows survive (observed JS 0.006, coverage 0.9 and 1.0; the
    # thresholds leave 5x room)
    table = compare_reports(docs[0], docs[1]).set_index("analysis")
    assert table.loc["visits_per_tile", "js_divergence"] < 0.03
    assert table.loc["trips_per_weekday", "smape"] < 0.02
    assert table.loc["visits_per_tile", "top_n_coverage"] >= 0.7
    assert table.loc["od_flows", "top_n_coverage"] >= 0.7
    assert table.loc["jump_length", "js_divergence"] < 0.01
    assert docs[0]["analyses"]["dataset_statistics"]["complete_trips"] > 30_000
