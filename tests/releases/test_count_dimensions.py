"""The count template's dimensions with declared edges and values (``privmob.releases.dimensions``):
trip distance bins, a categorical column carried through the loader, time bins of any length and
zones with an ``outside`` label. Their labels are declared, never read from the data: a value
outside them is counted in the outliers cell and appears in no output."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, random_trips, run_cli

import privmob as pm
from privmob.data.grids import square_grid
from privmob.errors import ConfigError, InputError
from privmob.privacy.ledger import Ledger
from privmob.releases.dimensions import Named, split_dimensions

#: epsilon so large that the discrete Laplace noise (scale T / epsilon <= 1e-4) is 0 with
#: probability above 1 - 1e-(4e4): the released counts are the exact bounded counts
EXACT = 1e10
MANY = 10**6  # a bound no user reaches: every record is counted
JC_BOUNDS = [-74.1, 40.65, -73.95, 40.8]
R_KM = 6371.0088  # the report's jump_length radius: one definition of a trip's distance


def _km(lat1: np.ndarray, lng1: np.ndarray, lat2: np.ndarray, lng2: np.ndarray) -> np.ndarray:
    p1, p2, dl = np.radians(lat1), np.radians(lat2), np.radians(lng2 - lng1)
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return np.asarray(2 * R_KM * np.arcsin(np.sqrt(np.minimum(1.0, h))))


def _session(data: object, tess: object = None, **kw: object) -> pm.Session:
    tess = box_grid(3) if tess is None else tess
    return pm.Session(data, tessellation=tess, dataset="t", seed=5, budget=1e11, **kw)


@pytest.fixture(scope="module")
def jc_grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("grid") / "grid.geojson"
    path.write_text(json.dumps(square_grid(JC_BOUNDS, 1000).to_geojson_dict()))
    return path


# -- trip distance -------------------------------------------------------------------------------
def test_distance_and_a_categorical_column_on_citibike(shared_data: Path, jc_grid: Path) -> None:
    """Real rides (Citi Bike Jersey City, January 2018: start and end coordinates, ``usertype``):
    the distance bins count the great-circle km between each ride's ends, the declared user
    type its own rides; the rest (undeclared type, >= 5 km) is the outliers cell."""
    path = shared_data / "citibike_jc" / "JC-201801-citibike-tripdata.csv"
    raw = pd.read_csv(path)
    edges = [0, 0.5, 1, 2, 5]
    with _session(str(path), str(jc_grid), columns={"uid": "bikeid"}) as s:
        by = [pm.Distance(edges), pm.Categorical("usertype", ["Subscriber"])]
        rel = s.counts(epsilon=EXACT, by=by, max_records=MANY).release
    km = _km(
        raw["start station latitude"].to_numpy(),
        raw["start station longitude"].to_numpy(),
        raw["end station latitude"].to_numpy(),
        raw["end station longitude"].to_numpy(),
    )
    sub = (raw["usertype"] == "Subscriber").to_numpy()
    want = [int((sub & (km >= lo) & (km < hi)).sum()) for lo, hi in itertools.pairwise(edges)]
    table = rel.tables["counts"]
    assert table["usertype"].tolist() == ["Subscriber"] * 4
    assert table["count"].tolist() == want
    assert int(rel.tables["outliers"]["count"].iloc[0]) == len(raw) - sum(want)
    assert (raw["usertype"] != "Subscriber").sum() > 100  # the outliers hold real rides
    assert rel.params["trip_distance"].startswith("great-circle km between the trip's start")
    assert rel.params["by"] == ["distance:0,0.5,1,2,5", "usertype:Subscriber"]


def test_distance_between_tile_centroids_when_trips_give_tiles() -> None:
    """Trips given by tile ids: the distance is between the centroids of their tiles; a trip
    outside every tile has none and is counted in the outliers cell."""
    tess = box_grid(3)
    trips = random_trips(30, 9, seed=8)
    trips.loc[trips.index[:7], "origin"] = 99  # not a tile of the tessellation
    edges = [0, 0.8, 1.5, 3]
    with _session(trips, tess) as s:
        rel = s.counts(epsilon=EXACT, by=["distance:0,0.8,1.5,3"], max_records=MANY).release
    c = tess.centroids()  # lng, lat per tile
    inside = trips["origin"].to_numpy() < 9
    o, d = trips["origin"].to_numpy()[inside], trips["destination"].to_numpy()[inside]
    km = _km(c[o, 1], c[o, 0], c[d, 1], c[d, 0])
    want = [int(((km >= lo) & (km < hi)).sum()) for lo, hi in itertools.pairwise(edges)]
    assert rel.tables["counts"]["count"].tolist() == want
    assert int(rel.tables["outliers"]["count"].iloc[0]) == len(trips) - sum(want)
    assert sum(want) > 0 and (~inside).sum() == 7
    assert "centroids" in rel.params["trip_distance"]


# -- a categorical column ------------------------------------------------------------------------
def _with_modes(trips: pd.DataFrame) -> pd.DataFrame:
    modes = np.array(["bike", "car", "walk", "secret-mode-x"])
    return trips.assign(mode=modes[np.arange(len(trips)) % 4])


def test_a_categorical_column_counts_its_declared_values_only() -> None:
    trips = _with_modes(random_trips(30, 9, seed=3))
    with _session(trips) as s:
        typed = s.counts(
            epsilon=EXACT, by=[pm.Categorical("mode", ["car", "bike"]), "hour"], max_records=MANY
        ).release
        spelled = s.counts(epsilon=EXACT, by=["mode:car,bike", "hour"], max_records=MANY).release
    table = typed.tables["counts"]
    pd.testing.assert_frame_equal(table, spelled.tables["counts"])  # one meaning, two spellings
    assert list(table["mode"].unique()) == ["car", "bike"]  # the declared order
    want = trips[trips["mode"].isin(["car", "bike"])]
    got = table.set_index(["mode", "hour"])["count"]
    exact = want.groupby([want["mode"], want["start_time"].dt.hour]).size()
    assert got[got != 0].sort_index().to_dict() == exact.sort_index().to_dict()
    outside = int(typed.tables["outliers"]["count"].iloc[0])
    assert outside == int((~trips["mode"].isin(["car", "bike"])).sum())


def test_an_undeclared_value_appears_in_no_output(tmp_path: Path) -> None:
    """The data's values of a categorical column are never read into the domain: an
    undeclared one is in no published file, no layer and no ledger entry."""
    trips = _with_modes(random_trips(30, 9, seed=4))
    data = tmp_path / "trips.csv"
    trips.to_csv(data, index=False)
    grid = tmp_path / "grid.geojson"
    grid.write_text(json.dumps(box_grid(3).to_geojson_dict()))
    ledger = tmp_path / "l.sqlite"
    args = ["counts", str(data), "-t", str(grid), "-e", "1", "-T", "3", "-q", "--budget", "5",
            "--by", "origin,mode:bike,car,walk", "--ledger", str(ledger)]  # fmt: skip
    assert run_cli([*args, "-o", str(tmp_path / "o")]) == 0
    published = [p for p in (tmp_path / "o").rglob("*") if p.is_file()]
    assert {p.name for p in published} == {"counts.parquet", "outliers.parquet", "metadata.json"}
    tables = pd.read_parquet(tmp_path / "o" / "counts.parquet")
    assert set(tables["mode"]) == {"bike", "car", "walk"}
    for path in [*published, ledger]:
        assert b"secret-mode-x" not in path.read_bytes(), path.name
    entries = Ledger(ledger).entries("trips")
    assert entries and "secret-mode-x" not in json.dumps([e.__dict__ for e in entries], default=str)


def test_a_missing_categorical_column_is_one_clear_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "trips.csv"
    random_trips(5, 9, seed=1).to_csv(data, index=False)
    grid = tmp_path / "grid.geojson"
    grid.write_text(json.dumps(box_grid(3).to_geojson_dict()))
    ledger = tmp_path / "l.sqlite"
    args = ["counts", str(data), "-t", str(grid), "-e", "1", "--budget", "5", "-q", "--by",
            "mode:bike,car", "--ledger", str(ledger), "-o", str(tmp_path / "o")]  # fmt: skip
    assert run_cli(args) == 2
    err = capsys.readouterr().err
    assert "missing column 'mode'" in err and "trips.csv" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    assert Ledger(ledger).entries("trips") == []
    with _session(str(data)) as s, pytest.raises(InputError) as caught:
        s.counts(epsilon=1, by=["mode:bike,car"])
    assert caught.value.column == "mode" and "trips.csv" in str(caught.value)


def test_a_categorical_column_on_trips_built_from_events_is_refused() -> None:
    events = pd.DataFrame(
        {
            "uid": [1, 1, 2],
            "datetime": ["2024-01-01 08:00", "2024-01-01 09:00", "2024-01-01 10:00"],
            "lat": [52.001, 52.025, 52.001],
            "lng": [13.001, 13.025, 13.001],
            "mode": ["bike", "bike", "car"],
        }
    )
    with _session(events) as s, pytest.raises(ConfigError, match="one-row trips"):
        s.counts(epsilon=1, by=["mode:bike,car"])
    with _session(events) as s:  # the events themselves carry it
        rel = s.counts(epsilon=EXACT, by=["mode:bike,car"], records="events", max_records=MANY)
    assert rel.release.tables["counts"]["count"].tolist() == [2, 1]


@pytest.mark.parametrize(
    ("by", "message"),
    [
        (["uid:1,2"], "record column"),
        (["hour:1,2"], "takes no edges or values"),
        (["bin"], "unknown count dimension"),
        (["mode:"], "declare its values"),
        (["mode:a,a"], "declare its values"),
        (["bin:1h"], "declare its start and end"),
        (["distance:5,1"], "increasing edges"),
    ],
)
def test_a_dimension_that_cannot_be_declared_is_refused_before_reading(
    by: list[str], message: str
) -> None:
    with _session(random_trips(5, 9, seed=1)) as s, pytest.raises(ConfigError, match=message):
        s.plan_counts(epsilon=1, by=by)


def test_by_is_split_between_dimensions_not_inside_their_edges() -> None:
    got = split_dimensions("origin,duration:0,5,15,hour,mode:bike,car,walk,weekday")
    assert got == ("origin", "duration:0,5,15", "hour", "mode:bike,car,walk", "weekday")


# -- time bins and zones -------------------------------------------------------------------------
def test_time_bins_of_any_length_and_zones_with_outside() -> None:
    tess = box_grid(2)
    t0 = pd.Timestamp("2024-01-01")
    events = pd.DataFrame(
        {
            "uid": [1, 1, 2, 2, 3],
            "datetime": [t0 + pd.Timedelta(h, "h") for h in (1, 7, 7, 13, 30)],
            "lat": [52.005, 52.005, 52.015, 60.0, 52.005],
            "lng": [13.005, 13.005, 13.015, 10.0, 13.005],
        }
    )
    period = pm.Period("2024-01-01", "2024-01-02")
    with _session(events, tess) as s:
        rel = s.counts(
            epsilon=EXACT, by=["zone", pm.TimeBins("6h")], records="events", max_records=MANY,
            period=period,
        ).release  # fmt: skip
    table = rel.tables["counts"]
    # one type for Parquet: the tile ids as text beside "outside" (an int column failed to write)
    assert len(table) == 5 * 4 and set(table["zone"]) == {"0", "1", "2", "3", "outside"}
    got = {(z, str(b)): n for z, b, n in table.itertuples(index=False) if n}
    assert got == {
        ("0", "2024-01-01 00:00:00"): 1,
        ("0", "2024-01-01 06:00:00"): 1,
        ("3", "2024-01-01 06:00:00"): 1,
        ("outside", "2024-01-01 12:00:00"): 1,
    }
    assert int(rel.tables["outliers"]["count"].iloc[0]) == 1  # day 2: outside the period


def test_layers_of_a_release_without_one_are_refused_before_reading(tmp_path: Path) -> None:
    """``privmob counts --format csv`` counted the input, then failed on its layer (a count
    table by no tile dimension has none; by a tile it has, tests/render/test_count_layers.py)."""
    steps: list[str] = []
    session = pm.Session(
        random_trips(5, 9, seed=1), tessellation=box_grid(3), dataset="t", seed=1, budget=10,
        progress=steps.append,
    )  # fmt: skip
    with session as s:
        with pytest.raises(ConfigError, match="a counts release by hour has no map layer"):
            s.counts(epsilon=1, by=["hour"], output=tmp_path / "o", formats=["csv"])
        assert not any("reading" in m or "counting" in m for m in steps), steps
        assert s.ledger.to_pandas().empty and not (tmp_path / "o").exists()


def test_a_bound_per_label_is_calibrated_for_every_label(engine) -> None:  # type: ignore[no-untyped-def]
    """``CountSpec.bound_per`` (a zone series' bins): each user keeps the bound in every bin
    and once more outside the period, so the sensitivity is the bound times (bins + 1), and an
    adversary with many events in every bin and outside it reaches it exactly."""
    from datetime import datetime

    from privmob.data import load_events
    from privmob.domain import Period
    from privmob.privacy.samplers import Randomness
    from privmob.releases.counts import CountSpec, exact_cells

    tess = box_grid(2)
    period = Period(datetime(2024, 1, 1), datetime(2024, 1, 2))
    spec = CountSpec(
        tess, 1.0, "events", (Named("zone"), pm.TimeBins("6h")), 2, period=period, bound_per="bin"
    )
    assert spec.sensitivity == 2 * (4 + 1)
    plain = CountSpec(tess, 1.0, "events", (Named("zone"), pm.TimeBins("6h")), 2, period=period)
    assert spec.calibrated[0].scale == pytest.approx(5 * plain.calibrated[0].scale)
    base = pd.DataFrame(
        {"uid": [1, 2], "datetime": ["2024-01-01 01:00", "2024-01-01 13:00"],
         "lat": [52.005, 52.015], "lng": [13.005, 13.015]}
    )  # fmt: skip
    hours = [h for h in range(-6, 24, 2) for _ in range(3)]  # 9 events in each bin, 9 outside
    adversary = pd.DataFrame(
        {
            "uid": 99,
            "datetime": [str(pd.Timestamp("2024-01-01") + pd.Timedelta(h, "h")) for h in hours],
            "lat": 52.005,
            "lng": 13.005,
        }
    )
    counts = [
        exact_cells(
            load_events(df, engine=engine, tessellation=tess),
            spec,
            spec.count_domain(),
            spec.per_user(None),
            Randomness.for_tests(7),
        )
        for df in (base, pd.concat([base, adversary]))
    ]
    assert int(np.abs(counts[1] - counts[0]).sum()) == spec.sensitivity
