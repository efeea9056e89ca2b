"""``privmob ledger export|import``: moving a ledger between an SQLite file and PostgreSQL
(:mod:`privmob.privacy.ledger.transfer`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli.common import LedgerOpt, console


def register_team(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        file: Annotated[Path, typer.Argument(help="the export file to write (JSON, 0600)")],
        ledger: LedgerOpt = None,
    ) -> None:
        """Write the whole ledger (budgets, chained entries, programmes) to FILE."""
        from privmob.privacy.ledger import Ledger
        from privmob.privacy.ledger.transfer import export_ledger

        led = Ledger(ledger, create=False)
        n = export_ledger(led, file)
        console.print(
            f"exported ledger {led.path} (id {led.ledger_id}): {n['budgets']} budgets, "
            f"{n['releases']} entries to {file}",
            highlight=False,
        )

    @app.command("import")
    def import_(
        file: Annotated[Path, typer.Argument(help="a file written by privmob ledger export")],
        ledger: LedgerOpt = None,
    ) -> None:
        """Create a ledger from an export: a new file, or (as the custodian's database role) the
        ledger of a PostgreSQL database that has none yet; same identity, keys and entries. It
        must verify, or nothing is imported."""
        from privmob.privacy.ledger import default_ledger_location
        from privmob.privacy.ledger.transfer import import_ledger

        led = import_ledger(ledger or default_ledger_location(), file)
        console.print(
            f"imported {len(led.datasets())} budgets and {len(led.entries())} entries into "
            f"{led.path} (id {led.ledger_id}); it verifies",
            highlight=False,
        )
