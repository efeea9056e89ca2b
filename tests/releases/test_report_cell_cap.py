"""The report's OD cell cap (issue 40 item 2): at most c trips of a user in any one OD cell,
enforced in the engine before counting, so od_flows' L2 sensitivity is capped_l2_squared(M, c)
under zCDP (its L1 stays M)."""

import math

import numpy as np
import pandas as pd
import pytest
from tests.releases.test_report import (
    counts_of,
    gdf,  # noqa: F401  (fixture)
    synth,
    tiles,  # noqa: F401  (fixture)
)
from tests.releases.test_report_composition import _cfg, _run, _zero_counts

from privmob.errors import ConfigError
from privmob.privacy.l2_bounds import capped_l2_squared
from privmob.privacy.samplers import Randomness
from privmob.releases.report import ReportSpec
from privmob.releases.report.composition import l2_squared, plan_composition


def _cells(tiles):  # noqa: F811
    """Two tile centres in different tiles (an OD cell off the diagonal), and a third."""
    return [(float(tiles.lat[i]), float(tiles.lng[i])) for i in range(3)]


def od_user(uid: int, cells: list[tuple[tuple[float, float], tuple[float, float], int]]):
    """A user with ``n`` trips from ``o`` to ``d`` for each ``(o, d, n)``, all in one hour."""
    rows = []
    t = 0
    for o, d, n in cells:
        for _ in range(n):
            rows.append((uid, f"c{t}", pd.Timestamp("2020-12-07 08:10"), *o))
            rows.append((uid, f"c{t}", pd.Timestamp("2020-12-07 08:40"), *d))
            t += 1
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def _cell(tiles, o, d):  # noqa: F811
    return o * tiles.k + d


def test_the_cap_holds_on_duckdb_data(gdf, tiles):  # noqa: F811
    a, b, c = _cells(tiles)
    base = synth(20, seed=4)
    heavy = od_user(900, [(a, b, 6), (b, c, 4)])  # 10 trips = M: all kept by the user bound
    uncapped = _cfg(max_trips=10, delta=1e-6)
    capped = _cfg(max_trips=10, delta=1e-6, od_cell_cap=3)
    for cfg, want in ((uncapped, (6, 4)), (capped, (3, 3))):
        with_ = counts_of(pd.concat([base, heavy]), gdf, tiles, cfg)["od_flows"]
        without = counts_of(base, gdf, tiles, cfg)["od_flows"]
        got = (with_ - without)[[_cell(tiles, 0, 1), _cell(tiles, 1, 2)]]
        assert tuple(got) == want
        # the other analyses count every kept trip, cap or not
        for name in ("trips_per_weekday", "visits_per_tile"):
            assert (
                counts_of(pd.concat([base, heavy]), gdf, tiles, cfg)[name].sum()
                == counts_of(pd.concat([base, heavy]), gdf, tiles, uncapped)[name].sum()
            )


def test_one_user_changes_od_flows_by_at_most_the_capped_l2(gdf, tiles):  # noqa: F811
    a, b, c = _cells(tiles)
    m, cap = 10, 3
    cfg = _cfg(max_trips=m, delta=1e-6, od_cell_cap=cap)
    bound = l2_squared("od_flows", cfg)
    assert bound == capped_l2_squared(m, cap) == 3 * 9 + 1 < m * m
    base = synth(25, seed=3)
    before = counts_of(base, gdf, tiles, cfg)["od_flows"]
    neighbours = [
        # 3 trips in each of three cells and 1 in a fourth: the packing that reaches the bound
        pd.concat([base, od_user(900, [(a, b, 3), (b, c, 3), (c, a, 3), (a, c, 1)])]),
        pd.concat([base, od_user(901, [(a, b, 30)])]),  # one cell: c, not M
        pd.concat([base, od_user(902, [(a, b, 8), (b, a, 8), (c, b, 8)])]),
        pd.concat([base, synth(1, seed=11, max_trips=30, uid0=500)]),
        base[base["uid"] != 0],
    ]
    squares = []
    for nb in neighbours:
        diff = counts_of(nb, gdf, tiles, cfg)["od_flows"] - before
        assert np.abs(diff).sum() <= m  # L1 stays M
        squares.append(int((diff**2).sum()))
    assert max(squares) == bound  # tight: the packed user reaches it
    assert all(s <= bound for s in squares)
    assert squares[1] == cap * cap


def test_the_gaussian_sigma_uses_the_capped_l2(tiles):  # noqa: F811
    """Noise of od_flows as the report's noise step draws it (:func:`~.analyses.counts` with
    the plan's noise) on zero counts, 1,500 seeded runs (M = 10, cap 2: L2 = sqrt(5 * 2^2) =
    sqrt(20), not 10). The mean square over sigma^2 has a standard deviation sqrt(2/n), with
    n = 1,500 (k^2 + 1) = 25,500 draws 0.0089; the test allows +-0.08 (9 standard deviations:
    a false failure below 1e-18 of the time, and the seeds are fixed). A sigma off by 2x, or
    the uncapped L2's (2.2x), gives a ratio of 4, 0.25 or 0.2 and fails."""
    from privmob.privacy.payment import paid
    from privmob.releases.report.analyses import counts, sensitivity

    cfg = _cfg(max_trips=10, delta=1e-5, od_cell_cap=2, same_tile="include")
    plan = plan_composition(cfg)
    c = plan.choice("od_flows", "counts")
    assert c.gaussian and c.part.l1 == 10 and c.part.l2_squared == 20
    sigma = math.sqrt(20) / math.sqrt(2 * c.rho)  # from the bounds, computed here
    assert c.noise.scale == pytest.approx(sigma, rel=1e-12)
    uncapped = 10 / math.sqrt(2 * c.rho)
    exact = _zero_counts(cfg, tiles)["od_flows"]
    assert exact.size == tiles.k**2 + 1
    eps, l1, noise = cfg.epsilon_for("od_flows"), sensitivity("od_flows", cfg), c.noise
    with paid():
        draws = [
            counts("od_flows", exact, eps, l1, cfg, Randomness.for_tests(seed), noise)[0]
            for seed in range(1500)
        ]
    x = np.concatenate(draws).astype(float)
    mean_square = float(np.mean(x * x))
    assert abs(mean_square / sigma**2 - 1) < 0.08, mean_square
    for wrong in (sigma / 2, 2 * sigma, uncapped):
        assert abs(mean_square / wrong**2 - 1) > 0.08


def test_the_cap_is_refused_where_it_cannot_lower_the_noise():
    with pytest.raises(ConfigError, match=">= 1"):
        _cfg(delta=1e-6, od_cell_cap=0)
    with pytest.raises(ConfigError, match="only drop trips"):
        _cfg(od_cell_cap=2)  # no delta: pure epsilon
    with pytest.raises(ConfigError, match="only drop trips"):
        _cfg(composition="pure", od_cell_cap=2)
    with pytest.raises(ConfigError, match="user-level"):
        _cfg(delta=1e-6, unit="trip", max_trips=None, od_cell_cap=2)
    with pytest.raises(ConfigError, match="does not release"):
        _cfg(delta=1e-6, analyses=["visits_per_tile"], od_cell_cap=2)
    with pytest.raises(ConfigError, match="whole number"):
        _cfg(delta=1e-6, od_cell_cap=2.5)


def test_the_cap_is_stated_in_the_plan_the_metadata_and_the_ledger(gdf, tiles):  # noqa: F811
    cfg = _cfg(delta=1e-5, max_trips=10, od_cell_cap=2)
    notes = " ".join(ReportSpec(gdf, cfg).plan().notes)
    assert "at most 2 trips of one user counted in any one OD cell" in notes
    assert "L2 4.472 instead of 10" in notes
    rel = _run(synth(20, seed=2), gdf, tiles, cfg, (10, 1e-4))
    assert rel.bounds["od_flows_trips_per_user_per_cell"] == 2
    assert rel.params["od_cell_cap"] == 2
    od = rel.extra["analyses"]["od_flows"]["mechanisms"]["counts"]
    assert od["l1_sensitivity"] == 10 and od["l2_sensitivity"] == pytest.approx(math.sqrt(20))
    for e in rel.ledger_entries:
        assert e.params["params"]["od_cell_cap"] == 2
        assert e.params["bounds"]["od_flows_trips_per_user_per_cell"] == 2


def test_the_cap_is_the_same_out_of_core(gdf, tiles):  # noqa: F811
    """User-hash buckets and trip slices keep each user whole: the same capped counts."""
    from privmob.data.sources import load_trip_points
    from privmob.engine import DuckDBEngine
    from privmob.releases.report.build import bucketed_exact_counts, exact_counts

    a, b, c = _cells(tiles)
    frame = pd.concat(
        [synth(30, seed=6)]
        + [od_user(900 + u, [(a, b, 6), (b, c, 2 + u % 3), (c, a, 2 - u % 3)]) for u in range(6)]
    )
    cfg = _cfg(max_trips=10, delta=1e-6, od_cell_cap=2)
    got = []
    for buckets, slices in ((1, 1), (3, 1), (1, 2)):
        with DuckDBEngine() as eng:
            loaded = load_trip_points(frame, engine=eng, tessellation=gdf)
            if slices > 1:
                got.append(exact_counts(eng, loaded.view, cfg, tiles, 77, slices)["od_flows"])
            else:
                got.append(bucketed_exact_counts(loaded, cfg, tiles, 77, buckets)["od_flows"])
    assert all(np.array_equal(got[0], g) for g in got[1:])
    # the cap bites: six users with 10 trips (all kept), 6 from a to b, count 2 each there (a
    # synthetic user with 3 or more there loses some too)
    uncapped = _cfg(max_trips=10, delta=1e-6)
    with DuckDBEngine() as eng:
        loaded = load_trip_points(frame, engine=eng, tessellation=gdf)
        full = bucketed_exact_counts(loaded, uncapped, tiles, 77, 1)["od_flows"]
    ab = _cell(tiles, 0, 1)
    assert full[ab] - got[0][ab] >= 6 * (6 - 2)
