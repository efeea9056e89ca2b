"""Small builders shared by tests (tessellations and records made in memory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import geopandas as gpd
import numpy as np
import pandas as pd
from shapely.geometry import box

if TYPE_CHECKING:
    from privmob.data.density_synth import SyntheticCity


def box_grid(n: int = 3, size: float = 0.01, lng0: float = 13.0, lat0: float = 52.0):
    """An n x n grid of square tiles with ids 0..n*n-1, as a Tessellation."""
    from privmob.data.tessellation_input import load_tessellation

    tiles = [
        box(lng0 + c * size, lat0 + r * size, lng0 + (c + 1) * size, lat0 + (r + 1) * size)
        for r in range(n)
        for c in range(n)
    ]
    gdf = gpd.GeoDataFrame({"tile_id": list(range(n * n))}, geometry=tiles, crs="EPSG:4326")
    return load_tessellation(gdf)


def trips_frame(rows: list[tuple], start: str = "2024-01-01 08:00:00") -> pd.DataFrame:
    """Trips (uid, origin, destination[, minutes offset]) as a one-row-per-trip frame."""
    t0 = pd.Timestamp(start)
    out = []
    for i, r in enumerate(rows):
        uid, o, d = r[:3]
        minutes = r[3] if len(r) > 3 else i
        out.append(
            {
                "uid": uid,
                "tid": i,
                "start_time": t0 + pd.Timedelta(minutes=minutes),
                "origin": o,
                "destination": d,
            }
        )
    return pd.DataFrame(out)


def random_times(
    rng: np.random.Generator, n: int, start: str, span: int, unit: str = "s"
) -> pd.DatetimeIndex:
    """``n`` instants drawn uniformly, in whole ``unit`` steps, from ``[start, start + span)``."""
    return pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, span, n), unit=unit)


def random_trips(n_users: int, k: int, seed: int, max_per_user: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, max_per_user + 1, n_users)
    uid = np.repeat(np.arange(n_users), counts)
    n = uid.size
    return pd.DataFrame(
        {
            "uid": uid,
            "tid": np.arange(n),
            "start_time": random_times(rng, n, "2024-01-01", 86_400 * 3),
            "origin": (o := rng.integers(0, k, n)),
            "destination": (o + 1 + rng.integers(0, k - 1, n)) % k,
        }
    )  # never within one tile


def events_around_a_week(seed: int, n: int = 3000) -> pd.DataFrame:
    """``uid, time, tile`` events over 30 days from 2023-12-25 (60 users, tiles -1..3, 20 NULL
    times): the density tests' out-of-domain cases (outside the week, no known tower, no time)."""
    rng = np.random.default_rng(seed)
    times = random_times(rng, n, "2023-12-25", 30 * 24 * 60, "min")
    df = pd.DataFrame(
        {"uid": rng.integers(0, 60, n), "time": times, "tile": rng.integers(-1, 4, n)}
    )
    df.loc[rng.choice(n, 20, replace=False), "time"] = pd.NaT
    return df


def run_cli(argv: list[str]) -> int:
    """Run ``privmob argv`` in this process, as the console script does; its exit code."""
    from privmob.cli import main

    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def write_city_files(
    folder: Path, city: SyntheticCity, *, zones: bool = True, events: str = "events.csv"
) -> Path:
    """A synthetic city as the files the density commands read, in ``folder``: its phone
    events (``uid, datetime, cell_id``) in ``events``, its towers in ``cells.csv`` and (with
    ``zones``) its zones in ``zones.geojson``. Returns ``folder``."""
    city.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"}).to_csv(
        folder / events, index=False
    )
    city.towers.to_csv(folder / "cells.csv", index=False)
    if zones:
        city.zones.to_file(folder / "zones.geojson", driver="GeoJSON")
    return folder


def od_argv(
    data: Path | str,
    tessellation: Path | str,
    *more: str,
    epsilon: float = 0.5,
    max_trips: int = 2,
    budget: float = 10,
) -> list[str]:
    """The command line of an OD release of ``data`` over ``tessellation`` with the options
    every such test states (epsilon, the per-user bound, the budget of a new dataset), then
    ``more``."""
    return [
        "od", str(data), "-t", str(tessellation), "-e", str(epsilon), "-T", str(max_trips),
        "--budget", str(budget), *more,
    ]  # fmt: skip


def privmob_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``privmob args`` in a child process as a user runs it, in ``cwd``, with ``env`` added to
    this environment and a wide terminal (``COLUMNS=200``: tables unwrapped), to its end (at
    most 300 s); its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "privmob", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=300,
    )


def trips_from_points(points: pd.DataFrame, times: list[str]) -> pd.DataFrame:
    """One-row trips with coordinates (``uid, tid, start_time, end_time, origin_lat, ...``)
    made of trip points (``uid, lat, lng``): trip ``i`` is user ``i``'s, from point ``i`` at
    ``times[i]`` to the ``i``-th point from the end at the next time (the last one at the
    first)."""
    return pd.DataFrame(
        {
            "uid": points["uid"],
            "tid": [str(i) for i in range(len(points))],
            "start_time": times,
            "end_time": times[1:] + times[:1],
            "origin_lat": points["lat"],
            "origin_lng": points["lng"],
            "destination_lat": points["lat"][::-1].to_list(),
            "destination_lng": points["lng"][::-1].to_list(),
        }
    )


def record_bucket_columns(monkeypatch) -> list[list[str]]:
    """The input columns each spilled user bucket is written with (one list per bucket, in
    order), recorded from privmob.engine.buckets.spilled_buckets for the test's duration."""
    from privmob.engine import buckets

    written: list[list[str]] = []
    spilled = buckets.spilled_buckets

    def spy(loaded, n_buckets, directory, columns=None):
        for part in spilled(loaded, n_buckets, directory, columns):
            written.append(buckets.root(part).columns)
            yield part

    monkeypatch.setattr(buckets, "spilled_buckets", spy)
    return written


def settle_by_hand(release, accountant, description: str = ""):  # type: ignore[no-untyped-def]
    """A release made by hand (its tables given), charged through the one gate: its draft's
    header is the release without its tables, its noise step returns it as it is."""
    from privmob.releases.gate import Draft, run

    header = release.drawn({})
    return run(lambda: Draft(header, description, lambda: release), accountant)
