"""The report's zCDP composition (issue 40 item 2): L2 sensitivities from the enforced bounds,
the Gaussian sigma, the accounting against OpenDP, the plan's choice, pure epsilon unchanged."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from tests.releases.test_report import (  # the Laplace tests' data and neighbours
    _ledger,
    counts_of,
    gdf,  # noqa: F401  (fixture)
    heavy_user,
    synth,
    tiles,  # noqa: F401  (fixture)
)

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.l2_bounds import capped_l2_squared
from privmob.privacy.samplers import Randomness
from privmob.privacy.zcdp import rho_for_zcdp_epsilon, zcdp_epsilon
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, ReportSpec, mobility_report
from privmob.releases.report.build import _release_all
from privmob.releases.report.composition import (
    l2_squared,
    noise_parts,
    plan_composition,
    resolved,
)
from privmob.releases.report.compositions import DEFAULT_DELTA
from privmob.releases.report.config import DEFAULT_RANGES

PERIOD = ("2020-12-01", "2021-01-01")


def _cfg(**kw):
    return ReportConfig.build(
        epsilon=kw.pop("epsilon", 1.0), max_trips=kw.pop("max_trips", 4), period=PERIOD, **kw
    )


# -- L2 sensitivities from the enforced bounds ----------------------------------------------------


@pytest.mark.parametrize("total", range(0, 9))
@pytest.mark.parametrize("cap", [None, 1, 2, 3, 5])
def test_capped_l2_is_the_largest_over_every_vector(total, cap):
    c = total if cap is None else min(cap, total)
    best = 0
    for v in itertools.product(range(c + 1), repeat=4):  # four cells hold any packing here
        if sum(v) <= total:
            best = max(best, sum(x * x for x in v))
    if total <= 4 * max(c, 1):
        assert capped_l2_squared(total, cap) == best
    assert capped_l2_squared(total, cap) <= max(c, 0) * total  # ||v||_2 <= sqrt(M c)


def _vectors(counts):
    """Every noised vector: the count vectors, and the distributions' histograms as noised
    (below and above merged into one outliers cell)."""
    out = {}
    for name, v in counts.items():
        v = np.asarray(v, dtype=np.int64)
        if name in DEFAULT_RANGES or name in ("trips_per_user", "user_tile_count"):
            v = np.concatenate([v[1:-1], [v[0] + v[-1]]])
        out[name] = v
    return out


def _l2_bound(name, cfg):
    if name == "users":
        return l2_squared("dataset_statistics", cfg, "users")
    if name == "trip_kinds":
        return l2_squared("dataset_statistics", cfg, "trips")
    return l2_squared(name, cfg)


@pytest.mark.parametrize("unit", ["user", "trip"])
def test_one_unit_changes_each_vector_by_at_most_its_l2(gdf, tiles, unit):  # noqa: F811
    m = 4
    cfg = _cfg(max_trips=m, unit=unit, delta=1e-6)
    base = synth(25, seed=3)
    before = _vectors(counts_of(base, gdf, tiles, cfg))
    if unit == "user":
        neighbours = [
            pd.concat([base, heavy_user(999, 3 * m)]),
            pd.concat([base, heavy_user(998, 3 * m, missing=True)]),
            pd.concat([base, synth(1, seed=11, max_trips=30, uid0=500)]),
            base[base["uid"] != 0],
        ]
    else:
        extra = heavy_user(0, 1).assign(datetime=lambda d: d["datetime"] + pd.Timedelta("3D"))
        neighbours = [pd.concat([base, extra]), base[base["tid"] != "1-0"]]
    reached = set()
    for nb in neighbours:
        after = _vectors(counts_of(nb, gdf, tiles, cfg))
        for name, vec in before.items():
            sq = int(((after[name] - vec) ** 2).sum())
            assert sq <= _l2_bound(name, cfg), (unit, name, sq)
            if sq == _l2_bound(name, cfg):
                reached.add(name)
    if unit == "user":  # the heavy user packs everything into one cell: the bounds are tight
        assert {"trips_over_time", "trips_per_weekday", "trips_per_hour", "visits_per_tile"} <= (
            reached
        )
        assert "missing_values" in reached  # three columns, M each


def test_l2_is_below_l1_and_at_most_sqrt_of_l1_times_the_cap():
    cfg = _cfg(max_trips=10)
    for p in noise_parts(cfg):
        assert p.l2_squared <= p.l1 * p.l1
        assert p.l2 * p.l2 >= p.l2_squared  # rounded up, never down
    by = {(p.analysis, p.part): p for p in noise_parts(cfg)}
    assert by["missing_values", "counts"].l2_squared == 3 * 100  # sqrt(3) M, not 3M
    assert by["trips_per_hour", "counts"].l2_squared == 2 * 100  # sqrt(2) M, not 2M
    assert by["od_flows", "counts"].l2_squared == 100  # no per-cell cap: all M in one pair


# -- the Gaussian's sigma ---------------------------------------------------------------------


def _zero_counts(cfg, tiles, n_tb=31):  # noqa: F811
    from privmob.engine.dialect import DUCKDB
    from privmob.releases.report.sql import queries

    return {
        name: np.zeros(size, dtype=np.int64)
        for name, (_sql, size) in queries(cfg, tiles.k, n_tb, DUCKDB).items()
    }


def test_the_gaussian_noise_has_the_sigma_of_its_rho(tiles):  # noqa: F811
    """Noise drawn by the report's noise step on zero counts, 250 seeded runs of the whole
    report (M = 10, delta 1e-5: every count part Gaussian). Per vector checked, n draws: visits
    per time tile 49 cells (12,250 draws), trips per hour 96 (24,000). The mean square over
    sigma^2 has a standard deviation sqrt(2/n) <= 0.013; the test allows +-0.08 (6 standard
    deviations: a false failure about 2e-9 of the time; the seeds are fixed, so it passes or
    fails the same way every run). A sigma off by 2x gives 4 or 0.25 and fails."""
    from privmob.privacy.payment import paid

    cfg = _cfg(max_trips=10, delta=1e-5)
    plan = plan_composition(cfg)
    # the sigma of the stated rho and the L2 bound, computed here from the bounds
    want = {"visits_per_time_tile": 2 * 10, "trips_per_hour": math.sqrt(2) * 10}
    sigma = {}
    for name, l2 in want.items():
        c = plan.choice(name, "counts")
        # the Gaussian parts hold 1 - 7 quantile halves = 23/30 of the shares; this one 1/15
        assert c.gaussian and c.rho == pytest.approx(plan.rho * (1 / 15) / (23 / 30), rel=1e-9)
        sigma[name] = l2 / math.sqrt(2 * c.rho)
        assert c.noise.scale == pytest.approx(sigma[name], rel=1e-12)
        assert c.noise.scale >= sigma[name] * (1 - 1e-15)
    exact = _zero_counts(cfg, tiles)
    draws: dict[str, list[float]] = {name: [] for name in want}
    with paid():
        for seed in range(250):
            res, _tables = _release_all(exact, cfg, tiles, Randomness.for_tests(seed), plan)
            for name in want:
                v = res[name].values
                draws[name] += [*v["counts"], *([v["outliers"]] if "outliers" in v else [])]
    for name in want:
        x = np.asarray(draws[name], dtype=float)
        mean_square = float(np.mean(x * x))
        assert abs(mean_square / sigma[name] ** 2 - 1) < 0.08, (name, mean_square)
        for wrong in (sigma[name] / 2, 2 * sigma[name]):
            assert abs(mean_square / wrong**2 - 1) > 0.08


# -- accounting, against OpenDP -----------------------------------------------------------------


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    return dp


def _opendp_rho(l2: float, sigma: float) -> float:
    dp = _opendp()
    if float(l2).is_integer():  # the discrete Gaussian on integer vectors, as drawn
        m = dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=sigma
        )
        return float(m.map(int(l2)))
    m = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=sigma
    )
    return float(m.map(float(l2)))


def _opendp_epsilon(rho: float, delta: float) -> float:
    dp = _opendp()
    m = dp.m.make_user_measurement(
        dp.atom_domain(T=int),
        dp.absolute_distance(T=int),
        dp.zero_concentrated_divergence(),
        lambda x: x,
        lambda d_in: float(rho),
        TO=int,
    )
    return float(dp.c.make_zCDP_to_approxDP(m).map(1).epsilon(delta))


def _opendp_laplace_epsilon(l1: int, scale: float) -> float:
    dp = _opendp()
    m = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale
    )
    return float(m.map(l1))


@pytest.mark.parametrize(
    "kw",
    [
        {"delta": 1e-5},
        {"delta": 1e-6, "max_trips": 10},
        {"delta": 1e-5, "epsilon": 2.0, "weights": {"od_flows": 4}},
        {"delta": 1e-4, "unit": "trip", "max_trips": None},
    ],
)
def test_accounting_equals_opendp(kw):
    cfg = _cfg(**kw)
    plan = plan_composition(cfg)
    assert plan.gaussian
    rhos = []
    for c in plan.choices:
        if c.gaussian:
            got = _opendp_rho(c.part.l2, c.noise.scale)
            assert got <= c.rho * (1 + 1e-12)  # the drawn sigma spends no more than planned
            assert got == pytest.approx(c.rho, rel=1e-9)
            rhos.append(got)
        else:
            assert _opendp_laplace_epsilon(c.part.l1, c.noise.scale) <= c.epsilon * (1 + 1e-12)
    assert math.fsum(rhos) == pytest.approx(plan.rho, rel=1e-9)
    # the rho part's epsilon at delta is OpenDP's conversion, and the parts fit the budget
    eps_g = _opendp_epsilon(plan.rho, cfg.delta)
    assert plan.epsilon_zcdp == pytest.approx(eps_g, rel=1e-9)
    share_g = math.fsum(c.part.share for c in plan.choices if c.gaussian)
    assert eps_g == pytest.approx(cfg.epsilon * share_g, rel=1e-7)  # rho is the largest
    assert plan.cost.epsilon <= cfg.epsilon and plan.cost.delta == cfg.delta
    assert plan.cost.epsilon == pytest.approx(cfg.epsilon, rel=1e-7)
    parts = [c for _d, c in plan.cost_parts]
    assert [p.rho for p in parts] == [None, plan.rho]
    assert parts[0].epsilon == pytest.approx(cfg.epsilon * (1 - share_g), rel=1e-12)


def test_rho_for_epsilon_inverts_the_tight_conversion():
    for eps, delta in [(0.1, 1e-9), (1.0, 1e-9), (1.0, 1e-6), (5.0, 1e-8)]:
        rho = rho_for_zcdp_epsilon(eps, delta)
        assert zcdp_epsilon(rho, delta) <= eps
        assert zcdp_epsilon(rho * (1 + 1e-9), delta) > eps * (1 - 1e-9)
        assert _opendp_epsilon(rho, delta) == pytest.approx(eps, rel=1e-9)


# -- the plan's choice ----------------------------------------------------------------------------


def test_the_plan_picks_gaussian_where_it_lowers_the_margin_and_says_why(tiles):  # noqa: F811
    from tests.releases.test_report import FIXTURE

    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(FIXTURE / "test_tessellation.geojson")
    spec = ReportSpec(tess, _cfg(delta=1e-6, max_trips=10))
    plan = spec.plan()
    notes = " ".join(plan.notes)
    assert "composition: zCDP, delta 1e-06" in notes
    # at delta 1e-6 the histograms gain (their halves' Delta2 / Delta1 sqrt(share) is small),
    # the OD flows do not: a mixed plan, each part with its reason
    assert "travel_time/histogram: discrete Gaussian sigma" in notes
    assert "od_flows/counts: discrete Laplace scale" in notes
    assert "even with every part Gaussian" in notes
    assert plan.cost.delta == 1e-6 and "discrete-gaussian" in plan.noise
    comp = plan_composition(spec.config)
    assert {c.gaussian for c in comp.choices} == {True, False}
    for c in comp.choices:  # no part worse than pure composition
        assert c.margin <= c.laplace_margin and c.typical <= c.laplace_typical
    assert plan.margin_of_error_95 == max(c.margin for c in comp.choices)


def test_expected_abs_error_is_exact():
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.releases.report.composition import expected_abs_error

    for b in (0.5, 3.0, 40.0):  # discrete Laplace: sum over the support, by hand
        q = math.exp(-1 / b)
        k = np.arange(0, 4000)
        want = 2 * np.sum(k * q**k) * (1 - q) / (1 + q)
        assert expected_abs_error(Noise(NoiseKind.DISCRETE_LAPLACE, b)) == pytest.approx(want)
    for sigma in (0.7, 5.0, 200.0):  # discrete Gaussian: over the support from -N to N
        k = np.arange(-5000, 5001, dtype=float)
        w = np.exp(-(k * k) / (2 * sigma * sigma))
        want = float(np.sum(np.abs(k) * w) / np.sum(w))
        got = expected_abs_error(Noise(NoiseKind.DISCRETE_GAUSSIAN, sigma))
        assert got == pytest.approx(want, rel=1e-12)
    assert got == pytest.approx(200 * math.sqrt(2 / math.pi), rel=1e-4)  # wide: continuous


def test_laplace_is_kept_where_gaussian_would_not_help():
    # one analysis at a tiny delta: the whole epsilon on one Laplace beats any Gaussian
    cfg = _cfg(delta=1e-9, analyses=["od_flows"])
    plan = plan_composition(cfg)
    (c,) = plan.choices
    assert not c.gaussian and not plan.gaussian
    assert c.gaussian_margin is not None and c.gaussian_margin > c.laplace_margin
    assert plan.cost.delta == 0 and plan.cost.epsilon == cfg.epsilon  # charged as pure
    assert "Laplace kept" in plan.notes()[0] and "even with every part Gaussian" in c.why
    # the same analysis among all 15 at delta 1e-6: zCDP composes 15 parts for less, Gaussian
    many = plan_composition(_cfg(delta=1e-5, max_trips=10)).choice("od_flows", "counts")
    assert many.gaussian and many.margin < many.laplace_margin


def test_compositions_and_deltas_are_checked_before_reading():
    assert resolved(_cfg()) == ("pure", 0.0)
    assert resolved(_cfg(delta=1e-8)) == ("zcdp", 1e-8)
    assert resolved(_cfg(composition="zcdp")) == ("zcdp", DEFAULT_DELTA)
    for kw, said in [
        ({"composition": "pure", "delta": 1e-8}, "has no delta"),
        ({"composition": "renyi"}, "unknown composition"),
        ({"delta": 0.01}, "too large"),
        ({"delta": 1.5}, "delta must be in"),
    ]:
        with pytest.raises(ConfigError, match=said):
            _cfg(**kw)


# -- pure epsilon unchanged, the gate, the ledger -----------------------------------------------


def _run(frame, gdf, tiles, cfg, budget, seed=5):  # noqa: F811
    eps, delta = budget if isinstance(budget, tuple) else (budget, 0.0)
    from privmob.data.sources import load_trip_points
    from privmob.engine import DuckDBEngine

    eng = DuckDBEngine()
    points = load_trip_points(frame, engine=eng, tessellation=gdf)
    acc = Accountant(_ledger(), "d", budget=eps, budget_delta=delta)
    return mobility_report(eng, points.view, tiles, cfg, acc, rng=seed)


def test_pure_is_the_default_and_zcdp_without_a_gain_draws_the_same_noise(gdf, tiles):  # noqa: F811
    frame = synth(20, seed=2)
    pure = _run(frame, gdf, tiles, _cfg(), 10)
    said = _run(frame, gdf, tiles, _cfg(composition="pure"), 10)
    # one analysis at delta 1e-9: the plan keeps Laplace, the same draws as pure
    one = dict(analyses=["od_flows", "trips_per_weekday"])
    kept = _run(frame, gdf, tiles, _cfg(delta=1e-9, **one), (10, 1e-6))
    one_pure = _run(frame, gdf, tiles, _cfg(**one), 10)
    for name in pure.tables:
        pd.testing.assert_frame_equal(pure.tables[name], said.tables[name])
    for name in one_pure.tables:
        pd.testing.assert_frame_equal(kept.tables[name], one_pure.tables[name])
    assert pure.params == said.params and "composition" not in pure.params
    assert "mechanisms" not in pure.extra["analyses"]["od_flows"]
    assert kept.cost.delta == 0 and len(kept.ledger_entries) == 1


def test_a_zcdp_report_is_charged_two_entries_before_its_noise(gdf, tiles):  # noqa: F811
    cfg = _cfg(delta=1e-5, max_trips=10)  # all 15: every count part Gaussian
    plan = plan_composition(cfg)
    rel = _run(synth(20, seed=2), gdf, tiles, cfg, (10, 1e-4))
    entries = rel.ledger_entries
    assert [e.cost.rho for e in entries] == [None, plan.rho]
    assert [e.cost.delta for e in entries] == [0.0, 1e-5]
    assert math.fsum(e.cost.epsilon for e in entries) <= 1.0
    assert rel.cost.delta == 1e-5 and rel.cost.epsilon == pytest.approx(1.0, rel=1e-7)
    # the metadata states each part's mechanism, sigma, rho, the delta and the conversion
    od = rel.extra["analyses"]["od_flows"]["mechanisms"]["counts"]
    assert od["mechanism"] == "discrete-gaussian" and od["rho"] > 0 and od["sigma"] > 0
    assert rel.extra["analyses"]["od_flows"]["noise"]["counts"]["kind"] == "discrete-gaussian"
    noise = rel.noise.to_json()
    assert noise["delta"] == 1e-5 and "make_zCDP_to_approxDP" in noise["conversion"]
    assert rel.params["mechanisms"]["rho"] == plan.rho
    assert rel.params["composition"] == "zcdp" and rel.params["delta"] == 1e-5
    # the quantile summaries stay pure: the exponential mechanism at the analysis' epsilon
    q = rel.extra["analyses"]["travel_time"]["noise"]["quantiles"]
    assert q["kind"] == "exponential" and q["epsilon"] == pytest.approx(1 / 15 * 0.5)


@pytest.mark.parametrize("od_cell_cap", [None, 2])  # a capped report too (its L2 needs delta)
def test_a_pure_budget_refuses_a_zcdp_report_before_reading(gdf, tiles, od_cell_cap):  # noqa: F811
    cfg = _cfg(delta=1e-6, od_cell_cap=od_cell_cap)

    class Unread:
        def __getattr__(self, _name):
            raise AssertionError("the data was read")

    from privmob.engine import DuckDBEngine

    acc = Accountant(_ledger(), "d", budget=10)  # pure: delta 0
    with pytest.raises(BudgetError):
        mobility_report(DuckDBEngine(), Unread(), tiles, cfg, acc, rng=1)  # type: ignore[arg-type]


def test_zcdp_report_unit_is_kept():
    plan = plan_composition(_cfg(delta=1e-4, unit="trip", max_trips=None))
    assert plan.gaussian
    assert all(c.unit is PrivacyUnit.TRIP for _d, c in plan.cost_parts)
