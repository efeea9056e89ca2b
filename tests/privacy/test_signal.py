"""Signal warnings: from public parameters before a release, from noisy values after it."""

from __future__ import annotations

import numpy as np
import pytest

from privmob.privacy.mechanisms import calibrate
from privmob.privacy.signal import expected_signal, signal_check


def test_noise_only_warns_and_signal_does_not() -> None:
    noise, _ = calibrate("discrete-laplace", 1.0, l1_sensitivity=10)
    m = noise.margin_of_error(0.95)
    rng = np.random.default_rng(0)
    empty = noise.add(np.zeros(500, dtype=np.int64), 1)
    check = signal_check(empty, m, "user")
    # pure noise: about 95% of the cells are within the 95% margin (binomial, 500 cells:
    # below 80% with probability < 1e-12)
    assert check.share > 0.8 and check.warning is not None
    assert "Too few users for user-level statistics" in check.warning
    full = noise.add(rng.integers(5 * m, 10 * m, 500), 2)
    assert signal_check(full, m).warning is None
    assert signal_check(full, m).to_dict()["computed_from"].startswith("noisy")


def test_expected_signal_is_public_arithmetic() -> None:
    noise, _ = calibrate("discrete-laplace", 0.5, l1_sensitivity=5)
    sig = expected_signal(noise)
    assert sig.margin == noise.margin_of_error(0.95)
    assert sig.count_for_10pct == int(np.ceil(sig.margin / 0.1))
    assert sig.relative_error(sig.count_for_10pct) <= 0.1
    assert sig.relative_error(0) == float("inf")
    assert sig.std == pytest.approx(noise.std)


def test_plan_states_the_counts_a_cell_needs_before_any_release() -> None:
    import json

    from typer.testing import CliRunner

    from privmob.cli import app

    r = CliRunner().invoke(app, ["plan", "--epsilon", "0.5", "-T", "5", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)["kinds"]["discrete-laplace"]
    noise, _ = calibrate("discrete-laplace", 0.5, l1_sensitivity=5)
    assert row["count_for_10pct_error"] == expected_signal(noise).count_for_10pct


def test_sparse_data_are_not_taken_for_noise() -> None:
    """A 263-zone OD matrix with 1% of its cells used (true counts 5-50): at a margin of +-0
    (epsilon 60 over 15 analyses) and of +-3, most cells are 0 because they are empty; the
    check says the data are sparse and does not warn: its used cells clear the noise floor.
    Pure noise at the same margins still warns (at margin >= 1): none of its cells clears the
    floor, which fails with probability <= 5% by the union bound (fixed seeds: deterministic
    here)."""
    rng = np.random.default_rng(3)
    cells = 263 * 262
    true = np.zeros(cells, dtype=np.int64)
    used = rng.choice(cells, cells // 100, replace=False)
    true[used] = rng.integers(5, 50, used.size)
    for epsilon in (60.0, 15.0):  # margins +-0 and +-3
        noise, _ = calibrate("discrete-laplace", epsilon / 15, l1_sensitivity=1)
        m = noise.margin_of_error(0.95)
        sparse = signal_check(noise.add(true, 1), m, noise=noise)
        assert sparse.share > 0.9  # most cells are within the margin of 0 ...
        assert sparse.warning is None  # ... because they are empty, not because of the noise
        assert sparse.note is not None and "sparse" in sparse.note
        assert sparse.above_noise_floor > 0.5 * used.size
        if m >= 1:
            pure = signal_check(noise.add(np.zeros(cells, dtype=np.int64), 2), m, noise=noise)
            assert pure.warning is not None and pure.above_noise_floor == 0
    assert calibrate("discrete-laplace", 60 / 15, l1_sensitivity=1)[0].margin_of_error() == 0


def test_a_report_with_a_zero_margin_does_not_cry_wolf(shared_data, tmp_path) -> None:
    """The issue's case: a report at epsilon 60 (margin +-0 per OD cell) on a few hundred
    trips between 5 zone pairs of the 263 NYC taxi zones must not say "cannot be told from
    empty": its empty cells are empty."""
    import pandas as pd

    import privmob as pm

    zones = shared_data / "nyc_taxi_zones" / "taxi_zones.geojson"
    s = pm.Session(_few_pairs(zones, tmp_path), tessellation=str(zones),
                   budget=pm.PureDP(60), seed=5)  # fmt: skip
    r = s.mobility_report(epsilon=60, max_trips=1, period=pm.Period("2024-03-01", "2024-03-08"))
    signal = r.release.extra["signal"]
    od = signal["analyses"]["od_flows"]
    assert od["margin_of_error_95"] == 0 and od["share_below_margin"] > 0.9
    assert od["warning"] is None and "sparse" in od["note"]
    assert signal["warning"] is None or "od_flows" not in signal["warning"]
    assert pd.notna(r.release.cost.epsilon)
    s.close()


def _few_pairs(zones, tmp_path):
    import geopandas as gpd
    import pandas as pd

    pts = gpd.read_file(zones).geometry.representative_point()
    rng = np.random.default_rng(1)
    rows = []
    for u in range(400):
        o, d = [(1, 2), (10, 20), (30, 40), (50, 60), (70, 80)][u % 5]
        t = pd.Timestamp("2024-03-01 08:00") + pd.Timedelta(hours=int(rng.integers(0, 150)))
        rows.append((u, u, t, pts.iloc[o].y, pts.iloc[o].x))
        rows.append((u, u, t + pd.Timedelta(minutes=20), pts.iloc[d].y, pts.iloc[d].x))
    path = tmp_path / "trips.csv"
    pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"]).to_csv(path, index=False)
    return str(path)
