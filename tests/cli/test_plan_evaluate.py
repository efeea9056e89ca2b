"""``privmob plan``: the SPEC vectors appear in its output; bad parameters exit with code 2."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from privmob.cli import plan as plan_cli


def _app() -> typer.Typer:
    app = typer.Typer()
    plan_cli.register(app)

    @app.callback()
    def _root() -> None:  # keep "plan" a subcommand
        pass

    return app


def test_plan_json_reproduces_spec_vectors() -> None:
    res = CliRunner().invoke(
        _app(),
        ["plan", "--alpha", "10", "--beta", "0.05", "--noise", "laplace-rounded", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    row = out["kinds"]["laplace-rounded"]
    assert round(row["epsilon_cell"], 6) == 0.285308
    assert round(row["epsilon_difference_thm7_seed"], 6) == 0.373909
    assert round(out["heuristic_epsilon"], 6) == 0.141421


def test_plan_epsilon_table_and_suppression() -> None:
    res = CliRunner().invoke(
        _app(),
        ["plan", "--epsilon", "0.5", "--count", "10", "--tau", "15", "--standard", "15", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert round(out["kinds"]["laplace-rounded"]["p_suppressed"], 6) == 0.947300
    assert set(out["kinds"]) == {"discrete-laplace", "laplace-rounded"}
    assert out["tau_heuristics"]["plus"] > 15 > out["tau_heuristics"]["minus"]
    res = CliRunner().invoke(_app(), ["plan", "--epsilon", "0.5", "--alpha", "10"])
    assert res.exit_code == 0 and "smallest eps" in res.output


def test_plan_needs_a_target() -> None:
    from privmob.errors import ConfigError

    res = CliRunner().invoke(_app(), ["plan"])
    assert isinstance(res.exception, ConfigError)


def test_evaluate_decisions_writes_tables_and_plot(tmp_path) -> None:
    from privmob.cli import evaluate as ev

    app = typer.Typer()
    ev.register(app)

    @app.callback()
    def _root() -> None:
        pass

    out = tmp_path / "ev"
    args = ["evaluate", "decisions", "-o", str(out), "--epsilons", "0.5,1", "-r", "1"]
    args += ["--regions", "8", "--days", "7", "--sim-days", "60", "--seed", "3", "--quiet"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    for name in ("decisions_table2.csv", "aid_table3.md", "error_vs_epsilon.png"):
        assert (out / name).stat().st_size > 0
    assert "eps=0.5" in (out / "aid_table3.md").read_text()
