"""``privmob ledger grant|export|import``: a team ledger's roles, and moving a ledger between
an SQLite file and PostgreSQL (:mod:`privmob.privacy.ledger_transfer`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli.common import LedgerOpt, console


def register_team(app: typer.Typer) -> None:
    @app.command("grant")
    def grant(
        role: Annotated[str, typer.Argument(help="a login role of the ledger's database")],
        as_: Annotated[
            str, typer.Option("--as", help="analyst (runs releases) or auditor (reads)")
        ],
        ledger: LedgerOpt = None,
    ) -> None:
        """Make a database login role an analyst or an auditor of a PostgreSQL ledger (run by
        its custodian)."""
        from privmob.errors import ConfigError
        from privmob.privacy.ledger import Ledger
        from privmob.privacy.ledger_pg import PostgresStore

        led = Ledger(ledger, create=False)
        if not isinstance(led.store, PostgresStore):
            raise ConfigError(
                f"{led.path} is an SQLite ledger: its roles are those of the file's readers and "
                "writers, not database roles",
                hint="grant roles on a team ledger: --ledger postgresql://custodian@host/db",
            )
        group = led.store.grant(role, as_)
        console.print(f"'{role}' is now {as_} of the ledger {led.path} (member of {group})")

    @app.command("export")
    def export(
        file: Annotated[Path, typer.Argument(help="the export file to write (JSON, 0600)")],
        ledger: LedgerOpt = None,
    ) -> None:
        """Write the whole ledger (budgets, chained entries, programmes) to FILE."""
        from privmob.privacy.ledger import Ledger
        from privmob.privacy.ledger_transfer import export_ledger

        led = Ledger(ledger, create=False)
        n = export_ledger(led, file)
        console.print(
            f"exported ledger {led.path} (id {led.ledger_id}): {n['budgets']} budgets, "
            f"{n['entries']} entries to {file}",
            highlight=False,
        )

    @app.command("import")
    def import_(
        file: Annotated[Path, typer.Argument(help="a file written by privmob ledger export")],
        ledger: LedgerOpt = None,
    ) -> None:
        """Write an exported ledger into an empty ledger (a new file, or a PostgreSQL ledger
        just created with privmob ledger init), under the same identity; it must verify."""
        from privmob.privacy.ledger import Ledger
        from privmob.privacy.ledger_transfer import import_ledger

        led = Ledger(ledger)
        n = import_ledger(led, file)
        console.print(
            f"imported {n['budgets']} budgets and {n['entries']} entries into {led.path} "
            f"(id {led.ledger_id}); it verifies",
            highlight=False,
        )
