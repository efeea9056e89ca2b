"""The release commands with ``--engine spark``, end to end on tiny CSV inputs (in process).

The commands start their engine through ``getOrCreate``, so they run on the session shared by
the engine tests (conftest.py) and never stop it. ``series-counts`` with a bound that truncates
nothing and the same test seed writes the same series on both engines; ``density`` runs and is
charged; a bad CSV gives the same one-line error (exit 2) as on DuckDB. Needs Java: marked
``spark``; runs in CI.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli, write_city_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# a small local session: the shared one when the tests run together
SPARK = ["--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """30 users x 8 events over one day on a 3 x 3 grid (some outside the grid and the day)."""
    d = tmp_path_factory.mktemp("spark_cli")
    rng = np.random.default_rng(2)
    n = 240
    seconds = rng.integers(-3_600, 86_400 + 3_600, n)
    frame = pd.DataFrame(
        {
            "uid": np.repeat([f"user{i}" for i in range(30)], 8),
            "datetime": (pd.Timestamp("2024-01-01") + pd.to_timedelta(seconds, unit="s")).astype(
                str
            ),
            "lat": rng.uniform(51.995, 52.03, n).round(5),
            "lng": rng.uniform(12.995, 13.03, n).round(5),
        }
    )
    frame.to_csv(d / "events.csv", index=False, sep=";")
    box_grid(3).gdf.to_file(d / "zones.geojson", driver="GeoJSON")
    return d


def series_counts_args(files, out) -> list[str]:
    return [
        "series-counts", str(files / "events.csv"), "-t", str(files / "zones.geojson"),
        "--start", "2024-01-01", "--end", "2024-01-02", "--freq", "3h", "--epsilon", "1",
        "--max-per-bin", "100", "--landmarks", "2024-01-01 09:00", "-o", str(out),
        "--budget", "5", "--test-mode", "--seed", "3", "--quiet",
    ]  # fmt: skip


def test_series_counts_on_spark_writes_what_duckdb_writes(spark_engine, files, tmp_path) -> None:
    tables = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / engine
        extra = SPARK if engine == "spark" else []
        assert run_cli(series_counts_args(files, out) + extra) == 0
        tables[engine] = {
            name: pd.read_parquet(out / f"{name}.parquet") for name in ("series", "outliers")
        }
        meta = json.loads((out / "metadata.json").read_text())  # charged (throw-away ledger)
        assert sum(e["cost"]["epsilon"] for e in meta["ledger_entries"]) == pytest.approx(1.1)
    for name in ("series", "outliers"):
        pd.testing.assert_frame_equal(tables["duckdb"][name], tables["spark"][name])
    assert len(tables["spark"]["series"]) == 10 * 8  # 9 zones + outside, 8 bins


def test_bad_csv_on_spark_is_the_duckdb_message(spark_engine, files, tmp_path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("uid;datetime;lat;lng\nu1;2024-01-01 08:00;52.01;13.01\nu2;noon;52.0;13.0\n")
    errors = {}
    for engine in ("duckdb", "spark"):
        args = series_counts_args(files, tmp_path / engine)
        args[1] = str(bad)
        capsys.readouterr()
        assert run_cli(args + (SPARK if engine == "spark" else [])) == 2
        errors[engine] = capsys.readouterr().err
    assert errors["duckdb"] == errors["spark"]
    # the row and the value's form, never the value (the same row number on both engines)
    assert "unparsable timestamp" in errors["spark"] and "'aaaa'" in errors["spark"]
    assert "row 2" in errors["spark"] and "noon" not in errors["spark"]
    assert "Traceback" not in errors["spark"] and "at org.apache" not in errors["spark"]
    assert not any((tmp_path / e).exists() for e in ("duckdb", "spark"))  # nothing written


def test_density_on_spark(spark_engine, tmp_path) -> None:
    from privmob.data.density_synth import synthetic_city

    city = synthetic_city(150, 12, 3, seed=3)
    write_city_files(tmp_path, city)
    out = tmp_path / "out"
    args = [
        "density", str(tmp_path / "events.csv"), "--cells", str(tmp_path / "cells.csv"),
        "--zones", str(tmp_path / "zones.geojson"), "--epsilon", "0.5", "--max-visits", "20",
        "--week", city.week_start.isoformat(), "-o", str(out), "--test-mode",
        "--budget", "1", "--seed", "4", "--quiet", *SPARK,
    ]  # fmt: skip
    assert run_cli(args) == 0
    assert len(pd.read_parquet(out / "density.parquet")) == 9 * 168
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["privacy"]["cost"]["epsilon"] == pytest.approx(0.55)  # + the outliers cell
    assert sum(e["cost"]["epsilon"] for e in meta["ledger_entries"]) == pytest.approx(0.55)


def test_spark_options_need_the_spark_engine(files, tmp_path, capsys) -> None:
    args = series_counts_args(files, tmp_path / "o")
    assert run_cli([*args, "--spark-master", "local[2]"]) == 2
    assert "apply to the Spark engine" in capsys.readouterr().err
    assert run_cli([*args, "--engine", "spark", "--spark-conf", "novalue"]) == 2
    assert "key=value" in capsys.readouterr().err
