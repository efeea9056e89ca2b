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
