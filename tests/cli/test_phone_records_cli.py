"""Phone records through the command line: daily OD series on events (one ledger entry per
day, total cost shown), population counts, and bad input (unknown cells, cells without
coordinates, a study period without data)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys, monkeypatch, tmp_path):
    """Run ``privmob ...`` in this process (as the console script does), in tmp_path."""
    from privmob.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")

    def _run(*args: str, cwd: Path | None = None) -> Result:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return _run


@pytest.fixture
def cdr(tmp_path: Path) -> tuple[Path, Path, Path]:
    """3 days of synthetic call records on 4 towers in a 3x3 grid of zones."""
    tess = box_grid(3)
    tess_path = tmp_path / "zones.geojson"
    tess.gdf.to_file(tess_path, driver="GeoJSON")
    cent = tess.centroids()
    towers = pd.DataFrame({"cell_id": ["A", "B", "C", "D"], "lat": cent[[0, 2, 4, 8], 1]})
    towers["lng"] = cent[[0, 2, 4, 8], 0]
    towers.to_csv(tmp_path / "towers.csv", index=False)
    rng = np.random.default_rng(0)
    n = 3000
    ev = pd.DataFrame(
        {
            "uid": rng.integers(0, 200, n),
            "datetime": pd.Timestamp("2024-03-01")
            + pd.to_timedelta(rng.integers(0, 3 * 86400, n), unit="s"),
            "cell_id": rng.choice(list("ABCD"), n),
        }
    )
    ev.to_csv(tmp_path / "events.csv", index=False)
    return tmp_path / "events.csv", tmp_path / "towers.csv", tess_path


def test_daily_od_series_on_events(tmp_path: Path, cdr, run) -> None:
    events, towers, zones = cdr
    args = ["od", str(events), "--cells", str(towers), "-t", str(zones), "-e", "0.5", "-T", "4"]
    args += ["--period", "day", "--start", "2024-03-01", "--end", "2024-03-04"]
    args += ["--bound-per", "period", "--budget", "10", "-o", "out", "--quiet"]
    args += ["--test-mode", "--seed", "1"]
    r = run(*args, "--trip-rule", "hourly", "--unique", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "3 periods x epsilon=0.5" in r.stdout and "epsilon=2 over the series" in r.stdout
    od = pd.read_parquet(tmp_path / "out" / "od.parquet")
    assert sorted(od.period.unique()) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert len(od) == 3 * 9 * 8
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert len(meta["ledger_entries"]) == 4  # three days + the out-of-period outliers cell
    # trip level: the group-privacy cost is spelled out
    trip = [a if a != "0.5" else "0.1" for a in args if a not in ("-T", "4")]
    r = run(*trip, "--unit", "trip", "--group-size", "20", "-o", "out2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "a user with 20 trips over the series loses epsilon=2" in r.stdout


def test_population_command(tmp_path: Path, cdr, run) -> None:
    events, towers, zones = cdr
    r = run(
        "population", str(events), "--cells", str(towers), "-t", str(zones), "-e", "1",
        "--budget", "1", "-o", "pop", "--quiet", "--test-mode", "--seed", "2", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    pop = pd.read_parquet(tmp_path / "pop" / "population.parquet")
    assert len(pop) == 11 and (pop["count"] >= 0).all()
    assert "home outside the zones" in set(pop.zone) and "epsilon=1 per user" in r.stdout


def test_bad_phone_records(tmp_path: Path, cdr, run) -> None:
    events, towers, zones = cdr
    ev = pd.read_csv(events)
    ev.loc[5, "cell_id"] = "Z"
    ev.to_csv(tmp_path / "bad_events.csv", index=False)
    base = ["-t", str(zones), "-e", "1", "--budget", "5", "--quiet", "--cells"]
    # an unknown cell id no longer refuses the whole input: that event is in the outliers cell
    r = run("population", str(tmp_path / "bad_events.csv"), "-o", "pop", *base, str(towers))
    assert r.returncode == 0, r.stderr
    pop = pd.read_parquet(tmp_path / "pop" / "population.parquet")
    assert len(pop) == 11 and "home outside the zones" in set(pop.zone)
    r = run("population", str(tmp_path / "bad_events.csv"), "-o", "vor", *base, str(towers),
            "--zone-mapping", "voronoi")  # fmt: skip
    assert r.returncode == 0, r.stderr
    tw = pd.read_csv(towers)
    tw.loc[1, "lat"] = None
    tw.to_csv(tmp_path / "bad_towers.csv", index=False)
    r = run("population", str(events), *base, str(tmp_path / "bad_towers.csv"), cwd=tmp_path)
    assert r.returncode == 2 and "lat" in r.stderr and "Traceback" not in r.stderr
    # a declared study period without any data: every cell is noise around 0, and the
    # trips fall in the out-of-period outliers cell (nothing data-dependent is hidden)
    args = ["od", str(events), *base, str(towers), "-T", "2", "--period", "day"]
    args += ["--start", "2025-01-01", "--end", "2025-01-03", "-o", "empty"]
    args += ["--test-mode", "--seed", "3"]
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = pd.read_parquet(tmp_path / "empty" / "outliers.parquet")
    assert out["count"].iloc[-1] > 100  # the out-of-period cell holds (noisy) all trips


def test_evaluate_decisions_from_events(tmp_path: Path, cdr, run) -> None:
    events, towers, zones = cdr
    r = run(
        "evaluate", "decisions", "--events", str(events), "--cells", str(towers),
        "-t", str(zones), "--start", "2024-03-01", "--end", "2024-03-04", "-T", "4",
        "--epsilons", "1", "-r", "1", "--sim-days", "30", "--tau", "0", "--seed", "1",
        "-o", str(tmp_path / "ev"), "--quiet",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    t3 = pd.read_csv(tmp_path / "ev" / "aid_table3.csv")
    assert t3.exact_out_migration.iloc[0] > 0 and len(t3) == 1
    r = run("evaluate", "decisions", "--events", str(events), "-o", "x", cwd=tmp_path)
    assert r.returncode == 2 and "--tessellation" in r.stderr


def test_population_by_voronoi_shares(tmp_path: Path, cdr, run) -> None:
    events, towers, zones = cdr
    r = run(
        "population", str(events), "--cells", str(towers), "-t", str(zones), "-e", "1",
        "--zone-mapping", "voronoi", "--budget", "1", "-o", "vor", "--quiet", "--test-mode",
        "--seed", "4",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    pop = pd.read_parquet(tmp_path / "vor" / "population.parquet")
    assert len(pop) == 11 and (pop["count"] >= 0).all()
    zones_only = pop[pop.kind == "zone"]["count"]
    # four towers spread their users over all nine zones: shares give fractional values
    assert (zones_only > 0).sum() > 4 and not np.allclose(zones_only, np.round(zones_only))
    # about 200 users in total (noise of scale 1 on 6 cells)
    assert abs(pop["count"].sum() - 200) < 30
    meta = json.loads((tmp_path / "vor" / "metadata.json").read_text())
    assert meta["params"]["zone_mapping"].startswith("voronoi")
