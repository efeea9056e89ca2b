"""Bad input through the Python API raises the same privmob error, with the same one-line
message, as the CLI gives for the same input; never a bare AssertionError, AttributeError or
KeyError. One case per input kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import privmob as pm
from privmob.errors import PrivmobError
from tests.helpers import box_grid, random_trips

PERIOD = ("2024-01-01", "2024-01-31")


def _cli_error(argv: list[str]) -> PrivmobError:
    from privmob.cli import app

    res = CliRunner().invoke(app, argv)
    assert isinstance(res.exception, PrivmobError), (res.exception, res.output)
    return res.exception


def _py_error(call: Callable[[], Any]) -> PrivmobError:
    try:
        call()
    except PrivmobError as exc:
        return exc
    raise AssertionError("the Python API accepted the bad input")


def _same(cli: PrivmobError, py: PrivmobError) -> None:
    """Same type, message and hint; a table is named by its type where a file by its path; a
    hint names the options as its surface spells them (``--tile-id`` / ``tile_id=``:
    :mod:`privmob.surface`), the rest of it the same."""
    assert type(py) is type(cli)

    def text(err: PrivmobError) -> str:
        source = getattr(err, "source", None)
        return err.message.replace(source, "<input>") if source else err.message

    assert text(py) == text(cli)
    assert (py.hint is None) == (cli.hint is None)
    if py.hint is not None and cli.hint is not None and py.hint != cli.hint:
        assert "--" in cli.hint and "--" not in py.hint, (cli.hint, py.hint)


@pytest.fixture
def zones(tmp_path: Path) -> Path:
    path = tmp_path / "zones.geojson"
    box_grid(3).gdf.to_file(path, driver="GeoJSON")
    return path


def _od_cli(data: Path, zones: Path, tmp_path: Path, *extra: str) -> PrivmobError:
    argv = ["od", str(data), "-t", str(zones), "-e", "1", "-T", "3", "--start", PERIOD[0]]
    argv += ["--end", PERIOD[1], "--test-mode", "--budget", "10", "-o", str(tmp_path / "o")]
    return _cli_error([*argv, "--quiet", *extra])


def _od_py(data: Any, zones: Any, **session: Any) -> PrivmobError:
    def call() -> None:
        s = pm.Session(data, tessellation=zones, budget=10, dataset="d", **session)
        try:
            s.od(epsilon=1, max_trips=3, period=pm.Period(*PERIOD))
        finally:
            s.close()

    return _py_error(call)


def _trips_csv(tmp_path: Path, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Path:
    path = tmp_path / "trips.csv"
    edit(random_trips(30, 9, seed=2)).to_csv(path, index=False)
    return path


def test_a_path_that_does_not_exist(tmp_path: Path, zones: Path) -> None:
    data = tmp_path / "absent.csv"
    _same(_od_cli(data, zones, tmp_path), _od_py(str(data), str(zones)))


def test_trips_missing_a_column(tmp_path: Path, zones: Path) -> None:
    data = _trips_csv(tmp_path, lambda df: df.drop(columns="uid"))
    _same(_od_cli(data, zones, tmp_path), _od_py(str(data), str(zones)))


def test_trips_with_a_bad_timestamp(tmp_path: Path, zones: Path) -> None:
    def bad(df: pd.DataFrame) -> pd.DataFrame:
        df = df.astype({"start_time": str})
        df.loc[3, "start_time"] = "yesterday at noon"
        return df

    data = _trips_csv(tmp_path, bad)
    cli, py = _od_cli(data, zones, tmp_path), _od_py(str(data), str(zones))
    _same(cli, py)
    assert "yesterday" not in cli.message  # a time is personal: never printed


def test_a_tessellation_id_column_that_does_not_exist(tmp_path: Path, zones: Path) -> None:
    data = _trips_csv(tmp_path, lambda df: df)
    cli = _od_cli(data, zones, tmp_path, "--tile-id", "nope")
    py = _od_py(str(data), str(zones), tile_id="nope")
    _same(cli, py)
    assert "--tile-id" in (cli.hint or "")
    assert "tile_id=" in (py.hint or "") and "--tile-id" not in (py.hint or "")


def test_a_table_missing_a_column_pandas_polars_arrow(tmp_path: Path, zones: Path) -> None:
    """A table gives the message a file with the same columns gives."""
    import pyarrow as pa

    df = random_trips(30, 9, seed=2).drop(columns="uid")
    data = _trips_csv(tmp_path, lambda d: d.drop(columns="uid"))
    cli = _od_cli(data, zones, tmp_path)
    tables: list[Any] = [df, pa.Table.from_pandas(df, preserve_index=False)]
    polars = pytest.importorskip("polars")
    tables.append(polars.from_pandas(df))
    for table in tables:
        _same(cli, _od_py(table, box_grid(3).gdf))


@pytest.mark.filterwarnings("ignore:.crs. was not provided")
def test_a_geodataframe_without_crs(tmp_path: Path) -> None:
    """Without a CRS, longitude/latitude values are read as WGS84 (as GeoJSON is); projected
    values are refused with what to do (they would put every record in the outliers cell)."""
    trips = random_trips(30, 9, seed=1)
    lonlat = box_grid(3).gdf.set_crs(None, allow_override=True)
    s = pm.Session(trips, tessellation=lonlat, budget=1, dataset="d")
    assert s.tessellation.gdf.crs.to_epsg() == 4326
    s.close()
    metres = box_grid(3).gdf.to_crs(3857).set_crs(None, allow_override=True)
    err = _py_error(lambda: pm.Session(trips, tessellation=metres, budget=1, dataset="d"))
    assert "no coordinate reference system" in err.message and "set_crs" in (err.hint or "")
    shp = tmp_path / "zones.shp"
    box_grid(3).gdf.to_crs(3857).set_crs(None, allow_override=True).to_file(shp)
    cli = _cli_error(["plan", "od", "-t", str(shp), "-e", "1", "-T", "3"])
    assert type(cli) is type(err) and "no coordinate reference system" in cli.message


def test_events_whose_shape_cannot_be_told(tmp_path: Path, zones: Path) -> None:
    data = tmp_path / "events.csv"
    pd.DataFrame({"who": ["a"], "when": ["2024-01-02 08:00"], "x": [1.0]}).to_csv(data, index=False)
    _same(_od_cli(data, zones, tmp_path), _od_py(str(data), str(zones)))


def test_coordinate_trips_with_a_latitude_out_of_range(tmp_path: Path, zones: Path) -> None:
    data = tmp_path / "rides.csv"
    rides = pd.DataFrame(
        {
            "uid": ["a", "b"],
            "start_time": ["2024-01-02 08:00", "2024-01-03 09:00"],
            "end_time": ["2024-01-02 08:20", "2024-01-03 09:30"],
            "start_lat": [52.005, 95.0],
            "start_lng": [13.005, 13.015],
            "end_lat": [52.015, 52.025],
            "end_lng": [13.015, 13.025],
        }
    )
    rides.to_csv(data, index=False)
    cli = _od_cli(data, zones, tmp_path)
    _same(cli, _od_py(str(data), str(zones)))
    assert "95" not in cli.message  # a location is personal: never printed
