"""``privmob ledger keygen|adopt|grant|revoke|rotate|checkpoint|link|approve-same-data|keys``:
keys, roles and the custodian's signed records (:mod:`privmob.privacy.ledger.custody`).

Every command acts with the opener's key: ``$PRIVMOB_KEY`` (a 0600 PEM file),
``$PRIVMOB_KEY_PEM``, or the user's own key in their private data directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli.common import LedgerOpt, console
from privmob.privacy.ledger import Ledger


def register_keys(app: typer.Typer) -> None:
    app.command("keygen")(keygen)
    app.command("adopt")(adopt)
    app.command("grant")(grant)
    app.command("revoke")(revoke)
    app.command("rotate")(rotate)
    app.command("checkpoint")(checkpoint)
    app.command("link")(link)
    app.command("approve-same-data")(approve_same_data)
    app.command("keys")(list_keys)


def keygen(
    file: Annotated[Path, typer.Argument(help="where to write the private key (mode 0600)")],
) -> None:
    """Create an Ed25519 key pair: FILE (private, 0600) and FILE.pub (public, for the custodian
    to grant). A key file is never overwritten."""
    from privmob.privacy.ledger.keys import generate, public_pem

    signer = generate(file)
    pub = file.with_name(file.name + ".pub")
    pub.write_bytes(public_pem(signer))
    console.print(f"key {signer.key_id}: private {file} (keep it secret), public {pub}")


def adopt(ledger: LedgerOpt = None) -> None:
    """Sign a ledger made before ledgers were signed, once, as its custodian (after checking it,
    e.g. with privmob ledger verify --ledger L RELEASE...): its chain must verify."""
    led = Ledger(ledger, create=False)
    n = led.adopt()
    console.print(
        f"ledger {led.path} adopted: {n} entries signed by checkpoint; custodian key "
        f"{led.signer.key_id if led.signer else '?'}"
    )


def grant(
    role: Annotated[str, typer.Argument(help="analyst, auditor or custodian")],
    name: Annotated[str, typer.Argument(help="who holds the key (recorded)")],
    public_key: Annotated[
        Path, typer.Option("--public-key", help="their public key (FILE.pub of ledger keygen)")
    ],
    db_role: Annotated[
        str | None,
        typer.Option(
            "--db-role",
            help="PostgreSQL ledger: also make this database login role a member of "
            "privmob_analyst or privmob_auditor (what the server lets it do)",
        ),
    ] = None,
    ledger: LedgerOpt = None,
) -> None:
    """Register someone's public key with a role (custodian only); on a PostgreSQL ledger,
    with --db-role, also grant their database login role the matching database role."""
    from privmob.errors import ConfigError
    from privmob.privacy.ledger.keys import load_public
    from privmob.privacy.ledger.pg import PostgresStore

    led = Ledger(ledger, create=False)
    if db_role is not None and not isinstance(led.store, PostgresStore):
        raise ConfigError(
            f"--db-role is for a PostgreSQL ledger; {led.path} is a file (its roles are the "
            "keys alone)",
            hint="leave --db-role out",
        )
    if db_role is not None and role not in ("analyst", "auditor"):
        raise ConfigError(
            "--db-role maps a login role to privmob_analyst or privmob_auditor; the custodian's "
            "database role is the one that owns the ledger's schema",
            hint="grant --db-role with analyst or auditor",
        )
    kid = led.grant(role, name, load_public(public_key))
    console.print(f"granted {role} key {kid} to {name} in {led.path}")
    if db_role is not None:
        assert isinstance(led.store, PostgresStore)
        group = led.store.grant(db_role, role)
        console.print(f"database role '{db_role}' is now a member of {group}")


def revoke(
    key_id: Annotated[str, typer.Argument(help="the key id (privmob ledger keys)")],
    ledger: LedgerOpt = None,
) -> None:
    """Stop a key (custodian only): what it signed so far stays valid; it signs nothing more."""
    led = Ledger(ledger, create=False)
    led.revoke(key_id)
    console.print(f"revoked key {key_id} in {led.path}")


def rotate(
    new_key: Annotated[
        Path,
        typer.Option("--new-key", help="the new custodian's private key file (made if missing)"),
    ],
    ledger: LedgerOpt = None,
) -> None:
    """Hand custody to a new key (signed by the current one, which is revoked); everything
    signed before stays verifiable. Use the new key from now on (PRIVMOB_KEY)."""
    from privmob.privacy.ledger.keys import generate, load_private

    led = Ledger(ledger, create=False)
    new = load_private(new_key) if new_key.exists() else generate(new_key)
    led.rotate(new)
    console.print(
        f"custodian key of {led.path} is now {new.key_id} ({new_key}); the old key is revoked"
    )


def checkpoint(ledger: LedgerOpt = None) -> None:
    """Verify the whole ledger and sign where it stands (custodian only); charges then verify
    only the entries after it."""
    led = Ledger(ledger, create=False)
    pos = led.checkpoint()
    console.print(f"checkpoint of {led.path} signed at {pos.count} entries")


def link(
    family: Annotated[str, typer.Argument(help="a dataset with a budget (or in a family)")],
    dataset: Annotated[str, typer.Argument(help="a new dataset that shares that budget")],
    ledger: LedgerOpt = None,
) -> None:
    """Charge DATASET to FAMILY's budget: one per-person budget for, e.g., monthly extracts of
    the same people under rotating pseudonyms (custodian only)."""
    led = Ledger(ledger, create=False)
    root = led.link(family, dataset)
    console.print(f"'{dataset}' is charged to the budget of '{root}' in {led.path}")


def approve_same_data(
    dataset: Annotated[str, typer.Argument(help="the dataset name to allow")],
    note: Annotated[str, typer.Option("--note", help="why (recorded)")] = "",
    ledger: LedgerOpt = None,
) -> None:
    """Allow releases under DATASET of data another dataset already released
    (--new-dataset-for-same-data), for analysts too (custodian only)."""
    led = Ledger(ledger, create=False)
    led.approve_same_data(dataset, note)
    console.print(f"approved same-data releases under '{dataset}' in {led.path}")


def list_keys(ledger: LedgerOpt = None) -> None:
    """The keys this ledger knows, their roles and holders."""
    from privmob.privacy.ledger.custody import iter_roles

    led = Ledger(ledger, create=False)
    ring = led.key_ring()
    for kid, k in iter_roles(ring):
        state = f"revoked after entry {k.revoked_at}" if k.revoked_at is not None else "active"
        root = " (root)" if kid == ring.root else ""
        console.print(f"{kid} {k.role} {k.name}{root}: {state}", highlight=False)
    if ring.root is None:
        console.print(f"{led.path} is not signed: privmob ledger adopt")
