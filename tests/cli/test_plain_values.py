"""The option values read without pydantic (``privmob.cli.coerce``) are Typer's own: for every
option of every command, on the texts each kind of option is given (numbers plain and not,
paths that exist and do not, choices right and wrong, lists, flags), ``PlainValues`` gives the
value Typer's adapter gives (same value, same type) or raises the same error message."""

from __future__ import annotations

import importlib
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from privmob.cli import app
from privmob.cli.coerce import _NOT_PLAIN, PlainValues, read_plainly
from privmob.cli.lazy import LAZY_COMMANDS

TEXTS = [
    "", "0", "12", "-3", "007", "1_000", "0.25", "-0.5", ".5", "5.", "1e-3", "2E+05", "1e400",
    "inf", "nan", " 7", "abc", "user", "USER", "trip", "true", "False", "a,b",
]  # fmt: skip


def _commands() -> list[Any]:
    cmds = []
    for module in dict.fromkeys(c.module for c in LAZY_COMMANDS.values()):
        sub = typer.Typer()
        importlib.import_module(module).register(sub)
        cmds.extend(typer.main.get_group(sub).commands.values())
    return [typer.main.get_command(app), *cmds]


def _outcome(coerce: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        got = coerce(value, param=param, ctx=ctx)
    except BadParameter as e:
        return "error", e.format_message()
    except Exception as e:  # Typer's own, on a value the command line never gives
        return type(e).__name__, str(e)
    return type(got).__name__, repr(got)  # nan == nan


def _values(param: Any, tmp: Path) -> list[Any]:
    ann = param.type_descriptor.annotation
    values: list[Any] = [None, *TEXTS, str(tmp), str(tmp / "missing.csv"), str(tmp / "f.txt")]
    values += [1, 2.5, True, False, Path(tmp), (), ("a", "b"), ["x"], ("1", 2)]
    if isinstance(ann, type) and issubclass(ann, Enum):
        values += [*ann, *(m.value for m in ann), *(m.name for m in ann)]
    if param.default is not None:
        values.append(param.default)
    return values


def test_plain_values_are_typers_values(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    checked = plain = 0
    for cmd in _commands():
        ctx = Context(cmd)
        for param in cmd.get_params(ctx):
            if not hasattr(param, "type_descriptor"):
                continue
            ours, theirs = PlainValues(param), build_runtime_param(param.type_descriptor)
            for value in _values(param, tmp_path):
                want = _outcome(theirs.coerce, value, param, ctx)
                assert _outcome(ours.coerce, value, param, ctx) == want, (cmd.name, param.name)
                checked += 1
                plain += value is None or ours.plain(value, ctx) is not _NOT_PLAIN
    assert checked > 10_000 and plain > checked / 3, (checked, plain)  # the plain path is taken


@pytest.mark.parametrize("args", [["od", "--help"], ["--version"], ["population", "--help"]])
def test_the_command_line_reads_options_plainly(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_read_plainly_leaves_a_built_parameter() -> None:
    cmd = typer.main.get_command(app)
    ctx = Context(cmd)
    built = [p for p in cmd.get_params(ctx) if hasattr(p, "type_descriptor")]
    built[0]._runtime_param = marker = object()
    read_plainly(cmd, ctx)
    assert built[0]._runtime_param is marker
    assert all(isinstance(p._runtime_param, PlainValues) for p in built[1:])
    built[0]._runtime_param = None
