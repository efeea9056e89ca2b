"""The per-person cost lines of a trip-level release (the line the Citi Bike walk prints)."""

from __future__ import annotations

from types import SimpleNamespace

from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.releases.od_series_cost import series_cost_lines


def test_group_privacy_examples_read_as_english() -> None:
    release = SimpleNamespace(
        params={}, cost=Cost.pure(0.5, "trip"), bounds={}, unit=PrivacyUnit.TRIP
    )
    (line,) = series_cost_lines(release)
    assert "(group privacy; 1 trip -> 0.5, 14 trips -> 7, 100 trips -> 50)" in line
