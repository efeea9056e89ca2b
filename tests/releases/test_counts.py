"""The count template (``privmob.releases.counts``): the cells it counts are the records'
public dimensions, each user keeps at most the bound, and every cell of the declared domain is
released (``Session.counts``, ``privmob counts``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips

import privmob as pm
from privmob.errors import ConfigError

#: epsilon so large that the discrete Laplace noise (scale T / epsilon = 1e-9) is 0 with
#: probability 1 - 2e-(1e9): the released counts are the exact bounded counts
EXACT = 1e10


def _session(trips: pd.DataFrame) -> pm.Session:
    return pm.Session(trips, tessellation=box_grid(3), dataset="t", seed=5, budget=pm.PureDP(1e11))


def test_counts_by_origin_and_hour_are_the_bounded_counts() -> None:
    trips = random_trips(40, 9, seed=2, max_per_user=5)
    with _session(trips) as s:
        rel = s.counts(epsilon=EXACT, by=["origin", "hour"], max_records=5)
    table = rel.release.tables["counts"]
    assert list(table.columns) == ["origin", "hour", "count"]
    assert len(table) == 9 * 24  # the whole declared domain, empty cells included
    want = trips.groupby([trips["origin"], trips["start_time"].dt.hour]).size()
    got = table.set_index(["origin", "hour"])["count"]
    assert got[got != 0].sort_index().to_dict() == want.sort_index().to_dict()
    meta = rel.release.metadata()
    assert meta["kind"] == "counts" and meta["privacy"]["bounds"]["max_records_per_user"] == 5


def test_each_user_keeps_at_most_the_bound() -> None:
    trips = random_trips(10, 9, seed=3, max_per_user=2)
    heavy = trips.head(1).assign(uid=999)
    trips = pd.concat([trips, *[heavy.assign(tid=10_000 + i) for i in range(50)]])
    with _session(trips) as s:
        rel = s.counts(epsilon=EXACT, by=["weekday"], max_records=2)
    total = int(rel.release.tables["counts"]["count"].sum())
    assert total == len(trips[trips.uid != 999]) + 2  # the heavy user counts twice, not 50 times


def test_duration_bins_and_the_outliers_cell() -> None:
    trips = random_trips(20, 9, seed=4)
    trips["end_time"] = trips["start_time"] + pd.to_timedelta(np.arange(len(trips)) % 40, "min")
    with _session(trips) as s:
        rel = s.counts(epsilon=EXACT, by=["duration:0,10,20"], max_records=10)
    minutes = np.arange(len(trips)) % 40
    got = rel.release.tables["counts"]["count"].tolist()
    assert got == [int((minutes < 10).sum()), int(((minutes >= 10) & (minutes < 20)).sum())]
    assert int(rel.release.tables["outliers"]["count"].iloc[0]) == int((minutes >= 20).sum())


@pytest.mark.parametrize(
    ("by", "records", "message"),
    [
        (["tile"], "trips", "not a dimension of trips"),
        (["origin"], "events", "not a dimension of events"),
        (["speed"], "trips", "unknown count dimension"),
        (["duration:5,1"], "trips", "increasing edges"),
        ([], "trips", "at least one dimension"),
    ],
)
def test_a_dimension_that_does_not_fit_is_refused_before_reading(
    by: list[str], records: str, message: str
) -> None:
    with _session(random_trips(5, 9, seed=1)) as s, pytest.raises(ConfigError, match=message):
        s.plan_counts(epsilon=1, by=by, records=records)
