"""Pre-sampling of events for the density release (SPEC 4.3 step 1), in the engine.

From events (uid, time, tile) where ``tile`` is the tower index (0..n-1; -1 = outside):
1. keep the events of the declared week [start, start + 7 days);
2. one visit per user per hour: among the distinct towers a user was seen at in an hour, one
   chosen uniformly by a keyed hash;
3. at most ``max_visits`` (l) of those hourly visits per user over the week, chosen uniformly by
   a keyed hash of (key, uid, hour).
After step 3 one user changes at most l (tower, hour) counts by 1, at most one per hour:
L1 sensitivity l, L2 sensitivity sqrt(l).

Also counted, for the improved scaling of seed 004 5.4.1: one hourly visit per user (the first
in the keyed-hash order, so uniform; L1 sensitivity 1) per tower, and the number of hourly
visits over all users (L1 sensitivity 168: a user has at most one visit per hour).

The choice for one user depends only on the key and that user's own records. All of this is
exact and non-private; only noisy functions of it leave the release.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from privmob.errors import ConfigError
from privmob.privacy.samplers import Randomness

HOURS_PER_WEEK = 168


@dataclass(frozen=True)
class DensityCounts:
    """Exact bounded counts over the public domain (towers x 168 hours)."""

    sampled: np.ndarray  # (towers, 168): visits kept after both caps (L1 sensitivity l)
    one_visit: np.ndarray  # (towers,): one uniform hourly visit per user (L1 sensitivity 1)
    total_visits: int  # hourly visits of all users (L1 sensitivity 168)
    max_visits: int
    hourly: np.ndarray | None = None  # (towers, 168) hour-capped counts: EVALUATION ONLY


def sampling_key(rng: Randomness) -> str:
    """A fresh secret key per release; derived from the seed when seeded (tests only)."""
    if rng.for_publication:
        return secrets.token_hex(16)
    return f"seed-{rng.seed}"


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def presample_sql(table: str, week_start: datetime, max_visits: int, key: str) -> str:
    """SQL (DuckDB) of the hourly visits with their per-user rank (``rnk``, 1-based)."""
    start = week_start.strftime("%Y-%m-%d %H:%M:%S")
    end = (week_start + timedelta(days=7)).strftime("%Y-%m-%d %H:%M:%S")
    k = _sql_literal(key)
    return f"""
    WITH week AS (
        SELECT DISTINCT CAST(uid AS VARCHAR) AS uid,
               CAST(floor(epoch(CAST(time AS TIMESTAMP) - TIMESTAMP '{start}') / 3600)
                    AS INTEGER) AS hour,
               CAST(tile AS INTEGER) AS tower
        FROM {table}
        WHERE time >= TIMESTAMP '{start}' AND time < TIMESTAMP '{end}' AND tile >= 0
    ),
    hourly AS (
        SELECT uid, hour, tower FROM (
            SELECT *, row_number() OVER (
                PARTITION BY uid, hour
                ORDER BY hash(concat({k}, '|h|', uid, '|', hour, '|', tower)), tower
            ) AS pick FROM week
        ) WHERE pick = 1
    )
    SELECT uid, hour, tower, row_number() OVER (
        PARTITION BY uid ORDER BY hash(concat({k}, '|w|', uid, '|', hour)), hour
    ) AS rnk
    FROM hourly
    """


def density_counts(
    con: Any,
    table: str,
    n_towers: int,
    week_start: datetime,
    max_visits: int,
    key: str,
    *,
    with_truth: bool = False,
) -> DensityCounts:
    """Run the pre-sampling in DuckDB (``con``: a duckdb connection) and return dense counts."""
    if max_visits < 1 or max_visits > HOURS_PER_WEEK:
        raise ConfigError(f"--max-visits must be in 1..168, got {max_visits}")
    base = presample_sql(table, week_start, max_visits, key)
    q = con.execute
    q(f"CREATE OR REPLACE TEMP TABLE _density_visits AS {base}")
    sampled = np.zeros((n_towers, HOURS_PER_WEEK), dtype=np.float64)
    rows = q(
        f"SELECT tower, hour, count(*) FROM _density_visits WHERE rnk <= {int(max_visits)} "
        "GROUP BY tower, hour"
    ).fetchnumpy()
    _fill(sampled, rows, n_towers)
    one = np.zeros(n_towers, dtype=np.float64)
    rows = q("SELECT tower, count(*) AS n FROM _density_visits WHERE rnk = 1 GROUP BY tower")
    r1 = rows.fetchnumpy()
    ok = (r1["tower"] >= 0) & (r1["tower"] < n_towers)
    np.add.at(one, r1["tower"][ok].astype(np.int64), r1["n"][ok].astype(np.float64))
    total = int(q("SELECT count(*) FROM _density_visits").fetchone()[0])
    hourly = None
    if with_truth:
        hourly = np.zeros((n_towers, HOURS_PER_WEEK), dtype=np.float64)
        rows = q("SELECT tower, hour, count(*) FROM _density_visits GROUP BY tower, hour")
        _fill(hourly, rows.fetchnumpy(), n_towers)
    q("DROP TABLE _density_visits")
    return DensityCounts(sampled, one, total, int(max_visits), hourly)


def _fill(out: np.ndarray, rows: dict[str, np.ndarray], n_towers: int) -> None:
    names = list(rows)
    t = rows[names[0]].astype(np.int64)
    h = rows[names[1]].astype(np.int64)
    c = rows[names[2]].astype(np.float64)
    ok = (t >= 0) & (t < n_towers) & (h >= 0) & (h < HOURS_PER_WEEK)
    np.add.at(out, (t[ok], h[ok]), c[ok])
