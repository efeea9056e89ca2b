"""Fixtures of the engine-equivalence tests: one Spark session (local mode) for all of them,
and a small synthetic dataset written once."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def spark_engine():
    """A SparkEngine in local mode (2 threads); skips when Java or PySpark is missing."""
    if shutil.which("java") is None:
        pytest.skip("Java not found: the Spark engine needs Java 17")
    pytest.importorskip("pyspark")
    from privmob.engine.spark import SparkEngine

    eng = SparkEngine(
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory):
    """Synthetic trips and CDR-like events (60 users, 3 days, 36 zones) as Parquet files."""
    from privmob.data.synth import default_tessellation, synth_events, synth_trips

    d = tmp_path_factory.mktemp("synth")
    tess = default_tessellation(36)
    cfg = {"n_users": 60, "days": 3, "tessellation": tess, "seed": 7}
    synth_trips(d / "trips.parquet", mean_trips_per_user=6.0, **cfg)
    synth_events(d / "events.parquet", d / "cells.parquet", **cfg)
    return d, tess


@pytest.fixture(scope="session")
def spark_cluster():
    """A real Spark standalone cluster on this machine: a master and two workers of one core
    and 1 GB each, started from the installed pyspark, loopback only, every file under a 0700
    temporary directory. Stopped at the end, and then no process of it may be left."""
    if shutil.which("java") is None:
        pytest.skip("Java not found: the Spark cluster needs Java 17")
    pytest.importorskip("pyspark")
    import tempfile
    from pathlib import Path

    from privmob.engine.spark_cluster import StandaloneCluster, cluster_processes

    root = Path(tempfile.mkdtemp(prefix="privmob-cluster-"))  # mode 0700
    cluster = StandaloneCluster(root / "cluster", workers=2, cores=1, memory="1g").start()
    yield cluster
    pids = cluster.pids()
    cluster.stop()
    left = cluster_processes(cluster.root, pids)
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"Spark processes left running after the cluster stopped: {left}"
