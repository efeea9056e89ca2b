"""The report's budget split from target margins (``--target-margin``, ``target_margins=``):
solved before reading from public parameters, met by the release's own noise, and said in
the plan when this epsilon cannot meet them."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import run_cli

import privmob as pm
from privmob.errors import ConfigError
from privmob.releases.report import ReportConfig
from privmob.releases.report.split import (
    build_config,
    expected_margin,
    needed_epsilon,
    target_notes,
    unmet_targets,
)
from privmob.render.report_files import report_document

PERIOD = ("2020-12-01", "2021-01-01")


def _cfg(**options) -> ReportConfig:
    return build_config(epsilon=1.0, max_trips=10, period=PERIOD, **options)


def test_met_targets_get_the_least_epsilon_that_meets_them() -> None:
    cfg = _cfg(target_margins={"od_flows": 200, "visits_per_tile": 300})
    assert unmet_targets(cfg) == []
    for name, target in cfg.target_margins.items():
        eps = cfg.epsilon_for(name)
        assert expected_margin(name, eps, cfg) <= target
        assert expected_margin(name, eps * 0.99, cfg) > target  # not a drop more than needed
    assert sum(cfg.epsilon_for(a) for a in cfg.selected) == pytest.approx(1.0)
    others = {cfg.epsilon_for(a) for a in cfg.selected if a not in cfg.target_margins}
    assert len({round(e, 12) for e in others}) == 1  # the rest shared equally


def test_a_margin_halved_needs_about_twice_the_epsilon() -> None:
    """Laplace margins scale as 1/epsilon: a split off by a factor 2 fails here."""
    cfg = _cfg()
    ratio = needed_epsilon("od_flows", 50, cfg) / needed_epsilon("od_flows", 100, cfg)
    assert ratio == pytest.approx(2.0, rel=0.03)


def test_targets_this_epsilon_cannot_meet_come_first_and_are_named() -> None:
    cfg = _cfg(target_margins={"od_flows": 60, "visits_per_tile": 100})
    assert sorted(unmet_targets(cfg)) == ["od_flows", "visits_per_tile"]
    targeted = cfg.epsilon_for("od_flows") + cfg.epsilon_for("visits_per_tile")
    assert targeted == pytest.approx(1 - 13 * 0.1 / 15)  # the 13 others keep a tenth share
    (note,) = target_notes(cfg)
    assert "not met at epsilon 1: od_flows, visits_per_tile" in note
    need = needed_epsilon("od_flows", 60, cfg) + needed_epsilon("visits_per_tile", 100, cfg)
    assert f"need epsilon {need:.3g}" in note


def test_weights_and_targets_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        _cfg(weights={"od_flows": 3}, target_margins={"od_flows": 50})


@pytest.mark.parametrize("bad", [{"od_flow": 50}, {"od_flows": 0}, {"od_flows": -5}])
def test_bad_targets_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        _cfg(target_margins=bad)


def test_the_release_publishes_the_margins_the_plan_expected(shared_data: Path) -> None:
    fixture = shared_data / "dpmr_fixture"
    targets = {"od_flows": 12.0, "travel_time": 40.0}
    with pm.Session(str(fixture / "test_data.csv"), budget=pm.PureDP(50), dataset="split",
                    tessellation=str(fixture / "test_tessellation.geojson")) as s:  # fmt: skip
        args = {"epsilon": 5, "max_trips": 5, "period": pm.Period(*PERIOD)}
        plan = s.plan_report(**args, target_margins=targets)
        said = plan.summary()
        assert "od_flows ±12 (target ±12: met)" in said
        assert "travel_time ±40 (target ±40: met)" in said
        result = s.report(**args, target_margins=targets)
    doc = report_document(result.release)
    assert doc["params"]["target_margins"] == targets
    margins = {name: a["margin_of_error_95"] for name, a in doc["analyses"].items()}
    assert margins["od_flows"]["counts"] <= 12
    assert margins["travel_time"]["histogram"] <= 40
    assert result.metadata.cost.epsilon == pytest.approx(5)  # the split spends the total


def test_the_command_takes_target_margins(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = shared_data / "dpmr_fixture"
    code = run_cli([
        "report", str(fixture / "test_data.csv"), "-t", str(fixture / "test_tessellation.geojson"),
        "--epsilon", "1", "--max-trips", "5", "--start", PERIOD[0], "--end", PERIOD[1],
        "--target-margin", "od_flows=5", "-o", str(tmp_path / "r.html"),
        "--ledger", str(tmp_path / "l.sqlite"), "--budget", "10",
    ])  # fmt: skip
    out = capsys.readouterr()
    said = out.out + out.err
    assert code == 0, said
    assert "od_flows ±" in said and "(target ±5: NOT met)" in said, said
