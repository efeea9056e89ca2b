"""The ``privmob`` command.

Each command lives in its own module of this package and is added by that module's
``register(app)``. A :class:`privmob.errors.PrivmobError` (bad input, budget refused, bad
parameters) is printed as one message plus a hint, and the process exits with code 2 and no
traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from privmob.cli.common import console_err
from privmob.cli.lazy import LazyGroup, lazy_modules
from privmob.errors import PrivmobError

app = typer.Typer(
    name="privmob",
    help="Differentially private mobility statistics, with guarantees that hold per person.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)

# one module per command (or group of commands); each defines register(app)
COMMAND_MODULES = [
    "privmob.cli.od",
    "privmob.cli.ledger",
    "privmob.cli.synth",
    "privmob.cli.demo",
    "privmob.cli.plan",
    "privmob.cli.evaluate",
    "privmob.cli.population",
    "privmob.cli.series",
    "privmob.cli.series_utility",
    "privmob.cli.density",
    "privmob.cli.audit",
    "privmob.cli.report",
]


@app.callback()
def _root() -> None:  # a group with a callback: commands may all be lazy (see LazyGroup)
    pass


# the modules listed in privmob.cli.lazy are imported when one of their commands runs
for _name in COMMAND_MODULES:
    if _name not in lazy_modules():
        importlib.import_module(_name).register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning privmob errors into exit code 2."""
    try:
        app(args=argv, standalone_mode=True)
    except PrivmobError as exc:
        console_err.print(f"[bold red]error:[/] {exc.message}", highlight=False, markup=True)
        if exc.hint:
            console_err.print(f"[yellow]hint:[/] {exc.hint}", highlight=False)
        sys.exit(exc.exit_code)
