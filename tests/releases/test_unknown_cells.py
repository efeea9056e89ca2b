"""An event at a cell id absent from the cells table goes to the noisy outliers cell, in
population (--cells, nearest tower or Voronoi shares) and density alike; it used to make them
refuse the whole input ("cell id 'Z' is not in the cells table")."""

from datetime import datetime

import pandas as pd
import pytest
from tests.helpers import box_grid

from privmob.data import load_events
from privmob.prepare.presample import density_counts
from privmob.releases.population import exact_home_counts

TOWERS = pd.DataFrame({"cell_id": [10, 11], "lat": [52.005, 52.025], "lng": [13.005, 13.025]})


@pytest.fixture
def events():
    # u1 at tower 10, u2 only at cell 99 (not in the table), u3 at tower 11; all at night
    return pd.DataFrame(
        {
            "uid": ["u1", "u1", "u2", "u2", "u3"],
            "datetime": pd.to_datetime(
                [
                    "2024-01-01 22:00",
                    "2024-01-01 23:30",
                    "2024-01-01 22:10",
                    "2024-01-02 01:00",
                    "2024-01-01 21:00",
                ]
            ),
            "cell_id": [10, 10, 99, 99, 11],
        }
    )


def test_unknown_cell_is_kept_at_tile_minus_one(engine, events):
    grid = box_grid(3)
    loaded = load_events(events, engine=engine, tessellation=grid, cells=TOWERS)
    df = engine.fetch(f"SELECT uid, tile, cell_id FROM {loaded.view} ORDER BY uid, time")
    assert len(df) == len(events)  # nothing dropped, nothing refused
    assert df[df.uid == "u2"]["tile"].tolist() == [-1, -1]
    assert df[df.uid == "u2"]["cell_id"].tolist() == ["99", "99"]
    assert (df[df.uid != "u2"]["tile"] >= 0).all()


def test_population_counts_a_home_at_an_unknown_cell_as_outside(engine, events):
    grid = box_grid(3)
    loaded = load_events(events, engine=engine, tessellation=grid, cells=TOWERS)
    counts = exact_home_counts(loaded, grid.k)
    assert counts[grid.k] == 1  # u2: "home outside the zones"
    assert counts[: grid.k].sum() == 2 and counts[grid.k + 1] == 0


def test_density_counts_visits_at_an_unknown_cell_out_of_domain(engine, events):
    grid = box_grid(3)
    loaded = load_events(events, engine=engine, tessellation=grid, cells=TOWERS)
    week = datetime(2024, 1, 1)
    counts = density_counts(engine, loaded.view, 9, week, max_visits=5, key=1)
    assert counts.outside == 2  # u2's two hourly visits, in the out-of-domain cell
