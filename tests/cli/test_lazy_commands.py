"""``privmob`` imports a command's module only when the command runs (start-up time), and the
table that lists the lazy commands matches what their modules register."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import typer
from typer.testing import CliRunner

from privmob.cli import COMMAND_MODULES, app
from privmob.cli.lazy import LAZY_COMMANDS, LazyCommand, lazy_modules


def _registered(module: str) -> dict[str, LazyCommand]:
    sub = typer.Typer()
    importlib.import_module(module).register(sub)
    out = {}
    for name, cmd in typer.main.get_group(sub).commands.items():
        text = "" if cmd.hidden else cmd.short_help or (cmd.help or "").split("\n\n")[0]
        out[name] = LazyCommand(module, text, bool(cmd.hidden))
    return out


def test_table_matches_what_the_modules_register() -> None:
    assert lazy_modules() <= set(COMMAND_MODULES)
    actual: dict[str, LazyCommand] = {}
    for module in sorted(lazy_modules()):
        actual.update(_registered(module))
    table = "\n".join(f"{n!r}: {c!r}," for n, c in actual.items())
    assert actual == LAZY_COMMANDS, f"update LAZY_COMMANDS in privmob/cli/lazy.py:\n{table}"


def test_help_lists_the_same_commands_as_eager_registration() -> None:
    eager = typer.Typer(
        name="privmob",
        help=app.info.help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    assert app.registered_callback is not None
    eager.callback()(app.registered_callback.callback)  # the same global options
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(eager)
    runner = CliRunner()
    lazy_help = runner.invoke(app, ["--help"], prog_name="privmob", terminal_width=100)
    eager_help = runner.invoke(eager, ["--help"], prog_name="privmob", terminal_width=100)
    assert lazy_help.exit_code == eager_help.exit_code == 0
    # the same lines: a module registered eagerly (not in LAZY_COMMANDS) is listed first
    assert sorted(lazy_help.output.splitlines()) == sorted(eager_help.output.splitlines())


_PROBE = """
import json, sys
from privmob.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
mods = [m for m in ("pandas", "duckdb", "geopandas", "sklearn", "matplotlib", "pyspark")
        if m in sys.modules]
cli = sorted(m for m in sys.modules if m.startswith("privmob.cli."))
print(json.dumps({"heavy": mods, "cli": cli}))
"""


def _probe(*args: str) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_help_imports_no_command_module() -> None:
    got = _probe("--help")
    assert got["heavy"] == []
    assert not set(got["cli"]) & lazy_modules()


def test_a_command_imports_only_its_own_module() -> None:
    got = _probe("od", "--help")
    assert set(got["cli"]) & lazy_modules() == {"privmob.cli.od"}
    assert not {"sklearn", "matplotlib", "pyspark"} & set(got["heavy"])
