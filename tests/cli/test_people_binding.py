"""People-aware binding (issue 27 item 4): the ledger keeps, per dataset, a keyed sketch of its
users (privmob.privacy.people) and refuses a release under a new dataset name whose users are
another dataset's. The five dodges of issue 27 that a content fingerprint cannot see, each on a
real file through the CLI (another --input-timezone, trip ids renumbered, times shifted by one
second, one row dropped or added, a copy keeping the pseudonyms), are refused with exit 3 and
nothing charged; each was charged (exit 0) before. Relabelled pseudonyms are not detected (the
documented limitation: such datasets are linked into one family by the custodian)."""

from __future__ import annotations

import re
import sqlite3

import numpy as np
import pandas as pd
import pytest
from tests.helpers import run_cli

from privmob.privacy.ledger import Ledger
from privmob.privacy.people import SKETCH_SIZE

REFUSED = 3


@pytest.fixture
def dpmr(shared_data, tmp_path):
    """The dp_mobility_report fixture's trip points (20 users, 100 trips, times without zone)."""
    d = shared_data / "dpmr_fixture"
    return pd.read_csv(d / "test_data.csv"), d / "test_tessellation.geojson"


def _od(path, zones, tmp_path, dataset: str, *extra: str, out: str = "") -> int:
    return run_cli([
        "od", str(path), "-t", str(zones), "-e", "0.5", "-T", "2", "--budget", "10",
        "--dataset", dataset, "--ledger", str(tmp_path / "l.sqlite"),
        "-o", str(tmp_path / f"out-{out or dataset}"), "--quiet", *extra,
    ])  # fmt: skip


def _shift(frame: pd.DataFrame, seconds: int) -> pd.DataFrame:
    times = pd.to_datetime(frame.datetime) + pd.Timedelta(seconds=seconds)
    return frame.assign(datetime=times.dt.strftime("%Y-%m-%d %H:%M:%S"))


DODGES = {
    "renumbered trips": lambda f: f.assign(tid=f.tid.rank(method="dense").astype(int) + 9000),
    "times shifted by 1 s": lambda f: _shift(f, 1),
    "one row dropped": lambda f: f.drop(index=17),
    "one row added": lambda f: pd.concat([f, f.iloc[[3]].assign(lat=f.lat.iloc[3] + 0.001)]),
    # the same pseudonyms, everything else redone: an hour later, coordinates rounded, trips
    # renumbered, a fifth of the rows left out, shuffled
    "copy with the same pseudonyms": lambda f: (
        _shift(f, 3600)
        .assign(lat=f.lat.round(3), lng=f.lng.round(3), tid=f.tid + 100_000)
        .sample(frac=0.8, random_state=4)
    ),
}


@pytest.mark.parametrize("dodge", list(DODGES))
def test_a_dodge_under_a_new_dataset_name_is_refused(dpmr, tmp_path, capsys, dodge):
    frame, zones = dpmr
    frame.to_csv(tmp_path / "trips.csv", index=False)
    DODGES[dodge](frame).to_csv(tmp_path / "edited.csv", index=False)
    assert _od(tmp_path / "trips.csv", zones, tmp_path, "A") == 0
    capsys.readouterr()
    assert _od(tmp_path / "edited.csv", zones, tmp_path, "B") == REFUSED
    err = " ".join(capsys.readouterr().err.split())
    assert "are users of dataset 'A'" in err and "Traceback" not in err, err
    assert Ledger(tmp_path / "l.sqlite").entries("B") == []
    assert not (tmp_path / "out-B").exists()
    # the same people under their own dataset's budget: charged
    assert _od(tmp_path / "edited.csv", zones, tmp_path, "A", out="A2") == 0


def test_another_input_timezone_is_refused(dpmr, tmp_path, capsys):
    """The same bytes read as New York times instead of UTC: other instants, the same people."""
    _, zones = dpmr
    path = zones.parent / "test_data.csv"
    assert _od(path, zones, tmp_path, "A") == 0
    capsys.readouterr()
    assert _od(path, zones, tmp_path, "B", "--input-timezone", "America/New_York") == REFUSED
    assert "are users of dataset 'A'" in capsys.readouterr().err
    assert Ledger(tmp_path / "l.sqlite").entries("B") == []


def test_relabelled_pseudonyms_are_not_detected(dpmr, tmp_path):
    """The documented limitation: new pseudonyms for the same people look like other people.
    Such datasets are linked by the custodian into one budget (a dataset family)."""
    frame, zones = dpmr
    frame.to_csv(tmp_path / "trips.csv", index=False)
    frame.assign(uid=frame.uid.map(lambda u: f"p{u * 7919 % 1000:03d}")).to_csv(
        tmp_path / "relabelled.csv", index=False
    )
    assert _od(tmp_path / "trips.csv", zones, tmp_path, "A") == 0
    assert _od(tmp_path / "relabelled.csv", zones, tmp_path, "B") == 0  # charged: not seen


def test_the_statement_still_allows_a_separate_budget(dpmr, tmp_path):
    frame, zones = dpmr
    frame.to_csv(tmp_path / "trips.csv", index=False)
    _shift(frame, 1).to_csv(tmp_path / "shifted.csv", index=False)
    assert _od(tmp_path / "trips.csv", zones, tmp_path, "A") == 0
    assert _od(tmp_path / "shifted.csv", zones, tmp_path, "B", "--new-dataset-for-same-data") == 0
    (entry,) = Ledger(tmp_path / "l.sqlite").entries("B")
    assert entry.provenance["new_dataset_for_same_data"] is True
    # B now holds these people: its next release needs no statement
    assert _od(tmp_path / "shifted.csv", zones, tmp_path, "B", out="B2") == 0


def test_the_refusal_names_no_user_no_value_and_the_sketch_stays_in_the_ledger(dpmr, tmp_path):
    """Through pm.Session: distinctive pseudonyms, and nothing of them (nor a date, a hash or
    the overlap estimate) in the message, the release or its metadata."""
    import privmob as pm
    from privmob.errors import BudgetError

    frame, zones = dpmr
    named = frame.assign(uid=frame.uid.map(lambda u: f"person-{u:04d}"))
    named.to_csv(tmp_path / "a.csv", index=False)
    _shift(named, 1).to_csv(tmp_path / "b.csv", index=False)
    ledger = tmp_path / "l.sqlite"
    first = pm.Session(tmp_path / "a.csv", tessellation=zones, dataset="A", ledger=ledger,
                       budget=10)  # fmt: skip
    first.od_matrix(epsilon=0.5, max_trips=2, output=tmp_path / "a")
    second = pm.Session(tmp_path / "b.csv", tessellation=zones, dataset="B", ledger=ledger,
                        budget=10)  # fmt: skip
    with pytest.raises(BudgetError) as refused:
        second.od_matrix(epsilon=0.5, max_trips=2, output=tmp_path / "b")
    text = f"{refused.value} {refused.value.hint}"
    assert "are users of dataset 'A'" in text
    assert "person-" not in text and "2020" not in text and not re.search(r"[0-9a-f]{16}", text)
    assert not re.search(r"0\.\d", text)  # no estimate: the threshold (a percentage) only
    assert not (tmp_path / "b").exists() and Ledger(ledger).entries("B") == []
    published = " ".join(p.read_text(errors="replace") for p in (tmp_path / "a").iterdir())
    assert "sketch" not in published and "people" not in published
    (blob,) = sqlite3.connect(ledger).execute("SELECT sketch FROM dataset_people").fetchone()
    assert blob not in (tmp_path / "a" / "metadata.json").read_bytes()


@pytest.mark.slow
def test_a_large_real_dataset_uses_the_full_sketch(shared_data, tmp_path, capsys):
    """Gowalla check-ins (7,115 users > k): times shifted by one second and one row dropped,
    then relabelled pseudonyms, through series-counts."""
    source = shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"
    names = ["uid", "datetime", "lat", "lng", "location_id"]
    frame = pd.read_csv(source, sep="\t", header=None, names=names)
    times = pd.to_datetime(frame.datetime) + pd.Timedelta(seconds=1)
    edited = frame.assign(datetime=times.dt.strftime("%Y-%m-%dT%H:%M:%SZ")).drop(index=1234)
    edited.to_csv(tmp_path / "edited.tsv", sep="\t", header=False, index=False)
    ids = frame.uid.unique()
    relabel = dict(zip(ids, np.random.default_rng(1).permutation(10**6)[: len(ids)], strict=True))
    frame.assign(uid=frame.uid.map(relabel)).to_csv(
        tmp_path / "relabelled.tsv", sep="\t", header=False, index=False
    )

    def series_counts(path, dataset: str) -> int:
        return run_cli([
            "series-counts", str(path), "-t", str(shared_data / "nyc_taxi_zones" /
            "taxi_zones.geojson"), "--names", ",".join(names), "--delimiter", "\t",
            "--timezone", "America/New_York", "--start", "2010-09-11", "--end", "2010-09-12",
            "--epsilon", "1", "--max-per-bin", "2", "-o", str(tmp_path / dataset),
            "--budget", "5", "--ledger", str(tmp_path / "l.sqlite"), "--dataset", dataset,
            "--quiet",
        ])  # fmt: skip

    assert series_counts(source, "A") == 0
    (blob,) = (
        sqlite3.connect(tmp_path / "l.sqlite")
        .execute("SELECT sketch FROM dataset_people WHERE dataset = 'A'")
        .fetchone()
    )
    assert len(blob) > 8 * SKETCH_SIZE  # a full sketch: more users than it keeps
    capsys.readouterr()
    assert series_counts(tmp_path / "edited.tsv", "B") == REFUSED
    assert "are users of dataset 'A'" in capsys.readouterr().err
    assert series_counts(tmp_path / "relabelled.tsv", "C") == 0  # not detected (documented)
