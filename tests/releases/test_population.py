"""DP population counts (SPEC 4.4): domain, sensitivity 1, ledger, noise scale."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.engine.relation import Loaded
from privmob.errors import BudgetError
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.population import exact_home_counts, population_counts


class _Zones:
    """The two attributes a population release reads from a tessellation."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.tile_ids = [f"z{i}" for i in range(k)]


def _events(engine, n_users: int, k: int, seed: int = 0) -> Loaded:
    rng = np.random.default_rng(seed)
    uid = np.repeat(np.arange(n_users), 5)
    hours = rng.choice([21, 22, 23, 2, 3, 12], size=uid.size)
    tile = rng.integers(-1, k, size=uid.size).astype("int32")
    time = pd.Timestamp("2024-01-01") + pd.to_timedelta(hours, unit="h")
    engine.register("pop_ev", pd.DataFrame({"uid": uid, "time": time, "tile": tile}))
    return Loaded("pop_ev", "test", "events", engine, ["uid", "time", "tile"])


def test_exact_counts_put_every_user_in_one_cell(engine) -> None:
    ev = _events(engine, 300, 8)
    counts = exact_home_counts(ev, 8)
    assert counts.shape == (10,) and counts.sum() == 300


def test_release_noise_ledger_and_domain(engine, tmp_path) -> None:
    ev = _events(engine, 2000, 20)
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "pop", budget=1.0)
    rel = population_counts(ev, tessellation=_Zones(20), epsilon=0.5, accountant=acct, rng=1)
    t = rel.tables["population"]
    assert len(t) == 22 and (t["count"] >= 0).all()
    assert rel.noise["scale"] == pytest.approx(2.0) and rel.noise["l1_sensitivity"] == 1
    assert not rel.for_publication
    assert acct.ledger.spent("pop").epsilon == pytest.approx(0.5)
    exact = exact_home_counts(ev, 20)
    # noise of scale 2 on ~100 per cell: every cell within 40 (P(|N| > 40) < 3e-9 per cell)
    assert np.abs(t["count"].to_numpy() - exact).max() <= 40
    # the second release would overspend a budget of 1.0: refused before reading data
    engine.con.execute("DROP VIEW IF EXISTS pop_ev")
    with pytest.raises(BudgetError):
        population_counts(ev, tessellation=_Zones(20), epsilon=0.6, accountant=acct, rng=2)


def test_a_release_that_failed_leaves_no_precheck_behind(engine, tmp_path) -> None:
    # the budget is checked once per release (Accountant.precheck); a release that failed
    # after its check must not let the next one of the same cost skip it: spent meanwhile by
    # another accountant, the next release is refused before it reads anything
    ev = _events(engine, 50, 4)
    ledger = Ledger(tmp_path / "l.sqlite")
    acct = Accountant(ledger, "pop", budget=1.0)
    acct.write_budget()  # the other accountant below charges the same budget
    engine.con.execute("DROP VIEW IF EXISTS pop_ev")
    with pytest.raises(Exception) as failed:  # the input is gone: the engine fails to read it
        population_counts(ev, tessellation=_Zones(4), epsilon=0.6, accountant=acct, rng=1)
    assert not isinstance(failed.value, BudgetError)
    ev = _events(engine, 50, 4)
    population_counts(ev, tessellation=_Zones(4), epsilon=0.6, accountant=Accountant(ledger, "pop"))
    engine.con.execute("DROP VIEW IF EXISTS pop_ev")
    with pytest.raises(BudgetError):
        population_counts(ev, tessellation=_Zones(4), epsilon=0.6, accountant=acct, rng=2)


def test_noise_scale_monte_carlo(engine, tmp_path) -> None:
    # 40 releases x 200 cells = 8000 noise draws at scale 1/eps = 2 (discrete Laplace, std
    # 2.77): the sample std is within 6% of it (about 4 standard errors: false failure < 1e-4);
    # a scale off by 2x moves it by > 80%.
    ev = _events(engine, 4000, 198, seed=3)
    exact = exact_home_counts(ev, 198)
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "pop", budget=1e6)
    diffs = []
    for s in range(40):
        rel = population_counts(ev, tessellation=_Zones(198), epsilon=0.5, accountant=acct, rng=s)
        c = rel.tables["population"]["count"].to_numpy()
        keep = exact > 15  # away from the clamp at 0
        diffs.append(c[keep] - exact[keep])
    d = np.concatenate(diffs)
    q = np.exp(-0.5)
    assert d.std() == pytest.approx(np.sqrt(2 * q) / (1 - q), rel=0.06)


def test_users_seen_only_outside_the_period_are_in_the_unknown_cell(engine) -> None:
    # SPEC 1.1: records outside the declared period go to a noisy outliers cell, they are not
    # silently dropped. Every user is in exactly one cell (sensitivity 1).
    from privmob.domain import Period

    t = pd.Timestamp
    df = pd.DataFrame(
        {
            "uid": [1, 1, 2, 3, 3],
            "time": [
                t("2024-01-01 22:00"),
                t("2024-01-05 22:00"),
                t("2024-01-09 23:00"),
                t("2024-01-02 12:00"),
                t("2024-01-09 02:00"),
            ],
            "tile": np.array([0, 1, 1, 2, 1], dtype="int32"),
        }
    )
    engine.register("pop_out", df)
    ev = Loaded("pop_out", "test", "events", engine, ["uid", "time", "tile"])
    period = Period.parse("all", "2024-01-01", "2024-01-08")
    counts = exact_home_counts(ev, 3, period=period)
    # user 1: two nights in the period, tie -> zone 0; user 2: only outside -> unknown;
    # user 3: no night event inside the period -> unknown
    assert counts.tolist() == [1, 0, 0, 0, 2]
