"""Input formats that used to be misread: epoch seconds as text, zone names, float tile ids."""

import decimal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.helpers import box_grid

from privmob.data import load_trips
from privmob.errors import InputError

HEADER = "uid,tid,start_time,origin,destination\n"


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def _rows(engine, loaded) -> list[dict]:
    return engine.fetch(f"SELECT * FROM {loaded.view} ORDER BY tid").to_dict("records")


def test_epoch_seconds_as_text(tmp_path, engine, grid):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,1,1704096000,0,1\n1,2,1704096000.5,0,1\n")
    rows = _rows(engine, load_trips(path, engine=engine, tessellation=grid, timezone="UTC"))
    assert rows[0]["start_time"] == pd.Timestamp("2024-01-01 08:00:00")
    assert rows[1]["start_time"] == pd.Timestamp("2024-01-01 08:00:00.5")


def test_zone_names_are_honoured_not_dropped(tmp_path, engine, grid):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,1,2024-01-01 08:00:00 Europe/Berlin,0,1\n")
    rows = _rows(engine, load_trips(path, engine=engine, tessellation=grid, timezone="UTC"))
    assert rows[0]["start_time"] == pd.Timestamp("2024-01-01 07:00:00")


@pytest.mark.parametrize("text", ["2024-01-01 08:00:00 Mars/Olympus", "2024-01-01 08:00:00 PM"])
def test_unknown_suffix_is_an_input_error(tmp_path, engine, grid, text):
    """DuckDB's TIMESTAMP cast ignores any trailing word: '08:00 PM' was read as 08:00."""
    path = tmp_path / "t.csv"
    path.write_text(HEADER + f"1,1,{text},0,1\n")
    with pytest.raises(InputError, match="unparsable timestamp") as exc:
        load_trips(path, engine=engine, tessellation=grid)
    # the value's form (digits as 9, letters as a), never the time itself
    form = "9999-99-99 99:99:99 " + ("aaaa/aaaaaaa" if "Mars" in text else "aa")
    assert "start_time" in str(exc.value) and f"'{form}'" in str(exc.value)
    assert text not in str(exc.value)


@pytest.mark.parametrize(
    "array",
    [
        pa.array([1704096000], pa.uint32()),
        pa.array([decimal.Decimal("1704096000.0")], pa.decimal128(12, 1)),
    ],
)
def test_numeric_epoch_columns(tmp_path, engine, grid, array):
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table({"uid": [1], "tid": [1], "start_time": array, "origin": [0], "destination": [1]}),
        path,
    )
    rows = _rows(engine, load_trips(path, engine=engine, tessellation=grid))
    assert rows[0]["start_time"] == pd.Timestamp("2024-01-01 08:00:00")


def test_integer_tile_ids_stored_as_floats(engine, grid):
    df = pd.DataFrame(
        {
            "uid": [1, 1, 1],
            "tid": [1, 2, 3],
            "start_time": pd.Timestamp("2024-01-01"),
            "origin": [0.0, 8.0, 2.5],
            "destination": [1.0, 3.0, 9.0],
        }
    )
    rows = _rows(engine, load_trips(df, engine=engine, tessellation=grid))
    assert [(r["origin"], r["destination"]) for r in rows] == [(0, 1), (8, 3), (-1, -1)]


@pytest.mark.parametrize("loader", ["load_trips", "load_trip_points", "load_events", "any"])
def test_a_misspelt_reading_keyword_is_refused(tmp_path, engine, grid, loader):
    """The loaders' reading keywords (columns, timezone, delimiter: privmob.data.reading.Reading)
    are checked: ``timezon=`` is a TypeError, never ignored (the times would be read in UTC)."""
    import privmob.data as data
    from privmob.prepare.inputs import load_trips_any

    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,1,2024-01-01 08:00:00,0,1\n")
    load = load_trips_any if loader == "any" else getattr(data, loader)
    with pytest.raises(TypeError, match="'timezon'"):
        load(path, engine=engine, tessellation=grid, timezon="Europe/Paris")
