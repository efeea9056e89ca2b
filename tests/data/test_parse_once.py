"""DuckDB reads a CSV input and parses its times and coordinates once, into a private file that
validation, the fingerprint and every later step read: the canonical relation and the
fingerprint are those of the same table read without it (an in-memory table: parsed view), the
file is private and gone when the engine closes, and errors still name the input's row."""

import stat

import pandas as pd
import pytest
from tests.helpers import box_grid, trips_from_points

from privmob.data import load_events, load_trip_points, load_trips
from privmob.engine import DuckDBEngine
from privmob.errors import EngineError, InputError

TIMES = [
    "2024-01-01 08:00:00.5+01:00",  # plain ISO with an offset (fast path)
    "2024-01-01 08:30:00",  # plain, naive
    "2024-01-02 09:00 Europe/Berlin",  # routed: a zone name, no seconds
    "1704186000",  # routed: epoch seconds
    "2024-01-03T10:00:00Z",
    " 2024-01-03 10:30:00+02 ",  # routed: spaces around
]
POINTS = pd.DataFrame(
    {
        "uid": ["1", "1", "2", "2", "3", "3"],
        "tid": ["10", "10", "20", "20", "30", "30"],
        "datetime": TIMES,
        "lat": ["52.005", "52.015", "52.025", "52.005", "52.015", "60.0"],
        "lng": ["13.005", "13.015", "13.025", "13.015", "13.005", "13.0"],
    }
)


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def _rows(loaded):
    df = loaded.engine.fetch(f"SELECT * FROM {loaded.view}")
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def _trips_table() -> pd.DataFrame:
    return trips_from_points(POINTS, TIMES)


@pytest.mark.parametrize(
    ("loader", "table"),
    [
        (load_trip_points, lambda: POINTS),
        (load_events, lambda: POINTS.drop(columns="tid")),
        (load_trips, _trips_table),
    ],
    ids=["trip points", "events", "trips by coordinates"],
)
@pytest.mark.parametrize("timezone", ["UTC", "Europe/Paris"])
def test_parsed_once_reads_as_the_parsed_view(tmp_path, grid, loader, table, timezone):
    df = table()
    df.to_csv(tmp_path / "input.csv", index=False)
    with DuckDBEngine() as eng:
        once = loader(tmp_path / "input.csv", engine=eng, tessellation=grid, timezone=timezone)
        assert _reads_file(eng, once)
        view = loader(df, engine=eng, tessellation=grid, timezone=timezone)
        assert not _reads_file(eng, view)
        got, want = _rows(once), _rows(view)
        assert got["uid"].notna().all() and len(got) == len(df)
        pd.testing.assert_frame_equal(got, want)
        assert once.fingerprint == view.fingerprint and once.rows == view.rows == len(df)


def _reads_file(eng, loaded):
    plan = eng.con.execute(f"EXPLAIN SELECT * FROM {loaded.view}").df().to_string().upper()
    return "READ_PARQUET" in plan or "PARQUET_SCAN" in plan


def test_the_parsed_file_is_private_and_removed_at_close(tmp_path, grid):
    POINTS.to_csv(tmp_path / "points.csv", index=False)
    eng = DuckDBEngine(spill_dir=tmp_path / "spill")
    load_trip_points(tmp_path / "points.csv", engine=eng, tessellation=grid)
    files = list((tmp_path / "spill").rglob("*.parquet"))
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    written = eng.fetch(f"DESCRIBE SELECT * FROM read_parquet('{files[0]}')")
    types = dict(zip(written["column_name"], written["column_type"], strict=True))
    # the times as written are not kept: only whether one was given
    assert types["_p_datetime_raw"] == "BOOLEAN" and "datetime" not in types
    eng.close()
    assert not files[0].exists() and not files[0].parent.exists()


def test_a_bad_row_is_still_named_by_its_row_in_the_input(tmp_path, grid):
    bad = POINTS.copy()
    bad.loc[4, "datetime"] = "not a time"
    bad.to_csv(tmp_path / "points.csv", index=False)
    with DuckDBEngine() as eng, pytest.raises(InputError) as err:
        load_trip_points(tmp_path / "points.csv", engine=eng, tessellation=grid)
    assert err.value.row == 5 and "unparsable timestamp" in str(err.value)


def test_one_input_column_for_two_canonical_names(tmp_path, grid):
    POINTS.to_csv(tmp_path / "points.csv", index=False)
    with DuckDBEngine() as eng:
        once = load_trip_points(
            tmp_path / "points.csv", engine=eng, tessellation=grid, columns={"uid": "tid"}
        )
        view = load_trip_points(POINTS, engine=eng, tessellation=grid, columns={"uid": "tid"})
        assert _reads_file(eng, once)
        pd.testing.assert_frame_equal(_rows(once), _rows(view))
        assert once.fingerprint == view.fingerprint


def test_failing_to_write_the_parsed_file_is_not_called_an_input_problem(tmp_path, grid):
    POINTS.to_csv(tmp_path / "points.csv", index=False)
    with DuckDBEngine() as eng:
        eng.private_directory = lambda prefix: tmp_path / "gone"  # no such directory
        with pytest.raises(EngineError, match="writing the parsed input failed") as err:
            load_trip_points(tmp_path / "points.csv", engine=eng, tessellation=grid)
    # from Python, the hint names the Session's argument (privmob.surface)
    assert not isinstance(err.value, InputError) and "spill_dir=" in (err.value.hint or "")
