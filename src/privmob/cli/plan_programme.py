"""``privmob plan programme``: plan a programme of releases under one per-person budget.

Reads no data and spends no budget (privmob.evaluate.programme).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privmob.cli.common import JsonOpt, console


def register_programme(plan_app: typer.Typer) -> None:
    @plan_app.command("programme")
    def programme(
        schedule: Annotated[
            Path, typer.Argument(help="schedule file (.json, or .yaml with PyYAML)")
        ],
        as_json: JsonOpt = False,
    ) -> None:
        """Per-release epsilon, bound and tau meeting each entry's accuracy target, the total
        under pure, approximate and zCDP composition, and what would make it fit."""
        from privmob.evaluate.programme import load_programme, plan_programme

        plan = plan_programme(load_programme(schedule))
        if as_json:
            typer.echo(json.dumps(plan.to_dict(), indent=2))
            return
        p = plan.programme
        t = Table(title=f"programme over {p.horizon}: budget epsilon {p.epsilon:g} per person")
        for col in ("release", "cells", "unit", "T", "alpha/beta", "eps each", "margin", "tau"):
            t.add_column(col)
        t.add_column("eps/person", justify="right")
        for e in plan.entries:
            d = e.entry
            t.add_row(
                d.label,
                f"{d.cells:,}",
                d.unit.value,
                str(d.max_trips),
                f"{d.alpha}/{d.beta:g}" if d.alpha is not None else "-",
                f"{e.epsilon:.4g}",
                f"±{e.margin:,}",
                str(e.tau),
                f"{e.per_person:.4g}",
            )
        console.print(t)
        console.print(
            f"total per person: pure {plan.pure:.4g}; approximate (delta {p.delta:g}) "
            f"{plan.approximate:.4g}; zCDP with discrete Gaussian noise {plan.zcdp:.4g} "
            f"(rho {plan.zcdp_rho:.4g}); naive per-trip accounting (as Bassolas et al.'s) "
            f"{plan.naive_per_trip:.4g}",
            highlight=False,
        )
        console.print(
            "tau: the threshold at which an empty cell is shown with probability <= beta "
            "(releases are unclamped by default; pass it as --tau to suppress)",
            highlight=False,
        )
        if plan.feasible:
            console.print("[green]the budget meets every target[/]")
            return
        for problem in plan.problems:
            console.print(f"[bold red]cannot meet the targets[/]: {problem}", highlight=False)
        for e in plan.entries:
            console.print(f"[bold]{e.entry.label}[/]: what would work", highlight=False)
            for s in e.suggestions:
                console.print(f"  - {s}", highlight=False)
        raise typer.Exit(1)
