"""Every release command takes one path (``privmob/cli/run.py``): its plan is computed once
from public parameters, printed before any data is read, and refused over ``--memory-limit``;
``privmob plan <release>`` prints the same plan from the same options and reads nothing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privmob.cli import app
from privmob.cli.plan import PLANNED
from privmob.privacy.ledger import Ledger


@pytest.fixture
def fixture(shared_data: Path) -> tuple[Path, Path]:
    d = shared_data / "dpmr_fixture"
    return d / "test_data.csv", d / "test_tessellation.geojson"


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, terminal_width=400)


def _plan_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.startswith("plan: ")]
    assert len(lines) == 1, output
    return lines[0]


def test_od_computes_its_plan_once(
    fixture: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import privmob.releases.od as od

    calls = []
    real = od.plan_od

    def counted(spec: Any) -> Any:
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(od, "plan_od", counted)
    data, tess = fixture
    res = _invoke(
        ["od", str(data), "-t", str(tess), "-e", "1", "-T", "3", "--test-mode", "--seed", "1",
         "--budget", "5", "-o", str(tmp_path / "out")]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(calls) == 1


def test_a_plan_over_the_memory_limit_is_refused_before_reading(
    fixture: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import box_grid, run_cli

    # 64 tiles, daily over 20 years: ~3.8 GB of domain in memory, over the 2 GB limit; its
    # files (~1.8 GB) fit the disk of any machine the tests run on (the disk is checked first)
    tess = tmp_path / "grid64.geojson"
    box_grid(8).gdf.to_file(tess, driver="GeoJSON")
    ledger = tmp_path / "ledger.sqlite"
    code = run_cli(
        [
            "od",
            str(tmp_path / "no-such-input.csv"),
            "-t",
            str(tess),
            "-e",
            "1",
            "-T",
            "3",
            "--bin",
            "day",
            "--start",
            "2024-01-01",
            "--end",
            "2044-01-01",
            "--memory-limit",
            "2GB",
            "--ledger",
            str(ledger),
            "--budget",
            "5",
            "-o",
            str(tmp_path / "out"),
        ]
    )  # fmt: skip  (no --yes: a plan of 29 million cells over the memory limit is refused for
    # its memory, not asked about its size first)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "over the memory limit" in err and "not found" not in err
    assert _plan_line(err).startswith("plan: od: cost epsilon=1 per user")
    assert Ledger(ledger).entries("no-such-input") == []
    assert not (tmp_path / "out").exists()


def test_plan_commands_take_no_input() -> None:
    from privmob.cli import plan as plan_module

    plans = typer.Typer()
    plan_module.register(plans)
    plan_group = typer.main.get_group(plans).commands["plan"]
    for name, module in PLANNED.items():
        sub = typer.Typer()
        importlib.import_module(module).register(sub)
        release = typer.main.get_group(sub).commands[name]
        plan = plan_group.get_command(None, name)  # type: ignore[attr-defined]
        assert not [p for p in plan.params if p.param_type_name == "argument"], name
        names = {p.name for p in plan.params}
        assert {"epsilon", "tessellation"} <= names
        assert not names & {"output", "ledger", "budget", "engine", "seed"}
        # the same options as the release for what the plan depends on
        shared = {p.name: p.opts for p in release.params if p.name in names}
        assert shared == {p.name: p.opts for p in plan.params}


def test_plan_reads_nothing_and_agrees_with_the_release(
    fixture: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, tess = fixture
    runs = {
        "od": ["-e", "1", "-T", "3", "--bin", "day", "--start", "2020-12-01", "--end",
               "2021-01-01"],
        "population": ["-e", "0.5", "--start", "2020-12-01", "--end", "2021-01-01"],
        "report": ["-e", "1", "-T", "5", "--start", "2020-12-01", "--end", "2021-01-01"],
        "series-counts": ["-e", "1", "-T", "2", "--start", "2020-12-13", "--end",
                          "2020-12-15", "--bin", "3h"],
    }  # fmt: skip
    released = {}
    for name, opts in runs.items():
        out = tmp_path / name / ("report.html" if name == "report" else "out")
        res = _invoke(
            [
                name,
                str(data),
                "-t",
                str(tess),
                *opts,
                "--test-mode",
                "--budget",
                "9",
                "-o",
                str(out),
            ]
        )
        assert res.exit_code == 0, (name, res.output)
        released[name] = _plan_line(res.output)
    # the plan commands: no engine is opened, no ledger touched, nothing read but the tiles
    import privmob.engine as engines

    def no_engine(*_a: Any, **_k: Any) -> None:
        raise AssertionError("privmob plan opened an engine")

    monkeypatch.setattr(engines, "open_engine", no_engine)
    monkeypatch.setenv("PRIVMOB_LEDGER", str(tmp_path / "never.sqlite"))
    for name, opts in runs.items():
        res = _invoke(["plan", name, "-t", str(tess), *opts])
        assert res.exit_code == 0, (name, res.output)
        assert _plan_line(res.output) == released[name]
        assert "cells:" in res.output and "95% margin of error:" in res.output
    res = _invoke(["plan", "density", "-t", str(tess), "-e", "1", "--start", "2020-12-14"])
    assert res.exit_code == 0 and "density plan" in res.output, res.output
    assert not (tmp_path / "never.sqlite").exists()
