"""Every registered kind's load step returns a LoadedInput (privmob.releases.loaded), the one
thing the Accountant binds a release to: a content fingerprint, a row count and a people
sketch, read as typed attributes (no getattr). Run over the registry (each kind's example) and
over every input shape of the golden cases, through the CLI as a user runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import run_cli
from tests.releases.golden_cases import CASES, COMMON, INPUTS, SPARK_CASES
from tests.releases.test_kinds import ALL, _inputs, example

from privmob.privacy.people import PeopleSketch
from privmob.releases.base import Accountant
from privmob.releases.loaded import LoadedInput

RUNS: dict[str, list[str]] = {f"kind-{k.name}": example(k) for k in ALL}
RUNS.update({f"case-{c}": args for c, args in CASES.items() if c not in SPARK_CASES})


def _bound(argv: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the run of ``argv`` handed to Accountant.bind_input, with the people sketch
    bind_input got from it."""
    seen: list[Any] = []
    original = Accountant.bind_input

    def spy(self: Accountant, loaded: Any) -> None:
        original(self, loaded)
        # the sketch is asked for while the engine is open (bind_input asked for it)
        seen.append((loaded, self.input_people))

    monkeypatch.setattr(Accountant, "bind_input", spy)
    inputs = _inputs(out) if any("trips_mode.csv" in a for a in argv) else INPUTS  # made there
    args = [a.replace("{in}", str(inputs)) for a in argv]
    target = out / "report.html" if args[0] == "report" else out / "o"
    assert run_cli([*args, "-o", str(target), *COMMON]) == 0
    return seen


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_loader_result_is_a_loaded_input(
    run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ((loaded, sketch),) = _bound(RUNS[run], tmp_path, monkeypatch)  # bound once
    assert isinstance(loaded, LoadedInput)
    assert isinstance(loaded.fingerprint, str) and len(loaded.fingerprint) >= 16
    assert isinstance(loaded.rows, int) and loaded.rows > 0
    series_file = RUNS[run][0] == "series"  # a pre-aggregated series has no user ids
    assert sketch is None if series_file else isinstance(sketch, PeopleSketch)


def test_every_kind_is_run() -> None:
    assert {r.removeprefix("kind-") for r in RUNS if r.startswith("kind-")} == {k.name for k in ALL}


def test_an_input_without_the_protocol_is_refused(tmp_path: Path) -> None:
    """An object without a fingerprint and a people sketch is never bound (nor charged)."""
    from privmob.privacy.ledger import Ledger

    class Rows:
        fingerprint = "f" * 64
        rows = 3  # no people_sketch

    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "d", budget=1.0)
    for bad in (Rows(), object()):
        with pytest.raises(TypeError, match="carries no content fingerprint"):
            acct.bind_input(bad)  # type: ignore[arg-type]
    assert acct.input_fingerprint is None
