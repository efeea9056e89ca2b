"""A release prints its plan before it imports pandas, GeoPandas, PyArrow, pyproj, pydantic or
psutil (issue 43).

Those imports cost about 1.5 CPU seconds on a small machine, five times what the plan line may
take. Each test runs a real ``python -X importtime -m privmob <release>`` and reads its stderr
in order: the interpreter writes a line for every module when it is imported, the release its
``plan:`` line, both unbuffered on the same stream; no forbidden module may come before the
plan; with the tessellation read from its cache, neither may NumPy or shapely (the tiles are
built after the plan line). The tessellation is a GeoJSON file of irregular polygons, read once
from the file and once from the tessellation cache (``PRIVMOB_CACHE_DIR``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import random_trips

#: imported by the data path, never before the plan line; pydantic is Typer's (0.29) for
#: option values, which privmob.cli.coerce reads without it when they are plain; psutil
#: measures memory once the engine starts; DuckDB starts after the plan
FORBIDDEN = ("pandas", "geopandas", "pyarrow", "pyproj", "pydantic", "psutil", "duckdb")
#: modules (full names) that no release needs before its plan line either: the installed
#: version is read without importlib.metadata (and its e-mail parser, zip and CSV readers);
#: the QGIS style of the map layers (XML, urllib, http, ssl) and the thread pools of the noise
#: are imported where they are used; the ledger key is read without cryptography's
#: serialization package (SSH keys, ciphers); the host name (socket) is read when a release
#: is charged; the time-zone database when a zone other than the study's is checked
LATER = (
    "importlib.metadata",
    "email",
    "zipfile",
    "csv",
    "xml",
    "urllib.request",
    "http",
    "ssl",
    "socket",
    "concurrent.futures",
    "logging",
    "zoneinfo",
    "privmob.render.qml",
    "privmob.render.map_labels",
)
#: when the user's key exists (the first run of a test may create it, with cryptography's PEM
#: writer)
KEY_LATER = (
    "cryptography.hazmat.primitives.serialization",
    "cryptography.hazmat.primitives.ciphers",
)
#: and, per release, the other releases' modules (the landmark series, the report's
#: analyses and the population's homes are not imported by a plan of an OD matrix), and the
#: zone hierarchies of a release without levels
REPORT_LATER = (
    "privmob.releases.landmark",
    "privmob.releases.population",
    "privmob.releases.hierarchy",
    "privmob.privacy.hierarchy",
)
OD_LATER = ("privmob.releases.report", *REPORT_LATER)
#: nor, when the tessellation comes from the cache (its number of tiles is all a plan needs),
#: what builds its polygons
CACHED_FORBIDDEN = ("numpy", "shapely")
N = 3  # tiles per side


def _zones(path: Path) -> Path:
    """N x N quadrilaterals whose inner corners are moved (no grid: the polygon path), tile
    ids in the property ``zone_id``, names in ``zone``."""
    rng = np.random.default_rng(7)
    x = np.add.outer(np.zeros(N + 1), np.arange(N + 1) * 0.01) + 13.0
    y = np.add.outer(np.arange(N + 1) * 0.01, np.zeros(N + 1)) + 52.0
    x[1:-1, 1:-1] += rng.uniform(-0.003, 0.003, (N - 1, N - 1))
    y[1:-1, 1:-1] += rng.uniform(-0.003, 0.003, (N - 1, N - 1))
    feats = []
    for r in range(N):
        for c in range(N):
            ring = [(r, c), (r, c + 1), (r + 1, c + 1), (r + 1, c), (r, c)]
            coords = [[float(x[i, j]), float(y[i, j])] for i, j in ring]
            feats.append(
                {
                    "type": "Feature",
                    "properties": {"zone_id": r * N + c, "zone": f"zone {r * N + c}"},
                    "geometry": {"type": "Polygon", "coordinates": [coords]},
                }
            )
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def _early(modules: list[str], later: tuple[str, ...]) -> list[str]:
    """The modules of ``later`` (or their submodules) among ``modules``."""
    return sorted({m for m in modules for name in later if m == name or m.startswith(name + ".")})


def _modules_before_plan(args: list[str], cwd: Path) -> list[str]:
    """Run ``privmob args`` under ``-X importtime``: the modules (full names) imported before
    its ``plan:`` line."""
    env = {**os.environ, "PRIVMOB_CACHE_DIR": str(cwd / "cache"), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "privmob", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stderr.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan:"))
    return [
        line.rsplit("|", 1)[1].strip()
        for line in lines[:plan]
        if line.startswith("import time:") and "|" in line
    ]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    trips = random_trips(n_users=40, k=N * N, seed=3)
    trips.to_csv(tmp_path / "trips.csv", index=False)
    trips.to_parquet(tmp_path / "trips.parquet", index=False)
    rng = np.random.default_rng(5)  # trip points: 30 users x 4 trips x 2 points, coordinates
    n = 240
    points = pd.DataFrame(
        {
            "uid": np.repeat(np.arange(30), 8),
            "tid": np.repeat(np.arange(120), 2),
            "datetime": pd.Timestamp("2024-01-02") + pd.to_timedelta(np.arange(n) * 7, "min"),
            "lat": rng.uniform(52.0, 52.0 + N * 0.01, n),
            "lng": rng.uniform(13.0, 13.0 + N * 0.01, n),
        }
    )
    points.to_csv(tmp_path / "points.csv", index=False)
    return {
        "zones": _zones(tmp_path / "zones.geojson"),
        "csv": tmp_path / "trips.csv",
        "parquet": tmp_path / "trips.parquet",
        "points": tmp_path / "points.csv",
    }


def _od(data: Path, zones: Path, out: str) -> list[str]:
    return [
        "od", str(data), "-t", str(zones), "-e", "1", "-T", "4", "-o", out,
        "--ledger", "ledger.sqlite", "--budget", "10",
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_plan_comes_before_pandas_geopandas_pyarrow(
    inputs: dict[str, Path], tmp_path: Path, fmt: str
) -> None:
    # first run: the GeoJSON file is parsed and checked; second: read from the cache
    for run in ("parsed", "cached"):
        modules = _modules_before_plan(_od(inputs[fmt], inputs["zones"], run), tmp_path)
        tops = sorted({name.split(".")[0] for name in modules})
        assert "privmob" in tops and "typer" in tops  # the trace is read as meant
        assert "privmob.releases.od" in modules and "cryptography" in tops  # the ledger's key
        # parsed: shapely reads the GeoJSON; cached: the tiles are built after the plan
        forbidden = FORBIDDEN if run == "parsed" else (*FORBIDDEN, *CACHED_FORBIDDEN)
        assert run == "cached" or "shapely" in tops
        early = sorted(set(forbidden) & set(tops))
        assert early == [], f"{run}: imported before the plan line: {early}"
        later = (*LATER, *KEY_LATER) if run == "cached" else LATER
        early = _early(modules, (*later, *OD_LATER))
        assert early == [], f"{run}: imported before the plan line: {early}"
        assert (tmp_path / run / "od.parquet").exists()
    assert list((tmp_path / "cache").iterdir())  # the second run had an entry to read


def test_the_report_plan_comes_before_pandas_geopandas_pyarrow(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    args = [
        "report", str(inputs["points"]), "-t", str(inputs["zones"]), "-e", "1", "-T", "4",
        "--start", "2024-01-01", "--end", "2024-01-08", "-o", "report.html",
        "--ledger", "ledger.sqlite", "--budget", "10",
    ]  # fmt: skip
    for run in ("parsed", "cached"):
        modules = _modules_before_plan(args, tmp_path)
        tops = sorted({name.split(".")[0] for name in modules})
        assert "privmob" in tops and (run == "cached" or "shapely" in tops)
        assert "privmob.releases.report" in modules  # the trace is read as meant
        forbidden = FORBIDDEN if run == "parsed" else (*FORBIDDEN, *CACHED_FORBIDDEN)
        assert sorted(set(forbidden) & set(tops)) == [], run
        later = (*LATER, *KEY_LATER) if run == "cached" else LATER
        assert _early(modules, (*later, *REPORT_LATER)) == [], run
        assert (tmp_path / "report.html").exists()
        args = [*args, "--overwrite"]
