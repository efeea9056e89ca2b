"""``privmob ledger``: set budgets and see what was spent."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from privmob.cli.common import LedgerOpt, console
from privmob.privacy.costs import Unit
from privmob.privacy.ledger import Ledger

ledger_app = typer.Typer(
    help="The privacy ledger: budgets and releases per dataset.", no_args_is_help=True
)


@ledger_app.command("init")
def init(
    dataset: Annotated[str, typer.Argument(help="dataset name")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="total epsilon budget")],
    delta: Annotated[float, typer.Option("--delta", help="total delta budget")] = 0.0,
    unit: Annotated[Unit, typer.Option("--unit", help="unit of privacy of the budget")] = Unit.USER,
    ledger: LedgerOpt = None,
) -> None:
    """Set a dataset's total privacy budget (once)."""
    led = Ledger(ledger)
    b = led.set_budget(dataset, epsilon, delta, unit)
    console.print(
        f"budget of '{b.dataset}': epsilon={b.epsilon:g}, delta={b.delta:g} per "
        f"{b.unit} in {led.path}"
    )


@ledger_app.command("show")
def show(
    dataset: Annotated[str | None, typer.Argument(help="dataset (default: all)")] = None,
    ledger: LedgerOpt = None,
) -> None:
    """List releases, their costs and what remains."""
    led = Ledger(ledger)
    budgets = [led.budget(dataset)] if dataset else led.datasets()
    if not budgets:
        console.print(f"no datasets in {led.path}")
        return
    for b in budgets:
        spent = led.spent(b.dataset)
        table = Table(
            title=f"{b.dataset}: budget epsilon={b.epsilon:g}, delta={b.delta:g} per "
            f"{b.unit}; spent epsilon={spent.epsilon:.6g}, delta={spent.delta:.3g}; "
            f"left epsilon={max(0.0, b.epsilon - spent.epsilon):.6g}"
        )
        for col in (
            "id",
            "when (UTC)",
            "kind",
            "epsilon",
            "delta",
            "as released",
            "publishable",
            "description",
        ):
            table.add_column(col)
        for e in led.entries(b.dataset):
            rel = e.release_cost
            as_released = f"eps={rel.epsilon:.6g} per {rel.unit}"
            if e.group_size:
                as_released += f" x group {e.group_size}"
            table.add_row(
                str(e.id),
                e.created_at[:19],
                e.kind,
                f"{e.cost.epsilon:.6g}",
                f"{e.cost.delta:.3g}",
                as_released,
                "yes" if e.for_publication else "NO (seeded)",
                e.description,
            )
        console.print(table)


def register(app: typer.Typer) -> None:
    from privmob.cli.audit import cost

    # the per-person cost of a programme of releases (group privacy, repeated releases,
    # thresholding delta, posterior bound), also reachable as `privmob audit cost`
    ledger_app.command("cost")(cost)
    from privmob.cli.ledger_programme import register_programme

    register_programme(ledger_app)  # privmob ledger programme record|show|allow
    app.add_typer(ledger_app, name="ledger")
