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
