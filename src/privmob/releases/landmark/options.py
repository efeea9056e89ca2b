"""The keywords of ``Session.series`` besides its budget, bound and grid, typed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from privmob.releases.landmark.positions import Landmark
from privmob.releases.landmark.schemes import AdaptiveRule, Scheme


class SeriesFields(TypedDict, total=False):
    """The :class:`SeriesOptions` a :class:`~privmob.releases.specs.SeriesSpec` takes as they
    are (``SeriesSpec.over`` reads the zones and landmarks itself)."""

    value_column: str
    time_column: str
    zone_column: str | None
    scheme: Scheme | str
    integer: bool | None
    value_bounds: tuple[float, float] | None
    rule: AdaptiveRule | None
    fill_value: float


class SeriesOptions(SeriesFields, total=False):
    """What a series file holds and how it is published (each as ``privmob series`` has it):
    its columns, the public ``zones`` of a series per zone, the public ``landmarks``
    (positions or timestamps), the ``scheme``, discrete (``integer``) or continuous noise,
    an enforced ``value_bounds`` clamp, the adaptive scheme's ``rule`` and the public
    ``fill_value`` before the first release."""

    zones: Sequence[str] | None
    landmarks: Sequence[Landmark]
