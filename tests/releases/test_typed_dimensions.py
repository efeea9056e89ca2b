"""Typed dimensions are the internal form of a count's ``by`` (issue 41, item 4): a typed
dimension reaches the spec as the object given (no round trip through its text), text is
parsed once at the edges (``--by``, a Session caller's strings, a kind's declaration), and
text and typed give the same release, the metadata stating the one spelling."""

from __future__ import annotations

import filecmp
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips, run_cli

import privmob as pm
import privmob.releases.dimensions as dimensions
from privmob.engine.dialect import DUCKDB
from privmob.errors import ConfigError
from privmob.releases.counts import CountSpec
from privmob.releases.dimensions import (
    Named,
    TypedDimension,
    parse_dimension,
    parse_dimensions,
    spelling,
)
from privmob.releases.kinds import Counts, count_kind, every_kind


@dataclass(frozen=True)
class Rides(pm.Duration):
    """A user's own subclass of a typed dimension (it must survive as itself)."""

    note: str = "rides"


#: an edge whose spelling with six significant digits (the old ``:g``) is another number
FINE = pm.Duration([0, 0.1234567, 1, 60])


def _session(trips: pd.DataFrame) -> pm.Session:
    ledger = pm.LedgerOptions(dataset="t", budget=pm.PureDP(1000))
    return pm.Session(trips, tessellation=box_grid(3), seed=5, ledger=ledger)


def test_a_typed_dimension_reaches_the_spec_as_the_object_given() -> None:
    rides = Rides([0, 5, 15])
    with _session(random_trips(10, 4, seed=1)) as s:
        spec = s._count_spec([rides, FINE, "hour"], 1.0, {})
    assert spec.by[0] is rides and spec.by[1] is FINE  # not their text read back
    assert spec.by[2] == Named("hour")  # text: parsed once, at the Session
    assert all(isinstance(b, TypedDimension) for b in spec.by)


def test_typed_input_is_never_parsed_on_the_session_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_text(text: str) -> TypedDimension:
        raise AssertionError(f"{text!r} parsed")

    monkeypatch.setattr(dimensions, "parse_dimension", no_text)
    by = [pm.Duration([0, 5, 15, 60]), Named("hour"), pm.Categorical("mode", ["car"])]
    trips = random_trips(30, 9, seed=3).assign(mode="car")
    with _session(trips) as s:
        rel = s.counts(epsilon=1, by=by, per_user=pm.PerUser(3, "records")).release
    assert rel.params["by"] == ["duration:0,5,15,60", "hour", "mode:car"]


def test_an_edge_is_counted_as_given_and_stated_exactly() -> None:
    """The old round trip spelled 0.1234567 as 0.123457 and counted at that edge."""
    trips = random_trips(10, 4, seed=1)
    with _session(trips) as s:
        spec = s._count_spec([FINE], 1.0, {})
        (dim,) = spec.dimensions
        sql = dim.sql("start_time", DUCKDB, 9)
        rel = s.counts(epsilon=1, by=[FINE]).release
    assert "0.1234567" in sql and "0.123457 " not in sql
    assert rel.params["by"] == ["duration:0,0.1234567,1,60"]
    assert parse_dimension(spelling(FINE)) == FINE  # the spelling reads back as the edges


def test_text_and_typed_give_byte_identical_releases(tmp_path: Path) -> None:
    trips = random_trips(30, 9, seed=3)
    spellings = {
        "typed": [pm.Duration([0, 5, 15, 60]), pm.TimeBins("6h"), Named("weekday")],
        "text": [" duration:0,5.0,15,60", "bin:6h", "weekday "],  # one meaning, spelled loosely
    }
    for name, by in spellings.items():
        with _session(trips) as s:
            s.counts(
                epsilon=1,
                by=by,
                per_user=pm.PerUser(3, "records"),
                period=pm.Period("2024-01-01", "2024-01-15"),
                output=tmp_path / name,
            )
    files = sorted(p.name for p in (tmp_path / "typed").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "text").iterdir())
    for f in files:
        if f != "metadata.json":
            assert filecmp.cmp(tmp_path / "typed" / f, tmp_path / "text" / f, shallow=False), f
    typed, text = (json.loads((tmp_path / n / "metadata.json").read_text()) for n in spellings)
    for key in ("kind", "privacy", "params", "domain", "definitions"):  # not times, ids, hashes
        assert typed[key] == text[key], key
    assert text["params"]["by"] == ["duration:0,5,15,60", "bin:6h", "weekday"]


def test_the_command_line_parses_by_once_into_typed_dimensions() -> None:
    assert parse_dimensions("origin,duration:0,5,15,hour,mode:bike,car") == (
        Named("origin"),
        pm.Duration([0, 5, 15]),
        Named("hour"),
        pm.Categorical("mode", ["bike", "car"]),
    )


def test_the_command_line_and_the_session_state_one_spelling(tmp_path: Path) -> None:
    trips = random_trips(20, 6, seed=2)
    data = tmp_path / "trips.csv"
    trips.to_csv(data, index=False)
    grid = tmp_path / "grid.geojson"
    grid.write_text(json.dumps(box_grid(3).to_geojson_dict()))
    out = tmp_path / "cli"
    args = ["counts", str(data), "-t", str(grid), "-e", "1", "-q", "--budget", "5",
            "--ledger", str(tmp_path / "l.sqlite"), "--by", "origin,duration:0,5.0,15",
            "-o", str(out)]  # fmt: skip
    assert run_cli(args) == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["params"]["by"] == ["origin", "duration:0,5,15"]


def test_a_count_spec_refuses_text_in_by() -> None:
    spec = CountSpec(box_grid(3), 1.0, "trips", ("hour",), 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="typed dimensions"):
        _ = spec.dimensions


def test_declared_kinds_hold_typed_dimensions() -> None:
    for kind in every_kind():
        if kind.counts is not None:
            assert all(isinstance(b, TypedDimension) for b in kind.counts.by), kind.name
    rides = Rides([0, 5, 15])
    declared = count_kind("rides-by-length", "rides by length", "trips", rides, "origin")
    assert declared.counts is not None
    assert declared.counts.by[0] is rides and declared.counts.by[1] == Named("origin")
    assert declared.layer is not None and declared.layer.key == "origin"
    spelled = Counts("trips", ("hour", rides))  # type: ignore[arg-type]  # text: parsed here
    assert spelled.by == (Named("hour"), rides) and spelled.by[1] is rides


def test_bad_edges_are_refused_where_the_dimension_is_made() -> None:
    with pytest.raises(ConfigError, match="increasing"):
        pm.Duration([5, 1])
    with pytest.raises(ConfigError, match="finite"):
        pm.Distance([0, float("inf")])
    with pytest.raises(ConfigError, match="unknown count dimension"):
        Named("speed")
