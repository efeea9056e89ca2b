"""Seeds cannot reach publication: ``--seed`` needs ``--test-mode``, which charges a throw-away
ledger (never a persistent one), records the seed and stamps every data file itself."""

import json

import pytest
from tests.helpers import box_grid, random_trips, run_cli

from privmob.privacy.ledger import Ledger
from privmob.releases.stamp import read_stamp


@pytest.fixture
def files(tmp_path):
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    return tmp_path


def od_args(d, out: str, *extra: str) -> list[str]:
    return [
        "od", str(d / "trips.parquet"), "-t", str(d / "grid.geojson"), "-e", "0.5", "-T", "2",
        "--budget", "10", "--dataset", "d", "-o", str(d / out), "--quiet", *extra,
    ]  # fmt: skip


def test_seed_without_test_mode_is_refused_and_charges_nothing(files, monkeypatch, capsys):
    """It used to be charged to the real budget and written with no marker in the files."""
    ledger = files / "real.sqlite"
    monkeypatch.setenv("PRIVMOB_LEDGER", str(ledger))
    assert run_cli(od_args(files, "o", "--seed", "42")) == 2
    assert "--test-mode" in capsys.readouterr().err
    assert not (files / "o").exists() and Ledger(ledger).entries("d") == []
    # test mode never charges a persistent ledger
    assert run_cli(od_args(files, "o", "--test-mode", "--seed", "1", "--ledger", str(ledger))) == 2
    assert not (files / "o").exists() and Ledger(ledger).entries("d") == []


def test_test_mode_uses_a_throw_away_ledger_records_the_seed_and_stamps_files(files, monkeypatch):
    ledger = files / "real.sqlite"
    monkeypatch.setenv("PRIVMOB_LEDGER", str(ledger))
    assert run_cli(od_args(files, "t", "--test-mode", "--seed", "42")) == 0
    assert Ledger(ledger).entries("d") == []  # the real ledger is untouched
    meta = json.loads((files / "t" / "metadata.json").read_text())
    assert meta["for_publication"] is False and meta["test_mode"]["seed"] == 42
    assert meta["ledger_entries"]  # charged, to the throw-away ledger
    parquets = sorted((files / "t").glob("*.parquet"))
    assert [p.name for p in parquets] == ["od.parquet", "outliers.parquet"]
    for path in parquets:
        stamp = read_stamp(path)
        assert stamp["privmob.for_publication"] == "false"
        assert "NOT FOR PUBLICATION" in stamp["privmob.warning"]
    # the same seed gives the same (test) noise
    assert run_cli(od_args(files, "t2", "--test-mode", "--seed", "42")) == 0
    assert (files / "t" / "od.parquet").read_bytes() == (files / "t2" / "od.parquet").read_bytes()


def test_a_release_is_stamped_for_publication(files, monkeypatch):
    monkeypatch.setenv("PRIVMOB_LEDGER", str(files / "real.sqlite"))
    assert run_cli(od_args(files, "p")) == 0
    assert read_stamp(files / "p" / "od.parquet")["privmob.for_publication"] == "true"
    assert "privmob.warning" not in read_stamp(files / "p" / "od.parquet")


def test_report_in_test_mode_has_a_banner_and_stamped_tables(shared_data, tmp_path):
    fixture = shared_data / "dpmr_fixture"
    out = tmp_path / "r" / "report.html"
    args = [
        "report", str(fixture / "test_data.csv"), "--tessellation",
        str(fixture / "test_tessellation.geojson"), "--max-trips", "5", "--period",
        "2020-12-01", "2021-01-01", "--budget", "10", "--epsilon", "1", "-o", str(out),
        "--test-mode", "--seed", "1", "--quiet",
    ]  # fmt: skip
    assert run_cli(args) == 0
    html = out.read_text()
    body = html[html.index("<body>") :]
    assert body.startswith("<body><div class='warn not-for-publication' role='alert'>NOT FOR")
    tables = sorted((tmp_path / "r").glob("report_tables/*.parquet"))
    assert tables and all(read_stamp(t)["privmob.for_publication"] == "false" for t in tables)


def test_parquet_and_json_stamps_of_a_seeded_release(tmp_path):
    import pandas as pd

    from privmob.privacy.costs import Cost, PrivacyUnit
    from privmob.releases.release import Release
    from privmob.releases.stamp import json_stamp, write_stamped_parquet

    rel = Release(
        kind="od-matrix",
        cost=Cost.pure(1.0, PrivacyUnit.USER),
        unit=PrivacyUnit.USER,
        bounds={},
        noise={},
        params={},
        domain={},
        tables={"od": pd.DataFrame({"count": [1, 2]})},
        for_publication=False,
    )
    write_stamped_parquet(rel.table, tmp_path / "od.parquet", rel)
    assert read_stamp(tmp_path / "od.parquet")["privmob.for_publication"] == "false"
    assert pd.read_parquet(tmp_path / "od.parquet")["count"].tolist() == [1, 2]
    stamp = json_stamp(rel)
    assert stamp["for_publication"] is False and "NOT FOR PUBLICATION" in stamp["warning"]
