"""privmob.Session: the README example, plans that read no data, errors as the CLI raises them,
and results equal to the CLI's for the same seed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import box

import privmob as pm
from privmob.errors import BudgetError, ConfigError, InputError
from tests.helpers import random_trips, run_cli, write_city_files


def zones(n: int = 3) -> gpd.GeoDataFrame:
    tiles = [box(13 + c * 0.01, 52 + r * 0.01, 13.01 + c * 0.01, 52.01 + r * 0.01)
             for r in range(n) for c in range(n)]  # fmt: skip
    return gpd.GeoDataFrame({"tile_id": range(n * n)}, geometry=tiles, crs=4326)


def trips() -> pd.DataFrame:
    return random_trips(200, 9, seed=1)


def test_readme_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    trips_df, zones_gdf = trips(), zones()
    s = pm.Session(trips_df, tessellation=zones_gdf,
                   ledger=pm.LedgerOptions("ledger.sqlite", dataset="trips-2024",
                                           budget=pm.PureDP(10)))  # fmt: skip
    od = s.od(epsilon=1, per_user=pm.PerUser(10, "trips"),
              period=pm.Period("2024-01-01", "2024-02-01", bin="day"))  # fmt: skip
    table = od.to_pandas()
    assert len(table) == 31 * 9 * 8 and list(table.columns) == [
        "period",
        "origin",
        "destination",
        "count",
    ]
    gdf = od.to_geodataframe()
    assert gdf.crs.to_epsg() == 4326 and (gdf.geom_type == "LineString").all()
    assert gdf.geometry.is_valid.all()
    paths = od.write("out/od")
    assert {p.name for p in paths} == {"od.parquet", "outliers.parquet", "metadata.json"}
    meta = json.loads(Path("out/od/metadata.json").read_text())
    assert meta["privacy"]["cost"]["epsilon"] == 1
    view = s.ledger.to_pandas()
    assert view["epsilon"].tolist() == [1.0] and view["remaining"].tolist() == [9.0]
    html = od._repr_html_()
    assert "<svg" in html and "epsilon=1" in html
    assert od.metadata.unit is pm.PrivacyUnit.USER and od.metadata.cost.epsilon == 1
    s.close()


class Unreadable:
    """A table whose data raises when read: proves a plan reads nothing."""

    def to_arrow(self):
        raise AssertionError("the data was read")


def test_plans_read_no_data() -> None:
    s = pm.Session(Unreadable(), tessellation=zones(), budget=10, dataset="x")
    p = s.plan_od(epsilon=1, max_trips=10, period=pm.Period("2024-01-01", "2024-01-08", bin="day"))
    assert p.cells == 7 * 9 * 8 + 7 + 1 and p.output_rows == 7 * 9 * 8
    assert p.cost.epsilon == 1 and p.margin_of_error_95 > 0 and p.memory_bytes > 0
    q = s.plan_population(epsilon=0.5)
    assert q.cells == 11 and q.cost.epsilon == 0.5
    assert s.ledger.spent() == 0
    with pytest.raises(AssertionError, match="the data was read"):
        s.od(epsilon=1, max_trips=10)
    s.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.plan_od(epsilon=1, max_trips=10, max_trip=3),
        lambda s: s.od(epsilon=1, max_trips=10, max_trip=3),
        lambda s: s.plan_population(epsilon=1, max_trip=3),
        lambda s: s.population(epsilon=1, max_trip=3),
        lambda s: s.plan_report(
            epsilon=1, period=pm.Period("2024-01-01", "2024-01-08"), max_trip=3
        ),
        lambda s: s.report(epsilon=1, period=pm.Period("2024-01-01", "2024-01-08"), max_trip=3),
        lambda s: s.plan_counts(epsilon=1, by=["origin"], max_trip=3),
        lambda s: s.counts(epsilon=1, by=["origin"], max_trip=3),
        lambda s: s.trips_per_hour(epsilon=1, max_trip=3),
        lambda s: s.plan_series_counts(
            epsilon=1, period=pm.Period("2024-01-01", "2024-01-08"), max_trip=3
        ),
        lambda s: s.series_counts(
            epsilon=1, period=pm.Period("2024-01-01", "2024-01-08"), max_trip=3
        ),
    ],
)
def test_a_misspelt_keyword_is_refused_before_reading(call) -> None:
    """The keywords a release shares with its plan (session/keywords.py) are checked: one it
    does not know is a TypeError, as for a method that lists its keywords, not ignored."""
    s = pm.Session(Unreadable(), tessellation=zones(), budget=10, dataset="x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_trip'"):
        call(s)
    assert s.ledger.spent() == 0
    s.close()


def test_in_memory_ledger_removed_on_close() -> None:
    s = pm.Session(trips(), tessellation=zones(), budget=pm.PureDP(2), dataset="t")
    path = s.ledger.path
    s.od(epsilon=1, max_trips=3)
    assert path.exists() and s.ledger.remaining() == pytest.approx(1.0)
    s.close()
    assert not path.exists() and not path.parent.exists()
    t = pm.Session(trips(), tessellation=zones(), budget=pm.PureDP(2), dataset="t")
    folder = t.ledger.path.parent
    assert folder.exists()
    del t  # collected: the private ledger goes with it
    import gc

    gc.collect()
    assert not folder.exists()


def test_memory_plan_refuses_with_hint() -> None:
    from tests.helpers import box_grid

    grid = box_grid(8).gdf  # 64 tiles, daily matrices over 200 years: ~38 GB of domain
    s = pm.Session(
        Unreadable(), tessellation=grid, budget=10, dataset="x", memory_limit="2GB", confirm=True
    )  # past the question a plan of 294 million cells asks first
    with pytest.raises(ConfigError, match="over the memory limit") as err:
        s.od(epsilon=1, max_trips=10, period=pm.Period("2024-01-01", "2224-01-01", bin="day"))
    assert "coarser tessellation" in str(err.value.hint)
    s.close()


# -- bad input: the same privmob.errors types as the CLI, one-line messages ----------------
def _one_line(err: pytest.ExceptionInfo) -> None:
    assert "\n" not in err.value.message


@pytest.mark.parametrize(
    ("columns", "budget", "epsilon", "error"),
    [({"uid": "user"}, 10, 1, InputError), ({}, pm.PureDP(1), 2, BudgetError)],
    ids=["wrong columns", "over budget"],
)
def test_a_refused_release_says_why_in_one_line(
    columns: dict[str, str], budget: object, epsilon: float, error: type[Exception]
) -> None:
    data = trips().rename(columns=columns)
    s = pm.Session(data, tessellation=zones(), budget=budget, dataset="x", shape="trips")
    with pytest.raises(error) as err:
        s.od(epsilon=epsilon, max_trips=3)
    _one_line(err)
    s.close()


def test_wrong_tessellation() -> None:
    with pytest.raises(InputError) as err:
        pm.Session(trips(), tessellation=zones().iloc[0:0], budget=10, dataset="x")
    _one_line(err)


def test_bad_period() -> None:
    with pytest.raises(ConfigError) as err:
        pm.Period("2024-02-01", "2024-01-01", bin="day")
    _one_line(err)
    s = pm.Session(trips(), tessellation=zones(), budget=10, dataset="x")
    with pytest.raises(ConfigError):
        s.od(epsilon=1, max_trips=3, period="day")  # type: ignore[arg-type]
    s.close()


def test_wrong_bound_type() -> None:
    s = pm.Session(trips(), tessellation=zones(), budget=10, dataset="x")
    with pytest.raises(ConfigError, match="MaxVisitsPerHour"):
        s.od(epsilon=1, max_trips=pm.MaxVisitsPerHour(3))
    od = s.od(epsilon=1, max_trips=pm.MaxTripsPerUser(3))
    assert od.metadata.bounds["max_trips_per_user"] == 3
    s.close()


def test_mismatched_tessellation_in_library(accountant) -> None:
    from privmob.data import load_trips
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import make_engine
    from privmob.releases.od import od_matrix
    from privmob.releases.population import population_counts

    eng = make_engine("duckdb")
    small, big = load_tessellation(zones(3)), load_tessellation(zones(4))
    loaded = load_trips(trips(), engine=eng, tessellation=small)
    with pytest.raises(ConfigError, match="another tessellation") as err:
        od_matrix(loaded, tessellation=big, epsilon=1, accountant=accountant, max_trips=3)
    _one_line(err)
    with pytest.raises(ConfigError, match="another tessellation"):
        population_counts(loaded, tessellation=big, epsilon=1, accountant=accountant)
    with pytest.raises(ConfigError, match="counts events, but was given trips"):
        population_counts(loaded, tessellation=small, epsilon=1, accountant=accountant)
    with pytest.raises(ConfigError, match="as a tessellation"):
        od_matrix(loaded, tessellation=zones(3), epsilon=1, accountant=accountant, max_trips=3)
    assert accountant.remaining().epsilon == 1e6  # nothing charged (the budget still pending)
    eng.close()


def test_same_as_cli_for_same_seed(tmp_path: Path) -> None:
    data, tess = tmp_path / "trips.parquet", tmp_path / "zones.geojson"
    trips().to_parquet(data)
    zones().to_file(tess, driver="GeoJSON")
    code = run_cli(["od", str(data), "-t", str(tess), "-e", "1", "-T", "3", "--bin", "day",
                    "--start", "2024-01-01", "--end", "2024-01-04", "--seed", "7",
                    "--test-mode", "--budget", "10", "--format", "geoparquet",
                    "-o", str(tmp_path / "cli"), "--quiet"])  # fmt: skip
    assert code == 0
    s = pm.Session(str(data), tessellation=str(tess), budget=10, seed=7)
    od = s.od(epsilon=1, max_trips=3, period=pm.Period("2024-01-01", "2024-01-04", bin="day"))
    cli = pd.read_parquet(tmp_path / "cli" / "od.parquet")
    pd.testing.assert_frame_equal(od.to_pandas(), cli, check_dtype=False)
    assert not od.metadata.for_publication
    # the Python layer is the CLI's --format layer: same rows, geometries, names and margins
    import geopandas as gpd

    layer = gpd.read_parquet(tmp_path / "cli" / "od_flows.geoparquet")
    mine = od.to_geodataframe()
    assert mine.crs.to_epsg() == layer.crs.to_epsg() == 4326
    pd.testing.assert_frame_equal(
        pd.DataFrame(mine.drop(columns="geometry")),
        pd.DataFrame(layer.drop(columns="geometry")),
        check_dtype=False,
    )
    assert mine.geometry.geom_equals_exact(layer.geometry, tolerance=1e-9).all()
    assert "margin_of_error_95" in mine.columns
    s.close()


def test_import_is_light() -> None:
    import subprocess

    code = "import sys, privmob; assert 'pandas' not in sys.modules and 'duckdb' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_report_and_population_from_trip_points(shared_data: Path, tmp_path: Path) -> None:
    fixture = shared_data / "dpmr_fixture"
    tess = str(fixture / "test_tessellation.geojson")
    s = pm.Session(str(fixture / "test_data.csv"), tessellation=tess, budget=pm.PureDP(5),
                   dataset="dpmr")  # fmt: skip
    period = pm.Period("2020-12-13", "2020-12-20")
    plan = s.plan_report(epsilon=1, max_trips=3, period=period)
    assert plan.cost.epsilon == pytest.approx(1) and plan.cells > 0
    report = s.report(epsilon=1, max_trips=3, period=period)
    assert report.metadata.cost.epsilon == pytest.approx(1)
    paths = report.write_html(tmp_path / "report.html")
    assert paths and (tmp_path / "report.html").exists()
    pop = s.population(epsilon=1)
    gdf = pop.to_geodataframe()
    assert gdf.crs.to_epsg() == 4326 and len(gdf) == s.tessellation.k
    assert s.ledger.remaining() == pytest.approx(3)
    with pytest.raises(ConfigError, match="trip points"):
        pm.Session(trips(), tessellation=zones(), budget=1, dataset="t").report(
            epsilon=1, max_trips=3, period=period
        )
    s.close()


def events() -> pd.DataFrame:
    """Made-up located events inside the 3 x 3 zones, 2024-01-01 to 2024-01-03."""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 3_000
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 150, n),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 2 * 86_400, n), unit="s"),
            "lat": 52 + rng.uniform(0.0005, 0.0295, n),
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    )


def test_zone_series_and_population_from_events() -> None:
    s = pm.Session(events(), tessellation=zones(), budget=pm.PureDP(5), dataset="ev",
                   unit=pm.PrivacyUnit.LANDMARK)  # fmt: skip
    period = pm.Period("2024-01-01", "2024-01-02")
    plan = s.plan_series_counts(epsilon=1, period=period, max_per_bin=pm.MaxVisitsPerHour(2))
    assert plan.cells == 10 * 24 + 1 and plan.cost.epsilon == pytest.approx(1.1)
    series = s.series_counts(epsilon=1, period=period, max_per_bin=pm.MaxVisitsPerHour(2))
    assert series.metadata.cost.epsilon == pytest.approx(1.1)
    assert s.ledger.remaining() == pytest.approx(3.9)
    with pytest.raises(ConfigError, match="not bins of 2h"):
        s.plan_series_counts(
            epsilon=1, period=period, freq="2h", max_per_bin=pm.MaxVisitsPerHour(2)
        )
    # a user-level release on a landmark budget is refused before reading (the ledger's rule)
    with pytest.raises(ConfigError, match="user-level release to a landmark-level budget"):
        s.population(epsilon=1)
    s.close()
    u = pm.Session(events(), tessellation=zones(), budget=pm.PureDP(5), dataset="ev")
    pop = u.population(epsilon=1)
    assert pop.to_pandas()["count"].ge(0).all() and len(pop.to_pandas()) == 11
    u.close()


def test_density_from_phone_events(tmp_path: Path) -> None:
    from privmob.data.density_synth import synthetic_city

    city = synthetic_city(5000, 40, 5, seed=3)
    write_city_files(tmp_path, city, zones=False)
    s = pm.Session(str(tmp_path / "events.csv"), tessellation=city.zones, budget=pm.PureDP(3),
                   cells=str(tmp_path / "cells.csv"), seed=1)  # fmt: skip
    week = city.week_start.date().isoformat()
    plan = s.plan_density(epsilon=1, week=week, max_visits=10)
    assert plan.cells == s.tessellation.k * 168 + 2 and plan.cost.epsilon >= 1
    d = s.density(epsilon=1, week=week, max_visits=10)
    assert s.ledger.spent() == pytest.approx(plan.cost.epsilon)
    gdf = d.to_geodataframe()
    assert gdf.crs.to_epsg() == 4326 and len(gdf) == len(d.to_pandas())
    s.close()


def test_series_from_an_aggregated_file(tmp_path: Path) -> None:
    stamps = pd.date_range("2024-01-01", periods=24, freq="1h")
    path = tmp_path / "series.csv"
    pd.DataFrame({"time": stamps, "value": range(24)}).to_csv(path, index=False)
    s = pm.Session(trips(), tessellation=zones(), budget=pm.PureDP(3), dataset="agg",
                   unit=pm.PrivacyUnit.LANDMARK)  # fmt: skip
    period = pm.Period("2024-01-01", "2024-01-02")
    plan = s.plan_series(epsilon=1, sensitivity=1, period=period, freq="1h", landmarks=[3, 4])
    assert plan.cells == 24 and plan.cost.epsilon == 1
    out = s.series(path, epsilon=1, sensitivity=1, period=period, freq="1h", landmarks=[3, 4])
    assert len(out.to_pandas()) == 24 and s.ledger.remaining() == pytest.approx(2)
    with pytest.raises(InputError, match="declared grid"):
        s.series(path, epsilon=1, sensitivity=1, period=pm.Period("2024-01-01", "2024-01-03"),
                 freq="1h")  # fmt: skip
    assert s.ledger.remaining() == pytest.approx(2)
    s.close()


def test_od_matrix_refuses_trip_points_with_a_hint(shared_data: Path, accountant) -> None:
    from privmob.data import load_trip_points
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import make_engine
    from privmob.releases.od import od_matrix

    fixture = shared_data / "dpmr_fixture"
    tess = load_tessellation(fixture / "test_tessellation.geojson")
    eng = make_engine("duckdb")
    points = load_trip_points(str(fixture / "test_data.csv"), engine=eng, tessellation=tess)
    with pytest.raises(ConfigError, match="counts trips, but was given trip points") as err:
        od_matrix(points, tessellation=tess, epsilon=1, accountant=accountant, max_trips=3)
    assert "load_trips_any" in str(err.value.hint)
    assert accountant.remaining().epsilon == 1e6  # nothing charged (the budget still pending)
    eng.close()


def test_arrow_input_and_population_repr(tmp_path: Path) -> None:
    import pyarrow as pa

    s = pm.Session(pa.Table.from_pandas(events()), tessellation=zones(), budget=2, dataset="a")
    pop = s.population(epsilon=1)
    html = pop._repr_html_()
    assert "<svg" in html and "<path" in html and "epsilon=1" in html
    assert "population" in repr(pop)
    s.close()


def test_wrong_columns_same_message_as_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data, tess = tmp_path / "trips.parquet", tmp_path / "zones.geojson"
    trips().rename(columns={"uid": "user"}).to_parquet(data)
    zones().to_file(tess, driver="GeoJSON")
    code = run_cli(["od", str(data), "-t", str(tess), "-e", "1", "-T", "3", "--budget", "10",
                    "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "o"),
                    "--input-shape", "trips", "--quiet"])  # fmt: skip
    assert code == 2
    cli_text = " ".join(capsys.readouterr().err.split())
    s = pm.Session(str(data), tessellation=str(tess), budget=10, ledger=tmp_path / "s.sqlite",
                   shape="trips")  # fmt: skip
    with pytest.raises(InputError) as err:
        s.od(epsilon=1, max_trips=3)
    assert " ".join(err.value.message.split()) in cli_text
    s.close()


def test_the_constructor_takes_typed_groups_and_the_keywords_still_work(tmp_path: Path) -> None:
    """Issue 28: the 27 keywords grouped as pm.Input, pm.EngineOptions, pm.LedgerOptions;
    issue 41: the groups are the one spelling, the flat keywords warn."""
    ledger = tmp_path / "l.sqlite"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the groups warn about nothing
        grouped = _grouped(ledger)
    assert grouped.shape == "trips"
    grouped.close()
    grouped = pm.Session(
        trips(),
        tessellation=zones(),
        input=pm.Input(shape="trips", timezone="Europe/Berlin", input_timezone="UTC"),
        engine=pm.EngineOptions("duckdb", memory_limit="2GB"),
        ledger=pm.LedgerOptions(ledger, dataset="t", budget=pm.PureDP(3)),
    )
    with pytest.warns(DeprecationWarning, match=r"typed groups, input=pm\.Input\(shape") as said:
        plain = pm.Session(
            trips(), tessellation=zones(), shape="trips", timezone="Europe/Berlin",
            input_timezone="UTC", engine="duckdb", memory_limit="2GB", ledger=ledger,
            dataset="t", budget=pm.PureDP(3),
        )  # fmt: skip
    (flat,) = [w for w in said if issubclass(w.category, DeprecationWarning)]  # one, at our line
    assert flat.filename == __file__
    assert "ledger=pm.LedgerOptions(ledger=..., dataset=..., budget=...)" in str(flat.message)
    assert "engine=pm.EngineOptions(memory_limit=...)" in str(flat.message)
    with grouped, plain:
        for s in (grouped, plain):
            assert (s.shape, str(s.timezone), s.timezone.naive) == ("trips", "Europe/Berlin", "UTC")
            assert s.memory_limit == plain.memory_limit and s.ledger.dataset == "t"
            assert s.ledger.path == ledger and s.ledger.remaining() == pytest.approx(3)
    with pytest.raises(ConfigError, match="given twice"):
        pm.Session(trips(), input=pm.Input(timezone="UTC"), timezone="Europe/Paris", budget=1,
                   dataset="t")  # fmt: skip


def _grouped(ledger: Path) -> pm.Session:
    return pm.Session(
        trips(),
        tessellation=zones(),
        input=pm.Input(shape="trips", timezone="Europe/Berlin", input_timezone="UTC"),
        engine=pm.EngineOptions("duckdb", memory_limit="2GB"),
        ledger=pm.LedgerOptions(ledger, dataset="t", budget=pm.PureDP(3)),
    )


def test_density_takes_its_own_typed_bound() -> None:
    """Issue 28: MaxVisitsPerHour was named max_visits, density's weekly bound; now each typed
    bound is named by the one keyword that takes it."""
    s = pm.Session(trips(), tessellation=zones(), budget=5, dataset="t")
    with s:
        plan = s.plan_density(epsilon=1, week="2024-01-01", max_visits=pm.MaxVisitsPerWeek(10))
        same = s.plan_density(epsilon=1, week="2024-01-01", max_visits=10)
        assert (plan.cost, plan.cells) == (same.cost, same.cells)
        with pytest.raises(ConfigError, match="MaxVisitsPerHour does not bound"):
            s.plan_density(epsilon=1, week="2024-01-01", max_visits=pm.MaxVisitsPerHour(10))


def test_unique_trips_from_python_as_from_the_command_line() -> None:
    """``--unique`` existed only on the command line (a closure around the spec)."""
    rows = [("a", 0, 1)] * 5 + [("b", 0, 1), ("b", 1, 0)]
    frame = pd.DataFrame(
        {"uid": [r[0] for r in rows], "tid": range(7), "origin": [r[1] for r in rows],
         "destination": [r[2] for r in rows],
         "start_time": pd.Timestamp("2024-01-01 08:00") + pd.to_timedelta(range(7), "min")}
    )  # fmt: skip
    s = pm.Session(frame, tessellation=zones(), budget=pm.PureDP(1e11), dataset="t", seed=3)
    with s:
        od = s.od(epsilon=1e10, max_trips=10, unique=True).release.tables["od"]
    cells = od.set_index(["origin", "destination"])["count"]
    assert cells[(0, 1)] == 2 and cells[(1, 0)] == 1  # a's five trips count once
