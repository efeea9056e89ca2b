"""The per-user bound counts rows, so duplicated or missing unit ids cannot lift a user above M
(a rank function that gives ties one rank, e.g. RANK or DENSE_RANK, would)."""

import pandas as pd

from privmob.engine.dialect import DUCKDB
from privmob.prepare.bounding import bound_per_user


def test_duplicate_and_null_unit_ids_keep_at_most_m_rows(engine):
    df = pd.DataFrame(
        {
            "uid": [1] * 10 + [2] * 6,
            "tid": [5] * 10 + [None] * 6,  # user 1 repeats one tid, user 2 has none
        }
    )
    engine.register("dup_", df)
    for key in range(5):
        sql = bound_per_user("dup_", max_units=3, key=key, dialect=DUCKDB)
        got = engine.fetch(f"SELECT uid, count(*) AS n FROM ({sql}) AS b GROUP BY uid")
        assert dict(zip(got.uid, got.n, strict=True)) == {1: 3, 2: 3}


def test_ranking_only_the_users_above_the_bound_keeps_the_same_rows(engine):
    """rank_above_bound_only keeps exactly the rows of the ranked form: users below, at and
    above M, the rows without a user, per-partition bounds. (Units are unique per user here, as
    the report's trips are: among tied units either form keeps an arbitrary one.)"""
    import numpy as np

    rng = np.random.default_rng(5)
    trips = rng.integers(1, 25, 300)  # trips per user: below, at and above every M below
    uid = np.repeat(np.arange(300), trips).astype(object)
    tid = np.concatenate([rng.permutation(40)[:t] for t in trips]).astype(object)
    uid[:30] = None  # rows without a user form one group in both forms
    n = len(uid)
    df = pd.DataFrame({"uid": uid, "tid": tid, "day": rng.integers(0, 3, n), "v": rng.random(n)})
    engine.register("mixed_", df)
    cols = "uid, tid, day, v"
    for m, partition in ((1, ()), (3, ()), (8, ()), (40, ()), (2, ("day",))):
        ranked = bound_per_user("mixed_", max_units=m, key=7, dialect=DUCKDB, partition=partition)
        fast = bound_per_user(
            "mixed_", max_units=m, key=7, dialect=DUCKDB, partition=partition,
            rank_above_bound_only=True,
        )  # fmt: skip
        differ = engine.fetch(
            f"SELECT count(*) AS n FROM ((SELECT {cols} FROM ({ranked}) a EXCEPT ALL "
            f"SELECT {cols} FROM ({fast}) b) UNION ALL (SELECT {cols} FROM ({fast}) c "
            f"EXCEPT ALL SELECT {cols} FROM ({ranked}) d)) AS x"
        )
        kept = engine.fetch(f"SELECT count(*) AS n FROM ({fast}) AS f")
        assert int(differ.n[0]) == 0 and 0 < int(kept.n[0]) <= n
