"""Counts per zone and hour from raw Gowalla events, bounded per user, then published."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.data import load_events
from privmob.data.tessellation import load_tessellation
from privmob.errors import ConfigError
from privmob.privacy.costs import Unit
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant, write_release
from privmob.releases.landmark_counts import (
    bounded_zone_counts,
    publish_zone_counts,
    time_grid,
)

COLUMNS = ["uid", "datetime", "lat", "lng", "location_id"]


@pytest.fixture(scope="module")
def gowalla(shared_data):  # type: ignore[no-untyped-def]
    from privmob.engine import make_engine

    tess = load_tessellation(shared_data / "nyc_taxi_zones" / "taxi_zones.geojson")
    path = shared_data / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"
    events = load_events(
        path, engine=make_engine("duckdb"), tessellation=tess, header=False, names=COLUMNS,
        delimiter="\t", timezone="America/New_York",
    )  # fmt: skip
    raw = pd.read_csv(path, sep="\t", header=None, names=COLUMNS)
    local = (
        pd.to_datetime(raw["datetime"], utc=True)
        .dt.tz_convert("America/New_York")
        .dt.tz_localize(None)
    )
    return tess, events, raw.assign(local=local)


def test_bounded_counts_match_pandas(gowalla) -> None:  # type: ignore[no-untyped-def]
    tess, events, raw = gowalla
    grid = time_grid("2010-09-06", "2010-09-13", "1h")
    one = bounded_zone_counts(events, tiles=tess.k, grid=grid, max_per_bin=1, rng=None)
    many = bounded_zone_counts(events, tiles=tess.k, grid=grid, max_per_bin=10_000, rng=None)
    assert one.shape == many.shape == (tess.k + 1, 168)
    sel = raw[(raw["local"] >= "2010-09-06") & (raw["local"] < "2010-09-13")]
    hour = sel["local"].dt.floor("h")
    expected_all = sel.groupby(hour).size().reindex(grid, fill_value=0).to_numpy()
    expected_users = sel.groupby(hour)["uid"].nunique().reindex(grid, fill_value=0).to_numpy()
    np.testing.assert_array_equal(many.sum(axis=0), expected_all)
    np.testing.assert_array_equal(one.sum(axis=0), expected_users)  # 1 event per user-hour
    assert np.all(one <= many) and many[-1].sum() > 0  # some check-ins fall outside the zones


def test_publish_zone_counts(gowalla, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tess, events, _ = gowalla
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_budget("gowalla", 2.0, unit=Unit.LANDMARK)
    grid = time_grid("2010-09-06", "2010-09-08", "1h")
    rel = publish_zone_counts(
        events, tile_ids=tess.tile_ids, grid=grid, max_per_bin=2, landmarks=[10, 11],
        epsilon=1.0, scheme="uniform", accountant=Accountant(ledger, "gowalla"), rng=5,
    )  # fmt: skip
    assert rel.bounds["sensitivity_per_timestamp"] == 2.0
    assert "enforced" in rel.bounds["sensitivity_source"]
    assert len(rel.tables["series"]) == (tess.k + 1) * 48
    assert rel.tables["budgets"]["epsilon_t"].tolist() == pytest.approx([1 / 3] * 48)
    assert "outside" in set(rel.tables["series"]["zone"])
    assert ledger.spent("gowalla").epsilon == pytest.approx(1.0)
    write_release(rel, tmp_path / "out")
    back = pd.read_parquet(tmp_path / "out" / "series.parquet")
    assert back["value"].dtype == np.int64 and len(back) == (tess.k + 1) * 48


def test_time_grid_is_checked() -> None:
    assert len(time_grid("2024-01-01", "2024-01-02", "1h")) == 24
    with pytest.raises(ConfigError):
        time_grid("2024-01-02", "2024-01-01", "1h")
