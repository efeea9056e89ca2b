"""Pre-sampling of events for the density release (SPEC 4.3 step 1), in the engine.

From events (uid, time, tile) where ``tile`` is the tower index (0..n-1; -1 = outside):
1. keep the events of the declared week [start, start + 7 days);
2. one visit per user per hour: among the distinct towers a user was seen at in an hour, one
   chosen uniformly by a keyed hash;
3. at most ``max_visits`` (l) of those hourly visits per user over the week, chosen uniformly by
   a keyed hash of (key, uid, hour).
After step 3 one user changes at most l (tower, hour) counts by 1, at most one per hour:
L1 sensitivity l, L2 sensitivity sqrt(l).

Outside the domain (SPEC 1, invariant 1): events outside the declared week, or at no known
tower (tile -1), are not dropped. They are bounded the same way -- one visit per user per
(absolute) hour, at most l such hourly visits per user, chosen by a keyed hash with its own
key -- and counted into ONE number (``DensityCounts.outside``, L1 sensitivity l).

Also counted, for the improved scaling of seed 004 5.4.1: one hourly visit per user (the first
in the keyed-hash order, so uniform; L1 sensitivity 1) per tower, and the number of hourly
visits over all users (L1 sensitivity 168: a user has at most one visit per hour).

The choice for one user depends only on the key and that user's own records. All of this is
exact and non-private; only noisy functions of it leave the release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from privmob.engine.base import Engine, dense_counts
from privmob.engine.buckets import counts_by_user_buckets
from privmob.engine.dialect import DUCKDB, Dialect
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError

HOURS_PER_WEEK = 168


@dataclass(frozen=True)
class DensityCounts:
    """Exact bounded counts over the public domain (towers x 168 hours)."""

    sampled: np.ndarray  # (towers, 168): visits kept after both caps (L1 sensitivity l)
    one_visit: np.ndarray  # (towers,): one uniform hourly visit per user (L1 sensitivity 1)
    total_visits: int  # hourly visits of all users (L1 sensitivity 168)
    max_visits: int
    outside: int = 0  # hourly visits outside the week or at no tower, <= l per user (L1: l)
    hourly: np.ndarray | None = None  # (towers, 168) hour-capped counts: EVALUATION ONLY


def _week_sql(week_start: datetime, dialect: Dialect) -> tuple[str, str]:
    """SQL over events (``time``, ``tile``) for the public week from ``week_start``: the whole
    hours of an event since the week's start, and whether it is in the domain (in the week, at
    a known tower)."""
    start = dialect.timestamp_literal(week_start.strftime("%Y-%m-%d %H:%M:%S"))
    end = dialect.timestamp_literal((week_start + timedelta(days=7)).strftime("%Y-%m-%d %H:%M:%S"))
    secs = f"({dialect.epoch_seconds('time')} - {dialect.epoch_seconds(start)})"
    return f"floor({secs} / 3600)", f"time >= {start} AND time < {end} AND tile >= 0"


def presample_sql(relation: str, week_start: datetime, key: int, dialect: Dialect = DUCKDB) -> str:
    """SQL of the hourly visits (uid, hour, tower) with their per-user rank ``rnk`` (1-based).

    Keeping ``rnk <= l`` is the uniform choice of at most l hourly visits per user.
    """
    hours, inside = _week_sql(week_start, dialect)
    week = (
        f"SELECT DISTINCT uid, CAST({hours} AS INT) AS hour, "
        f"CAST(tile AS INT) AS tower FROM {relation} "
        f"WHERE {inside}"
    )
    hourly = (
        f"SELECT uid, hour, tower FROM (SELECT w_.*, ROW_NUMBER() OVER (PARTITION BY uid, hour "
        f"ORDER BY {dialect.keyed_hash(key, 'uid', 'hour', 'tower')}, tower) AS _pick "
        f"FROM ({week}) AS w_) AS h_ WHERE _pick = 1"
    )
    return (
        f"SELECT uid, hour, tower, ROW_NUMBER() OVER (PARTITION BY uid "
        f"ORDER BY {dialect.keyed_hash(key + 1, 'uid', 'hour')}, hour) AS rnk "
        f"FROM ({hourly}) AS v_"
    )


def outside_sql(relation: str, week_start: datetime, key: int, dialect: Dialect = DUCKDB) -> str:
    """SQL of the hourly visits outside the domain (uid, hour) with their per-user rank ``rnk``.

    A visit is a (user, absolute hour since ``week_start``) with at least one event outside
    [week_start, week_start + 7 days) or at no known tower. Keeping ``rnk <= l`` bounds a
    user's contribution to l, like the visits inside the domain.
    """
    hours, inside = _week_sql(week_start, dialect)
    visits = (
        f"SELECT DISTINCT uid, CAST({hours} AS BIGINT) AS hour FROM {relation} WHERE NOT ({inside})"
    )
    return (
        f"SELECT uid, hour, ROW_NUMBER() OVER (PARTITION BY uid "
        f"ORDER BY {dialect.keyed_hash(key + 2, 'uid', 'hour')}, hour) AS rnk "
        f"FROM ({visits}) AS o_"
    )


def outside_count_sql(
    relation: str, week_start: datetime, max_visits: int, dialect: Dialect
) -> str:
    """SQL of the out-of-domain cell: the number of rows of :func:`outside_sql` with
    ``rnk <= max_visits``, computed without the ranking.

    A user with h hourly visits outside the domain keeps min(h, l) of them whichever l the
    keyed hash picks, and the cell is their sum: the same exact number as counting the kept
    rows, for any key, without a window over the (usually many) out-of-week events.
    """
    hours, inside = _week_sql(week_start, dialect)
    hour = f"CAST({hours} AS BIGINT)"
    # the distinct (uid, hour) rows of outside_sql, counted per user (a NULL hour, a NULL time
    # at an unknown tower, is one visit there as here); not count(DISTINCT hr) + a NULL flag,
    # which Spark plans by expanding every out-of-week event into two rows
    hours = (
        f"SELECT uid, count(*) AS h FROM (SELECT DISTINCT uid, {hour} AS hr FROM {relation} "
        f"WHERE NOT ({inside})) AS e_ GROUP BY uid"
    )
    return f"SELECT COALESCE(sum(least(h, {int(max_visits)})), 0) AS n FROM ({hours}) AS o_"


def density_counts(
    engine: Engine,
    relation: str,
    n_towers: int,
    week_start: datetime,
    max_visits: int,
    key: int,
    *,
    with_truth: bool = False,
) -> DensityCounts:
    """Run the pre-sampling in the engine and return dense counts over the public domain.

    ``relation``: events with uid, time (local TIMESTAMP), tile (= tower index, -1 outside).
    """
    if not 1 <= max_visits <= HOURS_PER_WEEK:
        raise ConfigError(f"--max-visits must be in 1..168, got {max_visits}")
    shape = (n_towers, HOURS_PER_WEEK)
    cells = n_towers * HOURS_PER_WEEK
    # every count as one engine query over one flat public index (the sampled (tower, hour)
    # cells, one visit per tower, the total, the outside cell, then with_truth's hour-capped
    # cells): the ranked visits are grouped once by (tower, hour) with a conditional count per
    # count, and each of the (at most towers x 168) groups becomes one row per count. No
    # table of visits is stored and read again (DuckDB used to; its peak at 10M events went
    # from 0.63 to 0.56 GB at the same time) and no visit is copied into several rows (Spark
    # used to, with ``stack``: the same time within the spread of single runs)
    ell = int(max_visits)
    visits = presample_sql(relation, week_start, key, engine.dialect)
    grouped = (
        f"SELECT tower, hour, count_if(rnk <= {ell}) AS kept, count_if(rnk = 1) AS first, "
        f"count(*) AS visits FROM ({visits}) AS v_ GROUP BY tower, hour"
    )
    # a tower or hour outside the domain becomes -1, which dense_counts refuses, never a cell
    # of the next count
    ok_tower = f"tower >= 0 AND tower < {n_towers}"
    in_domain = f"{ok_tower} AND hour >= 0 AND hour < {HOURS_PER_WEEK}"
    total_cell, outside_cell = cells + n_towers, cells + n_towers + 1
    per_count = [  # (cell, count) of a group, one per count
        (f"CASE WHEN {in_domain} THEN tower * {HOURS_PER_WEEK} + hour ELSE -1 END", "kept"),
        (f"CASE WHEN {ok_tower} THEN {cells} + tower ELSE -1 END", "first"),
        (str(total_cell), "visits"),
    ]
    if with_truth:  # evaluation only: every hourly visit, before the cap of l per user
        hourly_cell = f"{outside_cell + 1} + tower * {HOURS_PER_WEEK} + hour"
        per_count.append((f"CASE WHEN {in_domain} THEN {hourly_cell} ELSE -1 END", "visits"))
    cell = " ".join(f"WHEN {k} THEN {c}" for k, (c, _) in enumerate(per_count))
    count = " ".join(f"WHEN {k} THEN {n}" for k, (_, n) in enumerate(per_count))
    which = ", ".join(f"({k})" for k in range(len(per_count)))
    outside = outside_count_sql(relation, week_start, ell, engine.dialect)
    flat = dense_counts(
        engine,
        f"SELECT CAST(CASE k_.k {cell} END AS BIGINT) AS i0, "
        f"CAST(CASE k_.k {count} END AS BIGINT) AS n "
        f"FROM ({grouped}) AS g_ CROSS JOIN (VALUES {which}) AS k_(k) "
        f"UNION ALL SELECT CAST({outside_cell} AS BIGINT), CAST(n AS BIGINT) "
        f"FROM ({outside}) AS out_",
        (outside_cell + 1 + (cells if with_truth else 0),),
    )
    sampled = flat[:cells].reshape(shape).astype(np.float64)
    one = flat[cells:total_cell].astype(np.float64)
    total = int(flat[total_cell])
    outside_visits = int(flat[outside_cell])
    hourly = flat[outside_cell + 1 :].reshape(shape).astype(np.float64) if with_truth else None
    return DensityCounts(sampled, one, total, ell, outside=outside_visits, hourly=hourly)


def bucketed_density_counts(
    events: Loaded,
    n_towers: int,
    week_start: datetime,
    max_visits: int,
    key: int,
    *,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
) -> DensityCounts:
    """:func:`density_counts` of loaded events, out of core: with a memory limit on the engine
    (DuckDB ``--memory-limit``) the users are split into hash buckets
    (:mod:`privmob.engine.buckets`). Every count is a sum over users of a function of that
    user's own events (the same key in every bucket), so the summed bucket counts equal the
    single-pass counts."""
    shape = (n_towers, HOURS_PER_WEEK)

    def flat(part: Loaded) -> np.ndarray:
        c = density_counts(part.engine, part.view, n_towers, week_start, max_visits, key)
        return np.concatenate([c.sampled.ravel(), c.one_visit, [c.total_visits, c.outside]])

    total = counts_by_user_buckets(
        events, flat, "pre-sampling", buckets=buckets, step=step, columns=("uid", "time", "tile")
    )
    cells = n_towers * HOURS_PER_WEEK
    return DensityCounts(
        total[:cells].reshape(shape),
        total[cells : cells + n_towers],
        int(total[-2]),
        int(max_visits),
        outside=int(total[-1]),
    )
