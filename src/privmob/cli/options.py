"""The options every release command shares, defined once (names, short flags, types).

``tests/cli/test_option_names.py`` walks every release command and checks that these options
keep the same names, short flags and types everywhere. A command gives an option its own
meaning in the help (``-T`` is trips per user for ``od``, visits per user and hour for
``density``), never its own spelling. Older spellings stay accepted as hidden aliases
(:func:`with_aliases`), so existing scripts keep working.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from privmob.privacy.mechanisms import NoiseKind

#: option names of the shared options, by parameter name (checked by the test)
SHARED = {
    "epsilon": ("--epsilon", "-e"),
    "max_trips": ("--max-trips", "-T"),
    "tessellation": ("--tessellation", "-t"),
    "tile_id": ("--tile-id",),
    "start": ("--start",),
    "end": ("--end",),
    "bin": ("--bin",),
    "output": ("--output", "-o"),
    "input_timezone": ("--input-timezone",),
    "timezone": ("--timezone",),
    "unit": ("--unit",),
    "group_size": ("--group-size",),
}


def _shared(name: str, default_help: str | None = None) -> Callable[..., Any]:
    """The option factory of the shared option ``name``: its one spelling (:data:`SHARED`),
    the command's own meaning in ``help`` (required where there is no ``default_help``)."""

    def option(help: str | None = default_help) -> Any:
        if help is None:
            raise TypeError(f"the shared option {name!r} needs its meaning in help=")
        return typer.Option(*SHARED[name], help=help)

    option.__name__ = name
    return option


epsilon = _shared("epsilon")
#: the per-user contribution bound of a release (its meaning in ``help``)
max_trips = _shared("max_trips")
tessellation = _shared("tessellation", "tiles (GeoJSON, GeoParquet, Shapefile)")
start = _shared("start", "start of the public study period (a date or time; included)")
end = _shared("end", "end of the public study period (excluded)")
bin = _shared("bin")
output = _shared("output", "output folder")
timezone = _shared("timezone", "time zone of the release's days, hours and bins (default UTC)")
#: the unit of privacy (:class:`~privmob.dp.PrivacyUnit`; its meaning in ``help``)
unit = _shared("unit", "user or trip")
#: a user-level budget charged for a trip-level release by group privacy (a run option,
#: :class:`privmob.cli.run.RunOptions`; its meaning in ``help`` where it says more)
group_size = _shared("group_size", "charge a user-level budget by group privacy")


TileIdOpt = Annotated[
    str | None, typer.Option(*SHARED["tile_id"], help="tile id column of the tessellation")
]
InputTimezoneOpt = Annotated[
    str | None,
    typer.Option(
        *SHARED["input_timezone"],
        help="time zone of timestamps written without an offset (default: --timezone); e.g. "
        "UTC for logs in UTC released in local time. Timestamps with an offset keep theirs",
    ),
]
TimezoneOpt = Annotated[str, timezone()]


def with_aliases(**aliases: tuple[str, ...]) -> type[TyperCommand]:
    """A command class that also accepts ``aliases`` (parameter name -> older option names),
    hidden from ``--help``: ``with_aliases(max_trips=("--max-visits", "-l"))``."""

    class AliasedCommand(TyperCommand):
        #: the hidden older spellings, by parameter name (read by the tests)
        hidden_aliases = aliases

        def make_parser(self, ctx: Any) -> Any:
            parser = super().make_parser(ctx)
            for param in self.get_params(ctx):
                names = aliases.get(param.name or "")
                if not names:
                    continue
                shown = param.opts, param.secondary_opts
                param.opts, param.secondary_opts = list(names), []
                try:
                    param.add_to_parser(parser, ctx)
                finally:
                    param.opts, param.secondary_opts = shown
            return parser

    return AliasedCommand


#: the one rule for trips within one tile, in ``od`` and the report (privmob.releases.kinds)
SameTileOpt = Annotated[
    str,
    typer.Option(
        "--same-tile",
        help="trips that start and end in one tile: exclude (default: in no OD cell) or "
        "include (released on the diagonal)",
    ),
]

#: the noise of a count release, and the delta of its discrete Gaussian
NoiseOpt = Annotated[NoiseKind, typer.Option("--noise")]
DeltaOpt = Annotated[float, typer.Option("--delta", help="for discrete-gaussian")]
#: how events from phone records are located
CellsOpt = Annotated[
    str | None, typer.Option("--cells", help="cells table for events with cell_id")
]
#: the input's shape, for releases that read trips, trip points or events
InputShapeOpt = Annotated[
    str,
    typer.Option(
        "--input-shape",
        help="auto, trips, trip-points, events, gps (raw traces: trips between stays)",
    ),
]
#: what a trip is, for events
TripRuleOpt = Annotated[
    str,
    typer.Option(
        "--trip-rule",
        help="events only: 'events' (consecutive events in different zones, as Kohli, Aiken "
        "and Blumenstock), 'hourly' (hourly modal zone changes), 'hourly-consecutive'",
    ),
]
#: a landmark series' total budget (in the scheme's unit)
SeriesBudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--budget",
        help="the dataset's total epsilon budget (in the scheme's unit): set if it has "
        "none yet, refused if it already has a different one",
    ),
]


def _bound_or_auto(value: Any) -> Any:
    """A per-user bound: a whole number >= 1, or ``auto`` (chosen privately)."""
    if value is None or isinstance(value, int) or value == "auto":
        return value
    text = str(value).strip().lower()
    if text == "auto":
        return "auto"
    try:
        number = int(text)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither a whole number nor auto") from None
    if number < 1:
        raise typer.BadParameter(f"{value!r} is not a whole number >= 1")
    return number


def max_trips_or_auto(help: str) -> Any:
    """``-T/--max-trips`` that also takes ``auto``: the bound chosen privately (the value is
    then the text ``"auto"``; the annotation stays the shared option's type)."""
    return typer.Option(*SHARED["max_trips"], help=help, parser=_bound_or_auto, metavar="N|auto")
