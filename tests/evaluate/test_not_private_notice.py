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
