"""The density bound's earlier spelling, shared by ``privmob density`` and ``privmob evaluate
density`` (:mod:`privmob.cli.density`, :mod:`privmob.cli.density_eval`)."""

from __future__ import annotations

from typing import Annotated

import typer

from privmob.cli import common as c

#: the bound's earlier spelling (the shared ``--max-trips``): accepted with a warning
OldMaxTripsOpt = Annotated[
    int | None, typer.Option("--max-trips", hidden=True, help="deprecated: --max-visits")
]


def visits_bound(max_visits: int, max_trips: int | None) -> int:
    """The bound given: ``-T/--max-visits``, or its earlier spelling ``--max-trips`` (read as
    it, with a warning)."""
    if max_trips is None:
        return max_visits
    c.print_warning(
        f"--max-trips is deprecated here: the bound is -T/--max-visits (read as --max-visits "
        f"{max_trips})"
    )
    return max_trips
