"""Engine equivalence: the same pipeline SQL on DuckDB and on Spark (local mode).

With bounds that truncate nothing, both engines must return identical exact counts (the hash
that picks which units a user keeps differs between engines, so with truncation we check that
both respect the bound exactly instead). Needs Java: marked ``spark``; runs in CI.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips

from privmob.data import load_trips
from privmob.domain import Period
from privmob.engine import DuckDBEngine, make_engine
from privmob.prepare.inputs import load_trips_any
from privmob.privacy.costs import PrivacyUnit
from privmob.releases.od import ODDomain, exact_counts, od_matrix

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NO_TRUNCATION = 10**6


def counts(engine, trips, tess, period, max_trips):
    domain = ODDomain(tess.k, period.n_bins)
    return exact_counts(
        trips, domain=domain, period=period, unit=PrivacyUnit.USER, max_trips=max_trips
    )


def test_make_engine_spark_by_name(spark_engine):
    eng = make_engine("spark", session=spark_engine.spark)
    assert eng.name == "spark" and eng.dialect.name == "spark"


def test_od_trips_parquet_identical_counts(spark_engine, synth_dir):
    d, tess = synth_dir
    days = Period.parse("day", "2024-01-01", "2024-01-04")
    per_engine = []
    for eng in (DuckDBEngine(), spark_engine):
        trips = load_trips(str(d / "trips.parquet"), engine=eng, tessellation=tess)
        per_engine.append(counts(eng, trips, tess, days, NO_TRUNCATION))
    duck, spark = per_engine
    assert duck.sum() > 100  # the data really lands in the domain
    np.testing.assert_array_equal(duck, spark)


def test_od_from_events_identical_counts(spark_engine, synth_dir):
    d, tess = synth_dir
    everything = Period()
    per_engine = []
    for eng in (DuckDBEngine(), spark_engine):
        trips = load_trips_any(
            str(d / "events.parquet"),
            engine=eng,
            tessellation=tess,
            shape="events",
            cells=str(d / "cells.parquet"),
        )
        per_engine.append(counts(eng, trips, tess, everything, NO_TRUNCATION))
    duck, spark = per_engine
    assert duck.sum() > 100
    np.testing.assert_array_equal(duck, spark)


def test_truncation_respects_the_bound_on_both(spark_engine):
    grid = box_grid(3)
    df = random_trips(40, 9, seed=3, max_per_user=9)  # no trip within one tile
    per_user = df.groupby("uid").size().to_numpy()
    t = 3
    expected_total = int(np.minimum(per_user, t).sum())
    for eng in (DuckDBEngine(), spark_engine):
        trips = load_trips(df, engine=eng, tessellation=grid)
        c = counts(eng, trips, grid, Period(), t)
        assert c.sum() == expected_total, eng.name  # exactly min(n_u, T) trips per user
        # and a user's kept trips are among its own: per-user counts never exceed T
        one = load_trips(df[df.uid == int(np.argmax(per_user))], engine=eng, tessellation=grid)
        assert counts(eng, one, grid, Period(), t).sum() == min(per_user.max(), t)


def test_full_release_runs_on_spark(spark_engine, accountant):
    grid = box_grid(3)
    df = random_trips(20, 9, seed=4)
    trips = load_trips(pd.DataFrame(df), engine=spark_engine, tessellation=grid)
    rel = od_matrix(
        trips, tessellation=grid, epsilon=1.0, accountant=accountant, max_trips=4, rng=1
    )
    assert len(rel.tables["od"]) == 72 and rel.for_publication is False


def _cached_partitions(spark_engine, marker: str) -> int:
    infos = spark_engine.spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return sum(int(i.numCachedPartitions()) for i in infos if marker in str(i.name()))


def test_materialize_computes_the_table_now_and_close_drops_it(spark_engine):
    # the table is in Spark's cache once materialize returns (not built later by the first
    # query that reads it), and close() drops it
    from privmob.engine.spark import SparkEngine

    eng = SparkEngine(session=spark_engine.spark)
    eng.register("pm_mat_src", pd.DataFrame({"a": range(50)}))
    eng.materialize("pm_mat_t", "SELECT a * 2 AS pm_mat_marker_b FROM pm_mat_src")
    assert _cached_partitions(eng, "pm_mat_marker_b") > 0
    assert int(eng.fetch("SELECT sum(pm_mat_marker_b) AS s FROM pm_mat_t")["s"].iloc[0]) == 2450
    eng.close()
    assert _cached_partitions(eng, "pm_mat_marker_b") == 0


def test_materialize_failure_is_one_engine_error(spark_engine):
    from privmob.engine.spark import SparkEngine
    from privmob.errors import EngineError

    eng = SparkEngine(session=spark_engine.spark)
    eng.register("pm_mat_bad", pd.DataFrame({"s": ["1", "x"]}))
    with pytest.raises(EngineError, match="failed while computing pm_mat_bad_t") as err:
        eng.materialize("pm_mat_bad_t", "SELECT CAST(s AS INT) AS i FROM pm_mat_bad")
    assert "\n" not in str(err.value.args[0])
    eng.close()


@pytest.mark.parametrize("ids", [[7, 8, 8], ["a", "b", "b"]])
def test_duplicate_cell_id_is_refused_on_both_engines(spark_engine, ids):
    # the duplicates are found among the cells fetched for tile assignment (no query of their
    # own): the same refusal, naming the id, on DuckDB and on Spark
    from privmob.data import load_events
    from privmob.errors import InputError

    grid = box_grid(2)
    cells = pd.DataFrame({"cell_id": ids, "lat": [0.25, 0.75, 0.5], "lng": [0.25, 0.75, 0.5]})
    ev = pd.DataFrame(
        {"uid": [1, 1], "datetime": ["2024-01-01 08:00", "2024-01-01 09:00"], "cell_id": ids[:2]}
    )
    for engine in (DuckDBEngine(), spark_engine):
        with pytest.raises(InputError, match=f"duplicate cell id '{ids[-1]}'"):
            load_events(ev, cells=cells, engine=engine, tessellation=grid)
        cells_ok = cells.iloc[:2]
        loaded = load_events(ev, cells=cells_ok, engine=engine, tessellation=grid)
        assert int(engine.fetch(f"SELECT count(*) AS n FROM {loaded.view}")["n"].iloc[0]) == 2


def test_append_adds_rows_to_a_materialized_table_on_both_engines(spark_engine):
    from privmob.engine import DuckDBEngine
    from privmob.engine.spark import SparkEngine
    from privmob.releases.report.build import TRIP_SLICE_ROWS, trip_slices

    for eng in (DuckDBEngine(), SparkEngine(session=spark_engine.spark)):
        eng.register("pm_app_src", pd.DataFrame({"a": range(10)}))
        eng.materialize("pm_app_t", "SELECT a FROM pm_app_src WHERE a < 4")
        eng.append("pm_app_t", "SELECT a FROM pm_app_src WHERE a >= 7")
        got = sorted(eng.fetch("SELECT a FROM pm_app_t")["a"].tolist())
        assert got == [0, 1, 2, 3, 7, 8, 9], eng.name
        eng.close()
    # the report's trips table is never built in slices on Spark (one job per slice, no gain)
    assert trip_slices(spark_engine, 10 * TRIP_SLICE_ROWS) == 1
