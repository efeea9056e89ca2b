"""The report's complete benchmark floor (``report-complete`` in benchmarks/suite.py) is the
report's own relational work written by hand: on the suite's synthetic input, its counts are
the report's exact counts. A floor that skipped part of the work (the destinations among the
trip ends, the incomplete trips, a user) would make privmob's ratio to it look worse than it
is; one that counted more, better. Either way this test fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture()
def suite(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import suite as module

    return module


def test_the_complete_report_floor_counts_what_the_report_counts(suite, tmp_path):
    from privmob.data.sources import load_trip_points
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import DuckDBEngine
    from privmob.releases.report import ReportConfig, Tiles
    from privmob.releases.report.build import exact_counts

    source, _, tess_path = suite.data_for("report-complete", 4000, tmp_path, "grid", "csv")
    # the suite's users all have 10 two-point trips; here they keep 1-10 of them (at most M,
    # so the two sides' different keys keep the same trips) and some trips lose a point
    rows = pd.read_csv(source, dtype={"uid": str, "tid": str, "datetime": str})
    rng = np.random.default_rng(3)
    trip = rows.groupby(["uid", "tid"], sort=False).ngroup()
    kept = rng.integers(1, suite.T + 1, size=rows["uid"].nunique())
    rank = rows.groupby("uid", sort=False)["tid"].transform(
        lambda t: t.astype(int).rank(method="dense")
    )
    user = rows.groupby("uid", sort=False).ngroup()
    first_point = ~rows.duplicated(["uid", "tid"])
    one_point = rng.random(trip.max() + 1) < 0.15
    rows = rows[(rank <= kept[user]) & (first_point | ~one_point[trip])]
    path = tmp_path / "varied.csv"
    rows.to_csv(path, index=False)
    tess = load_tessellation(str(tess_path))
    tiles = Tiles.from_tessellation(tess)
    k = tiles.k
    engine = DuckDBEngine()
    points = load_trip_points(str(path), engine=engine, tessellation=tess)
    # the floor counts trips within one tile too: the report's same-tile option "include"
    # (its default leaves them out, as od does; a filter in the same query)
    cfg = ReportConfig.build(
        epsilon=1.0, max_trips=suite.T, period=(suite.START, suite.END), same_tile="include"
    )
    exact = exact_counts(engine, points.view, cfg, tiles, key=7)
    engine.close()

    bare = DuckDBEngine()
    sql = suite.FLOORS["report-complete"](bare, str(path), "", str(tess_path))
    floor = bare.fetch(f"SELECT q, a, b, n FROM ({sql}) AS g_")
    bare.close()

    def vector(q: int, size: int, index) -> np.ndarray:
        out = np.zeros(size, dtype=np.int64)
        for a, b, n in floor.loc[floor.q == q, ["a", "b", "n"]].itertuples(index=False):
            out[index(int(a), int(b))] += int(n)
        return out

    def total(q: int) -> int:
        return int(floor.loc[floor.q == q, "n"].sum())

    assert total(0) == int(exact["users"][0]) > 0
    assert total(1) == int(exact["trip_kinds"].sum()) > 0
    assert total(3) == int(exact["trips_over_time"].sum())
    assert total(12) == int(exact["time_between_trips"].sum()) > 0
    for q, name in ((13, "radius_of_gyration"), (14, "user_tile_count"), (15, "mobility_entropy")):
        assert total(q) == int(exact[name].sum())
    outside = lambda t: t < 0 or t >= k  # noqa: E731
    visits = vector(6, k + 1, lambda a, _: k if outside(a) else a)
    np.testing.assert_array_equal(visits, exact["visits_per_tile"])
    flows = vector(8, k * k + 1, lambda a, b: k * k if outside(a) or outside(b) else a * k + b)
    np.testing.assert_array_equal(flows, exact["od_flows"])
    kinds = vector(1, 2, lambda a, _: a)  # complete, incomplete
    np.testing.assert_array_equal(kinds, exact["trip_kinds"])
    assert kinds.min() > 0
    weekdays = vector(4, 7, lambda a, _: a)
    np.testing.assert_array_equal(weekdays, exact["trips_per_weekday"])
