"""``privmob ledger programme``: record a planned programme, show progress, allow exceptions.

See privmob.privacy.programme_ledger; reads ledger rows only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privmob.cli.common import LedgerOpt, console

DatasetOpt = Annotated[str, typer.Option("--dataset", help="dataset name in the ledger")]


def register_programme(ledger_app: typer.Typer) -> None:
    prog_app = typer.Typer(
        help="A planned programme of releases: record it, see progress, allow an exception.",
        no_args_is_help=True,
    )
    ledger_app.add_typer(prog_app, name="programme")

    @prog_app.command("record")
    def record(
        schedule: Annotated[Path, typer.Argument(help="schedule file (see plan programme)")],
        dataset: DatasetOpt,
        ledger: LedgerOpt = None,
    ) -> None:
        """Plan the schedule and record it; later releases outside it are refused."""
        from privmob.evaluate.programme import load_programme, plan_programme
        from privmob.privacy import programme_ledger as pl
        from privmob.privacy.ledger import Ledger

        led = Ledger(ledger, create=False)
        plan = plan_programme(load_programme(schedule))
        pl.record(led, dataset, plan)
        console.print(
            f"programme recorded for '{dataset}' in {led.path}: {len(plan.entries)} kind(s) of "
            "release; others are refused unless allowed",
            highlight=False,
        )

    @prog_app.command("show")
    def show(dataset: DatasetOpt, ledger: LedgerOpt = None) -> None:
        """Planned and charged releases per entry of the recorded programme."""
        from privmob.privacy import programme_ledger as pl
        from privmob.privacy.ledger import Ledger

        t = Table(title=f"programme of '{dataset}'")
        for col in ("release", "planned", "released", "eps each (planned)", "eps spent"):
            t.add_column(col)
        for p in pl.progress(Ledger(ledger, create=False), dataset):
            t.add_row(
                p.kind,
                str(p.planned),
                str(p.released),
                f"{p.epsilon_each:.6g}",
                f"{p.epsilon_spent:.6g}",
            )
        console.print(t)

    @prog_app.command("allow")
    def allow(
        dataset: DatasetOpt,
        kind: Annotated[str, typer.Option("--kind", help="release kind, e.g. od or density")],
        reason: Annotated[str, typer.Option("--reason", help="why it is outside the plan")],
        ledger: LedgerOpt = None,
    ) -> None:
        """Let the next release of this kind through once, outside the programme."""
        from privmob.privacy import programme_ledger as pl
        from privmob.privacy.ledger import Ledger

        pl.allow(Ledger(ledger, create=False), dataset, kind, reason)
        console.print(f"the next {kind} release of '{dataset}' may be outside the programme")
