"""The ``Spec`` protocol names everything the lifecycle reads of a spec: every release kind's
spec declares what it counts, its unit, its period and its same-tile rule, and the session's
default loader reads the input as the spec says (never a guess by attribute lookup)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import privmob as pm
from privmob.errors import ConfigError
from privmob.privacy.costs import PrivacyUnit
from privmob.releases.counts import CountSpec
from privmob.releases.landmark_counts import ZoneSeriesSpec
from privmob.releases.report.spec import ReportSpec
from privmob.releases.specs import RECORDS, DensitySpec, OdSpec, PopulationSpec, SeriesSpec

SPECS = (OdSpec, PopulationSpec, CountSpec, DensitySpec, SeriesSpec, ZoneSeriesSpec, ReportSpec)
MEMBERS = ("kind", "records", "unit", "same_tile_rule", "public_period", "plan", "draft")


def _declares(cls: type, name: str) -> bool:
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return name in fields or any(name in vars(base) for base in cls.__mro__[:-1])


@pytest.mark.parametrize("cls", SPECS, ids=lambda c: c.__name__)
def test_every_spec_declares_what_the_lifecycle_reads(cls: type) -> None:
    missing = [name for name in MEMBERS if not _declares(cls, name)]
    assert not missing, f"{cls.__name__} does not declare {missing}"


@pytest.mark.parametrize(
    ("cls", "records"),
    [
        (OdSpec, "trips"),
        (PopulationSpec, "homes"),
        (DensitySpec, "events"),
        (SeriesSpec, "series"),
        (ZoneSeriesSpec, "events"),
        (ReportSpec, "trips"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_each_kind_counts_what_it_says(cls: type, records: str) -> None:
    assert records in RECORDS
    assert cls.records == records


def _trips() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "uid": ["a", "b"],
            "start_time": pd.to_datetime(["2024-01-01 08:00", "2024-01-01 09:00"]),
            "end_time": pd.to_datetime(["2024-01-01 08:30", "2024-01-01 09:30"]),
            "origin": [0, 1],
            "destination": [1, 0],
        }
    )


def test_a_spec_without_a_session_loader_is_refused_not_read_as_events() -> None:
    """A series is read by its own loader: the session's default has none for it, and says so
    (before, a spec without ``records`` was read as located events without a word)."""
    spec = SeriesSpec(1.0, 1.0, "2024-01-01", "2024-01-02", "1h")
    session = pm.Session(_trips(), budget=pm.PureDP(5), dataset="spec-protocol")
    with session as s, pytest.raises(ConfigError, match="no default loader"):
        s._load_for(spec)


def test_the_series_unit_is_its_schemes() -> None:
    spec = SeriesSpec(1.0, 1.0, "2024-01-01", "2024-01-02", "1h")
    assert spec.unit == spec.plan().cost.unit
    assert OdSpec.unit is PrivacyUnit.USER
