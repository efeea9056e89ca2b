"""The mobility report out of core: counts summed over user-hash buckets equal one pass."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privmob.data.grids import square_grid
from privmob.data.sources import load_trip_points
from privmob.engine import DuckDBEngine
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, Tiles, mobility_report
from privmob.releases.report.build import bucketed_exact_counts


def points(n_users: int, seed: int) -> pd.DataFrame:
    """Users with 1-25 trips of 2-3 points, some outside the grid and the period."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for t in range(int(rng.integers(1, 26))):
            start = pd.Timestamp("2024-01-01") + pd.Timedelta(
                minutes=int(rng.integers(-900, 44000))
            )
            for j in range(int(rng.integers(2, 4))):
                ts = start + pd.Timedelta(minutes=17 * j)
                rows.append((u, t, ts, rng.uniform(40.58, 40.92), rng.uniform(-74.06, -73.72)))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def test_bucket_sums_equal_single_pass(tmp_path) -> None:
    tess = square_grid((-74.05, 40.6, -73.75, 40.9), 4000)
    tiles = Tiles.from_tessellation(tess)
    df = points(120, seed=5)
    for unit in ("user", "trip"):
        cfg = ReportConfig.build(
            epsilon=1, max_trips=6, period=("2024-01-01", "2024-01-29"), unit=unit
        )
        with DuckDBEngine() as eng:
            loaded = load_trip_points(df, engine=eng, tessellation=tess)
            one = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=1)
            four = bucketed_exact_counts(loaded, cfg, tiles, key=77, n_buckets=4)
        assert one.keys() == four.keys()
        for name in one:
            assert np.array_equal(one[name], four[name]), (unit, name)
        # the bounding bites (users above M) and per-user analyses are non-trivial
        assert one["trips_per_user"].sum() > 100 and one["time_between_trips"].sum() > 100

    cfg = ReportConfig.build(epsilon=1, max_trips=6, period=("2024-01-01", "2024-01-29"))
    released = []
    for b in (1, 3):
        with DuckDBEngine() as eng:
            loaded = load_trip_points(df, engine=eng, tessellation=tess)
            acc = Accountant(Ledger(tmp_path / f"l{b}.sqlite"), "d", budget=10)
            rel = mobility_report(eng, loaded, tiles, cfg, acc, rng=9, buckets=b)
            released.append(rel.extra["analyses"])
    assert released[0] == released[1]  # same seed, same exact counts: same release


def test_report_plans_buckets_for_its_heavier_rows() -> None:
    from privmob.releases.report.build import REPORT_MEMORY_FACTOR, report_memory

    assert report_memory(None) is None
    assert report_memory("8GB") == int(8e9 / REPORT_MEMORY_FACTOR)
    assert report_memory(10**9) == int(1e9 / REPORT_MEMORY_FACTOR)
