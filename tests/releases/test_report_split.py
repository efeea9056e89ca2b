"""The report's budget split from target margins (``--target-margin``, ``target_margins=``):
solved before reading from public parameters, met by the release's own noise, and said in
the plan when this epsilon cannot meet them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import run_cli
from tests.releases.test_report import (
    gdf,  # noqa: F401  (fixture)
    synth,
    tiles,  # noqa: F401  (fixture)
)
from tests.releases.test_report_composition import _run, _zero_counts

import privmob as pm
from privmob.errors import ConfigError
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.samplers import Randomness
from privmob.releases.report import ReportConfig, ReportSpec
from privmob.releases.report.composition import plan_composition
from privmob.releases.report.split import (
    build_config,
    expected_margin,
    needed_epsilon,
    planned_margins,
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


# -- under zCDP composition: each target with the noise the composition plan gives it ----------


def test_a_zcdp_target_is_solved_with_the_plans_gaussian() -> None:
    """od_flows with an OD cell cap gains from Gaussian noise: its target is met by the plan's
    sigma at about half the epsilon Laplace would need, and not a drop less would do."""
    cfg = _cfg(delta=1e-5, od_cell_cap=2, target_margins={"od_flows": 150})
    plan = plan_composition(cfg)
    c = plan.choice("od_flows", "counts")
    assert c.gaussian and c.margin <= 150
    assert planned_margins(cfg, plan)["od_flows"] == (c.margin, "discrete-gaussian")
    assert unmet_targets(cfg) == []
    eps = cfg.epsilon_for("od_flows")
    assert eps < 0.5 * needed_epsilon("od_flows", 150, cfg)  # Laplace's need: 0.199
    assert expected_margin("od_flows", eps, cfg) > 300  # the Laplace margin at this epsilon
    less = dataclasses.replace(cfg, weights={**cfg.weights, "od_flows": eps * 0.99})
    assert plan_composition(less).choice("od_flows", "counts").margin > 150
    assert sum(cfg.epsilon_for(a) for a in cfg.selected) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "targets",
    [{"travel_time": 1000}, {"od_flows": 100, "trips_per_hour": 1200}, {"od_flows": 300}],
)
def test_zcdp_targets_are_met_by_the_plan_with_no_more_epsilon_than_laplace(targets) -> None:
    cfg = _cfg(delta=1e-5, od_cell_cap=1, target_margins=targets)
    margins = planned_margins(cfg)
    for name, target in targets.items():
        assert margins[name][0] <= target
        assert cfg.epsilon_for(name) <= needed_epsilon(name, target, cfg)
    assert unmet_targets(cfg) == []


def test_a_zcdp_target_holds_on_the_noise_the_report_draws(tiles) -> None:  # noqa: F811
    """od_flows' noise as the report's noise step draws it (:func:`~.analyses.counts` with the
    plan's noise) on zero counts, 1,500 seeded runs of k^2 + 1 = 17 cells (25,500 draws). The
    share within the planned margin m has mean p = P(|noise| <= m) (0.95 to 0.952 for this
    sigma) and a standard deviation sqrt(p (1 - p) / n) = 0.0014; the test allows +-0.008
    (5.9 standard deviations: a false failure about 4e-9 of the time; the seeds are fixed, so it
    passes or fails the same way every run). A margin off by 2x either way fails: with twice
    the sigma the share within m is about 0.67, with half the sigma about 0.9999."""
    from privmob.privacy.payment import paid
    from privmob.releases.report.analyses import counts, sensitivity

    cfg = _cfg(delta=1e-5, od_cell_cap=2, same_tile="include", target_margins={"od_flows": 150})
    c = plan_composition(cfg).choice("od_flows", "counts")
    assert c.gaussian and c.margin <= 150
    p = 1 - c.noise.tail(c.margin)
    assert 0.95 <= p < 0.953
    exact = _zero_counts(cfg, tiles)["od_flows"]
    eps, l1 = cfg.epsilon_for("od_flows"), sensitivity("od_flows", cfg)
    with paid():
        draws = [
            counts("od_flows", exact, eps, l1, cfg, Randomness.for_tests(seed), c.noise)[0]
            for seed in range(1500)
        ]
    x = np.abs(np.concatenate(draws))
    assert x.size == 25_500
    within = float(np.mean(x <= c.margin))
    assert abs(within - p) < 0.008, within
    for wrong in (2 * c.noise.scale, c.noise.scale / 2):  # the share a 2x error would give
        p_wrong = 1 - Noise(NoiseKind.DISCRETE_GAUSSIAN, wrong).tail(c.margin)
        assert abs(within - p_wrong) > 0.04


def test_the_zcdp_plan_says_each_margin_its_mechanism_and_the_unmet_targets(gdf) -> None:  # noqa: F811
    met = _cfg(delta=1e-5, od_cell_cap=2, target_margins={"od_flows": 150})
    notes = " ".join(ReportSpec(gdf, met).plan().notes)
    assert "expected 95% margins (zCDP composition, delta 1e-05" in notes
    margin = planned_margins(met)["od_flows"][0]
    assert f"od_flows ±{margin} Gaussian (target ±150: met)" in notes
    trips = planned_margins(met)["trips_over_time"]
    assert f"trips_over_time ±{trips[0]:,} {'Gaussian' if 'gauss' in trips[1] else 'Laplace'}," in (
        notes
    )
    unmet = _cfg(delta=1e-5, od_cell_cap=2, target_margins={"od_flows": 20, "travel_time": 30})
    (note,) = target_notes(unmet)
    assert sorted(unmet_targets(unmet)) == ["od_flows", "travel_time"]
    assert "(target ±20: NOT met)" in note and "(target ±30: NOT met)" in note
    assert "not met at epsilon 1: od_flows, travel_time" in note
    assert "need about epsilon" in note and "at this plan's mechanisms" in note


def test_a_split_solved_under_zcdp_is_charged_once_before_its_noise(gdf, tiles) -> None:  # noqa: F811
    """The release of a split solved under zCDP: its cost is the plan's (two ledger entries, the
    pure and the rho part, epsilon 1 in all), its params say the targets, and the margin the
    release publishes for od_flows is the plan's."""
    cfg = _cfg(delta=1e-5, od_cell_cap=2, target_margins={"od_flows": 150})
    plan = plan_composition(cfg)
    rel = _run(synth(20, seed=2), gdf, tiles, cfg, (10, 1e-4))
    assert [e.cost.rho for e in rel.ledger_entries] == [None, plan.rho]
    assert rel.cost.epsilon == pytest.approx(1.0, rel=1e-7)
    assert rel.params["target_margins"] == {"od_flows": 150.0}
    od = rel.extra["analyses"]["od_flows"]
    assert od["margin_of_error_95"]["counts"] == plan.choice("od_flows", "counts").margin <= 150
