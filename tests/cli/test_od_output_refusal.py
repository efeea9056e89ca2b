"""An OD release whose output folder is taken must be refused before the ledger is charged."""

import pytest
from tests.helpers import box_grid, od_argv, random_trips

from privmob.cli import main
from privmob.privacy.ledger import Ledger


def _od(tmp_path, *extra: str) -> int:
    args = od_argv(
        tmp_path / "trips.parquet", tmp_path / "grid.geojson", "--dataset", "d",
        "--ledger", str(tmp_path / "ledger.sqlite"), "-o", str(tmp_path / "out"), "--quiet",
        *extra,
    )  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0)


def test_taken_output_folder_costs_nothing(tmp_path):
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    assert _od(tmp_path) == 0
    ledger = Ledger(tmp_path / "ledger.sqlite")
    assert ledger.spent("d").epsilon == pytest.approx(0.5)
    assert _od(tmp_path) == 4  # output exists: refused (exit 4: output cannot be written) ...
    assert ledger.spent("d").epsilon == pytest.approx(0.5)  # ... and nothing charged
    assert _od(tmp_path, "--overwrite") == 0
    assert ledger.spent("d").epsilon == pytest.approx(1.0)


def test_budget_is_checked_before_the_input_is_read(tmp_path, capsys):
    """An over-budget release is refused before the (here unreadable) input is even opened."""
    (tmp_path / "trips.parquet").write_text("not a parquet file")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    Ledger(tmp_path / "ledger.sqlite").set_budget("d", 10.0)
    assert _od(tmp_path, "-e", "20") == 3  # exit 3: budget refused
    err = capsys.readouterr().err
    assert "refused" in err and "cannot be read" not in err
    assert Ledger(tmp_path / "ledger.sqlite").entries("d") == []
