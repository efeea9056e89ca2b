"""Unique trips per period (SPEC section 2; seed 002): a user contributes each (origin,
destination) pair at most once per period (e.g. per week).

This is a per-user transformation (it reads only that user's trips), so a contribution bound
applied afterwards still bounds what one user can change. SQL that DuckDB and Spark accept.
"""

from __future__ import annotations

from privmob.domain import Period
from privmob.engine.relation import Loaded, new_name


def unique_trips_sql(trips: str, period_bin: str) -> str:
    """SQL: canonical trips keeping the first trip of each (uid, period, origin, destination).

    ``period_bin`` is an SQL expression over ``start_time`` giving the period index.
    """
    return (
        "SELECT uid, tid, start_time, end_time, origin, destination FROM ("
        "SELECT t_.*, ROW_NUMBER() OVER (PARTITION BY uid, upd_, origin, destination "
        "ORDER BY start_time, tid) AS uniq_rank_ FROM ("
        f"SELECT uid, tid, start_time, end_time, origin, destination, {period_bin} AS upd_ "
        f"FROM {trips} AS src_) AS t_) AS r_ WHERE uniq_rank_ = 1"
    )


def unique_trips(trips: Loaded, period: Period) -> Loaded:
    """Each user's first trip per (origin, destination) pair in every period of ``period``
    (trips outside a declared period form one more group)."""
    bin_sql = period.bin_sql("start_time", trips.engine.dialect)
    view = new_name("unique_trips")
    trips.engine.create_view(view, unique_trips_sql(trips.view, bin_sql))
    # derived: per-user buckets (engine/buckets.py) rebuild it below the window, per bucket
    return trips.derived(view, "trips", lambda t: unique_trips(t, period))
