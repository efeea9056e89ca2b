"""``privmob ledger``: set budgets and see what was spent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privmob.cli import options as o
from privmob.cli.common import LedgerOpt, console, console_err
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.ledger import Ledger

ledger_app = typer.Typer(
    help="The privacy ledger: budgets and releases per dataset.", no_args_is_help=True
)


@ledger_app.command("init")
def init(
    dataset: Annotated[
        str | None, typer.Argument(help="dataset name (none: only create the ledger)")
    ] = None,
    epsilon: Annotated[float | None, o.epsilon("total epsilon budget")] = None,
    delta: Annotated[float, typer.Option("--delta", help="total delta budget")] = 0.0,
    unit: Annotated[PrivacyUnit, o.unit("unit of privacy of the budget")] = PrivacyUnit.USER,
    ledger: LedgerOpt = None,
    make_key: Annotated[
        bool,
        typer.Option(
            "--make-key",
            help="when you have no key, make your own (0600, in your private data directory) "
            "to sign a new ledger with as its custodian",
        ),
    ] = False,
) -> None:
    """Create the ledger (its custodian: your key, $PRIVMOB_KEY, your own, or with --make-key
    your own made now; on PostgreSQL also its schema, functions and roles, as the database role
    that will own them) and with DATASET --epsilon E set a dataset's total privacy budget (once;
    custodian only)."""
    from privmob.errors import ConfigError

    if not make_key:
        _refuse_new_ledger_without_key(ledger)
    led = Ledger(ledger)
    ring = led.key_ring()
    root = f"custodian key {ring.root}" if ring.root else "not signed: privmob ledger adopt"
    console.print(f"ledger {led.path} (id {led.ledger_id}, {root})", highlight=False)
    if led.made_key is not None:  # said, never a silent side effect
        console.print(
            f"made your private key {led.made_key} (mode 0600): it is this ledger's custodian "
            "key; keep it secret and keep a copy offline (see docs/operations.md, Loss)",
            highlight=False,
            soft_wrap=True,
        )
    if dataset is None:
        return
    if epsilon is None:
        raise ConfigError(
            "a budget needs --epsilon", hint=f"privmob ledger init {dataset} --epsilon 10"
        )
    b = led.set_budget(dataset, epsilon, delta, unit)
    console.print(
        f"budget of '{b.dataset}': epsilon={b.epsilon:g}, delta={b.delta:g} per "
        f"{b.unit} in {led.path}"
    )


def _refuse_new_ledger_without_key(ledger: str | None) -> None:
    """A new ledger is signed by its custodian's key: without one (and without --make-key),
    refuse before anything is written, a key file included."""
    from privmob.errors import ConfigError
    from privmob.privacy.ledger import default_ledger_location
    from privmob.privacy.ledger.keys import default_key_path, resolve
    from privmob.privacy.ledger.store import open_store

    location = ledger if ledger is not None else default_ledger_location()
    if resolve(None) is not None or open_store(location).has_table("ledger_meta"):
        return
    raise ConfigError(
        f"no key to sign the new ledger {location} with; nothing was written",
        hint="a new ledger's custodian signs it: privmob ledger keygen FILE and "
        "PRIVMOB_KEY=FILE, or let privmob make your own key "
        f"({default_key_path()}): privmob ledger init --make-key",
    )


@ledger_app.command("show")
def show(
    dataset: Annotated[str | None, typer.Argument(help="dataset (default: all)")] = None,
    ledger: LedgerOpt = None,
) -> None:
    """List releases, their costs and what remains."""
    led = Ledger(ledger, create=False)
    budgets = [led.budget(dataset)] if dataset else led.datasets()
    if not budgets:
        console.print(f"no datasets in {led.path}")
        return
    console.print(f"ledger {led.path} (id {led.ledger_id})")
    for b in budgets:
        acc = led.accounts(b.dataset)
        console.print(
            f"[bold]{b.dataset}[/]: budget epsilon={b.epsilon:g}, delta={b.delta:g} per "
            f"{b.unit}\n  spent by {acc.describe()}\n  left epsilon={acc.epsilon_left:.6g} "
            f"(by the {acc.tighter} accounting; a release is refused only if neither fits)",
            highlight=False,
        )
        table = Table()
        for col in (
            "id",
            "when (UTC)",
            "kind",
            "epsilon",
            "delta",
            "rho",
            "as released",
            "publishable",
            "input",
            "by",
            "description",
        ):
            table.add_column(col)
        members = led.family_members(b.dataset)
        if len(members) > 1:
            console.print(f"  one budget for the family: {', '.join(members)}", highlight=False)
        entries = sorted((e for m in members for e in led.entries(m)), key=lambda e: e.id)
        for e in entries:
            rel = e.release_cost
            as_released = f"eps={rel.epsilon:.6g} per {rel.unit}"
            if e.group_size:
                as_released += f" x group {e.group_size}"
            p = e.provenance
            fp = p.get("input_fingerprint")
            source = fp[:12] if fp else "-"  # no row count on screen: it is a count of people
            if p.get("new_dataset_for_same_data"):
                source += " new dataset for same data"
            table.add_row(
                str(e.id),
                e.created_at[:19],
                e.kind,
                f"{e.cost.epsilon:.6g}",
                f"{e.cost.delta:.3g}",
                "-" if e.cost.rho is None else f"{e.cost.rho:.6g}",
                as_released,
                "yes" if e.for_publication else "NO (seeded)",
                source,
                f"{p.get('os_user') or '-'}@{p.get('host') or '-'}",
                e.description,
            )
        console.print(table)
    show_staged(led)


def show_staged(led: Ledger) -> None:
    """Releases charged but not yet in place (a crash between charge and rename), and uncharged
    staging left by killed runs."""
    from privmob.privacy.staging import CHARGED, StagingTable, has_staging_table
    from privmob.releases.publish import seal_problem

    path = led.path
    if not has_staging_table(led.store):
        return
    for s in StagingTable(led.store).pending():
        if s.state == CHARGED and seal_problem(s.staging) is None:
            console.print(
                f"[bold yellow]staged release[/] #{s.id} of '{s.dataset}': charged {s.spent}, "
                f"not yet in {s.target}; it is complete in {s.staging}. Finish it with: "
                f"privmob ledger recover --ledger {path} (or --discard to remove it; the "
                "epsilon stays spent)",
                highlight=False,
                soft_wrap=True,
            )
        elif s.state == CHARGED:
            console.print(
                f"[bold yellow]staged release[/] #{s.id} of '{s.dataset}': charged {s.spent}, "
                f"never written whole ({seal_problem(s.staging)}); privmob ledger recover "
                f"--ledger {path} removes {s.staging} (the epsilon stays spent)",
                highlight=False,
                soft_wrap=True,
            )
        else:
            console.print(
                f"uncharged staging of a killed run: {s.staging} (removed by privmob ledger "
                "recover or the next release)",
                highlight=False,
                soft_wrap=True,
            )


@ledger_app.command("recover")
def recover(
    discard: Annotated[
        bool,
        typer.Option(
            "--discard",
            help="remove staged releases instead of moving them into place (the epsilon they "
            "cost stays spent)",
        ),
    ] = False,
    ledger: LedgerOpt = None,
) -> None:
    """Finish releases a crash left staged after their charge (move them into place), or
    discard them; remove uncharged staging left by killed runs."""
    from privmob.releases.recover import recover_staged

    led = Ledger(ledger, create=False)  # nothing to recover: no ledger, no key made
    lines = recover_staged(led.store, discard=discard)
    for line in lines or ["nothing staged: every charged release is in place"]:
        console.print(line, highlight=False, soft_wrap=True)


@ledger_app.command("verify")
def verify(
    releases: Annotated[
        list[Path] | None,
        typer.Argument(
            help="release folders (or their metadata.json) that must have been paid from "
            "this ledger: detects a deleted or replaced ledger file, or deleted latest entries"
        ),
    ] = None,
    more: Annotated[
        list[Path] | None,
        typer.Option("--releases", help="a release folder (repeatable; as the arguments)"),
    ] = None,
    custodian_key: Annotated[
        Path | None,
        typer.Option(
            "--custodian-key",
            help="the custodian's public key you hold: the ledger's root key must be it",
        ),
    ] = None,
    ledger: LedgerOpt = None,
) -> None:
    """Check everything with public keys only: the hash chain and each entry's signature,
    budgets, keys, checkpoints, family links and approvals; with release folders, that their
    entries and the ledger head they carry are in this ledger. Exit status 0 when it verifies,
    3 otherwise, 2 when there is no ledger at the path (none is created)."""
    import json

    from privmob.errors import BudgetError
    from privmob.privacy.ledger.keys import key_id, load_public

    try:
        led = Ledger(ledger, create=False)
        problems = led.verify()
        if custodian_key is not None:
            pinned = key_id(bytes.fromhex(load_public(custodian_key)))
            if led.key_ring().root != pinned:
                problems.append(
                    f"its root (custodian) key is not {pinned} ({custodian_key}): the ledger was "
                    "replaced or re-signed"
                )
        for release in [*(releases or []), *(more or [])]:
            meta = release / "metadata.json" if release.is_dir() else release
            try:
                data = json.loads(meta.read_text())
            except (OSError, ValueError) as exc:
                problems.append(f"{release}: cannot read its metadata.json ({exc})")
                continue
            problems += led.verify_release(data, str(release))
    except BudgetError as exc:  # a dropped table: the ledger does not even open
        console_err.print(f"[bold red]ledger does not verify:[/] {exc}")
        raise typer.Exit(3) from None
    if problems:
        console_err.print(f"[bold red]ledger {led.path} does not verify[/] ({len(problems)}):")
        for line in problems:
            console_err.print(f"  {line}")
        raise typer.Exit(3)
    n = len(led.entries())
    console.print(
        f"ledger {led.path} (id {led.ledger_id}) verifies: {n} entries chained and signed"
    )


def register(app: typer.Typer) -> None:
    from privmob.cli.audit import cost

    # the per-person cost of a programme of releases (group privacy, repeated releases,
    # thresholding delta, posterior bound), also reachable as `privmob audit cost`
    ledger_app.command("cost")(cost)
    from privmob.cli.ledger_keys import register_keys
    from privmob.cli.ledger_programme import register_programme

    register_keys(ledger_app)  # keys, roles and the custodian's signed records

    register_programme(ledger_app)  # privmob ledger programme record|show|allow
    from privmob.cli.ledger_team import register_team

    register_team(ledger_app)  # privmob ledger export|import
    app.add_typer(ledger_app, name="ledger")
