"""Golden outputs of every release kind, recorded before the release registry refactor (issue 28).

Each case runs one ``privmob`` command in test mode (fixed seed, throw-away ledger) on the small
inputs in ``tests/releases/golden/inputs`` and records what it publishes: every Parquet table
(columns and values), the CSV map layer (values, without its ``privmob_*`` stamp columns) and
the metadata (``metadata.json`` / ``report.json``) flattened to key paths, leaving out what
changes from run to run (creation time, software version, ledger ids and entry timestamps).

``python -m tests.releases.golden_cases --write`` records them (``--inputs`` first makes the
inputs); ``tests/releases/test_golden.py`` recomputes and compares values exactly.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

GOLDEN = Path(__file__).resolve().parent / "golden"
INPUTS = GOLDEN / "inputs"

#: every case: the command line, with {in} the inputs folder and {out} the output folder
COMMON = ["--test-mode", "--seed", "7", "--budget", "100", "--dataset", "golden", "--quiet"]
GRID = ["-t", "{in}/grid.geojson"]
WEEK = ["--start", "2024-01-01", "--end", "2024-01-08"]
CASES: dict[str, list[str]] = {
    "od_trips": ["od", "{in}/trips.csv", *GRID, "-e", "1", "-T", "3", "--format", "csv"],
    "od_trips_daily": ["od", "{in}/trips.csv", *GRID, "-e", "1", "-T", "3", "--bin", "day", *WEEK],
    "od_trips_tau0": ["od", "{in}/trips.csv", *GRID, "-e", "1", "-T", "3", "--tau", "0"],
    "od_trips_unique": ["od", "{in}/trips.csv", *GRID, "-e", "1", "-T", "3", "--unique"],
    "od_points": ["od", "{in}/points.csv", *GRID, "-e", "1", "-T", "3", "--input-shape",
                  "trip-points"],
    "od_gps": ["od", "{in}/points.csv", *GRID, "-e", "1", "-T", "3", "--input-shape", "gps"],
    "od_events_daily": ["od", "{in}/events.csv", *GRID, "-e", "1", "-T", "4", "--input-shape",
                        "events", "--bin", "day", *WEEK],
    "od_events_hourly_rule": ["od", "{in}/events.csv", *GRID, "-e", "1", "-T", "4",
                              "--input-shape", "events", "--trip-rule", "hourly"],
    "population": ["population", "{in}/events.csv", *GRID, "-e", "1", "--format", "csv"],
    "report": ["report", "{in}/points.csv", *GRID, "-e", "2", "-T", "3", *WEEK],
    "density": ["density", "{in}/cell_events.csv", "--cells", "{in}/cells.csv",
                "-t", "{in}/zones.geojson", "-e", "1", "--start", "2026-03-02", "-T", "10",
                "--format", "csv"],
    "series": ["series", "{in}/series.csv", "-e", "1", "--sensitivity", "2", "--value-column",
               "v", "--time-column", "t", "--start", "2024-01-01", "--end", "2024-01-02",
               "--bin", "1h"],
    "series_zones": ["series", "{in}/series_zones.csv", "-e", "1", "--sensitivity", "1",
                     "--value-column", "v", "--time-column", "t", "--zone-column", "zone",
                     "--zones", "a,b", "--landmarks", "2,5,9", "--landmark-positions",
                     "--scheme", "skip", "--start", "2024-01-01", "--end", "2024-01-02",
                     "--bin", "1h"],
    "series_counts": ["series-counts", "{in}/events.csv", *GRID, "--start", "2024-01-01",
                      "--end", "2024-01-03", "--bin", "6h", "-e", "1", "-T", "1",
                      "--landmarks", "1,4", "--landmark-positions", "--format", "csv"],
}  # fmt: skip
#: the same on Spark (local): its keyed sample differs from DuckDB's, so its values do too
SPARK_CASES = {
    f"{name}_spark": [*CASES[name], "--engine", "spark"] for name in ("od_trips", "population")
}
CASES.update(SPARK_CASES)

#: metadata keys that change from run to run (or name the throw-away ledger: its head's hash is a
#: commitment with a random nonce, its root and the head's signature the ledger's own keys)
VOLATILE = (
    "created_at",
    "software",
    "ledger.id",
    "ledger.entry_ids",
    "ledger_head",
    "ledger.head.hash",
    "ledger.head.root",
    "ledger.head_signature",  # signed by the run's throw-away key
)
VOLATILE_ENTRY_KEYS = ("id", "created_at", "time", "user", "host", "output_dir", "hash")


def argv(case: str, out: Path) -> list[str]:
    args = [a.replace("{in}", str(INPUTS)) for a in CASES[case]]
    target = out / "report.html" if case == "report" else out / "o"
    return [*args, "-o", str(target), *COMMON]


def _value(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, int | float | str | bool):
        return v
    if isinstance(v, pd.Timestamp) or hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def table_values(df: pd.DataFrame) -> dict[str, Any]:
    return {
        "columns": [str(c) for c in df.columns],
        "rows": [[_value(v) for v in row] for row in df.itertuples(index=False, name=None)],
    }


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists of dicts by position."""
    out: dict[str, Any] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(doc, list) and any(isinstance(x, dict | list) for x in doc):
        for i, v in enumerate(doc):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = _value(doc) if not isinstance(doc, list) else [_value(x) for x in doc]
    return out


def _kept(key: str) -> bool:
    if any(key == v or key.startswith(v + ".") for v in VOLATILE):
        return False
    if key.startswith("ledger_entries."):
        last = key.rsplit(".", 1)[-1]
        return last not in VOLATILE_ENTRY_KEYS
    return True


def capture(case: str, out: Path) -> dict[str, Any]:
    """What the case published in ``out``: tables, CSV layers and metadata."""
    folder = out if case == "report" else out / "o"
    doc: dict[str, Any] = {"argv": CASES.get(case), "tables": {}, "layers": {}, "metadata": {}}
    for path in sorted(folder.rglob("*.parquet")):
        df = pd.read_parquet(path)
        if "geometry" in df.columns:
            df = df.drop(columns="geometry")
        doc["tables"][str(path.relative_to(folder))] = table_values(df)
    for path in sorted(folder.rglob("*.csv")):
        df = pd.read_csv(path)
        df = df[[c for c in df.columns if not str(c).startswith("privmob")]]
        doc["layers"][str(path.relative_to(folder))] = table_values(df)
    meta = folder / ("report.json" if case == "report" else "metadata.json")
    flat = flatten(json.loads(meta.read_text()))
    doc["metadata"] = {k: v for k, v in sorted(flat.items()) if _kept(k)}
    return doc


def run_case(case: str, out: Path) -> dict[str, Any]:
    from tests.helpers import run_cli

    code = run_cli(argv(case, out))
    if code != 0:
        raise AssertionError(f"golden case {case} exited {code}")
    return capture(case, out)


def golden_path(case: str) -> Path:
    return GOLDEN / f"{case}.json"


def write_inputs() -> None:
    """The small inputs (made once; committed with the golden outputs)."""
    from tests.helpers import box_grid, random_trips

    from privmob.data.density_synth import synthetic_city

    INPUTS.mkdir(parents=True, exist_ok=True)
    box_grid(3).gdf.to_file(INPUTS / "grid.geojson", driver="GeoJSON")
    trips = random_trips(30, 9, seed=3, max_per_user=6)
    same = trips.index % 7 == 0  # some trips within one tile (the same-tile rule)
    trips.loc[same, "destination"] = trips.loc[same, "origin"]
    trips.to_csv(INPUTS / "trips.csv", index=False)
    rng = np.random.default_rng(11)
    rows = []
    t0 = pd.Timestamp("2024-01-01 06:00")
    for uid in range(30):
        t = t0 + pd.Timedelta(minutes=int(rng.integers(0, 600)))
        for tid in range(int(rng.integers(1, 5))):
            for _p in range(int(rng.integers(2, 5))):
                lng, lat = 13.0 + rng.random() * 0.031, 52.0 + rng.random() * 0.03
                rows.append((uid, tid, t, round(lat, 6), round(lng, 6)))
                t += pd.Timedelta(minutes=int(rng.integers(5, 50)))
            t += pd.Timedelta(hours=int(rng.integers(2, 30)))
    points = pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])
    points.to_csv(INPUTS / "points.csv", index=False)
    points.drop(columns="tid").to_csv(INPUTS / "events.csv", index=False)
    city = synthetic_city(600, 12, 3, seed=3)
    city.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"}).to_csv(
        INPUTS / "cell_events.csv", index=False
    )
    city.towers.to_csv(INPUTS / "cells.csv", index=False)
    city.zones.to_file(INPUTS / "zones.geojson", driver="GeoJSON")
    t = pd.date_range("2024-01-01", periods=24, freq="h")
    pd.DataFrame({"t": t, "v": rng.integers(0, 9, 24)}).to_csv(INPUTS / "series.csv", index=False)
    pd.DataFrame(
        {"t": np.tile(t, 2), "zone": np.repeat(["a", "b"], 24), "v": rng.integers(0, 5, 48)}
    ).to_csv(INPUTS / "series_zones.csv", index=False)


def main(args: list[str]) -> None:
    import tempfile

    if "--inputs" in args:
        write_inputs()
    if "--write" in args:
        wanted = [a for a in args if a in CASES] or list(CASES)
        for case in wanted:
            with tempfile.TemporaryDirectory() as tmp:
                doc = run_case(case, Path(tmp))
            golden_path(case).write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
            print(f"{case}: {len(doc['tables'])} tables, {len(doc['metadata'])} metadata keys")


if __name__ == "__main__":
    main(sys.argv[1:])
