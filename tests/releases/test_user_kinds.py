"""Kinds declared as data, registered from outside privmob (issue 41, item 3).

A user's kind (``tests/releases/user_kinds.py``) is registered through the public point,
``pm.register_kind``: it is then a Session method and plan, a command and a
``privmob plan`` command, and every guarantee test iterating the registry runs on it
(``test_kinds.py``, ``test_one_gate.py``, ``test_loaded_input.py``). What cannot be registered
is refused, nothing added. And the guarantee tests are not vacuous: run on two deliberately
broken kinds (``tests/releases/broken_kinds.py``, in a pytest process of their own), the kind
that draws noise before its charge and the kind that understates its sensitivity fail them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import run_cli
from tests.releases.test_kinds import ALL, _inputs
from tests.releases.user_kinds import USER_KIND

import privmob as pm
from privmob.errors import ConfigError
from privmob.releases.kinds import BY_NAME, TRIPS, Kind, count_kind, every_kind

ROOT = Path(__file__).resolve().parents[2]


def test_a_registered_kind_is_in_the_registry_the_session_and_the_command_line(
    tmp_path: Path,
) -> None:
    assert USER_KIND in every_kind() and USER_KIND in ALL
    assert BY_NAME[USER_KIND.name] is USER_KIND
    inputs = _inputs(tmp_path)
    with pm.Session(str(inputs / "trips.csv"), tessellation=str(inputs / "grid.geojson"),
                    seed=1, budget=pm.PureDP(5), dataset="u") as s:  # fmt: skip
        plan = s.plan_user_trip_duration_by_destination(epsilon=1, max_records=3)
        result = s.user_trip_duration_by_destination(epsilon=1, max_records=3)
        # a release recorded under the kind is the kind's declaration, nothing else
        with pytest.raises(ConfigError, match="counts trips by destination, weekday with the"):
            s.counts(epsilon=1, by=["hour"], kind=USER_KIND.name)
        with pytest.raises(ConfigError, match=r"use Session\.trip_duration_by_origin"):
            s.counts(epsilon=1, by=["origin"], kind="trip-duration-by-origin")  # no value
    assert plan.kind == USER_KIND.name and plan.parts == 2  # the counts and the sums
    assert result.release.kind == USER_KIND.name
    assert result.release.params["value"]["clamp"] == [0.0, 120.0]
    table = result.tables["counts"]
    assert {"destination", "weekday", "count", "mean", "mean_margin_95"} <= set(table.columns)
    grid = str(inputs / "grid.geojson")
    assert run_cli(["plan", USER_KIND.name, "-t", grid, "-e", "1", "-T", "3"]) == 0
    # the kind declares its value: the command refuses another
    argv = [USER_KIND.name, str(inputs / "trips.csv"), "-t", grid, "-e", "1", "-T", "3",
            "--mean", "duration:0:60", "-o", str(tmp_path / "o"), "--test-mode"]  # fmt: skip
    assert run_cli(argv) == 2


def test_what_cannot_be_registered_is_refused() -> None:
    before = every_kind()
    own_code = Kind("my-od", "", (TRIPS,), "privmob.releases.specs.OdSpec", "", ())
    refused = {
        "only a kind declared as data": own_code,
        "exists": count_kind("trips-per-hour", "again", TRIPS, "hour"),
        "not a kind's name": count_kind("Trips By Hour", "", TRIPS, "hour"),
        "Session.run exists": count_kind("run", "", TRIPS, "hour"),
        "not the count template's spec": count_kind(
            "od-again", "", TRIPS, "origin", spec="privmob.releases.specs.OdSpec"
        ),
    }
    for message, kind in refused.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            pm.register_kind(kind)
    assert every_kind() == before  # nothing added


#: the broken kinds (tests/releases/broken_kinds.py) and the guarantee each must fail
BROKEN = {
    "broken-draws-first": "test_every_kind_draws_its_noise_after_the_committed_charge",
    "broken-sensitivity": "test_one_user_changes_a_declared_kind_by_at_most_its_stated_sensit",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_guarantee_tests_fail_on_a_broken_kind(name: str) -> None:
    """The registry's guarantee tests, in a process where the broken kinds are registered
    too, run on ``name``: the guarantee it breaks fails (and so does the run)."""
    env = {**os.environ, "PRIVMOB_TEST_KINDS": "tests.releases.broken_kinds"}
    tests = ["tests/releases/test_kinds.py", "tests/releases/test_one_gate.py"]
    argv = [sys.executable, "-m", "pytest", *tests, "-k", name, "-q", "-rf"]
    argv += ["-p", "no:cacheprovider"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    failed = re.findall(r"^FAILED \S+::(\w+)\[([\w-]+)\]", done.stdout, re.M)
    assert (BROKEN[name], name) in {(t[: len(BROKEN[name])], k) for t, k in failed}, done.stdout
    assert all(k.startswith(name) for _, k in failed)  # only the broken kind's tests fail
