"""The one gate (issue 38): every release is charged once, in the lifecycle, before any noise is
drawn; nothing computed from the noise exists before the charge is committed.

Over the registry (every kind, automatically, a user's registered kind too: ``ALL`` of
``test_kinds.py``): with a spy on the ledger's charge and on every source of noise (the seeded
generator's noise methods and the samplers), each kind's example charges once and draws all
its noise after the commit; with the charge failing, no kind draws noise or returns a value. A
kind that returns a value instead of a draft, or draws noise in its draft, is refused. From
Python, a ``progress`` callback raising at each step leaves either nothing drawn and nothing
charged, or a committed charge; at the step "charging the privacy ledger" nothing is staged
yet. The map layer is cut to fit its size limit after the charge, never refused after the
noise (the probe of the issue: ``--max-layer-size 1B``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import run_cli
from tests.releases.test_kinds import ALL, _argv, _inputs

from privmob.privacy import samplers
from privmob.privacy.ledger import Ledger
from privmob.privacy.payment import UnpaidNoise
from privmob.releases.kinds import KINDS

#: the noise methods of numpy's generator (``integers`` draws the bounding key: not noise)
NOISE_METHODS = ("laplace", "normal", "geometric", "gumbel", "random", "exponential")
SECURE = (
    "secure_discrete_laplace",
    "secure_discrete_gaussian",
    "secure_laplace",
    "secure_gaussian",
)


class Spy:
    """Records each noise draw with whether the ledger's charge was committed before it."""

    def __init__(self) -> None:
        self.charges = 0
        self.draws: list[tuple[str, bool]] = []

    @property
    def committed(self) -> bool:
        return self.charges > 0


class _SpiedGenerator:
    def __init__(self, gen: np.random.Generator, spy: Spy) -> None:
        self._gen, self._spy = gen, spy

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._gen, name)
        if name not in NOISE_METHODS:
            return attr

        def draw(*args: Any, **kwargs: Any) -> Any:
            self._spy.draws.append((name, self._spy.committed))
            return attr(*args, **kwargs)

        return draw


@contextmanager
def spied(monkeypatch: pytest.MonkeyPatch, *, fail_charge: bool = False) -> Iterator[Spy]:
    """Spy on the ledger's charge (``fail_charge``: it raises instead) and on every noise
    source; the samplers' own guard is switched off, so the spy alone judges the order."""
    spy = Spy()
    charge_parts = Ledger.charge_parts

    def charge(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        if fail_charge:
            raise OSError(28, "No space left on device (injected)")
        out = charge_parts(self, *args, **kwargs)
        spy.charges += 1
        return out

    monkeypatch.setattr(Ledger, "charge_parts", charge)
    generator = samplers.Randomness.generator

    def spied_generator(self: samplers.Randomness) -> Any:
        return _SpiedGenerator(generator.fget(self), spy)  # type: ignore[attr-defined]

    monkeypatch.setattr(samplers.Randomness, "generator", property(spied_generator))
    for name in SECURE:
        real = getattr(samplers, name)

        def secure(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            spy.draws.append((_name, spy.committed))
            return _real(*args, **kwargs)

        monkeypatch.setattr(samplers, name, secure)
    monkeypatch.setattr("privmob.privacy.payment.require_paid", lambda *_a, **_k: None)
    for module in ("samplers", "mechanisms"):
        monkeypatch.setattr(f"privmob.privacy.{module}.require_paid", lambda *_a, **_k: None)
    monkeypatch.setattr("privmob.releases.landmark.mechanism.require_paid", lambda *_a, **_k: None)
    yield spy


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_kind_draws_its_noise_after_the_committed_charge(
    kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _inputs(tmp_path)
    with spied(monkeypatch) as spy:
        assert run_cli(_argv(kind, inputs, tmp_path / "out")) == 0
    assert spy.charges == 1  # charged once, by the lifecycle
    assert spy.draws, "the spy saw no noise: it would not catch an early draw"
    early = [name for name, committed in spy.draws if not committed]
    assert early == [], f"{kind.name} drew noise before its charge: {early}"


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_no_kind_draws_or_returns_a_value_when_its_charge_fails(
    kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _inputs(tmp_path)
    with spied(monkeypatch, fail_charge=True) as spy:
        code = run_cli(_argv(kind, inputs, tmp_path / "out"))
    assert code != 0
    assert spy.draws == []  # no noise exists: nothing computed from it can leave
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))
    assert "nothing was charged" in capsys.readouterr().err


def test_a_kind_that_returns_a_value_or_draws_in_its_draft_is_refused(tmp_path: Path) -> None:
    """Kinds cannot charge or draw: a release returned without a draft, or noise drawn while
    the kind computes its exact values, never leaves (and nothing is charged)."""
    import pandas as pd

    from privmob.privacy.costs import Cost, PrivacyUnit
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.releases.base import Accountant
    from privmob.releases.gate import Draft, UnpaidRelease, run
    from privmob.releases.release import Release

    ledger = Ledger(tmp_path / "l.sqlite")
    acct = Accountant(ledger, "d", budget=5.0)
    cost = Cost.pure(1.0, PrivacyUnit.USER)

    def release(tables: dict[str, pd.DataFrame], kind: str = "counts") -> Release:
        return Release(kind, cost, PrivacyUnit.USER, {}, {}, {}, {}, tables)

    noisy = Noise(NoiseKind.DISCRETE_LAPLACE, 1.0)
    with pytest.raises(UnpaidRelease):  # the intended way, with the charge left out
        run(lambda: release({"counts": pd.DataFrame({"count": [1]})}), acct)
    with pytest.raises(UnpaidNoise):  # noise drawn before the charge
        run(lambda: noisy.add(np.zeros(3, dtype=np.int64), 1), acct)
    with pytest.raises(UnpaidRelease, match="not a registered release kind"):
        run(lambda: Draft(release({}, "anything at all"), "", lambda: release({})), acct)
    assert ledger.entries("d") == []
    # the same draft with a registered kind is charged once, then drawn
    drawn = run(
        lambda: Draft(
            release({}),
            "",
            lambda: release({"counts": pd.DataFrame({"count": noisy.add(np.zeros(3), 1)})}),
        ),
        acct,
    )
    assert len(ledger.entries("d")) == 1 and drawn.ledger_entry is not None


def test_session_counts_records_only_a_registered_kind(tmp_path: Path) -> None:
    import privmob as pm
    from privmob.errors import ConfigError

    inputs = _inputs(tmp_path)
    with (
        pm.Session(
            str(inputs / "trips.csv"),
            tessellation=str(inputs / "grid.geojson"),
            dataset="d",
            budget=pm.PureDP(5),
            seed=1,
        ) as s,
        pytest.raises(ConfigError, match="not a registered count kind"),
    ):
        s.counts(epsilon=1, by=["origin"], kind="anything at all")


# -- the Session: a progress callback that raises, and what is staged at the charge --------
def _session(inputs: Path, ledger: Path, progress: Any) -> Any:
    import privmob as pm

    return pm.Session(
        str(inputs / "trips.csv"),
        tessellation=str(inputs / "grid.geojson"),
        ledger=str(ledger),
        dataset="d",
        budget=pm.PureDP(50),
        progress=progress,  # secure noise: the spy watches the secure samplers
    )


class Stop(Exception):
    pass


def test_a_progress_callback_raising_at_each_step_leaves_nothing_drawn_or_a_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _inputs(tmp_path)
    steps: list[str] = []
    with _session(inputs, tmp_path / "probe.sqlite", steps.append) as s:
        s.od(epsilon=1, max_trips=3, output=tmp_path / "probe", formats=["geojson"])
    assert any("charging" in m for m in steps) and any("map layer" in m for m in steps)
    for i, step in enumerate(steps):
        ledger = tmp_path / f"l{i}.sqlite"
        out = tmp_path / f"o{i}"
        seen: list[str] = []

        def progress(message: str, at: int = i, seen: list[str] = seen) -> None:
            seen.append(message)
            if len(seen) == at + 1:
                raise Stop(message)

        with spied(monkeypatch) as spy:
            with pytest.raises(Stop), _session(inputs, ledger, progress) as s:
                s.od(epsilon=1, max_trips=3, output=out, formats=["geojson"])
            charged = len(Ledger(ledger).entries("d")) if ledger.exists() else 0
            drawn = bool(spy.draws)
            monkeypatch.undo()
        # either nothing drawn and nothing charged, or the charge committed first
        assert (not drawn and charged == 0) or charged == 1, (step, drawn, charged)
        assert all(committed for _, committed in spy.draws), step
        if charged == 0:
            assert not out.exists()
            assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".o{i}")], step


def test_at_the_charge_nothing_is_staged_yet(tmp_path: Path) -> None:
    """The probe of the issue read every noisy table in the staged folder at "charging the
    privacy ledger"; now the folder does not exist until the charge is committed."""
    inputs = _inputs(tmp_path)
    staged_at_charge: list[list[Path]] = []

    def progress(message: str) -> None:
        if message.startswith("charging the privacy ledger"):
            staged_at_charge.append([p for p in tmp_path.rglob("*") if "privmob-staging" in str(p)])

    with _session(inputs, tmp_path / "l.sqlite", progress) as s:
        s.od(epsilon=1, max_trips=3, output=tmp_path / "out")
    assert staged_at_charge == [[]]
    assert (tmp_path / "out" / "od.parquet").is_file()
    assert not [p for p in tmp_path.iterdir() if "privmob-staging" in p.name]  # seal removed


def _privmob(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``privmob argv`` in a real process."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "privmob", *argv], capture_output=True, text=True, cwd=root
    )


# -- the layer size: cut to fit after the charge, never refused after the noise ---------
@pytest.mark.parametrize("neighbour", [False, True])
def test_a_layer_over_its_size_limit_is_cut_after_the_charge(
    neighbour: bool, tmp_path: Path
) -> None:
    """``--max-layer-size 1B`` refused every OD release after its noise, uncharged, naming the
    number of noisy flows (a free release that told D from D'); now both D and D' (one user
    more) are charged and publish the layer cut to what fits, the cut stated."""
    inputs = _inputs(tmp_path, neighbour=neighbour)
    ledger = tmp_path / "l.sqlite"
    od = next(k for k in KINDS if k.name == "od")
    argv = _argv(od, inputs, tmp_path / "out", "--ledger", str(ledger), test_mode=False)
    argv += ["--format", "geojson", "--all-flows", "--max-layer-size", "1B"]
    # every flow: known before reading, so refused before reading (uncharged, no data read)
    refused = _privmob(argv)
    assert refused.returncode == 2 and "layer would be about" in refused.stderr
    assert Ledger(ledger).entries("golden") == []
    argv.remove("--all-flows")  # the flows above the floor: known once drawn
    argv[argv.index("--max-layer-size") + 1] = "2KB"
    done = _privmob(argv)
    assert done.returncode == 0, done.stderr
    assert len(Ledger(ledger).entries("golden")) == 1
    folder = tmp_path / "out" / "o"
    meta = json.loads((folder / "metadata.json").read_text())
    layer = json.loads((folder / "od_flows.geojson").read_text())
    if "map_layer" in meta:  # cut: the largest flows that fit, the rest left out and said
        cut = meta["map_layer"]
        assert cut["features"] == len(layer["features"]) and cut["left_out"] > 0
        counts = [f["properties"]["count"] for f in layer["features"]]
        assert min(counts, default=0) >= 0
    assert (folder / "od_flows.geojson").stat().st_size <= 2000 * 1.5


def test_cut_to_fit_keeps_the_largest_features_and_says_so() -> None:
    """The cut itself (the CLI test above may draw too few flows to need one): a layer over
    the limit keeps exactly the features that fit, those with the largest counts, in table
    order, and states the cut; one under the limit is left as it is."""
    import geopandas as gpd
    import pandas as pd
    from shapely.geometry import Point
    from tests.helpers import box_grid

    from privmob.releases.kinds import Layer
    from privmob.render.layers import cut_to_fit, layer_size

    tess = box_grid(3)
    kind = Layer("od", None, "od_flows")
    counts = [5, 40, 12, 33, 7, 21]
    layer = gpd.GeoDataFrame(pd.DataFrame({"count": counts}), geometry=[Point(0, 0)] * 6, crs=4326)
    per = layer_size(kind, tess, 1, "geojson")

    from types import SimpleNamespace

    rel = SimpleNamespace(extra={})
    kept = cut_to_fit(rel, layer, kind, tess, ["geojson"], 3 * per)
    assert list(kept["count"]) == [40, 33, 21]  # the three largest, in table order
    assert rel.extra["map_layer"]["features"] == 3 and rel.extra["map_layer"]["left_out"] == 3
    rel = SimpleNamespace(extra={})
    assert len(cut_to_fit(rel, layer, kind, tess, ["geojson"], 6 * per)) == 6 and rel.extra == {}
