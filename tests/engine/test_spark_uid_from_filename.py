"""Per-user files whose name is the user id (``--uid-from-filename``), without header row, read
the same on Spark as on DuckDB: the same users, the same events. Needs Java: marked ``spark``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_events
from privmob.data.reading import CsvFiles
from privmob.engine import DuckDBEngine

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def per_user_files(folder: Path) -> dict[str, int]:
    """Three users' headerless files (``lat lng flag unix_time``), one gzipped; rows per user."""
    rng = np.random.default_rng(2)
    rows = {}
    for i, name in enumerate(["new_abc.txt", "new_de.txt", "new_fgh.txt.gz"]):
        n = 20 + 7 * i
        df = pd.DataFrame(
            {
                "lat": 52 + rng.uniform(0.001, 0.029, n),
                "lng": 13 + rng.uniform(0.001, 0.029, n),
                "flag": rng.integers(0, 2, n),
                "t": 1_704_100_000 + rng.integers(0, 86_400, n),
            }
        )
        df.to_csv(folder / name, sep=" ", header=False, index=False)
        rows[name.split(".")[0]] = n
    (folder / "LICENSE.txt").write_text("MIT\n")
    return rows


def test_uid_from_filename_on_both_engines(spark_engine, tmp_path: Path) -> None:
    rows = per_user_files(tmp_path)
    source = CsvFiles(tmp_path, " ", False, ("lat", "lng", "flag", "datetime"), True)
    tess = box_grid(3)
    counts = {}
    with pytest.warns(Warning, match="LICENSE.txt"):
        for name, eng in (("duckdb", DuckDBEngine()), ("spark", spark_engine)):
            loaded = load_events(source, engine=eng, tessellation=tess)
            df = eng.fetch(f"SELECT uid, COUNT(*) AS n FROM {loaded.view} GROUP BY uid")
            counts[name] = dict(zip(df["uid"], df["n"].astype(int), strict=True))
    assert counts["duckdb"] == counts["spark"] == rows
