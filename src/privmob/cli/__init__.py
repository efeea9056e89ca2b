"""The ``privmob`` command.

Each command lives in its own module of this package and is added by that module's
``register(app)``. A :class:`privmob.errors.PrivmobError` is printed as one message plus a hint
and the process exits with its code (2 bad input or configuration, 3 budget refused, 4 output
cannot be written) and no traceback; an internal error exits with 1 and a private report file
(see :mod:`privmob.cli.failure`).
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from privmob.cli.lazy import LazyGroup, lazy_modules
from privmob.releases.kinds import KINDS

app = typer.Typer(
    name="privmob",
    help="Differentially private mobility statistics, with guarantees that hold per person.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


def _version(value: bool) -> None:
    if value:
        from privmob import __version__

        typer.echo(f"privmob {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="errors also show exact counts of bad records (data-dependent)"
        ),
    ] = False,
) -> None:
    """Differentially private mobility statistics, with guarantees that hold per person."""
    from privmob.cli.failure import VERBOSE
    from privmob.surface import command_line

    VERBOSE["on"] = VERBOSE["on"] or verbose
    # every command's hints in the command line's words, however the app is invoked (the
    # console script, or click's test runner), until the command's context closes
    ctx.with_resource(command_line())


# one module per command (or group of commands); each defines register(app); the release
# commands' modules come from the registry of kinds
COMMAND_MODULES = [
    *dict.fromkeys(k.cli_module for k in KINDS),
    "privmob.cli.ledger",
    "privmob.cli.synth",
    "privmob.cli.demo",
    "privmob.cli.plan",
    "privmob.cli.evaluate",
    "privmob.cli.series_utility",
    "privmob.cli.audit",
    "privmob.cli.tessellate",
]


# the modules listed in privmob.cli.lazy are imported when one of their commands runs
for _name in COMMAND_MODULES:
    if _name not in lazy_modules():
        importlib.import_module(_name).register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; errors become one message and their exit code
    (``cli/failure.py``); SIGTERM / SIGINT exit 128 + signal with the run directory removed."""
    from privmob.cli.common import help_width_when_piped, operator_warnings
    from privmob.cli.failure import charged_here, run
    from privmob.engine.rundir import exit_on_signal

    help_width_when_piped()

    with exit_on_signal(charged=charged_here), operator_warnings():
        run(app, argv)
