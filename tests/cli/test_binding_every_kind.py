"""Every release kind is bound to its input's content (issue 28): the same input charged under
dataset A and then under dataset B is refused (exit 3, nothing charged under B, nothing
written), for ``density`` (its events), ``series-counts`` and the pre-aggregated ``series``
(bound to the series' values), and ``density`` on a file that ``od`` already released under
another name. Before this, density and series recorded no fingerprint and were charged
twice (exit 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import run_cli, write_city_files

from privmob.data.density_synth import synthetic_city
from privmob.privacy.ledger import Ledger

REFUSED = 3


@pytest.fixture(scope="module")
def city(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("city")
    return write_city_files(d, synthetic_city(1500, 30, 4, seed=5))


def _refused(capsys, ledger, dataset: str, out) -> None:
    err = " ".join(capsys.readouterr().err.split())
    assert "already released under dataset" in err and "Traceback" not in err, err
    assert Ledger(ledger).entries(dataset) == [] and not out.exists()


def _density(city, tmp_path, dataset: str, out: str) -> int:
    return run_cli([
        "density", str(city / "events.csv"), "--cells", str(city / "cells.csv"),
        "-t", str(city / "zones.geojson"), "-e", "0.5", "--start", "2026-03-02",
        "-o", str(tmp_path / out), "--ledger", str(tmp_path / "l.sqlite"), "--budget", "5",
        "--dataset", dataset, "--quiet",
    ])  # fmt: skip


def test_density_twice_under_two_names_is_refused(city, tmp_path, capsys):
    assert _density(city, tmp_path, "A", "a") == 0
    (entry, *_) = Ledger(tmp_path / "l.sqlite").entries("A")
    assert entry.provenance["input_fingerprint"]  # density records what it read
    capsys.readouterr()
    assert _density(city, tmp_path, "B", "b") == REFUSED
    _refused(capsys, tmp_path / "l.sqlite", "B", tmp_path / "b")


def test_density_on_a_file_od_released_under_another_name_is_refused(city, tmp_path, capsys):
    od = [
        "od", str(city / "events.csv"), "--cells", str(city / "cells.csv"),
        "-t", str(city / "zones.geojson"), "-e", "0.5", "-T", "2", "--budget", "5",
        "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "od"), "--quiet",
    ]  # fmt: skip
    assert run_cli(od) == 0
    assert [b.dataset for b in Ledger(tmp_path / "l.sqlite").datasets()] == ["events"]
    capsys.readouterr()
    assert _density(city, tmp_path, "density census", "d") == REFUSED
    _refused(capsys, tmp_path / "l.sqlite", "density census", tmp_path / "d")
    assert _density(city, tmp_path, "events", "d") == 0  # under its own dataset: charged


def test_series_counts_twice_under_two_names_is_refused(shared_data, tmp_path, capsys):
    def series_counts(dataset: str, out: str) -> int:
        return run_cli([
            "series-counts", str(shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"),
            "-t", str(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson"),
            "--names", "uid,datetime,lat,lng,location_id", "--delimiter", "\t",
            "--timezone", "America/New_York", "--start", "2010-09-11", "--end", "2010-09-12",
            "--epsilon", "1", "--max-per-bin", "2", "-o", str(tmp_path / out), "--budget", "5",
            "--ledger", str(tmp_path / "l.sqlite"), "--dataset", dataset, "--quiet",
        ])  # fmt: skip

    assert series_counts("A", "a") == 0
    capsys.readouterr()
    assert series_counts("B", "b") == REFUSED
    _refused(capsys, tmp_path / "l.sqlite", "B", tmp_path / "b")


def _series_frame() -> pd.DataFrame:
    t = pd.date_range("2024-01-01", periods=24, freq="h")
    return pd.DataFrame({"t": np.tile(t, 2), "zone": np.repeat(["a", "b"], 24), "v": np.arange(48)})


def _series(path, tmp_path, dataset: str, out: str) -> int:
    return run_cli([
        "series", str(path), "--value-column", "v", "--time-column", "t", "--zone-column",
        "zone", "--zones", "a,b", "--epsilon", "1", "--sensitivity", "1",
        "--start", "2024-01-01", "--end", "2024-01-02", "--bin", "1h",
        "-o", str(tmp_path / out), "--ledger", str(tmp_path / "l.sqlite"), "--budget", "5",
        "--dataset", dataset, "--quiet",
    ])  # fmt: skip


def test_a_pre_aggregated_series_is_bound_to_its_content(tmp_path, capsys):
    frame = _series_frame()
    frame.to_csv(tmp_path / "s.csv", index=False)
    # the same values as Parquet, rows shuffled, the value as a float: the same content
    frame.sample(frac=1, random_state=1).astype({"v": float}).to_parquet(tmp_path / "s.parquet")
    assert _series(tmp_path / "s.csv", tmp_path, "A", "a") == 0
    (entry,) = Ledger(tmp_path / "l.sqlite").entries("A")
    assert entry.provenance["input_fingerprint"] and entry.provenance["input_rows"] == 48
    capsys.readouterr()
    assert _series(tmp_path / "s.csv", tmp_path, "B", "b") == REFUSED
    _refused(capsys, tmp_path / "l.sqlite", "B", tmp_path / "b")
    assert _series(tmp_path / "s.parquet", tmp_path, "C", "c") == REFUSED
    _refused(capsys, tmp_path / "l.sqlite", "C", tmp_path / "c")
    # one value changed: other content, its own budget
    frame.assign(v=frame.v.where(frame.index != 5, 99)).to_csv(tmp_path / "t.csv", index=False)
    assert _series(tmp_path / "t.csv", tmp_path, "D", "d") == 0


def test_the_session_binds_a_series_too(tmp_path):
    import privmob as pm
    from privmob.errors import BudgetError

    _series_frame().to_csv(tmp_path / "s.csv", index=False)
    kw = {
        "epsilon": 1.0, "sensitivity": 1.0, "freq": "1h",
        "period": pm.Period("2024-01-01", "2024-01-02"),
        "value_column": "v", "time_column": "t", "zone_column": "zone", "zones": ["a", "b"],
    }  # fmt: skip
    ledger = tmp_path / "l.sqlite"
    unit = pm.PrivacyUnit.LANDMARK
    pm.Session(tmp_path / "s.csv", dataset="A", ledger=ledger, budget=5, unit=unit).series(
        tmp_path / "s.csv", **kw
    )
    with pytest.raises(BudgetError, match="already released under dataset 'A'"):
        pm.Session(tmp_path / "s.csv", dataset="B", ledger=ledger, budget=5, unit=unit).series(
            tmp_path / "s.csv", **kw
        )
    assert Ledger(ledger).entries("B") == []
