"""Audit inputs from real or synthetic trips, through privmob's own loading and validation.

The audits are simulations run by the data holder; nothing here is released. Trips are read
with :func:`privmob.prepare.inputs.load_trips_any` (any input shape, validated, tiles
assigned), then turned into what the attacks need:

* :func:`background_counts`: per-period counts of *unique* (user, origin, destination) trips
  per OD cell (seed 002's weekly unique trips) -- the background c of the LRT attack;
* :func:`privmob.audit.ml.from_trips`: daily OD tensors for the ML attack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privmob.errors import InputError


def load_trips_frame(
    source: str | Path,
    tessellation: str | Path,
    *,
    tile_id: str | None = None,
    timezone: str = "UTC",
    engine: Any = None,
) -> tuple[pd.DataFrame, int]:
    """``uid, start_time, origin, destination`` (tile indices) and the number of tiles."""
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import make_engine
    from privmob.prepare.inputs import load_trips_any

    tess = load_tessellation(tessellation, id_column=tile_id)
    eng = engine if engine is not None else make_engine()
    loaded = load_trips_any(source, engine=eng, tessellation=tess, timezone=timezone)
    df = eng.fetch(f"SELECT uid, start_time, origin, destination FROM {loaded.view}")
    return df, int(tess.k)


def _unique_trips(trips: pd.DataFrame, period: str) -> pd.DataFrame:
    """The distinct (period ``p``, ``uid``, origin ``o``, destination ``d``) of the trips
    between two different tiles of the tessellation (refused when there are none)."""
    t = trips[(trips.origin >= 0) & (trips.destination >= 0) & (trips.origin != trips.destination)]
    if t.empty:
        raise InputError("no trips between two different tiles", column="origin")
    per = pd.to_datetime(t.start_time).dt.to_period(period)
    return pd.DataFrame(
        {"p": per, "uid": t.uid, "o": t.origin, "d": t.destination}
    ).drop_duplicates()


def background_counts(trips: pd.DataFrame, period: str = "W") -> np.ndarray:
    """Counts of unique (user, origin, destination) per period and off-diagonal OD cell.

    Only cells with at least one trip are returned (seed 002's private key set: the cells a
    target's trips fall into are, by definition, cells with trips). ``period`` is a pandas
    period alias ("W" weeks, "D" days).
    """
    unique = _unique_trips(trips, period)
    counts = unique.groupby(["p", "o", "d"]).size().to_numpy()
    return counts.astype(np.int64)


def unique_trips_per_user(trips: pd.DataFrame, period: str = "W") -> np.ndarray:
    """k for every (user, period) with trips: the number of unique OD pairs of the user.

    With :func:`privmob.audit.lrt.simulate` this turns per-k accuracies into what the attack
    does to the real users of a dataset.
    """
    unique = _unique_trips(trips, period)
    return unique.groupby(["p", "uid"]).size().to_numpy().astype(np.int64)
