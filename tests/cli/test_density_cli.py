"""``privmob density`` and ``privmob density-eval`` as a user runs them (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import run_cli, write_city_files

import privmob
from privmob.data.density_synth import synthetic_city


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("density")
    return write_city_files(d, synthetic_city(5000, 40, 5, seed=3))


def _density(files: Path) -> list[str]:
    """The density command over the city's events, cells and zones."""
    events, cells, zones = (str(files / f) for f in ("events.csv", "cells.csv", "zones.geojson"))
    return ["density", events, "--cells", cells, "--zones", zones]


def test_density_cli_writes_parquet_geojson_and_charges(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = [
        *_density(files),
        "--epsilon",
        "0.5",
        "--delta",
        "1e-5",
        "--max-visits",
        "20",
        "--week",
        "2026-03-02",
        "-o",
        str(out),
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--budget",
        "0.8",
        "--quiet",
    ]
    assert run_cli(args) == 0
    tab = pd.read_parquet(out / "density.parquet")
    assert len(tab) == 25 * 168
    layer = json.loads((out / "density.geojson").read_text())
    assert len(layer["features"]) == 25
    assert layer["privmob"] == {
        "kind": "density",
        "version": privmob.__version__,
        "for_publication": True,
    }
    assert len(layer["features"][0]["properties"]["counts"]) == 168
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["privacy"]["cost"]["epsilon"] == pytest.approx(0.55)  # + out-of-domain cell
    assert (out / "out_of_domain.parquet").exists()
    assert meta["for_publication"] is True and "warning" not in meta  # secure noise
    # a second release would exceed the budget of 0.8: refused, exit code 3, nothing written
    capsys.readouterr()
    again = [a if a != str(out) else str(tmp_path / "out2") for a in args]
    assert run_cli(again) == 3
    assert "budget" in capsys.readouterr().err.lower()
    assert not (tmp_path / "out2" / "density.parquet").exists()


def test_density_cli_bad_week_is_a_clear_error(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(
        [
            *_density(files),
            "-e",
            "0.5",
            "--week",
            "next monday",
            "--ledger",
            str(tmp_path / "l.sqlite"),
        ]
    )
    assert code == 2
    assert "week start" in capsys.readouterr().err


@pytest.mark.slow
def test_density_eval_writes_table_and_plot(tmp_path) -> None:
    out = tmp_path / "eval"
    argv = ["density-eval", "--synthetic", "4000", "--towers", "30", "--grid", "4"]
    argv += ["--epsilons", "0.5,1.0", "-r", "2", "--emd-hours", "12", "-o", str(out), "--quiet"]
    assert run_cli(argv) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["method"]) >= {"LPA", "EFPA", "EFPAG"}
    assert (out / "density_eval.png").stat().st_size > 1000


def test_density_eval_synthetic_commute_spread(tmp_path, monkeypatch) -> None:
    """--commute-spread reaches the synthetic city (issue 40 item 6: office hours spread over
    the morning and the evening); 0, the default, is the city as before."""
    import privmob.data.density_synth as ds

    seen: list[float] = []
    real = ds.synthetic_city

    def spy(*args: object, commute_spread_h: float = 0.0, **kw: object) -> object:
        seen.append(commute_spread_h)
        return real(*args, commute_spread_h=commute_spread_h, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ds, "synthetic_city", spy)
    for extra in ([], ["--commute-spread", "1.5"]):
        out = tmp_path / f"eval{len(extra)}"
        argv = ["density-eval", "--synthetic", "1500", "--towers", "20", "--grid", "3", *extra]
        argv += ["--epsilons", "1.0", "-r", "1", "--emd-hours", "", "-o", str(out), "--quiet"]
        assert run_cli(argv) == 0
    assert seen == [0.0, 1.5]


def test_density_bound_has_one_name_and_the_old_one_warns(tmp_path, capsys) -> None:
    """Issue 28: density's bound was -T/--max-trips on the command line, max_visits in Python
    and max_visits_per_week in metadata.json; now -T/--max-visits, --max-trips with a warning."""
    from tests.releases.golden_cases import COMMON, INPUTS

    base = ["density", str(INPUTS / "cell_events.csv"), "--cells", str(INPUTS / "cells.csv"),
            "-t", str(INPUTS / "zones.geojson"), "-e", "1", "--start", "2026-03-02",
            *COMMON]  # fmt: skip
    metas = []
    for i, bound in enumerate((["--max-visits", "12"], ["-T", "12"], ["--max-trips", "12"])):
        capsys.readouterr()
        assert run_cli([*base, *bound, "-o", str(tmp_path / str(i))]) == 0
        err = capsys.readouterr().err
        assert ("--max-trips is deprecated" in err) == (bound[0] == "--max-trips")
        metas.append(json.loads((tmp_path / str(i) / "metadata.json").read_text()))
    assert {m["privacy"]["bounds"]["max_visits_per_week"] for m in metas} == {12}
    assert len({json.dumps(m["params"], sort_keys=True) for m in metas}) == 1  # same release
