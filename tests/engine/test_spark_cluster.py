"""The releases on a real Spark standalone cluster (a master and two one-core workers started
from the installed pyspark, ``spark_cluster`` in conftest.py), from the command line and from
``pm.Session(engine="spark", spark_master=...)``.

Each run is a process of its own (a driver JVM talking to the cluster's executors), as a user
runs it. Checked for every release: the same output tables as DuckDB with the same test seed
(bounds that truncate nothing), and, once the run has ended, nothing of the records left where
the cluster keeps files: the executors' local directories hold no file (shuffle, spill and
cached blocks removed) and no file under the cluster's directory (executors' logs in the
workers' work directories, the daemons' logs) contains the canary user id or the canary
coordinates planted in the input. Shuffle and spill compression are off in these runs, so a
leftover file would show the canary in plain text; the Session test checks that it does while
the application runs (the check can fail).

od and the report from the command line and the Session test run in CI (marked ``spark``);
population, series-counts and density from the command line are marked ``spark_cluster``
and run with ``uv run --all-extras --group dev pytest tests/engine -m spark_cluster``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CANARY_UID = "canary-u7x3k9"
CANARY_LAT, CANARY_LNG = "52.0137913", "13.0246817"
CANARIES = (CANARY_UID, CANARY_LAT, CANARY_LNG)
# off so that a shuffle or spill file left behind shows the canary in plain text
UNCOMPRESSED = {"spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false"}
RUN_KEYS = ("created_at", "ledger", "ledger_entries")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Tiny CSV inputs with a canary user: trip points (od, report), events (population,
    series-counts) on a 3 x 3 grid, phone events with towers (density)."""
    from privmob.data.density_synth import synthetic_city

    d = tmp_path_factory.mktemp("cluster_inputs")
    rng = np.random.default_rng(11)
    rows = []
    for u in range(30):
        uid = CANARY_UID if u == 0 else f"user{u}"
        for t in range(3):
            start = pd.Timestamp("2024-01-01") + pd.Timedelta(
                seconds=int(rng.integers(0, 3 * 86_400 - 7_200))
            )
            for p in range(int(rng.integers(2, 4))):
                lat, lng = rng.uniform(51.998, 52.032), rng.uniform(12.998, 13.032)
                rows.append(
                    (uid, u * 10 + t, str(start + pd.Timedelta(minutes=25 * p)), f"{lat:.5f}",
                     f"{lng:.5f}")
                )  # fmt: skip
    points = pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])
    points.loc[0, ["lat", "lng"]] = [CANARY_LAT, CANARY_LNG]
    points.to_csv(d / "trips.csv", index=False)
    points.drop(columns="tid").to_csv(d / "events.csv", index=False)
    box_grid(3).gdf.to_file(d / "zones.geojson", driver="GeoJSON")

    city = synthetic_city(60, 12, 3, seed=3)
    events = city.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"})
    events["uid"] = events["uid"].astype(str)
    # one tower per user and one event per user and hour: which tower of an hour, and which
    # visit of a user the one-visit totals keep, are keyed-hash choices that differ between
    # engines; with a single choice, the counts (and so the outputs) must be equal
    events["cell_id"] = events.groupby("uid")["cell_id"].transform("first")
    hour = pd.to_datetime(events["datetime"]).dt.floor("h")
    events = events[~pd.DataFrame({"u": events["uid"], "h": hour}).duplicated()]
    events.loc[events["uid"] == events["uid"].iloc[0], "uid"] = CANARY_UID
    events.to_csv(d / "phone.csv", index=False)
    city.towers.to_csv(d / "cells.csv", index=False)
    city.zones.to_file(d / "city.geojson", driver="GeoJSON")
    (d / "week").write_text(city.week_start.isoformat())
    return d


def release_args(name: str, d: Path, out: Path) -> list[str]:
    """The command line of one release on the inputs (bounds that truncate nothing)."""
    days = ["--start", "2024-01-01", "--end", "2024-01-04"]
    common = ["--budget", "50", "--test-mode", "--seed", "3", "--quiet"]
    grid = ["-t", str(d / "zones.geojson"), "-e", "1"]
    args = {
        "od": ["od", str(d / "trips.csv"), *grid, "-T", "100", "--bin", "day", *days,
               "-o", str(out)],
        "population": ["population", str(d / "events.csv"), *grid, *days, "-o", str(out)],
        "report": ["report", str(d / "trips.csv"), *grid, "-T", "100", *days,
                   "-o", str(out / "report.html")],
        "series-counts": ["series-counts", str(d / "events.csv"), *grid, *days, "--freq", "6h",
                          "--max-per-bin", "100", "--landmarks", "2024-01-01 06:00",
                          "-o", str(out)],
        "density": ["density", str(d / "phone.csv"), "--cells", str(d / "cells.csv"),
                    "--zones", str(d / "city.geojson"), "--epsilon", "0.5", "--max-visits",
                    "168", "--week", (d / "week").read_text(), "-o", str(out)],
    }[name]  # fmt: skip
    return [*args, *common]


def spark_args(cluster) -> list[str]:
    conf = cluster.client_conf() | UNCOMPRESSED
    return [
        "--engine", "spark", "--spark-master", cluster.url,
        *(a for k, v in conf.items() for a in ("--spark-conf", f"{k}={v}")),
    ]  # fmt: skip


def driver_env(tmp: Path) -> dict[str, str]:
    """The driver on the loopback; its JVM's temporary directory private to the test."""
    jtmp = tmp / "java-tmp"
    jtmp.mkdir(exist_ok=True)
    return {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={jtmp}",
        "TMPDIR": str(tmp / "spill"),
    }


def outputs(folder: Path) -> dict[str, object]:
    """The release's tables (Parquet) and the report's analyses (JSON), by file name."""
    got: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".parquet":
            got[path.name] = pd.read_parquet(path)
        elif path.suffix == ".json" and path.name != "metadata.json":
            doc = json.loads(path.read_text())  # without the run's own time and ledger ids
            got[path.name] = {k: v for k, v in doc.items() if k not in RUN_KEYS}
    return got


def assert_same_outputs(duck: Path, spark: Path) -> None:
    a, b = outputs(duck), outputs(spark)
    assert a and sorted(a) == sorted(b)
    for name, table in a.items():
        if isinstance(table, pd.DataFrame):
            pd.testing.assert_frame_equal(table, b[name], obj=name)  # type: ignore[arg-type]
        else:
            assert table == b[name], name


def files_under(root: Path) -> list[Path]:
    """The files under ``root``, by a walk that a directory removed meanwhile (a worker
    cleaning up an ended application) does not stop (``os.walk`` skips it)."""
    return [Path(top) / name for top, _, names in os.walk(root) for name in names]


def files_with(root: Path, needles: tuple[str, ...]) -> list[str]:
    """The files under ``root`` that contain one of ``needles`` (bytes, any encoding)."""
    found = []
    for path in files_under(root):
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # removed since the walk
            continue
        found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


def local_files(cluster) -> list[Path]:
    return [p for d in cluster.worker_dirs()[1::2] for p in files_under(d)]


def assert_no_records_left(cluster, timeout: float = 60.0) -> None:
    """After an application ended: its executors' local directories are removed (the workers
    do it when the master reports the application finished, within seconds), and no file of
    the cluster (executors' logs, daemons' logs) holds the canary."""
    deadline = time.monotonic() + timeout
    while local_files(cluster) and time.monotonic() < deadline:
        time.sleep(1)
    assert local_files(cluster) == []
    assert files_with(cluster.root, CANARIES) == []
    apps = list(cluster.root.glob("worker*/work/app-*/*/stderr"))
    assert apps, "no executor ran (no executor log in the workers' work directories)"


def run_cluster_cli(name: str, inputs: Path, cluster, tmp: Path) -> Path:
    out = tmp / "spark"
    (tmp / "spill").mkdir(exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "privmob", *release_args(name, inputs, out), *spark_args(cluster)],
        capture_output=True,
        text=True,
        env=driver_env(tmp),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # the driver's side: the run's private directory (Spark's local dir on the driver) is
    # removed, and the driver JVM left nothing of the records in its temporary directory
    assert files_under(tmp / "spill") == []
    assert files_with(tmp / "java-tmp", CANARIES) == []
    return out


def check_cli_release(name: str, inputs: Path, cluster, tmp: Path) -> None:
    spark_out = run_cluster_cli(name, inputs, cluster, tmp)
    assert_no_records_left(cluster)
    assert run_cli(release_args(name, inputs, tmp / "duckdb")) == 0
    assert_same_outputs(tmp / "duckdb", spark_out)


@pytest.mark.parametrize("name", ["od", "report"])
def test_cli_release_on_the_cluster(name, inputs, spark_cluster, tmp_path) -> None:
    check_cli_release(name, inputs, spark_cluster, tmp_path)


@pytest.mark.spark_cluster
@pytest.mark.parametrize("name", ["population", "series-counts", "density"])
def test_cli_more_releases_on_the_cluster(name, inputs, spark_cluster, tmp_path) -> None:
    check_cli_release(name, inputs, spark_cluster, tmp_path)


SESSION_SCRIPT = """
import json, os, sys, time
from pathlib import Path
import privmob as pm
from privmob.domain import Period

engine, master, conf, d, out, local_dirs, canaries, part = json.loads(sys.argv[1])
d, out = Path(d), Path(out)
opts = {"engine": engine, "seed": 3}
if engine == "spark":
    opts |= {"spark_master": master, "spark_conf": conf}
days = Period.parse("day", "2024-01-01", "2024-01-04")
whole = Period.parse("all", "2024-01-01", "2024-01-04")
found = {}

def files_below(root):  # a walk that a directory removed meanwhile does not stop
    return [Path(top) / name for top, _, names in os.walk(root) for name in names]

def files_in(dirs):
    return sum(len(files_below(root)) for root in dirs)

def holds_canary(path):
    try:
        return any(c.encode() in path.read_bytes() for c in canaries)
    except FileNotFoundError:  # removed since the walk
        return False

def files_with_canary():
    return sum(1 for root in local_dirs for p in files_below(root) if holds_canary(p))

def closed():  # the session closed: its application ended, the workers remove its files
    deadline = time.monotonic() + 60
    while files_in(local_dirs) and time.monotonic() < deadline:
        time.sleep(1)
    return files_in(local_dirs)

if part == "trips":
    with pm.Session(str(d / "trips.csv"), tessellation=str(d / "zones.geojson"), budget=50,
                    **opts) as s:
        s.od_matrix(epsilon=1, max_trips=100, period=days, output=out / "od")
        found["while_running"] = files_with_canary()
        s.mobility_report(epsilon=1, max_trips=100, period=whole,
                          output=out / "report" / "report.html")
        if engine == "spark":
            found["driver_local_dir"] = s._started_engine.spark.conf.get("spark.local.dir")
    found["after_close"] = closed()
else:
    with pm.Session(str(d / "events.csv"), tessellation=str(d / "zones.geojson"), budget=500,
                    group_size=20, **opts) as s:
        s.population(epsilon=1, period=whole, output=out / "population")
        s.zone_series(epsilon=1, period=whole, freq="6h", max_per_bin=100, landmarks=[1],
                      output=out / "series")
    with pm.Session(str(d / "phone.csv"), tessellation=str(d / "city.geojson"), budget=50,
                    cells=str(d / "cells.csv"), **opts) as s:
        s.density(epsilon=0.5, week=(d / "week").read_text(), max_visits=168,
                  output=out / "density")
    found["after_close"] = closed()
print(json.dumps(found))
"""


def run_session_script(part: str, inputs: Path, cluster, tmp: Path) -> dict[str, object]:
    """The releases of ``part`` through pm.Session, on DuckDB and on the cluster (one process
    each); what the Spark run saw of the executors' local directories."""
    conf = cluster.client_conf() | UNCOMPRESSED
    local_dirs = [str(p) for p in cluster.worker_dirs()[1::2]]
    (tmp / "spill").mkdir()
    found = {}
    for engine in ("duckdb", "spark"):
        arg = [engine, cluster.url, conf, str(inputs), str(tmp / engine), local_dirs,
               list(CANARIES), part]  # fmt: skip
        r = subprocess.run(
            [sys.executable, "-c", SESSION_SCRIPT, json.dumps(arg)],
            capture_output=True,
            text=True,
            env=driver_env(tmp),
            timeout=900,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        found[engine] = json.loads(r.stdout.strip().splitlines()[-1])
    assert found["spark"]["after_close"] == 0  # close() ended the application: removed
    assert files_under(tmp / "spill") == []  # the driver's run directory too
    assert_no_records_left(cluster)
    return found["spark"]


def test_session_od_and_report_on_the_cluster(inputs, spark_cluster, tmp_path) -> None:
    """pm.Session(engine="spark", spark_master=...): od and the report give DuckDB's outputs;
    the records reach the executors' local directories while the application runs (the
    check can see them), and closing the session removes them."""
    spark = run_session_script("trips", inputs, spark_cluster, tmp_path)
    assert spark["while_running"] > 0
    # the driver's Spark files are in the run's private directory (under $TMPDIR), not in
    # the JVM's temporary directory
    assert Path(str(spark["driver_local_dir"])).is_relative_to(tmp_path / "spill")
    for name in ("od", "report"):
        assert_same_outputs(tmp_path / "duckdb" / name, tmp_path / "spark" / name)


@pytest.mark.spark_cluster
def test_session_more_releases_on_the_cluster(inputs, spark_cluster, tmp_path) -> None:
    """population, a zone series and density through pm.Session: DuckDB's outputs."""
    run_session_script("events", inputs, spark_cluster, tmp_path)
    for name in ("population", "series", "density"):
        assert_same_outputs(tmp_path / "duckdb" / name, tmp_path / "spark" / name)


CHILD_CLUSTER = """
import sys
from pathlib import Path
from privmob.engine.spark_cluster import StandaloneCluster

cluster = StandaloneCluster(Path(sys.argv[1]), workers=1, cores=1, memory="512m").start()
print(" ".join(map(str, cluster.pids())), flush=True)
sys.stdin.read()  # until killed
"""


@pytest.mark.spark_cluster
def test_a_killed_starter_leaves_no_daemon(tmp_path) -> None:
    """The process that started the cluster is killed (SIGKILL: no clean-up of its own runs):
    the master and the worker end with it."""
    import signal

    from privmob.engine.spark_cluster import cluster_processes

    if sys.platform != "linux":
        pytest.skip("the daemons end with their starter on Linux (PR_SET_PDEATHSIG)")
    root = tmp_path / "cluster"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_CLUSTER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    pids = [int(p) for p in child.stdout.readline().split()]  # type: ignore[union-attr]
    assert len(pids) == 2 and cluster_processes(root, [])  # running, under root
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 60
    while cluster_processes(root, pids) and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster_processes(root, pids) == []
