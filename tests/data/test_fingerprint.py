"""The input's content fingerprint, computed in the validation pass: same content -> same
fingerprint whatever the file's name, format, column names or row order; any change of a
value, a row more or less -> another fingerprint."""

import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_events, load_trip_points, load_trips
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
    assert fp is not None and len(fp) == 64
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
        lambda d: d.assign(uid=d.uid.where(d.index != 3, 4)),  # one user id
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
    """The sum is fetched as text: as a DECIMAL it would arrive as a float and lose digits."""
    from privmob.data.validation import content_fingerprint

    expr = content_fingerprint(engine, {"x": "x"})
    total = engine.fetch(f"SELECT {expr} AS s FROM range(1000) AS t(x)").iloc[0, 0]
    assert isinstance(total, str) and total.isdigit() and len(total) > 17


def test_the_fingerprint_is_its_definition_on_canonical_values(tmp_path, engine, grid):
    """The trip points' fingerprint recomputed in Python from the definition (ids as text,
    times in whole microseconds, coordinates in whole 1e-7 degrees rounded down, MD5 row
    hashes summed, SHA-256 of version, names, rows and sum): no engine function in it, so
    Spark's equals it too (tests/engine/test_spark_fingerprint.py)."""
    import hashlib
    import math

    from privmob.data.validation import FINGERPRINT_VERSION, row_hash

    ROWS.to_csv(tmp_path / "a.csv", index=False)
    micros = (ROWS.datetime - pd.Timestamp("1970-01-01")) // pd.Timedelta(microseconds=1)
    total = sum(
        row_hash(
            [str(r.uid), str(r.tid), str(m)] + [str(math.floor(v * 1e7)) for v in (r.lat, r.lng)]
        )
        for r, m in zip(ROWS.itertuples(), micros, strict=True)
    )
    text = f"{FINGERPRINT_VERSION}|uid,tid,time,lat,lng|{len(ROWS)}|{total}"
    assert _fp(tmp_path / "a.csv", engine, grid) == hashlib.sha256(text.encode()).hexdigest()
