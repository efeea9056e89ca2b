"""The synthetic phone-record city of the density release (privmob.data.density_synth)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from privmob.data.density_synth import synthetic_city
from privmob.errors import ConfigError


def _digest(events: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for col in ("uid", "time", "cell_id", "tile"):
        h.update(np.ascontiguousarray(events[col].to_numpy()).tobytes())
    return h.hexdigest()[:16]


def test_default_city_is_unchanged() -> None:
    """Without a commute spread the events are those of the generator before the option (the
    golden files and the measured tables of docs/utility.md depend on them)."""
    city = synthetic_city(600, 12, 3, seed=3)
    assert len(city.events) == 7685
    assert _digest(city.events) == "45e4e5d6d153cc00"


def _share_at_day_tower(events: pd.DataFrame, hour_of_day: int) -> float:
    """Among users whose usual weekday-midday tower differs from their usual night tower, the
    share of their weekday events at ``hour_of_day`` that are at the midday tower."""
    ev = events.assign(hod=events.time.dt.hour, weekday=events.time.dt.day_of_week < 5)
    day = ev[ev.weekday & ev.hod.between(11, 15)].groupby("uid").tile.agg(lambda s: s.mode()[0])
    night = ev[(ev.hod >= 21) | (ev.hod <= 5)].groupby("uid").tile.agg(lambda s: s.mode()[0])
    both = pd.concat([day.rename("day"), night.rename("night")], axis=1).dropna()
    movers = both[both.day != both.night]
    at = ev[ev.weekday & (ev.hod == hour_of_day)].join(movers, on="uid", how="inner")
    return float((at.tile == at.day).mean())


def test_commute_spread_spreads_the_morning_and_evening_commutes() -> None:
    """With everyone at work from 9:00 to 18:00, an 8:00-9:00 or 18:00-19:00 weekday event is
    at the work tower only by chance (a random tower); with office hours spread by 1 hour,
    about a quarter of them are (P(start < 8:30) ~ 0.31, times 0.75 at work)."""
    fixed = synthetic_city(6000, 30, 4, seed=3).events
    spread = synthetic_city(6000, 30, 4, seed=3, commute_spread_h=1.0).events
    for hour in (8, 18):
        assert _share_at_day_tower(fixed, hour) < 0.05
        assert 0.12 < _share_at_day_tower(spread, hour) < 0.4
    # midday is at work in both
    assert _share_at_day_tower(fixed, 12) > 0.6
    assert _share_at_day_tower(spread, 12) > 0.6
    # only the towers of some events change, never the times
    assert (fixed.time.to_numpy() == spread.time.to_numpy()).all()
    assert 0 < (fixed.tile.to_numpy() != spread.tile.to_numpy()).mean() < 0.1


def test_negative_commute_spread_is_refused() -> None:
    with pytest.raises(ConfigError, match="commute spread"):
        synthetic_city(50, 5, 2, commute_spread_h=-1.0)
