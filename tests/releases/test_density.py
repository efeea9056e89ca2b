"""Density release (SPEC 4.3): bounding, clustering on noisy totals, end to end vs LPA."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from tests.helpers import events_around_a_week

from privmob.data.density_synth import synthetic_city
from privmob.data.sources import load_events
from privmob.engine import DuckDBEngine
from privmob.errors import ConfigError
from privmob.evaluate.density_metrics import mre, pearson
from privmob.prepare.presample import density_counts
from privmob.privacy.ledger import Ledger
from privmob.releases import density as dens
from privmob.releases.base import Accountant, write_release
from privmob.releases.density import (
    DensityConfig,
    SiteIndex,
    cluster_cells,
    density_geometry,
    density_release,
    perturb_density,
    smooth_nights,
)

EPS = 0.3
DELTA = 1e-5


@pytest.fixture(scope="module")
def city():
    return synthetic_city(30_000, 90, 8, seed=4)


@pytest.fixture(scope="module")
def geometry(city):
    return density_geometry(city.towers.lng.to_numpy(), city.towers.lat.to_numpy(), city.zones)


@pytest.fixture(scope="module")
def counts(city, geometry):
    eng = DuckDBEngine()
    eng.register("ev", city.events[["uid", "time", "tile"]])
    return density_counts(eng, "ev", geometry.n_towers, city.week_start, 30, 7, with_truth=True)


def truth_of(geometry, counts) -> np.ndarray:
    return np.asarray(geometry.voronoi.shares.T @ counts.hourly)


def test_presampling_bounds_one_user(city) -> None:
    # a user with many events: removing them changes the sampled counts by <= l in L1 and by
    # <= 1 in each hour (one visit per hour)
    ev = city.events[["uid", "time", "tile"]]
    heavy = int(ev.groupby("uid").size().idxmax())
    assert (ev.uid == heavy).sum() > 40
    n_t = int(ev.tile.max()) + 1
    with_u, without = DuckDBEngine(), DuckDBEngine()
    with_u.register("ev", ev)
    without.register("ev", ev[ev.uid != heavy])
    a = density_counts(with_u, "ev", n_t, city.week_start, 12, 99)
    b = density_counts(without, "ev", n_t, city.week_start, 12, 99)
    diff = a.sampled - b.sampled
    assert diff.min() >= 0
    assert diff.sum() == 12
    assert diff.sum(axis=0).max() <= 1
    assert 0 <= a.total_visits - b.total_visits <= 168
    assert (a.one_visit - b.one_visit).sum() == 1


def test_cluster_cells_merges_smallest_into_nearest() -> None:
    cent = np.array([[0.0, 0.0], [0.01, 0.0], [1.0, 0.0], [1.01, 0.0]])
    labels = cluster_cells(cent, np.array([5.0, 50.0, 3.0, 60.0]), tau=40.0)
    assert labels[0] == labels[1] and labels[2] == labels[3] and labels[0] != labels[2]
    # a cell below tau everywhere: all merge into one cluster
    assert len(set(cluster_cells(cent, np.array([1.0, 1.0, 1.0, 1.0]), tau=40.0))) == 1
    assert len(set(cluster_cells(cent, np.array([50.0, 50, 50, 50]), tau=40.0))) == 4


def test_clustering_reads_only_noisy_totals(counts, geometry, monkeypatch) -> None:
    fixed = np.linspace(1000.0, 40000.0, geometry.cmap.size + 1)  # + the outliers cell
    seen = []
    real_cluster = dens.cluster_cells

    def spy(centroids, totals, tau):
        seen.append(np.array(totals))
        return real_cluster(centroids, totals, tau)

    # patched where the mechanism looks them up
    monkeypatch.setattr(dens.mechanism, "noisy_totals", lambda *a, **k: (fixed.copy(), []))
    monkeypatch.setattr(dens.mechanism, "cluster_cells", spy)
    cfg = DensityConfig(EPS, 30, delta=DELTA, tau=60_000.0)
    a = perturb_density(counts, geometry.cmap, geometry.centroids, cfg, 1)
    # very different true counts, same noisy totals -> the same clusters
    other = replace(counts, sampled=counts.sampled[::-1].copy() * 3)
    b = perturb_density(other, geometry.cmap, geometry.centroids, cfg, 2)
    np.testing.assert_array_equal(a.clusters, b.clusters)
    assert len(seen) == 2 and all(np.array_equal(s, fixed[:-1]) for s in seen)


def test_noisy_totals_calibration(counts, geometry) -> None:
    # sampled totals: Laplace(l / (eps/2)) on each cover cell's total; check the spread
    cfg = DensityConfig(EPS, 30, totals="sampled")
    true = geometry.cmap.to_cover @ counts.sampled.sum(axis=1)
    from privmob.privacy.samplers import Randomness

    r = Randomness.for_tests(3)
    res = np.concatenate(
        [
            dens.noisy_totals(counts, geometry.cmap, cfg, EPS / 2, r)[0][:-1] - true
            for _ in range(30)
        ]
    )
    b = 30 / (EPS / 2)
    # mean |Laplace(b)| = b; > 1800 draws: 5 standard errors ~ 0.12 b; 2x off fails
    assert abs(np.abs(res).mean() / b - 1) < 5 / math.sqrt(res.size)


def test_smoothing_keeps_exponential_nights() -> None:
    t = np.arange(168, dtype=float)
    hod = t % 24
    x = np.where(hod <= 4, 100 * np.exp(-0.5 * hod), 50.0)
    x = np.where((hod >= 4) & (hod <= 6), 100 * np.exp(-2) * np.exp(0.4 * (hod - 4)), x)
    out = smooth_nights(x[None, :])[0]
    np.testing.assert_allclose(out, x, rtol=1e-4)
    noisy = x + np.random.default_rng(0).normal(0, 5, 168)
    sm = smooth_nights(noisy[None, :])[0]
    night = hod <= 6
    assert np.abs(sm - x)[night].mean() < np.abs(noisy - x)[night].mean()
    assert np.array_equal(sm[~night], noisy[~night])


def test_night_fit_matches_scipy_least_squares() -> None:
    """Our exponential fit reaches scipy's curve_fit optimum (the one it replaced, to avoid
    importing scipy.optimize): on 400 noisy 3- and 5-hour windows, the squared error is within
    1e-6 of curve_fit's in >= 97% of them and never worse than the log-linear start."""
    import warnings

    from scipy.optimize import curve_fit

    from privmob.releases.density.smoothing import _exp_fit

    rng = np.random.default_rng(7)
    same = 0
    for i in range(400):
        x = np.arange(5 if i % 2 else 3, dtype=float)
        y = 100 * rng.uniform(0.1, 10) * np.exp(rng.uniform(-1, 1) * x)
        y = y + rng.normal(0, rng.choice([1.0, 10.0, 100.0]), x.size)
        b0, log_a0 = np.polyfit(x, np.log(np.maximum(y, 1e-9)), 1)
        fit = _exp_fit(x, y)
        assert fit is not None
        err = ((fit - y) ** 2).sum()
        assert err <= ((math.exp(log_a0) * np.exp(b0 * x) - y) ** 2).sum() * (1 + 1e-12)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                (a, b), _ = curve_fit(
                    lambda t, a, b: a * np.exp(b * t), x, y, p0=(math.exp(log_a0), b0), maxfev=200
                )
            ref = ((a * np.exp(b * x) - y) ** 2).sum()
        except RuntimeError:
            ref = np.inf
        same += bool(err <= ref * (1 + 1e-6))
    assert same >= 0.97 * 400


@pytest.mark.slow
def test_scheme_beats_lpa_end_to_end(city, tmp_path) -> None:
    # the events go through the real loader (cells table -> site index) and DuckDB
    events = tmp_path / "events.parquet"
    cells = tmp_path / "cells.csv"
    city.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"}).to_parquet(events)
    city.towers.to_csv(cells, index=False)
    sites = SiteIndex(city.towers.lng.to_numpy(), city.towers.lat.to_numpy())
    geometry = density_geometry(sites.lng, sites.lat, city.zones)
    eng = DuckDBEngine()
    loaded = load_events(str(events), engine=eng, tessellation=sites, cells=str(cells))
    truth = truth_of(
        geometry,
        density_counts(eng, loaded.view, sites.k, city.week_start, 30, 1, with_truth=True),
    )
    ledger = Ledger(tmp_path / "ledger.sqlite")
    acct = Accountant(ledger, "city", budget=10.0, budget_delta=1e-3)
    scores = {}
    for name, cfg in {
        "lpa": DensityConfig(EPS, 30, method="lpa"),
        "efpag": DensityConfig(EPS, 30, delta=DELTA),
        "efpa": DensityConfig(EPS, 30),
    }.items():
        rel = density_release(eng, loaded.view, geometry, cfg, city.week_start, acct, 5)
        table = rel.tables["density"]
        got = table.pivot(index="zone", columns="hour", values="count").to_numpy(float)
        scores[name] = (mre(truth, got).mean(), np.nanmean(pearson(truth, got)))
        assert rel.ledger_entry is not None and not rel.for_publication
    lpa, efpag, efpa = scores["lpa"], scores["efpag"], scores["efpa"]
    assert efpag[0] < lpa[0] / 4 and efpag[1] > lpa[1] + 0.3, scores
    assert efpa[0] < lpa[0] / 4 and efpa[1] > lpa[1] + 0.3, scores
    assert efpag[0] < 0.6 and efpag[1] > 0.8, scores
    spent = ledger.spent("city")
    assert spent.epsilon == pytest.approx(3 * 1.1 * EPS)  # + each out-of-domain cell (0.1 eps)


def test_release_metadata_accounting(counts, geometry, city, tmp_path) -> None:
    eng = DuckDBEngine()
    eng.register("ev", city.events[["uid", "time", "tile"]])
    ledger = Ledger(tmp_path / "l.sqlite")
    acct = Accountant(ledger, "d", budget=1.0, budget_delta=1e-4)
    cfg = DensityConfig(EPS, 30, delta=DELTA)
    rel = density_release(eng, "ev", geometry, cfg, city.week_start, acct, 9)
    paths = write_release(rel, tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    steps = meta["accounting"]["steps"]
    # the mechanism (EPS) and the out-of-domain cell (0.1 EPS) compose sequentially
    assert sum(s["epsilon"] for s in steps) == pytest.approx(1.1 * EPS)
    assert meta["privacy"]["cost"]["epsilon"] == pytest.approx(1.1 * EPS)
    assert [e["cost"]["epsilon"] for e in meta["ledger_entries"]] == pytest.approx([EPS, 0.1 * EPS])
    assert ledger.spent("d").epsilon == pytest.approx(1.1 * EPS)
    assert ledger.spent("d").delta == pytest.approx(DELTA)
    ood = pd.read_parquet(tmp_path / "out" / "out_of_domain.parquet")
    assert len(ood) == 1 and ood["epsilon"].iloc[0] == pytest.approx(0.1 * EPS)
    assert ood["noise_scale"].iloc[0] == pytest.approx(30 / (0.1 * EPS))
    efpag = [s for s in steps if s["step"] == "EFPAG"]
    assert efpag and efpag[0]["epsilon"] == pytest.approx(EPS / 2)
    assert efpag[0]["delta"] == DELTA
    assert meta["privacy"]["cost"]["delta"] == DELTA
    tab = pd.read_parquet(paths[0])
    assert list(tab.columns) == ["zone", "hour", "count"]
    assert len(tab) == len(city.zones) * 168 and tab["count"].min() >= 0
    noise = next(s for s in meta["privacy"]["noise"]["steps"] if s["step"] == "EFPAG")
    assert noise["l2_sensitivity"] == pytest.approx(math.sqrt(30))
    out = pd.read_parquet(tmp_path / "out" / "outliers.parquet")
    assert len(out) == 168 and set(out["zone"]) == {"outside"}


def test_visits_of_towers_outside_the_area_go_to_the_outliers_cell() -> None:
    from privmob.prepare.cover import cover_map
    from privmob.prepare.presample import DensityCounts

    shares = np.array([[0.4, 0.6], [0.0, 0.0], [0.0, 0.5]])  # tower 1 outside, 2 half outside
    ext = dens.with_outliers(cover_map(shares))
    np.testing.assert_allclose(np.asarray(ext.sum(axis=0)).ravel(), 1.0)
    np.testing.assert_allclose(ext.toarray()[-1], [0.0, 1.0, 0.5])
    sampled = np.zeros((3, 168))
    sampled[1, :] = 1000.0
    counts = DensityCounts(sampled, np.array([0.0, 500.0, 0.0]), 168_000, 30)
    cfg = DensityConfig(1.0, 30, delta=1e-5, smoothing=False)
    res = perturb_density(counts, cover_map(shares), np.array([[0, 0], [1, 0.0]]), cfg, 1)
    assert res.outliers is not None and res.outliers.sum() > 0.9 * 168_000
    assert res.zones.sum() < 0.1 * 168_000


# -- visits outside the declared week (SPEC 1, invariant 1) ------------------------------------


def _week_events() -> pd.DataFrame:
    """Week from 2024-01-01 00:00 (exclusive end 2024-01-08 00:00); 2 towers."""
    rows = [
        ("a", "2024-01-01 01:30", 0),  # in the week
        ("a", "2023-12-31 10:05", 0), ("a", "2023-12-31 10:40", 1),  # one hour before
        ("a", "2023-12-31 11:00", 1),
        ("a", "2024-01-08 00:00", 0),  # exactly at the exclusive end
        ("b", "2024-01-02 05:10", 1), ("b", "2024-01-02 05:20", -1),  # unknown tower
        *[("c", str(pd.Timestamp("2024-02-01") + pd.Timedelta(hours=h)), 0) for h in range(40)],
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["uid", "time", "tile"])
    return df.assign(time=pd.to_datetime(df["time"], format="mixed"))


@pytest.mark.parametrize(("ell", "expected"), [(1, 3), (5, 9), (50, 44)])
def test_out_of_week_visits_are_counted_bounded(ell, expected) -> None:
    from datetime import datetime

    eng = DuckDBEngine()
    eng.register("ev", _week_events())
    c = density_counts(eng, "ev", 2, datetime(2024, 1, 1), ell, 11)
    # a: 3 hourly visits outside, b: 1 (unknown tower), c: 40 -- each capped at l, none dropped
    assert c.outside == expected
    assert c.sampled.sum() == 2 and c.sampled[0, 1] == 1 and c.sampled[1, 29] == 1


def test_out_of_domain_count_equals_the_ranked_selection() -> None:
    """The out-of-domain cell is counted as sum(min(h, l)) per user; it must equal the count
    of the keyed-hash ranked rows (outside_sql, rnk <= l) for any key and l, NULL times too."""
    from datetime import datetime

    from privmob.engine.dialect import DUCKDB
    from privmob.prepare.presample import outside_count_sql, outside_sql

    df = events_around_a_week(3)
    eng = DuckDBEngine()
    eng.register("ev", df)
    week = datetime(2024, 1, 1)
    for ell in (1, 3, 30, 168):
        fast = int(eng.fetch(outside_count_sql("ev", week, ell, DUCKDB))["n"].iloc[0])
        for key in (5, 99):
            ranked = outside_sql("ev", week, key, DUCKDB)
            slow = eng.fetch(f"SELECT count(*) AS n FROM ({ranked}) q WHERE rnk <= {ell}")
            assert fast == int(slow["n"].iloc[0])
    assert fast > 0


def test_out_of_domain_cell_noise_and_cost(geometry) -> None:
    """The cell is the bounded count plus discrete Laplace of scale l / eps_out.

    300 draws with scale 300 (l = 30, eps_out = 0.1): the mean |noise| has sd about 17; the
    window +-80 (4.7 sd) fails falsely with probability < 1e-5; a 2x-off scale fails.
    """
    from privmob.prepare.presample import DensityCounts
    from privmob.privacy.samplers import Randomness

    n = geometry.n_towers
    counts = DensityCounts(np.zeros((n, 168)), np.zeros(n), 0, 30, outside=100_000)
    cfg = DensityConfig(1.0, 30, method="lpa")
    assert cfg.cost().epsilon == pytest.approx(1.1) and cfg.epsilon_outliers == 0.1
    res = perturb_density(counts, geometry.cmap, geometry.centroids, cfg, 1)
    assert res.out_of_domain is not None and abs(res.out_of_domain - 100_000) < 300 * 15
    assert sum(s["epsilon"] for s in res.steps) == pytest.approx(cfg.cost().epsilon)
    r = Randomness.for_tests(5)
    draws = np.array([dens.noisy_out_of_domain(counts, cfg, r)[0] for _ in range(300)])
    assert abs(np.abs(draws - 100_000).mean() - 300) < 80
    with pytest.raises(ConfigError):
        DensityConfig(1.0, 30, outliers_epsilon=0.0)
    assert DensityConfig(1.0, 30, delta=1e-5, outliers_epsilon=0.5).cost().epsilon == 1.5


def test_release_keeps_out_of_week_visits(geometry, tmp_path) -> None:
    """End to end: the released out-of-domain cell is the bounded count (44 with l = 50) plus
    discrete Laplace of scale 50 / 50 = 1 (|noise| > 15 has probability < 1e-6); it would be
    about 0 if the visits were dropped."""
    from datetime import datetime

    eng = DuckDBEngine()
    eng.register("ev", _week_events())
    ledger = Ledger(tmp_path / "l.sqlite")
    acct = Accountant(ledger, "d", budget=100.0)
    cfg = DensityConfig(1.0, 50, method="lpa", outliers_epsilon=50.0)
    rel = density_release(eng, "ev", geometry, cfg, datetime(2024, 1, 1), acct, 3)
    ood = rel.tables["out_of_domain"]
    assert abs(int(ood["count"].iloc[0]) - 44) <= 15
    assert [e.cost.epsilon for e in rel.ledger_entries] == pytest.approx([1.0, 50.0])
    assert ledger.spent("d").epsilon == pytest.approx(51.0)


def test_sparse_input_is_flagged_and_default_tau_explained(geometry) -> None:
    """A handful of users (the Gowalla-week situation): the default tau (seed 004, a 1% error
    per hour) is 2,851,054 at epsilon 1 and 30 visits; the noisy total cannot reach it, so
    every cell is one cluster, and the flags say so. Flags read noisy totals only."""
    from privmob.prepare.presample import DensityCounts
    from privmob.privacy.signal import density_signal

    assert DensityConfig(1.0, 30).default_tau() == pytest.approx(2_851_054.5, abs=1)
    n = geometry.n_towers
    sampled = np.zeros((n, 168))
    sampled[0, 8:18] = 3.0  # 146 users' worth of visits is at most 4,380
    counts = DensityCounts(sampled, sampled.sum(axis=1), 0, 30)
    res = perturb_density(counts, geometry.cmap, geometry.centroids, DensityConfig(1.0, 30), 1)
    assert res.signal is not None
    assert {"tau_unreachable", "too_sparse"} <= set(res.signal["flags"])
    assert res.signal["clusters"] == 2  # all cells + the outliers cell
    assert "same weekly shape" in res.signal["warning"]
    # the flags are a function of the noisy total and public choices only
    flat = density_signal(noisy_total=1e9, tau=10.0, clusters=5, kept=1, noise_std=1.0)
    assert flat["flags"] == ["flat"] and "flat" in flat["warning"]
    ok = density_signal(noisy_total=1e9, tau=10.0, clusters=5, kept=12, noise_std=1.0)
    assert ok["flags"] == [] and ok["warning"] is None


def test_density_inputs_read_the_cells_once_with_the_same_sites(tmp_path) -> None:
    """``load_density_inputs`` reads and validates the cells table once (its positions give
    the tower sites and its tiles are those sites), where it used to load it twice: the same
    sites and the same events (uid, time, tile) as the two loads, with two towers sharing a
    position (one site) and an event at an unknown cell (tile -1)."""
    from privmob.data.sources import load_cells
    from privmob.releases.density_inputs import load_density_inputs

    small = synthetic_city(300, 12, 3, seed=8)
    towers = small.towers.copy()
    towers.loc[len(towers)] = {**towers.iloc[0].to_dict(), "cell_id": 999_999}  # same place
    events = small.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"})
    extra = pd.DataFrame({"uid": [1], "datetime": [events["datetime"].iloc[0]], "cell_id": [5]})
    events = pd.concat([events, extra], ignore_index=True)  # (pandas 2.1: no .loc append of times)
    events.loc[events.index[:3], "cell_id"] = 999_999
    cells_csv, events_csv, zones = tmp_path / "c.csv", tmp_path / "e.csv", tmp_path / "z.geojson"
    towers.to_csv(cells_csv, index=False)
    events.to_csv(events_csv, index=False)
    small.zones.to_file(zones, driver="GeoJSON")

    reads: list[str] = []

    class CountingEngine(DuckDBEngine):
        def read_csv(self, name, path, **kw):  # type: ignore[no-untyped-def]
            reads.append(str(path))
            return super().read_csv(name, path, **kw)

    eng = CountingEngine()
    inputs = load_density_inputs(
        events_csv, cells_csv, zones, zone_id=None, week="2026-03-02", cover=True,
        timezone="UTC", columns=None, step=lambda s: None, engine=eng,
    )  # fmt: skip
    assert reads.count(str(cells_csv)) == 1
    got = eng.fetch(f"SELECT uid, time, tile FROM {inputs.events} ORDER BY uid, time, tile")

    ref_eng = DuckDBEngine()

    class NoTiles:  # the first of the two loads: positions only
        def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
            return np.zeros(len(lng), dtype=np.int32)

    first = load_cells(str(cells_csv), engine=ref_eng, tessellation=NoTiles())
    pos = ref_eng.fetch(f"SELECT lng, lat FROM {first}")
    sites = SiteIndex(pos["lng"].to_numpy(), pos["lat"].to_numpy())
    assert sites.k == len(small.towers)  # the copied tower shares a site
    ref = load_events(str(events_csv), engine=ref_eng, tessellation=sites, cells=str(cells_csv))
    want = ref_eng.fetch(f"SELECT uid, time, tile FROM {ref.view} ORDER BY uid, time, tile")
    pd.testing.assert_frame_equal(got, want)
    assert (want["tile"] == -1).sum() == 1 and (want["tile"] == 0).sum() >= 4
