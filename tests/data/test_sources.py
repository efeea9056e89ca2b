"""Bad input gets one clear message naming the file, the column, the row number and the kind
of problem, never a record; files are never modified; outliers are counted, never dropped."""

import hashlib

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from tests.helpers import box_grid

from privmob.data import load_events, load_trip_points, load_trips
from privmob.errors import ConfigError, InputError

GOOD = (
    "uid,tid,datetime,lat,lng\n1,1,2024-01-01 08:00:00,52.005,13.005\n"
    "1,1,2024-01-01 08:30:00,52.015,13.015\n"
)


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def write(tmp_path, text, name="points.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("uid,tid,datetime,lat\n1,1,2024-01-01 08:00,52.0\n", "lng", "missing column"),
        ("uid,tid,datetime,lat,lng\n1,1,yesterday,52.005,13.005\n", "datetime", "unparsable"),
        ("uid,tid,datetime,lat,lng\n1,1,2024-01-01 08:00,NaN,13.0\n", "lat", "NaN"),
        ("uid,tid,datetime,lat,lng\n1,1,2024-01-01 08:00,52.0,\n", "lng", "missing"),
        ("uid,tid,datetime,lat,lng\n1,1,2024-01-01 08:00,95.0,13.0\n", "lat", "out-of-range"),
        ("uid,tid,datetime,lat,lng\n,1,2024-01-01 08:00,52.0,13.0\n", "uid", "user id"),
        ("uid,tid,datetime,lat,lng\n1,1,,52.0,13.0\n", "datetime", "missing timestamp"),
    ],
)
def test_bad_trip_points(tmp_path, engine, grid, text, column, words):
    header, bad = text.splitlines()
    if "missing column" not in words:  # a good row first: the bad one is row 2
        text = f"{header}\n7,3,2024-01-01 07:00,52.011,13.012\n{bad}\n"
    path = write(tmp_path, text)
    before = digest(path)
    with pytest.raises(InputError) as err:
        load_trip_points(path, engine=engine, tessellation=grid)
    msg = str(err.value)
    assert str(path) in msg and f"'{column}'" in msg and words in msg
    if "missing column" not in words:
        # the row number, never the record (no user id, time or location, bad or good)
        assert "row 2:" in msg and err.value.row == 2
        values = [v for v in bad.split(",") if len(v) > 3] + [
            "52.011",
            "13.012",
            "2024-01-01 07:00",
        ]
        assert not [v for v in values if v in msg], msg
        assert "of 2 rows" not in msg and err.value.detail == "1 of 2 rows"
    assert digest(path) == before  # never modified


def test_empty_file_and_header_only(tmp_path, engine, grid):
    with pytest.raises(InputError, match="empty"):
        load_trip_points(write(tmp_path, ""), engine=engine, tessellation=grid)
    with pytest.raises(InputError, match="no records"):
        load_trip_points(
            write(tmp_path, "uid,tid,datetime,lat,lng\n", "h.csv"), engine=engine, tessellation=grid
        )


def test_missing_file(tmp_path, engine, grid):
    with pytest.raises(InputError, match="not found"):
        load_trip_points(tmp_path / "nope.csv", engine=engine, tessellation=grid)


def test_wrong_delimiter_gets_a_hint(tmp_path, engine, grid):
    path = write(tmp_path, GOOD.replace(",", ";"))
    with pytest.raises(InputError) as err:
        load_trip_points(path, engine=engine, tessellation=grid, delimiter=",")
    assert "delimiter" in (err.value.hint or "") and "';'" in err.value.hint


def test_sniffed_delimiter_and_column_mapping(tmp_path, engine, grid):
    path = write(tmp_path, GOOD.replace(",", ";").replace("uid", "user"))
    pts = load_trip_points(path, engine=engine, tessellation=grid, columns={"uid": "user"})
    df = engine.fetch(f"SELECT * FROM {pts.view} ORDER BY time")
    assert list(df["tile"]) == [0, 4]
    with pytest.raises(ConfigError, match="unknown canonical"):
        load_trip_points(path, engine=engine, tessellation=grid, columns={"user_id": "user"})


def test_outside_the_tessellation_is_an_outlier_not_an_error(tmp_path, engine, grid):
    path = write(tmp_path, GOOD + "2,2,2024-01-01 09:00:00,48.0,2.0\n")
    pts = load_trip_points(path, engine=engine, tessellation=grid)
    df = engine.fetch(f"SELECT uid, tile FROM {pts.view} ORDER BY uid")
    assert df["tile"].tolist()[-1] == -1 and len(df) == 3


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow", "parquet"])
def test_in_memory_tables_and_parquet(tmp_path, engine, grid, kind):
    df = pd.DataFrame(
        {
            "uid": [1, 2],
            "start_time": pd.to_datetime(["2024-01-01 08:00"] * 2),
            "origin": [0, 1],
            "destination": [1, 2],
        }
    )
    source = {
        "pandas": df,
        "polars": pl.from_pandas(df),
        "arrow": pa.Table.from_pandas(df),
        "parquet": tmp_path / "t.parquet",
    }[kind]
    if kind == "parquet":
        df.to_parquet(source)
    trips = load_trips(source, engine=engine, tessellation=grid)
    out = engine.fetch(f"SELECT origin, destination FROM {trips.view} ORDER BY origin")
    assert out.values.tolist() == [[0, 1], [1, 2]]


def test_trips_by_coordinates(engine, grid):
    df = pd.DataFrame(
        {
            "uid": [1],
            "start_time": ["2024-01-01 08:00"],
            "origin_lat": [52.005],
            "origin_lng": [13.005],
            "destination_lat": [52.025],
            "destination_lng": [13.025],
        }
    )
    trips = load_trips(df, engine=engine, tessellation=grid)
    assert engine.fetch(f"SELECT origin, destination FROM {trips.view}").values.tolist() == [[0, 8]]


def test_timezones(engine, grid):
    df = pd.DataFrame(
        {
            "uid": [1, 1, 1],
            "datetime": [
                "2024-06-01 12:00:00",
                "2024-06-01T12:00:00Z",
                "2024-06-01T12:00:00+02:00",
            ],
            "lat": [52.005] * 3,
            "lng": [13.005] * 3,
        }
    )
    utc = load_events(df, engine=engine, tessellation=grid)
    paris = load_events(df, engine=engine, tessellation=grid, timezone="Europe/Paris")
    hours = lambda ev: engine.fetch(f"SELECT hour(time) AS h FROM {ev.view}")["h"].tolist()  # noqa: E731
    assert hours(utc) == [12, 12, 10]  # naive = UTC; offsets converted to UTC
    assert hours(paris) == [12, 14, 12]  # naive = Paris time; offsets converted to Paris
    with pytest.raises(ConfigError, match="time zone"):
        load_events(df, engine=engine, tessellation=grid, timezone="Mars/Olympus")


def test_events_with_cells(tmp_path, engine, grid):
    cells = pd.DataFrame({"cell_id": ["a", "b"], "lat": [52.005, 60.0], "lng": [13.005, 13.0]})
    ev = pd.DataFrame(
        {"uid": [1, 1], "datetime": ["2024-01-01 08:00", "2024-01-01 09:00"], "cell_id": ["a", "b"]}
    )
    loaded = load_events(ev, cells=cells, engine=engine, tessellation=grid)
    assert sorted(engine.fetch(f"SELECT tile FROM {loaded.view}")["tile"]) == [-1, 0]
    ev.loc[1, "cell_id"] = "zzz"  # not in the cells table: the outliers cell, not an error
    loaded = load_events(ev, cells=cells, engine=engine, tessellation=grid)
    assert sorted(engine.fetch(f"SELECT tile FROM {loaded.view}")["tile"]) == [-1, 0]
    cells.loc[1, "cell_id"] = "a"
    with pytest.raises(InputError, match="duplicate cell id"):
        load_events(ev, cells=cells, engine=engine, tessellation=grid)


@pytest.mark.parametrize(
    ("cell_ids", "event_ids"),
    [([7, 8], [7, 8, 8]), (["7", "8"], [7, 8, 8]), ([7, 8], ["7", "8", "8"])],
)
def test_events_with_integer_or_text_cell_ids_get_the_same_tiles(engine, grid, cell_ids, event_ids):
    """Integer ids on both sides join on integers (fast path), mixed types on their text:
    the same events get the same tiles and the same cell_id, and unknown ids go to tile -1."""
    cells = pd.DataFrame({"cell_id": cell_ids, "lat": [52.005, 60.0], "lng": [13.005, 13.0]})
    ev = pd.DataFrame(
        {
            "uid": [1, 1, 2],
            "datetime": ["2024-01-01 08:00", "2024-01-01 09:00", "2024-01-01 10:00"],
            "cell_id": event_ids,
        }
    )
    loaded = load_events(ev, cells=cells, engine=engine, tessellation=grid)
    got = engine.fetch(f"SELECT uid, cell_id, tile FROM {loaded.view} ORDER BY uid, time")
    assert got["tile"].tolist() == [0, -1, -1]
    assert got["cell_id"].astype(str).tolist() == ["7", "8", "8"]
    view = engine.fetch(f"SELECT sql FROM duckdb_views() WHERE view_name = '{loaded.view}'")
    on_integers = isinstance(cell_ids[0], int) and isinstance(event_ids[0], int)
    assert ("c.cell_int" in view["sql"][0]) == on_integers  # the fast path where it applies
    ev.loc[2, "cell_id"] = type(event_ids[0])(9)  # unknown: the outliers cell (tile -1)
    loaded = load_events(ev, cells=cells, engine=engine, tessellation=grid)
    got = engine.fetch(f"SELECT uid, cell_id, tile FROM {loaded.view} ORDER BY uid, time")
    assert got["tile"].tolist() == [0, -1, -1]
    assert got["cell_id"].astype(str).tolist() == ["7", "8", "9"]


@pytest.mark.parametrize(
    ("coltype", "n_checks"),
    [("TIMESTAMP", 1), ("TIMESTAMP WITH TIME ZONE", 1), ("DATE", 1), ("VARCHAR", 2), ("BIGINT", 2)],
)
def test_native_time_columns_skip_only_the_parse_check(coltype, n_checks):
    from privmob.data.times import time_checks

    checks = time_checks("datetime", coltype)
    assert len(checks) == n_checks
    assert checks[0].message == "missing timestamp"


def test_native_time_column_with_a_missing_value_is_still_refused(engine, grid):
    ev = pd.DataFrame(
        {
            "uid": [1, 2],
            "datetime": pd.to_datetime(["2024-01-01 08:00", None]).tz_localize("UTC"),
            "lat": [52.005, 52.005],
            "lng": [13.005, 13.005],
        }
    )
    with pytest.raises(InputError, match="missing timestamp"):
        load_events(ev, engine=engine, tessellation=grid)
    ev.loc[1, "datetime"] = pd.Timestamp("2024-01-01 09:00", tz="UTC")
    loaded = load_events(ev, engine=engine, tessellation=grid)
    assert engine.fetch(f"SELECT count(time) AS n FROM {loaded.view}")["n"].iloc[0] == 2


def test_wrong_delimiter_is_not_reported_as_a_shape_problem(tmp_path, engine, grid):
    """With shape detection, a ';' file read with --delimiter ',' was 'cannot tell the input's
    shape'; it is a delimiter problem."""
    from privmob.prepare.inputs import load_trips_any

    path = write(tmp_path, GOOD.replace(",", ";"))
    with pytest.raises(InputError) as err:
        load_trips_any(path, engine=engine, tessellation=grid, delimiter=",")
    assert "delimiter" in str(err.value) and "--delimiter ';'" in (err.value.hint or "")
    assert "shape" not in str(err.value)


def test_latin1_byte_gets_an_encoding_hint(tmp_path, engine, grid):
    path = tmp_path / "latin.csv"
    path.write_bytes(
        ("uid,tid,datetime,lat,lng,note\n1,1,2024-01-01 08:00,52.0,13.0,café\n").encode("latin-1")
    )
    with pytest.raises(InputError) as err:
        load_trip_points(path, engine=engine, tessellation=grid)
    assert "line 2 is not UTF-8" in str(err.value) and "0xE9" in str(err.value)
    assert "iconv" in (err.value.hint or "")


def test_headerless_file_gets_a_no_header_hint_without_its_first_record(tmp_path, engine, grid):
    path = write(tmp_path, "u817,1,2024-01-01 08:00:00,52.005,13.005\n")
    with pytest.raises(InputError) as err:
        load_trip_points(path, engine=engine, tessellation=grid)
    msg = str(err.value)
    assert "no header row" in msg
    assert "u817" not in msg and "52.005" not in msg and "2024-01-01 08:00:00" not in msg


def test_unreadable_parquet_is_not_called_a_text_encoding_problem(tmp_path, engine, grid):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"\x90\xff not parquet at all")
    with pytest.raises(InputError) as err:
        load_trip_points(path, engine=engine, tessellation=grid)
    assert "UTF-8" not in str(err.value) and "cannot be read" in str(err.value)


def test_engine_error_text_shows_the_form_of_quoted_values():
    from privmob.data.diagnose import scrub_values

    text = "Conversion Error: Could not convert string 'bob 2024-05-01' to TIMESTAMP"
    assert scrub_values(text) == (
        "Conversion Error: Could not convert string 'aaa 9999-99-99' to TIMESTAMP"
    )
