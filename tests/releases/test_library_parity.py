"""Library parity (issue 28, item 5): ``Session.density`` and ``Session.series`` publish what
``privmob density`` and ``privmob series`` publish, file for file and value for value, with the
same test seed; the commands only parse options into the library's release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.releases.golden_cases import INPUTS, capture, run_case

import privmob as pm
from privmob.errors import ConfigError, PrivmobWarning


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


def _cli_series(folder: Path, *args: str) -> dict[str, Any]:
    """``privmob series`` in test mode (the golden cases' seed, budget and dataset)."""
    from tests.helpers import run_cli
    from tests.releases.golden_cases import COMMON

    argv = ["series", *(a.replace("{in}", str(INPUTS)) for a in args)]
    assert run_cli([*argv, "-o", str(folder / "o"), *COMMON]) == 0
    return _published("series", folder)


def _session_series(folder: Path, source: str, **kwargs: Any) -> dict[str, Any]:
    unit = pm.PrivacyUnit.USER if kwargs.get("scheme") == "user" else pm.PrivacyUnit.LANDMARK
    path = str(INPUTS / source)
    with pm.Session(path, seed=7, budget=100, unit=unit, dataset="golden") as s:
        s.series(path, output=folder / "o", **kwargs)
    return _published("series", folder)


COLUMNS = ["--value-column", "v", "--time-column", "t"]
DAY = ["--start", "2024-01-01", "--end", "2024-01-02", "--bin", "1h"]
PERIOD = {"period": pm.Period("2024-01-01", "2024-01-02"), "freq": "1h"}


def test_session_series_publishes_what_the_command_does(tmp_path: Path) -> None:
    """The golden per-zone case: skip scheme, landmarks as positions."""
    cli = _cli_series(tmp_path / "cli", "{in}/series_zones.csv", "-e", "1", "--sensitivity",
                      "1", *COLUMNS, "--zone-column", "zone", "--zones", "a,b", "--landmarks",
                      "2,5,9", "--landmark-positions", "--scheme", "skip", *DAY)  # fmt: skip
    lib = _session_series(tmp_path / "lib", "series_zones.csv", epsilon=1, sensitivity=1,
                          value_column="v", time_column="t", zone_column="zone", zones=["a", "b"],
                          landmarks=[2, 5, 9], scheme="skip", **PERIOD)  # fmt: skip
    _same(cli, lib)


def test_session_series_takes_the_adaptive_rule_and_landmark_timestamps(tmp_path: Path) -> None:
    """What only the command could do: the adaptive scheme's rule (--initial-rate,
    --rate-step, --min-rate), --fill-value and landmarks given as timestamps."""
    from privmob.releases.landmark import AdaptiveRule

    marks = ["2024-01-01 03:00:00", "2024-01-01T05:00"]
    cli = _cli_series(tmp_path / "cli", "{in}/series.csv", "-e", "1", "--sensitivity", "2",
                      *COLUMNS, "--scheme", "adaptive", "--landmarks", ",".join(marks),
                      "--initial-rate", "0.5", "--rate-step", "0.25", "--min-rate", "0.25",
                      "--fill-value", "3", *DAY)  # fmt: skip
    rule = AdaptiveRule(initial_rate=0.5, step=0.25, min_rate=0.25)
    lib = _session_series(tmp_path / "lib", "series.csv", epsilon=1, sensitivity=2,
                          value_column="v", time_column="t", scheme="adaptive", landmarks=marks,
                          rule=rule, fill_value=3, **PERIOD)  # fmt: skip
    _same(cli, lib)
    assert lib["metadata"]["params.landmarks"] == [3, 5]
    assert lib["metadata"]["params.adaptive_rule.initial_rate"] == 0.5
    rates = lib["tables"]["budgets.parquet"]
    assert rates["rows"][0][rates["columns"].index("sampling_rate")] == 0.5  # the rule's


def test_session_series_on_the_files_own_grid_is_not_for_publication(tmp_path: Path) -> None:
    cli = _cli_series(tmp_path / "cli", "{in}/series.csv", "-e", "1", "--sensitivity", "2",
                      *COLUMNS, "--domain-from-data")  # fmt: skip
    with pytest.warns(PrivmobWarning, match="dates are not protected"):
        lib = _session_series(tmp_path / "lib", "series.csv", epsilon=1, sensitivity=2,
                              value_column="v", time_column="t",
                              domain_from_data=True)  # fmt: skip
    _same(cli, lib)
    assert "--domain-from-data" in lib["metadata"]["warning"]
    with pytest.raises(ConfigError, match="replaces the period"):
        _session_series(tmp_path / "x", "series.csv", epsilon=1, sensitivity=2,
                        domain_from_data=True, **PERIOD)  # fmt: skip
