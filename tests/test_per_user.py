"""One per-user bound (issue 41, item 4): ``per_user=pm.PerUser(n, unit)`` on every Session
release, its unit the kind's (the registry's ``Bound.unit``), ``-T n`` on the command line.

The new spelling publishes what the command line's ``-T`` publishes (the golden cases' commands,
compared file by file: tables, CSV layers and metadata); the earlier keywords (``max_trips``,
``max_records``, ``max_visits``, ``max_per_bin``) and the typed bounds (``pm.MaxTripsPerUser``
...) publish the same with a ``FutureWarning`` at the caller's line; a unit the kind does not
bound is refused before anything is read."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import privmob as pm
from privmob.dp import UNITS
from privmob.errors import ConfigError
from privmob.releases.kinds import KINDS
from tests.helpers import run_cli
from tests.releases.golden_cases import COMMON, INPUTS, capture, run_case

GRID = str(INPUTS / "grid.geojson")
WEEK = pm.Period("2024-01-01", "2024-01-08")


def _session(data: str, unit: Any = "user", **more: Any) -> Any:
    """The golden cases' test mode: seed 7, a budget of 100, dataset "golden"."""
    ledger = pm.LedgerOptions(dataset="golden", budget=100, unit=unit)
    return pm.Session(str(INPUTS / data), ledger=ledger, seed=7, **more)


#: each golden case with a bound, from Python: (the session, the release given its bound)
CASES: dict[str, tuple[Callable[[], Any], Callable[..., Any]]] = {
    "od_trips": (
        lambda: _session("trips.csv", tessellation=GRID),
        lambda s, out, **bound: s.od(epsilon=1, output=out, formats=["csv"], **bound),
    ),
    "report": (
        lambda: _session("points.csv", tessellation=GRID),
        lambda s, out, **bound: s.report(epsilon=2, period=WEEK, output=out, **bound),
    ),
    "density": (
        lambda: _session(
            "cell_events.csv",
            tessellation=str(INPUTS / "zones.geojson"),
            input=pm.Input(cells=str(INPUTS / "cells.csv")),
        ),
        lambda s, out, **bound: s.density(
            epsilon=1, week="2026-03-02", output=out, formats=["csv"], **bound
        ),
    ),
    "series_counts": (
        lambda: _session("events.csv", tessellation=GRID, unit=pm.PrivacyUnit.LANDMARK),
        lambda s, out, **bound: s.series_counts(
            epsilon=1,
            period=pm.Period("2024-01-01", "2024-01-03"),
            freq="6h",
            landmarks=[1, 4],
            output=out,
            formats=["csv"],
            **bound,
        ),
    ),
}
#: the case's bound: the new spelling, the earlier keyword and the earlier typed bound
BOUNDS: dict[str, tuple[pm.PerUser, dict[str, Any], dict[str, Any]]] = {
    "od_trips": (pm.PerUser(3, "trips"), {"max_trips": 3}, {"max_trips": "MaxTripsPerUser"}),
    "report": (pm.PerUser(3, "trips"), {"max_trips": 3}, {"max_trips": "MaxTripsPerUser"}),
    "density": (pm.PerUser(10, "visits"), {"max_visits": 10}, {"max_visits": "MaxVisitsPerWeek"}),
    "series_counts": (
        pm.PerUser(1, "events"),
        {"max_per_bin": 1},
        {"max_per_bin": "MaxEventsPerBin"},
    ),
}


#: what a Session states otherwise than the command line, whatever its bound: the zone
#: series' declared period as a timestamp (``2024-01-01 00:00:00``), the CLI's as given
ELSEWHERE = {"series_counts": ("definitions.period.start", "definitions.period.end")}


def _published(case: str, root: Path, release: Callable[[Path], Any]) -> dict[str, Any]:
    """What a Session release of ``case`` published, captured as the golden cases are (but
    for what it states otherwise than the command line, :data:`ELSEWHERE`)."""
    release(root / "report.html" if case == "report" else root / "o")
    doc = capture(case, root)
    doc.pop("argv")
    for key in ELSEWHERE.get(case, ()):
        doc["metadata"].pop(key)
    return doc


def _said_here(caught: list[warnings.WarningMessage]) -> list[str]:
    """The deprecations pointed at this file's lines."""
    old = (FutureWarning, DeprecationWarning)
    return [
        str(w.message) for w in caught if issubclass(w.category, old) and w.filename == __file__
    ]


def _typed(bound: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    from privmob import dp

    return {k: getattr(dp, name)(value[k]) for k, name in bound.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_per_user_publishes_what_the_command_lines_bound_publishes(
    case: str, tmp_path: Path
) -> None:
    cli = run_case(case, tmp_path / "cli")
    cli.pop("argv")
    for key in ELSEWHERE.get(case, ()):
        cli["metadata"].pop(key)
    session, release = CASES[case]
    new, old, typed = BOUNDS[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with session() as s:
            got = _published(case, tmp_path / "new", lambda o: release(s, o, per_user=new))
    assert got == cli
    assert not _said_here(caught)  # the new spelling is not deprecated
    for n, earlier in enumerate((old, _typed(typed, old))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with session() as s:
                root = tmp_path / f"old{n}"
                again = _published(case, root, lambda o, e=earlier: release(s, o, **e))
        assert again == cli
        said = [w for w in caught if issubclass(w.category, FutureWarning)]
        assert said and all(w.filename == __file__ for w in said), [str(w.message) for w in said]
        assert f"per_user=pm.PerUser({new.bound}, {new.unit!r})" in str(said[0].message)


def test_counts_per_user_is_minus_t_and_max_records(tmp_path: Path) -> None:
    argv = [
        "counts",
        str(INPUTS / "trips.csv"),
        "-t",
        GRID,
        "-e",
        "1",
        "-T",
        "3",
        "--by",
        "origin,hour",
        "-o",
        str(tmp_path / "cli" / "o"),
        *COMMON,
    ]
    assert run_cli(argv) == 0
    cli = capture("counts", tmp_path / "cli")
    cli.pop("argv")

    def counts(root: str, **bound: Any) -> dict[str, Any]:
        with _session("trips.csv", tessellation=GRID) as s:
            return _published(
                "counts",
                tmp_path / root,
                lambda o: s.counts(epsilon=1, by=["origin", "hour"], output=o, **bound),
            )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert counts("records", per_user=pm.PerUser(3, "records")) == cli
        assert counts("trips", per_user=pm.PerUser(3, "trips")) == cli  # what it counts
    assert not _said_here(caught)
    with pytest.warns(FutureWarning, match="max_records= is deprecated") as said:
        assert counts("old", max_records=3) == cli
    assert said[0].filename == __file__


def test_auto_is_a_per_user_bound_where_the_kind_chooses_it() -> None:
    from tests.releases.test_bound_choice import entries, session, trips

    with session(trips()) as a, session(trips()) as b:
        new = a.od(epsilon=0.3, per_user=pm.PerUser("auto", "trips")).release
        with pytest.warns(FutureWarning, match=r"PerUser\(\'auto\', \'trips\'\)"):
            old = b.od(epsilon=0.3, max_trips="auto").release
        assert new.tables["od"].equals(old.tables["od"])
        assert new.bounds.to_json() == old.bounds.to_json()
        assert [e.cost for e in entries(a)] == [e.cost for e in entries(b)]
        plan = a.plan_counts(epsilon=0.3, by=["hour"], per_user=pm.PerUser("auto", "records"))
        assert plan.parts == 2  # the choice and the counts
    # the report chooses its bound too (tests/releases/test_bound_choice.py), in both spellings
    with _session("points.csv", tessellation=GRID) as s:
        auto = s.plan_report(epsilon=1, period=WEEK, per_user=pm.PerUser("auto", "trips"))
        with pytest.warns(FutureWarning, match=r"PerUser\(\'auto\', \'trips\'\)"):
            old_plan = s.plan_report(epsilon=1, period=WEEK, max_trips="auto")
    assert auto.summary() == old_plan.summary() and "chosen privately" in auto.summary()


@pytest.mark.parametrize(
    ("call", "refused"),
    [
        (lambda s: s.plan_od(epsilon=1, per_user=pm.PerUser(3, "visits")), "bounds the trips"),
        (
            lambda s: s.plan_density(
                epsilon=1, week="2024-01-01", per_user=pm.PerUser("auto", "visits")
            ),
            "does not choose its bound",
        ),
        (
            lambda s: s.plan_density(epsilon=1, week="2024-01-01", max_visits="auto"),
            "does not choose its bound",
        ),
        (
            lambda s: s.plan_counts(
                epsilon=1, by=["hour"], records="events", per_user=pm.PerUser(3, "trips")
            ),
            "records or events",
        ),
        (
            lambda s: s.plan_od(epsilon=1, per_user=pm.PerUser(3, "trips"), max_trips=3),
            "given twice",
        ),
        (lambda s: s.plan_od(epsilon=1, per_user=3), "takes a pm.PerUser"),
        (
            lambda s: s.plan_density(epsilon=1, week="2024-01-01", per_user=pm.PerUser(3, "trips")),
            "bounds the visits",
        ),
    ],
)
def test_a_bound_the_kind_does_not_have_is_refused_before_reading(
    call: Callable[[Any], Any], refused: str
) -> None:
    with _session("trips.csv", tessellation=GRID) as s:
        with pytest.raises(ConfigError, match=refused):
            call(s)
        assert s.ledger.spent() == 0


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "ten"])
def test_a_per_user_bound_is_a_whole_number_or_auto(bad: Any) -> None:
    with pytest.raises(ConfigError, match="whole number >= 1 or 'auto'"):
        pm.PerUser(bad, "trips")
    with pytest.raises(ConfigError, match="unknown unit"):
        pm.PerUser(3, "miles")


def test_every_kind_with_a_bound_takes_per_user_in_its_unit() -> None:
    from tests.releases.test_kinds import keywords

    for kind in KINDS:
        if kind.bound is not None:
            assert kind.bound.unit in UNITS, kind.name
            assert "per_user" in keywords(getattr(pm.Session, kind.method)), kind.name


@pytest.mark.parametrize(
    "typed", ["MaxTripsPerUser", "MaxVisitsPerWeek", "MaxEventsPerBin", "MaxVisitsPerHour"]
)
def test_the_typed_bounds_are_earlier_names_with_a_warning(typed: str) -> None:
    from privmob import dp

    with pytest.warns(FutureWarning, match=r"per_user=pm\.PerUser\(n, ") as said:
        old = getattr(pm, typed)
    assert old is getattr(dp, typed)
    assert said[0].filename == __file__
    assert typed not in pm.__all__ and "PerUser" in pm.__all__
