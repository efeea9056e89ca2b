"""zCDP-aware accounting: the tight conversion against OpenDP's, and the ledger refusing by
the tighter of the basic and the zCDP accounting."""

import math

import pytest

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost, zcdp_to_epsilon
from privmob.privacy.ledger.accounting import accounts
from privmob.privacy.zcdp import zcdp_epsilon


@pytest.fixture
def ledger(ledger_at):
    """This module's ledgers: one in each store (tests/privacy/conftest.py)."""
    from privmob.privacy.ledger import Ledger

    return Ledger(ledger_at)


def _opendp_epsilon(rho: float, delta: float) -> float:
    """OpenDP's own zCDP -> (epsilon, delta) conversion, on a measurement whose map is rho."""
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    m = dp.m.make_user_measurement(
        dp.atom_domain(T=int),
        dp.absolute_distance(T=int),
        dp.zero_concentrated_divergence(),
        lambda x: x,
        lambda d_in: float(rho),
        TO=int,
    )
    return dp.c.make_zCDP_to_approxDP(m).map(1).epsilon(delta)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.125, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9, 1e-12])
def test_conversion_matches_opendp(rho, delta):
    ours = zcdp_epsilon(rho, delta)
    assert ours == pytest.approx(_opendp_epsilon(rho, delta), rel=1e-9, abs=1e-12)
    assert ours <= zcdp_to_epsilon(rho, delta)  # never looser than the classical bound


def test_conversion_edges():
    assert zcdp_epsilon(0.0, 1e-6) == 0.0
    with pytest.raises(Exception, match="0 < delta < 1"):
        zcdp_epsilon(0.5, 0.0)


def test_gaussian_releases_compose_by_rho():
    # ten Gaussian releases of rho = 0.01 each, stated at delta = 1e-7 each
    rows = [(zcdp_to_epsilon(0.01, 1e-7), 1e-7, 0.01)] * 10
    a = accounts(rows, budget_epsilon=3.0, budget_delta=1e-6)
    assert a.rho == pytest.approx(0.1)
    assert a.basic_epsilon == pytest.approx(10 * zcdp_to_epsilon(0.01, 1e-7))  # ~8.1
    assert a.zcdp_epsilon == pytest.approx(_opendp_epsilon(0.1, 1e-6), rel=1e-9)  # ~2.3
    assert not a.basic_fits and a.zcdp_fits and a.fits
    assert a.tighter == "zCDP" and a.epsilon == a.zcdp_epsilon


def test_pure_entries_add_beside_the_rho_part():
    rows = [(0.5, 0.0, None), (zcdp_to_epsilon(0.02, 1e-6), 1e-6, 0.02), (0.25, 1e-7, None)]
    a = accounts(rows, budget_epsilon=5.0, budget_delta=1e-5)
    left = 1e-5 - 1e-7
    assert a.zcdp_epsilon == pytest.approx(0.75 + _opendp_epsilon(0.02, left), rel=1e-9)


def test_no_rho_or_no_delta_means_basic_only():
    assert accounts([(0.5, 0.0, None)], 1.0, 1e-6).zcdp_epsilon is None
    a = accounts([(1.0, 0.0, 0.5)], 1.0, 0.0)  # a rho entry but no delta to convert at
    assert a.zcdp_epsilon is None and a.epsilon == 1.0


def test_ledger_refuses_by_the_tighter_accounting(ledger):
    ledger.set_budget("d", 3.0, 1e-6)
    cost = Cost.zcdp(0.01, 1e-7)  # epsilon ~0.81 each by itself
    for _ in range(10):  # basic composition would stop after 3
        ledger.charge("d", cost, kind="series")
    a = ledger.accounts("d")
    assert a.basic_epsilon > 8 and a.zcdp_epsilon is not None and a.zcdp_epsilon < 3
    assert ledger.spent("d").epsilon == pytest.approx(a.zcdp_epsilon)
    # rho for the rest: zcdp_epsilon(rho, 1e-6) <= 3  <=>  rho <= r_max
    r_max = next(r / 1000 for r in range(1, 10_000) if zcdp_epsilon(r / 1000, 1e-6) > 3) - 1e-3
    with pytest.raises(BudgetError, match="zCDP: rho="):
        ledger.charge("d", Cost.zcdp(r_max - 0.1 + 0.05, 1e-7), kind="series")
    ledger.charge("d", Cost.zcdp(r_max - 0.1 - 0.01, 1e-7), kind="series")
    assert ledger.remaining("d").epsilon >= 0


def test_pure_releases_keep_basic_composition(ledger):
    ledger.set_budget("d", 1.0)
    ledger.charge("d", Cost.pure(0.6), kind="od")
    with pytest.raises(BudgetError):
        ledger.charge("d", Cost.pure(0.5), kind="od")
    assert math.isclose(ledger.spent("d").epsilon, 0.6)
