import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips, trips_frame

from privmob.data import load_trips
from privmob.domain import Period
from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness
from privmob.releases.base import Accountant, write_release
from privmob.releases.od import ODDomain, exact_counts, od_matrix


@pytest.fixture(scope="module")
def grid():
    return box_grid(3)


def load(engine, grid, df):
    return load_trips(df, engine=engine, tessellation=grid)


def test_full_public_domain_zeros_included(engine, grid, accountant):
    trips = load(engine, grid, trips_frame([(1, 0, 1), (2, 0, 1)]))
    rel = od_matrix(
        trips, tessellation=grid, epsilon=1.0, accountant=accountant, max_trips=2, rng=1
    )
    od = rel.tables["od"]
    assert len(od) == 9 * 8  # every ordered pair of distinct tiles, whatever the data
    assert set(zip(od.origin, od.destination, strict=True)) == {
        (a, b) for a in range(9) for b in range(9) if a != b
    }
    assert len(rel.tables["outliers"]) == 2
    post = rel.params["post_processing"]
    assert rel.params["tau"] is None and post["expected_bias_per_empty_cell"] == 0


def test_default_is_unbiased_and_clamping_is_post_processing(engine, grid, accountant):
    """Default: noisy integers as drawn, so the total is unbiased. The clamped (tau = 0) and
    suppressed (tau = 10) views with the same seed are functions of the default's noisy values
    alone; a rule that read the exact counts (e.g. zeroing empty cells) would differ.

    False-failure rate: the total of 72 cells of discrete Laplace noise (scale 2, std ~2.7
    per cell, ~23 in total) deviates from the 2 true trips by more than 120 with probability
    < 1e-6."""
    trips = load(engine, grid, trips_frame([(1, 0, 1), (2, 0, 1)]))
    kw = {"tessellation": grid, "epsilon": 1.0, "accountant": accountant, "max_trips": 2}
    free = od_matrix(trips, rng=7, **kw).tables["od"]["count"].to_numpy()
    assert (free < 0).any()  # 72 cells of noise: P(no negative) < 1e-9
    assert abs(free.sum() - 2) < 120
    clamped_rel = od_matrix(trips, rng=7, tau=0, **kw)
    clamped = clamped_rel.tables["od"]["count"].to_numpy()
    np.testing.assert_array_equal(clamped, np.maximum(free, 0))
    suppressed = od_matrix(trips, rng=7, tau=10, **kw).tables["od"]["count"].to_numpy()
    np.testing.assert_array_equal(suppressed, np.where(free >= 10, free, 0))
    # two trips in 72 cells: the noisy values alone say there is no signal
    assert "Too few users" in clamped_rel.params["signal"]["warning"]
    assert clamped_rel.params["expected_signal"]["margin_of_error_95"] > 0
    post = clamped_rel.params["post_processing"]
    assert "inflates totals" in post["rule"]
    # E[max(N, 0)] for discrete Laplace of scale 2: sum_k k q^k (1-q)/(1+q), q = e^-1/2
    q = np.exp(-0.5)
    assert post["expected_bias_per_empty_cell"] == pytest.approx(q / (1 - q**2), rel=1e-4)
    assert post["expected_total_if_all_cells_empty"] == pytest.approx(72 * q / (1 - q**2), 1e-3)


def test_user_bound_is_enforced(engine, grid):
    """A user with 60 trips contributes at most T, whichever key is drawn."""
    base = random_trips(30, 9, seed=1, max_per_user=3)  # nobody else is truncated
    heavy = trips_frame([(999, 0, 1, m) for m in range(60)])
    heavy["tid"] += 10_000
    d0, d1 = load(engine, grid, base), load(engine, grid, pd.concat([base, heavy]))
    dom = ODDomain(9, 1)
    for seed in range(5):
        kw = {"domain": dom, "period": Period(), "unit": PrivacyUnit.USER, "max_trips": 3}
        c0 = exact_counts(d0, rng=Randomness.for_tests(seed), **kw)
        c1 = exact_counts(d1, rng=Randomness.for_tests(seed + 100), **kw)
        assert c1[1] - c0[1] == 3 and c1.sum() - c0.sum() == 3


def test_neighbouring_l1_distance_is_at_most_t(engine, grid):
    """Same key: adding one user (any number of trips) moves the counts by <= T in L1."""
    base = random_trips(40, 9, seed=2)
    rng = np.random.default_rng(5)
    dom = ODDomain(9, 1)
    for trial in range(8):
        extra = trips_frame(
            [
                (5000, int(rng.integers(9)), int(rng.integers(9)), m)
                for m in range(int(rng.integers(1, 30)))
            ]
        )
        extra["tid"] += 50_000
        key = Randomness.for_tests(trial)
        c0 = exact_counts(
            load(engine, grid, base),
            domain=dom,
            period=Period(),
            unit=PrivacyUnit.USER,
            max_trips=4,
            rng=Randomness.for_tests(trial),
        )
        c1 = exact_counts(
            load(engine, grid, pd.concat([base, extra])),
            domain=dom,
            period=Period(),
            unit=PrivacyUnit.USER,
            max_trips=4,
            rng=key,
        )
        assert np.abs(c1 - c0).sum() <= 4


def test_outliers_are_counted_not_dropped(engine, grid):
    df = trips_frame([(1, 0, 1), (2, 0, "no-such-tile"), (3, 4, 5)])
    df.loc[2, "start_time"] = pd.Timestamp("2030-01-01")
    trips = load(engine, grid, df)
    period = Period.parse("day", "2024-01-01", "2024-01-03")
    dom = ODDomain(9, period.n_bins)
    c = exact_counts(trips, domain=dom, period=period, unit=PrivacyUnit.TRIP, max_trips=1)
    assert c[dom.od_size + 0] == 1  # end outside the tessellation on day 0
    assert c[dom.od_size + dom.n_periods] == 1  # outside the study period
    assert c[: dom.od_size].sum() == 1


def test_days_bin_by_local_time(engine, grid):
    df = trips_frame([(1, 0, 1), (2, 0, 1), (3, 0, 1)])
    df["start_time"] = [
        "2024-01-01T23:30:00+00:00",
        "2024-01-02T00:30:00+00:00",
        "2024-01-01T23:30:00-02:00",
    ]  # the last one is 01:30 UTC on Jan 2
    trips = load_trips(df, engine=engine, tessellation=grid)
    period = Period.parse("day", "2024-01-01", "2024-01-03")
    dom = ODDomain(9, 2)
    c = exact_counts(trips, domain=dom, period=period, unit=PrivacyUnit.TRIP, max_trips=1)
    od = c[: dom.od_size].reshape(2, 9, 9)
    assert od[0, 0, 1] == 1 and od[1, 0, 1] == 2
    paris = load_trips(df, engine=engine, tessellation=grid, timezone="Europe/Paris")
    od = exact_counts(paris, domain=dom, period=period, unit=PrivacyUnit.TRIP, max_trips=1)[
        : dom.od_size
    ].reshape(2, 9, 9)
    assert od[0, 0, 1] == 0 and od[1, 0, 1] == 3  # all three are on Jan 2 in Paris


def test_neighbouring_outputs_within_e_epsilon(engine, grid):
    """Output distributions on D and D + one user stay within e^eps (per released cell).

    The heavy user puts T = 2 trips into cell (0 -> 1). 200,000 seeded draws per dataset;
    on values with at least 2,000 draws on both sides, the log-ratio of frequencies must be
    <= eps + 0.12 (the 0.12 slack is > 5 standard errors of the log-ratio there: false
    failure < 1e-6); with noise at half the scale the true ratio reaches e^{2 eps} and fails.
    """
    eps, t = 1.0, 2
    base = random_trips(20, 9, seed=3)
    extra = trips_frame([(777, 0, 1, m) for m in range(10)])
    extra["tid"] += 90_000
    dom = ODDomain(9, 1)
    kw = {"domain": dom, "period": Period(), "unit": PrivacyUnit.USER, "max_trips": t}
    c0 = exact_counts(load(engine, grid, base), rng=Randomness.for_tests(1), **kw)
    c1 = exact_counts(
        load(engine, grid, pd.concat([base, extra])), rng=Randomness.for_tests(1), **kw
    )
    cell = 0 * 9 + 1
    assert c1[cell] - c0[cell] == t

    def max_log_ratio(scale_factor: float) -> float:
        noise, _ = calibrate(NoiseKind.DISCRETE_LAPLACE, eps, l1_sensitivity=t)
        noise = type(noise)(noise.kind, noise.scale * scale_factor)
        n = 200_000
        y0 = noise.add(np.full(n, c0[cell]), Randomness.for_tests(10))
        y1 = noise.add(np.full(n, c1[cell]), Randomness.for_tests(11))
        lo = min(y0.min(), y1.min())
        h0 = np.bincount(y0 - lo)
        h1 = np.bincount(y1 - lo, minlength=h0.size)
        h0 = np.pad(h0, (0, max(0, h1.size - h0.size)))
        ok = (h0 >= 2000) & (h1 >= 2000)
        return float(np.max(np.abs(np.log(h1[ok] / h0[ok]))))

    assert max_log_ratio(1.0) <= eps + 0.12
    assert max_log_ratio(0.5) > eps + 0.12  # a noise scale off by 2x is caught


def test_noise_scale_in_release(engine, grid, accountant):
    """Zero cells of a big empty domain carry noise of std close to the stated scale.

    30 x 30 grid: 870 off-diagonal cells; with T = 3, eps = 0.5 the discrete Laplace std is
    ~8.4; the sample std of 870 draws is within 15% with probability > 0.9999; a 2x error is
    far outside.
    """
    big = box_grid(30, size=0.001)
    trips = load(engine, big, trips_frame([(1, 0, 1)]))
    rel = od_matrix(
        trips,
        tessellation=big,
        epsilon=0.5,
        accountant=accountant,
        max_trips=3,
        tau=0,
        rng=42,
    )
    # undo clamping: compare with the std of max(noise, 0) computed by simulation
    published = rel.tables["od"]["count"].to_numpy()
    noise, _ = calibrate("discrete-laplace", 0.5, l1_sensitivity=3)
    sim = np.maximum(noise.add(np.zeros(400_000, dtype=np.int64), 1), 0)
    assert published.std() == pytest.approx(sim.std(), rel=0.15)
    assert rel.noise["scale"] == pytest.approx(6.0)


def test_suppression_and_rounding_only_touch_noisy_values(engine, grid, accountant):
    trips = load(engine, grid, trips_frame([(u, 0, 1) for u in range(50)]))
    rel = od_matrix(
        trips,
        tessellation=grid,
        epsilon=2.0,
        accountant=accountant,
        max_trips=1,
        tau=10,
        noise="laplace-rounded",
        rng=3,
    )
    counts = rel.tables["od"]["count"].to_numpy()
    assert np.all((counts == 0) | (counts >= 10))
    assert rel.tables["od"].query("origin == 0 and destination == 1")["count"].item() > 30


def test_period_bounds_charge_one_entry_per_period(engine, grid, ledger):
    acct = Accountant(ledger, "d", budget=10.0)
    trips = load(engine, grid, random_trips(10, 9, seed=4))
    period = Period.parse("day", "2024-01-01", "2024-01-04")
    rel = od_matrix(
        trips,
        tessellation=grid,
        epsilon=0.5,
        accountant=acct,
        max_trips=2,
        period=period,
        bound_per="period",
        rng=1,
    )
    assert rel.cost.epsilon == pytest.approx(0.5 * 4)  # 3 days + the out-of-period cell
    assert len(ledger.entries("d")) == 4
    assert sorted(rel.tables["od"]["period"].unique()) == ["2024-01-01", "2024-01-02", "2024-01-03"]


def test_refused_release_reads_nothing_and_writes_nothing(engine, grid, ledger, tmp_path):
    acct = Accountant(ledger, "d", budget=0.4)
    trips = load(engine, grid, trips_frame([(1, 0, 1)]))
    with pytest.raises(BudgetError):
        od_matrix(trips, tessellation=grid, epsilon=0.5, accountant=acct, max_trips=1)
    assert ledger.entries("d") == []


def test_uncharged_release_cannot_be_written(engine, grid, accountant, tmp_path):
    trips = load(engine, grid, trips_frame([(1, 0, 1)]))
    rel = od_matrix(
        trips, tessellation=grid, epsilon=0.5, accountant=accountant, max_trips=1, rng=1
    )
    rel.ledger_entry = None
    with pytest.raises(ConfigError, match="charged"):
        write_release(rel, tmp_path / "out")
    assert not (tmp_path / "out" / "od.parquet").exists()


def test_parameters_are_checked(engine, grid, accountant):
    trips = load(engine, grid, trips_frame([(1, 0, 1)]))
    with pytest.raises(ConfigError, match="max-trips"):
        od_matrix(trips, tessellation=grid, epsilon=1.0, accountant=accountant)
    with pytest.raises(ConfigError):
        od_matrix(
            trips,
            tessellation=grid,
            epsilon=1.0,
            accountant=accountant,
            max_trips=1,
            period=Period(bin="day"),
        )


def test_seeded_release_is_stamped(engine, grid, accountant, tmp_path):
    trips = load(engine, grid, trips_frame([(1, 0, 1)]))
    rel = od_matrix(
        trips, tessellation=grid, epsilon=1.0, accountant=accountant, max_trips=1, rng=5
    )
    meta = rel.metadata()
    assert meta["for_publication"] is False and "NOT FOR PUBLICATION" in meta["warning"]
    secure = od_matrix(trips, tessellation=grid, epsilon=1.0, accountant=accountant, max_trips=1)
    assert secure.metadata()["for_publication"] is True and "warning" not in secure.metadata()


def test_trip_level_counts_every_trip(engine, grid):
    trips = load(engine, grid, trips_frame([(1, 0, 1, m) for m in range(25)]))
    c = exact_counts(
        trips, domain=ODDomain(9, 1), period=Period(), unit=PrivacyUnit.TRIP, max_trips=1
    )
    assert c[1] == 25
