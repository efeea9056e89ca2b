"""The content fingerprint on Spark: computed in its validation pass too (xxhash64), the same
for a renamed copy and for the same rows in another order; another hash family than DuckDB's,
so the engines' fingerprints differ (stated in docs/architecture.md)."""

import shutil

import pandas as pd

from privmob.data import load_trips
from privmob.engine import make_engine


def test_spark_fingerprint(spark_engine, synth_dir, tmp_path) -> None:
    d, tess = synth_dir
    shutil.copy(d / "trips.parquet", tmp_path / "copy.parquet")
    pd.read_parquet(d / "trips.parquet").iloc[::-1].to_parquet(tmp_path / "reversed.parquet")
    fps = [
        load_trips(str(p), engine=spark_engine, tessellation=tess).fingerprint
        for p in (d / "trips.parquet", tmp_path / "copy.parquet", tmp_path / "reversed.parquet")
    ]
    assert fps[0] is not None and len(set(fps)) == 1
    duck = load_trips(str(d / "trips.parquet"), engine=make_engine("duckdb"), tessellation=tess)
    assert duck.fingerprint is not None and duck.fingerprint != fps[0]
