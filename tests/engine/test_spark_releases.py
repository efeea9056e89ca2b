"""Engine equivalence for the releases beyond OD: the same exact (pre-noise) counts on DuckDB
and on Spark (local mode), for bounds that truncate nothing.

Each test loads one small dataset into both engines (the synthetic CDR-like events of
``synth_dir`` through the real loader, plus a hand-made frame with events outside the zones and
outside the period) and compares the dense exact counts cell by cell. The keyed hash that picks
which units a user keeps differs between engines, so only untruncated counts (and totals that
do not depend on the choice) must be identical. Needs Java: marked ``spark``; runs in CI.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, events_around_a_week

from privmob.data import load_events
from privmob.domain import Period, time_grid
from privmob.engine import DuckDBEngine
from privmob.engine.relation import Loaded
from privmob.prepare.presample import HOURS_PER_WEEK, density_counts
from privmob.releases.landmark_counts import bounded_zone_counts
from privmob.releases.population import exact_home_counts
from privmob.releases.report import ReportConfig, Tiles
from privmob.releases.report import exact_counts as report_exact_counts

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

    period = Period.parse("day", "2024-01-01", "2024-01-03")
    for night in ((20, 6), (1, 5)):
        duck, spark = (
            exact_home_counts(hand_made_both[n], K, night=night, period=period)
            for n in ("duckdb", "spark")
        )
        assert duck.sum() == 40 and duck[K] > 0 and duck[K + 1] > 0  # outside and unknown
        np.testing.assert_array_equal(duck, spark)


def test_landmark_bounded_zone_counts_identical(synth_events_both, hand_made_both) -> None:
    loaded, tess = synth_events_both
    cases = [
        (loaded, tess.k, time_grid("2024-01-01", "2024-01-04", "1h")),
        (hand_made_both, K, time_grid("2024-01-01", "2024-01-03", "3h")),
    ]
    for events, tiles, grid in cases:
        (duck, duck_out), (spark, spark_out) = (
            bounded_zone_counts(events[n], tiles=tiles, grid=grid, max_per_bin=10**6)
            for n in ("duckdb", "spark")
        )
        assert duck.shape == (tiles + 1, len(grid)) and duck.sum() > 100
        np.testing.assert_array_equal(duck, spark)
        assert duck_out == spark_out
    assert duck[tiles].sum() > 0 and duck_out > 0  # hand-made: outside the zones and period
    # one event per user and bin: which event is kept differs, the count per bin does not
    (duck, duck_out), (spark, spark_out) = (
        bounded_zone_counts(hand_made_both[n], tiles=K, grid=grid, max_per_bin=1)
        for n in ("duckdb", "spark")
    )
    frame = hand_made_frame()
    in_period = (frame["time"] >= grid[0]) & (frame["time"] < grid[-1] + (grid[1] - grid[0]))
    per_bin = frame[in_period].groupby(frame["time"].dt.floor("3h"))["uid"].nunique()
    np.testing.assert_array_equal(duck.sum(axis=0), per_bin.reindex(grid, fill_value=0))
    np.testing.assert_array_equal(duck.sum(axis=0), spark.sum(axis=0))
    assert duck_out == spark_out == frame[~in_period]["uid"].nunique()


def test_density_presampling_counts_identical(engines, synth_events_both) -> None:
    """Pre-sampling keeps one tower per user-hour (chosen by the keyed hash, which differs
    between engines) and at most l visits per user. With l = 168 nothing is truncated: the
    visit counts per hour, the totals and the outside cell are identical; per tower and hour
    they are identical when every user-hour has one tower (the hand-made frame below)."""
    loaded, tess = synth_events_both
    frame = hand_made_frame()
    hour = frame["time"].dt.floor("h")
    frame["tile"] = frame.groupby(["uid", hour])["tile"].transform("first")  # one per hour
    for eng in engines.values():
        eng.register("pm_density_events", frame)
    cases = [
        ({n: loaded[n].view for n in engines}, tess.k, False),
        ({n: "pm_density_events" for n in engines}, K, True),
    ]
    week = datetime(2024, 1, 1)
    for relation, towers, one_tower_per_hour in cases:
        duck, spark = (
            density_counts(
                engines[n], relation[n], towers, week, HOURS_PER_WEEK, 11, with_truth=True
            )
            for n in ("duckdb", "spark")
        )
        assert duck.total_visits > 100 and duck.hourly is not None and spark.hourly is not None
        np.testing.assert_array_equal(duck.sampled, duck.hourly)  # l = 168 truncates nothing
        np.testing.assert_array_equal(duck.sampled.sum(axis=0), spark.sampled.sum(axis=0))
        np.testing.assert_array_equal(duck.hourly.sum(axis=0), spark.hourly.sum(axis=0))
        assert (duck.total_visits, duck.outside) == (spark.total_visits, spark.outside)
        # one uniformly chosen visit per user: the tower depends on the hash, the total does not
        assert duck.one_visit.sum() == spark.one_visit.sum()
        if one_tower_per_hour:
            np.testing.assert_array_equal(duck.sampled, spark.sampled)
            np.testing.assert_array_equal(duck.hourly, spark.hourly)
    assert duck.outside > 0  # hand-made: visits before the week and outside the zones
    # l = 5 truncates: which visits are kept differs, how many each user keeps does not
    l5 = [
        density_counts(engines[n], "pm_density_events", K, week, 5, 11) for n in ("duckdb", "spark")
    ]
    assert l5[0].sampled.sum() == l5[1].sampled.sum() < duck.sampled.sum()
    assert l5[0].outside == l5[1].outside < duck.outside


def test_density_counts_refuse_a_tower_outside_the_domain(engines) -> None:
    # the four pre-sampling counts share one flat index: a tower beyond n_towers must be an
    # error, not a count in the next block (one visit per tower, the totals)
    # one visit at tower 2 in the week's first hour: with 2 towers its flat index (2 * 168)
    # is the first cell of the next block, so only the domain check can catch it
    frame = pd.DataFrame(
        {"uid": ["a", "b"], "time": pd.to_datetime(["2024-01-01 00:30", "2024-01-01 01:30"]),
         "tile": [2, 0]}
    )  # fmt: skip
    for eng in engines.values():
        eng.register("pm_density_narrow", frame)
        with pytest.raises(AssertionError, match="outside the public domain"):
            density_counts(eng, "pm_density_narrow", 2, datetime(2024, 1, 1), 10, 11)


def report_points(n_users: int, seed: int) -> pd.DataFrame:
    """Canonical trip points (uid, tid, time, lat, lng, tile) on a 3 x 3 grid of 0.01 degree
    tiles at (13.0, 52.0): 1..8 trips per user of 2 or 3 points, some ends outside the grid,
    some trips before the declared period (December 2020), two points with missing values."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for t in range(int(rng.integers(1, 9))):
            start = pd.Timestamp("2020-11-28") + pd.Timedelta(seconds=int(rng.integers(0, 3e6)))
            dur = pd.Timedelta(seconds=int(rng.integers(60, 12_000)))
            for j in range(int(rng.integers(2, 4))):
                lat, lng = rng.uniform(51.999, 52.031), rng.uniform(12.999, 13.031)
                rows.append((f"u{u}", f"u{u}-{t}", start + j * dur, lat, lng))
    rows += [("u0", "u0-0", pd.NaT, np.nan, np.nan), ("u1", "u1-0", None, 52.01, np.nan)]
    frame = pd.DataFrame(rows, columns=["uid", "tid", "time", "lat", "lng"])
    frame["tile"] = box_grid(3).assign(frame["lng"].to_numpy(), frame["lat"].to_numpy())
    return frame


def test_report_exact_counts_identical(engines) -> None:
    grid = box_grid(3)
    tiles = Tiles.from_tessellation(grid)
    frame = report_points(30, seed=8)
    cfg = ReportConfig.build(epsilon=1, max_trips=8, period=("2020-12-01", "2021-01-01"))
    per_engine = []
    for name in ("duckdb", "spark"):
        engines[name].register("pm_report_points", frame)
        per_engine.append(report_exact_counts(engines[name], "pm_report_points", cfg, tiles, 3))
    duck, spark = per_engine
    assert duck.keys() == spark.keys() and len(duck) > 10
    assert duck["od_flows"].sum() > 50  # the trips really land in the domain
    assert duck["missing_values"].sum() > 0
    for name in duck:
        np.testing.assert_array_equal(duck[name], spark[name], err_msg=name)


def test_report_count_vectors_fused_per_source_equal_separate_queries(engines) -> None:
    # on Spark the report's terms that read one relation share one scan (stack + GROUP BY):
    # each vector must equal its own query's counts, on both engines, terms with conditions,
    # several terms in one vector and two vectors over one source included
    from privmob.engine import dense_counts
    from privmob.releases.counts import CountTerm as Count
    from privmob.releases.counts import count_vectors

    frame = pd.DataFrame({"a": [0, 1, 1, 2, 2, 2, 5], "b": [1, 0, 1, 1, 0, 0, 1]})
    terms = {
        "by_a": ([Count("pm_fused_t", "CASE WHEN a < 3 THEN a ELSE 3 END")], 4),
        "a_where_b": ([Count("pm_fused_t", "a", "b = 1")], 6),
        "two_terms": ([Count("pm_fused_t", "0", "a = 2"), Count("pm_fused_t", "1", "b = 0")], 2),
        "other_source": ([Count("(SELECT DISTINCT a FROM pm_fused_t) s", "0")], 1),
    }
    for eng in engines.values():
        eng.register("pm_fused_t", frame)
        got = count_vectors(eng, terms)
        for name, (ts, size) in terms.items():
            want = sum(dense_counts(eng, t.sql(), (size,)) for t in ts)
            np.testing.assert_array_equal(got[name], want, err_msg=f"{eng.name} {name}")
        assert got["two_terms"].tolist() == [3, 3] and got["other_source"].tolist() == [4]
        assert got["a_where_b"].tolist() == [1, 1, 1, 0, 0, 1]


def test_report_count_vectors_refuse_a_null_cell(engines) -> None:
    # a term whose cell is NULL on a counted row is an internal error on both engines (the
    # fused Spark form must not drop such rows as if the term's condition had failed)
    from privmob.releases.counts import CountTerm as Count
    from privmob.releases.counts import count_vectors

    frame = pd.DataFrame({"a": [0.0, None, 1.0]})
    terms = {"a": ([Count("pm_null_t", "CAST(a AS BIGINT)")], 2)}
    for eng in engines.values():
        eng.register("pm_null_t", frame)
        with pytest.raises(AssertionError, match="outside the public domain"):
            count_vectors(eng, terms)


def test_density_out_of_domain_cell_equals_the_ranked_selection(engines) -> None:
    """The out-of-domain cell (sum over users of min(h, l) distinct hours outside the week or
    at no known tower, a NULL time being one such hour) equals the count of the ranked rows
    kept by outside_sql, on Spark as on DuckDB, for several l."""
    from privmob.prepare.presample import outside_count_sql, outside_sql

    df = events_around_a_week(5)
    week = datetime(2024, 1, 1)
    for eng in engines.values():
        eng.register("pm_outside_events", df)
    for ell in (1, 3, 30, 168):
        found = []
        for eng in engines.values():
            fast = eng.fetch(outside_count_sql("pm_outside_events", week, ell, eng.dialect))
            ranked = outside_sql("pm_outside_events", week, 7, eng.dialect)
            slow = eng.fetch(f"SELECT count(*) AS n FROM ({ranked}) AS q_ WHERE rnk <= {ell}")
            assert int(fast["n"].iloc[0]) == int(slow["n"].iloc[0])
            found.append(int(fast["n"].iloc[0]))
        assert found[0] == found[1] > 0


def test_density_counts_equal_their_definition_on_the_ranked_visits(
    engines, synth_events_both
) -> None:
    """The counts (grouped once by tower and hour, one row per count and group) equal, on each
    engine, the same counts taken one by one from that engine's ranked visits
    (:func:`presample_sql`): sampled = visits with rnk <= l per (tower, hour), one visit = rnk
    = 1 per tower, the total = all visits, the hour-capped truth = all visits per (tower,
    hour), and the out-of-domain cell = min(h, l) summed over users."""
    from privmob.prepare.presample import outside_sql, presample_sql

    loaded, tess = synth_events_both
    week = datetime(2024, 1, 2)  # the first day's events are outside the week
    for name, eng in engines.items():
        view = loaded[name].view
        visits = eng.fetch(
            f"SELECT tower, hour, rnk FROM ({presample_sql(view, week, 11, eng.dialect)}) AS v_"
        )
        out = eng.fetch(f"SELECT uid, rnk FROM ({outside_sql(view, week, 11, eng.dialect)}) AS o_")
        for ell in (1, 5, HOURS_PER_WEEK):
            got = density_counts(eng, view, tess.k, week, ell, 11, with_truth=ell == 5)
            want = np.zeros((tess.k, HOURS_PER_WEEK))
            kept = visits[visits.rnk <= ell]
            np.add.at(want, (kept.tower.to_numpy(), kept.hour.to_numpy()), 1)
            np.testing.assert_array_equal(got.sampled, want, err_msg=name)
            first = np.bincount(visits.tower[visits.rnk == 1], minlength=tess.k)
            np.testing.assert_array_equal(got.one_visit, first, err_msg=name)
            assert got.total_visits == len(visits), name
            assert got.outside == int((out.rnk <= ell).sum()) > 0, name
            if ell == 5:
                hourly = np.zeros((tess.k, HOURS_PER_WEEK))
                np.add.at(hourly, (visits.tower.to_numpy(), visits.hour.to_numpy()), 1)
                np.testing.assert_array_equal(got.hourly, hourly, err_msg=name)
            else:
                assert got.hourly is None
            assert got.sampled.sum() < len(visits) or ell == HOURS_PER_WEEK
