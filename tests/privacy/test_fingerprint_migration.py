"""The fingerprint's v3 keeps the binding of ledgers written under v2 (privmob.data.fingerprint):
an input charged to dataset A by the v2 code path (its untagged v2 fingerprint, as v2 recorded
it) is still refused under dataset B after the upgrade, on an SQLite file and on a PostgreSQL
ledger; the v2 pass runs only on a ledger that holds v2 fingerprints of another dataset (of
as many rows as the input)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

from privmob.data import load_trip_points
from privmob.data.fingerprint import LEGACY_VERSION, row_hash
from privmob.data.series_input import SeriesInput
from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant

ROWS = pd.DataFrame(
    {
        "uid": [1, 1, 2, 3, 3],
        "tid": [10, 10, 20, 30, 30],
        "datetime": pd.to_datetime(
            [
                "2024-01-01 08:00:01",
                "2024-01-01 08:30:07",
                "2024-01-02 09:00:00",
                "2024-01-03 10:00:30",
                "2024-01-03 10:10:00",
            ]
        ),
        "lat": [52.00512, 52.01533, 52.02541, 52.00517, 52.00219],
        "lng": [13.00537, 13.01511, 13.02526, 13.01504, 13.01108],
    }
)


def v2_reference(rows: pd.DataFrame) -> str:
    """The v2 definition, from scratch: every row's hash summed, SHA-256 of v2's version,
    names, rows and sum, untagged."""
    micros = (rows.datetime - pd.Timestamp("1970-01-01")) // pd.Timedelta(microseconds=1)
    total = sum(
        row_hash(
            [str(r.uid), str(r.tid), str(m)] + [str(math.floor(v * 1e7)) for v in (r.lat, r.lng)]
        )
        for r, m in zip(rows.itertuples(), micros, strict=True)
    )
    text = f"{LEGACY_VERSION}|uid,tid,time,lat,lng|{len(rows)}|{total}"
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def points(tmp_path, engine):
    """The trip points loaded (DuckDB), their v2 fingerprint's computations counted."""
    ROWS.to_csv(tmp_path / "points.csv", index=False)
    loaded = load_trip_points(tmp_path / "points.csv", engine=engine, tessellation=box_grid(3))
    holder = loaded
    while holder.older_source is None and holder.base is not None:  # trip points: trips' base
        holder = holder.base
    source = holder.older_source
    assert source is not None
    calls: list[int] = []

    def counted() -> tuple[str, ...]:
        calls.append(1)
        return source()

    holder.older_source = counted
    return loaded, calls


def charge_as_v2(ledger: Ledger, dataset: str, fingerprint: str, rows: int) -> None:
    """What the v2 code path wrote: the entry with the untagged v2 fingerprint."""
    ledger.charge(dataset, Cost(0.1), kind="od", input_fingerprint=fingerprint, input_rows=rows)


def test_an_input_charged_under_v2_is_refused_under_another_name(ledger_at, points):
    loaded, calls = points
    v2 = v2_reference(ROWS)
    ledger = Ledger(ledger_at)
    for name in ("A", "B"):
        ledger.set_budget(name, 10.0)
    charge_as_v2(ledger, "A", v2, len(ROWS))

    with pytest.raises(BudgetError, match="content was already released under dataset 'A'"):
        Accountant(ledger, "B").bind_input(loaded)
    assert len(calls) == 1  # the v2 pass ran, once; it is the v2 definition
    assert loaded.older_fingerprints() == (v2,) != (loaded.fingerprint,) and len(calls) == 1
    # the charge looks for it too (an accountant bound before the v2 entry was written)
    with pytest.raises(BudgetError, match="under dataset 'A'"):
        ledger.charge(
            "B",
            Cost(0.1),
            kind="od",
            input_fingerprint=loaded.fingerprint,
            older_fingerprints=(v2,),
        )
    # A itself goes on (its own v2 entries ask no v2 pass), its new entries under v3
    calls.clear()
    own = Accountant(ledger, "A")
    own.bind_input(loaded)
    assert own.input_older == () and calls == []
    ledger.charge("A", Cost(0.1), kind="od", input_fingerprint=loaded.fingerprint)
    stored = [e.provenance["input_fingerprint"] for e in ledger.entries("A")]
    assert stored == [v2, loaded.fingerprint] and stored[1].startswith("v3:")


def test_the_v2_pass_runs_only_where_another_dataset_holds_v2_entries(ledger_at, points):
    """... of as many rows as the input (a v2 fingerprint covers its row count)."""
    loaded, calls = points
    ledger = Ledger(ledger_at)
    for name in ("A", "B", "C", "D"):
        ledger.set_budget(name, 10.0)
    # v2 entries of this dataset only: no pass
    charge_as_v2(ledger, "C", "c" * 64, len(ROWS))
    Accountant(ledger, "C").bind_input(loaded)
    assert calls == []
    # a stated new dataset for the same data checks no content: no pass (C's v2 entry is
    # another dataset's)
    Accountant(ledger, "D", new_dataset_for_same_data=True).bind_input(loaded)
    assert calls == []
    # another dataset's v2 entry of another row count cannot be this input's: no pass
    assert not ledger.holds_older_fingerprints("D", len(ROWS) + 1)
    assert ledger.holds_older_fingerprints("D", len(ROWS)) and ledger.holds_older_fingerprints("D")
    # the input's v3 fingerprint held by A: refused under B by it (C's v2 entry of as many
    # rows makes B's release compute the v2 fingerprint too, once)
    ledger.charge("A", Cost(0.1), kind="od", input_fingerprint=loaded.fingerprint)
    with pytest.raises(BudgetError, match="under dataset 'A'"):
        Accountant(ledger, "B").bind_input(loaded)
    assert len(calls) == 1
    assert not ledger.holds_older_fingerprints("C", len(ROWS))


def test_a_series_charged_under_v2_is_refused_under_another_name(ledger_at):
    """A series has no people sketch: its fingerprint is its only binding."""
    rng = np.random.default_rng(2)
    series = SeriesInput.of(
        rng.random((2, 24)), list(pd.date_range("2024-01-01", periods=24, freq="h")), ["a", "b"]
    )
    (v2,) = series.older_fingerprints()
    assert series.fingerprint.startswith("v3:") and len(v2) == 64 and ":" not in v2
    ledger = Ledger(ledger_at)
    for name in ("A", "B"):
        ledger.set_budget(name, 10.0)
    charge_as_v2(ledger, "A", v2, series.rows)
    with pytest.raises(BudgetError, match="under dataset 'A'"):
        Accountant(ledger, "B").bind_input(series)


def test_the_cli_refuses_a_v2_ledgers_input_under_another_name(tmp_path, engine, capsys):
    """End to end on an SQLite file: A charged under v2 (no people sketch stored, as by a
    ledger older than the sketch), then ``privmob od --dataset B`` on the same file: exit 3,
    nothing charged, the message names A."""
    fixture = tmp_path / "points.csv"
    ROWS.to_csv(fixture, index=False)
    tess = tmp_path / "grid.geojson"
    box_grid(3).gdf.to_file(tess, driver="GeoJSON")
    ledger = Ledger(tmp_path / "l.sqlite")
    for name in ("A", "B"):
        ledger.set_budget(name, 10.0)
    charge_as_v2(ledger, "A", v2_reference(ROWS), len(ROWS))
    code = run_cli([
        "od", str(fixture), "-t", str(tess), "-e", "0.5", "-T", "2", "--dataset", "B",
        "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "b"), "--quiet",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 3, err
    assert "content was already released under dataset 'A'" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists() and Ledger(tmp_path / "l.sqlite").entries("B") == []
