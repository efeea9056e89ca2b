"""The optional parts (extras spark, ml, plots): the main job runs without them, and a command
that needs a missing one stops with one message naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from privmob.errors import ConfigError, EngineError

BLOCK = "import sys\nfor m in ('pyspark', 'sklearn', 'matplotlib'): sys.modules[m] = None\n"


def test_demo_runs_without_pyspark_sklearn_or_matplotlib(tmp_path):
    """The README's main job (privmob demo) imports none of the extras."""
    code = BLOCK + (
        "from privmob.cli import main\n"
        "try:\n"
        f"    main(['demo', '--users', '300', '-o', {str(tmp_path / 'demo')!r}])\n"
        "except SystemExit as e:\n"
        "    sys.exit(e.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "demo").rglob("*.parquet"))


def test_missing_scikit_learn_names_the_ml_extra(monkeypatch):
    from privmob.audit.ml import _model

    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(ConfigError) as err:
        _model("logistic", 10, 1, 0)
    assert "scikit-learn" in str(err.value) and "privmob[ml]" in err.value.hint


def test_missing_matplotlib_names_the_plots_extra(monkeypatch, tmp_path):
    import pandas as pd

    from privmob.evaluate.density_eval import plot_summary

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    summary = pd.DataFrame({"epsilon": [1.0], "mre_mean": [0.1]})
    with pytest.raises(ConfigError) as err:
        plot_summary(summary, tmp_path / "x.png")
    assert "matplotlib" in str(err.value) and "privmob[plots]" in err.value.hint


def test_missing_pyspark_names_the_spark_extra(monkeypatch):
    from privmob.engine.spark import spark_session

    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(EngineError) as err:
        spark_session()
    assert "privmob[spark]" in err.value.hint


def test_plots_work_when_installed(tmp_path):
    pytest.importorskip("matplotlib")
    from privmob.extras import pyplot

    plt = pyplot("a test plot")
    fig, ax = plt.subplots()
    ax.plot(np.arange(3))
    fig.savefig(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
