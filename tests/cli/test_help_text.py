"""Help speaks to users: no command's ``--help`` cites the project's internal documents (a
SPEC section, a "seed" paper number); papers are cited by their authors."""

from __future__ import annotations

import importlib
import re
from typing import Any

import typer
from typer.testing import CliRunner

from privmob.cli import COMMAND_MODULES, app

INTERNAL = re.compile(r"SPEC|seed 0\d|seeds? \d{3}|seed's", re.IGNORECASE)


def _paths() -> list[list[str]]:
    """Every command and sub-command, as the words typed after ``privmob``."""
    eager = typer.Typer()
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(eager)
    out: list[list[str]] = [[]]

    def walk(cmd: Any, path: list[str]) -> None:
        for name in getattr(cmd, "list_commands", lambda _c: [])(None):
            sub = cmd.get_command(None, name)
            out.append([*path, name])
            walk(sub, [*path, name])

    walk(typer.main.get_group(eager), [])
    return out


def test_no_help_cites_internal_documents() -> None:
    runner = CliRunner()
    paths = _paths()
    assert ["plan", "od"] in paths and ["audit"] in paths and ["evaluate"] in paths
    offenders = {}
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert res.exit_code == 0, (path, res.output)
        found = INTERNAL.findall(res.output)
        if found:
            offenders[" ".join(path) or "privmob"] = found
    assert offenders == {}
