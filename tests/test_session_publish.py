"""The Session owns a release from its plan to its files: ``output=`` publishes atomically
(checked before anything is read, staged, charged, renamed), from Python as the CLI does; the
CLI's release commands go through the same lifecycle (``Session.run``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import box

import privmob as pm
from privmob.errors import BudgetError, OutputError
from tests.helpers import random_trips, run_cli

PERIOD = pm.Period("2024-01-01", "2024-01-08", bin="day")


def zones() -> gpd.GeoDataFrame:
    tiles = [box(13 + c * 0.01, 52 + r * 0.01, 13.01 + c * 0.01, 52.01 + r * 0.01)
             for r in range(3) for c in range(3)]  # fmt: skip
    return gpd.GeoDataFrame({"tile_id": range(9)}, geometry=tiles, crs=4326)


def trips_file(tmp_path: Path) -> Path:
    path = tmp_path / "trips.parquet"
    random_trips(300, 9, seed=3).to_parquet(path)
    return path


def entries(ledger: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(ledger) as con:
        return con.execute("SELECT dataset, output_dir FROM releases ORDER BY id").fetchall()


def test_output_is_published_with_layers_and_recorded(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    s = pm.Session(trips_file(tmp_path), tessellation=zones(), budget=5, ledger=ledger)
    target = tmp_path / "out" / "od"
    od = s.od(epsilon=1, max_trips=5, period=PERIOD, output=target, formats=["geojson"])
    names = {p.name for p in od.written}
    assert names == {
        "od.parquet",
        "outliers.parquet",
        "metadata.json",
        "od_flows.geojson",
        "od_flows.qml",  # the layer's QGIS style, published with it
    }
    assert all(p.parent == target for p in od.written)
    meta = json.loads((target / "metadata.json").read_text())
    assert meta["privacy"]["cost"]["epsilon"] == 1
    # the ledger entry names the published folder: charge and output are one event
    assert entries(ledger) == [("trips", str(target))]
    assert pd.read_parquet(target / "od.parquet").equals(od.to_pandas())
    layer = gpd.read_file(target / "od_flows.geojson")
    table = od.to_pandas()  # the layer draws the flows above the noise floor only
    from privmob.render.layers import flow_floor

    assert len(layer) == int((table["count"] > flow_floor(od.release)).sum())
    assert layer.crs.to_epsg() == 4326
    assert not list(target.parent.glob(".*"))  # no staging folder left beside it
    s.close()


def test_taken_output_is_refused_before_reading_and_costs_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    # the input does not exist: a refusal that came after reading would be an InputError
    s = pm.Session(tmp_path / "missing.parquet", tessellation=zones(), budget=5, ledger=ledger)
    taken = tmp_path / "od"
    taken.mkdir()
    (taken / "keep.txt").write_text("someone else's file")
    with pytest.raises(OutputError, match="exists"):
        s.od(epsilon=1, max_trips=5, period=PERIOD, output=taken)
    assert s.ledger.spent() == 0 and entries(ledger) == []
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    s.close()


def test_unpayable_release_writes_nothing(tmp_path: Path) -> None:
    s = pm.Session(trips_file(tmp_path), tessellation=zones(), budget=1, dataset="t")
    with pytest.raises(BudgetError):
        s.od(epsilon=2, max_trips=5, period=PERIOD, output=tmp_path / "od")
    assert not (tmp_path / "od").exists() and s.ledger.spent() == 0
    s.close()


def test_report_output_publishes_html_json_and_tables(shared_data: Path, tmp_path: Path) -> None:
    fixture = shared_data / "dpmr_fixture"
    s = pm.Session(fixture / "test_data.csv", tessellation=fixture / "test_tessellation.geojson",
                   budget=10, dataset="dpmr", seed=1)  # fmt: skip
    report = s.report(
        epsilon=1,
        max_trips=3,
        period=pm.Period("2020-12-13", "2020-12-20"),
        output=tmp_path / "r" / "report.html",
    )
    assert {"report.html", "report.json", "report_tables"} <= {p.name for p in report.written}
    assert (tmp_path / "r" / "report_tables").is_dir()
    # a seeded session marks its release not for publication, in the HTML too
    assert "not for publication" in (tmp_path / "r" / "report.html").read_text().lower()
    s.close()


def test_cli_release_goes_through_the_session(tmp_path: Path, monkeypatch) -> None:
    """The command builds a Session and runs its lifecycle: a refusal raised by Session.run
    reaches the command line as its exit code (here a budget refusal, exit 3)."""
    from privmob.session import base

    calls: list[str] = []
    real = base.SessionBase.run

    def counted(self, spec, load, **kw):  # type: ignore[no-untyped-def]
        calls.append(spec.kind)
        return real(self, spec, load, **kw)

    monkeypatch.setattr(base.SessionBase, "run", counted)
    tess = tmp_path / "zones.geojson"
    zones().to_file(tess)
    data = trips_file(tmp_path)
    args = ["od", str(data), "-t", str(tess), "-e", "1", "-T", "5", "--test-mode", "--seed", "1"]
    assert run_cli([*args, "--budget", "3", "-o", str(tmp_path / "od")]) == 0
    assert calls == ["od"] and (tmp_path / "od" / "od.parquet").exists()
    assert run_cli([*args, "--budget", "0.5", "-o", str(tmp_path / "od2")]) == 3
    assert not (tmp_path / "od2").exists()
    assert calls == ["od", "od"]
