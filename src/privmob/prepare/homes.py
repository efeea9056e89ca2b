"""Home locations (SPEC section 2; seed 003): the most frequent tile of a user's night events.

Night = local hours >= 20 or < 6 (configurable). Ties: the smallest tile index, with tiles
inside the tessellation preferred over "outside" (-1). A user with no night event has no home
("unknown home"); :func:`home_cells_sql` puts every user in exactly one cell of the public
domain ``0..k-1`` (zones), ``k`` (home outside the tessellation), ``k+1`` (unknown home), so one
user changes one cell by one: sensitivity 1 for a count per cell.

Pure SQL that DuckDB and Spark SQL both accept (GROUP BY, ROW_NUMBER window); the hour
function comes from the engine's dialect.
"""

from __future__ import annotations

from privmob.engine.dialect import Dialect
from privmob.errors import ConfigError


def night_filter(time_col: str, dialect: Dialect, night: tuple[int, int] = (20, 6)) -> str:
    """SQL predicate: the local hour of ``time_col`` is in [start, 24) or [0, end)."""
    start, end = night
    if not (0 <= start <= 23 and 0 <= end <= 24):
        raise ConfigError(f"night hours must be within 0..24, got {night}")
    h = dialect.hour(time_col)
    if start < end:
        return f"({h} >= {start} AND {h} < {end})"
    return f"({h} >= {start} OR {h} < {end})"


def homes_sql(
    events: str, dialect: Dialect, *, night: tuple[int, int] = (20, 6), where: str = "TRUE"
) -> str:
    """SQL with one row ``uid, tile`` per user that has a night event (``events``: uid, time,
    tile). ``where`` restricts the events (e.g. to the declared study period)."""
    nf = night_filter("time", dialect, night)
    return (
        "SELECT uid, tile FROM ("
        "SELECT uid, tile, ROW_NUMBER() OVER (PARTITION BY uid ORDER BY n DESC, "
        "CASE WHEN tile < 0 THEN 1 ELSE 0 END, tile) AS home_rank_ FROM ("
        f"SELECT uid, tile, count(*) AS n FROM {events} AS ev_ WHERE {nf} AND ({where}) "
        "GROUP BY uid, tile) AS night_counts_) AS ranked_ WHERE home_rank_ = 1"
    )


def home_cells_sql(
    events: str,
    dialect: Dialect,
    k: int,
    *,
    night: tuple[int, int] = (20, 6),
    where: str = "TRUE",
) -> str:
    """SQL ``i0, n``: users per home cell over the domain 0..k+1 (k = outside, k+1 = unknown).

    Every user with at least one event is counted exactly once. Homes are found from the
    events in ``where`` (e.g. the declared study period); a user without a night event there
    (including a user whose events all lie outside the period, SPEC 1.1) is "unknown".
    """
    homes = homes_sql(events, dialect, night=night, where=where)
    return (
        f"SELECT CASE WHEN h.tile IS NULL THEN {k + 1} WHEN h.tile < 0 THEN {k} "
        "ELSE h.tile END AS i0, count(*) AS n FROM ("
        f"SELECT DISTINCT uid FROM {events} AS all_) AS u "
        f"LEFT JOIN ({homes}) AS h ON u.uid = h.uid GROUP BY 1"
    )
