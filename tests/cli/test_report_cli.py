"""``privmob report`` / ``privmob compare`` end to end on dp_mobility_report's fixture."""

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privmob.cli.report import register
from privmob.privacy.ledger import Ledger

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "dpmr_fixture"


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _run(args: list[str]):
    from privmob.errors import PrivmobError

    try:
        return CliRunner().invoke(_app(), args, catch_exceptions=False)
    except PrivmobError as exc:  # what privmob.cli.main turns into its exit code
        return exc


@pytest.fixture
def fixture_dir() -> Path:
    if not FIXTURE.exists():
        pytest.skip(f"../shared/data not found: {FIXTURE}")
    return FIXTURE


def test_report_and_compare_on_dpmr_fixture(tmp_path, fixture_dir):
    ledger = tmp_path / "ledger.sqlite"
    common = [
        "report",
        str(fixture_dir / "test_data.csv"),
        "--tessellation",
        str(fixture_dir / "test_tessellation.geojson"),
        "--max-trips",
        "5",
        "--period",
        "2020-12-01",
        "2021-01-01",
        "--ledger",
        str(ledger),
        "--budget",
        "10",
        "--quiet",
    ]
    a = ["-o", str(tmp_path / "a" / "report.html"), "--offline-maps"]  # no address in it
    r1 = _run([*common, "--epsilon", "1", *a])
    assert r1.exit_code == 0, r1.output
    r2 = _run(
        [
            *common,
            "--epsilon",
            "2",
            "--budget-split",
            "od_flows=3",
            "--range",
            "travel_time=0:120:10",
            "-o",
            str(tmp_path / "b" / "report.html"),
        ]
    )
    assert r2.exit_code == 0, r2.output
    doc = json.loads((tmp_path / "a" / "report.json").read_text())
    assert len(doc["analyses"]) == 15
    assert doc["ledger_entries"][-1]["cost"]["epsilon"] == pytest.approx(1.0)
    assert (tmp_path / "a" / "report_tables" / "od_flows.parquet").exists()
    html = (tmp_path / "a" / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    # the same numbers in HTML and JSON (embedded copy of the document)
    start = html.index("<script type='application/json' id='report-data'>") + 49
    embedded = json.loads(html[start : html.index("</script>", start)].replace("<\\/", "</"))
    assert embedded["analyses"] == doc["analyses"]
    doc_b = json.loads((tmp_path / "b" / "report.json").read_text())
    assert doc_b["analyses"]["travel_time"]["edges"][-1] == 120
    assert doc_b["analyses"]["od_flows"]["epsilon"] == pytest.approx(2 * 3 / 17)
    # budget: 1 + 2 spent of 10; an 8 would overspend and is refused before any output
    r3 = _run([*common, "--epsilon", "8", "-o", str(tmp_path / "c" / "report.html")])
    assert getattr(r3, "exit_code", 2) == 3 and not (tmp_path / "c").exists()
    # a taken output is refused before anything is charged
    spent = len(Ledger(ledger).entries("test_data"))
    r5 = _run([*common, "--epsilon", "1", "-o", str(tmp_path / "a" / "report.html")])
    assert getattr(r5, "exit_code", 2) == 4
    assert len(Ledger(ledger).entries("test_data")) == spent
    out = tmp_path / "cmp.html"

    res = CliRunner().invoke(
        _app(),
        [
            "compare",
            str(tmp_path / "a" / "report.json"),
            str(tmp_path / "b" / "report.json"),
            "-o",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "Jensen-Shannon divergence (base 2)" in text and "visits_per_tile" in text
    assert out.with_suffix(".csv").exists()
    import pandas as pd

    table = pd.read_csv(out.with_suffix(".csv")).set_index("analysis")
    assert table.loc["travel_time", "note"].startswith("different declared bins")
    assert 0 <= table.loc["visits_per_tile", "js_divergence"] <= 1
    assert table.loc["od_flows", "top_n_coverage"] <= 1


def test_report_with_a_delta_composes_by_zcdp(tmp_path, fixture_dir):
    """``--delta``: the analyses compose by zCDP; two ledger entries (pure part, rho part),
    the plan's choice in the JSON; ``--composition pure`` refuses a delta."""
    ledger = tmp_path / "ledger.sqlite"
    common = [
        "report",
        str(fixture_dir / "test_data.csv"),
        "--tessellation",
        str(fixture_dir / "test_tessellation.geojson"),
        "--max-trips",
        "10",
        "--start",
        "2020-12-01",
        "--end",
        "2021-01-01",
        "--ledger",
        str(ledger),
        "--budget",
        "10",
        "--quiet",
        "--epsilon",
        "1",
    ]
    out = tmp_path / "z" / "report.html"  # delta 1e-5: every count part Gaussian
    r = _run([*common, "--delta", "1e-5", "-o", str(out), "--offline-maps"])
    assert r.exit_code == 0, r.output
    assert "delta=1e-05" in r.output and "ledger entries" in r.output
    doc = json.loads((tmp_path / "z" / "report.json").read_text())
    rhos = [e["cost"]["rho"] for e in doc["ledger_entries"]]
    assert rhos[0] is None and rhos[1] > 0
    assert doc["analyses"]["od_flows"]["mechanisms"]["counts"]["mechanism"] == "discrete-gaussian"
    assert doc["privacy"]["cost"]["delta"] == 1e-5
    assert "ρ of the Gaussian parts" in out.read_text()
    bad = _run(
        [*common, "--delta", "1e-6", "--composition", "pure", "-o", str(tmp_path / "p.html")]
    )
    assert getattr(bad, "exit_code", 2) == 2 and "has no delta" in str(bad)
