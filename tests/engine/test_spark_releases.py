"""Engine equivalence for the releases beyond OD: the same exact (pre-noise) counts on DuckDB
and on Spark (local mode), for bounds that truncate nothing.

Each test loads one small dataset into both engines (the synthetic CDR-like events of
``synth_dir`` through the real loader, plus a hand-made frame with events outside the zones and
outside the period) and compares the dense exact counts cell by cell. The keyed hash that picks
which units a user keeps differs between engines, so only untruncated counts (and totals that
do not depend on the choice) must be identical. Needs Java: marked ``spark``; runs in CI.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.data import load_events
from privmob.data.sources import Loaded
from privmob.engine import DuckDBEngine
from privmob.releases.periods import StudyPeriod
from privmob.releases.population import exact_home_counts

pytestmark = [pytest.mark.spark, pytest.mark.slow]

K = 5  # zones of the hand-made frame


@pytest.fixture(scope="module")
def engines(spark_engine):
    duck = DuckDBEngine()
    yield {"duckdb": duck, "spark": spark_engine}
    duck.close()


@pytest.fixture(scope="module")
def synth_events_both(engines, synth_dir):
    """The synthetic events loaded (and validated) by each engine: name -> Loaded."""
    d, tess = synth_dir
    loaded = {
        name: load_events(
            str(d / "events.parquet"), engine=eng, tessellation=tess, cells=str(d / "cells.parquet")
        )
        for name, eng in engines.items()
    }
    return loaded, tess


def hand_made_frame(seed: int = 5) -> pd.DataFrame:
    """40 users x 12 events from 2023-12-31 to 2024-01-03, tiles -1 (outside) .. K-1."""
    rng = np.random.default_rng(seed)
    uid = np.repeat(np.arange(40), 12)
    seconds = rng.integers(-86_400, 3 * 86_400, uid.size)  # some before the period
    seconds[(uid >= 4) & (uid < 8)] = 86_400 + 12 * 3_600  # users 4..7: noon only (no home)
    tile = rng.integers(-1, K, uid.size).astype("int32")
    tile[uid < 4] = -1  # users 0..3: only outside the zones (home outside)
    return pd.DataFrame(
        {
            "uid": uid.astype("int64"),
            "time": pd.Timestamp("2024-01-01") + pd.to_timedelta(seconds, unit="s"),
            "tile": tile,
        }
    )


@pytest.fixture(scope="module")
def hand_made_both(engines):
    """The hand-made frame registered in each engine as canonical events: name -> Loaded."""
    frame = hand_made_frame()
    out = {}
    for name, eng in engines.items():
        eng.register("pm_hand_events", frame)
        out[name] = Loaded("pm_hand_events", "hand-made", "events", eng, ["uid", "time", "tile"])
    return out


def test_population_home_counts_identical(synth_events_both, hand_made_both) -> None:
    loaded, tess = synth_events_both
    duck, spark = (exact_home_counts(loaded[n], tess.k) for n in ("duckdb", "spark"))
    assert duck[: tess.k].sum() > 20  # most synthetic users have a home in a zone
    np.testing.assert_array_equal(duck, spark)

    period = StudyPeriod.parse("day", "2024-01-01", "2024-01-03")
    for night in ((20, 6), (1, 5)):
        duck, spark = (
            exact_home_counts(hand_made_both[n], K, night=night, period=period)
            for n in ("duckdb", "spark")
        )
        assert duck.sum() == 40 and duck[K] > 0 and duck[K + 1] > 0  # outside and unknown
        np.testing.assert_array_equal(duck, spark)
