"""Evaluation outputs compare private with exact results: the files must say they are not
private (SPEC 1 / review: nothing suggests publishing them)."""

from __future__ import annotations

from privmob.evaluate.decision_grid import run_grid, synthetic_scenario, write_grid
from privmob.evaluate.notice import NOTICE_FILE


def test_decision_grid_outputs_say_not_private(tmp_path) -> None:
    scen = synthetic_scenario(k=5, days=7, seed=1)
    t2, t3 = run_grid(scen, [1.0], repetitions=1, sim_days=20, seed=2)
    paths = write_grid(t2, t3, tmp_path)
    for md in ("decisions_table2.md", "aid_table3.md"):
        assert "NOT DIFFERENTIALLY PRIVATE" in (tmp_path / md).read_text()
    notice = tmp_path / NOTICE_FILE
    assert notice in paths
    assert "do not publish" in notice.read_text()


def test_series_utility_outputs_say_not_private(tmp_path) -> None:
    import typer
    from typer.testing import CliRunner

    from privmob.cli import series_utility

    app = typer.Typer(pretty_exceptions_enable=False)
    series_utility.register(app)

    @app.callback()
    def _root() -> None:
        pass

    tsv = tmp_path / "g.tsv"  # a few Gowalla-shaped rows in Manhattan, September 2010
    rows = [f"{u}\t2010-09-0{d}T1{u}:00:00Z\t40.75\t-73.98\t1" for u in range(3) for d in (1, 2)]
    tsv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "u"
    args = ["series-utility", "-o", str(out), "--gowalla", str(tsv), "--shares", "0,0.5"]
    res = CliRunner().invoke(app, [*args, "--trials", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "NOT DIFFERENTIALLY PRIVATE" in (out / "utility.md").read_text()
    assert (out / NOTICE_FILE).is_file()
