"""Library parity (issue 28, item 5): ``Session.density`` and ``Session.series`` publish what
``privmob density`` and ``privmob series`` publish, file for file and value for value, with the
same test seed; the commands only parse options into the library's release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.releases.golden_cases import INPUTS, capture, run_case

import privmob as pm


def _published(case: str, folder: Path) -> dict[str, Any]:
    """What a release published in ``folder / "o"``, as the golden cases record it, and the
    names of its files."""
    doc = capture(case, folder)
    doc["files"] = sorted(p.name for p in (folder / "o").iterdir())
    return doc


def _same(cli: dict[str, Any], lib: dict[str, Any]) -> None:
    assert lib["files"] == cli["files"]
    assert lib["tables"] == cli["tables"]
    assert lib["layers"] == cli["layers"]
    # the run's own values aside (golden_cases.VOLATILE), the metadata is the command's
    assert lib["metadata"] == cli["metadata"]


def test_session_density_publishes_what_the_command_does(tmp_path: Path) -> None:
    run_case("density", tmp_path / "cli")  # privmob density, test mode, seed 7
    cli = _published("density", tmp_path / "cli")
    with pm.Session(
        str(INPUTS / "cell_events.csv"),
        tessellation=str(INPUTS / "zones.geojson"),
        cells=str(INPUTS / "cells.csv"),
        seed=7,
        budget=100,
        dataset="golden",
    ) as s:
        s.density(
            epsilon=1,
            week="2026-03-02",
            max_visits=10,
            output=tmp_path / "lib" / "o",
            formats=["csv"],
        )
    lib = _published("density", tmp_path / "lib")
    assert "density.geojson" in cli["files"]
    _same(cli, lib)
    cli_layer, lib_layer = (
        json.loads((tmp_path / d / "o" / "density.geojson").read_text()) for d in ("cli", "lib")
    )
    assert lib_layer == cli_layer
    assert lib_layer["privmob"]["for_publication"] is False  # stamped as the release is
