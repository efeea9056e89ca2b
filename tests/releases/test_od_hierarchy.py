"""An OD matrix over a hierarchy of public zones (``od --hierarchy``, issue 40 item 5): every
level released, consistent and non-negative, for the cost of one release, the groups from the
tessellation alone."""

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box
from tests.helpers import od_argv, trips_frame

from privmob.cli import main
from privmob.data import load_trips
from privmob.data.tessellation_input import load_tessellation
from privmob.errors import ConfigError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.hierarchy import consistent
from privmob.privacy.ledger import Ledger
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import resolve
from privmob.releases.counts import count_release
from privmob.releases.hierarchy import estimate
from privmob.releases.od import OdSpec


def districts_gdf(n: int = 4) -> gpd.GeoDataFrame:
    """An n x n grid; ``district``: its row; ``half``: north (rows 0-1) or south; ``mixed``:
    its column parity (does not nest in ``half``... nor in ``district``)."""
    rows, cols = np.divmod(np.arange(n * n), n)
    return gpd.GeoDataFrame(
        {
            "tile_id": np.arange(n * n),
            "district": [f"row{r}" for r in rows],
            "half": ["north" if r < n // 2 else "south" for r in rows],
            "mixed": [f"c{c % 2}" for c in cols],
        },
        geometry=[
            box(13 + c * 0.01, 52 + r * 0.01, 13 + (c + 1) * 0.01, 52 + (r + 1) * 0.01)
            for r, c in zip(rows, cols, strict=True)
        ],
        crs="EPSG:4326",
    )


@pytest.fixture(scope="module")
def tess():
    return load_tessellation(districts_gdf())


def some_trips(n_users: int = 60, seed: int = 5) -> pd.DataFrame:
    """Trips between the tiles of rows 0-2 only: district row3 has none."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for _ in range(int(rng.integers(1, 6))):
            o, d = rng.choice(12, 2, replace=False)
            rows.append((u, int(o), int(d)))
    return trips_frame(rows)


def release(engine, tess, accountant, **kw):
    trips = load_trips(some_trips(), engine=engine, tessellation=tess)
    rng = kw.pop("rng", 3)
    spec = OdSpec(tess, kw.pop("epsilon", 1.0), max_trips=kw.pop("max_trips", 5), **kw)
    return count_release(trips, spec, accountant, rng=rng)


def test_levels_are_consistent_non_negative_and_every_group_appears(engine, tess, accountant):
    rel = release(engine, tess, accountant, hierarchy=("half", "district"))
    od, district, half = (rel.tables[t] for t in ("od", "od_district", "od_half"))
    assert (od["count"] >= 0).all() and (district["count"] >= 0).all()
    # every group pair of the public tessellation, row3 included though no trip touches it
    assert len(district) == 16 and len(half) == 4 and len(od) == 16 * 15
    assert {"row3"} <= set(district["origin"]) and {"row3"} <= set(district["destination"])
    # the fine cells sum to their district pair, the district pairs to their half pair
    row = dict(zip(range(16), [f"row{i // 4}" for i in range(16)], strict=True))
    sums = od.groupby([od.origin.map(row), od.destination.map(row)])["count"].sum()
    got = district.set_index(["origin", "destination"])["count"]
    np.testing.assert_allclose(sums.reindex(got.index).to_numpy(), got.to_numpy(), atol=1e-8)
    halves = {"row0": "north", "row1": "north", "row2": "south", "row3": "south"}
    up = district.groupby([district.origin.map(halves), district.destination.map(halves)])
    got_half = half.set_index(["origin", "destination"])["count"]
    np.testing.assert_allclose(
        up["count"].sum().reindex(got_half.index).to_numpy(), got_half.to_numpy(), atol=1e-8
    )
    assert (od["margin_95"] > 0).all() and "margin_95" in district
    levels = rel.params["hierarchy"]["levels"]
    assert [lv["level"] for lv in levels] == ["half", "district", "tile"]
    assert sum(lv["share"] for lv in levels) == pytest.approx(1.0)


def test_the_hierarchy_costs_epsilon_once(engine, tess, ledger):
    from privmob.releases.base import Accountant

    acct = Accountant(ledger, "d", budget=5.0)
    rel = release(engine, tess, acct, epsilon=0.7, hierarchy=("district",))
    entries = ledger.entries("d")
    assert len(entries) == 1 and entries[0].cost.epsilon == 0.7
    assert rel.cost.epsilon == 0.7 and ledger.spent("d").epsilon == pytest.approx(0.7)
    # each level's scale is T / (share x epsilon): the shares compose to epsilon
    levels = rel.params["hierarchy"]["levels"]
    assert sum(5 / lv["noise_scale"] for lv in levels) == pytest.approx(0.7, rel=1e-9)


def test_the_gaussian_hierarchy_costs_what_one_level_costs(tess):
    kw = {"max_trips": 5, "noise": NoiseKind.DISCRETE_GAUSSIAN, "delta": 1e-7}
    with_levels = OdSpec(tess, 1.0, hierarchy=("district",), **kw).plan().cost
    alone = OdSpec(tess, 1.0, **kw).plan().cost
    assert with_levels == alone


def test_a_missing_or_unnested_column_is_one_message_before_anything_is_read(tess):
    with pytest.raises(ConfigError, match="no column 'borough'") as err:
        OdSpec(tess, 1.0, max_trips=5, hierarchy=("borough",)).plan()
    assert "district" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="do not nest"):
        OdSpec(tess, 1.0, max_trips=5, hierarchy=("mixed", "district")).plan()
    with pytest.raises(ConfigError, match="no --tau"):
        OdSpec(tess, 1.0, max_trips=5, tau=0, hierarchy=("district",)).plan()
    with pytest.raises(ConfigError, match="there are none"):
        OdSpec(tess, 1.0, max_trips=5, hierarchy_weights=(("tile", 1.0),)).plan()
    plan = OdSpec(tess, 1.0, max_trips=5, hierarchy=("district",)).plan()
    assert "hierarchy: epsilon split across the levels, district" in plan.notes[0]
    with pytest.raises(ConfigError, match="weight"):
        OdSpec(tess, 1.0, max_trips=5, hierarchy=("district",),
               hierarchy_weights=(("district", 1.0),)).plan()  # fmt: skip


def test_cli_missing_column_is_refused_before_the_input_is_opened(tmp_path, capsys):
    (tmp_path / "trips.parquet").write_text("not a parquet file")
    districts_gdf().to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    args = od_argv(tmp_path / "trips.parquet", tmp_path / "grid.geojson", "--dataset", "d",
                   "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "out"),
                   "--quiet", "--hierarchy", "borough")  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "no column 'borough'" in err
    assert "Traceback" not in err and "cannot be read" not in err
    assert Ledger(tmp_path / "l.sqlite").entries("d") == []


def test_cli_writes_every_level_and_prints_the_top_flows(tmp_path, capsys):
    some_trips().to_parquet(tmp_path / "trips.parquet")
    districts_gdf().to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    args = od_argv(tmp_path / "trips.parquet", tmp_path / "grid.geojson", "--dataset", "d",
                   "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "out"),
                   "--hierarchy", "district", "--hierarchy-weights", "district=1,tile=3",
                   "--top", "3", "-T", "5", "--format", "geojson")  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code in (0, None)
    out = capsys.readouterr().out
    assert "largest flows between districts" in out and "±" in out
    district = pd.read_parquet(tmp_path / "out" / "od_district.parquet")
    assert len(district) == 16
    # the coarser level's own map layer: a line per flow between two districts
    layer = gpd.read_file(tmp_path / "out" / "od_district_flows.geojson")
    assert len(layer) == 12 and {"count", "margin_95", "below_margin"} <= set(layer.columns)
    assert Ledger(tmp_path / "l.sqlite").spent("d").epsilon == pytest.approx(0.5)


def test_top_flows_rank_every_level_with_margins(engine, tess, accountant):
    from privmob.results import ReleaseResult

    result = ReleaseResult(release(engine, tess, accountant, hierarchy=("district",)), tess)
    top = result.top_flows(5, level="district")
    assert list(top["rank"]) == [1, 2, 3, 4, 5]
    assert top["count"].is_monotonic_decreasing
    np.testing.assert_allclose(top["high"] - top["count"], top["margin_95"])
    assert len(result.top_flows(7)) == 7
    with pytest.raises(KeyError, match="district"):
        result.top_flows(5, level="borough")


def _variance_ok(errors: np.ndarray, variance: float) -> bool:
    """The empirical variance of ``errors`` is within 15% of ``variance``."""
    return bool(abs(np.mean(errors**2) / variance - 1) < 0.15)


def test_noise_of_each_level_and_the_consistent_variance_are_as_stated(tess):
    """The mechanism's noise at each level has the variance of its stated scale; the
    consistent district estimate has the closed-form variance, far below the fine sums'.

    300 releases of the same exact counts (large, so non-negativity never binds). District
    level: 16 cells x 300 = 4,800 errors; the relative standard error of the empirical
    variance of Laplace-like noise is sqrt((kurtosis - 1) / n) = sqrt(5 / 4800) = 0.032, so a
    15% band is 4.6 standard errors: false-failure rate below 1e-5 per check (the fine level:
    72,000 errors, far tighter). A noise scale off by 2x multiplies the variance by 4 (or
    0.25) and fails the same check (shown below)."""
    halves = (("district", 1.0), ("tile", 1.0))
    spec = OdSpec(tess, 1.0, max_trips=5, hierarchy=("district",), hierarchy_weights=halves)
    step, _ = spec.calibrated
    noises = spec.od_plan.levels
    domain = spec.count_domain()
    tree = spec.od_tree
    rng = np.random.default_rng(0)
    exact = np.zeros(domain.size, dtype=np.int64)
    exact[tree.cells] = rng.integers(150, 250, len(tree.cells))
    coarse_exact = tree.tree.children_sum(0, exact[tree.cells].astype(float))
    coarse_err, fine_err, fit_err, sums_err = [], [], [], []
    for seed in range(300):
        noisy = step.start(domain, resolve(seed))(exact)
        coarse_err.append(noisy.coarse[0] - coarse_exact)
        fine = noisy.fine[tree.cells] - exact[tree.cells]
        fine_err.append(fine)
        sums_err.append(tree.tree.children_sum(0, fine.astype(float)))
        fit_err.append(estimate(noisy, noises, tree).values[0] - coarse_exact)
    coarse, fine, fit, sums = map(np.concatenate, (coarse_err, fine_err, fit_err, sums_err))
    assert _variance_ok(coarse, noises[0].std ** 2)
    assert _variance_ok(fine, noises[1].std ** 2)
    stated = consistent(tree.tree, [np.zeros(n) for n in tree.tree.sizes],
                        [n.std**2 for n in noises]).variances[0]  # fmt: skip
    assert _variance_ok(fit, float(np.mean(stated)))
    assert np.mean(fit**2) < 0.5 * np.mean(sums**2)  # 12-16 fine cells' noise in each sum
    # the same check refuses noise of twice (or half) the stated scale
    for factor in (2.0, 0.5):
        wrong = Noise(noises[0].kind, noises[0].scale * factor)
        drawn = wrong.add(
            np.zeros(4800, dtype=np.int64), np.random.default_rng(1).integers(1 << 30)
        )
        assert not _variance_ok(drawn.astype(float), noises[0].std ** 2)


def test_without_the_option_nothing_changes(engine, tess, accountant):
    """The same seed, the same tables as before the hierarchy existed (the golden files
    cover the other inputs)."""
    plain = release(engine, tess, accountant, rng=9)
    assert set(plain.tables) == {"od", "outliers"} and "hierarchy" not in plain.params
    assert plain.tables["od"]["count"].dtype == np.int64
    noise, cost = calibrate(NoiseKind.DISCRETE_LAPLACE, 1.0, l1_sensitivity=5)
    assert plain.noise.scale == noise.scale and plain.cost == cost
    assert cost.unit is PrivacyUnit.USER


def test_h3_cells_are_grouped_by_their_parents():
    h3 = pytest.importorskip("h3")
    from shapely.geometry import Polygon

    from privmob.data.tessellation import Tessellation
    from privmob.releases.hierarchy import zone_levels

    parents = ["851f1d4bfffffff", "851f1d4ffffffff"]
    cells = sorted(c for p in parents for c in h3.cell_to_children(p, 6))
    polys = [Polygon([(lng, lat) for lat, lng in h3.cell_to_boundary(c)]) for c in cells]
    levels = zone_levels(Tessellation.from_tiles(cells, polys), ["h3:5"])
    assert levels.labels[0] == tuple(sorted(parents))
    assert np.bincount(levels.of_tile[0]).tolist() == [7, 7]
    with pytest.raises(ConfigError, match="not finer"):
        zone_levels(Tessellation.from_tiles(cells, polys), ["h3:6"])


def test_gaussian_noise_and_a_bound_per_period_over_a_hierarchy(engine, tess, ledger):
    """Each period is a tree of its own; with a bound per period each period (and the
    out-of-period cell) costs epsilon, as without a hierarchy."""
    from privmob.domain import Period
    from privmob.releases.base import Accountant

    acct = Accountant(ledger, "g", budget=100.0, budget_delta=1e-3)
    period = Period.parse("day", "2024-01-01", "2024-01-03")
    rel = release(engine, tess, acct, hierarchy=("district",), period=period, bound_per="period",
                  noise=NoiseKind.DISCRETE_GAUSSIAN, delta=1e-6)  # fmt: skip
    district = rel.tables["od_district"]
    assert sorted(district["period"].unique()) == ["2024-01-01", "2024-01-02"]
    assert len(district) == 2 * 16 and len(ledger.entries("g")) == 3
    od = rel.tables["od"]
    for day in ("2024-01-01", "2024-01-02"):
        assert od[od.period == day]["count"].sum() == pytest.approx(
            district[district.period == day]["count"].sum()
        )


def test_a_chosen_bound_with_a_hierarchy_is_refused_from_the_plan(tess):
    # each level's noise is calibrated to the bound before the charge; a bound chosen after it
    # (or rescaled counts) would leave the levels' scales unknown: refused before reading
    from privmob.privacy.bound_choice import BoundChoice

    with pytest.raises(ConfigError, match="not offered with a hierarchy"):
        OdSpec(tess, 1.0, max_trips="auto", hierarchy=("district",)).plan()
    with pytest.raises(ConfigError, match="not offered with a hierarchy"):
        OdSpec(
            tess, 1.0, max_trips=5, hierarchy=("district",), bound_choice=BoundChoice(rescale=True)
        ).plan()
