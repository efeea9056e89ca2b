"""Lazy commands: ``privmob`` imports a command's module only when that command runs.

Every command module imports what its release needs (pandas, DuckDB, GeoPandas, scikit-learn,
...): importing all of them made ``privmob --help`` and every release pay for all the others
(1.5-2 s). :class:`LazyGroup` lists the commands of :data:`LAZY_COMMANDS` from their name and
one-line help alone, and imports a module (calling its ``register(app)``) only when one of its
commands is resolved, for running it or for its own ``--help``.

:data:`LAZY_COMMANDS` must list what each module registers, with the help line the module's
command shows: ``tests/cli/test_lazy_commands.py`` checks both against the modules (and prints
the up-to-date table when they differ). A module not listed here is imported eagerly, as
before (and its commands are listed first): add a new command module's commands here to
keep its imports out of the other commands' start-up.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from privmob.cli.coerce import read_plainly
from privmob.releases.kinds import KINDS, Kind, each_kind


class LazyCommand(NamedTuple):
    module: str
    help: str
    hidden: bool = False


#: command name -> the module that registers it and the help line ``privmob --help`` shows;
#: in the order of that list (Typer lists commands first, then groups of commands)
LAZY_COMMANDS: dict[str, LazyCommand] = {
    # the release commands, from the registry of kinds (privmob.releases.kinds)
    **{k.name: LazyCommand(k.cli_module, k.cli_help) for k in KINDS},
    "synth": LazyCommand(
        "privmob.cli.synth",
        "Generate realistic synthetic mobility data, streamed to Parquet in chunks of users.",
    ),
    "demo": LazyCommand(
        "privmob.cli.demo",
        "Generate synthetic trips, release weekly private OD matrices, show what it cost.",
    ),
    "plan": LazyCommand(
        "privmob.cli.plan",
        "Choose epsilon for an error target, or see what an epsilon gives (reads no data).",
    ),
    "tpl": LazyCommand(
        "privmob.cli.series",
        "Temporal privacy loss under a Markov correlation (Cao et al.): per timestamp and max.",
    ),
    "series-utility": LazyCommand(
        "privmob.cli.series_utility",
        "Writes utility.csv, utility.md and utility.png (synthetic and Gowalla Manhattan).",
    ),
    "density-eval": LazyCommand("privmob.cli.density", "", hidden=True),
    "compare": LazyCommand(
        "privmob.cli.report",
        "Similarity of two reports per analysis (SMAPE, JS base 2, KL, EMD, Kendall, top-n).",
    ),
    "tessellate": LazyCommand(
        "privmob.cli.tessellate",
        "Write a square grid (--cell-size) or H3 cells (--h3) over a declared public area.",
    ),
    "ledger": LazyCommand(
        "privmob.cli.ledger", "The privacy ledger: budgets and releases per dataset."
    ),
    "evaluate": LazyCommand(
        "privmob.cli.evaluate",
        "Simulate decisions with private vs exact statistics (for the data holder; not a release).",
    ),
    "audit": LazyCommand(
        "privmob.cli.audit",
        "Privacy audits: membership attacks, empirical epsilon, programme cost.",
    ),
}


def _release_command(kind: Kind) -> None:
    """A kind registered later (``privmob.releases.kinds.register``): its command."""
    LAZY_COMMANDS.setdefault(kind.name, LazyCommand(kind.cli_module, kind.cli_help))


each_kind(_release_command)


def lazy_modules() -> set[str]:
    """The command modules that :class:`LazyGroup` imports on demand."""
    return {c.module for c in LAZY_COMMANDS.values()}


class LazyGroup(TyperGroup):
    """The root command group: eager commands as usual, :data:`LAZY_COMMANDS` on demand."""

    def list_commands(self, ctx: Any) -> list[str]:
        eager = super().list_commands(ctx)
        return eager + [n for n in LAZY_COMMANDS if n not in self.commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command if loaded; for a lazy one not loaded yet, a stand-in that only carries
        its name and help line (enough for the command list of ``privmob --help``)."""
        if cmd_name in self.commands or cmd_name not in LAZY_COMMANDS:
            return super().get_command(ctx, cmd_name)
        lazy = LAZY_COMMANDS[cmd_name]
        return TyperCommand(name=cmd_name, short_help=lazy.help, hidden=lazy.hidden)

    def load(self, cmd_name: str) -> None:
        """Import the module of a lazy command and add the commands it registers."""
        module = importlib.import_module(LAZY_COMMANDS[cmd_name].module)
        sub = typer.Typer()
        module.register(sub)
        for name, cmd in typer.main.get_group(sub).commands.items():
            self.commands.setdefault(name, cmd)

    def parse_args(self, ctx: Any, args: list[str]) -> Any:
        read_plainly(self, ctx)  # the root options without pydantic (privmob.cli.coerce)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else None
        if name in LAZY_COMMANDS and name not in self.commands:
            self.load(name)
        resolved = super().resolve_command(ctx, args)
        read_plainly(resolved[1], ctx)  # the command's options without pydantic
        return resolved
