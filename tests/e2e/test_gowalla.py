"""End to end on real data: Gowalla check-ins in New York with the 263 NYC taxi zones.

Trips are consecutive check-ins of a user in different zones (seed 003's rule). Skipped with
a message when ../shared/data is absent.
"""

import numpy as np
import pytest

from privmob.data import load_events
from privmob.data.tessellation_input import load_tessellation
from privmob.domain import Period
from privmob.prepare.trips import consecutive_event_trips
from privmob.privacy.costs import PrivacyUnit
from privmob.releases.base import Accountant, write_release
from privmob.releases.od import ODDomain, exact_counts, od_matrix

GOWALLA_COLUMNS = ["uid", "datetime", "lat", "lng", "location_id"]


@pytest.fixture(scope="module")
def nyc(shared_data):
    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    return tess, shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"


def test_gowalla_od_release(nyc, engine, ledger, tmp_path):
    tess, events_path = nyc
    assert tess.k == 263
    events = load_events(
        events_path,
        engine=engine,
        tessellation=tess,
        header=False,
        names=GOWALLA_COLUMNS,
        delimiter="\t",
        timezone="America/New_York",
    )
    n_events, n_users = engine.fetch(
        f"SELECT count(*), count(DISTINCT uid) FROM {events.view}"
    ).iloc[0]
    assert (n_events, n_users) == (138_957, 7_115)  # SOURCE.md's figures: nothing dropped
    trips = consecutive_event_trips(events)

    period = Period.parse("all", "2009-02-01", "2010-11-01")
    dom = ODDomain(tess.k, 1)
    truth = exact_counts(trips, domain=dom, period=period, unit=PrivacyUnit.TRIP, max_trips=1)
    bounded = exact_counts(trips, domain=dom, period=period, unit=PrivacyUnit.USER, max_trips=10)
    assert truth[: dom.od_size].sum() > 10_000
    assert bounded.sum() <= 10 * n_users < truth.sum()

    acct = Accountant(ledger, "gowalla-nyc", budget=2.0)
    rel = od_matrix(
        trips, tessellation=tess, epsilon=1.0, accountant=acct, max_trips=10, period=period, tau=5
    )
    od = rel.tables["od"]
    assert len(od) == 263 * 262
    paths = write_release(rel, tmp_path / "od")
    assert all(p.exists() for p in paths)
    # utility: the 20 busiest true flows (bounded) are mostly found among published non-zeros
    top = np.argsort(bounded[: dom.od_size])[::-1][:20]
    published = od.set_index(["origin", "destination"])["count"]
    ids = list(tess.tile_ids)  # the tessellation's own id type (od tables keep it)
    found = sum(published[(ids[i // 263], ids[i % 263])] > 0 for i in top)
    assert found >= 15
    assert ledger.remaining("gowalla-nyc").epsilon == pytest.approx(1.0)
