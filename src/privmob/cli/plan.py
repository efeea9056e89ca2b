"""``privmob plan``: choose epsilon from an error target, or see what an epsilon buys.

Reads no data and spends no budget: every number is a function of public parameters (Kohli,
Aiken and Blumenstock's Theorems 2-7 and heuristics; see privmob.evaluate.accuracy).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperGroup

from privmob.cli import options as o
from privmob.cli.common import JsonOpt, console
from privmob.errors import ConfigError
from privmob.evaluate import accuracy as acc
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.signal import expected_signal
from privmob.releases.kinds import Kind, each_kind

PLAN_KINDS = [NoiseKind.DISCRETE_LAPLACE, NoiseKind.LAPLACE_ROUNDED]


def plan_report(
    *,
    alpha: int | None,
    beta: float,
    T: int,
    kinds: list[NoiseKind],
    epsilon: float | None,
    count: int | None,
    tau: int | None,
    standard: float | None,
) -> dict[str, Any]:
    """All planning figures as a JSON-ready dict (one entry per noise kind)."""
    if alpha is None and epsilon is None:
        raise ConfigError(
            "give an error target (--alpha) or an epsilon (--epsilon)",
            hint="e.g. privmob plan --alpha 10 --beta 0.05, or privmob plan --epsilon 0.5",
        )
    if (count is None) != (tau is None):
        raise ConfigError("suppression probabilities need both --count and --tau")
    out: dict[str, Any] = {"beta": beta, "T": T, "kinds": {}}
    if alpha is not None:
        out["alpha"] = alpha
        out["heuristic_epsilon"] = acc.heuristic_epsilon(alpha, T)
    if epsilon is not None:
        out["epsilon"] = epsilon
        if standard is not None:
            lo, s, hi = acc.heuristic_tau(standard, epsilon, T)
            out["tau_heuristics"] = {"minus": lo, "same": s, "plus": hi}
    for kind in kinds:
        row: dict[str, Any] = {}
        if alpha is not None:
            p = acc.plan(alpha, beta, T, kind)
            row["epsilon_cell"] = p.epsilon_cell
            row["epsilon_difference"] = p.epsilon_difference
            if p.epsilon_thm7 is not None:
                row["epsilon_difference_thm7_seed"] = p.epsilon_thm7
        if epsilon is not None:
            row["noise_scale"] = T / epsilon
            # before any release: the true count a cell needs for a 10% / 50% relative error
            sig = expected_signal(Noise(NoiseKind(kind), T / epsilon), 1 - beta)
            row["count_for_10pct_error"] = sig.count_for_10pct
            row["count_for_50pct_error"] = sig.count_for_50pct
            row["error_bound_cell"] = acc.error_bound(epsilon, beta, T, kind)
            row["error_bound_difference"] = acc.difference_error_bound(epsilon, beta, T, kind)
            if count is not None and tau is not None:
                pr = acc.p_released(count, tau, epsilon, T, kind)
                row["p_released"] = pr
                row["p_suppressed"] = 1.0 - pr
                row["p_same_decision"] = pr if count >= tau else 1.0 - pr
        out["kinds"][str(kind)] = row
    if count is not None:
        out["count"], out["tau"] = count, tau
    return out


def _table(report: dict[str, Any]) -> Table:
    kinds = list(report["kinds"])
    b, T = report["beta"], report["T"]
    t = Table(title=f"privacy planning (T = {T}, confidence {100 * (1 - b):g}%)")
    t.add_column("quantity")
    for k in kinds:
        t.add_column(k, justify="right")

    def row(label: str, key: str, fmt: str) -> None:
        vals = [report["kinds"][k].get(key) for k in kinds]
        if any(v is not None for v in vals):
            t.add_row(label, *[("-" if v is None else format(v, fmt)) for v in vals])

    if "alpha" in report:
        a = report["alpha"]
        row(f"smallest eps: |cell error| <= {a} (Thm 4/6)", "epsilon_cell", ".6f")
        row(f"smallest eps: |change error| <= {a} (exact)", "epsilon_difference", ".6f")
        row(
            "  Kohli et al.'s Thm 7 (Lambert W, approximate)", "epsilon_difference_thm7_seed", ".6f"
        )
        t.add_row(
            f"heuristic eps >= sqrt(2) T / {a}",
            *[f"{report['heuristic_epsilon']:.6f}"] * len(kinds),
        )
    if "epsilon" in report:
        row(f"noise scale b = T / {report['epsilon']:g}", "noise_scale", ".4g")
        row("error bound of a cell", "error_bound_cell", "d")
        row("error bound of a change between periods", "error_bound_difference", "d")
        row("true count of a cell for <= 10% relative error", "count_for_10pct_error", "d")
        row("true count of a cell for <= 50% relative error", "count_for_50pct_error", "d")
    if "count" in report:
        c, tau = report["count"], report["tau"]
        row(f"P(count {c} released at tau {tau})", "p_released", ".6f")
        row(f"P(count {c} suppressed)", "p_suppressed", ".6f")
        row("P(same suppression as without noise)", "p_same_decision", ".6f")
    return t


#: ``privmob plan <release>``: the release commands that have a plan, and their modules (from
#: the registry of kinds)
PLANNED: dict[str, str] = {}


def _planned(kind: Kind) -> None:
    if kind.plannable:
        PLANNED[kind.name] = kind.cli_module


each_kind(_planned)  # and each kind registered later (privmob.releases.kinds.register)


class PlanGroup(TyperGroup):
    """``privmob plan``: its own commands, and ``plan <release>`` made from the release command
    itself (the same options minus the input; see :func:`privmob.cli.run.plan_command`),
    imported when asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return super().list_commands(ctx) + [n for n in PLANNED if n not in self.commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in PLANNED and cmd_name not in self.commands:
            import importlib

            from privmob.cli.run import plan_command

            sub = typer.Typer()
            importlib.import_module(PLANNED[cmd_name]).register(sub)
            release = typer.main.get_group(sub).commands[cmd_name]
            self.commands[cmd_name] = plan_command(release, cmd_name)
        return super().get_command(ctx, cmd_name)


def register(app: typer.Typer) -> None:
    from privmob.cli.plan_programme import register_programme

    plan_app = typer.Typer(invoke_without_command=True, no_args_is_help=False, cls=PlanGroup)
    register_programme(plan_app)  # privmob plan programme SCHEDULE
    app.add_typer(plan_app, name="plan")

    @plan_app.callback()
    def plan(
        ctx: typer.Context,
        alpha: Annotated[
            int | None, typer.Option("--alpha", help="tolerated error of a count (integer)")
        ] = None,
        beta: Annotated[
            float, typer.Option("--beta", help="allowed probability of a larger error")
        ] = 0.05,
        max_trips: Annotated[int, o.max_trips("trips per user (1 = trip level)")] = 1,
        noise: Annotated[
            NoiseKind | None,
            typer.Option("--noise", help="noise kind (default: both Laplace kinds)"),
        ] = None,
        epsilon: Annotated[float | None, o.epsilon("show what this epsilon buys")] = None,
        count: Annotated[
            int | None, typer.Option("--count", help="a true count M (suppression odds)")
        ] = None,
        tau: Annotated[int | None, typer.Option("--tau", help="suppression threshold")] = None,
        standard: Annotated[
            float | None,
            typer.Option("--standard", help="an existing suppression standard s (tau heuristics)"),
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Choose epsilon for an error target, or see what an epsilon gives (reads no data).

        Kohli, Aiken and Blumenstock's Theorems 2-7 and heuristics for both Laplace noise kinds;
        spends no budget.
        `privmob plan programme SCHEDULE` plans a whole programme of releases.
        """
        if ctx.invoked_subcommand is not None:
            return
        kinds = [noise] if noise is not None else PLAN_KINDS
        report = plan_report(
            alpha=alpha,
            beta=beta,
            T=max_trips,
            kinds=kinds,
            epsilon=epsilon,
            count=count,
            tau=tau,
            standard=standard,
        )
        if as_json:
            typer.echo(json.dumps(report, indent=2))
            return
        console.print(_table(report))
        if "tau_heuristics" in report:
            h = report["tau_heuristics"]
            console.print(
                f"tau heuristics for standard {h['same']:g}: s - sqrt(2)T/eps = {h['minus']:.2f}"
                f" (fewer suppressed), s = {h['same']:g}, s + sqrt(2)T/eps = {h['plus']:.2f}"
                " (fewer small counts shown)"
            )
