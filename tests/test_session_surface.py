"""Python speaks Python: a hint raised from the Session names its arguments (``output=``,
``overwrite=True``, ``dataset="A"``, ``new_dataset_for_same_data=True``), the command line
keeps its flags; and every warning the Session gives points at the caller's line (this file),
not at privmob's source (``privmob.surface``).

Before: the hints spoke the command line's words to a notebook, and the warnings' file was
privmob's (``session/base.py``, ``data/reading.py``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import privmob as pm
from privmob.errors import BudgetError, ConfigError, OutputError
from privmob.surface import command_line, option
from tests.helpers import random_trips, run_cli
from tests.test_session import zones

CLI_FLAGS = ("--output", "--overwrite", "--dataset", "--new-dataset-for-same-data", "--yes")


def speaks_python(hint: str | None) -> str:
    assert hint and not any(flag in hint for flag in CLI_FLAGS), hint
    return hint


def test_an_existing_output_is_refused_in_python_words(tmp_path: Path) -> None:
    s = pm.Session(random_trips(30, 9, seed=1), tessellation=zones(), budget=10, dataset="t",
                   ledger=str(tmp_path / "l.sqlite"))  # fmt: skip
    out = tmp_path / "od"
    s.od(epsilon=1, max_trips=3, output=out)
    with pytest.raises(OutputError) as refused:
        s.od(epsilon=1, max_trips=3, output=out)
    hint = speaks_python(refused.value.hint)
    assert "output=" in hint and "overwrite=True" in hint
    s.close()


def test_the_command_line_keeps_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trips = tmp_path / "trips.csv"
    random_trips(30, 9, seed=1).to_csv(trips, index=False)
    tess = tmp_path / "zones.geojson"
    zones().to_file(tess, driver="GeoJSON")
    ledger = str(tmp_path / "l.sqlite")
    assert (
        run_cli(["ledger", "init", "t", "--epsilon", "10", "--ledger", ledger, "--make-key"]) == 0
    )
    argv = ["od", str(trips), "--tessellation", str(tess), "--epsilon", "1", "--max-trips", "3",
            "--ledger", ledger, "--dataset", "t", "--output", str(tmp_path / "od")]  # fmt: skip
    assert run_cli(argv) == 0
    capsys.readouterr()
    assert run_cli(argv) == 4
    err = capsys.readouterr().err
    assert "choose another --output (or pass --overwrite" in err and "overwrite=True" not in err
    # and after the command, Python is Python again
    assert option("overwrite") == "overwrite=True"
    with command_line():
        assert option("dataset", "A") == "--dataset A"
    assert option("dataset", "A") == 'dataset="A"'


def test_the_same_records_under_another_dataset_are_refused_in_python_words(
    tmp_path: Path,
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    trips = random_trips(60, 9, seed=2)
    a = pm.Session(trips, tessellation=zones(), budget=10, dataset="A", ledger=ledger)
    a.od(epsilon=1, max_trips=3)
    a.close()
    b = pm.Session(trips, tessellation=zones(), budget=10, dataset="B", ledger=ledger)
    with pytest.raises(BudgetError) as refused:
        b.od(epsilon=1, max_trips=3)
    hint = speaks_python(refused.value.hint)
    assert 'dataset="A"' in hint and "new_dataset_for_same_data=True" in hint
    b.close()


def test_a_warned_plan_is_refused_in_python_words() -> None:
    s = pm.Session(random_trips(30, 9, seed=1), tessellation=zones(), budget=10, dataset="t")
    with pytest.raises(ConfigError) as refused:
        s.od(epsilon=0.05, max_trips=3)
    hint = speaks_python(refused.value.hint)
    assert "confirm=True" in hint and "epsilon=" in hint
    s.close()


def test_every_warning_of_the_session_points_at_the_callers_line(tmp_path: Path) -> None:
    folder = tmp_path / "trips"
    folder.mkdir()
    random_trips(30, 9, seed=1).to_csv(folder / "part-1.csv", index=False)
    (folder / "README.md").write_text("not data\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a tiny epsilon, confirmed: a PrivmobWarning (the plan's) before the charge
        s = pm.Session(str(folder), tessellation=zones(), budget=10, dataset="t", confirm=True)
        s.od(epsilon=0.05, max_trips=3)  # the input folder's skipped file: a PrivmobWarning
        s.od_matrix(epsilon=1, max_trips=3)  # an old name: a DeprecationWarning
        s.close()
    planned = [w for w in caught if "below 0.1" in str(w.message)]
    skipped = [w for w in caught if "not data were skipped" in str(w.message)]
    renamed = [w for w in caught if "od_matrix is deprecated" in str(w.message)]
    assert planned and skipped and renamed, [str(w.message)[:60] for w in caught]
    for w in planned + skipped + renamed:
        assert w.filename == __file__, (str(w.message)[:60], w.filename, w.lineno)


def test_an_old_ledger_opened_by_the_session_warns_at_the_callers_line(tmp_path: Path) -> None:
    import sqlite3

    from privmob.privacy.ledger import LedgerMigrated
    from tests.privacy.test_ledger_bound import FIRST_SCHEMA

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript(FIRST_SCHEMA)
    con.execute("INSERT INTO budgets VALUES ('d', 2.0, 0.0, 'user', '2026-01-01', '')")
    con.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = pm.Session(random_trips(10, 9, seed=1), tessellation=zones(), ledger=str(path),
                       dataset="d")  # fmt: skip
        s.close()
    migrated = [w for w in caught if issubclass(w.category, LedgerMigrated)]
    assert migrated, [str(w.message)[:60] for w in caught]
    assert all(w.filename == __file__ for w in migrated), [(w.filename, w.lineno) for w in migrated]
