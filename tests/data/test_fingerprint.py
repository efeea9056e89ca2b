"""The input's content fingerprint (v3, privmob.data.fingerprint), computed in the validation
pass: same content -> same fingerprint whatever the file's name, format, column names or row
order; a row more or less, any change of a time or a coordinate, any change of a sampled row
-> another fingerprint; about 1 row in 17 sampled on realistic data."""

import hashlib
import math

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_events, load_trip_points, load_trips
from privmob.data.fingerprint import (
    FINGERPRINT_TAG,
    FINGERPRINT_VERSION,
    reference_total,
    sample_selected,
)
from privmob.prepare.inputs import load_trips_any
from privmob.prepare.trips import events_to_trips

ROWS = pd.DataFrame(
    {
        "uid": [1, 1, 2, 3],
        "tid": [10, 10, 20, 30],
        "datetime": pd.to_datetime(
            ["2024-01-01 08:00", "2024-01-01 08:30", "2024-01-02 09:00", "2024-01-03 10:00"]
        ),
        "lat": [52.005, 52.015, 52.025, 52.005],
        "lng": [13.005, 13.015, 13.025, 13.015],
    }
)


SECOND = pd.Timedelta(seconds=1)


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def _fp(path, engine, grid, loader=load_trip_points, **kw):
    loaded = loader(path, engine=engine, tessellation=grid, **kw)
    assert loaded.rows is not None
    return loaded.fingerprint


def test_same_content_same_fingerprint(tmp_path, engine, grid):
    ROWS.to_csv(tmp_path / "a.csv", index=False)
    ROWS.to_csv(tmp_path / "copy with another name.csv", index=False)
    ROWS.to_parquet(tmp_path / "a.parquet", index=False)
    ROWS.iloc[::-1].to_csv(tmp_path / "reversed.csv", index=False)
    renamed = ROWS.rename(columns={"uid": "user", "datetime": "ts"})[
        ["ts", "lng", "lat", "tid", "user"]
    ]
    renamed.to_csv(tmp_path / "renamed.csv", index=False)
    fp = _fp(tmp_path / "a.csv", engine, grid)
    assert fp is not None and fp.startswith(FINGERPRINT_TAG) and len(fp) == 3 + 64
    assert _fp(tmp_path / "copy with another name.csv", engine, grid) == fp
    assert _fp(tmp_path / "reversed.csv", engine, grid) == fp
    assert _fp(tmp_path / "a.parquet", engine, grid) == fp
    mapping = {"uid": "user", "datetime": "ts"}
    assert _fp(tmp_path / "renamed.csv", engine, grid, columns=mapping) == fp


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.assign(lat=d.lat.where(d.index != 2, 52.026)),  # one value
        lambda d: d.iloc[:-1],  # one row less
        lambda d: pd.concat([d, d.iloc[[0]]]),  # one row twice
        lambda d: d.assign(datetime=d.datetime.where(d.index != 1, d.datetime + SECOND)),
        lambda d: d.assign(lng=d.lng.where(d.index != 0, 13.0050001)),  # 1e-7 degree
    ],
)
def test_changed_content_changes_the_fingerprint(tmp_path, engine, grid, change):
    ROWS.to_csv(tmp_path / "a.csv", index=False)
    change(ROWS).to_csv(tmp_path / "b.csv", index=False)
    assert _fp(tmp_path / "a.csv", engine, grid) != _fp(tmp_path / "b.csv", engine, grid)


def test_every_shape_carries_it_through_derived_relations(tmp_path, engine, grid):
    ROWS.to_csv(tmp_path / "points.csv", index=False)
    points = load_trip_points(tmp_path / "points.csv", engine=engine, tessellation=grid)
    trips = load_trips_any(tmp_path / "points.csv", engine=engine, tessellation=grid)
    assert trips.fingerprint == points.fingerprint and trips.rows == 4

    ROWS[["uid", "datetime", "lat", "lng"]].to_csv(tmp_path / "events.csv", index=False)
    events = load_events(tmp_path / "events.csv", engine=engine, tessellation=grid)
    assert events.fingerprint and events.fingerprint != points.fingerprint  # another shape
    assert events_to_trips(events, "events").fingerprint == events.fingerprint

    one_row = pd.DataFrame(
        {
            "uid": [1, 2],
            "start_time": ["2024-01-01 08:00", "2024-01-01 09:00"],
            "origin": [0, 1],
            "destination": [1, 2],
        }
    )
    one_row.to_csv(tmp_path / "trips.csv", index=False)
    one_row.to_parquet(tmp_path / "trips.parquet", index=False)
    t_csv = load_trips(tmp_path / "trips.csv", engine=engine, tessellation=grid)
    t_pq = load_trips(tmp_path / "trips.parquet", engine=engine, tessellation=grid)
    assert t_csv.rows == 2 and t_csv.fingerprint
    # start_time is text in both files: the same parsed timestamps, the same fingerprint
    assert t_csv.fingerprint == t_pq.fingerprint


def test_the_row_hash_sum_reaches_python_exactly(engine):
    """The sum is fetched as text: as a DECIMAL it would arrive as a float and lose digits
    (a content without canonical integers: every row sampled)."""
    from privmob.data.fingerprint import content_fingerprint, legacy_content_fingerprint

    for expr in (
        content_fingerprint(engine, {"x": "x"}),
        legacy_content_fingerprint(engine, {"x": "x"}),
    ):
        total = engine.fetch(f"SELECT {expr} AS s FROM range(1000) AS t(x)").iloc[0, 0]
        assert isinstance(total, str) and total.isdigit() and len(total) > 17


def canonical(rows: pd.DataFrame) -> list[tuple[list[str], list[int]]]:
    """(texts, integers) of each trip point as the definition reads it: ids as text, times in
    whole microseconds, coordinates in whole 1e-7 degrees rounded down."""
    micros = (rows.datetime - pd.Timestamp("1970-01-01")) // pd.Timedelta(microseconds=1)
    out = []
    for r, m in zip(rows.itertuples(), micros, strict=True):
        ints = [int(m), math.floor(r.lat * 1e7), math.floor(r.lng * 1e7)]
        out.append(([str(r.uid), str(r.tid), *map(str, ints)], ints))
    return out


def realistic(n: int, seed: int = 7, step: str = "s") -> pd.DataFrame:
    """Trip points as they come: times in whole seconds (or ``step``), coordinates with 5
    decimals, a few hundred users."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-03-01").value // 10**9
    seconds = np.sort(rng.integers(0, 30 * 86400, n))
    times = pd.to_datetime(start + seconds, unit="s").floor(step)
    return pd.DataFrame(
        {
            "uid": rng.integers(1, 400, n),
            "tid": rng.integers(1, 5000, n),
            "datetime": times,
            "lat": np.round(52.4 + rng.random(n) * 0.2, 5),
            "lng": np.round(13.3 + rng.random(n) * 0.2, 5),
        }
    )


def test_the_fingerprint_is_its_definition_on_canonical_values(tmp_path, engine, grid):
    """The trip points' fingerprint recomputed in Python from the definition (the reference:
    the sums of the canonical integers, the row hashes of the sampled rows summed, SHA-256 of
    version, names, rows and sums): no engine function in it, so Spark's equals it too
    (tests/engine/test_spark_fingerprint.py). On 2,000 realistic rows, where some are sampled
    and most are not."""
    rows = realistic(2000)
    rows.to_csv(tmp_path / "a.csv", index=False)
    total = reference_total(canonical(rows))
    text = f"{FINGERPRINT_VERSION}|uid,tid,time,lat,lng|{len(rows)}|{total}"
    expected = FINGERPRINT_TAG + hashlib.sha256(text.encode()).hexdigest()
    assert _fp(tmp_path / "a.csv", engine, grid) == expected


@pytest.mark.parametrize("step", ["s", "min", "h"])
def test_about_one_row_in_17_is_sampled_on_realistic_data(engine, step):
    """The engine's sample (SQL) is the reference's, row for row, and its rate on whole-second,
    whole-minute and whole-hour times with 5-decimal coordinates lies in [0.045, 0.075]
    (1/17 = 0.0588; 20,000 rows: the binomial standard deviation is 0.0017, so the band is
    7 of them: a false failure below 1e-11, and the data has a fixed seed anyway). A modulus
    that divides the data's step (16 on whole seconds: every time is a multiple of 16
    microseconds) would sample all or nothing."""
    from privmob.data.fingerprint import coordinate_text, sample_condition, time_text

    rows = realistic(20_000, step=step)
    engine.register("fp_rows", rows)
    content = {
        "time": time_text(engine, "datetime"),
        "lat": coordinate_text("lat"),
        "lng": coordinate_text("lng"),
    }
    got = engine.fetch(
        f"SELECT row_number() OVER () - 1 AS i, {sample_condition(content)} AS s FROM fp_rows"
    ).sort_values("i")
    expected = [sample_selected(ints) for _, ints in canonical(rows.assign(uid=0, tid=0))]
    assert got["s"].tolist() == expected
    assert 0.045 <= float(np.mean(expected)) <= 0.075, step


def test_edits_the_fingerprint_sees_and_the_one_it_does_not(tmp_path, engine, grid):
    """A changed user id in a sampled row and a row more change the fingerprint; a changed
    user id in an unsampled row does not (the sample's stated residual: the people sketch, not
    the fingerprint, covers such edits). The last assertion fails if every row is hashed."""
    rows = realistic(400)
    sampled = [i for i, (_, ints) in enumerate(canonical(rows)) if sample_selected(ints)]
    unsampled = next(i for i in range(len(rows)) if i not in sampled)
    assert sampled

    def fp(data: pd.DataFrame, name: str) -> str:
        data.to_csv(tmp_path / name, index=False)
        return _fp(tmp_path / name, engine, grid)

    base = fp(rows, "base.csv")
    relabel = rows.uid.max() + 1
    assert fp(rows.assign(uid=rows.uid.where(rows.index != sampled[0], relabel)), "s.csv") != base
    extra = rows.iloc[[unsampled]].assign(tid=rows.tid.max() + 1)
    assert fp(pd.concat([rows, extra]), "more.csv") != base
    assert fp(rows.assign(uid=rows.uid.where(rows.index != unsampled, relabel)), "u.csv") == base
