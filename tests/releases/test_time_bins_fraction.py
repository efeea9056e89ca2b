"""``bin:LENGTH`` over a declared period whose start has a fraction of a second (issue 38): each
time inside the period lands in its own public bin, counted in whole microseconds and clamped
to the bins as ``Period.bin_sql`` is. Before, whole seconds put 01:00:00.2 (bin 0 of a period
starting at 00:00:00.5) in bin 1, and a time in the last half second of the period in a bin
past the last one: an internal error of the release."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

from privmob.domain import Period
from privmob.engine import make_engine
from privmob.releases.dimensions import dimension

START, END = datetime(2024, 1, 1, 0, 0, 0, 500_000), datetime(2024, 1, 1, 6, 0, 0, 500_000)


def reference_bin(t: pd.Timestamp, grid: pd.DatetimeIndex, end: pd.Timestamp) -> int:
    """The public bin of ``t``: the last left edge at or before it, -1 outside the period."""
    if t < grid[0] or t >= end:
        return -1
    return int(grid.searchsorted(t, side="right")) - 1


def test_every_time_lands_in_its_bin():
    rng = np.random.default_rng(2)
    micros = rng.integers(-3_600 * 10**6, 7 * 3_600 * 10**6, 2_000)
    edges = [0, 499_999, 500_000, 3_600_200_000, 3_600_499_999, 3_600_500_000, 21_600_300_000]
    edges += [21_600_499_999, 21_600_500_000]
    times = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.r_[micros, edges], unit="us")
    period = Period(START, END)
    dim = dimension("bin:1h", [0], period)
    grid = pd.date_range(START, END, freq="1h", inclusive="left")
    assert list(dim.labels) == list(grid)
    eng = make_engine("duckdb")
    try:
        eng.con.register("times_", pd.DataFrame({"t": times}))
        got = eng.fetch(f"SELECT {dim.sql('t', eng.dialect, 0)} AS i FROM times_")["i"]
    finally:
        eng.close()
    expected = [reference_bin(t, grid, pd.Timestamp(END)) for t in times]
    assert got.tolist() == expected
    assert set(expected) == {-1, *range(len(grid))}  # every bin and the outside are reached


@pytest.mark.parametrize(("edge", "cell"), [("01:00:00.2", 0), ("06:00:00.3", 5)])
def test_a_release_by_bin_counts_the_edge_in_its_bin(tmp_path: Path, capsys, edge, cell):
    """Through the CLI: a counts release by ``bin:1h`` over [00:00:00.5, 06:00:00.5) with a
    record at ``edge``. At epsilon 1000 the discrete Laplace noise (scale 1e-3) is 0 in all
    7 cells but with probability below 1e-400, so the published counts are the exact ones: the
    edge's record is in bin ``cell``, none outside."""
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    times = ["2024-01-01 00:00:00.7", f"2024-01-01 {edge}", "2024-01-01 03:00:00"]
    pd.DataFrame(
        {"uid": [1, 2, 3], "datetime": times, "lat": [52.005] * 3, "lng": [13.005] * 3}
    ).to_csv(tmp_path / "events.csv", index=False)
    argv = ["counts", str(tmp_path / "events.csv"), "-t", str(tmp_path / "grid.geojson")]
    argv += ["-e", "1000", "-T", "1", "--by", "bin:1h", "--records", "events"]
    argv += ["--input-shape", "events", "--start", str(START), "--end", str(END)]
    argv += ["--budget", "5000", "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "o")]
    assert run_cli([*argv, "--quiet"]) == 0, capsys.readouterr().err
    counts = pd.read_parquet(tmp_path / "o" / "counts.parquet")["count"].tolist()
    expected = [1, 0, 1, 0, 0, 0]  # 03:00:00 is in [02:00:00.5, 03:00:00.5)
    expected[cell] += 1
    assert counts == expected
    assert pd.read_parquet(tmp_path / "o" / "outliers.parquet")["count"].tolist() == [0]
