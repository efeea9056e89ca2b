"""One person cannot flip a refusal of trips from located events (issue 38 item 4). The
likely-GPS check refused (exit 2, uncharged) when the events held more than 12 points per user
and active hour on average, so D (phone-like events) ran and D' (D and one user with 3,000
fixes in one hour) was refused: a free, noiseless answer about one person. The rule now reads the
column names only: told from its columns alone, located events are refused whatever the
records (D, D' and a D'' with an unreadable time alike: the same exit and the same message,
nothing read or charged); declared as events, D and D' both run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import box_grid, run_cli

from privmob.privacy.ledger import Ledger


def phone_events(n: int = 200, seed: int = 5) -> pd.DataFrame:
    """Located events in box_grid(3): 40 users, about one event per active hour."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 40, n),
            "datetime": (
                pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 2 * 86_400, n), "s")
            ).astype(str),
            "lat": 52 + rng.uniform(0.0005, 0.0295, n),
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    )


def one_more_dense_user(events: pd.DataFrame, fixes: int = 3_000) -> pd.DataFrame:
    """D': D and one user (id 999) with ``fixes`` GPS fixes in one hour, moving across tiles."""
    rng = np.random.default_rng(9)
    seconds = np.sort(rng.integers(0, 3_600, fixes))
    dense = pd.DataFrame(
        {
            "uid": 999,
            "datetime": (pd.Timestamp("2024-01-01 08:00") + pd.to_timedelta(seconds, "s")).astype(
                str
            ),
            "lat": 52 + np.linspace(0.001, 0.029, fixes),
            "lng": 13 + np.linspace(0.001, 0.029, fixes),
        }
    )

    # the old check's figure: at most 12 points per user and active hour on average in D,
    # above it in D' (one user's fixes decide)
    def rate(frame: pd.DataFrame) -> float:
        return float(frame.assign(h=frame.datetime.str[:13]).groupby(["uid", "h"]).size().mean())

    assert rate(events) <= 12 < rate(pd.concat([events, dense]))
    return pd.concat([events, dense], ignore_index=True)


def _od(data: Path, tmp_path: Path, dataset: str, *extra: str) -> tuple[int, str]:
    argv = ["od", str(data), "-t", str(tmp_path / "grid.geojson"), "-e", "1", "-T", "5"]
    argv += [
        "--budget",
        "10",
        "--ledger",
        str(tmp_path / f"{dataset}.sqlite"),
        "--dataset",
        dataset,
    ]
    return run_cli([*argv, "-o", str(tmp_path / f"out-{dataset}"), "--quiet", *extra]), dataset


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    d = phone_events()
    unreadable = d.copy()
    unreadable.loc[7, "datetime"] = "not a time"
    frames = {"D": d, "D1": one_more_dense_user(d), "D2": unreadable}
    paths = {}
    for name, frame in frames.items():
        (tmp_path / name).mkdir()
        paths[name] = tmp_path / name / "events.csv"  # one file name: one message text
        frame.to_csv(paths[name], index=False)
    return paths


def test_one_dense_user_does_not_flip_the_outcome(inputs, tmp_path, capsys):
    outcomes = {}
    for name, path in inputs.items():
        code, _ = _od(path, tmp_path, name)
        err = " ".join(capsys.readouterr().err.split()).replace(str(path.parent), "<dir>")
        outcomes[name] = (code, err)
    assert outcomes["D"] == outcomes["D1"] == outcomes["D2"], outcomes
    code, err = outcomes["D"]
    assert code == 2 and "declare which" in err and "Nothing was read or charged" in err
    for name in inputs:  # one ledger each: D and D' hold the same people
        ledger = tmp_path / f"{name}.sqlite"
        assert not ledger.exists() or Ledger(ledger).entries(name) == []
    assert not any((tmp_path / f"out-{name}").exists() for name in inputs)
    # declared, D and D' both run, each charged once
    for name in ("D", "D1"):
        assert _od(inputs[name], tmp_path, name, "--input-shape", "events")[0] == 0
        assert len(Ledger(tmp_path / f"{name}.sqlite").entries(name)) == 1
