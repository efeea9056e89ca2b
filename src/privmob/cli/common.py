"""Options and helpers shared by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()
console_err = Console(stderr=True)

LedgerOpt = Annotated[
    Path | None,
    typer.Option(
        "--ledger",
        help="privacy ledger (SQLite); default $PRIVMOB_LEDGER or ./privmob-ledger.sqlite",
    ),
]
DatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="name of the dataset whose budget is charged (default: the input file's name)",
    ),
]
BudgetOpt = Annotated[
    float | None,
    typer.Option("--budget", help="set the dataset's total epsilon budget if it has none yet"),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", help="TESTS ONLY: fixed noise seed; the output is stamped 'not for publication'"
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="replace existing output files")]
TimezoneOpt = Annotated[
    str,
    typer.Option("--timezone", help="time zone of naive timestamps and of day/hour binning"),
]


def dataset_name(explicit: str | None, source: str | Path) -> str:
    """The dataset name: explicit, or the input file's name without extensions."""
    if explicit:
        return explicit
    name = Path(str(source)).name
    for suffix in (".gz", ".parquet", ".csv", ".tsv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "dataset"
