"""The budget follows the data on the command line: a copy of the input under another name,
or another --dataset, is refused unless --new-dataset-for-same-data is stated; releases carry
the ledger's identity; `privmob ledger verify` and `show`."""

import json
import shutil
import sqlite3

import pytest
from tests.helpers import box_grid, od_argv, random_trips

from privmob.cli import main
from privmob.privacy.ledger import Ledger


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


def _od(tmp_path, data: str, out: str, *extra: str) -> int:
    ledger, output = str(tmp_path / "ledger.sqlite"), str(tmp_path / out)
    grid = tmp_path / "grid.geojson"
    return _run(
        *od_argv(tmp_path / data, grid, "--ledger", ledger, "-o", output, "--quiet", *extra)
    )


@pytest.fixture
def files(tmp_path):
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    shutil.copy(tmp_path / "trips.parquet", tmp_path / "renamed copy.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    return tmp_path


def test_a_renamed_copy_or_another_dataset_name_is_refused(files, capsys):
    tmp_path = files
    assert _od(tmp_path, "trips.parquet", "a") == 0
    capsys.readouterr()
    # the same content under the copy's own name: refused, naming the dataset that holds it
    assert _od(tmp_path, "renamed copy.parquet", "b") != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "already released under dataset 'trips'" in err and "Traceback" not in err
    assert _od(tmp_path, "trips.parquet", "c", "--dataset", "census") != 0
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    led = Ledger(tmp_path / "ledger.sqlite")
    # refused releases create no budget (issue 42: the budget is written with a charge)
    assert [b.dataset for b in led.datasets()] == ["trips"]
    assert led.entries("census") == [] and led.entries("renamed copy") == []
    # stated: allowed, and recorded
    assert (
        _od(tmp_path, "trips.parquet", "d", "--dataset", "census", "--new-dataset-for-same-data")
        == 0
    )
    (entry,) = led.entries("census")
    assert entry.provenance["new_dataset_for_same_data"] is True
    (first,) = led.entries("trips")
    assert entry.provenance["input_fingerprint"] == first.provenance["input_fingerprint"]
    assert first.provenance["input_rows"] == len(random_trips(20, 9, seed=3))


def test_metadata_carries_the_ledger_identity_and_entry_ids_only(files):
    tmp_path = files
    assert _od(tmp_path, "trips.parquet", "a") == 0
    meta = json.loads((tmp_path / "a" / "metadata.json").read_text())
    led = Ledger(tmp_path / "ledger.sqlite")
    signature = meta["ledger"].pop("head_signature")
    assert meta["ledger"] == {
        "id": led.ledger_id,
        "entry_ids": [e.id for e in led.entries()],
        # the head after its charge: a one-way commitment, never the entry's own hash
        "head": led.head(),
    }
    # signed by the key that charged (issue 39: every release is a witness of its head), and
    # checked: a forged signature is reported by verify
    assert set(signature) == {"signer", "signature"}
    assert (
        led.verify_release({**meta, "ledger": {**meta["ledger"], "head_signature": signature}})
        == []
    )
    forged = {**signature, "signature": signature["signature"][::-1]}
    assert led.verify_release({**meta, "ledger": {**meta["ledger"], "head_signature": forged}})
    # nothing computed from the data itself is published: no fingerprint, rows or entry hash
    text = (tmp_path / "a" / "metadata.json").read_text()
    (entry,) = led.entries()
    assert entry.provenance["input_fingerprint"] not in text and entry.row_hash not in text
    assert "input_rows" not in text and "fingerprint" not in text


def test_verify_and_show(files, capsys):
    tmp_path = files
    assert _od(tmp_path, "trips.parquet", "a") == 0
    assert _od(tmp_path, "trips.parquet", "b") == 0
    capsys.readouterr()
    ledger = str(tmp_path / "ledger.sqlite")
    assert _run("ledger", "verify", "--ledger", ledger) == 0
    assert "verifies: 2 entries" in capsys.readouterr().out
    assert _run("ledger", "show", "--ledger", ledger) == 0
    out = " ".join(capsys.readouterr().out.split())
    led = Ledger(ledger)
    assert "spent by basic: epsilon=1," in out and f"(id {led.ledger_id})" in out
    con = sqlite3.connect(ledger, isolation_level=None)
    con.execute("DROP TRIGGER releases_append_only_u")
    con.execute("UPDATE releases SET epsilon = 0.001 WHERE id = 1")
    con.close()
    assert _run("ledger", "verify", "--ledger", ledger) == 3
    assert "entry 1" in " ".join(capsys.readouterr().err.split())
    con = sqlite3.connect(ledger, isolation_level=None)
    con.execute("DROP TABLE releases")
    con.close()
    assert _run("ledger", "verify", "--ledger", ledger) == 3
    assert "dropped" in " ".join(capsys.readouterr().err.split())
    assert _od(tmp_path, "trips.parquet", "c") != 0  # and nothing is charged to a damaged ledger
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "command", [["od"], ["population"], ["density"], ["report"], ["series"], ["series-counts"]]
)
def test_every_release_command_offers_the_statement(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # help on one line per option
    assert _run(*command, "--help") == 0
    assert "--new-dataset-for-same-data" in capsys.readouterr().out


def test_verify_names_a_deleted_or_replaced_ledger_from_the_releases(files, capsys):
    tmp_path = files
    assert _od(tmp_path, "trips.parquet", "a") == 0
    ledger = str(tmp_path / "ledger.sqlite")
    assert _run("ledger", "verify", str(tmp_path / "a"), "--ledger", ledger) == 0
    (tmp_path / "ledger.sqlite").unlink()  # the ledger is deleted; a fresh one appears
    Ledger(ledger).set_budget("trips", 10.0)
    capsys.readouterr()
    assert _run("ledger", "verify", str(tmp_path / "a"), "--ledger", ledger) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "was deleted or replaced" in err
