"""The per-user bound counts rows, so duplicated or missing unit ids cannot lift a user above M
(a rank function that gives ties one rank, e.g. RANK or DENSE_RANK, would), in both of its
forms."""

import numpy as np
import pandas as pd
import pytest

from privmob.engine.dialect import DUCKDB
from privmob.prepare.bounding import bound_per_user


@pytest.mark.parametrize("wide", [False, True])
def test_duplicate_and_null_unit_ids_keep_at_most_m_rows(engine, wide):
    df = pd.DataFrame(
        {
            "uid": [1] * 10 + [2] * 6,
            "tid": [5] * 10 + [None] * 6,  # user 1 repeats one tid, user 2 has none
        }
    )
    engine.register("dup_", df)
    for key in range(5):
        sql = bound_per_user("dup_", max_units=3, key=key, dialect=DUCKDB, wide=wide)
        got = engine.fetch(f"SELECT uid, count(*) AS n FROM ({sql}) AS b GROUP BY uid")
        assert dict(zip(got.uid, got.n, strict=True)) == {1: 3, 2: 3}


def test_the_wide_form_keeps_the_same_units(engine):
    """``wide`` adds the unit ids as a second sort key (for speed on wide rows): with distinct
    unit ids the hash alone already orders them, so both forms keep the same trips, and each
    user keeps min(trips, M) of them."""
    rng = np.random.default_rng(5)
    trips = rng.integers(1, 30, size=300)
    df = pd.DataFrame(
        {
            "uid": np.repeat(np.arange(300), trips).astype(str),
            "tid": np.concatenate([rng.permutation(10_000)[:n] for n in trips]).astype(str),
            "payload": rng.random(int(trips.sum())),
        }
    )
    engine.register("trips_", df)
    for key in range(3):
        kept = []
        for wide in (False, True):
            sql = bound_per_user("trips_", max_units=5, key=key, dialect=DUCKDB, wide=wide)
            got = engine.fetch(f"SELECT uid, tid FROM ({sql}) AS b")
            kept.append(set(zip(got.uid, got.tid, strict=True)))
        assert kept[0] == kept[1]
        per_user = pd.Series([u for u, _ in kept[0]]).value_counts()
        expected = dict(zip(np.arange(300).astype(str), np.minimum(trips, 5), strict=True))
        assert per_user.to_dict() == expected
