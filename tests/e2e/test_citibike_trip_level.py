"""Rides without a rider id, end to end on the Citi Bike Jersey City files (issue 42, item 3):
the README's commands, run as a new user runs them (a fresh default ledger, the data at
``../shared/data``), release rides per trip with ``od``, ``trips-per-hour`` and ``counts``
charged to a budget per trip; the wrong unit on either side is refused before reading with the
command that leads on. Real processes; skipped with a message when the data is absent."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.conftest import REPO

import privmob as pm
from privmob.errors import ConfigError
from privmob.privacy.ledger import Ledger

JANUARY = "citibike_jc/JC-201801-citibike-tripdata.csv"
APRIL = "citibike_jc/JC-201704-citibike-tripdata.csv"


def readme_block(heading: str) -> list[str]:
    """The commands of the first bash block under ``heading`` in the README, one per line
    (continuations joined, comments dropped)."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(heading) :], re.S)
    assert block is not None, heading
    joined = block.group(1).replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip()]


def privmob(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PRIVMOB_LEDGER", "COLUMNS")}
    return subprocess.run(
        [sys.executable, "-m", "privmob", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def beside_data(shared_data: Path, tmp_path: Path) -> Path:
    """A working folder with the data at ``../shared/data``, as beside a checkout."""
    (tmp_path / "shared").mkdir()
    os.symlink(shared_data, tmp_path / "shared" / "data")
    work = tmp_path / "repo"
    work.mkdir()
    return work


def run_readme(work: Path) -> list[subprocess.CompletedProcess[str]]:
    done = []
    for line in readme_block("### Rides without a rider id"):
        words = shlex.split(line)
        assert words[:3] == ["uv", "run", "privmob"], line
        done.append(privmob(words[3:], work))
        assert done[-1].returncode == 0, (line, done[-1].stderr[-2000:])
    return done


def test_the_readme_releases_rides_per_trip_from_a_fresh_ledger(beside_data: Path) -> None:
    # the default ledger of a new user: the per-test XDG_DATA_HOME holds none yet
    default = Path(os.environ["XDG_DATA_HOME"]) / "privmob" / "ledger.sqlite"
    assert not default.exists()
    done = run_readme(beside_data)
    ledger = Ledger(default)
    budget = ledger.budget("citibike-jc")
    assert (budget.epsilon, str(budget.unit)) == (5.0, "trip")  # --budget with --unit trip
    assert ledger.spent("citibike-jc").epsilon == pytest.approx(2.0)
    assert "budget epsilon=5, delta=0 per trip" in done[-1].stdout
    od_said = done[1].stdout  # no lead to --group-size for rides that name no rider
    assert "Pass --group-size" not in od_said and "(bike share) stay per trip" in od_said
    for folder, kind in (("rides-od", "od"), ("rides-per-hour", "trips-per-hour"),
                         ("rides-by-origin", "counts")):  # fmt: skip
        meta = json.loads((beside_data / folder / "metadata.json").read_text())
        assert (meta["kind"], meta["privacy"]["unit"]) == (kind, "trip"), folder
        assert "group-size" not in json.dumps(meta)
    # every ride is counted once: the 24 hours hold the file's rides, give or take the noise
    rides = pd.read_csv(beside_data.parent / "shared" / "data" / JANUARY)
    hours = pd.read_parquet(beside_data / "rides-per-hour" / "counts.parquet")
    assert list(hours["hour"]) == list(range(24))
    # 24 cells of discrete Laplace noise of scale 2 (epsilon 0.5): by a Chernoff bound on
    # their sum, P(|noise| > 100) < 1e-8 (the false-failure rate of this line)
    assert abs(int(hours["count"].sum()) - len(rides)) <= 100
    od = pd.read_parquet(beside_data / "rides-od" / "od.parquet")
    assert len(od) == 49 * 48  # every pair of distinct tiles of the 7 x 7 grid


def test_the_wrong_unit_on_either_side_leads_to_the_right_command(
    beside_data: Path, shared_data: Path
) -> None:
    rides = str(shared_data / JANUARY)
    grid = beside_data / "jc.geojson"
    made = privmob(["tessellate", str(grid), "--bbox", "-74.10,40.70,-74.02,40.76",
                    "--cell-size", "1000"], beside_data)  # fmt: skip
    assert made.returncode == 0, made.stderr
    for name, unit in (("people", "user"), ("rides", "trip")):
        assert privmob(["ledger", "init", name, "--make-key", "--epsilon", "5", "--unit", unit],
                       beside_data).returncode == 0  # fmt: skip
    base = [rides, "-t", str(grid), "-e", "1", "-q"]
    # a release per trip on a budget per user: no lead to --group-size for rides
    wrong = privmob(["od", *base, "--unit", "trip", "--dataset", "people", "-o", "a"], beside_data)
    assert wrong.returncode == 3
    assert "privmob ledger init people-trips --epsilon 5 --unit trip" in wrong.stderr
    assert "rides without a rider id" in wrong.stderr and "reading" not in wrong.stderr
    # a release per user on a budget per trip: told to release per trip
    for command in (["counts", "--by", "hour"], ["od", "-T", "3"]):
        wrong = privmob([*command, *base, "--dataset", "rides", "-o", "b"], beside_data)
        assert wrong.returncode == 2, command
        assert "has a budget per trip" in wrong.stderr and "--unit trip" in wrong.stderr
    # no rider id at user level: the hint names the commands and the trip-level budget
    no_uid = ["counts", *base, "--by", "hour", "--dataset", "x", "--budget", "5", "-o", "c"]
    wrong = privmob(no_uid, beside_data)
    assert wrong.returncode == 2 and "missing column 'uid'" in wrong.stderr
    assert "--unit trip" in wrong.stderr and "counts, trips-per-hour" in wrong.stderr
    assert "--budget with --unit trip" in wrong.stderr
    # and the right one, on the other month: counts of rides by hour, per trip
    april = str(shared_data / APRIL)
    right = privmob(["counts", april, "-t", str(grid), "-e", "1", "-q", "--by", "hour",
                     "--unit", "trip", "--dataset", "rides", "-o", "d"], beside_data)  # fmt: skip
    assert right.returncode == 0, right.stderr
    assert "epsilon=1 per trip" in right.stdout


def test_python_counts_rides_per_trip(shared_data: Path, tmp_path: Path) -> None:
    from privmob.data.grids import square_grid

    grid = square_grid([-74.10, 40.70, -74.02, 40.76], 1000)
    with pm.Session(str(shared_data / APRIL), tessellation=grid, budget=pm.PureDP(3),
                    unit="trip", ledger=tmp_path / "l.sqlite", dataset="april") as s:  # fmt: skip
        rel = s.trips_per_hour(epsilon=1, unit="trip")
        assert str(rel.metadata.unit) == "trip" and rel.metadata.bounds["max_records_per_trip"] == 1
        with pytest.raises(ConfigError, match="counts trips"):
            s.counts(epsilon=1, unit="trip", by=["hour"], records="trip-points")
        assert s.ledger.spent() == pytest.approx(1.0)


def test_a_refused_command_leaves_no_budget_behind(beside_data: Path, shared_data: Path) -> None:
    """The budget --budget asks for is pending until the release is charged (the Accountant's,
    releases/base.py; the session hands it the budget): a refused command creates none."""
    rides = str(shared_data / JANUARY)
    grid = beside_data / "jc.geojson"
    assert privmob(["tessellate", str(grid), "--bbox", "-74.10,40.70,-74.02,40.76",
                    "--cell-size", "1000"], beside_data).returncode == 0  # fmt: skip
    ledger = beside_data / "ledger.sqlite"
    base = [rides, "-t", str(grid), "-e", "1", "-q", "--ledger", str(ledger), "--dataset", "jc"]
    # at user level the file is refused (no rider id): exit 2, and nothing is created
    refused = privmob(["od", *base, "-T", "3", "--budget", "5", "-o", "a"], beside_data)
    assert refused.returncode == 2 and "missing column 'uid'" in refused.stderr
    assert not Ledger(ledger).has_budget("jc")
    # so the hint's command works next, first time
    right = privmob(["od", *base, "--unit", "trip", "--budget", "5", "-o", "b"], beside_data)
    assert right.returncode == 0, right.stderr
