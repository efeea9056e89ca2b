"""Options and helpers shared by the commands."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from privmob.cli import options as o
from privmob.data.reading import dataset_name as dataset_name  # the commands' name for it

#: the width of output that is not a terminal (cron and CI logs, ``| less``, a file): wide
#: enough that no table cell is cut at 80 columns; ``COLUMNS`` (rich) wins when set
PIPE_WIDTH = 250
#: the width of ``--help`` that is not a terminal (``privmob od --help | less``, a file): wide
#: enough that no option name or help word is cut (every command's help at this width is
#: checked by tests/cli/test_piped_output.py), narrow enough to read; ``TERMINAL_WIDTH``
#: (typer's help) wins when set
HELP_WIDTH = 120


def output_width(stream: Any) -> int | None:
    """:data:`PIPE_WIDTH` for a stream that is not a terminal, else None (the terminal's)."""
    if os.environ.get("COLUMNS"):
        return None
    try:
        return None if stream.isatty() else PIPE_WIDTH
    except (AttributeError, ValueError):  # a closed or replaced stream
        return PIPE_WIDTH


def help_width_when_piped() -> None:
    """typer's help at :data:`HELP_WIDTH` when stdout is not a terminal (read by typer when it
    renders help, unless ``TERMINAL_WIDTH`` is set)."""
    if output_width(sys.stdout) is not None and not os.environ.get("TERMINAL_WIDTH"):
        os.environ["TERMINAL_WIDTH"] = str(HELP_WIDTH)


# soft wrap: a line is never broken by privmob (a terminal wraps it; a log keeps it whole, so a
# phrase can be searched for in cron and systemd logs)
console = Console(soft_wrap=True, width=output_width(sys.stdout))
console_err = Console(stderr=True, soft_wrap=True, width=output_width(sys.stderr))

LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="privacy ledger: an SQLite file or a postgresql://user@host/db URL (a team "
        "ledger); default $PRIVMOB_LEDGER, else ledger.sqlite in $XDG_DATA_HOME/privmob "
        "(~/.local/share/privmob)",
    ),
]
DatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="name of the dataset whose budget is charged (default: the input file's name)",
    ),
]
NewDatasetOpt = Annotated[
    bool,
    typer.Option(
        "--new-dataset-for-same-data",
        help="release content that another dataset already released under this dataset's own "
        "budget (refused otherwise: a budget is bound to the data, not to a name); recorded "
        "in the ledger",
    ),
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--budget",
        help="the dataset's total epsilon budget: set if it has none yet, refused if it "
        "already has a different one",
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", help="TESTS ONLY: fixed noise seed; the output is stamped 'not for publication'"
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")]
MaxMarginOpt = Annotated[
    float | None,
    typer.Option(
        "--max-margin",
        help="refuse, before reading any data, a release whose 95% margin of error per cell "
        "is above this (the count you expect per cell)",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="release it even if its plan warns (epsilon below 0.1, more than 10 million cells); "
        "without it such a release is refused before reading or charging anything",
    ),
]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="replace existing output files")]
#: the plans (``privmob plan``, ``plan programme``) printed as JSON instead of tables
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="column mapping, canonical=yours, comma-separated (e.g. uid=user_id,datetime=ts)",
    ),
]
DelimiterOpt = Annotated[
    str | None, typer.Option("--delimiter", help="CSV delimiter (default: detected)")
]
NamesOpt = Annotated[
    str | None,
    typer.Option(
        "--names",
        help="the column names of a file without header row, in order, comma-separated (e.g. "
        "lat,lng,occupied,datetime); implies --no-header",
    ),
]
NoHeaderOpt = Annotated[
    bool,
    typer.Option(
        "--no-header",
        help="the CSV files have no header row (columns column0, column1, ... unless --names)",
    ),
]
UidFromFilenameOpt = Annotated[
    bool,
    typer.Option(
        "--uid-from-filename",
        help="per-user files: the user id is each file's name without its extensions (e.g. "
        "Cabspotting's new_abboip.txt -> new_abboip); the files have no uid column",
    ),
]
#: help of an input argument: a local file/folder or, with --engine spark, any URL Spark reads
INPUT_HELP = "{} (CSV, CSV.gz, Parquet file or folder; with --engine spark any URL Spark reads)"
EngineOpt = Annotated[
    str,
    typer.Option("--engine", help="duckdb (default; in process) or spark (local or a cluster)"),
]
SparkMasterOpt = Annotated[
    str | None,
    typer.Option(
        "--spark-master",
        help="with --engine spark: the master URL, e.g. local[4], spark://host:7077, yarn, "
        "k8s://https://host:443 (default $PRIVMOB_SPARK_MASTER or local[*])",
    ),
]
SparkConfOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--spark-conf",
        help="with --engine spark: a Spark setting key=value (repeat the option for several), "
        "e.g. spark.executor.memory=16g; added to $PRIVMOB_SPARK_CONF",
    ),
]
MemoryLimitOpt = Annotated[
    str | None,
    typer.Option(
        "--memory-limit",
        help="memory cap of the whole process, e.g. 8GB (the engine plans within what Python "
        "and the libraries leave; too small a cap is refused before reading)",
    ),
]
SpillDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--spill-dir",
        help="parent of the run's private working directory (DuckDB spills, user buckets "
        "under --memory-limit; removed at exit); default: the system temp directory",
    ),
]


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``uid=user_id,datetime=ts`` → ``{"uid": "user_id", "datetime": "ts"}``."""
    if not text:
        return None
    from privmob.errors import ConfigError

    mapping = {}
    for part in text.split(","):
        if "=" not in part:
            raise ConfigError(
                f"cannot read the column mapping '{part}'",
                hint="use canonical=yours, e.g. --columns uid=user_id",
            )
        canon, yours = (s.strip() for s in part.split("=", 1))
        mapping[canon] = yours
    return mapping


class Steps:
    """Progress on stderr: a spinner with the current step and a line per finished step."""

    def __init__(self, quiet: bool) -> None:
        import time

        self.quiet = quiet
        self._time = time.perf_counter
        self._start = self._time()
        self._status: Any = None
        self._current: str | None = None

    def __enter__(self) -> Steps:
        # the spinner only where someone sees it: elsewhere (a log, a pipe) it would only run
        # its refresh thread, the finished steps' lines are printed all the same
        if not self.quiet and console_err.is_terminal:
            self._status = console_err.status("starting")
            self._status.__enter__()
        return self

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        self._finish_current()
        self._current = message
        self._step_start = self._time()
        if self._status is not None:
            self._status.update(escape(message))  # step text is printed literally

    def _finish_current(self) -> None:
        if self._current is not None:
            console_err.print(
                f"[green]✓[/] {escape(self._current)} "
                f"[dim]({self._time() - self._step_start:.2f}s)[/]"
            )
            self._current = None

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if self.quiet:
            return
        if exc_type is None:
            self._finish_current()
        if self._status is not None:
            self._status.__exit__(exc_type, *rest)


def print_warning(message: str) -> None:
    """A warning for the operator, one line on stderr (never part of a release)."""
    console_err.print(f"[bold yellow]warning[/]: {escape(message)}", highlight=False)


@contextmanager
def operator_warnings() -> Iterator[None]:
    """Within: a :class:`~privmob.errors.PrivmobWarning` (e.g. files of an input folder that
    are not data, skipped) is printed as one ``warning:`` line, each text once; other
    warnings as Python prints them."""
    import warnings

    from privmob.errors import PrivmobWarning

    shown: set[str] = set()
    with warnings.catch_warnings():
        python_way = warnings.showwarning

        def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if not issubclass(category, PrivmobWarning):
                python_way(message, category, *args, **kwargs)
            elif str(message) not in shown:
                shown.add(str(message))
                print_warning(str(message))

        warnings.showwarning = show
        warnings.simplefilter("always", PrivmobWarning)
        yield


def print_release_summary(release: Any, paths: list[Path], accountant: Any) -> None:
    """What was written and what it cost (printed to stdout)."""
    cost = release.cost
    console.print(f"[bold]{release.kind}[/] release written:")
    for p in paths:  # paths and names are printed literally (no console markup)
        console.print(f"  {p}", markup=False, highlight=False)
    console.print(
        f"privacy cost: {cost.describe()}"
        + (f" ({len(release.cost_parts)} ledger entries)" if len(release.cost_parts) > 1 else ""),
        markup=False,
    )
    remaining = accountant.remaining()
    console.print(
        f"ledger {accountant.ledger.path}: dataset '{accountant.dataset}' has "
        f"epsilon={remaining.epsilon:.6g} left",
        markup=False,
        highlight=False,
    )
    if not release.for_publication:
        console.print("[bold red]NOT FOR PUBLICATION[/]: made with --seed (test noise)")
    signal = getattr(release, "params", {}).get("signal") or {}
    if signal.get("warning"):  # from noisy values only (privmob.privacy.signal)
        console_err.print(f"[bold yellow]warning[/]: {signal['warning']}", highlight=False)


# raw GPS traces (--input-shape gps): stay-point thresholds (docs/inputs.md)
StayDistanceOpt = Annotated[
    float | None,
    typer.Option(
        "--stay-distance",
        help="--input-shape gps: a stay's points lie within this many metres of its first "
        "point, north-south and east-west (default 200)",
    ),
]
StayMinutesOpt = Annotated[
    float | None,
    typer.Option(
        "--stay-minutes", help="--input-shape gps: a stay lasts at least this long (default 20)"
    ),
]


#: how a release command's input is read, the same options in every command that has them
#: (name -> (annotation, default), in ``--help`` order); a command takes them with
#: :func:`with_input_options` and does not list them: :func:`privmob.cli.run.input_options`
#: reads them from ``ctx.params`` for the session
INPUT_OPTIONS: dict[str, tuple[Any, Any]] = {
    "input_shape": (o.InputShapeOpt, "auto"),
    "cells": (o.CellsOpt, None),
    "trip_rule": (o.TripRuleOpt, "events"),
    "stay_distance": (StayDistanceOpt, None),
    "stay_minutes": (StayMinutesOpt, None),
    "tile_id": (o.TileIdOpt, None),
    "columns": (ColumnsOpt, None),
    "delimiter": (DelimiterOpt, None),
    "names": (NamesOpt, None),
    "no_header": (NoHeaderOpt, False),
    "uid_from_filename": (UidFromFilenameOpt, False),
    "timezone": (o.TimezoneOpt, "UTC"),
    "input_timezone": (o.InputTimezoneOpt, None),
}
#: the input options of a release that reads located events only (one shape, no trips)
TRIP_OPTIONS = ("input_shape", "trip_rule", "stay_distance", "stay_minutes")

F = TypeVar("F", bound=Callable[..., Any])


def with_options(
    table: dict[str, tuple[Any, Any]], *, without: Sequence[str] = ()
) -> Callable[[F], F]:
    """Add the options of ``table`` (all but ``without``, and those the command declares
    itself, with its own help) to a command's function, after its own parameters. The
    command's function is called without them: they stay in ``ctx.params``."""

    def add(fn: F) -> F:
        own = inspect.signature(fn, eval_str=True)
        added = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
            for name, (annotation, default) in table.items()
            if name not in without and name not in own.parameters
        ]
        names = {p.name for p in added}

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            return fn(**{k: v for k, v in kwargs.items() if k not in names})

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values()]
        command.__signature__ = own.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        command.__annotations__ = {
            **{p.name: p.annotation for p in params},
            **{p.name: p.annotation for p in added},
            "return": own.return_annotation,
        }
        return command  # type: ignore[return-value]

    return add


def with_input_options(*, without: Sequence[str] = ()) -> Callable[[F], F]:
    """Add the input options (:data:`INPUT_OPTIONS`, all but ``without``) to a command."""
    return with_options(INPUT_OPTIONS, without=without)
