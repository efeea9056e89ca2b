"""One content fingerprint for every engine (issue 30): it is defined on canonical values (the
MD5 of each row's canonical text, summed exactly), so the same input gets the same fingerprint
(and the same people sketch) on DuckDB and on Spark, for every input shape; and the budget
follows the data across engines: a file released under dataset A on DuckDB is refused under
dataset B with ``--engine spark``.
Needs Java: marked ``spark``."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest
from tests.helpers import run_cli

from privmob.data import load_events, load_trip_points, load_trips
from privmob.data.fingerprint import content_fingerprint, fingerprint_source, row_hash
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import make_engine
from privmob.privacy.ledger import Ledger

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GOWALLA = {"delimiter": "\t", "header": False, "names": ["uid", "datetime", "lat", "lng", "cid"]}


def test_spark_fingerprint_is_order_and_name_free(spark_engine, synth_dir, tmp_path) -> None:
    d, tess = synth_dir
    shutil.copy(d / "trips.parquet", tmp_path / "copy.parquet")
    pd.read_parquet(d / "trips.parquet").iloc[::-1].to_parquet(tmp_path / "reversed.parquet")
    fps = [
        load_trips(str(p), engine=spark_engine, tessellation=tess).fingerprint
        for p in (d / "trips.parquet", tmp_path / "copy.parquet", tmp_path / "reversed.parquet")
    ]
    assert fps[0] is not None and len(set(fps)) == 1


def test_same_input_same_fingerprint_on_both_engines(spark_engine, synth_dir, shared_data):
    d, tess = synth_dir
    duck = make_engine("duckdb")
    try:
        # tile-id trips (Parquet), synthetic events with cell ids, real trip points (CSV), real
        # check-ins (gzipped TSV, no header, times with a zone, coordinates)
        pairs = [
            (load_trips, d / "trips.parquet", tess, {}),
            (load_trip_points, shared_data / "dpmr_fixture" / "test_data.csv",
             load_tessellation(shared_data / "dpmr_fixture" / "test_tessellation.geojson"), {}),
            (load_events, shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz",
             load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson"),
             {**GOWALLA, "timezone": "America/New_York"}),
        ]  # fmt: skip
        for loader, path, zones, kw in pairs:
            on_duck = loader(str(path), engine=duck, tessellation=zones, **kw)
            on_spark = loader(str(path), engine=spark_engine, tessellation=zones, **kw)
            assert on_duck.rows == on_spark.rows and on_duck.rows
            assert on_duck.fingerprint and on_duck.fingerprint == on_spark.fingerprint, path
            # and the same people sketch under one key (the keyed hash is engine-neutral too)
            key = os.urandom(32)
            people = on_duck.people_sketch(key)
            assert people is not None and people.hashes and people == on_spark.people_sketch(key)
    finally:
        duck.close()


def test_both_engines_sum_the_reference_row_hash(spark_engine, synth_dir) -> None:
    """The SQL of each engine against the Python reference, on values that reach every bit of
    the 64-bit row hash (Spark sums it in three parts)."""
    d, _ = synth_dir
    texts = pd.read_parquet(d / "trips.parquet")[["uid", "origin", "destination"]].astype(str)
    expected = sum(row_hash(list(r)) for r in texts.itertuples(index=False))
    assert expected > 2**64  # the sum is past one 64-bit word: the parts' carries are exercised
    content = {c: f"CAST({c} AS VARCHAR)" for c in texts.columns}
    duck = make_engine("duckdb")
    try:
        for eng in (duck, spark_engine):
            eng.read_parquet("fp_ref", str(d / "trips.parquet"))
            source = fingerprint_source(eng, content, "fp_ref")
            got = eng.fetch(f"SELECT {content_fingerprint(eng, content)} AS f FROM {source}")
            assert int(got.iloc[0, 0]) == expected, eng.dialect.name
    finally:
        duck.close()


def test_another_engine_does_not_reset_the_budget(spark_engine, shared_data, tmp_path, capsys):
    """The same CSV under dataset A on DuckDB, then under dataset B on Spark: refused (exit 3,
    nothing charged, nothing written). On the engine-specific fingerprint this was exit 0."""
    fixture = shared_data / "dpmr_fixture"
    ledger = tmp_path / "l.sqlite"

    def od(dataset: str, out: str, *extra: str) -> int:
        return run_cli([
            "od", str(fixture / "test_data.csv"), "-t", str(fixture / "test_tessellation.geojson"),
            "-e", "0.5", "-T", "2", "--budget", "10", "--dataset", dataset,
            "--ledger", str(ledger), "-o", str(tmp_path / out), "--quiet", *extra,
        ])  # fmt: skip

    assert od("A", "a") == 0
    capsys.readouterr()
    assert od("B", "b", "--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=2") == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "already released under dataset 'A'" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    assert Ledger(ledger).entries("B") == []


def test_both_engines_compute_the_reference_v3_text(spark_engine, tmp_path) -> None:
    """The v3 aggregates (each canonical integer's exact sum over every row, the row hashes of
    the sampled rows summed) of each engine against the Python reference, on negative
    coordinates (the remainder's sign) and whole-second times; and the sample is a sample."""
    import numpy as np

    from privmob.data.fingerprint import Canonical, reference_total, sample_selected

    rng = np.random.default_rng(4)
    n = 5000
    data = pd.DataFrame(
        {
            "uid": [f"u{i}" for i in rng.integers(0, 300, n)],
            "t": (1_709_251_200 + rng.integers(0, 30 * 86400, n)) * 1_000_000,
            "lat": np.floor(np.round(40.6 + rng.random(n) * 0.3, 5) * 1e7).astype("int64"),
            "lng": np.floor(np.round(-74.1 + rng.random(n) * 0.3, 5) * 1e7).astype("int64"),
        }
    )
    data.to_parquet(tmp_path / "v3.parquet", index=False)
    content = {"uid": "CAST(uid AS VARCHAR)"} | {
        c: Canonical(f"CAST({c} AS VARCHAR)", c) for c in ("t", "lat", "lng")
    }
    rows = [
        ([r.uid, str(r.t), str(r.lat), str(r.lng)], [r.t, r.lat, r.lng])
        for r in data.itertuples(index=False)
    ]
    assert 0.04 < np.mean([sample_selected(i) for _, i in rows]) < 0.08
    expected = reference_total(rows)
    duck = make_engine("duckdb")
    try:
        for eng in (duck, spark_engine):
            eng.read_parquet("fp_v3", str(tmp_path / "v3.parquet"))
            source = fingerprint_source(eng, content, "fp_v3")
            got = eng.fetch(f"SELECT {content_fingerprint(eng, content)} AS f FROM {source}")
            assert got.iloc[0, 0] == expected, eng.dialect.name
    finally:
        duck.close()


def test_instants_fingerprint_alike_at_utc_and_at_a_zone(spark_engine, tmp_path) -> None:
    """Events whose times are instants (Parquet timestamps with a zone: DuckDB TIMESTAMPTZ,
    Spark TIMESTAMP_LTZ), before and after 1970 and with microseconds, read at UTC (where Spark
    reads the canonical microseconds from the instant itself, :func:`canonical_time`) and at
    America/New_York (from the wall clock): the same fingerprint on both engines at each zone,
    and another one at the other zone (the wall clocks differ). Reading the instant's
    microseconds at New York too would fail the first assertion."""
    import numpy as np

    rng = np.random.default_rng(11)
    n = 3000
    micros = rng.integers(-400 * 86400 * 10**6, 60 * 365 * 86400 * 10**6, n)
    pd.DataFrame(
        {
            "uid": rng.integers(0, 200, n),
            "datetime": pd.to_datetime(micros, unit="us", utc=True),
            "lat": 40.6 + rng.random(n) * 0.3,
            "lng": -74.1 + rng.random(n) * 0.3,
        }
    ).to_parquet(tmp_path / "instants.parquet", index=False)
    from privmob.data.synth import default_tessellation

    tess = default_tessellation(16)
    duck = make_engine("duckdb")
    try:
        fingerprints = {}
        for zone in ("UTC", "America/New_York"):
            got = {
                eng.dialect.name: load_events(
                    str(tmp_path / "instants.parquet"), engine=eng, tessellation=tess,
                    timezone=zone,
                ).fingerprint
                for eng in (duck, spark_engine)
            }  # fmt: skip
            assert got["duckdb"] and got["duckdb"] == got["spark"], zone
            fingerprints[zone] = got["duckdb"]
        assert fingerprints["UTC"] != fingerprints["America/New_York"]
    finally:
        duck.close()


def test_one_id_whatever_its_type_on_both_engines(spark_engine, tmp_path) -> None:
    """Issue 38 item 5 on Spark: each column type's canonical id text is the Python reference's
    (``canonical_id``), and the same events with int64, float64 and "N.0" text ids (Parquet),
    and as CSV (a DOUBLE on DuckDB, text on Spark) get one fingerprint and one people sketch on
    both engines. Before, the float ids were the engines' texts "7.0": another fingerprint."""
    from tests.data.test_canonical_ids import SPELLINGS, events, spellings_of
    from tests.helpers import box_grid

    from privmob.data.fingerprint import canonical_id, identity_text

    for kind, values in SPELLINGS.items():
        frame = pd.DataFrame({"x": [v for v, _ in values]})
        if kind == "VARCHAR":
            frame = frame.astype(str)
        elif kind.startswith("DECIMAL"):
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"x": pa.array(frame.x, pa.decimal128(18, 2))}),
                           tmp_path / "ids.parquet")  # fmt: skip
        if not kind.startswith("DECIMAL"):
            frame.to_parquet(tmp_path / "ids.parquet", index=False)
        spark_engine.read_parquet("spelled", str(tmp_path / "ids.parquet"))
        got = spark_engine.fetch(f"SELECT {identity_text('x', kind)} AS c FROM spelled")
        assert (
            got["c"].tolist() == [canonical_id(v) for v, _ in values] == [t for _, t in values]
        ), kind
    frame, grid, key = events(), box_grid(3), os.urandom(32)
    duck = make_engine("duckdb")
    try:
        seen = {
            (eng.dialect.name, name): load_events(str(path), engine=eng, tessellation=grid)
            for name, path in spellings_of(frame, tmp_path).items()
            for eng in (duck, spark_engine)
        }
        assert len({each.fingerprint for each in seen.values()}) == 1
        assert len({each.people_sketch(key) for each in seen.values()}) == 1
    finally:
        duck.close()


def test_float_ids_on_spark_are_the_int_ids_released_on_duckdb(spark_engine, tmp_path, capsys):
    """Through the CLI with a real ledger: int64 ids under A on DuckDB, the same events with
    float64 ids under B on Spark: refused as the same data (exit 3, nothing charged)."""
    from tests.data.test_canonical_ids import events, spellings_of
    from tests.helpers import box_grid

    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    paths = spellings_of(events(), tmp_path)

    def population(path, dataset: str, out: str, *extra: str) -> int:
        return run_cli([
            "population", str(path), "-t", str(tmp_path / "grid.geojson"), "-e", "0.5",
            "--budget", "10", "--dataset", dataset, "--ledger", str(tmp_path / "l.sqlite"),
            "-o", str(tmp_path / out), "--quiet", *extra,
        ])  # fmt: skip

    assert population(paths["int64"], "A", "a") == 0
    capsys.readouterr()
    spark = ("--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=2")
    assert population(paths["float64"], "B", "b", *spark) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "already released under dataset 'A'" in err and "Traceback" not in err, err
    assert Ledger(tmp_path / "l.sqlite").entries("B") == [] and not (tmp_path / "b").exists()
