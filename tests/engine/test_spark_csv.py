"""CSV input on Spark: read as text and parsed by the shared loader SQL, so both engines agree.

The same CSV files (semicolon-delimited, gzipped, mapped column names, times written with
several offsets and formats) are loaded by DuckDB and by Spark (local mode, the shared session
of conftest.py): the canonical views must be equal row for row, the exact counts of the
landmark series and of the density pre-sampling must equal each other and those from the
Parquet originals, and a bad file must give the same message on both engines. Needs Java:
marked ``spark``; runs in CI.
"""

from __future__ import annotations

import gzip
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_events, load_trip_points, load_trips
from privmob.domain import time_grid
from privmob.engine import DuckDBEngine
from privmob.errors import InputError
from privmob.prepare.presample import HOURS_PER_WEEK, density_counts
from privmob.releases.landmark_counts import bounded_zone_counts

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# 08:15 UTC written as the loaders accept it; naive values are wall-clock times of the study
# time zone instead (True below)
TIME_FORMATS = {
    "2024-01-31 08:15:00": True,
    " 2024-01-31 08:15 ": True,
    "2024-01-31T08:15:00Z": False,
    "2024-01-31 09:15:00+01:00": False,
    "2024-01-31 17:15:00 +09:00": False,
    "2024-01-31 03:15:00  -0500": False,
    "2024-01-31 09:15:00 Europe/Paris": False,
    "2024-01-31 09:15:00 CET": False,
    "2024-01-31T10:15+02:00": False,
    "2024-01-31 08:15Z": False,
    "2024-01-31 09:15 Europe/Paris": False,
    "1706688900": False,
    # zones both engines' naive casts drop without a word: read as their zoned casts read them
    "2024-01-31 10:15:00 GMT+2": False,
    "2024-01-31 10:15:30+02:00:30": False,
}


@pytest.fixture(scope="module")
def engines(spark_engine):
    duck = DuckDBEngine()
    yield {"duckdb": duck, "spark": spark_engine}
    duck.close()


def canonical(loaded, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    df = loaded.engine.fetch(f"SELECT * FROM {loaded.view}").drop(columns=list(drop))
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def same_on_both(engines, load, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    duck, spark = (canonical(load(engines[n]), drop) for n in ("duckdb", "spark"))
    pd.testing.assert_frame_equal(duck, spark, check_dtype=False)
    return duck


def test_events_csv_times_and_coordinates_parse_alike(engines, tmp_path) -> None:
    texts = list(TIME_FORMATS)
    frame = pd.DataFrame(
        {
            "user id": [f"u{i}" for i in range(len(texts))],
            "ts": texts,
            "lat": [52.005 + 0.01 * (i % 3) for i in range(len(texts))],
            "lng": [13.005 + 0.01 * (i % 3) for i in range(len(texts))],
        }
    )
    frame.loc[len(frame)] = ["outside", "2024-01-31 08:15:00.250", 48.0, 2.0]
    path = tmp_path / "events.csv.gz"
    with gzip.open(path, "wt") as f:
        frame.to_csv(f, sep=";", index=False)
    out = same_on_both(
        engines,
        lambda eng: load_events(
            str(path),
            engine=eng,
            tessellation=box_grid(3),
            columns={"uid": "user id", "datetime": "ts"},
            timezone="Asia/Tokyo",
        ),
    ).set_index("uid")
    for i, (text, naive) in enumerate(TIME_FORMATS.items()):
        expected = "2024-01-31 08:15" if naive else "2024-01-31 17:15"  # Tokyo = UTC+9
        assert out.loc[f"u{i}", "time"].strftime("%Y-%m-%d %H:%M") == expected, text
    assert sorted(out["tile"].unique()) == [-1, 0, 4, 8]


def test_naive_times_read_in_the_input_zone_alike(engines, tmp_path) -> None:
    """``--input-timezone UTC --timezone Asia/Tokyo``: naive times are UTC, every row 17:15
    (the naive spellings: a timestamp with its own offset is refused under --input-timezone,
    on both engines, issue 42)."""
    from privmob.data.times import clock

    texts = [t for t, naive in TIME_FORMATS.items() if naive]
    frame = pd.DataFrame(
        {"uid": [f"u{i}" for i in range(len(texts))], "datetime": texts,
         "lat": [52.005] * len(texts), "lng": [13.005] * len(texts)}
    )  # fmt: skip
    path = tmp_path / "events.csv"
    frame.to_csv(path, index=False)
    out = same_on_both(
        engines,
        lambda eng: load_events(
            str(path), engine=eng, tessellation=box_grid(3), timezone=clock("Asia/Tokyo", "UTC")
        ),
    )
    assert set(out["time"].dt.strftime("%Y-%m-%d %H:%M")) == {"2024-01-31 17:15"}
    mixed = tmp_path / "mixed.csv"
    frame.assign(datetime=["2024-01-31T08:15:00Z", texts[1]]).to_csv(mixed, index=False)
    for eng in engines.values():
        with pytest.raises(InputError, match="its own offset"):
            load_events(
                str(mixed), engine=eng, tessellation=box_grid(3),
                timezone=clock("Asia/Tokyo", "UTC"),
            )  # fmt: skip


def test_trips_and_trip_points_csv_parse_alike(engines, tmp_path) -> None:
    grid = box_grid(3)
    trips = pd.DataFrame(
        {
            "uid": ["a", "a", "b", "c"],
            "start_time": ["2024-01-01 08:00", "2024-01-01T09:00:00Z", "1704103200", "x"],
            "origin": ["0", "8", "3", "99"],  # 99: not a tile (outliers)
            "destination": ["1", "8", "4", "2"],
        }
    )
    trips.iloc[:3].to_csv(tmp_path / "trips.csv", index=False)
    out = same_on_both(  # trips without ids are numbered in any order: tid is not compared
        engines,
        lambda eng: load_trips(str(tmp_path / "trips.csv"), engine=eng, tessellation=grid),
        drop=("tid",),
    )
    assert len(out) == 3 and out["start_time"].notna().all()
    points = tmp_path / "points.txt"
    points.write_text(
        "uid|tid|datetime|lat|lng\nu1|t1|2024-01-01 08:00|52.005|13.005\n"
        "u1|t1|2024-01-01 08:30|52.025|13.025\nu2|t2|2024-01-01 10:00+02:00|52.015|13.015\n"
    )
    out = same_on_both(
        engines,
        lambda eng: load_trip_points(str(points), engine=eng, tessellation=grid, delimiter="|"),
    )
    assert list(out["tile"]) == [0, 8, 4] and out["time"].dt.hour.tolist() == [8, 8, 8]
    headless = tmp_path / "events.tsv"  # no header row: the names are given
    headless.write_text("u1\t2024-01-01 08:00\t52.005\t13.005\textra\n")
    out = same_on_both(
        engines,
        lambda eng: load_events(
            str(headless),
            engine=eng,
            tessellation=grid,
            header=False,
            names=["uid", "datetime", "lat", "lng"],
        ),
    )
    assert out["tile"].tolist() == [0]
    windows = tmp_path / "windows.csv"  # byte order mark, CRLF, spaces after the delimiter
    windows.write_bytes(
        "\ufeffuid, datetime, lat, lng\r\nu1, 2024-01-01 08:00, 52.005, 13.005\r\n".encode()
    )
    out = same_on_both(
        engines, lambda eng: load_events(str(windows), engine=eng, tessellation=grid)
    )
    assert out["tile"].tolist() == [0] and out["time"].dt.hour.tolist() == [8]
    folder = tmp_path / "parts"  # a folder of CSV files (one gzipped), read as one input
    folder.mkdir()
    (folder / "part-0.csv").write_text("uid;datetime;lat;lng\nu1;2024-01-01 08:00;52.005;13.005\n")
    with gzip.open(folder / "part-1.csv.gz", "wt") as f:
        f.write("uid;datetime;lat;lng\nu2;2024-01-01 09:00;52.025;13.025\n")
    (folder / "README.md").write_text("not data")
    out = same_on_both(engines, lambda eng: load_events(str(folder), engine=eng, tessellation=grid))
    assert out["uid"].tolist() == ["u1", "u2"] and out["tile"].tolist() == [0, 8]


@pytest.fixture(scope="module")
def synth_csv(synth_dir):
    """The synthetic events and cells of ``synth_dir`` also written as CSV: mapped column
    names, semicolons, gzip, times in three spellings of the same instant."""
    d, tess = synth_dir
    events = pd.read_parquet(d / "events.parquet")
    utc = events["datetime"].dt.tz_convert("UTC")
    text = utc.dt.strftime("%Y-%m-%d %H:%M:%S.%f")  # naive = UTC
    kolkata = utc.dt.tz_convert("Asia/Kolkata").dt.strftime("%Y-%m-%dT%H:%M:%S.%f%z")
    pick = np.arange(len(events)) % 3
    text = text.where(pick != 1, kolkata).where(pick != 2, text.str.replace(" ", "T") + "Z")
    out = pd.DataFrame({"user_id": events["uid"], "ts": text, "tower": events["cell_id"]})
    with gzip.open(d / "events.csv.gz", "wt") as f:
        out.to_csv(f, sep=";", index=False)
    cells = pd.read_parquet(d / "cells.parquet").rename(columns={"cell_id": "tower"})
    cells.to_csv(d / "cells.csv", index=False)
    return d, tess


@pytest.fixture(scope="module")
def loaded(engines, synth_csv) -> dict[tuple[str, str], object]:
    """The events from Parquet on DuckDB (the reference; Spark on the same Parquet is
    compared with it in test_spark_releases.py) and from CSV on both engines."""
    d, tess = synth_csv
    out = {
        ("duckdb", "parquet"): load_events(
            str(d / "events.parquet"),
            engine=engines["duckdb"],
            tessellation=tess,
            cells=str(d / "cells.parquet"),
        )
    }
    for name, eng in engines.items():
        out[name, "csv"] = load_events(
            str(d / "events.csv.gz"),
            engine=eng,
            tessellation=tess,
            cells=str(d / "cells.csv"),
            columns={"uid": "user_id", "datetime": "ts", "cell_id": "tower"},
            cell_columns={"cell_id": "tower"},
        )
    return out


def test_series_counts_identical_from_csv_and_parquet(loaded, synth_csv) -> None:
    _, tess = synth_csv
    grid = time_grid("2024-01-01", "2024-01-03", "1h")  # the third day is outside the period
    counts = {
        key: bounded_zone_counts(events, tiles=tess.k, grid=grid, max_per_bin=10**6)
        for key, events in loaded.items()
    }
    ref, ref_out = counts["duckdb", "parquet"]
    assert ref.sum() > 100 and ref_out > 0
    for key, (c, out) in counts.items():
        np.testing.assert_array_equal(c, ref, err_msg=str(key))
        assert out == ref_out, key


def test_density_presampling_identical_from_csv_and_parquet(loaded, synth_csv) -> None:
    """l = 168 truncates nothing: visits per hour, totals and the outside cell agree. Which
    tower of a user-hour is kept is a keyed-hash choice (on the uid, text in the CSV), so per
    tower the counts are not compared here (test_spark_releases.py does, where it is fixed)."""
    _, tess = synth_csv
    week = datetime(2024, 1, 1)
    counts = {
        key: density_counts(
            events.engine, events.view, tess.k, week, HOURS_PER_WEEK, 11, with_truth=True
        )
        for key, events in loaded.items()
    }
    ref = counts["duckdb", "parquet"]
    assert ref.total_visits > 100 and ref.hourly is not None
    for key, c in counts.items():
        assert c.hourly is not None
        np.testing.assert_array_equal(c.sampled.sum(axis=0), ref.sampled.sum(axis=0), str(key))
        np.testing.assert_array_equal(c.hourly.sum(axis=0), ref.hourly.sum(axis=0), str(key))
        assert (c.total_visits, c.outside) == (ref.total_visits, ref.outside), key
        assert c.one_visit.sum() == ref.one_visit.sum(), key


BAD_EVENTS = {
    "missing column": "user,datetime,lat,lng\nu1,2024-01-01 08:00,52.01,13.01\n",
    "unparsable time": "uid;datetime;lat;lng\nu1;2024-01-01 08:00;52.01;13.01\n"
    "u2;yesterday;52.01;13.01\n",
    "missing uid": "uid,datetime,lat,lng\n,2024-01-01 08:00,52.01,13.01\n",
    "bad latitude": "uid,datetime,lat,lng\nu1,2024-01-01 08:00,95,13.01\n",
    "header only": "uid,datetime,lat,lng\n",
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_bad_csv_same_message_on_both(engines, tmp_path, case) -> None:
    path = tmp_path / f"{case.replace(' ', '_')}.csv"
    path.write_text(BAD_EVENTS[case])
    messages = {}
    for name, eng in engines.items():
        with pytest.raises(InputError) as err:
            load_events(str(path), engine=eng, tessellation=box_grid(3))
        messages[name] = str(err.value)
    assert messages["duckdb"] == messages["spark"]
    assert str(path) in messages["spark"] and "Traceback" not in messages["spark"]


def test_bad_cells_same_message_and_unknown_cell_same_outlier(engines, tmp_path) -> None:
    (tmp_path / "ev.csv").write_text("uid,datetime,cell_id\nu1,2024-01-01 08:00,7\n")
    (tmp_path / "cells.csv").write_text("cell_id,lat,lng\n1,52.01,13.01\n")
    (tmp_path / "bad_cells.csv").write_text("cell_id,lat,lng\n1,52.01,200\n")
    messages = set()
    for eng in engines.values():
        with pytest.raises(InputError) as err:
            load_events(
                str(tmp_path / "ev.csv"),
                engine=eng,
                tessellation=box_grid(3),
                cells=str(tmp_path / "bad_cells.csv"),
            )
        messages.add(str(err.value))
    assert len(messages) == 1 and "longitude" in messages.pop()
    for eng in engines.values():  # cell 7 is not in the table: the outliers cell (tile -1)
        loaded = load_events(
            str(tmp_path / "ev.csv"),
            engine=eng,
            tessellation=box_grid(3),
            cells=str(tmp_path / "cells.csv"),
        )
        assert canonical(loaded)["tile"].tolist() == [-1]


def test_ragged_csv_and_url_input_on_spark(spark_engine, tmp_path) -> None:
    """A row with an extra field is one clear error (no JVM stack); a file:// URL is read by
    Spark itself, as an s3a:// or hdfs:// path would be."""
    (tmp_path / "ragged.csv").write_text(
        "uid,datetime,lat,lng\nu1,2024-01-01 08:00,52.01,13.01,7\n"
    )
    with pytest.raises(InputError, match="Malformed CSV record") as err:
        load_events(str(tmp_path / "ragged.csv"), engine=spark_engine, tessellation=box_grid(3))
    assert "\tat " not in str(err.value)
    (tmp_path / "ok.csv").write_text("uid,datetime,lat,lng\nu1,2024-01-01 08:00,52.005,13.005\n")
    url = (tmp_path / "ok.csv").as_uri()
    loaded = load_events(url, engine=spark_engine, tessellation=box_grid(3))
    assert loaded.source == url and canonical(loaded)["tile"].tolist() == [0]
    with pytest.raises(InputError, match="cannot be read"):
        load_events(url + ".missing.csv", engine=spark_engine, tessellation=box_grid(3))
