"""The public names of ``privmob``: the error classes a caller catches are exported, and an
old name still works for one minor version with a warning that points at the caller's line."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import privmob as pm
import privmob.errors as errors

ERRORS = ("PrivmobError", "InputError", "ConfigError", "BudgetError", "OutputError",
          "EngineError", "PrivmobWarning")  # fmt: skip


@pytest.mark.parametrize("name", ERRORS)
def test_the_error_classes_are_exported(name: str) -> None:
    assert getattr(pm, name) is getattr(errors, name)
    assert name in pm.__all__


def test_every_refusal_is_caught_by_the_base_class() -> None:
    for name in ERRORS[1:-1]:
        assert issubclass(getattr(pm, name), pm.PrivmobError)


def test_pm_release_still_works_with_a_warning_at_the_callers_line() -> None:
    from privmob.releases.specs import release

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = pm.release
    assert old is release
    (w,) = caught
    assert issubclass(w.category, FutureWarning)
    assert "Session" in str(w.message) and "next minor version" in str(w.message)
    assert w.filename == __file__  # the user's line, not privmob's


def test_importing_the_errors_loads_neither_pandas_nor_duckdb() -> None:
    code = (
        "import sys, privmob as pm; pm.ConfigError; pm.BudgetError; "
        "print(any(m in sys.modules for m in ('pandas', 'duckdb')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


#: the Session's public surface (docs/api.md): its releases, their plans, run and close; the
#: loaders and plumbing are internal, the earlier names deprecated (and not offered by dir())
SESSION_SURFACE = {
    "close", "run", "plan_programme",
    *(f"{plan}{kind}" for plan in ("", "plan_")
      for kind in ("od", "population", "report", "density", "series_counts", "series",
                   "counts")),
}  # fmt: skip


def declared_kinds_methods() -> set[str]:
    """The methods of the kinds declared as data (the count template's), each with its plan:
    the registry's, and those a test registered in this process (``pm.register_kind``)."""
    from privmob.releases.kinds import every_kind

    kinds = [k.method for k in every_kind() if k.counts is not None]
    return {f"{plan}{method}" for plan in ("", "plan_") for method in kinds}


INTERNAL = ("accountant", "engine", "load_for", "load_trips", "load_events", "load_trip_points",
            "load_density_inputs", "load_counted")  # fmt: skip


def test_the_session_offers_its_releases_and_keeps_its_plumbing_internal() -> None:
    import pandas as pd

    s = pm.Session(pd.DataFrame(), budget=1, dataset="t")
    with s:
        public = {n for n in dir(s) if not n.startswith("_")}
        attributes = set(vars(s))  # what the constructor set: data, shape, ledger, ...
    assert public - attributes == SESSION_SURFACE | declared_kinds_methods()
    assert {"trips_per_hour", "plan_trips_per_hour"} <= declared_kinds_methods()


@pytest.mark.parametrize("name", INTERNAL)
def test_the_sessions_earlier_plumbing_still_works_with_a_warning_at_the_callers_line(
    name: str,
) -> None:
    from tests.helpers import random_trips
    from tests.test_session import zones

    s = pm.Session(random_trips(20, 9, seed=1), tessellation=zones(), budget=1, dataset="t")
    with s, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = getattr(s, name)  # a property warns when read, a method when called
        if callable(old):
            try:
                got = old()
            except (TypeError, pm.PrivmobError):  # called without what it reads
                got = None
        (w, *_) = caught
        assert issubclass(w.category, DeprecationWarning), w.message
        assert f"Session.{name} is deprecated" in str(w.message)
        assert w.filename == __file__
        if name == "accountant":
            assert old is s._accountant
        if name == "load_trips":  # the same input, read once, as the session's own
            assert got is s._load_trips()


def test_the_command_line_speaks_the_one_spelling(tmp_path: Path) -> None:
    """``privmob od -T 3`` builds its session from the typed groups and its bound as the
    kind's: nothing it does is deprecated."""
    from tests.helpers import run_cli
    from tests.releases.golden_cases import argv

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_cli(argv("od_trips", tmp_path)) == 0
    old = [w for w in caught if issubclass(w.category, DeprecationWarning | FutureWarning)]
    ours = [str(w.message) for w in old]
    assert not [m for m in ours if "Session" in m or "pm." in m], ours
