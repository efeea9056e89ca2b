"""People are people whatever the column type (issue 38 item 5): an id's canonical text
(:func:`privmob.data.fingerprint.identity_text`, reference :func:`canonical_id`) makes the
integer 7, the float 7.0 and the text "7.0" one id, so the same events with int64, float64
(what pandas writes for an integer column with a missing value) or "N.0" text ids get one
fingerprint and one people sketch, and the ledger refuses the second dataset name as the same
data (exit 3, nothing charged). Before, each id was the engine's text of its value ("7.0" is
not "7"): another fingerprint, another sketch, a second budget. Integer and text ids keep
their fingerprint (golden value below). Spark: tests/engine/test_spark_fingerprint.py."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

from privmob.data import load_events
from privmob.data.fingerprint import canonical_id, identity_text
from privmob.engine import make_engine
from privmob.privacy.ledger import Ledger
from privmob.privacy.people import PeopleSketch, keyed_hash

REFUSED = 3

#: values of each column type and the canonical id text each spells
SPELLINGS: dict[str, list[tuple[object, str]]] = {
    "BIGINT": [(7, "7"), (-3, "-3"), (0, "0"), (2**62, str(2**62))],
    "DOUBLE": [
        (7.0, "7"),
        (-0.0, "0"),
        (-3.0, "-3"),
        (2.0**53, str(2**53)),
        (7.5, "7.5"),
        (123456789012.0, "123456789012"),
    ],
    "DECIMAL(18,2)": [(Decimal("7.00"), "7"), (Decimal("-3.00"), "-3"), (Decimal("7.25"), "7.25")],
    "VARCHAR": [
        ("7", "7"),
        ("7.0", "7"),
        ("007.00", "7"),
        ("-12.000", "-12"),
        ("-0.0", "0"),
        ("0.0", "0"),
        ("007", "007"),
        ("u7", "u7"),
        ("7.", "7."),
        ("7.5", "7.5"),
        (" 7.0", " 7.0"),
        ("1e3", "1e3"),
    ],
}


@pytest.fixture
def duck():
    eng = make_engine("duckdb")
    yield eng
    eng.close()


@pytest.mark.parametrize("kind", list(SPELLINGS))
def test_each_type_spells_the_reference_id(duck, kind):
    values = SPELLINGS[kind]
    duck.con.execute(f"CREATE TABLE ids (x {kind})")
    duck.con.executemany("INSERT INTO ids VALUES (?)", [[v] for v, _ in values])
    got = duck.fetch(f"SELECT {identity_text('x', kind)} AS c FROM ids")["c"].tolist()
    assert got == [text for _, text in values]
    assert [canonical_id(v) for v, _ in values] == got  # the Python reference


def events(n: int = 600, seed: int = 3) -> pd.DataFrame:
    """Located events in box_grid(3) of 40 users with int64 ids."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": rng.integers(1, 41, n).astype("int64"),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 3 * 86_400, n), unit="s"),
            "lat": np.round(52.0005 + rng.random(n) * 0.029, 5),
            "lng": np.round(13.0005 + rng.random(n) * 0.029, 5),
        }
    )


def spellings_of(frame: pd.DataFrame, tmp_path: Path) -> dict[str, Path]:
    """The same events with int64, float64 and "N.0" text ids (Parquet), and as CSV from the
    float64 frame (DuckDB reads "7.0" as a DOUBLE)."""
    out = {}
    for name, uid in {
        "int64": frame.uid,
        "float64": frame.uid.astype("float64"),
        "text": frame.uid.astype("float64").astype(str),
    }.items():
        out[name] = tmp_path / f"{name}.parquet"
        frame.assign(uid=uid).to_parquet(out[name], index=False)
    out["csv"] = tmp_path / "float.csv"
    frame.assign(uid=frame.uid.astype("float64")).to_csv(out["csv"], index=False)
    assert pd.read_parquet(out["float64"]).uid.iloc[0] == float(frame.uid.iloc[0])
    assert "7.0" in out["csv"].read_text() or ".0," in out["csv"].read_text()
    return out


def test_one_fingerprint_and_one_sketch_whatever_the_id_type(duck, tmp_path):
    frame, grid, key = events(), box_grid(3), os.urandom(32)
    loaded = {
        name: load_events(str(path), engine=duck, tessellation=grid)
        for name, path in spellings_of(frame, tmp_path).items()
    }
    fingerprints = {name: each.fingerprint for name, each in loaded.items()}
    assert len(set(fingerprints.values())) == 1, fingerprints
    sketches = {name: each.people_sketch(key) for name, each in loaded.items()}
    reference = PeopleSketch.of(keyed_hash(key, canonical_id(u)) for u in frame.uid.unique())
    assert all(s == reference for s in sketches.values()), sketches


#: the v3 fingerprint of ``golden_events()`` as Parquet (int64 ids), computed on main dd27c8e
#: before the canonical id text: integer ids keep their fingerprint
GOLDEN_INT64 = "v3:9e9dc2b427071b4e0e6cd99eab9110c29bdfd1b08937cdc54c37d18d5b8c90e6"


def golden_events() -> pd.DataFrame:
    return events(n=300, seed=11)


def test_integer_ids_keep_their_fingerprint(duck, tmp_path):
    golden_events().to_parquet(tmp_path / "golden.parquet", index=False)
    loaded = load_events(str(tmp_path / "golden.parquet"), engine=duck, tessellation=box_grid(3))
    assert loaded.fingerprint == GOLDEN_INT64


def _population(path: Path, tmp_path: Path, dataset: str, out: str) -> int:
    return run_cli([
        "population", str(path), "-t", str(tmp_path / "grid.geojson"), "-e", "0.5",
        "--budget", "10", "--dataset", dataset, "--ledger", str(tmp_path / "l.sqlite"),
        "-o", str(tmp_path / out), "--quiet",
    ])  # fmt: skip


def test_float_ids_under_a_new_dataset_name_are_refused(tmp_path, capsys):
    """Through the CLI with a real ledger: the events with int64 ids under A, then the same
    events with float64 ids under B: refused as the same data (the fingerprint); with one row
    left out, refused as the same people (the sketch). Both were charged before."""
    frame = events()
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    paths = spellings_of(frame, tmp_path)
    dropped = tmp_path / "float_dropped.parquet"
    frame.assign(uid=frame.uid.astype("float64")).drop(index=5).to_parquet(dropped, index=False)
    assert _population(paths["int64"], tmp_path, "A", "a") == 0
    capsys.readouterr()
    assert _population(paths["float64"], tmp_path, "B", "b") == REFUSED
    err = " ".join(capsys.readouterr().err.split())
    assert "already released under dataset 'A'" in err and "Traceback" not in err, err
    assert _population(dropped, tmp_path, "B", "b") == REFUSED
    err = " ".join(capsys.readouterr().err.split())
    assert "are users of dataset 'A'" in err and "Traceback" not in err, err
    assert Ledger(tmp_path / "l.sqlite").entries("B") == []
    assert not (tmp_path / "b").exists()
    # under their own dataset's name: charged
    assert _population(paths["float64"], tmp_path, "A", "a2") == 0


def test_float_cell_ids_find_their_integer_cells(duck, tmp_path):
    """Call records whose cell ids are float64 (7.0) against a cells table with integer ids:
    each event finds its cell (its tile), as with integer ids. Before, "7.0" never matched
    "7": every event went to the outliers cell (tile -1)."""
    rng = np.random.default_rng(4)
    cells = pd.DataFrame(
        {"cell_id": np.arange(100, 109), "lat": 52.005 + 0.01 * (np.arange(9) // 3),
         "lng": 13.005 + 0.01 * (np.arange(9) % 3)}
    )  # fmt: skip
    cells.to_csv(tmp_path / "cells.csv", index=False)
    n = 300
    events = pd.DataFrame(
        {
            "uid": rng.integers(0, 30, n),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 86_400, n), "s"),
            "cell_id": rng.integers(100, 109, n),
        }
    )
    grid = box_grid(3)
    tiles = {}
    for name, ids in {"int64": events.cell_id, "float64": events.cell_id.astype("float64")}.items():
        events.assign(cell_id=ids).to_parquet(tmp_path / f"{name}.parquet", index=False)
        loaded = load_events(
            str(tmp_path / f"{name}.parquet"), engine=duck, tessellation=grid,
            cells=str(tmp_path / "cells.csv"),
        )  # fmt: skip
        tiles[name] = duck.fetch(f"SELECT tile FROM {loaded.view} ORDER BY ALL")["tile"].tolist()
    assert min(tiles["int64"]) >= 0 and tiles["float64"] == tiles["int64"]
