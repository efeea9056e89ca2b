"""A plan whose 95% margin exceeds the signal the user expects per cell is shown before any data
is read and, with ``--max-margin`` (Python: ``max_margin=``), refused: nothing read or charged."""

from __future__ import annotations

import pytest
from tests.helpers import run_cli
from tests.test_session import Unreadable, zones

import privmob as pm
from privmob.errors import ConfigError
from privmob.privacy.ledger import Ledger


@pytest.fixture
def dpmr(shared_data):
    d = shared_data / "dpmr_fixture"
    return str(d / "test_data.csv"), str(d / "test_tessellation.geojson")


def test_the_cli_refuses_a_margin_above_the_maximum_before_reading(tmp_path, dpmr, capsys):
    data, tess = dpmr
    ledger = tmp_path / "ledger.sqlite"
    argv = ["od", data, "-t", tess, "-e", "1", "-T", "3", "--budget", "5", "--dataset", "d"]
    argv += ["--ledger", str(ledger), "-o", str(tmp_path / "od")]
    assert run_cli([*argv, "--max-margin", "5"]) == 2  # margin +-9 at epsilon 1, T = 3
    err = capsys.readouterr().err
    assert "95% margin of error is +/-9.0 per cell, above the maximum margin 5.0" in err
    assert "nothing was read or charged" in err
    # the plan was shown first, with what the margin means
    assert "plan: " in err and "told from an empty one only above 9" in err
    assert not (tmp_path / "od").exists() and not Ledger(ledger).has_budget("d")
    assert run_cli([*argv, "--max-margin", "9", "--quiet"]) == 0


def test_plan_release_refuses_it_too(dpmr, capsys):
    _data, tess = dpmr
    assert run_cli(["plan", "od", "-t", tess, "-e", "1", "-T", "3", "--max-margin", "5"]) == 2
    out = capsys.readouterr()
    assert "told from an empty one only above 9" in out.out
    assert "above the maximum margin 5.0" in out.err


def test_the_session_refuses_it_before_reading() -> None:
    s = pm.Session(Unreadable(), tessellation=zones(), budget=10, dataset="x", max_margin=5)
    with pytest.raises(ConfigError, match=r"above the maximum margin 5\.0"):
        s.od_matrix(epsilon=1, max_trips=3)  # Unreadable raises if the data were read
    assert s.ledger.spent() == 0
    s.close()
