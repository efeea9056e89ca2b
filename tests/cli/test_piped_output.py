"""Output that is not a terminal (cron and CI logs, ``| less``, a file) is not cut at 80 columns:
``--help`` keeps whole option names and ``ledger show`` whole cells. Real processes, stdout a
pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_ledger_show_is_not_cut_when_piped(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    s = pm.Session(random_trips(30, 9, seed=1), tessellation=box_grid(3).gdf, budget=5,
                   ledger=ledger, dataset="trips")  # fmt: skip
    s.od(epsilon=1, max_trips=3)
    s.close()
    text = privmob("ledger", "show", "--ledger", str(ledger))
    assert " od " in text and "publishable" in text and "…" not in text
