"""``privmob audit figures``: the documented files are written, with the documented shape."""

from __future__ import annotations

import pandas as pd
import pytest

from privmob.audit.figures import FigureConfig, figure_steps, write_figures


def test_lrt_files(tmp_path) -> None:
    cfg = FigureConfig(trials=300, k_max=4)
    paths = write_figures(tmp_path, cfg, ml=False)
    assert [p.name for p in paths] == ["lrt_accuracy.csv", "lrt_accuracy.md", "lrt_accuracy.png"]
    df = pd.read_csv(tmp_path / "lrt_accuracy.csv")
    assert len(df) == 2 * 5 and df.release.nunique() == 2
    assert (tmp_path / "lrt_accuracy.png").stat().st_size > 10_000
    assert "accuracy [seed 002]" in (tmp_path / "lrt_accuracy.md").read_text()
    assert figure_steps(cfg, ml=False) == 10


@pytest.mark.slow
def test_ml_table(tmp_path) -> None:
    cfg = FigureConfig(ml_targets=2, ml_users=40, trees=5, ml_epsilons=(1.0,))
    write_figures(tmp_path, cfg, lrt=False)
    text = (tmp_path / "ml_auc.md").read_text()
    assert "A: train raw" in text and "B: train private" in text
    res = pd.read_csv(tmp_path / "ml_auc.csv")
    assert set(res.features) == {"od", "od+weekday"}
