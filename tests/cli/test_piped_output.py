"""Output that is not a terminal (cron and CI logs, ``| less``, a file) is not cut at 80 columns:
``--help`` keeps whole option names and ``ledger show`` whole cells; yet piped ``--help`` is
capped at a width people read (it was 250 columns). Real processes, stdout a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import box_grid, random_trips

import privmob as pm


def privmob(*argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    done = subprocess.run(
        [sys.executable, "-m", "privmob", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_help_is_not_cut_when_piped() -> None:
    text = privmob("od", "--help")
    assert "--new-dataset-for-same-data" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) > 80


def test_piped_help_is_capped_at_a_readable_width() -> None:
    from privmob.cli.common import HELP_WIDTH

    assert HELP_WIDTH <= 120
    for argv in (["od", "--help"], ["ledger", "show", "--help"]):
        widths = [len(line) for line in privmob(*argv).splitlines()]
        assert max(widths) == HELP_WIDTH, argv  # the boxes span the width: exactly it


def test_no_help_is_cut_or_shows_a_doubled_percent_at_the_piped_width(monkeypatch: Any) -> None:
    """Every command's help at :data:`~privmob.cli.common.HELP_WIDTH` keeps every word whole
    (a long path in a help text was cut with "…" in ``series``) and says "95%", never the
    "95%%" of a printf-style escape that nothing unescapes."""
    import typer.rich_utils
    from tests.cli.test_help_text import _paths
    from typer.testing import CliRunner

    from privmob.cli import app
    from privmob.cli.common import HELP_WIDTH

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", HELP_WIDTH)  # what TERMINAL_WIDTH sets
    runner = CliRunner()
    cut, doubled = [], []
    for path in _paths():
        text = runner.invoke(app, [*path, "--help"]).output
        assert max(len(line) for line in text.splitlines()) <= HELP_WIDTH, path
        cut += [" ".join(path)] if "…" in text else []
        doubled += [" ".join(path)] if "%%" in text else []
    assert cut == [] and doubled == []
    margin = runner.invoke(app, ["od", "--help"]).output
    assert "95% margin of error" in " ".join(margin.replace("│", " ").split())


def test_ledger_show_is_not_cut_when_piped(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    s = pm.Session(random_trips(30, 9, seed=1), tessellation=box_grid(3).gdf, budget=5,
                   ledger=ledger, dataset="trips")  # fmt: skip
    s.od(epsilon=1, max_trips=3)
    s.close()
    text = privmob("ledger", "show", "--ledger", str(ledger))
    assert " od " in text and "publishable" in text and "…" not in text


def test_no_spinner_when_stderr_is_not_a_terminal(monkeypatch: Any) -> None:
    """Steps in a log or a pipe: the finished steps' lines only, no spinner and no refresh
    thread behind it (it would only take the interpreter's lock 12 times a second); on a
    terminal the spinner runs."""
    import io
    import threading

    from rich.console import Console

    from privmob.cli import common

    for terminal in (False, True):
        err = io.StringIO()
        monkeypatch.setattr(common, "console_err", Console(file=err, force_terminal=terminal))
        before = threading.active_count()
        with common.Steps(quiet=False) as step:
            step("reading")
            during = threading.active_count()
            step("counting")
        assert during == before + terminal  # rich's refresh thread on a terminal only
        if not terminal:
            lines = [line.split(" (")[0] for line in err.getvalue().splitlines()]
            assert lines == ["✓ reading", "✓ counting"]
