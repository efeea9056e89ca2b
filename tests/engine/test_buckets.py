"""Out-of-core counting by user buckets (DuckDB): same counts as one pass, bounds kept."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers import box_grid, random_trips

from privmob.data import load_trips, load_trips_any
from privmob.engine import DuckDBEngine
from privmob.engine.buckets import parse_memory, plan_buckets, user_buckets
from privmob.errors import ConfigError
from privmob.privacy.costs import Unit
from privmob.privacy.samplers import Randomness
from privmob.releases.od import ODDomain, exact_counts, od_matrix
from privmob.releases.periods import StudyPeriod


@pytest.fixture(scope="module")
def events_files(tmp_path_factory):
    from privmob.data.synth import default_tessellation, synth_events

    d = tmp_path_factory.mktemp("ev")
    tess = default_tessellation(36)
    synth_events(
        d / "ev.parquet", d / "cells.parquet", n_users=80, days=3, tessellation=tess, seed=2
    )
    return d, tess


def od_counts(trips, k, max_trips, buckets, period=None):
    period = period or StudyPeriod.parse("day", "2024-01-01", "2024-01-04")
    return exact_counts(
        trips,
        domain=ODDomain(k, period.n_bins),
        period=period,
        unit=Unit.USER,
        max_trips=max_trips,
        buckets=buckets,
        rng=Randomness.for_tests(3),
    )


def test_buckets_partition_the_users(engine):
    df = random_trips(200, 9, seed=1)
    trips = load_trips(df, engine=engine, tessellation=box_grid(3))
    seen = []
    for part in user_buckets(trips, 7):
        seen.append(set(engine.fetch(f"SELECT DISTINCT uid FROM {part.view}")["uid"]))
    assert sum(len(s) for s in seen) == 200  # disjoint ...
    assert set().union(*seen) == set(range(200))  # ... and complete
    assert sum(1 for s in seen if s) >= 5  # and really split


def test_bucketed_events_counts_equal_one_pass(events_files):
    d, tess = events_files
    with DuckDBEngine() as eng:
        trips = load_trips_any(
            str(d / "ev.parquet"),
            engine=eng,
            tessellation=tess,
            shape="events",
            cells=str(d / "cells.parquet"),
        )
        one = od_counts(trips, tess.k, 10**6, buckets=1)
        many = od_counts(trips, tess.k, 10**6, buckets=6)
    assert one.sum() > 100
    np.testing.assert_array_equal(one, many)


def test_bucketed_truncation_keeps_the_bound(engine):
    df = random_trips(60, 9, seed=5, max_per_user=9)  # never within one tile
    expected = int(np.minimum(df.groupby("uid").size().to_numpy(), 2).sum())
    trips = load_trips(df, engine=engine, tessellation=box_grid(3))
    for b in (1, 4):
        assert od_counts(trips, 9, 2, buckets=b, period=StudyPeriod()).sum() == expected


def test_memory_limit_plans_buckets_and_release_reports_them(events_files, accountant):
    d, tess = events_files
    assert parse_memory("8GB") == 8 * 10**9 and parse_memory("512MiB") == 512 * 2**20
    with pytest.raises(ConfigError):
        parse_memory("lots")
    with DuckDBEngine(memory_limit="200MB") as eng:
        trips = load_trips_any(
            str(d / "ev.parquet"),
            engine=eng,
            tessellation=tess,
            shape="events",
            cells=str(d / "cells.parquet"),
        )
        assert plan_buckets(trips, None) == 1
        rows = int(eng.fetch(f"SELECT count(*) AS n FROM {trips.base.view}")["n"].iloc[0])
        assert plan_buckets(trips, rows * 200 * 2 // 3 + 10) == 3  # 200 B/row, half the limit
        steps: list[str] = []
        rel = od_matrix(
            trips,
            tessellation=tess,
            epsilon=1.0,
            accountant=accountant,
            max_trips=5,
            rng=1,
            buckets=3,
            step=steps.append,
        )
    assert sum("user bucket" in s for s in steps) == 3
    assert len(rel.tables["od"]) == tess.k * (tess.k - 1)
