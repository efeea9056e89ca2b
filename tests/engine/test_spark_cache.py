"""Spark reads a CSV input once: the parsed input (kept columns and parsed ``_p_`` ones) is
kept in Spark's cache, filled by the validation pass and read by every later query; it gives
the same canonical rows and fingerprint as the input read again (Parquet is read again, not
cached). The fingerprint's BIGINT parts sum to exactly the DECIMAL sum of the row hashes; what
the cache spills to disk goes to the private run directory (local mode) and is gone after the
engine closes and the process exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.crash import ROOT, child_env

from privmob.data import load_events, load_trips


def _rows(loaded) -> pd.DataFrame:
    df = loaded.engine.fetch(f"SELECT * FROM {loaded.view}")
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def _cached(eng) -> set[str]:
    return {str(t.name) for t in eng.spark.catalog.listTables() if "parsed_once" in t.name}


def test_the_cached_input_reads_as_the_input(spark_engine, synth_dir, tmp_path, monkeypatch):
    import privmob.data.sources as sources

    d, tess = synth_dir
    pd.read_parquet(d / "trips.parquet").to_csv(tmp_path / "trips.csv", index=False)
    pd.read_parquet(d / "events.parquet").to_csv(tmp_path / "events.csv", index=False)
    cells = d / "cells.parquet"

    def both(path, loader, **kw):
        before = _cached(spark_engine)
        once = loader(str(path), engine=spark_engine, tessellation=tess, **kw)
        after = _cached(spark_engine)
        assert after - before  # read from the cached parsed input
        with monkeypatch.context() as m:
            m.setattr(sources, "_parse_once", lambda *a: None)
            again = loader(str(path), engine=spark_engine, tessellation=tess, **kw)
        assert _cached(spark_engine) == after  # the parsed view, read again
        pd.testing.assert_frame_equal(_rows(once), _rows(again))
        assert once.fingerprint == again.fingerprint and once.rows == again.rows

    both(tmp_path / "trips.csv", load_trips)
    both(tmp_path / "events.csv", load_events, cells=cells)


def test_parquet_is_read_again_not_cached(spark_engine, synth_dir) -> None:
    d, tess = synth_dir
    before = _cached(spark_engine)
    load_trips(str(d / "trips.parquet"), engine=spark_engine, tessellation=tess)
    assert _cached(spark_engine) == before


CHILD = """
import json, sys
from pathlib import Path
from privmob.data import load_trips
from privmob.engine import open_engine
from privmob.engine.rundir import current_run_dir
from tests.helpers import box_grid

work = Path(sys.argv[1])
# a tiny storage memory: the cached input goes to disk (MEMORY_AND_DISK)
eng = open_engine("spark", spill_dir=work, spark_master="local[1]",
                  spark_conf=["spark.memory.fraction=0.001", "spark.sql.shuffle.partitions=2"])
local = eng.spark.sparkContext.getConf().get("spark.local.dir")
run = current_run_dir().path
trips = load_trips(str(work / "trips.csv"), engine=eng, tessellation=box_grid(4))
eng.fetch(f"SELECT count(*) AS n FROM {trips.view}")
blocks = lambda: [str(p) for p in Path(local).rglob("rdd_*")]
spilled = blocks()
eng.close()
print(json.dumps({"local": local, "run": str(run), "spilled": spilled, "after": blocks()}))
"""


def test_spilled_cache_is_private_and_gone_after_close(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Java not found: the Spark engine needs Java 17")
    from tests.helpers import random_trips

    random_trips(2000, 16, seed=3).to_csv(tmp_path / "trips.csv", index=False)
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=ROOT,
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    run = Path(out["run"])
    assert Path(out["local"]).is_relative_to(run) and run.is_relative_to(tmp_path)
    assert out["spilled"], "the cached input should have gone to disk"
    assert all(Path(p).is_relative_to(run) for p in out["spilled"])
    assert out["after"] == []  # unpersisted at close
    assert not run.exists()  # the run directory is removed at exit
