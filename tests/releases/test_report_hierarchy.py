"""od_flows of the mobility report over a hierarchy of public zones (``report --hierarchy``,
issue 40 item 5): the guarantees of ``od --hierarchy`` (test_od_hierarchy.py), checked for both
releases where they are the same (levels consistent, cost unchanged, refused before reading,
one charge before any noise), and the report's own (the tables, byte-equal without it)."""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box
from tests.releases.test_od_hierarchy import districts_gdf
from tests.releases.test_one_gate import spied

import privmob as pm
from privmob.cli import main
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError
from privmob.privacy.ledger import Ledger
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import resolve
from privmob.releases.hierarchy import zone_levels
from privmob.releases.report import ReportConfig
from privmob.releases.report.levels import OdLevels, od_flows_levels

WEEK = ("2024-01-01", "2024-01-10")
ROW = {t: f"row{t // 4}" for t in range(16)}
RELEASES = ("od", "report")


def points(n_users: int = 200, seed: int = 5) -> pd.DataFrame:
    """Trip points between tile centres of rows 0-2 of the 4 x 4 grid (row3 has none)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for t in range(int(rng.integers(1, 6))):
            o, d = rng.choice(12, 2, replace=False)
            ts = pd.Timestamp("2024-01-02 08:00") + pd.Timedelta(minutes=int(rng.integers(0, 5000)))
            for tile, when in ((o, ts), (d, ts + pd.Timedelta(minutes=20))):
                r, c = divmod(int(tile), 4)
                rows.append((u, f"{u}-{t}", when, 52 + (r + 0.5) * 0.01, 13 + (c + 0.5) * 0.01))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def session(data: Any = None, seed: int = 3) -> pm.Session:
    return pm.Session(
        points() if data is None else data,
        tessellation=districts_gdf(),
        ledger=pm.LedgerOptions(dataset="d", budget=pm.PureDP(10)),
        seed=seed,
    )


def run(s: pm.Session, release: str, plan: bool = False, **kw: Any) -> Any:
    """``release`` (od or report) at epsilon 0.7, T 5 (``plan``: its plan)."""
    common = {"epsilon": 0.7, "per_user": pm.PerUser(5, "trips"), **kw}
    if release == "od":
        return (s.plan_od if plan else s.od)(**common)
    method = s.plan_report if plan else s.report
    return method(period=pm.Period(*WEEK), **common)


def fine_and_coarse(rel: Any, release: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The fine table, the district table and the name of their count column."""
    t = rel.release.tables
    if release == "od":
        return t["od"], t["od_district"], "count"
    fine = t["od_flows"]
    return fine[fine["origin"] != "outliers"], t["od_flows_by_district"], "trips"


@pytest.mark.parametrize("release", RELEASES)
def test_levels_are_consistent_and_non_negative(release):
    rel = run(session(), release, hierarchy="district")
    fine, district, col = fine_and_coarse(rel, release)
    assert (fine[col] >= 0).all() and (district[col] >= 0).all()
    assert len(district) == 16 and "row3" in set(district["origin"])
    origin, dest = (fine[c].astype(int).map(ROW) for c in ("origin", "destination"))
    sums = fine.groupby([origin, dest])[col].sum()
    got = district.set_index(["origin", "destination"])[col]
    np.testing.assert_allclose(sums.reindex(got.index).fillna(0).to_numpy(), got, atol=1e-8)
    assert (district["margin_95"] >= 0).all() and (fine["margin_95"] > 0).all()


@pytest.mark.parametrize("release", RELEASES)
def test_the_hierarchy_costs_what_the_release_costs_without_it(release):
    s = session()
    assert run(s, release, True, hierarchy="district").cost == run(s, release, True).cost
    rel = run(s, release, hierarchy="district")
    entries = list(s._accountant.ledger.entries("d"))
    assert rel.release.cost.epsilon == pytest.approx(0.7)
    assert len(entries) == 1 and entries[0].cost.epsilon == pytest.approx(0.7)


@pytest.mark.parametrize("release", RELEASES)
def test_one_charge_before_any_noise(release, monkeypatch):
    s = session()
    with spied(monkeypatch) as spy:
        run(s, release, hierarchy="district")
    assert spy.charges == 1 and spy.draws
    assert [name for name, committed in spy.draws if not committed] == []


@pytest.mark.parametrize("release", RELEASES)
def test_a_missing_column_is_refused_before_anything_is_read(release, tmp_path):
    (tmp_path / "trips.csv").write_text("not,a\ntrips,file\n")  # reading it would fail
    s = session(str(tmp_path / "trips.csv"))
    with pytest.raises(ConfigError, match="no column 'borough'") as err:
        run(s, release, hierarchy="borough")
    assert "district" in (err.value.hint or "")


def test_cli_report_missing_column_is_refused_before_the_input_is_opened(tmp_path, capsys):
    (tmp_path / "trips.csv").write_text("not a csv file")
    districts_gdf().to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    args = ["report", str(tmp_path / "trips.csv"), "-t", str(tmp_path / "grid.geojson"),
            "-e", "1", "-T", "5", "--start", WEEK[0], "--end", WEEK[1], "--budget", "10",
            "--dataset", "d", "--ledger", str(tmp_path / "l.sqlite"),
            "-o", str(tmp_path / "r.html"), "--quiet", "--hierarchy", "borough"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "no column 'borough'" in err and "Traceback" not in err
    assert Ledger(tmp_path / "l.sqlite").entries("d") == []


def test_cli_report_writes_the_coarser_level(tmp_path, capsys):
    points().to_csv(tmp_path / "trips.csv", index=False)
    districts_gdf().to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    args = ["report", str(tmp_path / "trips.csv"), "-t", str(tmp_path / "grid.geojson"),
            "-e", "1", "-T", "5", "--start", WEEK[0], "--end", WEEK[1], "--budget", "10",
            "--dataset", "d", "--ledger", str(tmp_path / "l.sqlite"),
            "-o", str(tmp_path / "r.html"), "--hierarchy", "district",
            "--hierarchy-weights", "district=1,tile=1"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code in (0, None), capsys.readouterr().err
    district = pd.read_parquet(tmp_path / "r_tables" / "od_flows_by_district.parquet")
    assert len(district) == 16 and {"trips", "margin_95", "least_squares"} <= set(district)
    import json

    doc = json.loads((tmp_path / "r.json").read_text())
    od = doc["analyses"]["od_flows"]
    assert [lv["table"] for lv in od["hierarchy"]["levels"]] == ["od_flows_by_district", "od_flows"]
    assert len(od["levels"]["od_flows_by_district"]["trips"]) == 16
    assert doc["params"]["hierarchy"] == ["district"]
    assert [lv["share"] for lv in od["hierarchy"]["levels"]] == [0.5, 0.5]
    assert Ledger(tmp_path / "l.sqlite").spent("d").epsilon == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"analyses": ["visits_per_tile"]}, "this report has none"),
        ({"delta": 1e-6}, "zCDP"),
        ({"delta": 1e-6, "od_cell_cap": 2}, "zCDP"),
        ({"target_margins": {"od_flows": 50}}, "target margins"),
    ],
)
def test_the_report_refuses_what_it_does_not_offer_with_a_hierarchy(kw, match):
    with pytest.raises(ConfigError, match=match):
        run(session(), "report", True, hierarchy="district", **kw)


def test_the_weights_split_the_levels_and_leave_the_cost_alone():
    s = session()
    weights = {"district": 1.0, "tile": 3.0}
    plan = run(s, "report", True, hierarchy="district", hierarchy_weights=weights)
    assert plan.cost == run(s, "report", True).cost
    assert "district 25%" in next(n for n in plan.notes if n.startswith("od_flows over"))
    rel = run(s, "report", hierarchy="district", hierarchy_weights=weights).release
    assert rel.params["hierarchy_weights"] == weights
    levels = rel.extra["analyses"]["od_flows"]["hierarchy"]["levels"]
    assert [lv["share"] for lv in levels] == [0.25, 0.75]
    # each level's scale is M / (share x epsilon_od): the shares compose to epsilon_od
    eps_od = 0.7 / 15
    assert sum(5 / lv["noise_scale"] for lv in levels) == pytest.approx(eps_od, rel=1e-9)
    with pytest.raises(ConfigError, match="there are none"):
        run(s, "report", True, hierarchy_weights=weights)
    with pytest.raises(ConfigError, match="weight"):
        run(s, "report", True, hierarchy="district", hierarchy_weights={"district": 1.0})


def test_a_trip_level_report_splits_epsilon_at_sensitivity_one():
    tess = load_tessellation(districts_gdf())
    cfg = ReportConfig.build(epsilon=0.7, max_trips=None, period=WEEK, unit="trip")
    plan = OdLevels.plan(cfg, zone_levels(tess, ["district"]), tess.k)
    eps_od = 0.7 / 10  # the 10 analyses a trip-level report releases
    assert cfg.epsilon_for("od_flows") == pytest.approx(eps_od)
    assert sum(1 / n.scale for n in plan.noises) == pytest.approx(eps_od, rel=1e-9)


def test_the_report_refuses_a_bound_chosen_privately_with_a_hierarchy():
    s = session()
    with pytest.raises(ConfigError, match="chosen privately"):
        s.plan_report(epsilon=1, per_user=pm.PerUser("auto", "trips"),
                      period=pm.Period(*WEEK), hierarchy="district")  # fmt: skip


def test_without_the_option_the_report_is_what_it_was():
    """The same seed, the same tables and parameters (the golden files cover more inputs)."""
    plain = run(session(), "report").release
    assert "od_flows_by_district" not in plain.tables and "hierarchy" not in plain.params
    assert list(plain.tables["od_flows"].columns) == ["origin", "destination", "trips"]
    assert plain.tables["od_flows"]["trips"].dtype == np.int64


def quadrants(n: int = 10) -> Any:
    rows, cols = np.divmod(np.arange(n * n), n)
    return load_tessellation(
        gpd.GeoDataFrame(
            {"tile_id": np.arange(n * n), "quadrant": [f"q{r // 5}{c // 5}" for r, c in
                                                      zip(rows, cols, strict=True)]},
            geometry=[box(13 + c * 0.01, 52 + r * 0.01, 13 + (c + 1) * 0.01, 52 + (r + 1) * 0.01)
                      for r, c in zip(rows, cols, strict=True)],
            crs="EPSG:4326",
        )
    )  # fmt: skip


def test_the_coarse_level_is_more_accurate_than_the_sums_of_noisy_cells():
    """A 10 x 10 grid in 4 quadrants (625 fine cells under a quadrant pair, 600 on the
    diagonal pairs); od_flows' epsilon 1/15 with M 10. The report's quadrant estimates
    (default split: 10% to the quadrants) against the sums of the fine cells of a report
    without the hierarchy (Laplace of scale 150 each: variance 45,000 x 625 = 2.8e7 per
    pair), 40 seeds x 16 pairs = 640 errors each. Expected variance of the consistent
    estimate: 1 / (1 / (2 x 1500^2) + 1 / (2 x 167^2 x 625)) = 4.0e6 (the quadrants' scale
    10 / (0.1 / 15), the tiles' 10 / (0.9 / 15)), 7 times less; asserting 3 times less: each
    mean squared error over 640 near-normal errors has a relative standard error about
    sqrt(2 / 640) = 0.06, so a ratio of 3 instead of 7 is over 10 standard errors away:
    false-failure rate below 1e-15 (and the seeds are fixed)."""
    tess = quadrants()
    cfg = ReportConfig.build(epsilon=1, max_trips=10, period=WEEK)
    plan = OdLevels.plan(cfg, zone_levels(tess, ["quadrant"]), tess.k)
    k = tess.k
    rng = np.random.default_rng(0)
    exact = np.zeros(k * k + 1, dtype=np.int64)
    exact[plan.tree.cells] = rng.integers(1000, 2000, len(plan.tree.cells))
    parents = plan.tree.tree.parents[0]
    truth = np.bincount(parents, exact[plan.tree.cells], plan.tree.tree.sizes[0])
    plain = calibrate(NoiseKind.DISCRETE_LAPLACE, cfg.epsilon_for("od_flows"), l1_sensitivity=10)[0]
    ours, sums = [], []
    for seed in range(40):
        _fine, _res, tables, _ = od_flows_levels(exact, cfg, plan, resolve(seed))
        ours.append(tables["od_flows_by_quadrant"]["trips"].to_numpy() - truth)
        noisy = plain.add(exact, resolve(1000 + seed))[plan.tree.cells]
        sums.append(np.bincount(parents, noisy, plan.tree.tree.sizes[0]) - truth)
    mse_ours, mse_sums = np.mean(np.concatenate(ours) ** 2), np.mean(np.concatenate(sums) ** 2)
    assert mse_ours * 3 < mse_sums
    assert plan.shares == (0.1, 0.9)


def test_the_library_parts_refuse_a_hierarchy_without_its_levels(tmp_path):
    """``mobility_report`` called directly with a config's hierarchy but no levels (or levels
    without one) is refused before the charge: never a report that says what it did not do."""
    from privmob.engine import DuckDBEngine
    from privmob.releases.base import Accountant
    from privmob.releases.report import Tiles, mobility_report

    tess = load_tessellation(districts_gdf())
    ledger = Ledger(tmp_path / "l.sqlite")
    cfg = ReportConfig.build(epsilon=1, max_trips=5, period=WEEK, hierarchy="district")
    with pytest.raises(ConfigError, match="needs its levels"):
        mobility_report(DuckDBEngine(), "points", Tiles.from_tessellation(tess), cfg,
                        Accountant(ledger, "d", budget=5))  # fmt: skip
    assert ledger.entries("d") == []
