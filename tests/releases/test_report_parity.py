"""Library parity (issue 28, item 5): every option of ``privmob report`` is a keyword of
``Session.report``, and both give the same report for the same test seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import privmob as pm
from privmob.errors import ConfigError

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "dpmr_fixture"
PERIOD = ("2020-12-01", "2021-01-01")


@pytest.fixture
def fixture_dir() -> Path:
    if not FIXTURE.exists():
        pytest.skip(f"../shared/data not found: {FIXTURE}")
    return FIXTURE


def test_session_report_equals_the_command_with_weights_ranges_and_time_windows(
    tmp_path: Path, fixture_dir: Path
) -> None:
    from tests.helpers import run_cli

    data, tess = fixture_dir / "test_data.csv", fixture_dir / "test_tessellation.geojson"
    code = run_cli(
        [
            "report", str(data), "-t", str(tess), "-e", "2", "-T", "5",
            "--start", PERIOD[0], "--end", PERIOD[1],
            "--budget-split", "od_flows=3,visits_per_tile=2",
            "--range", "travel_time=0:120:10,jump_length=0:20:2",
            "--time-windows", "0,8,12,20",
            "--analyses", "trips_over_time,visits_per_tile,visits_per_time_tile,od_flows,"
            "travel_time,jump_length,dataset_statistics",
            "--same-tile", "include",
            "--test-mode", "--seed", "11", "--budget", "100", "--quiet",
            "-o", str(tmp_path / "cli" / "report.html"),
        ]
    )  # fmt: skip
    assert code == 0
    cli = json.loads((tmp_path / "cli" / "report.json").read_text())

    with pm.Session(data, tessellation=tess, budget=100, seed=11) as s:
        s.report(
            epsilon=2,
            max_trips=5,
            period=pm.Period(*PERIOD),
            weights={"od_flows": 3, "visits_per_tile": 2},
            ranges={"travel_time": (0, 120, 10), "jump_length": (0, 20, 2)},
            time_windows=[0, 8, 12, 20],
            analyses=[
                "trips_over_time",
                "visits_per_tile",
                "visits_per_time_tile",
                "od_flows",
                "travel_time",
                "jump_length",
                "dataset_statistics",
            ],
            same_tile="include",
            output=tmp_path / "lib" / "report.html",
        )
    lib = json.loads((tmp_path / "lib" / "report.json").read_text())

    assert lib["analyses"] == cli["analyses"]  # every noisy value, epsilon, margin and bin
    assert lib["params"] == cli["params"]
    # and the options took effect (weights 3 + 2 + 5 x 1 = 10)
    a = lib["analyses"]
    assert a["od_flows"]["epsilon"] == pytest.approx(2 * 3 / 10)
    assert a["visits_per_tile"]["epsilon"] == pytest.approx(2 * 2 / 10)
    assert a["travel_time"]["edges"][-1] == 120 and a["jump_length"]["edges"][-1] == 20
    assert lib["params"]["time_windows"] == [0, 8, 12, 20]
    k = len(lib["domain"]["tile_ids"])
    assert len(a["visits_per_time_tile"]["counts"]) == k * 2 * 4
    assert len(a["od_flows"]["counts"]) == k * k
    assert set(a) == {
        "trips_over_time", "visits_per_tile", "visits_per_time_tile", "od_flows",
        "travel_time", "jump_length", "dataset_statistics",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"ranges": {"travel_time": (0, 120)}}, "the range of travel_time is"),
        ({"ranges": {"travel_time": (0, "x", 5)}}, "cannot read the range"),
        ({"weights": {"od_flows": "much"}}, "cannot read the budget weight"),
        ({"weights": {"od_flows": 0}}, "budget weights must"),
        ({"time_windows": [8, 2]}, "time windows must be increasing"),
        ({"max_trips": None}, "user-level privacy needs max_trips"),
        ({"period": pm.Period()}, "needs a declared study period"),
    ],
)
def test_session_report_refuses_bad_options_before_reading(
    fixture_dir: Path, keywords: dict[str, object], message: str
) -> None:
    tess = fixture_dir / "test_tessellation.geojson"
    with pm.Session(fixture_dir / "test_data.csv", tessellation=tess, budget=1, seed=1) as s:
        args: dict[str, object] = {"epsilon": 1, "max_trips": 5, "period": pm.Period(*PERIOD)}
        with pytest.raises(ConfigError, match=message):
            s.plan_report(**{**args, **keywords})  # type: ignore[arg-type]
        assert s._accountant.ledger.entries(s._accountant.dataset) == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--time-windows", "2,x"], "cannot read the time window hour 'x'"),
        (["--range", "travel_time=0:x:5"], "cannot read the range"),
        (["--budget-split", "od_flows"], "cannot read weight"),
    ],
)
def test_command_refuses_bad_report_options_in_one_line(
    tmp_path: Path,
    fixture_dir: Path,
    capsys: pytest.CaptureFixture[str],
    option: list[str],
    message: str,
) -> None:
    # main 5ae73e2 ended "--time-windows 2,x" with an internal error (exit 1, a ValueError)
    from tests.helpers import run_cli

    out = tmp_path / "r" / "report.html"
    code = run_cli(
        [
            "report", str(fixture_dir / "test_data.csv"), "-t",
            str(fixture_dir / "test_tessellation.geojson"), "-e", "1", "-T", "5",
            "--start", PERIOD[0], "--end", PERIOD[1], *option,
            "--test-mode", "--seed", "1", "-o", str(out),
        ]
    )  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and message in err and "Traceback" not in err
    assert not out.parent.exists()
