"""Every release kind gives the values it gave before the registry refactor (issue 28): each
golden case (``tests/releases/golden_cases.py``) is run again in test mode with its seed and its
tables, CSV layers and metadata compared value for value with ``tests/releases/golden/*.json``.

Metadata may gain keys (issue 28 adds what a release counted); a recorded key may not change
its value, and tables may not change at all, unless the golden file is re-recorded on purpose
(``python -m tests.releases.golden_cases --write CASE``) and the change named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.releases.golden_cases import CASES, SPARK_CASES, golden_path, run_case

#: meanings changed on purpose by issue 28, applied to the golden values recorded before it
#: (the golden files stay as recorded)
#: 1. one name per kind (privmob.releases.kinds): metadata.json's and the ledger's kind
RENAMED_KINDS = {
    "od-matrix": "od",
    "mobility_report": "report",
    "landmark-series": "series",  # series-counts was recorded as a landmark-series too
}


#: 2. one same-tile rule (trips within one tile are in no OD cell, as in od): the report's
#: od_flows no longer publishes the diagonal (its noisy values are set to 0 in report.json)
def intended_table(case: str, name: str, table: dict[str, Any]) -> dict[str, Any]:
    """The golden ``table`` after the changes issue 28 makes on purpose."""
    if case == "report" and name.endswith("od_flows.parquet"):
        rows = [r for r in table["rows"] if r[0] == "outliers" or r[0] != r[1]]
        return {**table, "rows": rows}
    return table


def intended(case: str, key: str, value: object) -> object:
    """The golden ``value`` of metadata ``key`` after the changes issue 28 makes on purpose."""
    if key == "kind" or (key.startswith("ledger_entries.") and key.endswith(".kind")):
        new = RENAMED_KINDS.get(str(value), value)
        return "series-counts" if case == "series_counts" else new
    if case == "report" and key == "analyses.od_flows.counts":
        counts = list(value)  # type: ignore[call-overload]
        k = round(len(counts) ** 0.5)
        return [0 if i // k == i % k else c for i, c in enumerate(counts)]
    return value


#: 3. honest layers (issue 29): every layer row carries ``below_margin`` (its value at or below
#: its 95% margin), and an OD line layer keeps only the flows above the release's noise floor
#: (``--all-flows`` keeps every non-zero cell); the values of the rows kept are unchanged
def intended_layer(name: str, layer: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The golden CSV ``layer`` after the changes issue 29 makes on purpose."""
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.privacy.signal import noise_floor

    columns = list(layer["columns"])
    if "margin_of_error_95" not in columns:  # density's layer states no per-row margin
        return layer
    value = columns.index("count" if "count" in columns else "value")
    margin = columns.index("margin_of_error_95")
    at = margin + 1
    rows = [[*r[:at], r[value] <= r[margin], *r[at:]] for r in layer["rows"]]
    if name == "od_flows.csv":
        noise = Noise(NoiseKind(meta["privacy.noise.kind"]), float(meta["privacy.noise.scale"]))
        floor = float(noise_floor(noise, int(meta["domain.od_cells"])))
        rows = [r for r in rows if r[value] > floor]
    return {"columns": [*columns[:at], "below_margin", *columns[at:]], "rows": rows}


#: 4. maps that say where they are (issue 42): a tile of a tessellation without names is named
#: in the layers by its id and its centroid (``tile 4 (52.0150, 13.0150)``), not its bare id
def intended_names(layer: dict[str, Any]) -> dict[str, Any]:
    """The golden CSV ``layer`` with the readable names issue 42 gives unnamed tiles."""
    import shapely

    columns = list(layer["columns"])
    if "tile_name" not in columns or "geometry_wkt" not in columns:
        return layer
    tid, name, wkt = (columns.index(c) for c in ("tile_id", "tile_name", "geometry_wkt"))
    rows = []
    for r in layer["rows"]:
        if str(r[name]) == str(r[tid]):  # unnamed: the id was its name
            c = shapely.from_wkt(r[wkt]).centroid
            r = [*r[:name], f"tile {r[tid]} ({c.y:.4f}, {c.x:.4f})", *r[name + 1 :]]
        rows.append(r)
    return {**layer, "rows": rows}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=[pytest.mark.spark, pytest.mark.slow]) if c in SPARK_CASES else c
        for c in sorted(CASES)
    ],
)
def test_release_outputs_match_the_golden_values(case: str, tmp_path: Path) -> None:
    expected = json.loads(golden_path(case).read_text())
    got = json.loads(json.dumps(run_case(case, tmp_path)))  # the same JSON round trip
    assert sorted(got["tables"]) == sorted(expected["tables"])
    for name, table in expected["tables"].items():
        want = intended_table(case, name, table)
        assert got["tables"][name] == want, f"{case}: table {name} changed"
    want_layers = {
        name: intended_names(intended_layer(name, layer, expected["metadata"]))
        for name, layer in expected["layers"].items()
    }
    assert got["layers"] == want_layers, f"{case}: a CSV layer changed"
    want = {k: intended(case, k, v) for k, v in expected["metadata"].items()}
    changed = {
        k: (v, got["metadata"].get(k, "<missing>"))
        for k, v in want.items()
        if got["metadata"].get(k, "<missing>") != v
    }
    assert not changed, f"{case}: metadata changed (golden, now): {changed}"
