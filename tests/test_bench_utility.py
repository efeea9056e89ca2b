"""The utility benchmark (benchmarks/bench_utility.py, docs/utility.md) at a tiny size: its city
generator writes the same trips in both shapes, its measures score what they say, and its privmob
side runs end to end through the public API (so an API change breaks this test, not the
benchmark found broken when the next accuracy work needs its baseline)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import shared_data_dir

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import city_synth  # noqa: E402
import utility_metrics as um  # noqa: E402

ZONES = shared_data_dir() / "nyc_taxi_zones" / "taxi_zones.geojson"
pytestmark = pytest.mark.skipif(not ZONES.exists(), reason="needs ../shared/data/nyc_taxi_zones")


@pytest.fixture(scope="module")
def city(tmp_path_factory: pytest.TempPathFactory) -> tuple[city_synth.CityConfig, object]:
    cfg = city_synth.CityConfig(users=300, days=7, tessellation=str(ZONES), seed=3)
    return cfg, city_synth.write_city(tmp_path_factory.mktemp("city"), cfg)


def test_city_has_the_same_trips_in_both_shapes(city) -> None:
    cfg, files = city
    trips, points = pd.read_parquet(files.trips), pd.read_parquet(files.points)
    assert files.n_trips == len(trips) and len(points) == 2 * len(trips)
    first = points.sort_values("datetime").groupby(["uid", "tid"]).datetime.first()
    assert (first.to_numpy() == trips.set_index(["uid", "tid"]).start_time[first.index]).all()
    per_user = trips.groupby("uid").size()
    assert per_user.median() == pytest.approx(cfg.median_trips, abs=1.5)
    assert per_user.max() > 4 * per_user.median()  # the heavy tail
    # Zipf homes: the most popular zone's share is far above a uniform 1/263
    world = city_synth.ZipfCity(cfg)
    assert world.pop.max() > 10 / world.tess.k and world.jobs.max() > world.pop.max()


def test_measures() -> None:
    truth, est = np.array([100, 300, 0, 600]), np.array([120, 240, -30, 600])
    assert um.tv_distance(truth, truth) == 0
    # shares of (120, 240, 0, 600) / 960 against (0.1, 0.3, 0, 0.6)
    assert um.tv_distance(truth, est) == pytest.approx(0.5 * (0.025 + 0.05 + 0 + 0.025))
    assert um.top_k_recall(truth, est, 2) == 1.0
    assert um.top_k_recall(truth, np.array([600, 300, 0, 100]), 2) == 0.5  # {3, 1} vs {0, 1}
    assert um.large_cell_error(truth, est) == (pytest.approx(0.2), 3)  # 0.2, 0.2, 0.0
    fine_t, fine_e = pd.Series([1.0, 1.0, 2.0]), pd.Series([2.0, 0.0, 2.0])
    assert um.tv_distance(fine_t, fine_e) == 0.25
    assert um.grouped_tv(fine_t, fine_e, pd.Index(["a", "a", "b"])) == 0  # a: 2 vs 2, b: 2 vs 2
    # seed 004's sanity bound: gamma = 0.1% of the zone's weekly total (here 0.1)
    rel = um.density_relative_errors(np.array([[100.0, 0.0]]), np.array([[90.0, 1.0]]))
    assert rel.tolist() == [[pytest.approx(0.1), pytest.approx(10.0)]]
    t = pd.DataFrame(
        {"bin_lo": [1.0, 2.0, 3.0, np.nan], "count": [5, 3, 2, 0], "is_outliers": [0, 0, 0, 1]}
    ).astype({"is_outliers": bool})
    e = pd.DataFrame({"bin_lo": [1.0, 2.0, np.nan], "count": [4, 4, 1], "is_outliers": [0, 0, 1]})
    folded = um.folded_histogram(t, e.astype({"is_outliers": bool}))
    assert folded[0].tolist() == [5, 3, 2] and folded[1].tolist() == [4, 4, 1]


def test_privmob_side_runs_on_a_tiny_city(city) -> None:
    import bench_utility as bu

    cfg, files = city
    raw = bu.raw_truth(files)
    args = argparse.Namespace(
        epsilons=[1.0], repetitions=1, max_trips=5, bounds=["fixed", "auto", "auto+rescale"],
        bound_quantile=0.9, od_hierarchy=["default"],
    )  # fmt: skip
    rows = bu.privmob_runs(files, cfg, raw, args)
    releases = {(r["release"], r["analysis"]) for r in rows}
    assert {("od", "od"), ("counts", "origin x hour"), ("population", "homes")} <= releases
    assert {("od", "od (T auto q0.9)"), ("od", "od (T auto q0.9, rescaled)")} <= releases
    assert ("counts", "origin x hour (T auto q0.9, rescaled)") in releases
    assert {("report", a) for a in (*bu.COUNT_ANALYSES, "od_flows", *bu.DISTRIBUTIONS)} <= releases
    assert all(0 <= r["tv"] <= 1 for r in rows if "tv" in r)
    od = next(r for r in rows if r["release"] == "od")
    assert 0 <= od["borough_tv"] <= 1 and od["top50_recall"] >= 0
    (levels,) = (r for r in rows if r["analysis"].startswith("od + borough level"))
    assert 0 <= levels["borough_tv"] <= 1 and 0 <= levels["top50_covered"] <= 1
    assert bu.markdown(bu.table(rows)).count("\n") > 30


def test_density_side_runs_on_a_tiny_city() -> None:
    import bench_utility as bu

    args = argparse.Namespace(
        density_users=3_000, density_towers=20, density_grid=2, density_epsilons=[0.3],
        repetitions=1, density_commute_spread=1.0,
    )  # fmt: skip
    rows, by_hour, pc_by_hour = bu.density_rows(args)
    assert {r["analysis"] for r in rows} == set(bu.DENSITY_METHODS) == set(by_hour)
    assert set(pc_by_hour) == set(by_hour)
    assert all(len(v) == 168 for v in by_hour.values())
    assert all(len(v) == 168 for v in pc_by_hour.values())
    table = bu.density_hour_table(by_hour, pc_by_hour)
    assert table.count("\n") == 8  # header, rule, 6 blocks of 4 hours, the whole week
    week = table.splitlines()[-1]
    mre_all = f"{by_hour['EFPAG'].mean():.3f}"
    assert week.startswith("| whole week | " + mre_all + " / ")
    # Pearson is NaN where a tiny city's release is flat (docs/density.md): allowed here
    assert all(r["mre"] >= 0 and not abs(r["pearson"]) > 1 for r in rows)
    assert [r["clusters"] is None for r in rows] == [False, False, True]  # LPA: no clusters


GOWALLA = shared_data_dir() / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"


@pytest.mark.skipif(not GOWALLA.exists(), reason="needs ../shared/data/gowalla_nyc")
def test_real_part_runs_on_a_slice_of_gowalla(tmp_path: Path) -> None:
    """``--parts real`` on the first 150 Gowalla users: the truth counts every trip (nothing
    bounded, no noise) and every measure is finite, the shares' in [0, 1]."""
    import bench_utility as bu

    args = argparse.Namespace(
        epsilons=[1.0], repetitions=1, max_trips=10, bounds=["fixed"], bound_quantile=0.9,
        od_hierarchy=["default"], dpmr_epsilons=[],
    )  # fmt: skip
    rows, about = bu.real_part(args, users=150, out=tmp_path)
    (folder,) = tmp_path.iterdir()
    files = bu.CityFiles(folder / "trips.parquet", folder / "trip_points.parquet", 0, 0)
    trips, points = pd.read_parquet(files.trips), pd.read_parquet(files.points)
    assert len(trips) > 1_000 and len(points) == 2 * len(trips) and trips.uid.nunique() > 50
    assert f"{len(trips):,} trips" in about
    # the truth: the od flows between distinct zones and the same-zone trips are every trip
    raw = bu.raw_truth(files)
    same_zone = int((trips.origin == trips.destination).sum())
    assert raw["od"]["count"].sum() + same_zone == len(trips)
    assert raw["counts"]["count"].sum() == len(trips)
    assert raw["max_trips"] == trips.groupby("uid").size().max() > args.max_trips
    with bu.session(files.points, seed=7) as s:  # the exact report keeps every trip and user
        exact = s.report(
            epsilon=bu.TRUTH_EPSILON, max_trips=raw["max_trips"], period=bu.period(bu.RealConfig())
        )
    stats = exact.tables["dataset_statistics"].set_index("statistic")["value"]
    assert (stats["trips"], stats["users"]) == (len(trips), trips.uid.nunique())
    releases = {(r["release"], r["analysis"]) for r in rows}
    assert {("gowalla od", "od"), ("gowalla population", "homes")} <= releases
    assert ("gowalla counts", "origin x hour") in releases
    expected = {("gowalla report", a) for a in (*bu.COUNT_ANALYSES, "od_flows", *bu.DISTRIBUTIONS)}
    assert expected <= releases
    shares = ("tv", "borough_tv", "top50_recall", "top50_covered", "tv_least_squares")
    errors = ("large_rel_err", "median_rel_err", "quartile_rel_err", "users_rel_err")
    seen = 0
    for row in rows:
        for key in shares:
            if key in row:
                assert 0 <= row[key] <= 1, (row["analysis"], key, row[key])
                seen += 1
        for key in errors:
            if row.get(key) is not None and (key != "large_rel_err" or row["large_cells"]):
                assert np.isfinite(row[key]) and row[key] >= 0, (row["analysis"], key)
                seen += 1
    assert seen > 30
